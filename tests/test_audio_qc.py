"""QC of sound: loudness against the EBU Tech 3341 reference signals, true peak, clipping and
silence runs, duration and start checks, and the failures --strict acts on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.encode.audio import mux_audio
from daotai.encode.video import VideoWriter
from daotai.plan.planner import plan_script
from daotai.qc.audio import check_audio, clipping_runs, loudness, silence_runs
from daotai.qc.report import check_sequence
from daotai.qc.shot import check_shot
from daotai.script.load import validate_script

RATE = 48000


def sine(dbfs: float, seconds: float, freq: float = 1000.0, phase: float = 0.0, channels: int = 2) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    wave = (10 ** (dbfs / 20) * np.sin(2 * np.pi * freq * t + phase)).astype(np.float32)
    return np.repeat(wave[:, None], channels, axis=1)


@pytest.mark.parametrize("level", [-23.0, -33.0])
def test_integrated_loudness_of_a_stereo_1khz_sine(level):
    """EBU Tech 3341 cases 1 and 2: a stereo 1 kHz sine at L dBFS reads L LUFS (±0.1)."""
    assert loudness(sine(level, 20), RATE)["integrated_lufs"] == pytest.approx(level, abs=0.1)


def test_gating_ignores_the_quiet_parts():
    """EBU Tech 3341 case 3: 10 s at -36, 60 s at -23, 10 s at -36 dBFS reads -23 LUFS."""
    signal = np.concatenate([sine(-36, 10), sine(-23, 60), sine(-36, 10)])
    assert loudness(signal, RATE)["integrated_lufs"] == pytest.approx(-23.0, abs=0.1)


def test_true_peak_sees_between_the_samples():
    # fs/4 with a 45° phase: every sample sits at 0.707 of the waveform's peak
    measured = loudness(sine(-3, 3, freq=RATE / 4, phase=math.pi / 4), RATE)
    assert measured["sample_peak_dbfs"] == pytest.approx(-6.0, abs=0.1)
    assert measured["true_peak_dbtp"] > measured["sample_peak_dbfs"] + 2.0
    plain = loudness(sine(-6.02, 3, freq=997), RATE)
    assert plain["true_peak_dbtp"] == pytest.approx(-6.02, abs=0.2)
    assert loudness(np.zeros((RATE * 2, 2), np.float32), RATE)["integrated_lufs"] is None  # below the gate


def test_clipping_and_silence_runs():
    signal = sine(-10, 4)
    signal[RATE: RATE + 5] = 1.0  # five full-scale samples: clipping
    signal[2 * RATE] = 1.0  # a single full-scale sample: a peak, not clipping
    signal[int(2.5 * RATE): int(4 * RATE)] = 0.0
    assert clipping_runs(signal) == [(RATE, 5)]
    ((start, length),) = silence_runs(signal, RATE)
    assert start == pytest.approx(2.5, abs=0.05) and length == pytest.approx(1.5, abs=0.05)


def clip_file(path, frames: int = 24, sound: np.ndarray | None = None):
    with VideoWriter(path, 64, 64, 24) as writer:
        for _ in range(frames):
            writer.write(np.full((64, 64, 3), 120, np.uint8))
    if sound is not None:
        mux_audio(path, sound, RATE)
    return path


def test_check_audio_duration_start_clipping_and_absence(tmp_path):
    good = clip_file(tmp_path / "good.mp4", sound=sine(-20, 1.0))
    entry, failures = check_audio(good, 1.0, planned=True)
    assert failures == [] and entry["start_s"] == 0 and entry["duration_s"] == pytest.approx(1.0)
    assert entry["loudness"]["integrated_lufs"] == pytest.approx(-20, abs=0.5)
    short = clip_file(tmp_path / "short.mp4", sound=sine(-20, 0.5))
    _, failures = check_audio(short, 1.0, planned=True)
    assert any("lasts 0.5" in f for f in failures)
    square = np.sign(sine(0, 1.0)).astype(np.float32)
    clipped = clip_file(tmp_path / "clipped.mp4", sound=square)
    _, failures = check_audio(clipped, 1.0, planned=True)
    assert any("clips" in f for f in failures)
    silent = clip_file(tmp_path / "silent.mp4")
    assert check_audio(silent, 1.0, planned=False) == (None, [])
    entry, failures = check_audio(silent, 1.0, planned=True)
    assert entry == {"present": False} and "has none" in failures[0]


def test_report_fails_where_planned_sound_is_missing_and_stays_silent_otherwise(tmp_path):
    data = {"fps": 24, "size": "64x64", "characters": [{"id": "a"}], "shots": [{"shot_id": "s", "duration": 1}]}
    plan = plan_script(validate_script(data))
    path = clip_file(tmp_path / "s.mp4")
    entry = check_shot(plan, plan.shots[0], path, None, camera=False)
    assert entry["ok"] and "audio" not in entry
    entry = check_shot(plan, plan.shots[0], path, None, camera=False, audio=True)
    assert not entry["ok"] and entry["audio"] == {"present": False}
    with_track = plan_script(validate_script({**data, "soundtrack": "music.wav"}))
    sequence = check_sequence(with_track, path)
    assert not sequence["ok"] and any("has sound here" in f for f in sequence["failures"])
