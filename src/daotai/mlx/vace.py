"""Wan-VACE in MLX: the control branch beside the Wan2.1 transformer, and its inputs.

The model is diffusers' WanVACETransformer3DModel in MLX terms (parameter names mirror it, so
its safetensors load through :mod:`daotai.mlx.weights`):

- the control latents (96 channels: 16 + 16 VAE channels of the video outside and inside the
  mask, then 64 channels of the mask folded 8x8 into latent pixels) are patch-embedded by
  their own embedding (``vace_patch_embedding``) into the same token grid as the latents;
- a stack of control blocks (``vace_blocks``; main Wan blocks with a linear ``proj_in`` on the
  first, which adds the latents' tokens, and a linear ``proj_out`` on each) runs once per
  forward pass before the main blocks; block k's ``proj_out`` gives hint k;
- after main block ``vace_layers[k]`` the hint k, times the per-layer conditioning scale, is
  added to the hidden states.

The inputs are prepared as diffusers' WanVACEPipeline prepares them: frames and reference
images in [-1, 1], the video split by the mask into inactive (outside) and reactive (inside)
parts encoded separately, every latent normalised per channel, and each reference image
letterboxed on a white canvas of the video's size, encoded as one frame and put in front of
the video latents (the last reference first, as the pipeline's loop leaves them), with
zero latents in the reactive half and a zero mask. The noise gets as many extra latent
frames; they are dropped before decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from daotai.errors import BackendError
from daotai.mlx.transformer import Block, WanTransformer, WanTransformerConfig, rope_tables

SPATIAL, TEMPORAL = 8, 4  # Wan2.1 VAE compression
MASK_CHANNELS = SPATIAL * SPATIAL  # the mask's 8x8 pixels of one latent pixel become channels


@dataclass(frozen=True)
class WanVACEConfig(WanTransformerConfig):
    """The Wan transformer's config plus where control hints enter and the control channels."""

    vace_layers: tuple[int, ...] = (0, 5, 10, 15, 20, 25, 30, 35)
    vace_in_channels: int = 96

    def __post_init__(self):
        layers = self.vace_layers
        if not layers or 0 not in layers or max(layers) >= self.num_layers or len(set(layers)) != len(layers):
            raise BackendError(f"VACE config: vace_layers={list(layers)} must be distinct block indexes below "
                               f"num_layers={self.num_layers} and include 0")

    @classmethod
    def from_dict(cls, cfg: dict) -> "WanVACEConfig":
        """Build from a diffusers WanVACETransformer3DModel config.json dict."""
        cfg = dict(cfg)
        if "vace_layers" in cfg:
            cfg["vace_layers"] = tuple(int(i) for i in cfg["vace_layers"])
        return super().from_dict(cfg)  # type: ignore[return-value]


class VACEBlock(Block):
    """A Wan block on the control stream; the first one also takes in the latents' tokens."""

    def __init__(self, cfg: WanTransformerConfig, takes_input: bool):
        super().__init__(cfg)
        d = cfg.inner_dim
        self.takes_input = takes_input
        if takes_input:
            self.proj_in = nn.Linear(d, d)
        self.proj_out = nn.Linear(d, d)

    def run(self, x: mx.array, control: mx.array, context: mx.array, tproj: mx.array, rope):
        """x: the latents' tokens (B, L, D); control (B, L, D) -> (hint (B, L, D), next control (B, L, D))."""
        if self.takes_input:
            control = self.proj_in(control) + x
        control = Block.__call__(self, control, context, tproj, rope)
        return self.proj_out(control), control


class WanVACETransformer(WanTransformer):
    """Wan2.1 DiT with the VACE control branch; call with latents, timestep, text and control latents."""

    def __init__(self, cfg: WanVACEConfig):
        super().__init__(cfg)
        pt, ph, pw = cfg.patch_size
        self.vace_patch_embedding = nn.Linear(cfg.vace_in_channels * pt * ph * pw, cfg.inner_dim)
        self.vace_blocks = [VACEBlock(cfg, takes_input=i == 0) for i in range(len(cfg.vace_layers))]

    def __call__(self, latents: mx.array, timestep: mx.array, text: mx.array, control: mx.array | None = None,
                 scale: Sequence[float] | None = None) -> mx.array:
        """latents (B, 16, F, H, W), timestep (B,), text (B, S, text_dim), control (B, 96, F_c, H, W) with
        F_c <= F, scale: one weight per control block (default 1) -> velocity (B, 16, F, H, W)."""
        cfg: WanVACEConfig = self.cfg  # type: ignore[assignment]
        if control is None:
            raise BackendError("wan-vace-mlx: the VACE transformer needs control latents")
        scale = [1.0] * len(cfg.vace_layers) if scale is None else list(scale)
        if len(scale) != len(cfg.vace_layers):
            raise BackendError(f"conditioning_scale: {len(scale)} values for {len(cfg.vace_layers)} VACE layers")
        x, grid = self.patchify(latents, self.patch_embedding)
        c, _ = self.patchify(control.astype(x.dtype), self.vace_patch_embedding)
        if c.shape[1] > x.shape[1]:
            raise BackendError(f"wan-vace-mlx: control has {c.shape[1]} patches, the latents {x.shape[1]}")
        if c.shape[1] < x.shape[1]:  # a shorter control leaves the last tokens uncontrolled (zeros), as diffusers
            c = mx.concatenate([c, mx.zeros((c.shape[0], x.shape[1] - c.shape[1], c.shape[2]), c.dtype)], axis=1)
        rope = rope_tables(cfg.attention_head_dim, cfg.rope_max_seq_len, grid)
        temb, tproj, context = self.embed_conditions(timestep, text)
        hints = []
        for blk, weight in zip(self.vace_blocks, scale, strict=True):
            hint, c = blk.run(x, c, context, tproj, rope)
            hints.append(hint * weight)
        # hints enter in the blocks' order: the k-th control layer met gets hint k
        pending = iter(hints)
        layers = set(cfg.vace_layers)
        for i, blk in enumerate(self.blocks):
            x = blk(x, context, tproj, rope)
            if i in layers:
                x = x + next(pending)
        return self.unpatchify(x, temb, latents.shape)


@dataclass(frozen=True)
class ControlledModel:
    """The VACE transformer with this shot's control latents and scales bound: called like a WanTransformer."""

    transformer: WanVACETransformer
    control: mx.array
    scale: tuple[float, ...]

    def __call__(self, latents: mx.array, timestep: mx.array, text: mx.array) -> mx.array:
        return self.transformer(latents, timestep, text, self.control, self.scale)


# ---- inputs, prepared as diffusers' WanVACEPipeline prepares them ----

def frames_to_video(frames: Sequence[np.ndarray]) -> mx.array:
    """uint8 RGB frames, each (H, W, 3) -> video (1, 3, F, H, W) float32 in [-1, 1]."""
    stack = np.stack([np.asarray(f) for f in frames]).astype(np.float32) / 255.0  # (F, H, W, 3)
    return mx.array((2.0 * stack - 1.0).transpose(3, 0, 1, 2)[None])


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """(C, H, W) float32 -> (C, height, width): bilinear with half-pixel centres and no antialiasing
    (torch's interpolate(mode="bilinear", align_corners=False), which the pipeline uses)."""

    def taps(n_in: int, n_out: int):
        src = np.maximum((np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5, 0.0)
        lo = np.floor(src).astype(np.int64)
        lo = np.minimum(lo, n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (src - lo).astype(np.float32)

    y0, y1, wy = taps(image.shape[1], height)
    x0, x1, wx = taps(image.shape[2], width)
    rows = image[:, y0] * (1 - wy)[None, :, None] + image[:, y1] * wy[None, :, None]  # (C, height, W)
    return rows[:, :, x0] * (1 - wx)[None, None, :] + rows[:, :, x1] * wx[None, None, :]


def reference_canvas(image, height: int, width: int) -> mx.array:
    """A reference image (PIL) scaled to fit (height, width), centred on white: (3, height, width) in [-1, 1].

    As the pipeline does: its sides first rounded down to multiples of 8 (a Lanczos resize when that
    changes them), then a bilinear scale to fit inside the video, then letterboxed on white (1.0)."""
    from PIL import Image

    image = image.convert("RGB")
    w8, h8 = image.width - image.width % SPATIAL, image.height - image.height % SPATIAL
    if (w8, h8) != image.size:
        image = image.resize((w8, h8), resample=Image.Resampling.LANCZOS)
    pixels = (2.0 * (np.asarray(image).astype(np.float32) / 255.0) - 1.0).transpose(2, 0, 1)  # (3, h, w)
    scale = min(height / h8, width / w8)
    new_h, new_w = int(h8 * scale), int(w8 * scale)
    canvas = np.ones((3, height, width), dtype=np.float32)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[:, top:top + new_h, left:left + new_w] = resize_bilinear(pixels, new_h, new_w)
    return mx.array(canvas)


def nearest_exact(n_in: int, n_out: int) -> np.ndarray:
    """Source indexes of torch's 'nearest-exact' resampling from n_in to n_out samples."""
    return np.minimum(np.floor((np.arange(n_out) + 0.5) * (n_in / n_out)).astype(np.int64), n_in - 1)


def fold_mask(mask: np.ndarray, references: int) -> mx.array:
    """mask (F, H, W) in [0, 1] -> (64, references + ceil(F / 4), H / 8, W / 8): each latent pixel's 8x8
    mask pixels as channels, time resampled nearest-exact, zero frames in front for the references."""
    f, h, w = mask.shape
    folded = mask.reshape(f, h // SPATIAL, SPATIAL, w // SPATIAL, SPATIAL).transpose(2, 4, 0, 1, 3)
    folded = folded.reshape(MASK_CHANNELS, f, h // SPATIAL, w // SPATIAL)
    folded = folded[:, nearest_exact(f, (f + TEMPORAL - 1) // TEMPORAL)]
    pad = np.zeros((MASK_CHANNELS, references, *folded.shape[2:]), dtype=np.float32)
    return mx.array(np.concatenate([pad, folded.astype(np.float32)], axis=1))


def control_latents(encoder, video: mx.array, references: Sequence[mx.array] = (),
                    mask: np.ndarray | None = None) -> mx.array:
    """The VACE control input (1, 96, len(references) + T, H/8, W/8) of one shot.

    video (1, 3, F, H, W) in [-1, 1], F = 1 + 4k, H and W multiples of 16; references (3, H, W) canvases
    (see reference_canvas); mask (F, H, W) in [0, 1], 1 where the model generates (None: everywhere).
    """
    _, _, f, h, w = video.shape
    if h % (2 * SPATIAL) or w % (2 * SPATIAL):
        raise BackendError(f"wan-vace-mlx: control video {w}x{h} must have sides that are multiples of 16")
    soft = np.ones((f, h, w), np.float32) if mask is None else np.asarray(mask, dtype=np.float32)
    if soft.shape != (f, h, w):
        raise BackendError(f"wan-vace-mlx: mask shape {soft.shape} must be the video's (frames, height, width) "
                           f"{(f, h, w)}")
    # the split uses the thresholded mask, the mask channels its values (as the pipeline does)
    keep = mx.array((soft > 0.5).astype(np.float32))[None, None]  # (1, 1, F, H, W)
    inactive = encoder.normalize(encoder.encode(video * (1 - keep)))  # (1, 16, T, h, w)
    reactive = encoder.normalize(encoder.encode(video * keep))
    latents = mx.concatenate([inactive, reactive], axis=1)[0]  # (32, T, h, w)
    for canvas in references:  # each new one goes in front, as the pipeline's loop puts them
        ref = encoder.normalize(encoder.encode(canvas[None, :, None]))[0]  # (16, 1, h, w)
        latents = mx.concatenate([mx.concatenate([ref, mx.zeros_like(ref)], axis=0), latents], axis=1)
    out = mx.concatenate([latents, fold_mask(soft, len(references))], axis=0)[None]
    mx.eval(out)
    return out
