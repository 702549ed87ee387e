"""`wan-vace` backend: Wan-VACE guided by the shot's previz depth (or the user's footage) and the characters' looks.

For every shot the previz renderer (:mod:`daotai.render.previz`, imported here as the
shared source of control signals, not as another backend) renders the planned camera and
blocking; its depth, as a near-white log-scaled preview, becomes VACE's control ``video``
sampled at the model's native frame rate, so camera and blocking follow the script. Each
character in the shot contributes one ``reference_images`` entry — its first reference
image from the script, else a flat swatch of its previz colour — so faces and costumes can
stay the same across shots. The mask is left out: VACE then generates every pixel.
A shot that names a ``reference_video`` has that footage (its stretch at the native frame
times, centre-filled to the size) as the control video instead of the depth preview.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
from pydantic import Field

from daotai.errors import BackendError
from daotai.events import Event, Frame, Notice, Progress
from daotai.plan.geometry import FAR_M, NEAR_M
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.request import NativeRequest
from daotai.render.neural.retime import plan_to_native_indexes, resize_rgb
from daotai.render.neural.runner import DiffusersShotRunner, render_shot
from daotai.render.spec import BackendEnv, BackendSpec, DiffusersOptions

REFERENCE_FORMATS = ["PNG", "JPEG", "WEBP"]
MAX_REFERENCE_PIXELS = 64_000_000


class WanVACEOptions(DiffusersOptions):
    """Options of the `wan-vace` backend."""

    conditioning_scale: float = Field(1.0, ge=0.0, le=4.0, description="weight of the previz depth control")


class WanVACEBackend:
    """Depth- and reference-conditioned video with a Wan-VACE model."""

    name = "wan-vace"

    def __init__(self, options: WanVACEOptions | None = None, *, env: BackendEnv | None = None, **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        env = env or BackendEnv()
        self.options = options
        self.runner = DiffusersShotRunner(SPEC.family or "", options, SPEC.default_model or "", env.health_sampler)
        self.conditioning_scale = options.conditioning_scale
        self.controls = VACEControls(env.reference_root or Path.cwd())

    def _extra(self, job: RenderJob, ctx: RunContext):
        """The control video and reference images of this shot."""

        def extra(request: NativeRequest) -> Iterator[Event | dict]:
            video, references = yield from self.controls.prepare(job, ctx, request)
            yield {"video": video, "reference_images": references or None,
                   "conditioning_scale": self.conditioning_scale}

        return extra

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/control/denoise progress, then exactly ``job.shot.frames`` frames."""
        yield from render_shot(self.runner, job, ctx, self._extra(job, ctx))

    def close(self) -> None:
        """Release the pipeline and the previz GL context."""
        self.runner.close()
        self.controls.close()


class VACEControls:
    """A shot's VACE inputs, the same for every VACE backend (diffusers `wan-vace`, MLX `wan-vace-mlx`):
    the previz depth preview as the control video and one reference image per character."""

    def __init__(self, reference_root: Path):
        self.reference_root = reference_root
        self._previz: Any = None

    def prepare(self, job: RenderJob, ctx: RunContext, request: NativeRequest) -> Iterator[Event]:
        """Yield control progress and notices; return (video: PIL RGB frames at the native frame times and
        size, references: one PIL RGB image per character of the shot, possibly none)."""
        shot = job.shot
        if shot.reference_video is not None:  # the user's footage is the control video, as it is
            from PIL import Image

            from daotai.render.footage import describe_footage, shot_footage

            yield Progress("control", shot.shot_id, 0, request.frames, "reading the reference footage")
            frames = shot_footage(job.plan, shot, self.reference_root, request.frames, request.fps, request.width,
                                  request.height)  # (F, H, W, 3) uint8 at the native frame times
            video = [Image.fromarray(f) for f in frames]
            yield Progress("control", shot.shot_id, request.frames, request.frames, "reference footage ready")
            yield Notice("info", f"wan-vace: control video: {describe_footage(shot, request.frames, request.fps)}",
                         shot.shot_id)
        else:
            yield Progress("control", shot.shot_id, 0, request.frames, "rendering previz depth")
            video = yield from self._depth_video(job, ctx, request)
        references, swatches = reference_images(job.plan, job.shot, self.reference_root)
        if swatches:
            yield Notice("info", f"no reference image for {', '.join(swatches)}: using a colour swatch",
                         job.shot.shot_id)
        return video, references

    def _depth_video(self, job: RenderJob, ctx: RunContext, request: NativeRequest) -> Iterator[Event]:
        """Previz depth previews at the native frame times and size, as PIL RGB images."""
        from PIL import Image

        from daotai.render.previz.backend import PrevizBackend
        from daotai.render.previz.control import depth_to_preview

        if self._previz is None:
            self._previz = PrevizBackend(labels=False)
        wanted = plan_to_native_indexes(job.shot.frames, job.plan.fps, request.frames, request.fps)
        needed = set(wanted)
        previews: dict[int, np.ndarray] = {}
        for event in self._previz.render(RenderJob(job.plan, job.shot, controls=True), ctx):
            if isinstance(event, Frame) and event.index in needed:
                grey = depth_to_preview(event.depth, NEAR_M, FAR_M)  # (H, W) uint8, near = white
                rgb = np.repeat(grey[:, :, None], 3, axis=2)  # (H, W, 3) uint8
                previews[event.index] = resize_rgb(rgb, request.width, request.height)
        yield Progress("control", job.shot.shot_id, request.frames, request.frames, "previz depth ready")
        return [Image.fromarray(previews[i]) for i in wanted]

    def close(self) -> None:
        """Release the previz GL context."""
        if self._previz is not None:
            self._previz.close()
            self._previz = None


def reference_images(plan: Plan, shot: ShotPlan, root: Path) -> tuple[list[Any], list[str]]:
    """One image per character in the shot (script reference, else colour swatch); ids that got swatches."""
    from PIL import Image

    by_id = {c.id: c for c in plan.characters}
    images, swatches = [], []
    for char_id in shot.characters:
        character = by_id[char_id]
        if character.reference_images:
            path = Path(character.reference_images[0])
            path = path if path.is_absolute() else root / path
            try:
                with Image.open(path, formats=REFERENCE_FORMATS) as image:
                    if image.width * image.height > MAX_REFERENCE_PIXELS:
                        raise BackendError(f"{path}: {image.width}x{image.height} is too large for a reference image")
                    images.append(image.convert("RGB"))
                continue
            except (OSError, SyntaxError) as exc:
                raise BackendError(f"characters.{char_id}.reference_images: {path} cannot be read ({exc})") from None
        colour = tuple(int(round(255 * c)) for c in character.colour)
        images.append(Image.new("RGB", (256, 256), colour))
        swatches.append(char_id)
    return images, swatches


SPEC = BackendSpec(
    name="wan-vace",
    factory="daotai.render.wan_vace:WanVACEBackend",
    options=WanVACEOptions,
    summary="Wan-VACE (diffusers) guided by the previz depth and the characters' reference images",
    family="wan-vace",
    device_class="accelerator",
    footage=True,
    default_model="wan2.1-vace-1.3b",
)
