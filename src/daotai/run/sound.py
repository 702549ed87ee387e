"""A render's soundtrack: its file found and decoded onto the sequence's timeline, each shot
file the backend left silent given its slice, and what the manifest and the timeline say of
the sound.

A backend's own sound for a shot is checked where the shot is rendered (daotai.run.shots);
this module is the soundtrack's way through the run.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai.errors import Issue, ScriptError
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import Event, Notice, Progress
from daotai.run.records import ShotRecord

MAX_SOUNDTRACK_READ_S = 6 * 3600.0  # a soundtrack is decoded only as far as the sequence needs; never beyond this


def soundtrack_file(plan: Plan, source: Path | None) -> Path | None:
    """The soundtrack's file: relative paths resolve against the script's (or plan's) folder."""
    from daotai.script.sound_and_footage import UPLOAD_PREFIX

    track = plan.soundtrack
    if track is None:
        return None
    if track.path.startswith(UPLOAD_PREFIX):
        raise ScriptError([Issue("soundtrack.path", track.path, "names an upload of the service; render through "
                                 "`daotai serve` or name a local file")])
    path = Path(track.path)
    if not path.is_absolute():
        path = (Path(source).resolve().parent if source is not None else Path.cwd()) / path
    if not path.is_file():
        raise ScriptError([Issue("soundtrack.path", track.path, f"does not exist (looked for {path})")])
    return path


def load_soundtrack(plan: Plan, source: Path | None) -> np.ndarray | None:
    """The soundtrack placed on the sequence's timeline: (N, 2) float32 at 48 kHz lasting the picture, or None."""
    path = soundtrack_file(plan, source)
    if path is None:
        return None
    from daotai.encode.audio import read_audio
    from daotai.post.assemble import place_soundtrack, sample_at

    assert plan.soundtrack is not None
    fps = Fraction(*plan.fps_fraction)
    needed = float(Fraction(plan.total_frames) / fps) + max(0.0, -plan.soundtrack.offset_s) + 1.0
    samples = read_audio(path, until_s=min(needed, MAX_SOUNDTRACK_READ_S))
    return place_soundtrack(samples, plan.soundtrack.offset_s, sample_at(plan.total_frames, fps),
                            plan.soundtrack.gain_db)


def add_soundtrack_to_shots(plan: Plan, layout: RenderLayout, records: list[ShotRecord],
                            soundtrack: np.ndarray | None, backend: str) -> Iterator[Event]:
    """Give each shot file the backend left silent its slice of the soundtrack; say once when dialogue
    or sound the script asked for went unvoiced."""
    unvoiced = [shot.shot_id for shot, record in zip(plan.shots, records, strict=True)
                if shot.sound is not None and (shot.sound.dialogue or shot.sound.sound)
                and record.audio.get("source", "soundtrack") == "soundtrack"]
    if unvoiced:
        yield Notice("info", f"backend {backend!r} makes no sound: the dialogue and sound effects of "
                             f"{', '.join(unvoiced)} are not voiced" + (" (the soundtrack plays)" if soundtrack is not None else ""))
    if soundtrack is None:
        return
    for shot, record in zip(plan.shots, records, strict=True):
        yield from add_soundtrack_slice(plan, shot, layout, record, soundtrack)


def add_soundtrack_slice(plan: Plan, shot: ShotPlan, layout: RenderLayout, record: ShotRecord,
                         soundtrack: np.ndarray) -> Iterator[Event]:
    """Mux ``shot``'s slice of the soundtrack ((N, 2) float32, 48 kHz, sequence time) into its file, declicked
    at both ends and limited, unless the backend gave the shot sound of its own (or the slice is there)."""
    if record.audio:
        return
    from daotai.encode.audio import ROLE_SOUNDTRACK, mux_audio
    from daotai.post.assemble import DECLICK_S, limit, sample_at

    fps = Fraction(*plan.fps_fraction)
    declick = round(DECLICK_S * 48000)
    begin, end = sample_at(shot.start_frame, fps), sample_at(shot.start_frame + shot.frames, fps)
    piece = np.array(soundtrack[begin:end], np.float32)
    ramp = np.sin(np.linspace(0.0, np.pi / 2, declick, endpoint=False, dtype=np.float32)) ** 2
    piece[:declick] *= ramp[:, None]
    piece[len(piece) - declick:] *= ramp[::-1, None]
    limit(piece)
    mux_audio(layout.root / record.files["shot"], piece, 48000, ROLE_SOUNDTRACK)
    record.audio = {"source": "soundtrack", "rate": 48000, "channels": 2, "samples": int(len(piece)),
                    "sequence_samples": [begin, end]}
    yield Progress("encode", shot.shot_id, 1, 1, "soundtrack slice added")


def sound_summary(plan: Plan, records: list[ShotRecord], source: Path | None, report: Any) -> dict[str, Any]:
    """The manifest's "sound": the soundtrack file (hash, rate, length), what each shot file carries, the mix."""
    from daotai.encode.audio import probe_audio
    from daotai.files import sha256_file

    summary: dict[str, Any] = {"rate": 48000, "shots": {r.shot_id: r.audio.get("source") for r in records if r.audio}}
    path = soundtrack_file(plan, source)
    if path is not None and plan.soundtrack is not None:
        info = probe_audio(path)
        summary["soundtrack"] = {
            "path": plan.soundtrack.path, "resolved": str(path), "sha256": sha256_file(path),
            "bytes": path.stat().st_size, "offset_s": plan.soundtrack.offset_s, "gain_db": plan.soundtrack.gain_db,
            "codec": info.codec if info else None, "rate": info.rate if info else None,
            "channels": info.channels if info else None, "duration_s": info.duration_s if info else None,
        }
    sequence = (getattr(report, "sequence", None) or {}).get("audio") or {}
    summary["sequence"] = {"loudness": sequence.get("loudness"), "duration_s": sequence.get("duration_s")}
    return summary


def timeline_sound(plan: Plan, records: list[ShotRecord], sound: dict[str, Any] | None):
    """What the timeline's audio tracks hold (None for a silent render: no audio tracks)."""
    if sound is None:
        return None
    from daotai.deliver.timeline import TimelineSound

    track = sound.get("soundtrack") or {}
    return TimelineSound(
        shots_with_sound=frozenset(r.shot_id for r in records if r.audio.get("source") == "backend"),
        soundtrack=track.get("resolved"), soundtrack_duration_s=track.get("duration_s") or 0.0,
        soundtrack_offset_s=track.get("offset_s", 0.0), soundtrack_gain_db=track.get("gain_db", 0.0),
        muted=frozenset(s.shot_id for s in plan.shots if s.sound is not None and s.sound.mute),
        gains_db={s.shot_id: s.sound.gain_db for s in plan.shots if s.sound is not None},
    )
