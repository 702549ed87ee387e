"""A test-only third-party backend that follows the planned camera on some seeds only.

It draws the shot with previz (no labels, no controls) and, unless the shot's seed is one of
``follows``, plays the frames backwards: the camera then moves the opposite way to the plan, as
a neural model may on an unlucky seed. Found through the ``daotai.backends`` entry point only.
"""

from __future__ import annotations

from typing import Any, Iterator

from pydantic import Field

from daotai.render.base import Event, Frame, Progress, RenderJob, RunContext
from daotai.render.spec import BackendEnv, BackendOptions, BackendSpec


class FickleOptions(BackendOptions):
    """Options of the fickle backend."""

    follows: str = Field("", pattern=r"^[0-9, ]*$", description="comma-separated seeds on which the camera follows the plan")


class FickleBackend:
    """Previz frames, in order on the seeds in ``follows``, reversed on every other seed."""

    name = "fickle"

    def __init__(self, options: FickleOptions, *, env: BackendEnv | None = None):
        from daotai.render.previz.backend import PrevizBackend

        self.options = options
        self.seeds: list[int] = []  # the seed of every shot rendered, in order
        self._previz = PrevizBackend(labels=False)

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield exactly ``job.shot.frames`` frames."""
        shot = job.shot
        self.seeds.append(shot.seed)
        plain = RenderJob(plan=job.plan, shot=shot, controls=False)
        frames = [e.rgb for e in self._previz.render(plain, ctx) if isinstance(e, Frame)]  # (H, W, 3) uint8 each
        if shot.seed not in {int(s) for s in self.options.follows.split(",") if s.strip()}:
            frames.reverse()
        for index, rgb in enumerate(frames):
            ctx.check()
            yield Frame(shot.shot_id, index, rgb)
        yield Progress("render", shot.shot_id, shot.frames, shot.frames)

    def close(self) -> None:
        self._previz.close()


def _build(options: Any, env: BackendEnv) -> FickleBackend:
    return FickleBackend(options, env=env)


SPEC = BackendSpec(
    name="fickle",
    factory="daotai_fickle:_build",
    options=FickleOptions,
    summary="test-only: previz that follows the camera on some seeds only",
    device_class="cpu",
)
