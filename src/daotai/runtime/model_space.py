"""Disk space a model download or conversion needs, checked before anything is written.

``pull`` and ``update`` need the bytes still to download plus a margin (the download's own
count is in :mod:`daotai.runtime.model_downloads`), ``models convert`` the folder it will
write; a shortfall is refused with how much is missing. Separate from the downloads because a
conversion is no download and needs the same rule.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterable

from daotai.errors import BackendError
from daotai.runtime.model_checks import read_safetensors_header

# Free space wanted beyond a download or a conversion: 5 % of it, at least 1 GiB. Filesystems
# slow down and other programs fail near 100 % full, and the estimate of a conversion is not
# exact; a hub download writes each file once (a blob renamed into place, no second copy).
SPACE_MARGIN_FRACTION = 0.05
SPACE_MARGIN_MIN_BYTES = 1 << 30


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem that holds ``path`` (or would: its nearest existing folder)."""
    probe = Path(path).expanduser().absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def space_margin(needed: int) -> int:
    """Bytes kept free beyond ``needed`` (see SPACE_MARGIN_FRACTION)."""
    return max(int(needed * SPACE_MARGIN_FRACTION), SPACE_MARGIN_MIN_BYTES)


def _gb(count: float) -> str:
    return f"{count / 1e9:.2f} GB" if count < 1e10 else f"{count / 1e9:.1f} GB"


def check_free_space(folder: Path, needed: int, what: str, free: Any = None) -> int:
    """Refuse (BackendError) unless ``folder``'s filesystem has ``needed`` bytes plus the margin free.

    ``free``: the probe (default free_bytes; tests inject one). Returns the free bytes seen.
    """
    available = (free or free_bytes)(folder)
    margin = space_margin(needed)
    if available < needed + margin:
        raise BackendError(
            f"{what}: needs {_gb(needed + margin)} free in {folder} ({_gb(needed)} to write + {_gb(margin)} margin) "
            f"but {_gb(available)} is free: {_gb(needed + margin - available)} missing; free that much, or point "
            "HF_HOME (downloads) or -o (conversions) at a larger disk"
        )
    return available


def folder_bytes(folder: Path) -> int:
    """Bytes of every file in a folder (links into the hub's blob store followed)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def convert_bytes(source: Path, bits: int, group_size: int, copied: Iterable[str]) -> int:
    """Bytes a conversion writes (an upper estimate): the quantised transformer and the copied parts.

    Two-dimensional weights become ``bits`` per weight plus a 16-bit scale and bias per group;
    other tensors keep their size.
    """
    total = 0
    for path in sorted((Path(source) / "transformer").glob("*.safetensors")):
        for key, info in read_safetensors_header(path).items():
            if key == "__metadata__":
                continue
            start, end = info["data_offsets"]
            shape = info.get("shape") or []
            if len(shape) == 2 and shape[-1] % group_size == 0:
                total += int(shape[0] * shape[1] * (bits + 32 / group_size) / 8)
            else:
                total += int(end) - int(start)
    for name in copied:
        part = Path(source) / name
        total += folder_bytes(part) if part.is_dir() else part.stat().st_size if part.is_file() else 0
    return total
