"""`wan` backend: Wan text-to-video through diffusers' WanPipeline.

The shot's prompt and negative prompt come from the plan, the seed from ``shot.seed``;
the model generates at its native 16 fps and the frames are retimed onto the plan's grid
(see :mod:`daotai.render.diffusers_common`). No control channels are produced.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from daotai.render.base import Event, RenderJob, RunContext
from daotai.render.diffusers_common import DiffusersShotRunner, SamplingOptions, render_shot

DEFAULT_MODEL = "wan2.1-t2v-1.3b"


class WanBackend:
    """Text-to-video with a Wan model; the loaded pipeline is reused across shots."""

    name = "wan"
    family = "wan"

    def __init__(self, model: str | None = None, device: str | None = None, steps: int | None = None,
                 guidance: float | None = None, shift: float | None = None, offload: str | None = None,
                 max_sequence_length: int | None = None, speed: str | None = None, adaptive: bool = False,
                 health_sampler: Callable[[Any], dict] | None = None, **_ignored: object):
        options = SamplingOptions(steps=steps, guidance=guidance, shift=shift, max_sequence_length=max_sequence_length)
        self.runner = DiffusersShotRunner(self.family, model or DEFAULT_MODEL, device, options, offload, speed,
                                          adaptive, health_sampler)

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/denoise progress, then exactly ``job.shot.frames`` frames."""
        yield from render_shot(self.runner, job, ctx)

    def close(self) -> None:
        """Release the pipeline."""
        self.runner.close()
