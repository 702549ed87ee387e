"""Sound on the picture's timeline at rates whose frames are not a whole number of samples
(29.97 fps: 1601.6 samples a frame; 59.94: 800.8), and the levels of the mix: clip gain, the
soundtrack's gain, and the limiter's ceiling, look-ahead and release."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.post.assemble import (
    DECLICK_S,
    LIMIT_CEILING_DBFS,
    Transition,
    _joins,
    amplitude,
    clip_envelope,
    limit,
    mix_sound,
    place_soundtrack,
    sample_at,
    samples_for_seconds,
)

RATE = 48000
NTSC30 = Fraction(30000, 1001)
NTSC60 = Fraction(60000, 1001)
DECLICK = round(DECLICK_S * RATE)


# ---------------------------------------------------------------- where frames start


@pytest.mark.parametrize("fps, starts", [
    (NTSC30, [0, 1602, 3203, 4805, 6406, 8008]),  # 1601.6 a frame, each start rounded to the nearest sample
    (NTSC60, [0, 801, 1602, 2402, 3203, 4004]),  # 800.8 a frame
    (Fraction(24000, 1001), [0, 2002, 4004, 6006, 8008, 10010]),
    (Fraction(25), [0, 1920, 3840, 5760, 7680, 9600]),
])
def test_frames_start_on_the_nearest_sample(fps, starts):
    assert [sample_at(f, fps) for f in range(6)] == starts


def test_a_frame_starting_half_way_between_samples_rounds_up():
    assert sample_at(Fraction(5, 16), NTSC30) == 501  # 500.5 samples
    assert sample_at(1, Fraction(96000)) == 1  # 0.5 samples
    assert samples_for_seconds(0.25, rate=2) == 1 and samples_for_seconds(0.75, rate=2) == 2
    assert samples_for_seconds(-0.75, rate=2) == -1  # -1.5 rounds up to -1
    assert samples_for_seconds(0.1) == 4800 and samples_for_seconds(1.001) == 48048


@settings(max_examples=60, deadline=None)
@given(fps=st.sampled_from([NTSC30, NTSC60, Fraction(24000, 1001), Fraction(25), Fraction(24)]),
       frame=st.integers(0, 10**6))
def test_frame_lengths_in_samples_differ_by_at_most_one_and_never_drift(fps, frame):
    per_frame = Fraction(RATE) / fps
    here, there = sample_at(frame, fps), sample_at(frame + 1, fps)
    assert math.floor(per_frame) <= there - here <= math.ceil(per_frame)
    assert abs(here - frame * per_frame) <= Fraction(1, 2)  # no drift however far into the film
    # and the sample-to-frame inverse: the frame that contains a frame's first sample is that frame
    assert math.floor((here + Fraction(1, 2)) / per_frame) in (frame, frame - 1) or here == 0


# ---------------------------------------------------------------- the mix at 29.97


def test_a_clip_sound_starts_and_ends_on_its_pictures_samples_at_29_97():
    counts = [3, 5]  # clip 1 starts at frame 3: sample 4804.8 -> 4805
    joins = _joins(counts, [Transition(), Transition()], NTSC30)
    total = 8
    n1 = sample_at(8, NTSC30) - sample_at(3, NTSC30)
    sound = np.full((n1, 2), 0.5, np.float32)
    mix, stats = mix_sound([None, sound], [1.0, 1.0], counts, joins, [0, 3], NTSC30, total, None)
    assert mix.shape == (sample_at(8, NTSC30), 2) == (12813, 2)  # 12812.8 samples, to the nearest
    nonzero = np.flatnonzero(mix[:, 0])
    assert nonzero[0] == 4805 + 1  # the declick ramp starts at 0 on the clip's first sample
    assert nonzero[-1] == 12813 - 2  # ramped out to 0 on the clip's (and the film's) last sample
    assert mix[4805 + DECLICK + 10, 0] == pytest.approx(0.5)
    assert stats["samples"] == 12813


def test_a_crossfade_at_29_97_meets_at_equal_power_on_the_overlap():
    counts = [30, 30]
    joins = _joins(counts, [Transition(), Transition("crossfade", 0.2)], NTSC30)  # 6 frames
    assert joins[1].overlap_in == 6
    n_out = sample_at(30, NTSC30)
    out_env = clip_envelope(30, joins[0], NTSC30, n_out)
    in_env = clip_envelope(30, joins[1], NTSC30, n_out)
    start = sample_at(24, NTSC30)  # the incoming clip starts at frame 24 of the outgoing one
    overlap = n_out - start
    power = out_env[start:] ** 2 + in_env[:overlap] ** 2
    assert np.allclose(power, 1.0, atol=2e-3)


@pytest.mark.parametrize("fps", [NTSC30, NTSC60])
def test_a_fade_follows_each_frames_brightness_at_ntsc_rates(fps):
    counts = [60, 60]
    joins = _joins(counts, [Transition(), Transition("fade", 12 / float(fps))], fps)  # 6 frames each side
    k = joins[1].fade_in
    assert k == 6
    n = sample_at(60, fps)
    in_env = clip_envelope(60, joins[1], fps, n)
    out_env = clip_envelope(60, joins[0], fps, n)
    per_frame = RATE / float(fps)
    for j in range(k + 1):  # the picture's gain of frame j of the fade-in is j / k, at the frame's first sample
        assert in_env[sample_at(j, fps)] == pytest.approx(j / k, abs=1.0 / per_frame / k + 1e-6)
    for j in range(k):  # and the fade-out's last frame is black, frame 60 - 1 - j at j / k
        at = sample_at(59 - j, fps)
        assert out_env[at] == pytest.approx(j / k, abs=1.0 / per_frame / k + 1e-6), j
    assert out_env[sample_at(59, fps):].max() <= 1.0 / per_frame / k + 1e-6


# ---------------------------------------------------------------- levels


@pytest.mark.parametrize("db, gain", [(0.0, 1.0), (-6.0206, 0.5), (20.0, 10.0), (-40.0, 0.01), (6.0206, 2.0)])
def test_levels_in_db_are_amplitudes_by_twenty_log_ten(db, gain):
    assert amplitude(db) == pytest.approx(gain, rel=1e-4)


@settings(max_examples=60, deadline=None)
@given(a=st.floats(-60, 20), b=st.floats(-60, 20))
def test_gains_in_db_add_as_amplitudes_multiply(a, b):
    assert amplitude(a + b) == pytest.approx(amplitude(a) * amplitude(b), rel=1e-9)
    assert 20 * math.log10(amplitude(a)) == pytest.approx(a, abs=1e-9)


def test_clip_gain_scales_its_sound_and_a_zero_gain_leaves_it_out():
    counts = [24, 24]
    joins = _joins(counts, [Transition(), Transition()], Fraction(24))
    n = sample_at(24, Fraction(24))
    one = np.full((n, 2), 0.4, np.float32)
    mix, stats = mix_sound([one, one], [amplitude(-6.0206), 0.0], counts, joins, [0, 24], Fraction(24), 48, None)
    assert mix[n // 2, 0] == pytest.approx(0.2, abs=1e-5)
    assert np.all(mix[n:] == 0)
    assert stats["clips_with_sound"] == [0, 1]


def test_the_soundtrack_gain_is_in_db():
    track = np.full((RATE, 2), 0.8, np.float32)
    placed = place_soundtrack(track, 0.0, RATE // 2, gain_db=-12.0)
    assert placed[RATE // 4, 0] == pytest.approx(0.8 * 10 ** (-12 / 20), rel=1e-5)
    louder = place_soundtrack(track * 0.1, 0.0, RATE // 2, gain_db=6.0)
    assert louder[RATE // 4, 1] == pytest.approx(0.08 * 10 ** (6 / 20), rel=1e-5)


def test_the_soundtrack_offset_is_rounded_to_the_nearest_sample():
    track = np.full((RATE, 2), 0.5, np.float32)
    placed = place_soundtrack(track, 0.10001042, 2 * RATE)  # 4800.5002 samples: to 4801
    assert placed[4800, 0] == 0 and placed[4801, 0] == 0.5
    assert placed[4801 + RATE - 1, 0] == 0.5 and placed[4801 + RATE, 0] == 0  # ends by itself: not ramped


def test_the_limiter_stops_at_its_ceiling_not_below():
    ceiling = 10 ** (-1.0 / 20)  # 1 dB under full scale
    t = np.arange(RATE) / RATE
    loud = np.stack([1.6 * np.sin(2 * np.pi * 220 * t)] * 2, axis=1).astype(np.float32)
    reduction = limit(loud)
    peak = np.abs(loud).max()
    assert peak <= ceiling + 1e-6 and peak >= ceiling - 0.01
    assert reduction == pytest.approx(20 * math.log10(1.6 / ceiling), abs=0.05)
    other = np.full((RATE // 2, 1), 0.9, np.float32)
    assert limit(other, ceiling_dbfs=-6.0) == pytest.approx(20 * math.log10(0.9 / 10 ** (-6 / 20)), abs=1e-3)
    assert np.abs(other).max() == pytest.approx(10 ** (-6 / 20), abs=1e-4)


def test_the_limiter_looks_ahead_and_recovers_at_its_release_rate():
    ceiling = 10 ** (LIMIT_CEILING_DBFS / 20)
    mix = np.full((2 * RATE, 2), 0.5, np.float32)
    spike = RATE // 2 + 123  # not on a block boundary
    mix[spike:spike + 10] = 4.0
    reduction = limit(mix)
    assert np.abs(mix).max() <= ceiling + 1e-6
    assert reduction == pytest.approx(20 * math.log10(4.0 / ceiling), abs=0.01)
    assert mix[spike - 1, 0] < 0.5 * ceiling / 4.0 * 1.5  # already down before the peak arrives
    for later_s in (0.1, 0.25):  # then back up at 20 dB a second, no faster
        gain_db = 20 * math.log10(mix[spike + round(later_s * RATE), 0] / 0.5)
        assert gain_db == pytest.approx(-reduction + 20.0 * later_s, abs=0.6), later_s
    assert mix[-1, 0] == pytest.approx(0.5)  # recovered within the second
