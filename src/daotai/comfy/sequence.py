"""The Assemble Sequence node's library half: shot videos joined with the script's transitions.

The folder it writes is laid out as ``daotai render`` lays out its own (``shots/<id>.mp4``,
``sequence.mp4``, ``timeline.otio`` with ``.xml`` / ``.edl`` beside it), and the sequence is
made the way the render pipeline makes it: the same clips, transitions, encode settings (the
codec asked for over the backend's defaults) and sound (the shots' own sound unless muted,
the script's soundtrack under it). Given the shot files ``daotai render`` wrote, the sequence
is the same file, byte for byte.

A shot given as a file with the shot's frame count is copied into ``shots/``; frames, or a
file of another length, are encoded there (with the backend's encode defaults, as a render
would), the frames past the shot's end dropped (a model's 4k+1 rounding).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Generator, Mapping

import numpy as np

from daotai.errors import Issue, OptionError
from daotai.events import Event, Progress
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import RunContext

ShotSource = Path | str | np.ndarray  # a video file, or frames (F, H, W, 3) uint8 at the plan's fps


@dataclass(frozen=True)
class Sequence:
    """What :func:`assemble_shots` wrote."""

    folder: Path
    sequence: Path
    timeline: tuple[Path, ...]  # timeline.otio, then the editorial formats written beside it
    shots: tuple[Path, ...]  # in sequence order
    frames: int
    plan: Plan  # the plan of the assembled shots (re-timed as a sequence)
    editorial_note: str = ""  # how timeline.xml / .edl were retimed (a rate SMPTE timecode lacks), or ""
    subtitles: tuple[Path, ...] = ()  # sequence.srt / .vtt and the shots' (only when the plan has dialogue)

    def summary(self) -> str:
        """For the node's panel: what was written, and the editorial retiming when there was one."""
        names = ", ".join(p.name for p in self.timeline)
        lines = [f"{self.sequence.name}: {self.frames} frames; timeline: {names}"]
        return "\n".join([*lines, self.editorial_note] if self.editorial_note else lines)


def chosen_shots(plan: Plan, shot_ids: str | list[str] | tuple[str, ...] = "") -> Plan:
    """The plan of the named shots (comma-separated or a list; empty: every shot), re-timed as ``--shots`` does."""
    from daotai.plan.planner import select_shots

    ids = [s.strip() for s in shot_ids.split(",")] if isinstance(shot_ids, str) else [str(s).strip() for s in shot_ids]
    ids = [s for s in ids if s]
    if not ids:
        return plan
    known = {s.shot_id for s in plan.shots}
    unknown = [s for s in ids if s not in known]
    if unknown:
        raise OptionError([Issue("shot_ids", s, "is not a shot of the script") for s in unknown],
                          valid=tuple(s.shot_id for s in plan.shots))
    return select_shots(plan, ids)


def _place_shot(source: ShotSource, target: Path, plan: Plan, shot: ShotPlan, enc) -> None:
    """Put the shot's video at ``target`` (atomically): a file with the shot's frame count is copied,
    anything else is brought to the shot's frames and encoded there.

    Frames past the shot's end (a model's 4k+1 rounding) are dropped, as the neural backends drop
    them; a clip that is shorter, or of another size, is refused.
    """
    from daotai.files import atomic_path

    if not isinstance(source, np.ndarray):
        from daotai.encode.read import decode_frames, probe

        path = Path(source)
        if not path.is_file():
            raise OptionError.at(shot.shot_id, str(path), "is not a video file")
        info = probe(path)
        if info.frames == shot.frames:
            if path.resolve() != target.resolve():
                with atomic_path(target) as temp:
                    shutil.copyfile(path, temp)
            return
        if info.fps != Fraction(*plan.fps_fraction):
            raise OptionError.at(shot.shot_id, f"{path.name} at {info.fps} fps", f"must run at the plan's "
                                 f"{Fraction(*plan.fps_fraction)} fps")
        source = np.stack(list(decode_frames(path)))
    from daotai.encode.video import VideoWriter

    frames = np.asarray(source)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise OptionError.at(shot.shot_id, f"frames of shape {frames.shape} {frames.dtype}", "must be (F, H, W, 3) uint8")
    if frames.shape[1:3] != (plan.height, plan.width):
        raise OptionError.at(shot.shot_id, f"{frames.shape[2]}x{frames.shape[1]}",
                             f"must be the plan's size, {plan.width}x{plan.height}")
    if len(frames) < shot.frames:
        raise OptionError.at(shot.shot_id, f"{len(frames)} frames", f"must cover the shot's {shot.frames} frames")
    with VideoWriter(target, plan.width, plan.height, Fraction(*plan.fps_fraction), enc) as writer:
        for frame in frames[: shot.frames]:
            writer.write(frame)


def assemble_shots(plan: Plan, shots: Mapping[str, ShotSource], folder: str | Path, *, codec: str = "h264",
                   backend: str = "previz", source: Path | None = None,
                   ctx: RunContext | None = None) -> Generator[Event, None, Sequence]:
    """Join ``shots`` (shot id → video file or frames) in ``plan``'s order into ``folder``; yields progress.

    ``plan`` holds exactly the shots to join (see :func:`chosen_shots`); ``codec`` and
    ``backend`` choose the encode settings as ``daotai render --codec … --backend …`` does;
    ``source`` is the script file its soundtrack is relative to (None: the current folder).
    """
    from daotai.deliver.subtitles import write_subtitles
    from daotai.deliver.timeline import editorial_retime, write_timeline
    from daotai.encode.audio import ROLE_SOUNDTRACK, probe_audio
    from daotai.post.assemble import ClipSpec, Transition, assemble, closing_fade_seconds
    from daotai.run.settings import PipelineSettings, encode_settings_for
    from daotai.run.sound import load_soundtrack

    ctx = ctx or RunContext()
    missing = [s.shot_id for s in plan.shots if s.shot_id not in shots]
    if missing:
        raise OptionError([Issue("shots", shot_id, "has no video; connect one or name a folder that holds "
                                 "shots/<id>.mp4") for shot_id in missing])
    settings = PipelineSettings(backend=backend, codec=codec)
    enc = encode_settings_for(settings, plan.width, plan.height)
    layout = RenderLayout(Path(folder), enc.container)
    layout.make_folders(False)
    total = len(plan.shots)
    placed = []
    for done, shot in enumerate(plan.shots):
        ctx.check()
        yield Progress("encode", shot.shot_id, done, total, "placing shot files")
        target = layout.shot(shot.shot_id)
        _place_shot(shots[shot.shot_id], target, plan, shot, enc)
        placed.append(target)

    soundtrack = load_soundtrack(plan, source)
    fps = Fraction(*plan.fps_fraction)
    clips = []
    for shot, path in zip(plan.shots, placed, strict=True):
        level = shot.sound
        heard = probe_audio(path)
        own = heard is not None and heard.role != ROLE_SOUNDTRACK and not (level is not None and level.mute)
        transition = Transition.planned(shot.transition.type, shot.transition.frames, fps)
        clips.append(ClipSpec(path=path, transition_in=transition, audio=own,
                              audio_gain_db=level.gain_db if level is not None else 0.0))

    def on_frame(done: int, count: int) -> None:
        ctx.check()  # a stop between frames leaves nothing at the sequence's path

    yield Progress("assemble", None, 0, plan.total_frames)
    closing = closing_fade_seconds(plan.fade_out.frames, fps) if plan.fade_out is not None else 0.0  # as the render's
    result = assemble(clips, layout.sequence, fps, enc, on_progress=on_frame, soundtrack=soundtrack, fade_out_s=closing,
                      letterbox=plan.letterbox)
    yield Progress("assemble", None, plan.total_frames, plan.total_frames)
    timeline = write_timeline(plan, {s.shot_id: layout.relative("shot", s.shot_id) for s in plan.shots},
                              layout.timeline)
    subtitles = write_subtitles(plan, layout)  # as a render's folder has them
    retime = editorial_retime(plan)
    return Sequence(folder=layout.root, sequence=layout.sequence, timeline=tuple(timeline), shots=tuple(placed),
                    frames=result.frames, plan=plan, editorial_note=retime.note() if retime is not None else "",
                    subtitles=tuple(subtitles))


def shots_in_folder(plan: Plan, folder: str | Path) -> dict[str, Path]:
    """Shot id → ``shots/<id>.<container>`` of a render folder, for the plan's shots found there."""
    layout = RenderLayout.find(folder)
    return {s.shot_id: layout.shot(s.shot_id) for s in plan.shots if layout.shot(s.shot_id).is_file()}
