"""`wan` backend: Wan text-to-video through diffusers' WanPipeline.

The shot's prompt and negative prompt come from the plan, the seed from ``shot.seed``;
the model generates at its native 16 fps and the frames are retimed onto the plan's grid
(see :mod:`daotai.render.neural`). No control channels are produced.
"""

from __future__ import annotations

from typing import Any, Iterator

from daotai.events import Event
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.runner import DiffusersShotRunner, render_shot
from daotai.render.spec import BackendEnv, BackendSpec, DiffusersOptions


class WanOptions(DiffusersOptions):
    """Options of the `wan` backend (the diffusers options, nothing more)."""


class WanBackend:
    """Text-to-video with a Wan model; the loaded pipeline is reused across shots."""

    name = "wan"

    def __init__(self, options: WanOptions | None = None, *, env: BackendEnv | None = None, **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        env = env or BackendEnv()
        self.options = options
        self.runner = DiffusersShotRunner(SPEC.family or "", options, SPEC.default_model or "", env.health_sampler)

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/denoise progress, then exactly ``job.shot.frames`` frames."""
        yield from render_shot(self.runner, job, ctx)

    def close(self) -> None:
        """Release the pipeline."""
        self.runner.close()


SPEC = BackendSpec(
    name="wan",
    factory="daotai.render.wan:WanBackend",
    options=WanOptions,
    summary="Wan text-to-video (diffusers); the camera reaches the model as words",
    family="wan",
    device_class="accelerator",
    default_model="wan2.1-t2v-1.3b",
)
