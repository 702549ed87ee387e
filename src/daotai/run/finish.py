"""The run after its shots are rendered: the soundtrack's slices, the shots stored in the cache,
the sequence assembled, the enhanced copies, the quality checks, the deliverables and the
manifest; returns the RunResult.

Apart from the orchestration (daotai.run.pipeline), which owns the staging folder and the
rendering of shots and hands over here once the executor is done.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator, Iterator

import numpy as np

from daotai.errors import EncodeError
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan
from daotai.render.base import Event, Notice, Output, Progress, RunContext
from daotai.run.output_folder import RunTrace
from daotai.run.records import RunResult, ShotRecord
from daotai.run.settings import PipelineSettings
from daotai.run.sound import add_soundtrack_to_shots, sound_summary, timeline_sound

if TYPE_CHECKING:
    from daotai.encode.video import EncodeSettings


def control_index(plan: Plan) -> str:
    """control/index.json: how to read the control files of every shot."""
    index = {
        "depth": "FFV1 gray16le .mkv: distance along the camera's view axis in millimetres; 65535 = sky or beyond 65.534 m",
        "depth_preview": "H.264 full-range gray .mp4: log-scaled depth, near = white, sky = black (for video-model conditioning)",
        "mask": "FFV1 gray .mkv: character index map; 0 = no character, value i = the shot's i-th character (see shots)",
        "axes": "camera-local x right, y up, -z forward (OpenGL); cameras per frame are in plan.json",
        "shots": {
            shot.shot_id: {
                "frames": shot.frames,
                "mask_values": {str(i + 1): char_id for i, char_id in enumerate(shot.characters)},
            }
            for shot in plan.shots
        },
    }
    return json.dumps(index, indent=1, ensure_ascii=False) + "\n"


def after_render(plan: Plan, out_dir: Path, settings: PipelineSettings, ctx: RunContext, layout: RenderLayout,
                  enc: EncodeSettings, trace: RunTrace, soundtrack: np.ndarray | None, cache: Any, keys: dict[str, str],
                  reused: dict[str, ShotRecord], rendered: list, todo: tuple, checks: Any, timings: dict[str, float],
                  run_started: float, plan_text: str, source: Path | None,
                  render_ended: float) -> Generator[Event, None, RunResult]:
    """The run after its shots are rendered: assemble, (enhance), check, deliver; returns the RunResult.

    ``render_ended``: when the executor returned, on time.monotonic() (the clock of ``checks.spans``)."""
    from daotai.files import atomic_write_text
    from daotai.qc.parallel import seconds_before
    from daotai.qc.report import hand_in_shot

    by_id = {record.shot_id: record for record in rendered}
    records = [reused.get(shot.shot_id) or by_id[shot.shot_id] for shot in plan.shots]
    yield from add_soundtrack_to_shots(plan, layout, records, soundtrack, settings.backend)
    for shot, record in zip(plan.shots, records, strict=True):
        if shot.shot_id in by_id and not checks.has(f"shot:{shot.shot_id}"):
            hand_in_shot(checks, plan, shot, record, out_dir, settings.camera_qc)
    if cache is not None:
        for record in rendered:  # stored as delivered (a soundtrack slice included)
            record.key = keys[record.shot_id]
            cache.put(record.key, out_dir, record)
        trace.cached = [record.shot_id for record in records]
        if reused:
            yield Notice("info", f"{len(todo)} of {len(plan.shots)} shots rendered, {len(reused)} reused unchanged "
                                 f"({', '.join(reused)})")
    timings["render_and_encode_s"] = time.perf_counter() - run_started
    if settings.controls:
        atomic_write_text(layout.control_index, control_index(plan))
        yield Output("control_index", str(layout.control_index))
    timings["render_only_s"] = sum(r.render_s for r in records)

    ctx.check()
    trace.stage = "assemble"
    tick = time.perf_counter()
    try:
        sequence = yield from assemble_sequence(plan, layout, enc, records, soundtrack)
    except EncodeError as exc:
        if enc.hardware is None:
            raise
        yield Notice("warning", f"hardware encoder {enc.hardware.name} failed on the sequence ({exc}); "
                                "assembling it with the software encoder")
        enc = replace(enc, hardware=None)
        sequence = yield from assemble_sequence(plan, layout, enc, records, soundtrack)
    timings["assemble_s"] = time.perf_counter() - tick

    if settings.enhance:
        from daotai.post.enhance import enhance_render, parse_steps

        trace.stage = "enhance"
        tick = time.perf_counter()
        files = {r.shot_id: r.files["shot"] for r in records}
        yield from enhance_render(plan, out_dir, files, parse_steps(settings.enhance), enc, ctx)
        timings["enhance_s"] = time.perf_counter() - tick

    ctx.check()
    trace.stage = "qc"
    tick = time.perf_counter()
    from daotai.run.cache import check_render_reusing

    # shots reused from the cache keep their stored qc entries: only the rest (and the sequence) are checked
    report = yield from check_render_reusing(plan, out_dir, records, cache, settings.camera_qc, layout, checks)
    timings["qc_s"] = time.perf_counter() - tick
    # shot checking the render hid: done by the workers while later shots still rendered
    timings["qc_beside_render_s"] = seconds_before(checks.spans, render_ended, ("shot:", "path:"))

    trace.stage = "deliver"
    tick = time.perf_counter()
    yield Progress("deliver", None, 0, 3, "contact sheet, cameras and timeline")
    from daotai.deliver.camera_files import write_cameras
    from daotai.deliver.contact_sheet import write_contact_sheet
    from daotai.deliver.manifest import write_manifest
    from daotai.deliver.timeline import camera_files_by_shot, write_timeline

    write_contact_sheet(plan, {r.shot_id: r.middle for r in records}, layout.contact_sheet)
    yield Output("contact_sheet", str(layout.contact_sheet))
    if settings.boards:
        from daotai.deliver.boards import write_boards

        for path in write_boards(plan, {r.shot_id: r.middle for r in records}, layout, settings.boards):
            yield Output(layout.classify(path.relative_to(layout.root).as_posix())[0], str(path))
    # every shot's camera for other tools (pose files, JSON, USD), with the other deliverables;
    # the timeline's clips name them
    cameras = write_cameras(plan, layout.cameras_dir, usd=settings.usd_cameras)
    sound = sound_summary(plan, records, source, report) if soundtrack is not None or any(r.audio for r in records) else None
    write_timeline(plan, {r.shot_id: r.files["shot"] for r in records}, layout.timeline,
                   timeline_sound(plan, records, sound), camera_files_by_shot(plan, cameras, layout.timeline.parent))
    yield Output("timeline", str(layout.timeline))
    from daotai.deliver.subtitles import write_subtitles

    for path in write_subtitles(plan, layout):  # the dialogue's subtitles (none without dialogue)
        kind, shot_id = layout.classify(path.relative_to(layout.root).as_posix())
        yield Output(kind, str(path), shot_id)
    yield Progress("deliver", None, 3, 3)
    timings["deliver_s"] = time.perf_counter() - tick
    timings["total_s"] = time.perf_counter() - run_started
    trace.stage = "manifest"
    write_manifest(plan, plan_text, out_dir, settings, records, timings, source, encode=enc, sound=sound)
    layout.in_progress.unlink(missing_ok=True)  # the staging folder holds one whole render
    yield Output("manifest", str(layout.manifest))

    frame = f"{plan.width}x{plan.height}" if plan.letterbox is None else \
        "{}x{} ({}x{} letterboxed)".format(*plan.letterbox, plan.width, plan.height)
    summary = (
        f"{len(plan.shots)} shot{'s' if len(plan.shots) != 1 else ''}, {plan.total_duration_s:g} s, "
        f"{frame}, rendered in {timings['total_s']:.1f} s; qc {'passed' if report.ok else 'FAILED'}"
    )
    return RunResult(out_dir, sequence, layout.qc, report.ok, summary, timings)


def assemble_sequence(plan: Plan, layout: RenderLayout, enc: EncodeSettings, records: list[ShotRecord],
              soundtrack: np.ndarray | None = None) -> Iterator[Event]:
    """Cut the shot files into the sequence (``layout.sequence``) with the plan's transitions,
    mixing the shots' own sound (not muted) over the soundtrack."""
    from daotai.post.assemble import ClipSpec, Transition, assemble, closing_fade_seconds

    fps = Fraction(*plan.fps_fraction)
    clips = []
    for shot, record in zip(plan.shots, records, strict=True):
        level = shot.sound
        own = record.audio.get("source") == "backend" and not (level is not None and level.mute)
        clips.append(ClipSpec(path=layout.root / record.files["shot"],
                              transition_in=Transition.planned(shot.transition.type, shot.transition.frames, fps),
                              audio=own, audio_gain_db=level.gain_db if level is not None else 0.0))
    target = layout.sequence
    progress: list[tuple[int, int]] = []

    def on_progress(done: int, total: int) -> None:
        progress.append((done, total))

    # Assembly streams frames; progress is reported once it returns (it is a fraction of render time).
    yield Progress("assemble", None, 0, plan.total_frames, f"{len(clips)} shots into the sequence")
    closing = closing_fade_seconds(plan.fade_out.frames, fps) if plan.fade_out is not None else 0.0  # to black
    result = assemble(clips, target, fps, enc, on_progress=on_progress, soundtrack=soundtrack, fade_out_s=closing,
                      letterbox=plan.letterbox)
    if result.audio is not None and result.audio["limiter_gain_reduction_db"] > 0:
        yield Notice("info", f"the mix peaked at {result.audio['peak_before_limiter']:.3f} and was limited by up to "
                             f"{result.audio['limiter_gain_reduction_db']:.1f} dB so nothing clips")
    yield Progress("assemble", None, plan.total_frames, plan.total_frames)
    yield Output("sequence", str(target))
    return target
