"""Sequence assembly: transition arithmetic, cuts, crossfades, fades, validation."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from daotai.encode.read import decode_frames, probe
from daotai.encode.video import VideoWriter
from daotai.errors import Cancelled, EncodeError
from daotai.post.assemble import (
    ClipSpec,
    Transition,
    assemble,
    planned_frame_count,
    transition_frames,
)
from daotai.qc.metrics import is_black

RED, BLUE, GREEN = (255, 0, 0), (0, 0, 255), (0, 255, 0)
W, H = 64, 48


def solid_clip(path: Path, colour: tuple[int, int, int], frames: int, fps=24, size=(W, H)) -> Path:
    """A clip of one flat colour."""
    width, height = size
    with VideoWriter(path, width, height, fps) as writer:
        for _ in range(frames):
            writer.write(np.full((height, width, 3), colour, np.uint8))
    return path


def centre(frame: np.ndarray) -> np.ndarray:
    """Mean colour of the frame's central block, as ints."""
    return frame[16:32, 24:40].reshape(-1, 3).mean(axis=0).round().astype(int)


def near(frame: np.ndarray, colour, tolerance: int = 4) -> bool:
    """True when the frame's centre is within tolerance of colour on every channel."""
    return bool(np.abs(centre(frame) - np.array(colour)).max() <= tolerance)


# --------------------------------------------------------------------------- pure arithmetic


def test_transition_validation():
    with pytest.raises(EncodeError, match="transition.kind: 'wipe'"):
        Transition("wipe", 1.0)
    with pytest.raises(EncodeError, match="must be 0 for a cut"):
        Transition("cut", 0.5)
    for bad in (0.0, -1.0):
        with pytest.raises(EncodeError, match="must be > 0 for a crossfade"):
            Transition("crossfade", bad)
    with pytest.raises(EncodeError, match="finite"):
        Transition("fade", float("inf"))


@pytest.mark.parametrize(
    ("transition", "fps", "frames"),
    [
        (Transition("crossfade", 0.5), 24, 12),
        (Transition("fade", 0.5), 24, 6),  # each side
        (Transition("crossfade", 0.0625), 24, 2),  # 1.5 rounds half up
        (Transition("fade", 0.125), 24, 2),  # 1.5 per side, half up
        (Transition("crossfade", 1.0), Fraction(24000, 1001), 24),  # 23.976
        (Transition("crossfade", 0.1), 25, 3),  # exactly 2.5 on the decimal, not 2.4999…
        (Transition(), 24, 0),
    ],
)
def test_transition_frames(transition, fps, frames):
    assert transition_frames(transition, fps) == frames


def test_planned_frame_count_rules():
    cut, xf, fade = Transition(), Transition("crossfade", 0.5), Transition("fade", 1.0)
    assert planned_frame_count([48, 48, 48], [cut, cut, cut], 24) == 144
    assert planned_frame_count([48, 48, 48], [cut, xf, fade], 24) == 144 - 12
    assert planned_frame_count([48], [xf], 24) == 48  # nothing to blend with: ignored
    assert planned_frame_count([48, 30], [fade, fade], 24) == 78  # fades never overlap


def test_crossfade_longer_than_a_clip_names_the_clip():
    xf = Transition("crossfade", 0.5)  # 12 frames at 24 fps
    with pytest.raises(EncodeError, match=r"clips\[1\].*12 frames.*clip 0 \(6 frames\)"):
        planned_frame_count([6, 48], [Transition(), xf], 24)
    with pytest.raises(EncodeError, match=r"clips\[1\].*clip 1 \(10 frames\)"):
        planned_frame_count([48, 10], [Transition(), xf], 24)
    with pytest.raises(EncodeError, match=r"clips\[1\]: its transitions in \(12 frames\)"):
        planned_frame_count([48, 20, 48], [Transition(), xf, xf], 24)
    with pytest.raises(EncodeError, match=r"clips\[1\].*fade"):
        planned_frame_count([48, 5], [Transition(), Transition("fade", 1.0)], 24)
    with pytest.raises(EncodeError, match="one per clip"):
        planned_frame_count([48, 48], [Transition()], 24)
    with pytest.raises(EncodeError, match="at least one clip"):
        planned_frame_count([], [], 24)


@given(
    st.lists(
        st.tuples(st.integers(30, 200), st.sampled_from(["cut", "crossfade", "fade"]),
                  st.integers(1, 24)),
        min_size=1,
        max_size=8,
    )
)
def test_planned_count_is_sum_minus_crossfade_overlaps(spec):
    counts = [count for count, _, _ in spec]
    transitions = [Transition(kind, 0.0 if kind == "cut" else frames / 48)  # ≤ 12 at 24 fps
                   for _, kind, frames in spec]
    overlaps = sum(
        transition_frames(t, 24)
        for i, t in enumerate(transitions)
        if i > 0 and t.kind == "crossfade"
    )
    assert planned_frame_count(counts, transitions, 24) == sum(counts) - overlaps


# --------------------------------------------------------------------------- real assembly


def test_cut_concatenates(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 10)
    b = solid_clip(tmp_path / "b.mp4", BLUE, 14)
    result = assemble([ClipSpec(a), ClipSpec(b)], tmp_path / "seq.mp4", 24)
    assert (result.frames, result.clip_starts) == (24, (0, 10))
    assert result.duration_s == 1.0
    frames = list(decode_frames(result.path))
    assert len(frames) == probe(result.path).frames == 24
    assert near(frames[9], RED) and near(frames[10], BLUE)


def test_crossfade_blends_and_shortens(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 12)
    b = solid_clip(tmp_path / "b.mp4", BLUE, 12)
    xf = Transition("crossfade", 5 / 24)  # 5 overlap frames: output 7..11
    result = assemble([ClipSpec(a), ClipSpec(b, xf)], tmp_path / "seq.mp4", 24)
    assert (result.frames, result.clip_starts) == (19, (0, 7))
    frames = list(decode_frames(result.path))
    assert len(frames) == 19
    assert near(frames[6], RED) and near(frames[12], BLUE)
    assert near(frames[9], (128, 0, 128), tolerance=5)  # middle frame: half red, half blue
    reds = [centre(frames[i])[0] for i in range(6, 13)]
    blues = [centre(frames[i])[2] for i in range(6, 13)]
    assert reds == sorted(reds, reverse=True) and blues == sorted(blues)
    # weights (j + 1) / (n + 1): 1/6 … 5/6 of the incoming clip
    for j, i in enumerate(range(7, 12)):
        assert near(frames[i], (255 * (5 - j) / 6, 0, 255 * (j + 1) / 6), tolerance=5)


def test_fade_dips_to_black_without_changing_length(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 12)
    b = solid_clip(tmp_path / "b.mp4", GREEN, 12)
    fade = Transition("fade", 0.25)  # 6 frames: 3 out + 3 in
    result = assemble(
        [ClipSpec(a, Transition("fade", 1 / 12)), ClipSpec(b, fade)], tmp_path / "seq.mp4", 24
    )
    assert (result.frames, result.clip_starts) == (24, (0, 12))
    frames = list(decode_frames(result.path))
    assert len(frames) == 24
    assert is_black(frames[0])  # the first clip fades in from black (k = 1)
    assert near(frames[1], RED)
    assert near(frames[8], RED)
    assert near(frames[9], (170, 0, 0)) and near(frames[10], (85, 0, 0))
    assert is_black(frames[11]) and is_black(frames[12])  # black at the boundary
    assert near(frames[13], (0, 85, 0)) and near(frames[14], (0, 170, 0))
    assert near(frames[15], GREEN) and near(frames[23], GREEN)


def test_exact_total_and_progress_over_mixed_transitions(tmp_path):
    fps = Fraction(24000, 1001)
    paths = [solid_clip(tmp_path / f"c{i}.mp4", c, n, fps)
             for i, (c, n) in enumerate([(RED, 20), (GREEN, 16), (BLUE, 25)])]
    transitions = [Transition("fade", 0.2), Transition("crossfade", 0.3), Transition("fade", 0.4)]
    seen: list[tuple[int, int]] = []
    result = assemble(
        [ClipSpec(p, t) for p, t in zip(paths, transitions, strict=True)],
        tmp_path / "seq.mp4",
        fps,
        on_progress=lambda done, total: seen.append((done, total)),
    )
    planned = planned_frame_count([20, 16, 25], transitions, fps)
    assert planned == 61 - 7
    info = probe(result.path)
    assert result.frames == info.frames == planned
    assert info.duration_s == float(planned / fps)
    assert result.clip_starts == (0, 13, 29)
    assert [d for d, _ in seen] == list(range(1, planned + 1))
    assert {t for _, t in seen} == {planned}


def test_invalid_sequences_write_nothing(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 6)
    b = solid_clip(tmp_path / "b.mp4", BLUE, 30)
    out = tmp_path / "seq.mp4"
    with pytest.raises(EncodeError, match=r"clips\[1\].*clip 0 \(6 frames\)"):
        assemble([ClipSpec(a), ClipSpec(b, Transition("crossfade", 0.5))], out, 24)
    c = solid_clip(tmp_path / "c.mp4", RED, 6, fps=25)
    with pytest.raises(EncodeError, match=r"clips\[1\].*25 fps"):
        assemble([ClipSpec(a), ClipSpec(c)], out, 24)
    d = solid_clip(tmp_path / "d.mp4", RED, 6, size=(32, 32))
    with pytest.raises(EncodeError, match=r"clips\[1\].*32x32.*64x48"):
        assemble([ClipSpec(a), ClipSpec(d)], out, 24)
    with pytest.raises(EncodeError, match="does not exist"):
        assemble([ClipSpec(tmp_path / "missing.mp4")], out, 24)
    assert not out.exists()


def test_cancel_from_progress_leaves_nothing(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 10)
    b = solid_clip(tmp_path / "b.mp4", BLUE, 10)
    before = sorted(p.name for p in tmp_path.iterdir())

    def stop(done: int, total: int) -> None:
        if done == 5:
            raise Cancelled("stopped by the user")

    with pytest.raises(Cancelled):
        assemble([ClipSpec(a), ClipSpec(b)], tmp_path / "seq.mp4", 24, on_progress=stop)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("counts", [[4, 10], [10, 4]])
def test_a_crossfade_one_frame_longer_than_a_clip_is_refused_naming_the_clip(counts):
    cut, five = Transition("cut", 0.0), Transition("crossfade", 5 / 24)
    side = counts.index(4)
    with pytest.raises(EncodeError, match=rf"crossfade of .* \(5 frames at 24 fps\) is longer than clip {side} \(4 frames\)"):
        planned_frame_count(counts, [cut, five], 24)
    assert planned_frame_count([5, 5], [cut, five], 24) == 5


def test_faded_and_blended_frames_are_rounded_not_truncated():
    # The 8.8 fixed-point gain and mix round to nearest: truncating would darken every faded or
    # dissolved frame by up to one code value.
    from daotai.post.assemble import _mix, _scale

    values = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)  # every code value
    for gain in (0.1, 0.25, 0.5, 0.7, 0.9):
        exact = values.astype(np.float64) * round(gain * 256) / 256
        assert np.abs(_scale(values, gain) - exact).max() <= 0.5, gain
        mixed = values.astype(np.float64) * (256 - round(gain * 256)) / 256 + 255 * round(gain * 256) / 256
        assert np.abs(_mix(values, np.full_like(values, 255), gain) - mixed).max() <= 0.5, gain
