"""What renders a run's shots: the ShotExecutor protocol, and LocalExecutor, every shot in this
process one after another through one warm backend, with takes per shot (daotai.run.retakes)
and encoder processes for long runs.

A cluster's executor (daotai.cluster) keeps the same protocol; the run works with either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Generator, Protocol

from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import Event, RunContext
from daotai.run.encoders import use_encoder_processes
from daotai.run.records import ShotRecord
from daotai.run.settings import PipelineSettings, backend_env
from daotai.run.shots import render_shot


class ShotExecutor(Protocol):
    """Renders the shots of a plan into their encoded files; the rest of the run stays in :func:`daotai.run.pipeline.run`."""

    def render_shots(self, plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext,
                     source: Path | None, health: Callable[[Any], dict] | None) -> Generator[Event, None, list]:
        """Yield events; return one ShotRecord per shot, in plan order."""
        ...


def _take_renderer(backend, plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext,
                   encoders: Any) -> Callable[[ShotPlan], Generator[Event, None, ShotRecord]]:
    """One take of a shot (daotai.run.retakes): rendered into the shot's files; returns its record."""

    def render_take(shot: ShotPlan) -> Generator[Event, None, ShotRecord]:
        record = ShotRecord(shot.shot_id)
        yield from render_shot(backend, plan, shot, out_dir, settings, ctx, record, encoders)
        return record

    return render_take


class LocalExecutor:
    """Every shot in this process, one after another, through one warm backend."""

    def __init__(self) -> None:
        self.finished: list[ShotRecord] = []  # the shots done so far (kept in the cache if the run stops)
        self._backend: Any = None  # while rendering

    def renders_on_cpu(self) -> bool:
        """Whether the shots are being drawn by this machine's processor cores (daotai.render.base.renders_on_cpu)."""
        from daotai.render.base import renders_on_cpu

        return renders_on_cpu(self._backend)

    def render_shots(self, plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext,
                     source: Path | None, health: Callable[[Any], dict] | None) -> Generator[Event, None, list]:
        """Yield events; return one ShotRecord per shot, in plan order."""
        from contextlib import nullcontext

        from daotai.encode.procsink import EncoderPool
        from daotai.render.registry import create_backend
        from daotai.run.retakes import TakeBudget, judge_with_qc, render_with_takes

        records: list[ShotRecord] = []
        self.finished = records
        # Encoder processes for the whole run when it is long enough to pay for their start-up,
        # started first so their imports overlap backend setup; otherwise encoder threads.
        with EncoderPool() if use_encoder_processes(plan) else nullcontext() as encoders:
            if encoders is not None:
                encoders.start(*(("shot", "depth", "depth_preview", "mask") if settings.controls else ("shot",)))
            backend = self._backend = create_backend(settings.backend, settings.options, backend_env(source, health))
            try:
                if encoders is not None:
                    encoders.wait_ready()
                budget = TakeBudget(settings.retakes.budget_s)
                judge = judge_with_qc(plan, out_dir, settings.camera_qc)
                for shot in plan.shots:
                    ctx.check()
                    render_take = _take_renderer(backend, plan, out_dir, settings, ctx, encoders)
                    record = yield from render_with_takes(render_take, judge, plan, shot, out_dir, settings.retakes,
                                                          budget)
                    records.append(record)
            finally:
                self._backend = None
                backend.close()
        return records
