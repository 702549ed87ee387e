"""A test-only third-party backend: flat colour frames striped by its model row.

It lives outside daotai and reaches it only through the ``daotai.backends`` and
``daotai.models`` entry-point groups (see ``../daotai_tint-0.1.dist-info``), so a test that
renders with it proves a backend and a model row need no edit inside daotai.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
from pydantic import Field

from daotai import catalog
from daotai.render.base import Event, Frame, Progress, RenderJob, RunContext
from daotai.render.spec import BackendEnv, BackendSpec, NeuralOptions

TINT_SNAP = catalog.SnapRule("tint", frame_step=None, size_multiple=8, native_fps=None)
FAMILY = catalog.Family("tint", TINT_SNAP, steps=2, guidance=0.0, shift=None, negative_prompt="",
                        max_sequence_length=16, prompt=catalog.PromptBudget("tint", 16), pipelines=())
FOOTPRINT = catalog.ModelFootprint("tint-stripes", 0.0, 0.0, 0.0, 8, 1, 8, 0.0)
STRIPES = catalog.ModelRow("tint-stripes", "example/tint-stripes", None, "tint", "TintPipeline", FOOTPRINT, 0.0,
                           "CC0-1.0", {"steps": 3})
ROWS = (FAMILY, STRIPES)


class TintOptions(NeuralOptions):
    """Options of the tint backend."""

    colour: str = Field("#c83c28", pattern=r"^#[0-9a-fA-F]{6}$", description="stripe colour as #RRGGBB")


class TintBackend:
    """Frames of vertical stripes (the model row's step count) that slide one pixel a frame."""

    name = "tint"

    def __init__(self, options: TintOptions, *, env: BackendEnv | None = None):
        self.options = options
        row = catalog.model_row(options.model or SPEC.default_model or "")
        fam = catalog.with_overrides(catalog.family("tint"), row)
        self.stripes = options.steps or fam.steps
        hex_colour = options.colour.lstrip("#")
        self.rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (0, 2, 4)], dtype=np.uint8)

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield progress and exactly ``job.shot.frames`` frames."""
        width, height, shot = job.plan.width, job.plan.height, job.shot
        columns = np.arange(width)
        for index in range(shot.frames):
            ctx.check()
            stripe = ((columns + index) * self.stripes // width) % 2 == 0  # (W,) bool
            frame = np.zeros((height, width, 3), dtype=np.uint8)  # (H, W, 3) uint8
            frame[:, stripe] = self.rgb
            yield Frame(shot.shot_id, index, frame)
        yield Progress("render", shot.shot_id, shot.frames, shot.frames)

    def close(self) -> None:
        """Nothing to release."""


def _build(options: Any, env: BackendEnv) -> TintBackend:
    return TintBackend(options, env=env)


SPEC = BackendSpec(
    name="tint",
    factory="daotai_tint:_build",
    options=TintOptions,
    summary="test-only: striped flat colour frames",
    family="tint",
    device_class="cpu",
    default_model="tint-stripes",
)
