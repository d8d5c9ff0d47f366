"""The arithmetic a network trains and predicts in: float32, or bfloat16 autocast where the
CPU multiplies bfloat16 in hardware.

CPUs of one machine kind differ, so the hardware is read, never assumed:
:func:`cpu_description` names the CPU and the instruction sets that matter here (AVX2,
AVX-512, AVX-512 BF16, AMX), from ``/proc/cpuinfo`` on Linux; elsewhere they are unknown.
"""

from __future__ import annotations

import platform
import warnings
from pathlib import Path

import torch

__all__ = [
    "PRECISIONS",
    "bfloat16_autocast",
    "bfloat16_hardware",
    "cpu_description",
    "warn_if_emulated",
]

#: The values of ``NeSCalClassifier(precision=...)``.
PRECISIONS = ("float32", "bfloat16")

#: ``/proc/cpuinfo`` flags that matter to a network's matrix products, in report order.
_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, frozenset[str]]:
    """The first processor's model name and flags (``("", frozenset())`` if unreadable)."""
    try:
        text = path.read_text()
    except OSError:
        return "", frozenset()
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor only: the others repeat it
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields.get("model name", ""), frozenset(fields.get("flags", "").split())


def bfloat16_hardware(flags: frozenset[str] | None = None) -> list[str]:
    """The CPU's instruction sets that multiply bfloat16 in hardware: ``"amx_bf16"``
    (Intel AMX) and ``"avx512_bf16"`` among ``flags`` (by default ``/proc/cpuinfo``'s); an
    empty list where there are none or they cannot be read.

    Examples
    --------
    >>> bfloat16_hardware(frozenset({"avx2", "avx512f"}))
    []
    >>> bfloat16_hardware(frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
    ['avx512_bf16', 'amx_bf16']
    """
    if flags is None:
        flags = _cpuinfo()[1]
    return [flag for flag in _FLAGS[2:] if flag in flags]


def cpu_description() -> str:
    """The CPU's model name and which of AVX2, AVX-512, AVX-512 BF16 and AMX-BF16 it has,
    with torch's own reading of its vector unit: one line for a benchmark's header."""
    name, flags = _cpuinfo()
    name = name or platform.processor() or platform.machine() or "unknown CPU"
    present = [flag for flag in _FLAGS if flag in flags] if flags else ["flags unknown"]
    return f"{name} ({', '.join(present) or 'none of ' + ' '.join(_FLAGS)}; torch: " + (
        f"{torch.backends.cpu.get_cpu_capability()})"
    )


def bfloat16_autocast(device: str | torch.device = "cpu"):
    """torch's bfloat16 autocast on ``device``'s type: a forward pass of
    ``precision="bfloat16"``."""
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def warn_if_emulated(precision: str, device: torch.device) -> None:
    """Warn when ``precision="bfloat16"`` trains on a CPU without bfloat16 hardware."""
    if precision == "bfloat16" and device.type == "cpu" and not bfloat16_hardware():
        warnings.warn(
            f"precision='bfloat16': this CPU ({cpu_description()}) has neither AMX-BF16 "
            "nor AVX-512 BF16, so torch emulates bfloat16 and the fit may be slower than "
            "with precision='float32'.",
            UserWarning,
            stacklevel=3,
        )
