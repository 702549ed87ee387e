"""One shot rendered through the backend into its encoded files: the backend's frames checked
and fed to the encoders as they come, the frames kept for QC and the contact sheet, the
backend's own sound checked and muxed, and with a hardware encoder the fidelity gate
(daotai.run.encoder_choice).

The unit every executor runs, here or on a cluster's workers (daotai.cluster.worker), so it
stands apart from the run that orders the shots.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai.errors import EncodeError
from daotai.events import GLIMPSE_WIDTH, Glimpse
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import Audio, Event, Frame, GlimpsePace, Notice, Output, Progress, RenderJob, RunContext
from daotai.run.encoders import shot_sinks
from daotai.run.records import ShotRecord
from daotai.run.settings import PipelineSettings, layout_for

FIDELITY_SAMPLES_PER_SHOT = 12  # rendered frames kept to measure encode PSNR after encoding


def fidelity_sample_indexes(frames: int) -> set[int]:
    """Evenly spaced frames (first and last included) kept for the encode-fidelity check."""
    count = min(frames, FIDELITY_SAMPLES_PER_SHOT)
    return {int(round(i)) for i in np.linspace(0, frames - 1, count)}


def shot_files(shot_id: str, settings: PipelineSettings) -> dict[str, str]:
    """Output paths of one shot, relative to the output folder (kind → posix path)."""
    return layout_for(Path("."), settings).shot_files(shot_id, settings.controls)


def shot_sound(plan: Plan, shot: ShotPlan, audio: Audio) -> np.ndarray:
    """A backend's Audio checked like its frames (length within half a frame of the shot), as
    (N, C) float32 at 48 kHz lasting exactly the shot; EncodeError otherwise."""
    from daotai.encode.audio import MIX_RATE, check_samples, fit_length, resample, samples_for

    where = f"{shot.shot_id}: backend audio"
    if audio.shot_id != shot.shot_id:
        raise EncodeError(f"{where}: is for shot {audio.shot_id!r}")
    samples = check_samples(audio.samples, audio.rate, audio.layout, where)
    fps = Fraction(*plan.fps_fraction)
    planned = Fraction(shot.frames) / fps
    got = Fraction(samples.shape[0], audio.rate)
    if abs(got - planned) > 1 / (2 * fps):
        raise EncodeError(f"{where}: lasts {float(got):.4f} s ({samples.shape[0]} samples at {audio.rate} Hz), "
                          f"the shot {float(planned):.4f} s ({shot.frames} frames); it must match within half a frame")
    sound = fit_length(resample(samples, audio.rate, MIX_RATE), samples_for(planned, MIX_RATE))
    from daotai.post.assemble import limit

    limit(sound, ceiling_dbfs=-0.1)  # a resampler's overshoot on full-scale transients, never more
    return sound


def render_shot(backend, plan: Plan, shot: ShotPlan, out_dir: Path, settings: PipelineSettings,
                ctx: RunContext, record: ShotRecord, encoders: Any = None) -> Iterator[Event]:
    """Render one shot through the backend into its encoded files; yields progress. With a hardware
    encoder the shot file is held to the fidelity gate and rendered again in software when it misses
    (daotai.run.encoder_choice)."""
    if settings.hardware_encoder is None:
        return (yield from _render_shot_once(backend, plan, shot, out_dir, settings, ctx, record, encoders))
    from daotai.run.encoder_choice import render_shot_gated

    shot_path = layout_for(out_dir, settings).shot(shot.shot_id)
    yield from render_shot_gated(_render_shot_once, shot_path, backend, plan, shot, out_dir, settings, ctx, record,
                                 encoders)


def _render_shot_once(backend, plan: Plan, shot: ShotPlan, out_dir: Path, settings: PipelineSettings,
                      ctx: RunContext, record: ShotRecord, encoders: Any = None) -> Iterator[Event]:
    """Render one shot through the backend into its encoded files; yields progress.

    ``encoders`` is an :class:`daotai.encode.procsink.EncoderPool` whose processes encode
    beside the renderer; None encodes on threads of this process.
    """
    samples = fidelity_sample_indexes(shot.frames)
    middle = shot.frames // 2
    sinks = shot_sinks(plan, shot, out_dir, settings, encoders)
    started = time.perf_counter()
    render_s = 0.0
    frames_seen = 0
    audio: Audio | None = None
    pace = GlimpsePace(ctx)
    try:
        events = iter(backend.render(RenderJob(plan=plan, shot=shot, controls=settings.controls), ctx))
        while True:
            tick = time.perf_counter()
            event = next(events, None)
            render_s += time.perf_counter() - tick
            if event is None:
                break
            if isinstance(event, Frame):
                if event.index != frames_seen:
                    raise EncodeError(f"{shot.shot_id}: backend sent frame {event.index}, expected {frames_seen}")
                if event.index in samples:
                    record.samples[event.index] = event.rgb.copy()
                if event.index == middle:
                    record.middle = event.rgb.copy()
                sinks["shot"].put(event.rgb)
                if settings.controls:
                    if event.depth is None or event.mask is None:
                        raise EncodeError(f"{shot.shot_id}: backend {backend.name!r} produced no control channels; use --no-controls")
                    sinks["depth"].put(event.depth)
                    sinks["depth_preview"].put(event.depth)
                    sinks["mask"].put(event.mask)
                frames_seen += 1
                if pace.due(first=event.index == 0):
                    pace.shown()
                    yield Glimpse(shot.shot_id, event.index, glimpse_of(event.rgb))
            elif isinstance(event, Audio):
                if audio is not None:
                    raise EncodeError(f"{shot.shot_id}: backend {backend.name!r} sent a second Audio event; one per shot")
                audio = event
            else:
                if isinstance(event, Notice):
                    record.notices.append(event.text)
                yield event
        if frames_seen != shot.frames:
            raise EncodeError(f"{shot.shot_id}: backend produced {frames_seen} frames, the plan has {shot.frames}")
        sound = shot_sound(plan, shot, audio) if audio is not None else None
        yield Progress("encode", shot.shot_id, 0, 1, "finishing encoders")
        for sink in sinks.values():
            sink.finish()
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        raise
    if sound is not None:
        from daotai.encode.audio import ROLE_SHOT, mux_audio

        mux_audio(layout_for(out_dir, settings).shot(shot.shot_id), sound, 48000, ROLE_SHOT)
        record.audio = {"source": "backend", "rate": audio.rate, "channels": int(audio.samples.shape[1]),
                        "layout": audio.layout, "samples": int(audio.samples.shape[0])}
    record.render_s = render_s
    record.wall_s = time.perf_counter() - started
    record.files = shot_files(shot.shot_id, settings)
    for kind, rel in record.files.items():
        yield Output(kind, str(out_dir / rel), shot.shot_id)


def glimpse_of(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 → a copy at most GLIMPSE_WIDTH wide, the aspect kept (area-averaged)."""
    height, width = rgb.shape[:2]
    if width <= GLIMPSE_WIDTH:
        return rgb.copy()
    import cv2

    size = (GLIMPSE_WIDTH, max(1, round(height * GLIMPSE_WIDTH / width)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
