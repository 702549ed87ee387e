"""Peak-memory estimates for neural video generation (bytes), and the placement planner.

Coarse on purpose: they decide *whether* a plan fits and which setting would, not exact
allocator behaviour. A generation has three phases, each with its own peak:

- encode: the text encoder's weights (T5/UMT5-XXL: 4.8–5.7 B parameters);
- denoise: the transformer's weights plus its activations, which grow with the latent
  token count ``latent_frames × (H / s) × (W / s)`` (``s`` = VAE downsampling × patch);
  classifier-free guidance runs the two branches one after the other (diffusers' Wan and
  LTX pipelines), so it does not double them;
- decode: the VAE's weights plus its decoder activations (tiling divides them).

Offload tiers decide which weights stay resident: ``none`` (everything on the device),
``model`` (one component at a time), ``group`` (transformer/text encoder streamed block
by block), ``sequential`` (one layer at a time, very slow). ``OVERHEAD_BYTES`` covers the
CUDA context and allocator slack.

Checked against published figures (``test_runtime_memory.py`` keeps them within 15%):
- Wan2.1-T2V-1.3B, 832x480, 81 frames, text encoder off the GPU: published 8.19 GB
  (Wan's README, ``--offload_model True --t5_cpu``); the denoise phase of the ``model``
  tier here estimates 7.6 GB (activations 3.8 GB + transformer 2.8 GB + overhead). With
  diffusers' model offload the UMT5 encoder does visit the GPU (12.4 GB phase peak), so
  a 12 GB card gets the ``group`` tier (5.2 GB).
- Wan2.1-T2V-14B, 1280x720, 81 frames, no offload: ~69 GB published; estimate ~62 GB
  (transformer 28 GB + UMT5 11.4 GB + activations 21.8 GB + overhead).

A shot split over ``gpus`` processes (context parallelism, one per GPU) holds every weight on
every GPU (nothing is sharded) while each GPU keeps only 1/gpus of the transformer's tokens, so
the denoise activations divide by ``gpus``; attention's all-to-all exchanges swap sequence
shards for head shards of the same size. Only rank 0 decodes, so the VAE's peak does not
divide. :func:`gpus_that_fit` answers which split makes a size fit.

Footprints with ``releasable_text_encoder`` (MiniMax-H3) keep the text encoder on the device only
while encoding at the ``none`` tier: the backend moves it off before denoising. Nothing about
MiniMax-H3 is measured yet; its figures are estimates from parameter counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from daotai import catalog
from daotai.catalog import ModelFootprint

GIB = 1024**3
OVERHEAD_BYTES = 1.0e9  # CUDA context, cuBLAS workspaces, allocator fragmentation
TIERS = ("none", "model", "group", "sequential")
# Live activation bytes per latent token, per unit of width: ~20 (tokens × hidden) tensors
# in a block's attention path and ~3 (tokens × ffn) in its MLP, at 2 bytes each.
HIDDEN_TENSORS = 20
FFN_TENSORS = 3


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: float  # resident during the denoise phase
    activations_bytes: float
    vae_decode_bytes: float
    peak_bytes: float
    offload: str  # one of TIERS
    vae_tiling: bool = False
    phases: tuple[tuple[str, float], ...] = ()  # (phase, peak bytes)


def latent_tokens(m: ModelFootprint, width: int, height: int, frames: int) -> int:
    """Transformer tokens for one video: latent frames × latent rows × latent columns."""
    latent_frames = (frames - 1) // m.temporal_down + 1
    return latent_frames * (height // m.spatial_down) * (width // m.spatial_down)


def _resident(m: ModelFootprint, offload: str, phase: str) -> float:
    """Parameters (billions) resident on the device during a phase under an offload tier."""
    component = {"encode": m.text_encoder_b, "denoise": m.transformer_b, "decode": m.vae_b}[phase]
    if offload == "none":
        if m.releasable_text_encoder:
            # The text encoder leaves the device once the prompt is encoded (MiniMax-H3's conditioner
            # is as large as its transformer); the transformer comes on after it.
            return (m.text_encoder_b if phase == "encode" else m.transformer_b) + m.vae_b
        return m.transformer_b + m.text_encoder_b + m.vae_b
    if offload == "model":
        return component
    if offload == "group":
        # Block-level streaming: two blocks in flight; the VAE is small and stays resident.
        streamed = component * 2.0 / max(m.layers, 1) if phase != "decode" else component
        return streamed + m.vae_b
    if offload == "sequential":
        return component / max(m.layers, 1) * 0.5  # one leaf module (about half a block) at a time
    raise ValueError(f"offload: {offload!r} must be one of {', '.join(TIERS)}")


def footprint_of(model: "str | ModelFootprint") -> ModelFootprint:
    """A footprint as given, or the catalog's by model or footprint name (KeyError when unknown)."""
    if isinstance(model, ModelFootprint):
        return model
    found = catalog.footprint(model)
    if found is None:
        raise KeyError(f"{model!r} is not a model in the catalog")
    return found


def footprint_from_folder(folder, family: str) -> ModelFootprint:
    """Parameter counts from a diffusers folder's safetensors headers plus its transformer config."""
    import json
    import math
    from pathlib import Path

    from daotai.runtime.model_checks import read_safetensors_header

    folder = Path(folder)

    def billions(component: str) -> float:
        total = 0
        for path in (folder / component).glob("*.safetensors"):
            header = read_safetensors_header(path)
            total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
        return total / 1e9

    config = json.loads((folder / "transformer" / "config.json").read_text(encoding="utf-8"))
    hidden = int(config.get("num_attention_heads", 12)) * int(config.get("attention_head_dim", 128))
    wan = family.startswith("wan")
    return ModelFootprint(
        name=folder.name,
        transformer_b=billions("transformer"),
        text_encoder_b=billions("text_encoder"),
        vae_b=billions("vae"),
        spatial_down=16 if wan else 32,
        temporal_down=4 if wan else 8,
        hidden=hidden,
        vae_bytes_per_pixel=120.0 if wan else 40.0,
        ffn=int(config.get("ffn_dim", 4 * hidden)),
        layers=int(config.get("num_layers", 30)),
    )


def estimate(model: "str | ModelFootprint", width: int, height: int, frames: int, bytes_per_param: float = 2.0,
             offload: str = "none", vae_tiling: bool = False, gpus: int = 1) -> MemoryEstimate:
    """Peak memory of one accelerator for one generation (split over ``gpus`` when > 1) at a size and frame count."""
    if gpus < 1:
        raise ValueError(f"gpus: {gpus} must be at least 1")
    m = footprint_of(model)
    tokens = latent_tokens(m, width, height, frames)
    ffn = m.ffn or 4 * m.hidden
    # Each GPU of a split keeps ceil(tokens / gpus) of them (the last shard may be the longest).
    activations = -(-tokens // gpus) * (m.hidden * HIDDEN_TENSORS + ffn * FFN_TENSORS) * 2.0
    pixels = width * height * frames
    # The VAE decodes causally in chunks of ~8 frames; tiling cuts a chunk's spatial extent ~8x.
    vae = pixels * m.vae_bytes_per_pixel / (8.0 if vae_tiling else 1.0) / max(frames / 8, 1) * 2
    vae_weights_bytes = m.vae_weight_bytes
    phases = {}
    for phase in ("encode", "denoise", "decode"):
        resident = _resident(m, offload, phase) * 1e9 * bytes_per_param
        if phase == "decode" or offload == "none":
            resident += m.vae_b * 1e9 * (vae_weights_bytes - bytes_per_param)
        work = activations if phase == "denoise" else vae if phase == "decode" else 0.0
        phases[phase] = resident + work + OVERHEAD_BYTES
    weights = _resident(m, offload, "denoise") * 1e9 * bytes_per_param
    peak = max(phases.values())
    return MemoryEstimate(weights, activations, vae, peak, offload, vae_tiling, tuple(phases.items()))


GPU_COUNTS = (1, 2, 4, 8)  # splits offered: the GPU counts of one host


def gpus_that_fit(model: "str | ModelFootprint", width: int, height: int, frames: int, budget_bytes: float,
                  bytes_per_param: float = 2.0, counts: tuple[int, ...] = GPU_COUNTS) -> int | None:
    """The fewest GPUs (of ``counts``) over which a shot fits each one with nothing offloaded; None if none do."""
    for gpus in counts:
        for tiling in (False, True):
            if estimate(model, width, height, frames, bytes_per_param, "none", tiling, gpus).peak_bytes <= budget_bytes:
                return gpus
    return None


# Lightest touch first: offload costs speed, so it is used only when needed.
PLACEMENT_ORDER = (("none", False), ("none", True), ("model", True), ("group", True), ("sequential", True))


def choose_settings(model: "str | ModelFootprint", width: int, height: int, frames: int, budget_bytes: float,
                    bytes_per_param: float = 2.0) -> MemoryEstimate | None:
    """The lightest-touch setting that fits the budget, or None when nothing does."""
    for offload, tiling in PLACEMENT_ORDER:
        est = estimate(model, width, height, frames, bytes_per_param, offload=offload, vae_tiling=tiling)
        if est.peak_bytes <= budget_bytes:
            return est
    return None


@dataclass(frozen=True)
class Placement:
    """The planner's decision for one render."""

    tier: str
    vae_tiling: bool
    estimate: MemoryEstimate
    budget_bytes: float


# Fallbacks suggested when a request does not fit: (label, width, height, frames), largest first.
SUGGESTIONS = (
    ("--preset draft (81 frames)", 832, 480, 81),
    ("--preset draft with ~3 s shots (49 frames)", 832, 480, 49),
    ("--preset preview (81 frames)", 640, 360, 81),
    ("--preset preview with ~2 s shots (33 frames)", 640, 360, 33),
    ("--preset preview with 1 s shots (17 frames)", 640, 360, 17),
)


def plan_placement(model: "str | ModelFootprint", width: int, height: int, frames: int, budget_bytes: float,
                   bytes_per_param: float = 2.0) -> Placement:
    """Pick an offload tier and VAE tiling that fit, or refuse (before loading) naming what would fit."""
    from daotai.errors import BackendError

    est = choose_settings(model, width, height, frames, budget_bytes, bytes_per_param)
    if est is not None:
        return Placement(est.offload, est.vae_tiling, est, budget_bytes)
    smallest = estimate(model, width, height, frames, bytes_per_param, "sequential", True)
    for label, w, h, f in SUGGESTIONS:
        if w * h * f < width * height * frames and choose_settings(model, w, h, f, budget_bytes, bytes_per_param):
            hint = f"{label} would fit"
            break
    else:
        hint = "no preset fits; use a smaller model or a machine with more memory"
    raise BackendError(
        f"{footprint_of(model).name} at {width}x{height}, {frames} frames needs ~{smallest.peak_bytes / GIB:.1f} GiB even with "
        f"sequential offload, more than the {budget_bytes / GIB:.1f} GiB available; {hint}"
    )


def next_tier(tier: str) -> str | None:
    """The next lower-memory tier, or None at the bottom."""
    index = TIERS.index(tier)
    return TIERS[index + 1] if index + 1 < len(TIERS) else None


def tier_after_health(tier: str, level: str, adaptive: bool) -> str:
    """The memory tier for the next shot after a health verdict (ok | warn | critical) on this one.

    Only a critical verdict with ``--adaptive`` steps down, and by one tier per shot boundary:
    each lower tier costs speed, so a warning alone, or one bad sample, should not cost the
    rest of the render more than a tier. At the lowest tier the tier stays.
    """
    if tier not in TIERS:
        raise ValueError(f"tier: {tier!r} must be one of {', '.join(TIERS)}")
    if adaptive and level == "critical":
        return next_tier(tier) or tier
    return tier
