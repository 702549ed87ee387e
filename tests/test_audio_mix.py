"""The sequence mix: transitions applied to sound (equal-power crossfade, fades that follow the
picture, declicked cuts), the soundtrack's placement, and a limiter that never lets a sample clip."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from daotai.encode.audio import decode_audio, mux_audio, probe_audio, read_audio, resample
from daotai.encode.video import VideoWriter
from daotai.post.assemble import (
    DECLICK_S,
    LIMIT_CEILING_DBFS,
    ClipSpec,
    Transition,
    _joins,
    assemble,
    clip_envelope,
    limit,
    mix_sound,
    place_soundtrack,
    sample_at,
)

FPS = Fraction(24)
RATE = 48000


def joins_for(counts, transitions):
    return _joins(counts, transitions, FPS)


def test_crossfade_is_equal_power():
    counts = [48, 48]
    joins = joins_for(counts, [Transition(), Transition("crossfade", 0.5)])  # 12 frames of overlap
    n = sample_at(48, FPS)
    out_env = clip_envelope(48, joins[0], FPS, n)
    in_env = clip_envelope(48, joins[1], FPS, n)
    overlap = sample_at(12, FPS)
    start = n - overlap  # the incoming clip starts here, in the outgoing clip's time
    power = out_env[start:] ** 2 + in_env[:overlap] ** 2
    assert np.allclose(power, 1.0, atol=1e-5)
    assert in_env[overlap // 2] == pytest.approx(np.sqrt(0.5), abs=1e-3)  # -3 dB in the middle
    assert out_env[round(DECLICK_S * RATE):start - 1].min() == pytest.approx(1.0)  # after the opening declick


def test_fade_follows_the_pictures_brightness():
    counts = [48, 48]
    joins = joins_for(counts, [Transition(), Transition("fade", 0.5)])  # 6 frames out, 6 frames in
    n = sample_at(48, FPS)
    out_env = clip_envelope(48, joins[0], FPS, n)
    in_env = clip_envelope(48, joins[1], FPS, n)
    per_frame = RATE // 24
    for frame in range(6):  # picture gain of frame j of the fade-in is j / 6
        assert in_env[frame * per_frame] == pytest.approx(frame / 6, abs=1e-6)
    assert out_env[47 * per_frame] == 0.0  # the last (black) frame is silent
    assert out_env[(47 - 3) * per_frame] == pytest.approx(0.5, abs=1e-6)
    assert np.all(np.diff(out_env[-7 * per_frame:]) <= 1e-7)  # falls monotonically


def test_cut_is_declicked_and_steps_stay_small():
    counts = [24, 24]
    transitions = [Transition(), Transition()]
    joins = joins_for(counts, transitions)
    n = sample_at(24, FPS)
    a = np.full((n, 2), 0.6, np.float32)  # DC steps are the worst case for a click
    b = np.full((n, 2), -0.6, np.float32)
    mix, stats = mix_sound([a, b], [1.0, 1.0], counts, joins, [0, 24], FPS, 48, None)
    step = np.abs(np.diff(mix[:, 0])).max()
    assert step < 0.6 * np.pi / (2 * round(DECLICK_S * RATE)) + 1e-4  # a raised-cosine ramp, not a jump
    assert mix[0, 0] == 0 and mix[-1, 0] == 0  # the sequence starts and ends at rest
    assert stats["limiter_gain_reduction_db"] == 0


def test_limiter_keeps_every_sample_under_the_ceiling_and_leaves_quiet_sound_alone():
    rng = np.random.default_rng(0)
    loud = (rng.standard_normal((RATE * 2, 2)) * 0.15).astype(np.float32)
    loud[RATE:RATE + 10] = 3.0  # a spike far over full scale
    reduction = limit(loud)
    ceiling = 10 ** (LIMIT_CEILING_DBFS / 20)
    assert np.abs(loud).max() <= ceiling + 1e-6 and reduction > 10
    quiet = (rng.standard_normal((RATE, 2)) * 0.1).astype(np.float32)
    before = quiet.copy()
    assert limit(quiet) == 0 and np.array_equal(quiet, before)
    # the gain recovers: a second later the noise is back to its own level
    assert loud[-RATE // 4:].std() == pytest.approx(0.15, rel=0.05)


def test_two_full_scale_sounds_mix_without_clipping():
    counts = [24, 24]
    joins = joins_for(counts, [Transition(), Transition("crossfade", 0.5)])
    n = sample_at(24, FPS)
    t = np.arange(n) / RATE
    same = np.stack([np.sin(2 * np.pi * 440 * t)] * 2, axis=1).astype(np.float32) * 0.99
    bed = np.tile(same[:1], (sample_at(36, FPS), 1)) * 0 + 0.5
    mix, stats = mix_sound([same, same], [1.0, 1.0], counts, joins, [0, 12], FPS, 36, bed.astype(np.float32))
    assert np.abs(mix).max() <= 10 ** (LIMIT_CEILING_DBFS / 20) + 1e-6
    assert stats["limiter_gain_reduction_db"] > 0 and mix.shape == (sample_at(36, FPS), 2)


def test_soundtrack_placement_offsets_and_cuts():
    track = np.ones((RATE * 2, 2), np.float32) * 0.5
    later = place_soundtrack(track, 0.5, RATE * 3)
    assert np.all(later[: RATE // 2] == 0) and later[RATE // 2 + 10, 0] == pytest.approx(0.5)
    assert np.all(later[RATE // 2 + RATE * 2:] == 0)
    earlier = place_soundtrack(track, -1.5, RATE, gain_db=-6.0206)
    assert earlier[0, 0] == 0  # cut into: ramped in
    assert earlier[RATE // 4, 0] == pytest.approx(0.25, abs=1e-3)
    assert np.all(earlier[RATE // 2:] == 0)  # the file ended 0.5 s in
    cut = place_soundtrack(track, 0.0, RATE)
    assert cut[-1, 0] < 0.01  # ended by the picture: ramped out


def test_resampler_keeps_time_zero_and_length():
    rate = 32000
    x = np.zeros((rate, 1), np.float32)
    x[rate // 2: rate // 2 + 4] = 0.8
    y = resample(x, rate, RATE, channels=2)
    assert y.shape == (RATE, 2)
    assert abs(int(np.argmax(np.abs(y[:, 0]))) - RATE // 2) <= 6  # the 4-sample pulse's middle
    assert np.abs(y[:, 0] - y[:, 1]).max() == 0  # mono copied to both sides, same level


def test_assembled_sequence_has_the_mix_and_no_track_without_sound(tmp_path):
    paths = []
    for i, frames in enumerate((24, 36)):
        path = tmp_path / f"clip{i}.mp4"
        with VideoWriter(path, 64, 48, FPS) as writer:
            for _ in range(frames):
                writer.write(np.full((48, 64, 3), 100, np.uint8))
        paths.append(path)
    silent = assemble([ClipSpec(paths[0]), ClipSpec(paths[1], Transition("crossfade", 0.25))], tmp_path / "s.mp4", FPS)
    assert silent.audio is None and probe_audio(tmp_path / "s.mp4") is None
    t = np.arange(sample_at(36, FPS)) / RATE
    mux_audio(paths[1], np.stack([0.5 * np.sin(2 * np.pi * 1000 * t)] * 2, axis=1).astype(np.float32), RATE)
    bed = place_soundtrack(np.full((RATE * 5, 2), 0.05, np.float32), 0.0, sample_at(54, FPS))
    result = assemble([ClipSpec(paths[0], audio=True), ClipSpec(paths[1], Transition("crossfade", 0.25), audio=True)],
                      tmp_path / "m.mp4", FPS, soundtrack=bed)
    assert result.audio["clips_with_sound"] == [1]  # clip 0 has no sound to mix
    samples, rate, first = decode_audio(tmp_path / "m.mp4")
    assert first == 0 and abs(samples.shape[0] - sample_at(54, FPS)) <= 1024
    assert read_audio(tmp_path / "m.mp4").shape[1] == 2
    assert np.abs(samples).max() < 0.999


@pytest.mark.parametrize("codec, suffix, audio_codec", [("h264", ".mp4", "aac"), ("hevc", ".mp4", "aac"),
                                                        ("prores", ".mov", "pcm_s24le")])
def test_muxing_sound_keeps_the_picture_and_its_tags(tmp_path, codec, suffix, audio_codec):
    import av

    from daotai.encode.read import probe
    from daotai.encode.video import EncodeSettings

    path = tmp_path / f"clip{suffix}"
    with VideoWriter(path, 64, 64, FPS, EncodeSettings(codec=codec)) as writer:
        for i in range(24):
            writer.write(np.full((64, 64, 3), 8 * i, np.uint8))
    with av.open(str(path)) as container:
        tag = container.streams.video[0].codec_context.codec_tag
    before = probe(path)
    sound = np.zeros((RATE, 2), np.float32)
    sound[RATE // 2: RATE // 2 + 48] = 0.8
    mux_audio(path, sound, RATE)
    mux_audio(path, sound, RATE)  # again: the sound is replaced, not added
    after = probe(path)
    assert (after.frames, after.duration_s, after.faststart) == (before.frames, before.duration_s, True)
    with av.open(str(path)) as container:
        assert container.streams.video[0].codec_context.codec_tag == tag
        assert len(container.streams.audio) == 1
    info = probe_audio(path)
    assert info.codec == audio_codec and info.start_s == 0
    samples, rate, first = decode_audio(path)
    assert first == 0 and abs(int(np.argmax(np.abs(samples[:, 0]))) - RATE // 2) <= 48
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp files left
