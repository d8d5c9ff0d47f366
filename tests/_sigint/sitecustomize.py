"""Test hook: a Ctrl-C to the process group at a chosen point of the k-th network fit.

Python imports this module at start-up in every process whose ``PYTHONPATH`` holds
``tests/_sigint`` (the runner and its loky workers alike), and it does nothing unless
``NESCAL_TEST_SIGINT`` is set to ``"<NeSCalNet method>:<k>:<folder>"``. Fits are numbered
across processes as they reach skorch's loop (``get_split_datasets``, once a fit), by
files created in ``<folder>`` (``O_EXCL``: one process wins each number). The first call
of the method in fit k writes ``<folder>/ready``, waits for the test to write
``<folder>/go``, and sends SIGINT to its process group, as Ctrl-C in a terminal does. So
the interrupt lands at the same point of the same fit on any machine, however fast.
"""

import os

_SPEC = os.environ.get("NESCAL_TEST_SIGINT")

if _SPEC:
    import signal
    import time

    from nescal_sklearn.estimator._net import NeSCalNet

    _NAME, _FIT, _FOLDER = _SPEC.split(":", 2)

    def _number() -> int:
        number = 1
        while True:
            try:
                os.close(os.open(os.path.join(_FOLDER, f"fit-{number}"), os.O_CREAT | os.O_EXCL))
                return number
            except FileExistsError:
                number += 1

    def _ctrl_c() -> None:
        open(os.path.join(_FOLDER, "ready"), "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(_FOLDER, "go")):
            if time.monotonic() > deadline:
                raise RuntimeError("the test never said go")
            time.sleep(0.01)
        os.killpg(os.getpgrp(), signal.SIGINT)
        time.sleep(5)  # the signal arrives here, inside the fit

    _split = NeSCalNet.get_split_datasets

    def _numbered(self, *args, **kwargs):
        self.test_fit_number = _number()
        if _NAME == "get_split_datasets" and self.test_fit_number == int(_FIT):
            _ctrl_c()
        return _split(self, *args, **kwargs)

    NeSCalNet.get_split_datasets = _numbered
    if _NAME != "get_split_datasets":
        _original = getattr(NeSCalNet, _NAME)

        def _hooked(self, *args, **kwargs):
            if getattr(self, "test_fit_number", None) == int(_FIT):
                self.test_fit_number = None  # the first call only
                _ctrl_c()
            return _original(self, *args, **kwargs)

        setattr(NeSCalNet, _NAME, _hooked)
