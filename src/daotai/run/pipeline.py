"""run(plan, out_dir, settings, ctx) -> Iterator[Event]: render → encode → assemble → qc → deliver.

The orchestration of one render; its parts sit beside it in daotai.run: the settings and their
resolution (settings), the output and staging folders (output_folder), the disk-space check
(space), the shot cache's keys and reuse (reuse), the executors and the shot each one renders
(executors, shots, encoders), the soundtrack (sound) and the run after rendering (finish).

Rendering and encoding overlap: each output stream (shot video, depth, depth preview, mask) is
encoded by its own long-lived process (``daotai.encode.procsink``), fed through a shared-memory
ring while the backend renders the next frame (the renderer holds the GIL during GL calls, which
slows encoder threads); short runs, which would not pay back the processes' start-up, and
``render_shot`` called without a pool use one encoder thread per stream (daotai.run.encoders).
Every file is written to a temp name in its folder and renamed when complete, so an interrupted
run leaves nothing half-written at an output path.

A render never writes into its output folder: it fills a hidden staging sibling
(``.<name>.daotai-staging-<hex>``, daotai.files.staging_folder) and swaps it in whole once the
manifest is written, so the folder holds the earlier render or the new one, never a mix; a
stopped render removes its staging folder, leaves the output folder untouched and says what
was finished (a note on the exception). Shots reused from the shot cache are linked (or, from
another file system, copied) into the staging folder from their checked cache entry. The
folder must be empty, absent or a render of the same script
(:func:`daotai.run.output_folder.check_output_folder`); anything else needs ``force``.

Before anything is written the render's files are estimated and checked against the free disk
space (:func:`daotai.run.space.ensure_space`, daotai.diskspace); a disk too full for them, or one
that fills up during the render, stops it with :class:`daotai.errors.DiskFull` (the staging
folder removed).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator

import numpy as np

from daotai.errors import Cancelled, PlanError, interrupted_inside
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan
from daotai.render.base import Event, Notice, RunContext, renders_on_cpu
from daotai.run.executors import LocalExecutor, ShotExecutor
from daotai.run.finish import after_render
from daotai.run.output_folder import (
    RunTrace,
    check_output_folder,
    final_paths,
    mark_in_progress,
    open_staging,
    stopped_note,
)
from daotai.run.records import Finished, RunResult, ShotRecord
from daotai.run.reuse import chain_cache_misses, keep_finished_shots, reuse_cached_shots, shot_keys
from daotai.run.settings import PipelineSettings, encode_settings_for, layout_for, require_models, resolved_options
from daotai.run.sound import add_soundtrack_slice, load_soundtrack
from daotai.run.space import disk_full_error, ensure_space

if TYPE_CHECKING:
    from daotai.encode.video import EncodeSettings


def run(plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext | None = None,
        source: Path | None = None, health: Callable[[Any], dict] | None = None,
        executor: ShotExecutor | None = None) -> Iterator[Event | Finished]:
    """Render every (selected) shot, assemble, check and deliver; yields events, then Finished.

    ``executor`` renders the shots (default: :class:`LocalExecutor`); front ends choose it, e.g.
    a Ray cluster's from :func:`daotai.cluster.executor_for` when ``settings.cluster`` is set.

    ``health(runtime) -> sample`` replaces the neural backends' accelerator health sampler
    (:func:`daotai.runtime.device.health_sample`) for a local run, e.g. for a front end that
    already polls the GPU; cluster workers always sample their own device.
    """
    from daotai.files import remove_quietly, swap_folder
    from daotai.plan.planner import select_shots

    ctx = ctx or RunContext()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise PlanError(f"--output: {out_dir} exists and is not a folder")
    if settings.shots:
        plan = select_shots(plan, list(settings.shots))
    from daotai.render.registry import spec_for

    spec = spec_for(settings.backend)
    options = resolved_options(settings)  # refused here, before any work, when an option is wrong
    require_models(settings, options)  # and a model that is not downloaded
    from daotai.render.footage import footage_notices

    for notice in footage_notices(plan, spec, Path(source).resolve().parent if source is not None else None):
        yield notice  # a reference video that does not decode or is too short is refused here, before any work
    settings = replace(settings, options=options.model_dump())  # the manifest records them, validated
    if settings.cache and options.shots_depend_on_earlier():
        settings = replace(settings, cache=None)
        yield Notice("info", "the shot cache is not used: with these options a shot depends on the shots rendered "
                             "before it, and a cached shot's key describes it alone")
    if settings.controls and not spec.controls:
        # Neural backends make no depth/mask; the run goes on with controls off.
        settings = replace(settings, controls=False)
        yield Notice("info", f"backend {settings.backend!r} makes no control channels: rendering without controls")
    if settings.usd_cameras:
        from daotai.deliver.camera_files import usd_skipped

        skipped = usd_skipped()
        if skipped is not None:  # said now, before any work, and kept in the manifest
            settings = replace(settings, usd_cameras=False, skipped_outputs=(*settings.skipped_outputs, skipped))
            yield Notice("warning", f"{skipped['output']} will not be written: {skipped['reason']}; "
                                    f"install it with: {skipped['install']}")
    enc = encode_settings_for(settings, plan.width, plan.height)  # codec/crf/preset checked before any work
    from daotai.run.encoder_choice import resolve_encoder

    settings = yield from resolve_encoder(settings, plan.width, plan.height, Fraction(*plan.fps_fraction), enc.codec)
    enc = encode_settings_for(settings, plan.width, plan.height)
    if out_dir.is_symlink():
        out_dir = out_dir.resolve()  # the folder it names is replaced, not the link
    folder = check_output_folder(out_dir, plan, source, settings.force)  # refused here, before any work
    cache, keys = None, {}
    if settings.cache:
        from daotai.run.cache import ShotCache

        cache = ShotCache(settings.cache, settings.cache_bytes)
        keys = shot_keys(plan, settings, enc, source)
    needed = yield from ensure_space(plan, settings, out_dir, cache, keys)  # refused here, before any work
    staging = open_staging(Path(os.path.abspath(out_dir)))
    trace = RunTrace(total=len(plan.shots), before=folder.state)
    try:
        result = yield from final_paths(
            _render_into(plan, staging, settings, ctx, source, health, executor, enc, trace, cache, keys),
            staging, out_dir, trace)
        trace.stage = "swap"
        swap_folder(staging, os.path.abspath(out_dir), keep_old=folder.keep_old)
    except BaseException as exc:
        remove_quietly(staging)
        if isinstance(exc, GeneratorExit):
            raise
        full = disk_full_error(exc, out_dir, staging, needed, plan, settings)
        # What was finished and how to go on, once a shot started (or the user stopped the run):
        # an error before any shot ran is the whole story, with nothing to resume.
        ran = bool(trace.shot or trace.finished) or trace.stage not in ("plan", "render")
        if ran or full is not None or isinstance(exc, Cancelled) or interrupted_inside(exc):
            (full or exc).add_note(stopped_note(out_dir, trace, settings))
        if full is not None:
            raise full from exc
        raise
    if folder.keep_old is not None:
        yield Notice("warning", f"{out_dir} held {len(folder.foreign)} file(s) daotai did not write "
                                f"({', '.join(folder.foreign[:4])}{' …' if len(folder.foreign) > 4 else ''}): "
                                f"the old folder was kept whole as {folder.keep_old}")
    elif folder.state in ("other_script", "not_a_render"):
        yield Notice("info", f"replaced the earlier contents of {out_dir} ({folder.describe()}), as --force asked")
    yield Finished(replace(result, out_dir=out_dir, sequence=out_dir / result.sequence.relative_to(staging),
                           qc_path=out_dir / result.qc_path.relative_to(staging)))


def _render_into(plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext, source: Path | None,
                 health: Callable[[Any], dict] | None, executor: ShotExecutor | None, enc: EncodeSettings,
                 trace: RunTrace, cache: Any, keys: dict[str, str]) -> Generator[Event, None, RunResult]:
    """The run's work in its staging folder ``out_dir``: yields events, returns the RunResult;
    ``trace`` follows the stage reached and the shots kept in the cache (for a stopped run's note);
    ``cache`` (a ShotCache or None) holds finished shots by their ``keys``."""
    from daotai.files import atomic_write_text
    from daotai.plan.planner import plan_to_json

    layout = layout_for(out_dir, settings)
    layout.make_folders(settings.controls)
    timings: dict[str, float] = {}
    run_started = time.perf_counter()
    soundtrack = load_soundtrack(plan, source)  # checked and decoded before any render
    plan_text = plan_to_json(plan)
    mark_in_progress(layout, plan_text)  # says whose staging folder this is, until the manifest is written
    atomic_write_text(layout.plan, plan_text)
    trace.stage = "render"
    for note in plan.scene.notices:  # what the planner chose for the whole scene (the set kit)
        yield Notice("info", note)
    for shot in plan.shots:
        for warning in shot.warnings:
            yield Notice("warning", warning, shot.shot_id)

    if settings.cluster and executor is None:
        raise ValueError("settings.cluster is set but no executor was given; front ends pass "
                         "daotai.cluster.executor_for(settings)")
    executor = executor or LocalExecutor()
    reused: dict[str, ShotRecord] = {}
    if cache is not None and chain_cache_misses(plan, settings, cache, keys):
        yield Notice("info", f"the {settings.backend} backend continues each shot from the last frame of the one "
                             "before (workflow fl2va) and some shots changed: every shot is rendered again, so "
                             "the sequence matches a render without the cache")
    elif cache is not None:
        reused = yield from reuse_cached_shots(plan, cache, keys, out_dir)
    todo = tuple(shot for shot in plan.shots if shot.shot_id not in reused)
    from daotai.qc.parallel import ShotChecks

    # Shots are checked by worker processes as their files become final: right after rendering,
    # once the soundtrack's slice (if any) is muxed into them.
    checks = ShotChecks(plan, settings.qc_workers if len(todo) > 1 else 0)
    try:
        try:
            # the workers start before the executor loads its backend (at its first event), so the
            # interpreters' start-up and imports run while the backend starts
            checks.start()
            events = executor.render_shots(plan.model_copy(update={"shots": todo}), out_dir, settings, ctx,
                                           source, health)
            rendered = (yield from _handing_in(events, executor, checks, plan, out_dir, settings.camera_qc,
                                               layout, soundtrack, ctx)) if todo else []
            render_ended = time.monotonic()
        except BaseException:
            if cache is not None:  # the shots finished so far make the next render cheaper
                trace.cached = keep_finished_shots(plan, layout, getattr(executor, "finished", []), soundtrack,
                                                   settings.backend, cache, keys)
            raise
        result = yield from after_render(plan, out_dir, settings, ctx, layout, enc, trace, soundtrack, cache, keys,
                                          reused, rendered, todo, checks, timings, run_started, plan_text, source,
                                          render_ended)
    except BaseException:
        checks.close(cancel=True)
        raise
    checks.close()
    return result


def _handing_in(events: Generator[Event, None, list], executor: Any, checks: Any, plan: Plan, out_dir: Path,
                camera: bool, layout: RenderLayout, soundtrack: np.ndarray | None,
                ctx: RunContext) -> Generator[Event, None, list]:
    """The executor's events, handing each shot it finishes (``executor.finished``) to ``checks``
    at the executor's next event (the next shot's first), so a shot is checked while later ones render.
    A shot the backend left silent gets its soundtrack slice first, so it is checked as delivered.

    When the executor draws on this machine's processor cores (previz on a software rasteriser),
    the next shot waits until a worker has taken every shot handed in: render and checks then
    share cores that are busy either way, so the render is no sooner done, but the checks no longer
    pile up behind it and the wait after the last shot is that shot's checks alone (on two cores
    the cold preview run's QC wait went from about 3 s to under 2 s at the same total).

    ``executor.finished`` is read again at every event: an executor makes a new list when its
    render starts (LocalExecutor does), so a list read before the first event would stay empty
    and every shot would wait for the end of the render to be checked."""
    from daotai.qc.report import hand_in_shot

    shots = {shot.shot_id: shot for shot in plan.shots}
    handed = 0

    def hand_in(hold: bool) -> Iterator[Event]:
        nonlocal handed
        finished: list[ShotRecord] = getattr(executor, "finished", None) or []
        for record in finished[handed:]:
            if soundtrack is not None:
                yield from add_soundtrack_slice(plan, shots[record.shot_id], layout, record, soundtrack)
            hand_in_shot(checks, plan, shots[record.shot_id], record, out_dir, camera)
        if hold and len(finished) > handed and renders_on_cpu(executor):
            checks.wait_until_taken(ctx.cancel)
        handed = max(handed, len(finished))

    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            yield from hand_in(hold=False)  # nothing left to hold back: the sequence is assembled meanwhile
            return stop.value
        yield from hand_in(hold=True)
        yield event
