"""Peak-memory planning for wan-mlx and wan-vace-mlx on Apple Silicon (unified memory), and on Linux CPU.

macOS lets the GPU wire only part of unified memory (its "recommended max working set");
past that, Metal allocations page and a render slows by orders of magnitude, so a plan that
would exceed it is refused up front. The share used for the table of Mac sizes (about 2/3
up to 36 GB, 3/4 above) is what current macOS reports on M-series machines; on a real Mac
the value MLX reports (``max_recommended_working_set_size``) replaces it. On Linux, where
MLX runs on the CPU, the budget is the machine's RAM. ``DAOTAI_MLX_MEMORY_GB`` overrides
both (a smaller budget leaves room for other programs; tests use it to force a refusal).

These are estimates to be calibrated on a Mac (see docs/mlx.md), not measurements.
Nothing here imports MLX at module level: ``daotai doctor`` reads the Mac table without it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from daotai.errors import BackendError

GB = 1024**3
MAC_SIZES_GB = (64, 96, 128, 192, 256, 512)
ENV_BUDGET = "DAOTAI_MLX_MEMORY_GB"
NATIVE_FPS = 16.0  # Wan2.1 generates at 16 fps
DOCTOR_PRESETS = ("preview", "draft", "final")
DOCTOR_FRAMES = 81  # Wan2.1's native clip: 5 s at 16 fps
PRECISIONS: tuple[int | None, ...] = (None, 8, 4)  # float32, then 8-bit, then 4-bit transformer


@dataclass(frozen=True)
class WanSize:
    """Parameter counts of one Wan2.1 model and its width (for activation estimates)."""

    name: str
    transformer_params: float
    dim: int
    ffn_dim: int
    text_params: float = 5.68e9  # UMT5-XXL encoder
    vae_params: float = 0.127e9


WAN_SIZES = {
    "wan2.1-t2v-1.3b": WanSize("wan2.1-t2v-1.3b", 1.42e9, 1536, 8960),
    "wan2.1-t2v-14b": WanSize("wan2.1-t2v-14b", 14.3e9, 5120, 13824),
}


def working_set_bytes(unified_gb: float) -> int:
    """GPU working-set limit macOS grants on a Mac with ``unified_gb`` of unified memory."""
    share = 0.75 if unified_gb > 36 else 2.0 / 3.0
    return int(unified_gb * GB * share)


def weight_bytes(params: float, bits: int | None, group_size: int = 64, scale_bits: int = 32) -> float:
    """Bytes of weights at float32 (bits None) or b-bit plus a scale and a bias per group.

    ``scale_bits`` is 32 because ``daotai models convert`` quantises the float32 weights and
    MLX keeps each group's scale and bias in the weights' dtype: 4-bit group 64 is 5 bits a weight.
    """
    if bits is None:
        return params * 4.0
    return params * (bits + 2.0 * scale_bits / group_size) / 8.0


def tokens(width: int, height: int, frames: int) -> int:
    """Transformer sequence length: latent frames x (H/16) x (W/16)."""
    return ((frames - 1) // 4 + 1) * (height // 16) * (width // 16)


@dataclass(frozen=True)
class Footprint:
    """What a wan-mlx model keeps resident, and the widths that size its activations.

    transformer_bytes is as loaded (float32, or the converted folder's packed weights);
    other_bytes is the float32 UMT5 encoder plus the VAE.
    """

    name: str
    transformer_params: float
    transformer_bits: int | None
    group_size: int
    transformer_bytes: float
    other_bytes: float
    dim: int
    ffn_dim: int
    control_blocks: int = 0  # Wan-VACE's control blocks (0: text-to-video)

    @classmethod
    def from_size(cls, size: WanSize, bits: int | None, group_size: int = 64) -> "Footprint":
        return cls(size.name, size.transformer_params, bits, group_size,
                   weight_bytes(size.transformer_params, bits, group_size),
                   4.0 * (size.text_params + size.vae_params), size.dim, size.ffn_dim)

    def with_bits(self, bits: int | None, group_size: int = 64) -> "Footprint":
        """The same model with its transformer converted to ``bits`` (None: float32)."""
        return replace(self, transformer_bits=bits, group_size=group_size,
                       transformer_bytes=weight_bytes(self.transformer_params, bits, group_size))

    @property
    def precision(self) -> str:
        return "float32" if self.transformer_bits is None else f"{self.transformer_bits}-bit g{self.group_size}"


def footprint_peak(fp: Footprint, width: int, height: int, frames: int) -> float:
    """Estimated peak bytes: all weights resident + one block's activations + a chunked VAE decode."""
    n = tokens(width, height, frames)
    block_acts = 4.0 * n * (6 * fp.dim + fp.ffn_dim) * 2  # float32, cond + uncond passes kept alive
    # chunked VAE decode: ~4 output frames of the widest full-size stage (96 ch), 3 live buffers,
    # plus the decoded float32 video itself
    vae_acts = 4.0 * 4 * width * height * 96 * 3 + 4.0 * frames * width * height * 3
    # Wan-VACE: every control block's hint waits for its main block, beside the control stream itself;
    # the control video and its masked copy are float32 while they are encoded (chunked like the decode)
    control = 0.0
    if fp.control_blocks:
        control = 4.0 * n * fp.dim * (fp.control_blocks + 2) + 4.0 * frames * width * height * 3 * 2
    return fp.transformer_bytes + fp.other_bytes + block_acts + vae_acts + control


def peak_bytes(size: WanSize, width: int, height: int, frames: int, bits: int | None, group_size: int = 64) -> float:
    """Estimated peak of a published Wan2.1 size (see footprint_peak)."""
    return footprint_peak(Footprint.from_size(size, bits, group_size), width, height, frames)


def fmt_bytes(n: float) -> str:
    """'12.3 GB' for big numbers, '4.5 MB' for the small ones tiny test models give."""
    return f"{n / GB:.1f} GB" if n >= 0.1 * GB else f"{n / 1024**2:.1f} MB"


def check_fits(size: WanSize, width: int, height: int, frames: int, bits: int | None, unified_gb: float,
               group_size: int = 64) -> float:
    """The estimated peak in bytes, or BackendError naming the numbers when it would swap."""
    need = peak_bytes(size, width, height, frames, bits, group_size)
    have = working_set_bytes(unified_gb)
    if need > have:
        raise BackendError(
            f"wan-mlx: {size.name} at {width}x{height}, {frames} frames, "
            f"{'float32' if bits is None else f'{bits}-bit'} needs ~{need / GB:.0f} GB but a {unified_gb:g} GB Mac "
            f"lets the GPU use ~{have / GB:.0f} GB; rule: peak <= working set (use --bits 4, a smaller preset or fewer frames)"
        )
    return need


def mac_table(size: WanSize, width: int, height: int, frames: int, bits: int | None) -> list[tuple[int, float, bool]]:
    """(unified GB, estimated peak GB, fits) for each common Mac size."""
    need = peak_bytes(size, width, height, frames, bits) / GB
    return [(gb, need, need * GB <= working_set_bytes(gb)) for gb in MAC_SIZES_GB]


# ---- a model folder's footprint, read from safetensors headers (no weights loaded) ----

_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U32": 4, "I16": 2, "U16": 2,
                "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def safetensors_header(path: Path) -> dict:
    """The JSON header of a .safetensors file: {name: {dtype, shape, data_offsets}} (reads only the header)."""
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise BackendError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        (size,) = struct.unpack("<Q", raw)
        if size > 100 * 1024**2:
            raise BackendError(f"{path}: safetensors header of {size} bytes is implausible (rule: < 100 MB)")
        header = json.loads(fh.read(size))
    header.pop("__metadata__", None)
    return header


def _tensors(folder: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        out.update(safetensors_header(f))
    if not out:
        raise BackendError(f"{folder}: no .safetensors files found")
    return out


def _numel(info: Mapping) -> int:
    return math.prod(info["shape"]) if info["shape"] else 1


def folder_footprint(folder: Path) -> Footprint:
    """Footprint of a diffusers Wan folder or a converted wan-mlx folder, from headers and configs."""
    folder = Path(folder)
    cfg_path = folder / "transformer" / "config.json"
    if not cfg_path.is_file():
        raise BackendError(f"{folder}: transformer/config.json missing; expected a diffusers Wan folder")
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    dim = int(cfg.get("num_attention_heads", 40)) * int(cfg.get("attention_head_dim", 128))
    ffn = int(cfg.get("ffn_dim", 4 * dim))
    manifest_path = folder / "mlx_manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else None
    tr = _tensors(folder / "transformer")
    if manifest is None:
        bits, group = None, 64
        params = float(sum(_numel(i) for i in tr.values()))
        tr_bytes = 4.0 * params  # loaded as float32 whatever the file's dtype
    else:
        bits, group = int(manifest["bits"]), int(manifest["group_size"])
        packed = {n[: -len(".scales")] for n in tr if n.endswith(".scales")}
        params = 0.0
        for name, info in tr.items():
            stem = name.rsplit(".", 1)[0]
            if stem in packed and name.endswith((".scales", ".biases")):
                continue
            # a packed uint32 weight holds 32 / bits weights per element
            params += _numel(info) * (32 / bits if stem in packed and name.endswith(".weight") else 1)
        tr_bytes = float(sum(_numel(i) * _DTYPE_BYTES.get(i["dtype"], 4) for i in tr.values()))
    other = 0.0
    for sub, drop in (("text_encoder", "encoder.embed_tokens.weight"), ("vae", None)):
        if (folder / sub).is_dir():
            other += 4.0 * sum(_numel(i) for n, i in _tensors(folder / sub).items() if n != drop)
    return Footprint(folder.name, params, bits, group, tr_bytes, other, dim, ffn, len(cfg.get("vace_layers") or ()))


# ---- the budget a plan must fit in ----

@dataclass(frozen=True)
class Budget:
    """Bytes a render may use, and where that number came from (for messages)."""

    bytes: int
    source: str


def total_ram_bytes() -> int:
    """Physical memory of this machine (0 when the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def is_apple_silicon() -> bool:
    """macOS on arm64: the only place MLX runs on a GPU."""
    return platform.system() == "Darwin" and platform.machine() == "arm64"


def metal_working_set() -> int | None:
    """The GPU working set MLX reports on Apple Silicon, or None (no MLX, no Metal, other OS)."""
    if not is_apple_silicon():
        return None
    try:
        import mlx.core as mx

        info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
        value = int(info.get("max_recommended_working_set_size", 0))
    except Exception:  # noqa: BLE001  (MLX missing or too old: fall back to the estimated share)
        return None
    return value or None


def parse_budget_gb(value: object, where: str) -> float:
    """A positive number of GB, or BackendError naming where it came from."""
    try:
        gb = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        gb = float("nan")
    if not (gb > 0 and math.isfinite(gb)):
        raise BackendError(f"{where}: {value!r} must be a positive number of GB")
    return gb


def memory_budget(override_gb: float | None = None, env: Mapping[str, str] | None = None) -> Budget:
    """The option, else $DAOTAI_MLX_MEMORY_GB, else the Mac's GPU working set, else total RAM."""
    env = os.environ if env is None else env
    if override_gb is not None:
        gb = parse_budget_gb(override_gb, "memory_gb")
        return Budget(int(gb * GB), f"memory_gb={gb:g}")
    if env.get(ENV_BUDGET):
        gb = parse_budget_gb(env[ENV_BUDGET], ENV_BUDGET)
        return Budget(int(gb * GB), f"{ENV_BUDGET}={gb:g}")
    ram = total_ram_bytes()
    if is_apple_silicon():
        measured = metal_working_set()
        if measured:
            return Budget(measured, f"GPU working set of this {ram / GB:.0f} GB Mac, as MLX reports it")
        return Budget(working_set_bytes(ram / GB), f"estimated GPU working set of this {ram / GB:.0f} GB Mac")
    if ram <= 0:
        raise BackendError(f"wan-mlx: this OS does not report its memory size; set {ENV_BUDGET}")
    return Budget(ram, f"total RAM of this machine ({ram / GB:.0f} GB; MLX runs on the CPU here)")


# ---- refusing plans that do not fit, naming ones that would ----

def _round16(x: float) -> int:
    return max(16, int(round(x / 16.0)) * 16)


def alternatives(fp: Footprint, width: int, height: int, frames: int, budget: int,
                 fps: float = NATIVE_FPS, reference_frames: int = 0) -> list[str]:
    """Settings close to the asked one that fit: lower bits, then fewer frames, then a smaller size.

    ``reference_frames``: pixel frames' worth of conditioning in front of the video (VACE's reference
    images, 4 each), counted in every estimate but not offered as video frames."""
    out = []
    total = frames + reference_frames
    lower = [b for b in PRECISIONS if b is not None and (fp.transformer_bits is None or b < fp.transformer_bits)]
    for bits in lower:
        need = footprint_peak(fp.with_bits(bits), width, height, total)
        if need <= budget:
            out.append(f"the transformer at {bits}-bit (daotai models convert <model> --to mlx --bits {bits}), "
                       f"~{fmt_bytes(need)}")
            break
    for f in range(frames - 4, 0, -4):
        need = footprint_peak(fp, width, height, f + reference_frames)
        if need <= budget:
            out.append(f"{f} frames (~{f / fps:.1f} s) at {width}x{height}, ~{fmt_bytes(need)}")
            break
    for scale in (0.75, 2 / 3, 0.5, 1 / 3, 0.25):
        w, h = _round16(width * scale), _round16(height * scale)
        if (w, h) == (width, height):
            continue
        need = footprint_peak(fp, w, h, total)
        if need <= budget:
            out.append(f"{w}x{h} with {frames} frames, ~{fmt_bytes(need)}")
            break
    return out


def check_plan(fp: Footprint, width: int, height: int, frames: int, budget: Budget,
               fps: float = NATIVE_FPS, backend: str = "wan-mlx", reference_frames: int = 0) -> float:
    """The estimated peak in bytes, or BackendError naming need, budget and settings that would fit
    (``reference_frames``: see alternatives)."""
    need = footprint_peak(fp, width, height, frames + reference_frames)
    if need <= budget.bytes:
        return need
    options = alternatives(fp, width, height, frames, budget.bytes, fps, reference_frames)
    fits = ("would fit: " + "; or ".join(options)) if options else (
        f"nothing smaller fits: the weights alone need ~{fmt_bytes(fp.transformer_bytes + fp.other_bytes)}")
    raise BackendError(
        f"{backend}: {fp.name} at {width}x{height}, {frames} frames, transformer {fp.precision} needs "
        f"~{fmt_bytes(need)} but the budget is {fmt_bytes(budget.bytes)} ({budget.source}); "
        f"rule: estimated peak <= budget; {fits}"
    )


# ---- what fits on which Mac, for `daotai doctor` ----

def best_precision(size: WanSize, width: int, height: int, frames: int, budget: int) -> int | None | str:
    """The least compressed transformer precision that fits (None = float32), or "no"."""
    for bits in PRECISIONS:
        if peak_bytes(size, width, height, frames, bits) <= budget:
            return bits
    return "no"


def fit_summary(budget: int, frames: int = DOCTOR_FRAMES) -> str:
    """One line: for each Wan2.1 size, the precision each size preset needs within ``budget``."""
    from daotai.script.schema import SIZE_PRESETS

    parts = []
    for size in WAN_SIZES.values():
        found = []
        for preset in DOCTOR_PRESETS:
            w, h = SIZE_PRESETS[preset]
            best = best_precision(size, _round16(w), _round16(h), frames, budget)
            found.append((preset, "float32" if best is None else "too big" if best == "no" else f"{best}-bit"))
        label = size.name.removeprefix("wan2.1-t2v-")
        if len({p for _, p in found}) == 1:
            parts.append(f"{label}: all presets {found[0][1]}")
        else:
            parts.append(f"{label}: " + ", ".join(f"{preset} {p}" for preset, p in found))
    return "; ".join(parts)


def doctor_rows(this_mac: tuple[int, int, str] | None = None) -> list[tuple[str, str]]:
    """(check, finding) rows: each common Mac size, then this Mac when given (unified, working set, how)."""
    rows = []
    for gb in MAC_SIZES_GB:
        ws = working_set_bytes(gb)
        rows.append((f"wan-mlx {gb} GB Mac", f"GPU ~{ws / GB:.0f} GB, {DOCTOR_FRAMES} frames: {fit_summary(ws)}"))
    if this_mac is not None:
        unified, ws, how = this_mac
        rows.append((f"wan-mlx this Mac ({unified / GB:.0f} GB)",
                     f"GPU {ws / GB:.0f} GB ({how}), {DOCTOR_FRAMES} frames: {fit_summary(ws)}"))
    return rows


def this_mac() -> tuple[int, int, str] | None:
    """(unified bytes, GPU working set bytes, how it was found) on Apple Silicon, else None."""
    if not is_apple_silicon():
        return None
    ram = total_ram_bytes()
    measured = metal_working_set()
    if measured:
        return ram, measured, "MLX"
    return ram, working_set_bytes(ram / GB), "estimated"
