"""`ltx` backend: LTX-Video text-to-video, with keyframe conditioning when asked.

``keyframe="previz"`` renders the shot's first previz frame and passes it as a frame-0
image condition (needs an ``LTXConditionPipeline`` model such as the 0.9.7 releases);
the default is plain text-to-video. Previz is imported here only as the shared source of
control images, as in ``wan_vace``; backends do not otherwise import each other. LTX
generates at 24 fps (``frame_rate`` is passed to the model so its motion matches) and
frames are retimed onto the plan's grid.
"""

from __future__ import annotations

from typing import Any, Iterator, Literal

from pydantic import Field

from daotai.errors import BackendError
from daotai.events import Event, Frame
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.request import NativeRequest
from daotai.render.neural.runner import DiffusersShotRunner, render_shot
from daotai.render.spec import BackendEnv, BackendSpec, DiffusersOptions


class LTXOptions(DiffusersOptions):
    """Options of the `ltx` backend."""

    keyframe: Literal["none", "previz"] = Field(
        "none", description="previz: the shot's first previz frame conditions frame 0 (LTXConditionPipeline models)")


class LTXBackend:
    """Text-to-video (and first-frame keyframe) generation with LTX-Video."""

    name = "ltx"

    def __init__(self, options: LTXOptions | None = None, *, env: BackendEnv | None = None, **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        env = env or BackendEnv()
        self.options = options
        self.runner = DiffusersShotRunner(SPEC.family or "", options, SPEC.default_model or "", env.health_sampler)
        self.keyframe = options.keyframe

    def _extra(self, job: RenderJob, ctx: RunContext):
        """Keyword arguments for this shot: frame rate, and the keyframe condition when asked."""

        def extra(request: NativeRequest) -> Iterator[Event | dict]:
            yield {"frame_rate": int(round(request.fps))}
            if self.keyframe == "none":
                return
            if self.runner.pipeline_class != "LTXConditionPipeline":
                raise BackendError(
                    f"keyframe: 'previz' needs an LTXConditionPipeline model; {self.runner.model} is "
                    f"{self.runner.pipeline_class}; use --model ltx-video-0.9.7-distilled"
                )
            yield {"image": first_previz_frame(job, ctx, request), "frame_index": 0}

        return extra

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/denoise progress, then exactly ``job.shot.frames`` frames."""
        yield from render_shot(self.runner, job, ctx, self._extra(job, ctx))

    def close(self) -> None:
        """Release the pipeline."""
        self.runner.close()


def first_previz_frame(job: RenderJob, ctx: RunContext, request: NativeRequest):
    """The shot's first previz frame as a PIL image at the native size."""
    from PIL import Image

    from daotai.render.neural.retime import resize_rgb
    from daotai.render.previz.backend import PrevizBackend

    previz = PrevizBackend(labels=False)
    try:
        for event in previz.render(RenderJob(job.plan, job.shot, controls=False), ctx):
            if isinstance(event, Frame):
                return Image.fromarray(resize_rgb(event.rgb, request.width, request.height))
    finally:
        previz.close()
    raise BackendError(f"{job.shot.shot_id}: previz produced no frame for the keyframe")


SPEC = BackendSpec(
    name="ltx",
    factory="daotai.render.ltx:LTXBackend",
    options=LTXOptions,
    summary="LTX-Video text-to-video (diffusers), optionally keyed on the first previz frame",
    family="ltx",
    device_class="accelerator",
    default_model="ltx-video-2b",
)
