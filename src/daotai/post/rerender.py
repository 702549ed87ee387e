"""Diffusion re-render: a classically upscaled clip refined by a video model at the higher size.

Frames are first upscaled with the classical method (Lanczos + back projection), then run
through diffusers' ``WanVideoToVideoPipeline``: the clip is encoded to latents, noised to
``strength`` of the way along the sampling schedule and denoised over the last
``int(steps × strength)`` steps with the prompt. Low strength keeps composition and
motion and lets the model add the texture and detail interpolation cannot invent;
strength 0 is the classical upscale exactly (no model is loaded).

Shapes the model needs, and how they are met without resampling the picture:
- frames: the Wan VAE compresses time by 4 (causal first frame), so a window runs with
  4k + 1 frames: its last frame is repeated to fill up, and the extra output is cut off;
- pixels: width and height must be multiples of 16 (VAE stride 8 × patch 2); frames are
  padded by mirroring their edges, and the padding is cropped from the output;
- length: clips longer than ``WINDOW`` frames run in windows that overlap by ``OVERLAP``
  frames; the overlapping outputs are cross-faded so window edges do not show as a jump.
  Every window starts from the same seed, so the noise pattern does not change at an edge.

The model is a registry name or a local diffusers folder of a Wan 2.1 text-to-video model,
resolved, checked and loaded through :mod:`daotai.runtime.model_loading` (safetensors only, folder
checks, sha256 manifest; nothing is downloaded), on the device and dtypes of
:mod:`daotai.runtime.device` and at the memory tier the planner picks for the window size
— exactly as a ``wan`` render loads it. The video-to-video pipeline shares the loaded
components (``from_pipe``), so nothing is held twice.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Iterator
from typing import Any

import cv2
import numpy as np

from daotai import catalog
from daotai.errors import BackendError, Cancelled, DependencyMissing
from daotai.events import Progress
from daotai.render import wan as wan_backend
from daotai.render.base import RunContext

__all__ = ["DEFAULT_MODEL", "DEFAULT_PROMPT", "OVERLAP", "WINDOW", "denoise_steps", "model_steps", "pad_to_multiple",
           "rerender_frames", "window_count"]

# The re-render runs a Wan 2.1 text-to-video model as video-to-video: the wan backend's default.
DEFAULT_MODEL = wan_backend.SPEC.default_model or ""
# Without a prompt the model is steered toward detail and away from the negative prompt's faults.
DEFAULT_PROMPT = "sharp, detailed, high quality video"
WINDOW = 33  # frames per model run (4·8 + 1): ~1.4 s at 24 fps keeps 1080p attention tractable
OVERLAP = 4  # frames shared by neighbouring windows and cross-faded
FAMILY = "wan"
SIZE_MULTIPLE = catalog.family(FAMILY).snap.size_multiple  # VAE spatial stride 8 × transformer patch 2
FRAME_STEP = catalog.family(FAMILY).snap.frame_step or 1  # VAE temporal stride: frames must be 4k + 1


def denoise_steps(steps: int, strength: float) -> int:
    """Steps the pipeline really runs: the last int(steps × strength) of the schedule."""
    return min(int(steps * strength), steps)


def model_steps(model: str) -> int:
    """The schedule length a model samples with by default (registry name or folder)."""
    from daotai.render.neural.request import family_defaults

    return family_defaults(FAMILY, model).steps


def window_count(frames: int, window: int = WINDOW, overlap: int = OVERLAP) -> int:
    """How many model runs a clip of ``frames`` frames takes."""
    if frames <= window:
        return 1
    return 1 + math.ceil((frames - window) / (window - overlap))


def pad_to_multiple(frame: np.ndarray, multiple: int = SIZE_MULTIPLE) -> np.ndarray:
    """Mirror-pad the right and bottom edges up to multiples of ``multiple``: (H', W', 3) uint8."""
    h, w = frame.shape[:2]
    bottom, right = -h % multiple, -w % multiple
    if not bottom and not right:
        return frame
    return cv2.copyMakeBorder(frame, 0, bottom, 0, right, cv2.BORDER_REFLECT_101)


def _frames_4k1(count: int) -> int:
    """The smallest 4k + 1 frame count holding ``count`` frames."""
    return count + (-(count - 1)) % FRAME_STEP


def _windows(frames: Iterable[np.ndarray], window: int, overlap: int) -> Iterator[tuple[list[np.ndarray], bool]]:
    """Runs of at most ``window`` frames, each repeating the previous run's last ``overlap``; (run, is_last)."""
    source = iter(frames)
    pending = next(source, None)
    buffer: list[np.ndarray] = []
    while pending is not None:
        buffer.append(pending)
        pending = next(source, None)  # one frame of look-ahead tells whether this run is the last
        if pending is None or len(buffer) == window:
            yield buffer, pending is None
            buffer = buffer[len(buffer) - overlap:]


class _Model:
    """The loaded video-to-video pipeline, its runtime and sampling defaults."""

    def __init__(self, config: Any, width: int, height: int, frames: int):
        self.config = config
        self.width, self.height, self.frames = width, height, frames
        self.runner: Any = None
        self.defaults: Any = None

    def load(self) -> Iterator[Progress]:
        """Resolve, check and load the model; place it for a window of this size."""
        from daotai.render.neural.request import NativeRequest
        from daotai.render.neural.runner import DiffusersShotRunner
        from daotai.render.spec import DiffusersOptions
        from daotai.runtime.model_checks import read_model_index
        from daotai.runtime.model_loading import load_pipeline
        from daotai.runtime.model_lookup import resolve_model

        name = self.config.model
        _check_supported(name, read_model_index(resolve_model(name).path))
        if importlib.util.find_spec("diffusers") is None:
            raise DependencyMissing("diffusers", "neural", "diffusion re-render (--method diffusion)")
        try:
            from diffusers import WanVideoToVideoPipeline
        except ImportError:
            raise BackendError(
                "upscale.method: 'diffusion' needs diffusers' WanVideoToVideoPipeline (diffusers >= 0.40, the floor of daotai[neural]); "
                "run: pip install -U 'diffusers>=0.40'"
            ) from None

        def build(model: str, family: str, runtime: Any) -> tuple[Any, Any]:
            base, resolved = load_pipeline(model, family, runtime)
            return WanVideoToVideoPipeline.from_pipe(base), resolved  # same modules, no second copy

        options = DiffusersOptions(model=name, device=self.config.device, steps=self.config.steps)
        runner = DiffusersShotRunner(FAMILY, options, name, build=build, speed_levers=False)
        self.defaults = runner.prepare()
        request = NativeRequest(self.width, self.height, self.frames, self.defaults.native_fps, "", "", 0)
        for event in runner.load_for(request, None):  # refuses before loading when no memory tier fits
            if isinstance(event, Progress):
                yield event
        self.runner = runner
        yield Progress("load", None, 1, 1, f"loaded {runner.resolved.path.name} on {runner.runtime.device} "
                                           f"({runner.runtime.transformer_dtype}), memory tier {runner.tier}")

    def refine(self, video: np.ndarray, label: str, ctx: RunContext) -> Iterator[Progress | np.ndarray]:
        """Run one window (F, H, W, 3) uint8 through the pipeline; yields Progress, then (F, H, W, 3) uint8."""
        from daotai.catalog import WAN_NEGATIVE
        from daotai.render.neural.retime import to_uint8
        from daotai.render.neural.stepping import first_line, retry_a_tier_lower, run_steps, step_callback_kwargs
        from daotai.runtime.device import generator_for

        config, defaults, runner = self.config, self.defaults, self.runner
        frames, height, width = video.shape[:3]
        total = denoise_steps(defaults.steps, config.strength)
        batch = video[None].astype(np.float32) * np.float32(1 / 255)  # (1, F, H, W, 3) float32 in 0..1

        def call(callback) -> Any:
            return runner.pipe(
                video=batch,
                prompt=config.prompt or DEFAULT_PROMPT,
                negative_prompt=WAN_NEGATIVE,
                height=height,
                width=width,
                num_inference_steps=defaults.steps,
                guidance_scale=defaults.guidance,
                strength=config.strength,
                generator=generator_for(config.seed or 0),
                max_sequence_length=defaults.max_sequence_length,
                output_type="np",
                **step_callback_kwargs(callback),
            ).frames

        def attempt() -> Iterator[Any]:
            for item in run_steps(call, "re-render", total, ctx):
                if isinstance(item, tuple):
                    out = to_uint8(item[1])  # (F', H, W, 3) uint8
                    if out.shape[0] < frames or out.shape[1:3] != (height, width):
                        raise BackendError(f"re-render: the pipeline returned {out.shape}, expected "
                                           f"({frames}, {height}, {width}, 3)")
                    yield out[:frames]
                    return
                yield Progress(item.stage, None, item.done, item.total, f"{label}: {item.message}")

        yield from retry_a_tier_lower(
            runner,
            attempt,
            failed=lambda exc: f"re-render: the {FAMILY} video-to-video pipeline failed: "
                               f"{type(exc).__name__}: {first_line(exc)}",
            exhausted=f"re-render: out of memory at {width}x{height}, {frames} frames even at the lowest memory "
                      "tier; upscale x2 instead of x4, or use method classical",
            retrying=lambda lower: Progress("load", None, 1, 1, f"out of memory; retrying at memory tier {lower}"),
            passthrough=(Cancelled, BackendError),
        )

    def close(self) -> None:
        """Free the pipeline."""
        if self.runner is not None:
            self.runner.close()
            self.runner = None


def _check_supported(name: str, index: dict[str, Any]) -> None:
    """Refuse model folders WanVideoToVideoPipeline cannot drive correctly, before loading weights."""
    cls = index.get("_class_name")
    if cls != "WanPipeline":
        raise BackendError(
            f"--model: {name!r} is a {cls} model; diffusion re-render needs a Wan 2.1 text-to-video model "
            f"(WanPipeline), e.g. {DEFAULT_MODEL}"
        )
    two_stage = isinstance(index.get("transformer_2"), list) and index["transformer_2"][0] is not None
    if index.get("expand_timesteps") or two_stage:
        raise BackendError(
            f"--model: {name!r} is a Wan 2.2 model, which diffusers' WanVideoToVideoPipeline does not run "
            f"(different VAE and timestep layout); use a Wan 2.1 text-to-video model, e.g. {DEFAULT_MODEL}"
        )


def rerender_frames(
    frames: Iterable[np.ndarray],
    config: Any,
    ctx: RunContext | None = None,
    frames_total: int | None = None,
    window: int = WINDOW,
    overlap: int = OVERLAP,
) -> Iterator[np.ndarray | Progress]:
    """Classical upscale by ``config.factor``, then refine with the video model.

    ``config`` is an ``UpscaleConfig`` with method 'diffusion'. Yields every output frame,
    (fH, fW, 3) uint8 in order, with Progress events (model loading, denoising steps)
    between them; ``frames_total`` only makes the progress messages say "window k/n".
    """
    from daotai.post.classical import upscale_classical

    if overlap < 0 or window < 2 * overlap + 1 or (window - 1) % FRAME_STEP:
        raise BackendError(
            f"re-render: window {window} must be 4k + 1 frames and more than twice the overlap {overlap}"
        )
    ctx = ctx or RunContext()
    upscaled = (upscale_classical(frame, config.factor) for frame in frames)  # (fH, fW, 3) uint8 each
    if config.strength == 0:
        yield from upscaled  # nothing to denoise: the schedule's last 0 steps
        return
    model: _Model | None = None
    windows = window_count(frames_total, window, overlap) if frames_total else None
    carry: list[np.ndarray] = []  # refined last frames of the previous window, to cross-fade
    try:
        for number, (run, last) in enumerate(_windows(upscaled, window, overlap), start=1):
            ctx.check()
            height, width = run[0].shape[:2]
            padded = np.stack([pad_to_multiple(f) for f in run])  # (F, H16, W16, 3) uint8
            filler = np.repeat(padded[-1:], _frames_4k1(len(run)) - len(run), axis=0)
            video = np.concatenate([padded, filler]) if len(filler) else padded  # (4k+1, H16, W16, 3)
            if model is None:
                model = _Model(config, video.shape[2], video.shape[1], max(len(video), _frames_4k1(window)))
                yield from model.load()
            label = f"re-render window {number}/{windows}" if windows else f"re-render window {number}"
            refined = None
            for item in model.refine(video, label, ctx):
                if isinstance(item, Progress):
                    yield item
                else:
                    refined = [np.ascontiguousarray(f[:height, :width]) for f in item[: len(run)]]
            assert refined is not None
            for i, (before, now) in enumerate(zip(carry, refined, strict=False)):  # the overlap, then the rest
                weight = (i + 1) / (len(carry) + 1)  # ramps from the previous window to this one
                yield cv2.addWeighted(before, 1 - weight, now, weight, 0.0)
            end = len(refined) if last else len(refined) - overlap
            yield from refined[len(carry):end]
            carry = [] if last else refined[end:]
    finally:
        if model is not None:
            model.close()
