"""Spatial upscaling ×2 / ×4 of (H, W, 3) uint8 frames.

``classical`` (the default, no weights): Lanczos interpolation refined by iterative back
projection — the upscaled frame is repeatedly corrected so that, box-downscaled again, it
reproduces the low-resolution input — and then clamped, pixel by pixel, to the value range
of the input's 3x3 neighbourhood at that spot. Back projection restores the contrast that
interpolation smears across edges; the clamp removes the ringing (halos) that both Lanczos
and back projection put beside hard edges, while flat areas and gradients are untouched.

``spandrel``: a neural single-image upscaler (Real-ESRGAN family) loaded from a user's
``.safetensors``/``.pth`` file through the optional ``spandrel`` package; the file's SHA-256
is checked against the one the user gave before anything is loaded.

``diffusion``: the classical upscale refined by a video model at the higher size (a Wan
video-to-video re-render with ``strength`` and ``steps``); whole windows of frames at a
time, see :mod:`daotai.post.rerender`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from daotai.errors import BackendError, DependencyMissing, EncodeError
from daotai.post.classical import FACTORS, upscale_classical

__all__ = ["FACTORS", "METHODS", "UpscaleConfig", "upscale_classical", "upscale_frames", "Upscaler"]

METHODS = ("classical", "lanczos", "spandrel", "diffusion")
DIFFUSION_ONLY = ("strength", "steps", "prompt", "seed", "device")  # fields only method diffusion reads
DEFAULT_STRENGTH = 0.3  # re-render: adds detail, keeps composition and motion


@dataclass(frozen=True)
class UpscaleConfig:
    """Upscale step: factor 2 or 4; method classical | lanczos | spandrel (model + sha256) | diffusion."""

    factor: int = 2
    method: str = "classical"
    model: str | None = None  # spandrel: weights file; diffusion: registry name or diffusers folder
    sha256: str | None = None  # spandrel only: expected hex digest of the weights file
    strength: float | None = None  # diffusion: share of the schedule re-run, 0..1 (default 0.3)
    steps: int | None = None  # diffusion: schedule length (default: the model's); int(steps·strength) run
    prompt: str | None = None  # diffusion: what the clip shows (default: a generic detail prompt)
    seed: int | None = None  # diffusion: noise seed (default 0; a render passes each shot's seed)
    device: str | None = None  # diffusion: auto | cuda | cuda:N | mps | cpu

    def __post_init__(self) -> None:
        if isinstance(self.factor, bool) or self.factor not in FACTORS:
            raise EncodeError(f"upscale.factor: {self.factor!r} must be 2 or 4")
        if self.method not in METHODS:
            raise EncodeError(f"upscale.method: {self.method!r} must be one of {', '.join(METHODS)}")
        if self.method in ("classical", "lanczos") and (self.model or self.sha256):
            raise EncodeError(f"upscale.model: method {self.method!r} uses no weights; drop --model/--sha256 "
                              "or choose method spandrel or diffusion")
        if self.method == "diffusion":
            self._check_diffusion()
        else:
            for name in DIFFUSION_ONLY:
                if getattr(self, name) is not None:
                    raise EncodeError(f"upscale.{name}: {getattr(self, name)!r} is only used with method 'diffusion'")
        if self.method == "spandrel":
            if not self.model:
                raise EncodeError("upscale.model: required for method 'spandrel' (a .safetensors file)")
            if not self.sha256 or len(self.sha256) != 64:
                raise EncodeError(
                    f"upscale.sha256: {self.sha256!r} must be the 64-hex-digit SHA-256 of the "
                    "weights file (method 'spandrel' refuses unchecked weights)"
                )

    def _check_diffusion(self) -> None:
        """Fill the diffusion defaults (so the manifest records them) and check the ranges."""
        from daotai.post.rerender import DEFAULT_MODEL, denoise_steps, model_steps

        if self.model is None:
            object.__setattr__(self, "model", DEFAULT_MODEL)
        if self.strength is None:
            object.__setattr__(self, "strength", DEFAULT_STRENGTH)
        s = self.strength
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0.0 <= s <= 1.0:
            raise EncodeError(f"upscale.strength: {s!r} must be a number in [0, 1] (0 = classical only)")
        n = self.steps
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1000):
            raise EncodeError(f"upscale.steps: {n!r} must be an integer between 1 and 1000")
        schedule = n if n is not None else model_steps(self.model)
        if s > 0 and denoise_steps(schedule, s) == 0:
            raise EncodeError(
                f"upscale.steps: {schedule} steps at strength {s:g} run no denoising step "
                f"(int(steps x strength) = 0); use at least {math.ceil(1 / s)} steps or a higher strength"
            )
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64):
            raise EncodeError(f"upscale.seed: {seed!r} must be an integer in [0, 2**64)")


def upscale_lanczos(frame: np.ndarray, factor: int) -> np.ndarray:
    """Plain Lanczos-4 resize; (H, W, 3) uint8 → (fH, fW, 3) uint8."""
    h, w = frame.shape[:2]
    return cv2.resize(frame, (w * factor, h * factor), interpolation=cv2.INTER_LANCZOS4)


class Upscaler:
    """A loaded upscaler for one config; call it on frames, close() to free a model."""

    def __init__(self, config: UpscaleConfig):
        if config.method == "diffusion":
            raise EncodeError("upscale.method: 'diffusion' works on whole clips; use upscale_frames")
        self.config = config
        self._model = None
        if config.method == "spandrel":
            self._model = _load_spandrel(config)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """Upscale one (H, W, 3) uint8 frame."""
        if self.config.method == "classical":
            return upscale_classical(frame, self.config.factor)
        if self.config.method == "lanczos":
            return upscale_lanczos(frame, self.config.factor)
        return _run_spandrel(self._model, frame, self.config.factor)

    def close(self) -> None:
        """Drop the model (if any)."""
        self._model = None


def upscale_frames(frames: Iterator[np.ndarray], config: UpscaleConfig, ctx=None,
                   frames_total: int | None = None) -> Iterator[np.ndarray]:
    """Upscale a stream of frames lazily.

    Method diffusion also yields ``Progress`` events (model loading, denoising steps)
    between the frames; ``ctx`` lets a cancel stop it between steps.
    """
    if config.method == "diffusion":
        from daotai.post.rerender import rerender_frames

        yield from rerender_frames(frames, config, ctx, frames_total)
        return
    upscaler = Upscaler(config)
    try:
        for frame in frames:
            yield upscaler(frame)
    finally:
        upscaler.close()


# --------------------------------------------------------------------------- neural (optional)


def _load_spandrel(config: UpscaleConfig):
    """Check the weights file's hash, then load it with spandrel (raises DependencyMissing)."""
    from daotai.files import sha256_file

    path = Path(config.model or "")
    if not path.is_file():
        raise BackendError(f"upscale.model: {str(path)!r} does not exist or is not a file")
    digest = sha256_file(path)
    if digest.lower() != (config.sha256 or "").lower():
        raise BackendError(
            f"upscale.model: {str(path)!r} has SHA-256 {digest}, expected {config.sha256}; "
            "refusing to load weights that differ from the ones you named"
        )
    try:
        import spandrel  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise DependencyMissing("spandrel", "restore", "neural upscaling (--method spandrel)") from None
    descriptor = spandrel.ModelLoader().load_from_file(str(path))
    if not isinstance(descriptor, spandrel.ImageModelDescriptor):
        raise BackendError(f"upscale.model: {str(path)!r} is not a single-image model")
    if descriptor.scale != config.factor:
        raise BackendError(
            f"upscale.factor: {config.factor} but the model in {str(path)!r} upscales ×{descriptor.scale}"
        )
    return descriptor.eval()


def _run_spandrel(model, frame: np.ndarray, factor: int) -> np.ndarray:
    """One frame through a spandrel model on the CPU or the model's device."""
    import torch

    tensor = torch.from_numpy(frame).permute(2, 0, 1)[None].float().div_(255.0)  # (1, 3, H, W)
    with torch.inference_mode():
        out = model(tensor.to(model.device))  # (1, 3, fH, fW) float in 0..1
    out = out[0].clamp_(0, 1).mul_(255.0).add_(0.5).byte().permute(1, 2, 0)
    return np.ascontiguousarray(out.cpu().numpy())  # (fH, fW, 3) uint8
