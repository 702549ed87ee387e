"""The two baselines every speed bench reports, and the targets it checks its contenders against.

- plain stock: the diffusers pipeline as shipped;
- strong stock: the same pipeline with the two lines a user can type to speed it up,
  ``transformer.set_attention_backend(<the fastest backend that works here>)`` and
  ``transformer.compile_repeated_blocks(fullgraph=True)``.

"Works here" is decided by trying: a backend whose package is missing or whose kernel refuses this
device, dtype or head size is skipped, and of those that run one attention call at the model's
own shape, the fastest is kept. A speed-up counts only against both baselines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# diffusers attention backends a user would try first, in the order they are tried.
ATTENTION_BACKENDS = ("_native_cudnn", "flash", "_flash_3", "sage")


@dataclass(frozen=True)
class StrongStock:
    """What was set on the stock transformer, and why the other backends were not."""

    backend: str  # "native" when none of ATTENTION_BACKENDS ran
    compiled: bool
    tried: tuple[str, ...]  # "name: ms" or "name: skipped (reason)"

    def describe(self) -> str:
        compiled = "compile_repeated_blocks(fullgraph=True)" if self.compiled else "not compiled (CPU smoke run)"
        return f"stock + set_attention_backend({self.backend!r}) + {compiled}; tried {'; '.join(self.tried)}"


def _time_attention(backend: str, shape: tuple[int, int, int], device: str, dtype: Any, calls: int = 3) -> float:
    """Milliseconds of one self-attention call through diffusers' dispatcher: ``shape`` = (tokens, heads, head_dim)."""
    import torch
    from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn

    tokens, heads, head_dim = shape
    generator = torch.Generator("cpu").manual_seed(0)
    q, k, v = (torch.randn(1, tokens, heads, head_dim, generator=generator).to(device, dtype) for _ in range(3))
    name = AttentionBackendName(backend)
    dispatch_attention_fn(q, k, v, backend=name)  # first call: kernel selection, JIT, workspace
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(calls):
        dispatch_attention_fn(q, k, v, backend=name)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - began) / calls * 1000.0


def make_strong(transformer: Any, shape: tuple[int, int, int], device: str, dtype: Any,
                compile_blocks: bool | None = None) -> StrongStock:
    """Give a stock transformer the fastest attention backend that works here and compiled repeated blocks.

    ``shape``: (tokens, heads, head_dim) of the model's self-attention at the benched size, for the probe.
    ``compile_blocks``: None compiles on CUDA only (a CPU smoke run checks the path, not the speed).
    """
    timed: dict[str, float] = {}
    tried = []
    for backend in ATTENTION_BACKENDS:
        try:
            transformer.set_attention_backend(backend)
            timed[backend] = _time_attention(backend, shape, device, dtype)
            tried.append(f"{backend}: {timed[backend]:.1f} ms")
        except Exception as error:  # noqa: BLE001 - a missing package, an unsupported device or head size
            reason = str(error).strip().splitlines()[0][:80] if str(error).strip() else type(error).__name__
            tried.append(f"{backend}: skipped ({reason})")
    best = min(timed, key=timed.__getitem__) if timed else "native"
    transformer.set_attention_backend(best)
    compiled = device.startswith("cuda") if compile_blocks is None else compile_blocks
    if compiled:
        transformer.compile_repeated_blocks(fullgraph=True)
    return StrongStock(best, compiled, tuple(tried))


@dataclass(frozen=True)
class Target:
    """One target of the issue: a contender's ratio (or dB) against a baseline at least ``floor``, or a time at most."""

    what: str  # as printed
    floor: float  # the bound (a ceiling when ``at_most``)
    unit: str = "x"
    at_most: bool = False  # a time: the value must not exceed the bound

    def verdict(self, value: float | None) -> str:
        sign = "<=" if self.at_most else ">="
        if value is None or value != value:  # NaN: not measured
            return f"{self.what} {sign} {self.floor:g}{self.unit}: not measured"
        ok = value <= self.floor if self.at_most else value >= self.floor
        return f"{self.what} {sign} {self.floor:g}{self.unit}: {value:.2f}{self.unit} {'met' if ok else 'MISSED'}"


def memory_verdict(peaks: dict[str, float], stock: str = "stock") -> list[str]:
    """No contender's peak above plain stock's (GiB), one line per contender."""
    base = peaks.get(stock)
    lines = []
    for name, peak in peaks.items():
        if name == stock or base is None:
            continue
        if base <= 0:
            lines.append(f"peak memory of {name} <= stock's: not measured (no GPU)")
        else:
            met = "met" if peak <= base * 1.01 else "MISSED"
            lines.append(f"peak memory of {name} <= stock's: {peak:.1f} vs {base:.1f} GiB {met}")
    return lines
