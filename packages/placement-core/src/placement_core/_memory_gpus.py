"""How much memory a GPU has: its snapshot's figure, else a table of common models.

A node snapshot (``memory_bytes`` from NVML) and an ``inventory:`` entry's
``accelerators.memory_bytes`` give the exact figure; a config that declares neither but
names the model (``model: H100``, or NVML's ``NVIDIA H100 80GB HBM3``) gets the
vendor's nominal capacity from :data:`GPU_MEMORY`.
"""

from __future__ import annotations

import re

from ._inventory import Accelerator

__all__ = ["GPU_MEMORY", "gpu_capacity"]

_GiB = 1 << 30
_MiB = 1 << 20

#: ``(words every match contains, bytes)``, first match wins: more specific names first
#: (``gb200`` before ``b200``, ``h200`` before ``h20``). Figures are the total NVML
#: reports on the 80 GB parts (81,559 MiB on H100 and H800), else the vendor's nominal size.
GPU_MEMORY: tuple[tuple[tuple[str, ...], int], ...] = (
    (("gb200",), 186 * _GiB),
    (("gb300",), 279 * _GiB),
    (("b300",), 279 * _GiB),
    (("b200",), 180 * _GiB),
    (("h200",), 143_771 * _MiB),
    (("h100", "nvl"), 95_830 * _MiB),
    (("h100",), 81_559 * _MiB),
    (("h800",), 81_559 * _MiB),
    (("h20",), 97_871 * _MiB),
    (("a100", "40g"), 40_960 * _MiB),
    (("a100",), 81_920 * _MiB),
    (("a800", "40g"), 40_960 * _MiB),
    (("a800",), 81_920 * _MiB),
    (("l40",), 46_068 * _MiB),
    (("l20",), 46_068 * _MiB),
    (("4090",), 24_564 * _MiB),
    (("a10g",), 23_028 * _MiB),
    (("l4",), 23_034 * _MiB),
    (("mi300x",), 192 * _GiB),
    (("mi325x",), 256 * _GiB),
    (("mi300a",), 128 * _GiB),
    (("910b",), 64 * _GiB),
    (("910c",), 128 * _GiB),
    (("gaudi3",), 128 * _GiB),
    (("gaudi2",), 96 * _GiB),
)


def _words(model: str) -> str:
    return re.sub(r"[^a-z0-9]", "", model.lower())


def gpu_capacity(accelerator: Accelerator) -> int | None:
    """The accelerator's memory in bytes: its own figure, else its model's, else None.

    >>> gpu_capacity(Accelerator(index=0, model="NVIDIA H100 80GB HBM3")) == 81_559 << 20
    True
    """
    if accelerator.memory_bytes is not None:
        return accelerator.memory_bytes
    if not accelerator.model:
        return None
    words = _words(accelerator.model)
    for needed, size in GPU_MEMORY:
        if all(word in words for word in needed):
            return size
    return None
