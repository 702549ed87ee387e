"""Peak unified memory of MiniMax-H3 through MLX (h3-mlx) per Mac size, bit width and canvas.

Pure arithmetic from the released transformer config (:class:`H3TransformerConfig` defaults)
and the catalog's counts for the parts not yet ported (Qwen3-VL conditioner, video and audio
VAEs). Nothing here imports MLX: ``daotai doctor`` can print the table on any machine.

A generation has three phases on one memory pool, and the peak is the largest:

- encode: the conditioner and the VAEs (references are VAE-encoded beside it);
- denoise: one transformer partition (t2va/fl2va read ``transformer``, ref2va
  ``transformer_ref``: never both), the VAEs and one block's activations over the
  packed sequence. The conditioner is released before the transformer loads, as the
  ``h3`` backend does; MiniMax-H3 is guidance-distilled, so one pass a step;
- decode: the partition (kept for the next shot), the VAEs and the video decode's activations.

Bit widths: 16 is the checkpoint as published (bfloat16 blocks, float32 input/output
projections and timestep MLP); 8 and 4 quantise every block linear and the text refiner's
(AdaLN projections included: they are ~40 % of a block) with a 16-bit scale and bias per
group, since the source weights are bfloat16. The conditioner is planned at the same bit
width as the transformer and the VAEs in float32, as ported. These are estimates from parameter
counts, to be checked on a Mac with ``scripts/mac-check.sh``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from daotai import catalog
from daotai.errors import BackendError
from daotai.mlx.h3_config import MODALITIES, H3TransformerConfig
from daotai.mlx.memory import GB, MAC_SIZES_GB, working_set_bytes

RELEASED = H3TransformerConfig()  # the published checkpoint's transformer (both partitions)
H3_BITS = (4, 8, 16)
# Canvases (width, height): both axes multiples of 32 (16x VAE x 2x2 patch). 768p is the
# released model's native canvas (768 short edge, 1344x768 at 16:9); 720 rounds to 704.
H3_CANVASES = {"480p": (864, 480), "720p": (1280, 704), "768p": (1344, 768)}
FPS = 24  # MiniMax-H3 generates at a fixed 24 fps
DEFAULT_FRAMES = 124  # 17 * 7 + 5: the shortest generation of at least 5 s
AUDIO_LATENTS_PER_SECOND = 40
AUDIO_CHANNELS = 2  # stereo, packed channel-major: two rows per audio latent
PIXELS_PER_TOKEN_EDGE = 32  # 16x spatial VAE x 2x2 patch
TEXT_TOKENS = 512  # a long shot prompt with its reference labels; the text rows are a rounding error beside video
PICTURE_ROWS = 4096  # a picture reference, encoded at a 2048-pixel short edge (the h3 backend's figure)
# Live bytes per packed row in one block, counted from H3Transformer's block at 16 bits: at the
# attention step ~10 residual-width tensors (the row, six gathered modulation rows, the norm
# and its modulation) and ~14 attention-width ones (q, k, v before and after their norms, the
# rotary temporaries, the attention output); at the FFN step the same residual ones and ~4
# FFN-width (the two SwiGLU halves, the gate's activation, the product). MLX's fused attention
# on Metal keeps no L x L score matrix.
HIDDEN_TENSORS = 10
INNER_TENSORS = 14
FFN_TENSORS = 4
# One block measured with MLX on Linux CPU (float32; widths 512 to 1024, 4 to 8 heads x 128,
# 256 to 2048 rows; the L x L scores of the CPU attention fitted out) held 0.94x to 1.25x of the
# count above, the most at the shortest sequences: the margin covers that spread.
ACTIVATION_MARGIN = 1.5
ACTIVATION_BYTES = 2
OVERHEAD_BYTES = 2.0 * GB  # MLX's allocator cache and the process itself (an estimate)
VAE_BYTES_PER_PARAM = 4.0  # the MLX VAE decoders run in float32 (the audio one degrades audibly in bfloat16)
DEFAULT_GROUP_SIZE = 64
SCALE_BITS = 16  # MLX keeps each group's scale and bias in the source weights' dtype (bfloat16)


@dataclass(frozen=True)
class H3Params:
    """Parameters of one transformer partition, by how they are stored."""

    quantizable: int  # block and refiner linears: at the chosen bit width
    block_other: int  # norms and AdaLN biases in the block stack: 16-bit
    float32: int  # input/output projections and the timestep MLP: float32 as published
    context_embedder: int  # text projection: 16-bit

    @property
    def total(self) -> int:
        return self.quantizable + self.block_other + self.float32 + self.context_embedder


def h3_parameter_counts(cfg: H3TransformerConfig = RELEASED) -> H3Params:
    """Exact parameter counts of one MiniMaxH3Transformer3DModel partition from its config."""
    d, inner, ffn, ted = cfg.hidden_size, cfg.inner_dim, cfg.ffn_dim, cfg.time_embed_dim
    attention = 3 * d * inner + inner * d  # to_q, to_k, to_v, to_out.0 (no biases)
    feed_forward = d * 2 * ffn + ffn * d  # SwiGLU net.0.proj (value and gate), net.2 (no biases)
    plain_norms = 2 * d + 2 * cfg.attention_head_dim  # norm1, norm2, norm_q, norm_k
    modulation = ted * 6 * d * MODALITIES
    quantizable = cfg.num_layers * (attention + feed_forward + modulation)
    quantizable += cfg.num_refiner_layers * (attention + feed_forward)
    block_other = cfg.num_layers * (plain_norms + 6 * d * MODALITIES) + cfg.num_refiner_layers * plain_norms
    block_other += d + d + ted * 2 * d + 2 * d  # refiner final_norm, norm_out (norm, linear)
    patch, audio = cfg.video_patch_dim, cfg.audio_in_channels
    float32 = (patch * d + d) + (audio * d + d) + (d * patch + patch) + (d * audio + audio)
    float32 += cfg.freq_dim * cfg.time_embed_hidden_dim + cfg.time_embed_hidden_dim
    float32 += cfg.time_embed_hidden_dim * ted + ted
    return H3Params(quantizable, block_other, float32, cfg.text_dim * d + d)


def h3_transformer_bytes(params: H3Params, bits: int, group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """Bytes of one partition's weights at ``bits`` (16: as published)."""
    if bits not in H3_BITS:
        raise BackendError(f"h3-mlx: bits={bits} not allowed; rule: bits in {H3_BITS}")
    per_weight = 16.0 if bits == 16 else bits + 2.0 * SCALE_BITS / group_size
    return (params.quantizable * per_weight / 8.0 + (params.block_other + params.context_embedder) * 2.0
            + params.float32 * 4.0)


def block_bytes_per_row(cfg: H3TransformerConfig, bytes_per_value: float = ACTIVATION_BYTES) -> float:
    """Live activation bytes per packed row inside one block (the larger of its attention and FFN steps)."""
    attention_step = HIDDEN_TENSORS * cfg.hidden_size + INNER_TENSORS * cfg.inner_dim
    ffn_step = HIDDEN_TENSORS * cfg.hidden_size + FFN_TENSORS * cfg.ffn_dim
    return max(attention_step, ffn_step) * bytes_per_value


def latent_frames(frames: int) -> int:
    """Latent frames of a 17n+5 frame count: 5 latents per 17 frames, plus 2."""
    if frames < 5 or (frames - 5) % 17:
        raise BackendError(f"h3-mlx: frames={frames} not allowed; rule: frames = 17 * n + 5 (22, 39, …, 124 for 5 s)")
    return (frames - 5) // 17 * 5 + 2


def packed_rows(width: int, height: int, frames: int, workflow: str = "t2va", pictures: int = 0,
                text_tokens: int = TEXT_TOKENS) -> int:
    """Length of the packed sequence: text, conditioning rows, target audio and target video rows."""
    for name, value in (("width", width), ("height", height)):
        if value <= 0 or value % PIXELS_PER_TOKEN_EDGE:
            raise BackendError(f"h3-mlx: {name}={value} not allowed; rule: a positive multiple of "
                               f"{PIXELS_PER_TOKEN_EDGE}")
    per_frame = (width // PIXELS_PER_TOKEN_EDGE) * (height // PIXELS_PER_TOKEN_EDGE)
    video = latent_frames(frames) * per_frame
    audio = round(frames / FPS * AUDIO_LATENTS_PER_SECOND) * AUDIO_CHANNELS
    if workflow == "t2va":
        condition = 0
    elif workflow == "fl2va":
        condition = per_frame  # the first-frame keyframe
    elif workflow == "ref2va":
        # the previz video reference (same canvas and length, with its soundtrack) and the pictures
        condition = video + audio + pictures * PICTURE_ROWS
    else:
        raise BackendError(f"h3-mlx: workflow={workflow!r} not allowed; rule: one of t2va, fl2va, ref2va")
    return text_tokens + condition + audio + video


@dataclass(frozen=True)
class H3Sizes:
    """What a plan is made from when it is not the released model: a folder's transformer config and the
    conditioner's and VAEs' parameter counts (read from its safetensors headers)."""

    cfg: H3TransformerConfig
    conditioner_params: float
    vae_params: float


def folder_h3_sizes(folder: Path, transformer_folder: Path | None = None) -> H3Sizes:
    """The sizes of a MiniMax-H3 diffusers folder from configs and safetensors headers (no weights read);
    ``transformer_folder``: where the partition's config is (a converted folder), else ``folder``."""
    import json

    from daotai.mlx.memory import safetensors_header

    def params(sub: str) -> int:
        total = 0
        for path in sorted((Path(folder) / sub).glob("*.safetensors")):
            total += sum(math.prod(info["shape"]) if info["shape"] else 1
                         for info in safetensors_header(path).values())
        return total

    cfg_path = Path(transformer_folder or folder) / "transformer" / "config.json"
    if not cfg_path.is_file():
        cfg_path = Path(transformer_folder or folder) / "transformer_ref" / "config.json"
    if not cfg_path.is_file():
        raise BackendError(f"{folder}: no transformer/config.json or transformer_ref/config.json; expected a "
                           "MiniMax-H3 folder")
    cfg = H3TransformerConfig.from_dict(json.loads(cfg_path.read_text(encoding="utf-8")))
    return H3Sizes(cfg, float(params("text_encoder")), float(params("vae") + params("audio_vae")))


@dataclass(frozen=True)
class H3Peak:
    """The estimate for one request: the rows, each phase's peak and the largest."""

    bits: int
    width: int
    height: int
    frames: int
    workflow: str
    rows: int
    transformer_bytes: float
    phases: tuple[tuple[str, float], ...]

    @property
    def peak_bytes(self) -> float:
        return max(b for _, b in self.phases)


def h3_peak(bits: int, width: int, height: int, frames: int = DEFAULT_FRAMES, workflow: str = "t2va",
            pictures: int = 0, group_size: int = DEFAULT_GROUP_SIZE,
            cfg: H3TransformerConfig = RELEASED, conditioner_bits: int | None = None,
            sizes: H3Sizes | None = None) -> H3Peak:
    """Peak unified memory of one h3-mlx generation (see the module docstring for the phases).

    ``conditioner_bits``: None plans the conditioner at the transformer's bit width (an MLX
    conditioner quantised alike); 16 is the torch conditioner the backend runs today.
    ``sizes``: a folder's sizes instead of the released model's (the catalog's counts).
    """
    footprint = catalog.footprint("minimax-h3")
    assert footprint is not None  # the catalog always carries MiniMax-H3
    if sizes is not None:
        cfg = sizes.cfg
    conditioner_params = sizes.conditioner_params if sizes is not None else footprint.text_encoder_b * 1e9
    vae_params = sizes.vae_params if sizes is not None else footprint.vae_b * 1e9
    transformer = h3_transformer_bytes(h3_parameter_counts(cfg), bits, group_size)
    cond_bits = bits if conditioner_bits is None else conditioner_bits
    per_weight = 16.0 if cond_bits == 16 else cond_bits + 2.0 * SCALE_BITS / group_size
    conditioner = conditioner_params * per_weight / 8.0
    vaes = vae_params * VAE_BYTES_PER_PARAM
    rows = packed_rows(width, height, frames, workflow, pictures)
    per_row = block_bytes_per_row(cfg) * ACTIVATION_MARGIN
    # the video decode: ~8 frames in flight at the catalog's bytes a pixel, and the decoded clip itself
    decode = width * height * (8 * footprint.vae_bytes_per_pixel + frames * 3 * 4.0)
    phases = (
        ("encode", conditioner + vaes + OVERHEAD_BYTES),
        ("denoise", transformer + vaes + rows * per_row + OVERHEAD_BYTES),
        ("decode", transformer + vaes + decode + OVERHEAD_BYTES),
    )
    return H3Peak(bits, width, height, frames, workflow, rows, transformer, phases)


@dataclass(frozen=True)
class MacFit:
    """One cell of the Mac table."""

    mac_gb: int
    bits: int
    canvas: str
    peak_bytes: float
    working_set_bytes: int

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.working_set_bytes


def h3_mac_table(frames: int = DEFAULT_FRAMES, workflow: str = "ref2va", pictures: int = 2,
                 macs: tuple[int, ...] = MAC_SIZES_GB, conditioner_bits: int | None = None) -> list[MacFit]:
    """Every (Mac size, bit width, canvas) with its peak and whether it fits the GPU working set.

    By default a ref2va shot with its previz video reference and two character pictures, the
    h3 backend's usual shot and the largest of its workflows.
    """
    out = []
    for canvas, (width, height) in H3_CANVASES.items():
        for bits in H3_BITS:
            peak = h3_peak(bits, width, height, frames, workflow, pictures,
                           conditioner_bits=conditioner_bits).peak_bytes
            out.extend(MacFit(gb, bits, canvas, peak, working_set_bytes(gb)) for gb in macs)
    return out


def smallest_mac(bits: int, canvas: str, frames: int = DEFAULT_FRAMES, workflow: str = "ref2va",
                 pictures: int = 2) -> int | None:
    """The smallest listed Mac (GB) a request fits, or None when not even the largest."""
    fits = [c.mac_gb for c in h3_mac_table(frames, workflow, pictures) if c.bits == bits and c.canvas == canvas
            and c.fits]
    return min(fits) if fits else None


def check_h3_fits(bits: int, width: int, height: int, unified_gb: float, frames: int = DEFAULT_FRAMES,
                  workflow: str = "t2va", pictures: int = 0, conditioner_bits: int | None = None) -> H3Peak:
    """The estimate when it fits a Mac of ``unified_gb``; else BackendError naming what would fit."""
    have = working_set_bytes(unified_gb)
    return check_h3_budget(bits, width, height, have, f"a {unified_gb:g} GB Mac lets the GPU use ~{have / GB:.0f} GB",
                           frames, workflow, pictures, conditioner_bits)


def check_h3_budget(bits: int, width: int, height: int, budget_bytes: float, budget_source: str,
                    frames: int = DEFAULT_FRAMES, workflow: str = "t2va", pictures: int = 0,
                    conditioner_bits: int | None = None, sizes: H3Sizes | None = None,
                    group_size: int = DEFAULT_GROUP_SIZE) -> H3Peak:
    """The estimate when it fits ``budget_bytes``; else BackendError naming the budget's source and what would fit:
    the least quantisation that fits, else the largest smaller canvas."""
    def peak(b: int, w: int, h: int) -> float:
        return h3_peak(b, w, h, frames, workflow, pictures, group_size, conditioner_bits=conditioner_bits,
                       sizes=sizes).peak_bytes

    est = h3_peak(bits, width, height, frames, workflow, pictures, group_size, conditioner_bits=conditioner_bits,
                  sizes=sizes)
    if est.peak_bytes <= budget_bytes:
        return est
    options = []
    for other in sorted(set(H3_BITS) - {bits}, reverse=True):  # the least quantisation that fits
        if other < bits and peak(other, width, height) <= budget_bytes:
            options.append(f"--bits {other}")
            break
    for canvas, (w, h) in sorted(H3_CANVASES.items(), key=lambda item: -item[1][0] * item[1][1]):  # largest first
        if w * h < width * height and peak(bits, w, h) <= budget_bytes:
            options.append(f"the {canvas} canvas ({w}x{h})")
            break
    hint = " or ".join(options) if options else "a larger Mac (nothing smaller at these settings fits)"
    raise BackendError(
        f"h3-mlx: {bits}-bit at {width}x{height}, {frames} frames ({workflow}) needs ~{math.ceil(est.peak_bytes / GB)} "
        f"GB but {budget_source}; rule: peak <= working set; use {hint}"
    )


def format_mac_table(cells: list[MacFit]) -> str:
    """The table as text: one line per (canvas, bits), peak GB and a fit mark per Mac size."""
    macs = sorted({c.mac_gb for c in cells})
    lines = ["canvas  bits  peak GB  " + "  ".join(f"{gb:>4}" for gb in macs)]
    keys = sorted({(c.canvas, c.bits) for c in cells}, key=lambda k: (list(H3_CANVASES).index(k[0]), k[1]))
    for canvas, bits in keys:
        row = {c.mac_gb: c for c in cells if (c.canvas, c.bits) == (canvas, bits)}
        marks = "  ".join(f"{'yes' if row[gb].fits else 'no':>4}" for gb in macs)
        lines.append(f"{canvas:<6}  {bits:>4}  {row[macs[0]].peak_bytes / GB:>7.1f}  {marks}")
    return "\n".join(lines)
