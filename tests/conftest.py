"""Settings the test session needs before torch loads.

``MKL_CBWR=AUTO,STRICT`` turns on Intel MKL's strict conditional numerical
reproducibility: torch's matrix products then sum in an order that does not depend on
the number of threads, so fits at different ``n_threads`` are bit-identical, which is
what ``docs/nescal.md`` ("Threads") promises under this setting. MKL reads the variable
when torch loads it, so it is set here, before any test module imports torch; a value
already in the environment is kept. The fits without it are checked too, in a
subprocess (``tests/test_periodic_determinism.py``).
"""

from __future__ import annotations

import os
import sys

if "MKL_CBWR" not in os.environ:
    if "torch" in sys.modules:
        raise RuntimeError(
            "torch was imported before tests/conftest.py could set MKL_CBWR=AUTO,STRICT, "
            "so the tests would run without MKL's strict reproducibility. Run them with "
            "`python -m pytest`, or set MKL_CBWR in the environment before Python starts."
        )
    os.environ["MKL_CBWR"] = "AUTO,STRICT"
