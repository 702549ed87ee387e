"""Speed levers for the diffusers backends: what each speed mode turns on, and how.

Modes (the backends' ``speed`` option, ``daotai render --speed``):
- ``off``: the stock pipeline, nothing changed.
- ``exact`` (default): levers that keep the sampler, the steps and the arithmetic precision
  of every stage: cuDNN scaled-dot-product attention forced around the denoise loop and a
  regional ``torch.compile`` of the repeated transformer block (``dynamic=False``). CUDA only;
  on CPU and MPS ``exact`` changes nothing (the levers are unmeasured there).
- ``fast`` (opt-in, approximate): ``exact`` plus step caching (the transformer is skipped on a
  fixed schedule of steps and its last output reused) and, on CUDA, the VAE decoding in
  bfloat16 with channels-last weights and, where the GPU has FP8 tensor cores, the repeated
  blocks' linear layers as float8 GEMMs (``daotai.render.fp8``). Caching is device-agnostic, so it also applies on
  CPU/MPS when asked for.

Nothing here imports torch at import time.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, replace
from typing import Any, Iterator

from daotai.errors import BackendError, OptionError

SPEED_MODES = ("off", "exact", "fast")
SDPA_BACKENDS = ("cudnn", "flash", "efficient", "math")
CACHE_KINDS = ("interval", "fbc")
# No "reduce-overhead": CUDA graphs per compiled block fail in the pipeline (measured on an H200 with
# LTX: a block's graph output is overwritten by the next block's replay before it is read).
COMPILE_MODES = (None, "max-autotune-no-cudagraphs")
# Fast mode's step cache, per model family: (compute 1 step in this many after the warm-up, run the
# guidance passes after the first on 1 computed step in this many, the warm-up: the share of the first
# steps always computed). Measured on one H100 with Wan2.1 1.3B (480x832x81, CFG 5, 50 steps, random
# weights), against plain stock per step: every 3rd step alone 2.57x at 43.5 dB from exact; every 4th
# with guidance every 2nd 3.34x at 41.6 dB after a fifth of the steps, 4.22x at 41.3 dB after a tenth
# (29 of 100 passes; 3.50x the strong stock, bench/neural.py --only fast-w10); every 5th 3.63x at
# 40.1 dB and every 6th 3.74x at 40.3 dB, too close to the 40 dB bound to keep for real weights.
# Families not named keep every 3rd step after a fifth and every guidance pass: LTX runs its guidance
# in one batched pass (nothing to reuse) and was at 39.8 dB with every 3rd step already; H3 is
# guidance-distilled; VACE and the camera-control Wan were not measured.
FAST_STEP_CACHE: dict[str | None, tuple[int, int, float]] = {None: (3, 1, 0.2), "wan": (4, 2, 0.1)}
# Fast mode's VAE levers on CUDA, (bfloat16, channels-last), per family. LTX-Video's decoder is
# slower with them: on an H100 (bench/neural.py --model ltx --mode fast, random weights, 768x512x121)
# its decode took 0.325 s with both, 0.201 s in bfloat16 alone and 0.198 s in float32, so it keeps
# its float32 decode, the exact one, which costs it nothing. MiniMax-H3's VAE keeps the dtype its
# catalog row gives it (its checkpoint is made for bfloat16, with its own float32 parts).
FAST_VAE_LEVERS: dict[str | None, tuple[bool, bool]] = {None: (True, True), "ltx": (False, False),
                                                        "h3": (False, False)}
MAX_BRANCHES = 4  # guidance passes per step the step cache keeps (cond, uncond, and room for more)


def fast_choices(family: str | None) -> tuple[tuple[int, int, float], tuple[bool, bool]]:
    """Fast mode's tuned choices for a model family: its step cadence (interval, guidance interval,
    warm-up share of the steps) and its VAE levers on CUDA (bfloat16, channels-last). A family
    without choices of its own gets the defaults."""
    return (FAST_STEP_CACHE.get(family, FAST_STEP_CACHE[None]), FAST_VAE_LEVERS.get(family, FAST_VAE_LEVERS[None]))


def tuned_families() -> tuple[str, ...]:
    """The families whose fast mode has a choice of its own (a cadence or VAE levers), sorted."""
    return tuple(sorted({f for table in (FAST_STEP_CACHE, FAST_VAE_LEVERS) for f in table if f is not None}))


@dataclass(frozen=True)
class SpeedConfig:
    """Which levers to apply; ``levers_for`` derives one from a mode and a device kind."""

    mode: str = "off"
    sdpa: str | None = None  # forced SDPA backend around the denoise loop (None: PyTorch's choice)
    # diffusers attention backend name, or "fa4" (PyTorch's flash SDPA served by FlashAttention-4
    # kernels), or "auto": the best of those this machine has installed (None: PyTorch's SDPA)
    attention: str | None = None
    compile_blocks: bool = False  # regional torch.compile of the repeated transformer block
    compile_mode: str | None = None  # torch.compile mode (None: default; see COMPILE_MODES)
    vae_bf16: bool = False  # VAE weights and decode in bfloat16 (approximate)
    # the repeated blocks' linear layers as float8 GEMMs with row-wise scales (approximate; CUDA sm_89+)
    fp8: bool = False
    # q/k/v (self-attention) and k/v (cross-attention) as one wider linear each, where diffusers'
    # attention module offers it (Wan); same arithmetic per output, not selected by any mode until
    # the bench shows it pays
    fuse_qkv: bool = False
    vae_channels_last: bool = False  # VAE weights in channels-last (NDHWC) memory format
    # exact rewrites (daotai.render.rewrites): Wan attention with the interleaved rotary form, its
    # cross-attention on cuDNN's kernel (needs lean_attention), the FFN GELU in the GEMM epilogue
    lean_attention: bool = False
    cross_attention: str | None = None
    gelu_epilogue: bool = False
    cache: str | None = None  # "interval": fixed-schedule step skipping; "fbc": diffusers first-block cache
    cache_warmup: float = 0.2  # share of the steps always computed before skipping starts
    cache_interval: int = 2  # after warm-up, compute 1 step in every ``cache_interval``
    cache_tail: int = 1  # last steps always computed (they set the fine detail)
    # On computed steps after the warm-up, run the guidance passes after the first (Wan's
    # unconditional one) only every ``guidance_interval``-th time; in between, such a pass is the
    # first pass's fresh output plus the difference the two had when last both computed (the
    # guidance direction changes more slowly than the prediction itself). 1: every time.
    guidance_interval: int = 1
    # on a reused step, extrapolate the output linearly in the timestep from the branch's last two
    # computed outputs instead of repeating the last one (first-order, as TaylorSeer does for features)
    cache_extrapolate: bool = False
    fbc_threshold: float = 0.05  # first-block cache: relative change below which a step is reused

    def describe(self) -> str:
        """One line naming the mode and its levers (for the Notice that reaches the manifest)."""
        return f"speed {self.mode}: {self.levers_text()}"

    def levers_text(self) -> str:
        """The levers this config turns on, comma-separated, or "no levers"."""
        parts = []
        if self.attention:
            parts.append(f"attention={self.attention}")
        if self.sdpa:
            parts.append(f"sdpa={self.sdpa}")
        if self.compile_blocks:
            parts.append("compile=blocks" + (f"({self.compile_mode})" if self.compile_mode else ""))
        if self.lean_attention:
            parts.append("rope=interleaved" + (f", cross={self.cross_attention}" if self.cross_attention else ""))
        if self.gelu_epilogue:
            parts.append("gelu=epilogue")
        if self.fuse_qkv:
            parts.append("qkv=fused")
        if self.fp8:
            parts.append("linears=fp8(e4m3, row-wise)")
        if self.vae_bf16:
            parts.append("vae=bf16")
        if self.vae_channels_last:
            parts.append("vae=channels_last")
        if self.cache == "interval":
            parts.append(f"cache=interval(warmup {self.cache_warmup:g}, every {self.cache_interval}, "
                         f"tail {self.cache_tail}{', extrapolated' if self.cache_extrapolate else ''}"
                         + (f", guidance every {self.guidance_interval}" if self.guidance_interval > 1 else "")
                         + ")")
        elif self.cache == "fbc":
            parts.append(f"cache=first_block(threshold {self.fbc_threshold:g})")
        return ", ".join(parts) if parts else "no levers"


def parse_speed(value: str | None) -> str:
    """Normalise a speed mode name; None means ``exact``; anything else raises OptionError."""
    mode = "exact" if value is None else str(value).strip().lower()
    if mode not in SPEED_MODES:
        raise OptionError.at("speed", value, f"must be one of {', '.join(SPEED_MODES)}")
    return mode


def levers_for(mode: str | None, device_kind: str, family: str | None = None) -> SpeedConfig:
    """The levers a mode selects on a device kind (cuda | mps | cpu) for a model ``family`` (a catalog
    family name; None: any); kernel levers are CUDA-only."""
    mode = parse_speed(mode)
    config = SpeedConfig(mode=mode)
    if mode == "off":
        return config
    if device_kind == "cuda":
        # cuDNN attention is what PyTorch picks on Hopper anyway; forcing it keeps a later
        # dispatcher change from silently falling back to the slower flash/efficient kernels.
        config = replace(config, sdpa="cudnn", attention="auto", compile_blocks=True, lean_attention=True,
                         cross_attention="cudnn", gelu_epilogue=True)
    if mode == "fast":
        (interval, guidance, warmup), (bf16, channels_last) = fast_choices(family)
        config = replace(config, cache="interval", cache_interval=interval, guidance_interval=guidance,
                         cache_warmup=warmup)
        if device_kind == "cuda":
            # fp8 is asked for here and dropped by resolve_levers where the GPU cannot run it.
            config = replace(config, vae_bf16=bf16, vae_channels_last=channels_last, fp8=True)
    return config


def check_config(config: SpeedConfig) -> SpeedConfig:
    """Validate a hand-made config (bench ablations); returns it unchanged."""
    if config.mode not in SPEED_MODES:
        raise BackendError(f"speed: {config.mode!r} must be one of {', '.join(SPEED_MODES)}")
    if config.sdpa is not None and config.sdpa not in SDPA_BACKENDS:
        raise BackendError(f"sdpa: {config.sdpa!r} must be one of {', '.join(SDPA_BACKENDS)}")
    if config.cache is not None and config.cache not in CACHE_KINDS:
        raise BackendError(f"cache: {config.cache!r} must be one of {', '.join(CACHE_KINDS)}")
    if config.compile_mode not in COMPILE_MODES:
        raise BackendError(f"compile_mode: {config.compile_mode!r} must be one of "
                           f"{', '.join(str(m) for m in COMPILE_MODES)}")
    from daotai.render.rewrites import CROSS_KERNELS

    if config.cross_attention not in CROSS_KERNELS:
        raise BackendError(f"cross_attention: {config.cross_attention!r} must be one of "
                           f"{', '.join(str(k) for k in CROSS_KERNELS)}")
    if config.cross_attention and not config.lean_attention:
        raise BackendError("cross_attention: needs lean_attention (the cross kernel is chosen by that processor)")
    if config.cache_interval < 1:
        raise BackendError(f"cache_interval: {config.cache_interval!r} must be >= 1")
    if config.guidance_interval < 1:
        raise BackendError(f"guidance_interval: {config.guidance_interval!r} must be >= 1")
    if config.guidance_interval > 1 and config.cache != "interval":
        raise BackendError(f"guidance_interval: {config.guidance_interval!r} needs cache='interval' "
                           f"(the step cache's hook reuses the guidance passes), not {config.cache!r}")
    if not 0.0 <= config.cache_warmup <= 1.0:
        raise BackendError(f"cache_warmup: {config.cache_warmup!r} must be in [0, 1]")
    return config


# ------------------------------------------------------------------ the schedule


def _always_computed(steps: int, config: SpeedConfig) -> tuple[int, int]:
    """(warm-up length, first tail step): steps outside [warm, tail) always run every pass."""
    return max(1, int(round(steps * config.cache_warmup))), steps - max(0, config.cache_tail)


def computed_steps(steps: int, config: SpeedConfig) -> list[bool]:
    """Per step, True when the transformer runs (False: its previous output is reused)."""
    if config.cache != "interval":
        return [True] * steps
    warm, tail_start = _always_computed(steps, config)
    return [i < warm or i >= tail_start or (i - warm) % config.cache_interval == 0 for i in range(steps)]


def guidance_steps(steps: int, config: SpeedConfig) -> list[bool]:
    """Per step, True when the guidance passes after the first run too (see ``guidance_interval``);
    always False where ``computed_steps`` is False."""
    computed = computed_steps(steps, config)
    if config.guidance_interval <= 1:
        return computed
    warm, tail_start = _always_computed(steps, config)
    middle = [i for i in range(steps) if computed[i] and warm <= i < tail_start]
    skipped = {i for k, i in enumerate(middle) if k % config.guidance_interval}
    return [c and i not in skipped for i, c in enumerate(computed)]


# ------------------------------------------------------------------ applying levers


def _transformers(pipe: Any) -> Iterator[Any]:
    """The pipeline's denoising transformers (Wan 2.2 has two; MiniMax-H3 one per workflow partition)."""
    for name in ("transformer", "transformer_2", "transformer_ref"):
        module = getattr(pipe, name, None)
        if module is not None:
            yield module


FA4_MODULE = "flash_attn.cute.interface"  # the flash-attn-4 wheel (CuTe DSL kernels, compiled at first use)


def fa4_available() -> bool:
    """True when PyTorch can route its flash SDPA to FlashAttention-4 kernels on this GPU.

    Needs the ``flash-attn-4`` wheel and a PyTorch with ``activate_flash_attention_impl`` (2.10+),
    on compute capability 9.x (Hopper) or 10.x (Blackwell). Importing the module is the only
    honest check: a placeholder package of the same name exists on the index.
    """
    import importlib

    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] not in (9, 10):
        return False
    attention = importlib.import_module("torch.nn.attention")
    if not hasattr(attention, "activate_flash_attention_impl"):
        return False
    try:
        module = importlib.import_module(FA4_MODULE)
    except Exception:  # noqa: BLE001 - a broken install (missing CUDA libs) must not stop a render
        return False
    if not (hasattr(module, "_flash_attn_fwd") and "FA4" in attention.list_flash_attention_impls()):
        return False
    return _fa4_answers()


@functools.lru_cache(maxsize=1)
def _fa4_answers() -> bool:
    """One tiny attention call through FA4 against PyTorch's math kernel, once per process.

    The FA4 switch and the wheel must agree on the call contract (newer flash-attn-4 releases
    return more values than PyTorch 2.11 unpacks) and the kernel must compile for this GPU; a
    mismatch found here leaves FA4 off instead of failing the first shot. Costs one kernel
    compilation (a few seconds) in a process that has FA4 installed.
    """
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        generator = torch.Generator("cuda").manual_seed(0)
        q, k, v = (torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.bfloat16, generator=generator)
                   for _ in range(3))  # (batch, heads, tokens, head dim)
        with sdpa_kernel(SDPBackend.MATH):
            reference = torch.nn.functional.scaled_dot_product_attention(q, k, v).float()
        with flash_attention_impl("FA4"), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v).float()
        return bool(torch.linalg.vector_norm(out - reference) <= 0.02 * torch.linalg.vector_norm(reference))
    except Exception:  # noqa: BLE001 - any failure means: do not use FA4 here
        return False


def hopper_attention_backend() -> str | None:
    """The fastest installed attention on a Hopper/Blackwell GPU: "_flash_3" (diffusers' FA3 backend,
    Hopper only), "fa4", or None when only PyTorch's own kernels are there."""
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        return None
    # FA3 ships as its own wheel (``flash_attn_interface``); nothing is downloaded at run time.
    if torch.cuda.get_device_capability() == (9, 0) and importlib.util.find_spec("flash_attn_interface") is not None:
        try:
            import flash_attn_interface  # noqa: F401 - the index also has an empty placeholder of this name

            if hasattr(flash_attn_interface, "flash_attn_func"):
                return "_flash_3"
        except Exception:  # noqa: BLE001
            pass
    return "fa4" if fa4_available() else None


def cache_only(config: SpeedConfig) -> SpeedConfig:
    """The config with every kernel/layout lever off and the step cache kept (for offloaded weights:
    offload hooks move weights during the forward, which compiled graphs and rewrites would fight)."""
    return SpeedConfig(mode=config.mode, cache=config.cache, cache_warmup=config.cache_warmup,
                       cache_interval=config.cache_interval, cache_tail=config.cache_tail,
                       cache_extrapolate=config.cache_extrapolate, fbc_threshold=config.fbc_threshold)


def resolve_attention(config: SpeedConfig) -> SpeedConfig:
    """Replace ``attention="auto"`` by what this machine has (None when nothing better than SDPA)."""
    if config.attention != "auto":
        return config
    return replace(config, attention=hopper_attention_backend())


def resolve_levers(config: SpeedConfig, device: str) -> SpeedConfig:
    """The config as it will run on ``device``: attention resolved, fp8 and the cuDNN cross kernel
    kept only where they run."""
    from daotai.render.fp8 import fp8_supported
    from daotai.render.rewrites import cudnn_attention_supported

    config = resolve_attention(config)
    if config.fp8 and not fp8_supported(device):
        config = replace(config, fp8=False)
    if config.cross_attention == "cudnn" and not cudnn_attention_supported(device):
        config = replace(config, cross_attention=None)
    return config


def apply_levers(pipe: Any, config: SpeedConfig, steps: int) -> list[str]:
    """Apply the model-changing levers in place; returns what was done (for notices)."""
    import torch

    check_config(config)
    done: list[str] = []
    for transformer in _transformers(pipe):
        done += apply_transformer_levers(transformer, config, steps)
    vae = getattr(pipe, "vae", None)
    if vae is not None and config.vae_bf16:
        vae.to(torch.bfloat16)
        done.append("vae bf16")
    if vae is not None and config.vae_channels_last:
        to_channels_last(vae)
        done.append("vae channels-last")
    return done


def apply_transformer_levers(transformer: Any, config: SpeedConfig, steps: int,
                             timesteps_descending: bool = True) -> list[str]:
    """Apply the levers that change one denoising transformer, in place; returns what was done.

    Callers that load a pipeline's transformers one at a time (MiniMax-H3's workflow partitions)
    call this once per transformer as it arrives; ``timesteps_descending``: see IntervalCacheState.
    """
    check_config(config)
    done: list[str] = []
    if config.fuse_qkv:  # before FP8, so the fused (wider) projections are the ones quantised
        done.append(f"{fuse_attention_projections(transformer)} attention projections fused")
    if config.fp8:
        # Before compiling: the compiled block must trace the FP8 modules, not the bf16 ones.
        from daotai.render.fp8 import quantize_repeated_blocks

        done.append(f"{quantize_repeated_blocks(transformer)} linears fp8")
    if config.gelu_epilogue:  # after FP8: an FP8 up-projection keeps its own (compiled) GELU fusion
        from daotai.render.rewrites import fuse_gelu_epilogues

        done.append(f"{fuse_gelu_epilogues(transformer)} GELU epilogues")
    if config.lean_attention:
        from daotai.render.rewrites import lean_wan_attention

        done.append(f"{lean_wan_attention(transformer, config.cross_attention)} lean attention processors")
    if config.attention == "fa4":
        # Served below diffusers: its default (native SDPA) backend stays, and denoise_context
        # points PyTorch's flash SDPA at the FA4 kernels and puts flash first.
        done.append("attention fa4 (flash SDPA)")
    elif config.attention not in (None, "auto") and hasattr(transformer, "set_attention_backend"):
        transformer.set_attention_backend(config.attention)
        done.append(f"attention backend {config.attention}")
    if config.cache == "interval":
        guidance = guidance_steps(steps, config) if config.guidance_interval > 1 else None
        attach_interval_cache(transformer, computed_steps(steps, config), extrapolate=config.cache_extrapolate,
                              descending=timesteps_descending, guidance=guidance)
        done.append("interval cache hook")
    elif config.cache == "fbc":
        from diffusers.hooks import FirstBlockCacheConfig, apply_first_block_cache

        apply_first_block_cache(transformer, FirstBlockCacheConfig(threshold=config.fbc_threshold))
        done.append("first-block cache hook")
    if config.compile_blocks and getattr(transformer, "_repeated_blocks", None):
        # Only the repeated block is compiled: one graph reused 30x compiles in about a minute,
        # and the hook above stays outside the graph (it wraps the whole model's forward).
        if config.cache == "fbc":
            raise BackendError("speed: first-block cache hooks each block; it cannot be combined with compile")
        # fullgraph only with PyTorch's own attention: an external kernel may need a graph break.
        options = {"mode": config.compile_mode} if config.compile_mode else {}
        transformer.compile_repeated_blocks(dynamic=False, fullgraph=config.attention in (None, "auto", "fa4"),
                                            **options)
        done.append("compiled repeated blocks" + (f" ({config.compile_mode})" if config.compile_mode else ""))
    return done


# Per fused projection diffusers creates: the separate projections it replaces (self, cross attention).
_FUSED_REPLACES = {"to_qkv": ("to_q", "to_k", "to_v"), "to_kv": ("to_k", "to_v"), "to_added_kv": ("add_k_proj", "add_v_proj")}


def fuse_attention_projections(transformer: Any) -> int:
    """Fuse each attention module's input projections into one linear (diffusers' ``fuse_projections``).

    Returns how many attention modules were fused. diffusers keeps the separate projections beside
    the fused one; they are never called again once ``fused_projections`` is set, so their modules
    are dropped here and the weights are not held twice (exact mode must not use more memory than
    stock). Modules without ``fuse_projections`` (e.g. LTX's) are left as they are.
    """
    fused = 0
    for module in list(transformer.modules()):
        if not callable(getattr(module, "fuse_projections", None)) or getattr(module, "fused_projections", False):
            continue
        if not all(hasattr(module, name) for name in ("to_q", "to_k", "to_v")):
            continue
        module.fuse_projections()
        if not getattr(module, "fused_projections", False):
            continue
        for created, replaced in _FUSED_REPLACES.items():
            if getattr(module, created, None) is not None:
                for name in replaced:
                    setattr(module, name, None)
        fused += 1
    return fused


def to_channels_last(module: Any) -> None:
    """Convolution weights to channels-last in place: NDHWC for 3D kernels, NHWC for 2D ones."""
    import torch

    for submodule in module.modules():
        weight = getattr(submodule, "weight", None)
        if isinstance(submodule, torch.nn.Conv3d) and weight is not None:
            weight.data = weight.data.contiguous(memory_format=torch.channels_last_3d)
        elif isinstance(submodule, torch.nn.Conv2d) and weight is not None:
            weight.data = weight.data.contiguous(memory_format=torch.channels_last)


@contextlib.contextmanager
def denoise_context(config: SpeedConfig) -> Iterator[None]:
    """Context around the pipeline call: the preferred SDPA backend first, the others as fallbacks.

    With ``attention="fa4"`` PyTorch's flash SDPA is served by FlashAttention-4 inside the context
    (a process-wide switch, restored on exit) and flash goes first whatever ``sdpa`` says.
    """
    sdpa = "flash" if config.attention == "fa4" else config.sdpa
    if sdpa is None:
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kernels = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    preferred = kernels[sdpa]
    # A priority order rather than one kernel alone: a shape or dtype the preferred kernel
    # rejects (e.g. an odd head size in a fine-tuned model) falls back instead of failing.
    order = [preferred] + [k for k in kernels.values() if k != preferred]
    with contextlib.ExitStack() as stack:
        if config.attention == "fa4":
            stack.enter_context(flash_attention_impl("FA4"))
        stack.enter_context(sdpa_kernel(order, set_priority=True))
        stack.enter_context(compile_tag_context(config))
        yield


def compile_tag_context(config: SpeedConfig) -> Any:
    """The compile-cache tag of ``config``'s attention choice, for the duration (nothing to tag: a null context)."""
    sdpa = "flash" if config.attention == "fa4" else config.sdpa
    if not config.compile_blocks or sdpa is None:
        return contextlib.nullcontext()
    return _compile_cache_tag(f"daotai-sdpa-{sdpa}-flash-{'fa4' if config.attention == 'fa4' else 'builtin'}")


def scope_to_forward(module: Any, config: SpeedConfig) -> None:
    """Apply ``config``'s attention kernel choice (denoise_context) around ``module``'s forward only.

    For pipelines whose call also decodes with attention (MiniMax-H3's VAE decoder): the kernel
    order chosen for the transformer's shapes is not imposed on the decoder, which then runs
    exactly as in the stock pipeline. ``inspect.signature(module.forward)`` still reads the
    original parameters (diffusers' modular blocks select the transformer's inputs by them).
    """
    import functools

    if config.sdpa is None and config.attention != "fa4":
        return
    original = module.forward

    @functools.wraps(original)
    def forward(*args: Any, **kwargs: Any) -> Any:
        with denoise_context(config):
            return original(*args, **kwargs)

    module.forward = forward


@contextlib.contextmanager
def _compile_cache_tag(tag: str) -> Iterator[None]:
    """Make the attention choice part of PyTorch's compile-cache keys for the duration.

    Compilation fixes the SDPA kernel when it traces the block, but the on-disk graph caches are
    keyed on the model graph alone: a block compiled under cuDNN attention was reused by a later
    FA4 contender (and one compiled under FA4 ran as plain flash attention after FA4 was switched
    off, slower than stock: 1.47 vs 1.24 s per step on the H200), across contenders and across
    processes. Tagging the keys keeps one compiled artifact per attention choice.
    """
    import torch.compiler.config as compiler_config

    if not hasattr(compiler_config, "cache_key_tag"):  # older PyTorch: nothing to tag
        yield
        return
    user_tag = compiler_config.cache_key_tag
    with compiler_config.patch(cache_key_tag=f"{user_tag}+{tag}" if user_tag else tag):
        yield


@contextlib.contextmanager
def flash_attention_impl(name: str) -> Iterator[None]:
    """PyTorch's flash SDPA served by another implementation (e.g. "FA4") for the duration."""
    import torch.nn.attention as attention

    previous = attention.current_flash_attention_impl()
    attention.activate_flash_attention_impl(name)
    try:
        yield
    finally:
        if previous is None:
            attention.restore_flash_attention_impl()
        else:
            attention.activate_flash_attention_impl(previous)


# ------------------------------------------------------------------ fixed-schedule step cache


def _noise_level(timestep: Any) -> float:
    """The largest element of a timestep tensor (or a number) as a float.

    Per-token timesteps (conditioned frames at 0, the rest at t) still identify the step by their max.
    """
    if hasattr(timestep, "max"):
        return float(timestep.max())
    return float(timestep)


class IntervalCacheState:
    """Which step the transformer is on, counted from the timesteps it sees, and the last outputs."""

    def __init__(self, schedule: list[bool], extrapolate: bool = False, descending: bool = True,
                 guidance: list[bool] | None = None):
        self.schedule = schedule
        # per step, whether the passes after the first run (None: whenever the schedule runs the first)
        self.guidance = guidance
        self.extrapolate = extrapolate
        # Flow-matching pipelines pass noise levels that fall step by step; MiniMax-H3 passes the
        # share of denoising done, which rises. A step back against the direction starts a new video.
        self.descending = descending
        self.computed = 0  # transformer passes run since attaching (kept across resets)
        self.reused = 0  # passes answered from the cache since attaching
        self.reset()

    def reset(self) -> None:
        """Forget the video in progress."""
        self.step = -1
        self.branch = 0
        self.last_t: float | None = None
        self.outputs: dict[int, Any] = {}  # guidance branch index → last computed output
        self.times: dict[int, float] = {}  # guidance branch index → timestep of that output
        self.previous: dict[int, tuple[float, Any]] = {}  # branch → (timestep, output) computed before it
        self.offsets: dict[int, Any] = {}  # branch → its output minus branch 0's, when last both computed

    def advance(self, t: float) -> None:
        """Update step/branch from the call's timestep (monotonic within one video, in ``descending``'s direction)."""
        restarted = self.last_t is not None and (t > self.last_t if self.descending else t < self.last_t)
        if self.last_t is None or restarted:
            self.reset()  # a new video: timesteps restart
            self.step = 0
        elif t != self.last_t:
            self.step += 1
            self.branch = 0
        else:
            self.branch += 1  # same timestep: the next guidance pass (cond, then uncond)
        self.last_t = t

    def should_compute(self) -> bool:
        """True when this call must run the transformer."""
        if self.branch not in self.outputs or self.step >= len(self.schedule):
            return True
        return self.schedule[self.step] and not self.guided()

    def guided(self) -> bool:
        """True when this pass is answered from branch 0's fresh output plus the branch's offset."""
        return (self.guidance is not None and self.branch > 0 and self.step < len(self.guidance)
                and self.schedule[self.step] and not self.guidance[self.step]
                and self.branch in self.offsets and self.times.get(0) == self.last_t)

    def store(self, output: Any) -> None:
        """Keep a computed output of the current branch (and the one before it, for extrapolation)."""
        if self.branch >= MAX_BRANCHES:  # a caller that repeats timesteps must not grow the cache
            return
        if self.extrapolate and self.branch in self.outputs:
            self.previous[self.branch] = (self.times[self.branch], self.outputs[self.branch])
        if self.guidance is not None and self.branch > 0 and self.times.get(0) == self.last_t:
            self.offsets[self.branch] = _combine_first(output, self.outputs[0], lambda a, b: a - b)
        self.outputs[self.branch] = output
        self.times[self.branch] = self.last_t if self.last_t is not None else 0.0

    def reused_output(self) -> Any:
        """The answer for a skipped pass: the branch's last output, or its linear extrapolation to now;
        for a guided pass, branch 0's output of this step plus the branch's offset (kept as the
        branch's last output, so a later skipped step repeats it)."""
        if self.guided():
            output = _combine_first(self.outputs[0], self.offsets[self.branch], lambda a, b: a + b)
            self.outputs[self.branch] = output
            self.times[self.branch] = self.last_t if self.last_t is not None else 0.0
            return output
        last = self.outputs[self.branch]
        if not self.extrapolate or self.branch not in self.previous or self.last_t is None:
            return last
        previous_t, previous = self.previous[self.branch]
        last_t = self.times[self.branch]
        if previous_t == last_t:
            return last
        weight = (self.last_t - last_t) / (last_t - previous_t)  # > 0: timesteps decrease
        return _combine_first(last, previous, lambda a, b: a + (a - b) * weight)


def _combine_first(last: Any, previous: Any, combine: Any) -> Any:
    """Apply ``combine`` to the main tensor of two model outputs (a tensor, a tuple/list whose first
    item is the tensor, or a diffusers output with ``.sample``), keeping the rest of ``last``."""
    if isinstance(last, (tuple, list)):
        return type(last)([combine(last[0], previous[0]), *last[1:]])
    if hasattr(last, "sample") and hasattr(last, "__dataclass_fields__"):
        return replace(last, sample=combine(last.sample, previous.sample))
    return combine(last, previous)


def attach_interval_cache(transformer: Any, schedule: list[bool], extrapolate: bool = False,
                          descending: bool = True, guidance: list[bool] | None = None) -> IntervalCacheState:
    """Register a diffusers hook that reuses the transformer's last output on unscheduled steps
    (``extrapolate``: extrapolated from the last two computed outputs once there are two;
    ``descending``: whether the timesteps the transformer is called with fall during a video;
    ``guidance``: per step, whether passes after the first run, see ``SpeedConfig.guidance_interval``)."""
    from diffusers.hooks import HookRegistry, ModelHook

    state = IntervalCacheState(schedule, extrapolate, descending, guidance)

    class IntervalCacheHook(ModelHook):
        """Skips the whole forward on steps the schedule marks False (per guidance branch)."""

        _is_stateful = True

        def new_forward(self, module: Any, *args: Any, **kwargs: Any) -> Any:
            timestep = kwargs.get("timestep", args[1] if len(args) > 1 else None)
            state.advance(_noise_level(timestep) if timestep is not None else 0.0)
            if state.should_compute():
                output = self.fn_ref.original_forward(*args, **kwargs)
                state.store(output)
                state.computed += 1
                return output
            state.reused += 1
            return state.reused_output()

        def reset_state(self, module: Any) -> Any:
            state.reset()
            return module

    registry = HookRegistry.check_if_exists_or_initialize(transformer)
    registry.register_hook(IntervalCacheHook(), "daotai_interval_cache")
    transformer._daotai_interval_cache = state  # so callers can read computed/reused counts
    return state
