"""Join shot clips into one sequence with cuts, crossfades, wipes and fades.

Where the clips were encoded with the sequence's own settings (the pipeline's shots are), the
sequence is mostly copied, not re-encoded: every GOP of a clip whose frames the sequence shows
untouched (:func:`untouched`) is copied packet for packet (:mod:`daotai.encode.remux`), so it
decodes to exactly the clip's frames, and only the GOPs a transition blends or fades are
decoded, changed and encoded again. Otherwise (other settings, a hardware encoder, or
``stream_copy=False``) every frame streams through decode → blend → encode. Either way the
frames being decoded are read a few ahead on a worker thread (:mod:`daotai.encode.ahead`), and
only the two clips a crossfade joins are open at once, never a whole clip in memory.

Transition semantics (``ClipSpec.transition_in`` joins the previous clip to this one):

* ``cut``: plain concatenation.
* ``crossfade`` of d seconds: n = round(d·fps) frames; the last n frames of the previous
  clip and the first n frames of this one are shown blended, frame j of the overlap
  (0-based) weighting this clip by (j + 1) / (n + 1). The sequence is n frames shorter
  than the sum of the clips. On the first clip a crossfade has nothing to blend with and
  is ignored.
* ``wipe_left`` / ``wipe_right`` / ``wipe_up`` / ``wipe_down`` of d seconds: overlap exactly as
  a crossfade (n = round(d·fps) frames, the same length, ignored on the first clip), but frame j
  of the overlap shows the incoming clip behind an edge (j + 1) / (n + 1) of the way across the
  frame, travelling the way the name says (:mod:`daotai.post.wipe`). Its sound is crossfaded.
* ``fade`` of d seconds (dip to black): k = round(d·fps / 2); the previous clip fades to
  black over its last k frames (its last frame is black) and this clip fades in from black
  over its first k frames (its first frame is black). Nothing overlaps, so the total length
  is unchanged. On the first clip it is a fade-in from black.
* the sequence's ``fade_out`` of d seconds (the film's end): the last clip fades to black
  over its last m = round(d·fps) frames (its last frame is black), its sound with it, and
  the soundtrack fades over the same frames. Length is unchanged.

Rounding is half up, computed exactly on the decimal duration and the rational rate.

Sound (when a clip's own sound is mixed, ``ClipSpec.audio``, or a soundtrack is given) is
mixed in float32 at 48 kHz stereo, on the picture's timeline (frame f starts at sample
round(f · 48000 / fps)), with the transitions applied to it as to the picture:

* ``crossfade`` and wipes: equal power over the overlap, outgoing cos(π/2·u), incoming sin(π/2·u),
  u running 0 → 1 across the n overlapping frames (the summed power of unrelated sounds
  stays constant).
* ``fade``: the sound follows the picture's brightness: the outgoing clip's gain falls
  linearly to 0 at its last (black) frame, the incoming one rises from 0 at its first (black)
  frame to 1 k frames later.
* ``cut``: a DECLICK_S raised-cosine ramp out of the outgoing clip and into the incoming one
  (also at the very start and end of the sequence), so no step in the waveform clicks.

The soundtrack runs under everything, untouched by the transitions. The sum goes through a
look-ahead peak limiter (:func:`limit`) with its ceiling at LIMIT_CEILING_DBFS, so nothing
clips. The mix lasts exactly as long as the picture, and is muxed as AAC-LC (MOV: 24-bit PCM)
beside it; without any sound the sequence is written exactly as before, with no audio track.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from daotai.encode.ahead import read_ahead
from daotai.encode.read import decode_frames, probe
from daotai.encode.video import EncodeSettings, VideoWriter, as_fps
from daotai.errors import EncodeError
from daotai.files import atomic_path
from daotai.plan.timing import transition_length, transition_seconds
from daotai.post.wipe import WIPES, wipe_frame
from daotai.script.aspect import bars

__all__ = [
    "KINDS",
    "AssemblyResult",
    "ClipSpec",
    "Transition",
    "amplitude",
    "assemble",
    "closing_fade_seconds",
    "end_fade_frames",
    "limit",
    "mix_sound",
    "place_soundtrack",
    "planned_frame_count",
    "transition_frames",
    "untouched",
]

KINDS = ("cut", "crossfade", "fade", *WIPES)
OVERLAPS = ("crossfade", *WIPES)  # the incoming clip overlaps the end of the outgoing one

ProgressCallback = Callable[[int, int], None]

DECLICK_S = 0.005  # ramp at cuts and at the sequence's ends: 5 ms hides the step, too short to hear as a fade
LIMIT_CEILING_DBFS = -1.0  # the limiter's sample-peak ceiling: 1 dB of room for AAC and inter-sample overs
LIMIT_BLOCK_S = 0.010  # the limiter's gain changes at most once per 10 ms block, and looks one block ahead
LIMIT_RELEASE_DB_PER_S = 20.0  # after a peak the gain comes back up at most this fast (no pumping)


@dataclass(frozen=True)
class Transition:
    """How a clip is joined to the one before it: cut, crossfade, fade (dip to black) or a wipe."""

    kind: str = "cut"
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise EncodeError(f"transition.kind: {self.kind!r} must be one of {', '.join(KINDS)}")
        d = self.duration_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d):
            raise EncodeError(f"transition.duration_s: {d!r} must be a finite number of seconds")
        if self.kind == "cut" and d != 0:
            raise EncodeError(f"transition.duration_s: {d!r} must be 0 for a cut")
        if self.kind != "cut" and d <= 0:
            raise EncodeError(f"transition.duration_s: {d!r} must be > 0 for a {self.kind}")

    @classmethod
    def planned(cls, kind: str, frames: int, fps: int | float | str | Fraction) -> "Transition":
        """The transition a plan counted in frames (a fade's per side) at ``fps``, as the seconds it spans;
        it is counted back to the same frames at that rate, and spans the same time at another."""
        if kind == "cut":
            return cls()
        return cls(kind, transition_seconds(frames, as_fps(fps), overlaps=kind in OVERLAPS))


def closing_fade_seconds(frames: int, fps: int | float | str | Fraction) -> float:
    """The seconds of a plan's closing fade of ``frames`` frames at ``fps`` (``assemble``'s ``fade_out_s``)."""
    return transition_seconds(frames, as_fps(fps), overlaps=True)


CUT = Transition()


@dataclass(frozen=True)
class ClipSpec:
    """One clip of the sequence and the transition that leads into it."""

    path: Path
    transition_in: Transition = field(default=CUT)
    audio: bool = False  # mix the clip's own sound (its file's audio stream) into the sequence
    audio_gain_db: float = 0.0  # level change of that sound in the mix

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        gain = self.audio_gain_db
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not math.isfinite(gain):
            raise EncodeError(f"clip {str(self.path)!r}: audio_gain_db {gain!r} must be a finite number")
        if not isinstance(self.transition_in, Transition):
            raise EncodeError(
                f"clip {str(self.path)!r}: transition_in {self.transition_in!r} must be a "
                "Transition"
            )


@dataclass(frozen=True)
class AssemblyResult:
    """The written sequence and where each clip landed in it."""

    path: Path
    frames: int
    fps: Fraction
    duration_s: float
    width: int
    height: int
    clip_starts: tuple[int, ...]  # output frame index of each clip's first frame
    audio: dict | None = None  # the mix: samples, rate, channels, peak, limiter gain reduction; None = silent
    copied_frames: int = 0  # frames copied from the clips' packets (the rest were encoded)


@dataclass(frozen=True)
class _Join:
    """Frames a clip spends on transitions: crossfade overlap in, fade in and fade out."""

    overlap_in: int
    fade_in: int
    fade_out: int
    overlap_out: int
    overlap_kind: str = "crossfade"  # how the overlap in is drawn: a crossfade or one of WIPES


def untouched(count: int, join: _Join) -> range:
    """Frames of a clip the sequence shows exactly as decoded: neither blended with a neighbour nor faded.

    The one place that says which frames a transition changes: assembly copies the GOPs that
    lie wholly inside this range and re-encodes the rest, and the frame loop leaves these frames
    alone. A new kind of transition that changes frames records them in its clips' _Join and here.
    """
    return range(join.overlap_in + join.fade_in, count - join.overlap_out - join.fade_out)


def transition_frames(transition: Transition, fps: int | float | str | Fraction) -> int:
    """Frames a transition uses: crossfade or wipe overlap n = round(d·fps), fade k = round(d·fps/2)
    (:func:`daotai.plan.timing.transition_length`, the planner's own rule)."""
    if transition.kind == "cut":
        return 0
    return transition_length(transition.duration_s, as_fps(fps), overlaps=transition.kind in OVERLAPS)


def end_fade_frames(seconds: float, fps: int | float | str | Fraction) -> int:
    """Frames the sequence's closing fade to black takes: m = round(d·fps), 0 for no fade."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise EncodeError(f"fade_out: {seconds!r} must be a finite number of seconds >= 0")
    return transition_length(float(seconds), as_fps(fps), overlaps=True)


def _joins(
    frame_counts: Sequence[int], transitions: Sequence[Transition], fps: Fraction, end_fade: int = 0
) -> list[_Join]:
    """Validate the clip list and work out every clip's transition frames."""
    if len(frame_counts) != len(transitions):
        raise EncodeError(
            f"transitions: {len(transitions)} given for {len(frame_counts)} clips; "
            "need one per clip"
        )
    if not frame_counts:
        raise EncodeError("clips: empty; need at least one clip")
    for i, count in enumerate(frame_counts):
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
            raise EncodeError(f"clips[{i}]: frame count {count!r} must be an integer >= 1")
    overlaps = [0] * len(frame_counts)  # overlaps[i]: crossfade frames between i-1 and i
    fades = [0] * len(frame_counts)  # fades[i]: fade-out of i-1 and fade-in of i, each
    for i, transition in enumerate(transitions):
        n = transition_frames(transition, fps)
        if transition.kind in OVERLAPS and i > 0:
            for side, count in ((i - 1, frame_counts[i - 1]), (i, frame_counts[i])):
                if n > count:
                    raise EncodeError(
                        f"clips[{i}].transition_in: {transition.kind} of {transition.duration_s} s "
                        f"({n} frames at {fps} fps) is longer than clip {side} "
                        f"({count} frames)"
                    )
            overlaps[i] = n
        elif transition.kind == "fade":
            fades[i] = n
            sides = ((i - 1, frame_counts[i - 1]),) if i > 0 else ()
            for side, count in (*sides, (i, frame_counts[i])):
                if n > count:
                    raise EncodeError(
                        f"clips[{i}].transition_in: fade of {transition.duration_s} s "
                        f"({n} frames at {fps} fps each side) is longer than clip {side} "
                        f"({count} frames)"
                    )
    joins = []
    last = len(frame_counts) - 1
    for i, count in enumerate(frame_counts):
        fade_out = fades[i + 1] if i < last else end_fade
        overlap_out = overlaps[i + 1] if i < last else 0
        used_in, used_out = overlaps[i] + fades[i], overlap_out + fade_out
        if used_in + used_out > count:
            closing = " (the sequence's fade_out)" if i == last and end_fade else ""
            raise EncodeError(
                f"clips[{i}]: its transitions in ({used_in} frames) and out ({used_out} "
                f"frames{closing}) overlap; the clip has only {count} frames"
            )
        joins.append(_Join(overlaps[i], fades[i], fade_out, overlap_out, transitions[i].kind))
    return joins


def planned_frame_count(
    frame_counts: Sequence[int],
    transitions: Sequence[Transition],
    fps: int | float | str | Fraction,
) -> int:
    """Frames the assembled sequence will have: the sum of the clips minus crossfade overlaps.

    ``transitions[i]`` leads into clip i. Raises EncodeError for the same problems
    ``assemble`` rejects.
    """
    joins = _joins(frame_counts, transitions, as_fps(fps))
    return int(sum(frame_counts)) - sum(join.overlap_in for join in joins)


def _clip_starts(frame_counts: Sequence[int], joins: Sequence[_Join]) -> tuple[int, ...]:
    """Output frame index of each clip's first frame."""
    starts = [0]
    for i in range(1, len(frame_counts)):
        starts.append(starts[-1] + int(frame_counts[i - 1]) - joins[i].overlap_in)
    return tuple(starts)


def _gain(index: int, count: int, join: _Join) -> float:
    """Brightness of a clip's frame under its fade-in and fade-out (1 = untouched)."""
    gain = 1.0
    if index < join.fade_in:
        gain *= index / join.fade_in  # first frame black
    from_end = count - 1 - index
    if from_end < join.fade_out:
        gain *= from_end / join.fade_out  # last frame black
    return gain


def _scale(frame: np.ndarray, gain: float) -> np.ndarray:
    """Frame times gain in [0, 1], in 8.8 fixed point: (H, W, 3) uint8 in and out."""
    weight = round(gain * 256)
    out = frame.astype(np.uint16)  # 255 * 256 + 128 still fits in 16 bits
    out *= weight
    out += 128
    out >>= 8
    return out.astype(np.uint8)


def _mix(old: np.ndarray, new: np.ndarray, alpha: float) -> np.ndarray:
    """(1 − alpha)·old + alpha·new, rounded, for (H, W, 3) uint8 frames."""
    weight = round(alpha * 256)
    out = old.astype(np.uint16)
    out *= 256 - weight
    mixed = new.astype(np.uint16)
    mixed *= weight
    out += mixed
    out += 128
    out >>= 8
    return out.astype(np.uint8)


def _overlap_frame(kind: str, old: np.ndarray, new: np.ndarray, progress: float) -> np.ndarray:
    """One frame of an overlap ``progress`` of the way through: a wipe's edge, else a crossfade's blend."""
    return wipe_frame(kind, old, new, progress) if kind in WIPES else _mix(old, new, progress)


def _clip_frames(clip: ClipSpec, index: int, count: int, start: int, keys: Sequence[int]) -> Iterator[np.ndarray]:
    """Decoded frames of one clip from frame ``start`` on (decoding from the keyframe at or before
    it), checked against the count its probe promised."""
    key = max(k for k in keys if k <= start)
    seen = key
    for frame in decode_frames(clip.path, start=key):
        if seen == count:
            raise EncodeError(
                f"clips[{index}]: {str(clip.path)!r} decoded more than the {count} frames "
                "its header reports"
            )
        seen += 1
        if seen > start:
            yield frame
    if seen != count:
        raise EncodeError(
            f"clips[{index}]: {str(clip.path)!r} decoded {seen} frames but its header "
            f"reports {count}"
        )


def _shown(frame: np.ndarray, index: int, count: int, join: _Join, under: np.ndarray | None) -> np.ndarray:
    """A clip's frame as the sequence shows it: faded by its gain, and blended over ``under`` (the
    outgoing clip's frame) inside the crossfade that leads into it."""
    gain = _gain(index, count, join)
    if gain < 1.0:
        frame = _scale(frame, gain)
    if under is not None and index < join.overlap_in:
        frame = _overlap_frame(join.overlap_kind, under, frame, (index + 1) / (join.overlap_in + 1))
    return frame


def _sequence(
    clips: Sequence[ClipSpec], counts: Sequence[int], joins: Sequence[_Join], starts: Sequence[int],
    first: int, end: int, keys: Sequence[Sequence[int]] | None = None,
) -> Iterator[np.ndarray]:
    """The sequence's frames ``[first, end)`` in order, decoded from the clips and blended.

    Each clip is opened when its first frame in the range is needed (at the keyframe at or
    before it, from ``keys[i]``; from its start without ``keys``), decoded a few frames ahead on
    a worker thread, and closed after its last.
    """
    sources: dict[int, Iterator[np.ndarray]] = {}
    try:
        for out in range(first, end):
            shown: np.ndarray | None = None
            for i in range(len(clips)):
                j = out - starts[i]
                if not 0 <= j < counts[i]:
                    continue
                if i not in sources:
                    decoded = _clip_frames(clips[i], i, counts[i], j, keys[i] if keys is not None else (0,))
                    sources[i] = read_ahead(decoded, name=f"daotai-decode-clip{i}")
                frame = next(sources[i])
                shown = frame if j in untouched(counts[i], joins[i]) else _shown(frame, j, counts[i], joins[i], shown)
                if j == counts[i] - 1:  # its last frame: let the decoder check the count and close
                    if next(sources.pop(i), None) is not None:
                        raise EncodeError(f"clips[{i}]: decoded more frames than it was planned to show")
            if shown is None:
                raise EncodeError(f"sequence frame {out}: no clip covers it")  # guards the bookkeeping
            yield shown
    finally:
        for source in sources.values():
            source.close()  # type: ignore[attr-defined]


def assemble(
    clips: Sequence[ClipSpec],
    out_path: str | os.PathLike[str],
    fps: int | float | str | Fraction,
    settings: EncodeSettings | None = None,
    on_progress: ProgressCallback | None = None,
    soundtrack: np.ndarray | None = None,
    fade_out_s: float = 0.0,
    stream_copy: bool = True,
    letterbox: tuple[int, int] | None = None,
) -> AssemblyResult:
    """Write the clips as one video at out_path, joined by their transitions (see module doc).

    All clips must have the same size and frame rate ``fps``. ``on_progress(done, total)``
    is called after every written frame; raising from it (e.g. Cancelled) stops the work
    and leaves nothing at out_path. ``soundtrack``: (N, 2) float32 at 48 kHz spanning exactly
    the sequence (see :func:`place_soundtrack`), mixed under the clips' sounds. ``fade_out_s``:
    seconds over which the end of the sequence fades to black and silence (0: it ends on a cut).
    ``stream_copy``: copy the GOPs no transition touches from clips encoded with ``settings``
    (module doc); False decodes and re-encodes every frame. ``letterbox``: (width, height) of a frame
    to deliver the sequence in, each joined picture centred in it between black bars
    (daotai.script.aspect.bars); every frame is then encoded, none copied.
    """
    rate = as_fps(fps)
    if not clips:
        raise EncodeError("clips: empty; need at least one clip")
    infos = []
    for i, clip in enumerate(clips):
        if not isinstance(clip, ClipSpec):
            raise EncodeError(f"clips[{i}]: {clip!r} must be a ClipSpec")
        info = probe(clip.path)
        if info.fps != rate:
            raise EncodeError(
                f"clips[{i}]: {str(clip.path)!r} runs at {info.fps} fps; the sequence is "
                f"{rate} fps and clips are not resampled"
            )
        first = infos[0] if infos else info
        if (info.width, info.height) != (first.width, first.height):
            raise EncodeError(
                f"clips[{i}]: {str(clip.path)!r} is {info.width}x{info.height}; every clip "
                f"must match clip 0 ({first.width}x{first.height})"
            )
        infos.append(info)
    counts = [info.frames for info in infos]
    end_fade = end_fade_frames(fade_out_s, rate)
    joins = _joins(counts, [clip.transition_in for clip in clips], rate, end_fade)
    total = int(sum(counts)) - sum(join.overlap_in for join in joins)
    width, height = infos[0].width, infos[0].height
    picture = infos[0]
    if letterbox is not None:
        try:
            bars(letterbox, (width, height))
        except ValueError as exc:
            raise EncodeError(f"letterbox: {exc}") from None
        width, height = letterbox
        picture = replace(infos[0], width=width, height=height)  # what the sequence's encoder writes
        stream_copy = False  # a clip's GOPs hold the bare picture
    starts = _clip_starts(counts, joins)
    if soundtrack is not None:
        soundtrack = np.asarray(soundtrack, dtype=np.float32)
        want = sample_at(total, rate)
        if soundtrack.ndim != 2 or soundtrack.shape != (want, 2):
            raise EncodeError(f"soundtrack: shape {soundtrack.shape} must be ({want}, 2): the picture's "
                              f"{total} frames at 48 kHz stereo")
        if end_fade:
            soundtrack = soundtrack * _closing_fade(total, end_fade, rate, want)[:, None]
    audio = None
    if soundtrack is not None or any(clip.audio for clip in clips):
        from daotai.encode.audio import MIX_RATE, ROLE_MIX, mux_audio, probe_audio, read_audio

        sounds = [read_audio(clip.path) if clip.audio and probe_audio(clip.path) is not None else None
                  for clip in clips]
        gains = [amplitude(clip.audio_gain_db) for clip in clips]
        mix, audio = mix_sound(sounds, gains, counts, joins, starts, rate, total, soundtrack)
        with atomic_path(out_path) as temp:
            copied = _write_picture(clips, counts, joins, starts, temp, rate, total, settings, on_progress,
                                    picture, stream_copy)
            mux_audio(temp, mix, MIX_RATE, ROLE_MIX)
    else:
        copied = _write_picture(clips, counts, joins, starts, out_path, rate, total, settings, on_progress,
                                picture, stream_copy)
    return AssemblyResult(
        path=Path(out_path),
        frames=total,
        fps=rate,
        duration_s=float(total / rate),
        width=width,
        height=height,
        clip_starts=starts,
        audio=audio,
        copied_frames=copied,
    )


@dataclass(frozen=True)
class _Piece:
    """Sequence frames [start, end): copied from clip ``clip`` from its frame ``first`` on, or
    (clip None) decoded, blended and encoded."""

    start: int
    end: int
    clip: int | None = None
    first: int = 0


def _pieces(counts: Sequence[int], joins: Sequence[_Join], starts: Sequence[int],
            keys: Sequence[Sequence[int]], total: int) -> list[_Piece]:
    """The sequence cut into copied runs of whole untouched GOPs and the encoded runs between them."""
    pieces: list[_Piece] = []
    cursor = 0
    for i, count in enumerate(counts):
        plain = untouched(count, joins[i])
        bounds = (*keys[i], count)  # where a copied run may start and end
        first = next((k for k in bounds if k >= plain.start), count)
        end = max((k for k in bounds if k <= plain.stop), default=0)
        if first >= end:
            continue  # no whole GOP of this clip is shown untouched
        if starts[i] + first > cursor:
            pieces.append(_Piece(cursor, starts[i] + first))
        pieces.append(_Piece(starts[i] + first, starts[i] + end, i, first))
        cursor = starts[i] + end
    if cursor < total:
        pieces.append(_Piece(cursor, total))
    return pieces


def _copyable_keyframes(clips: Sequence[ClipSpec], info, rate: Fraction,
                        settings: EncodeSettings) -> list[tuple[int, ...]] | None:
    """Each clip's keyframes when every clip has the stream ``settings`` write (so its packets can
    join the sequence), else None. Hardware encoders are never copied from: their bytes vary."""
    from daotai.encode.remux import keyframes, stream_format
    from daotai.encode.video import reference_format

    if settings.hardware is not None:
        return None
    wanted = reference_format(settings, info.width, info.height, rate)
    if any(stream_format(clip.path) != wanted for clip in clips):
        return None
    return [keyframes(clip.path) for clip in clips]


def _write_picture(clips, counts, joins, starts, out_path, rate, total, settings, on_progress, info,
                   stream_copy: bool) -> int:
    """Write the joined frames to out_path (atomically); returns the frames copied, not encoded."""
    from daotai.encode.remux import Segment, copy_segments

    settings = settings or EncodeSettings()
    keys = _copyable_keyframes(clips, info, rate, settings) if stream_copy else None
    if keys is None:
        _encode_frames(_sequence(clips, counts, joins, starts, 0, total), out_path, info, rate, settings,
                       total, lambda done: on_progress(done, total) if on_progress is not None else None)
        return 0
    pieces = _pieces(counts, joins, starts, keys, total)
    segments: list[Segment] = []
    with tempfile.TemporaryDirectory(prefix="daotai-assemble-") as folder:
        for n, piece in enumerate(pieces):
            frames = piece.end - piece.start
            if piece.clip is not None:
                segments.append(Segment(clips[piece.clip].path, piece.first, piece.first + frames))
            else:
                part = Path(folder) / f"part{n:04d}{Path(out_path).suffix}"
                _encode_frames(_sequence(clips, counts, joins, starts, piece.start, piece.end, keys), part, info,
                               rate, settings, frames,
                               lambda done, at=piece.start: on_progress(at + done, total) if on_progress else None)
                segments.append(Segment(part, 0, frames))
            if on_progress is not None and piece.clip is not None:
                for done in range(piece.start + 1, piece.end + 1):  # the contract: a call per frame
                    on_progress(done, total)
        written = copy_segments(segments, out_path, rate)
    if written != total:  # guards the bookkeeping above
        raise EncodeError(f"{str(out_path)!r}: wrote {written} frames, planned {total}")
    return sum(piece.end - piece.start for piece in pieces if piece.clip is not None)


def letterboxed(picture: np.ndarray, width: int, height: int) -> np.ndarray:
    """(height, width, 3) uint8: ``picture`` (h, w, 3) centred between black bars (the picture itself when it fills it)."""
    h, w = picture.shape[:2]
    if (w, h) == (width, height):
        return picture
    left, top = bars((width, height), (w, h))
    out = np.zeros((height, width, 3), np.uint8)
    out[top:top + h, left:left + w] = picture
    return out


def _encode_frames(frames: Iterator[np.ndarray], out_path, info, rate: Fraction, settings: EncodeSettings,
                   planned: int, on_frame: Callable[[int], None]) -> None:
    """Encode frames to out_path (atomically, by VideoWriter), reporting each written frame."""
    with VideoWriter(out_path, info.width, info.height, rate, settings) as writer:
        for frame in frames:
            writer.write(letterboxed(frame, info.width, info.height))
            on_frame(writer.frames_written)
        if writer.frames_written != planned:  # guards the bookkeeping above
            raise EncodeError(
                f"{str(out_path)!r}: wrote {writer.frames_written} frames, planned {planned}"
            )


# ------------------------------------------------------------------ sound


def amplitude(db: float) -> float:
    """Linear amplitude of a level in dB (20·log10 of the amplitude): -6.02 dB halves it, +20 dB is ten times."""
    return 10.0 ** (db / 20.0)


def sample_at(frame: int | Fraction, fps: Fraction, rate: int = 48000) -> int:
    """The 48 kHz sample where a frame (or a fractional frame time) starts: round(frame · rate / fps)."""
    return math.floor(Fraction(frame) * rate / fps + Fraction(1, 2))


def _ramp(count: int) -> np.ndarray:
    """(count,) raised-cosine rise from 0 (first sample) towards 1."""
    if count <= 0:
        return np.ones(0, np.float32)
    x = np.arange(count, dtype=np.float64) / count
    return (0.5 - 0.5 * np.cos(np.pi * x)).astype(np.float32)


def clip_envelope(count: int, join: _Join, fps: Fraction, length: int, rate: int = 48000,
                  first: bool = False, last: bool = False) -> np.ndarray:
    """(length,) gain of a clip's sound over its ``count`` frames under its transitions (module doc)."""
    frames = np.arange(length, dtype=np.float64) * float(fps) / rate  # (length,) frame time of each sample
    env = np.ones(length, dtype=np.float64)
    if join.overlap_in:
        u = np.clip(frames / join.overlap_in, 0.0, 1.0)
        env *= np.sin(0.5 * np.pi * u)
    if join.overlap_out:
        u = np.clip((frames - (count - join.overlap_out)) / join.overlap_out, 0.0, 1.0)
        env *= np.cos(0.5 * np.pi * u)
    if join.fade_in:
        env *= np.clip(frames / join.fade_in, 0.0, 1.0)
    if join.fade_out:
        env *= np.clip((count - 1 - frames) / join.fade_out, 0.0, 1.0)
    declick = min(round(DECLICK_S * rate), length // 2)
    if not (join.overlap_in or join.fade_in) or first:
        env[:declick] *= _ramp(declick)
    if not (join.overlap_out or join.fade_out) or last:
        env[length - declick:] *= _ramp(declick)[::-1]
    return env.astype(np.float32)


def _closing_fade(total: int, fade: int, fps: Fraction, length: int, rate: int = 48000) -> np.ndarray:
    """(length,) float32 gain of the sequence's sound under its closing fade: 1, then down to 0
    at the last frame, following the picture's brightness (the same ramp as a clip's fade-out)."""
    frames = np.arange(length, dtype=np.float64) * float(fps) / rate  # (length,) frame time of each sample
    return np.clip((total - 1 - frames) / fade, 0.0, 1.0).astype(np.float32)


def place_soundtrack(samples: np.ndarray, offset_s: float, total: int, gain_db: float = 0.0,
                     rate: int = 48000) -> np.ndarray:
    """(total, 2) float32: (N, 2) soundtrack samples placed with their first sample at ``offset_s``.

    A negative offset skips that much of the soundtrack. Where it is cut (skipped into, or
    ended by the picture) a DECLICK_S ramp hides the cut; where it ends by itself the rest is silence.
    """
    out = np.zeros((total, 2), np.float32)
    start = samples_for_seconds(offset_s, rate)
    skip = max(0, -start)
    begin = max(0, start)
    count = min(samples.shape[0] - skip, total - begin)
    if count <= 0:
        return out
    out[begin:begin + count] = samples[skip:skip + count]
    out[begin:begin + count] *= np.float32(amplitude(gain_db))
    declick = min(round(DECLICK_S * rate), count // 2)
    if skip > 0:
        out[begin:begin + declick] *= _ramp(declick)[:, None]
    if skip + count < samples.shape[0]:
        out[begin + count - declick:begin + count] *= _ramp(declick)[::-1, None]
    return out


def samples_for_seconds(seconds: float, rate: int = 48000) -> int:
    """Whole samples in a signed decimal number of seconds, rounded half up."""
    return math.floor(Fraction(repr(float(seconds))) * rate + Fraction(1, 2))


def limit(mix: np.ndarray, ceiling_dbfs: float = LIMIT_CEILING_DBFS, rate: int = 48000) -> float:
    """Bring every sample of (N, C) float32 ``mix`` within the ceiling, in place; returns the most gain reduction (dB).

    A look-ahead peak limiter: each LIMIT_BLOCK_S block gets the gain its own peak and its
    neighbours' peaks need; the gain recovers at most LIMIT_RELEASE_DB_PER_S; between block
    centres it is interpolated linearly. Every sample lies in a block whose gain and whose
    neighbours' gains are at most what that sample needs, so the interpolated gain never lets
    a sample over the ceiling. Sound under the ceiling passes unchanged.
    """
    ceiling = amplitude(ceiling_dbfs)
    n = mix.shape[0]
    if n == 0:
        return 0.0
    peak = np.abs(mix).max(axis=1)  # (N,)
    if float(peak.max()) <= ceiling:
        return 0.0
    block = max(1, round(LIMIT_BLOCK_S * rate))
    blocks = -(-n // block)
    padded = np.zeros(blocks * block, np.float32)
    padded[:n] = peak
    need = np.minimum(1.0, ceiling / np.maximum(padded.reshape(blocks, block).max(axis=1), 1e-12))  # (blocks,)
    gain = need.copy()
    gain[:-1] = np.minimum(gain[:-1], need[1:])
    gain[1:] = np.minimum(gain[1:], need[:-1])
    step = amplitude(LIMIT_RELEASE_DB_PER_S * LIMIT_BLOCK_S)
    for b in range(1, blocks):  # the release: rise at most `step` a block
        if gain[b] > gain[b - 1] * step:
            gain[b] = gain[b - 1] * step
    centres = (np.arange(blocks) + 0.5) * block
    per_sample = np.interp(np.arange(n), centres, gain).astype(np.float32)  # (N,)
    mix *= per_sample[:, None]
    np.clip(mix, -ceiling, ceiling, out=mix)  # float rounding only: the gain already did it
    return float(-20.0 * math.log10(float(gain.min())))


def mix_sound(sounds: Sequence[np.ndarray | None], gains: Sequence[float], counts: Sequence[int],
              joins: Sequence[_Join], starts: Sequence[int], fps: Fraction, total: int,
              soundtrack: np.ndarray | None, rate: int = 48000) -> tuple[np.ndarray, dict]:
    """(samples, stats): the sequence's (N, 2) float32 mix of the clips' sounds and the soundtrack (module doc)."""
    from daotai.encode.audio import fit_length, remix

    length = sample_at(total, fps, rate)
    mix = np.zeros((length, 2), np.float32) if soundtrack is None else np.array(soundtrack, np.float32)
    last = len(counts) - 1
    for i, sound in enumerate(sounds):
        if sound is None or gains[i] == 0:
            continue
        begin, end = sample_at(starts[i], fps, rate), sample_at(starts[i] + counts[i], fps, rate)
        part = fit_length(remix(sound, 2), end - begin)
        env = clip_envelope(counts[i], joins[i], fps, end - begin, rate, first=i == 0, last=i == last)
        mix[begin:end] += part * (env * np.float32(gains[i]))[:, None]
    peak_before = float(np.abs(mix).max()) if length else 0.0
    reduction = limit(mix, rate=rate)
    stats = {
        "samples": length, "rate": rate, "channels": 2,
        "peak_before_limiter": round(peak_before, 6), "limiter_gain_reduction_db": round(reduction, 3),
        "clips_with_sound": [i for i, sound in enumerate(sounds) if sound is not None],
        "soundtrack": soundtrack is not None,
    }
    return mix, stats
