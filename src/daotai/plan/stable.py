"""Numbers and names that must come out the same on every machine: rounding for byte-stable plan
JSON, seeds and the script's hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from daotai.script.schema import Script

FLOAT_DIGITS = 9  # plan JSON keeps 1e-9 precision: stable text, far below a pixel


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from a tuple of parts (stable across runs and machines)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")



def script_hash(script: Script) -> str:
    """sha256 of the script's canonical JSON (defaults filled in, keys sorted)."""
    return hashlib.sha256(canonical_json(script.model_dump(mode="json")).encode("utf-8")).hexdigest()



def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the form hashed and compared byte for byte."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)



def rounded(value: float) -> float:
    """Round for stable JSON; -0.0 becomes 0.0."""
    rounded = round(float(value), FLOAT_DIGITS)
    return 0.0 if rounded == 0 else rounded



def rounded_all(values: Any) -> tuple[float, ...]:
    return tuple(rounded(v) for v in np.asarray(values, dtype=np.float64).ravel())
