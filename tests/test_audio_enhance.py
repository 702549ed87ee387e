"""`daotai enhance` keeps the input's sound: the same packets, unshifted, after interpolation and upscaling."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from daotai.encode.audio import decode_audio, mux_audio, probe_audio
from daotai.encode.read import probe
from daotai.encode.video import VideoWriter
from daotai.post.enhance import enhance, parse_steps

RATE = 48000
FPS = 24
CLICKS = (6, 20, 41)  # frames


def clicks_at(samples: np.ndarray, rate: int) -> list[float]:
    loud = np.flatnonzero(np.abs(samples).max(axis=1) > 0.6)
    return [float(i) / rate for i in loud[np.r_[True, np.diff(loud) > rate // 20]]]


@pytest.fixture
def clip(tmp_path):
    path = tmp_path / "in.mp4"
    rng = np.random.default_rng(3)
    with VideoWriter(path, 96, 64, FPS) as writer:
        for i in range(48):
            frame = np.roll(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8) // 4 + 90, i, axis=1)
            writer.write(frame)
    t = np.arange(2 * RATE) / RATE
    sound = 0.1 * np.sin(2 * np.pi * 440 * t)
    for frame in CLICKS:
        start = frame * RATE // FPS
        sound[start:start + 48] = 0.9
    mux_audio(path, np.stack([sound, sound], axis=1).astype(np.float32), RATE)
    return path


@pytest.mark.parametrize("spec", ["interpolate=60", "upscale=2", "deflicker"])
def test_enhance_keeps_sound_in_sync(clip, tmp_path, spec):
    out = tmp_path / "out.mp4"
    result = enhance(clip, out, parse_steps(spec))
    before, rate, _ = decode_audio(clip)
    after, rate_after, first = decode_audio(out)
    assert first == 0 and rate_after == rate and after.shape == before.shape
    assert np.array_equal(before, after)  # the same packets: nothing re-encoded
    times = clicks_at(after, rate)
    assert len(times) == len(CLICKS) and all(abs(a - f / FPS) < 1 / FPS for a, f in zip(times, CLICKS, strict=True))
    video = probe(out)
    assert video.duration_s == pytest.approx(2.0, abs=1 / float(video.fps))
    assert result.manifest["audio"]["copied_from_input"]
    assert probe_audio(out).start_s == 0


def test_silent_input_stays_silent(tmp_path):
    path = tmp_path / "silent.mp4"
    with VideoWriter(path, 64, 64, Fraction(FPS)) as writer:
        for i in range(12):
            writer.write(np.full((64, 64, 3), 20 * i, np.uint8))
    result = enhance(path, tmp_path / "o.mp4", parse_steps("interpolate=x2"))
    assert probe_audio(tmp_path / "o.mp4") is None and "audio" not in result.manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.enhance.json", "o.mp4", "silent.mp4"]  # no temp files
