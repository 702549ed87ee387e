"""Each QC threshold from both sides: a case just inside it passes and one just outside fails, in
both directions where it has two (sound longer and shorter, a camera ahead of and behind its plan).
Pure functions on made-up numbers: no render, no encode. The thresholds are written here as the
numbers the rules state, so a threshold loosened or tightened in the code fails its test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.plan.camera_grammar import rot_x, rot_y
from daotai.plan.planner import plan_script
from daotai.qc.audio import (
    clipping_runs,
    length_failure,
    silence_runs,
    start_failure,
)
from daotai.qc.camera_path import CameraPath
from daotai.qc.camera_path_check import camera_errors, check_camera_path
from daotai.qc.fidelity import check_fidelity
from daotai.qc.metrics import (
    frozen_runs,
    is_black,
    is_green,
)
from daotai.qc.subject import check_subject
from daotai.script.load import validate_script

RATE = 48000


# ---------------------------------------------------------------- sound


@pytest.mark.parametrize("codec, grain", [("aac", 1024), ("pcm_s24le", 1)])
@pytest.mark.parametrize("sign", [1, -1])  # sound longer than the picture, and shorter
def test_sound_length_is_held_to_the_codecs_grain_both_ways(codec, grain, sign):
    picture_s = 2.0
    assert length_failure(2 * RATE + sign * grain, RATE, codec, picture_s) is None
    failure = length_failure(2 * RATE + sign * (grain + 1), RATE, codec, picture_s)
    assert failure is not None and "the picture 2.0000 s" in failure
    assert length_failure(2 * RATE, RATE, codec, picture_s) is None


def test_sound_must_start_with_the_picture_neither_early_nor_late():
    inside = 0.9 * 0.5 / RATE  # the first sample within half a sample of time zero
    outside = 1.1 * 0.5 / RATE
    for first, stream in ((inside, 0.0), (-inside, 0.0), (0.0, inside), (0.0, -inside)):
        assert start_failure(first, stream) is None
    for first, stream in ((outside, 0.0), (-outside, 0.0), (0.0, outside), (0.0, -outside)):
        assert start_failure(first, stream) is not None, (first, stream)


@pytest.mark.parametrize("level", [0.999, -0.999, 1.0, -1.0])
def test_clipping_is_a_run_of_full_scale_samples_of_either_sign(level):
    quiet = np.full((1000, 2), 0.2, np.float32)
    just_short = quiet.copy()
    just_short[100:100 + 3 - 1, 1] = level
    assert clipping_runs(just_short) == []
    run = quiet.copy()
    run[100:100 + 3, 1] = level
    assert clipping_runs(run) == [(100, 3)]
    under = quiet.copy()
    under[100:200] = math.copysign(0.999 - 0.001, level)  # loud, but not at full scale
    assert clipping_runs(under) == []


def test_silence_is_long_enough_and_quiet_enough():
    window = RATE // 20
    loud = np.full((4 * RATE, 1), 0.3, np.float32)
    quiet_level = 10 ** ((-60.0 - 1) / 20)
    nearly_quiet = 10 ** ((-60.0 + 1) / 20)
    long_enough = round(1.0 * RATE / window) * window
    too_short = long_enough - window
    for length, level, found in ((long_enough, quiet_level, True), (too_short, quiet_level, False),
                                 (long_enough, nearly_quiet, False)):
        signal = loud.copy()
        signal[window * 10:window * 10 + length] = level
        runs = silence_runs(signal, RATE)
        assert (runs == [(0.5, round(length / RATE, 3))]) is found, (length, level, runs)


# ---------------------------------------------------------------- pictures


def test_black_frames_at_the_mean_and_bright_share_bounds():
    size = (100, 100, 3)
    assert is_black(np.full(size, 16, np.uint8))
    assert not is_black(np.full(size, 16 + 1, np.uint8))
    lights = np.full(size, 4, np.uint8)
    allowed = int(0.01 * 100 * 100)
    lights.reshape(-1, 3)[:allowed] = 200
    assert is_black(lights)  # a night frame with a few lights within the share is still black ...
    lights.reshape(-1, 3)[:allowed + 1] = 200
    assert not is_black(lights)  # ... one pixel more and it is a picture


def test_green_frames_at_the_level_ratio_and_share_bounds():
    size = (100, 100, 3)

    def frame(rgb, share=1.0):
        out = np.full(size, 128, np.uint8)  # grey elsewhere
        out.reshape(-1, 3)[:round(share * 100 * 100)] = rgb
        return out

    assert is_green(frame((0, 48, 0)))
    assert not is_green(frame((0, 48 - 1, 0)))
    assert is_green(frame((20, 60, 20)))  # R and B at a third of G
    assert not is_green(frame((21, 60, 20))) and not is_green(frame((20, 60, 21)))
    assert is_green(frame((0, 90, 0), 0.6))
    assert not is_green(frame((0, 90, 0), 0.6 - 0.01))


@pytest.mark.parametrize("length, found", [(12, True), (12 - 1, False)])
def test_a_frozen_run_is_counted_from_its_minimum_length(length, found):
    rng = np.random.default_rng(1)
    moving = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(6)]
    held = [np.full((48, 64, 3), 90, np.uint8)] * length
    runs = frozen_runs(moving[:3] + held + moving[3:])
    assert runs == ([(3, length)] if found else [])


# ---------------------------------------------------------------- the camera against its plan


def pan_poses(progress: np.ndarray, degrees: float = 30.0, lift: float = 0.0) -> np.ndarray:
    """(N, 4, 4) cameras turning ``degrees`` about y as ``progress`` (N,) runs 0..1, tilted ``lift`` after frame 0."""
    poses = np.repeat(np.eye(4)[None], len(progress), axis=0)
    for i, p in enumerate(progress):
        poses[i, :3, :3] = rot_y(degrees * p) @ (rot_x(lift) if i else np.eye(3))
    return poses


def dolly_poses(progress: np.ndarray, metres: float = 1.0, sideways: float = 0.0) -> np.ndarray:
    """(N, 4, 4) cameras travelling ``metres`` along z (and ``sideways`` along x) as ``progress`` runs 0..1."""
    poses = np.repeat(np.eye(4)[None], len(progress), axis=0)
    poses[:, 2, 3] = metres * progress
    poses[:, 0, 3] = sideways * progress
    return poses


def path_of(poses: np.ndarray) -> CameraPath:
    n = len(poses)
    return CameraPath(tuple(range(n)), poses, np.ones(n), (True,) * (n - 1), 0)


N = 25
T = np.linspace(0.0, 1.0, N)


def bump(gap: float) -> np.ndarray:
    """Progress off the plan's by at most ``gap`` (mid-move), back on it at both ends."""
    return T + gap * np.sin(np.pi * T)


@pytest.mark.parametrize("poses", [pan_poses, dolly_poses], ids=["turn", "travel"])
@pytest.mark.parametrize("gap, reason", [
    (0.2 - 0.02, None), (0.2 + 0.02, "runs ahead of the plan"),
    (-(0.2 - 0.02), None), (-(0.2 + 0.02), "runs behind the plan"),
])
def test_timing_ahead_and_behind_the_plan(poses, gap, reason):
    check = check_camera_path(poses(T), path_of(poses(bump(gap))))
    timing = [r for r in check.reasons if r.startswith("runs ")]
    if reason is None:
        assert timing == [], check.reasons
    else:
        assert len(timing) == 1 and timing[0].startswith(reason), check.reasons
        assert f"by {abs(gap) * 100:.0f}% of the move at frame {N // 2}" in timing[0]


def test_a_move_below_the_move_thresholds_has_no_timing_or_direction():
    small_turn = 5.0 * 0.9
    check = check_camera_path(pan_poses(T, small_turn), path_of(pan_poses(bump(0.4), -small_turn)))
    assert not [r for r in check.reasons if r.startswith(("turns", "runs"))], check.reasons
    check = check_camera_path(pan_poses(T, 5.0 * 1.1), path_of(pan_poses(T, -5.0 * 1.1)))
    assert any("turns the opposite way" in r for r in check.reasons)
    short = 0.2 * 0.9
    assert check_camera_path(dolly_poses(T, short), path_of(dolly_poses(T, -short))).passed
    check = check_camera_path(dolly_poses(T, 0.2 * 1.5), path_of(dolly_poses(T, -0.2 * 1.5)))
    assert "travels the opposite way to the plan" in check.reasons


@pytest.mark.parametrize("share, off", [(0.97, False), (1.03, True)])
def test_rotation_error_just_inside_and_outside_its_bound(share, off):
    # a still plan (no timing to check): the bound is 5.0 a frame
    lift = share * 5.0 * N / (N - 1)  # every frame but the first tilted by this: mean share * bound
    check = check_camera_path(pan_poses(T, 0.0), path_of(pan_poses(T, 0.0, lift)))
    assert check.rot_bound_deg == pytest.approx(5.0)
    assert check.errors.rot_err_deg / N == pytest.approx(share * 5.0)
    assert any(r.startswith("rotation off the plan") for r in check.reasons) is off, check.reasons


@pytest.mark.parametrize("share, off", [(0.97, False), (1.03, True)])
def test_position_error_just_inside_and_outside_its_bound(share, off):
    planned = dolly_poses(T, 1.0)
    bound = 0.05 + 0.25 * 1.0
    low, high = 0.0, 5.0  # find the sideways drift that makes the mean error share * bound
    for _ in range(60):
        mid = (low + high) / 2
        mean = camera_errors(planned, dolly_poses(T, 1.0, mid)).trans_err / N
        low, high = (mid, high) if mean < share * bound else (low, mid)
    check = check_camera_path(planned, path_of(dolly_poses(T, 1.0, low)))
    assert check.trans_bound_m == pytest.approx(bound)
    assert any(r.startswith("position off the plan") for r in check.reasons) is off, check.reasons


# ---------------------------------------------------------------- the subject and the encode


@pytest.mark.parametrize("share, ok", [(0.25 - 0.03, True), (0.25 + 0.05, False)])
def test_a_subject_hidden_just_under_and_over_the_allowed_share(share, ok):
    """b stands on the line from the lens to a for the first ``share`` of the shot (scene model)."""
    data = {"size": "preview", "characters": [{"id": "a", "position": [0, 0]}, {"id": "b", "position": [4, 4]}],
            "shots": [{"shot_id": "s", "duration": 2, "subject": "a", "framing": "medium", "camera": "static"}]}
    plan = plan_script(validate_script(data))
    shot = plan.shots[0]
    frames = []
    for i, people in enumerate(shot.character_frames):
        lens = np.array(shot.cameras[i].cam_to_world).reshape(4, 4)[:3, 3]
        a = next(p for p in people if p.id == "a")
        between = tuple((np.array(a.position) + lens[[0, 2]]) / 2)
        hide = i < share * len(shot.character_frames)
        frames.append(tuple(p.model_copy(update={"position": between}) if p.id == "b" and hide else p for p in people))
    entry = check_subject(plan, shot.model_copy(update={"character_frames": tuple(frames)}))
    assert entry["ok"] is ok, entry


def _offset(frame: np.ndarray, mse: float, rng) -> np.ndarray:
    """``frame`` with every sample moved by 3 or 4 code values, mixed to give mean squared error ``mse``."""
    share = (mse - 9.0) / 7.0  # of samples moved by 4 (16) rather than 3 (9)
    step = np.where(rng.random(frame.shape) < share, 4, 3) * rng.choice([-1, 1], frame.shape)
    return (frame.astype(np.int16) + step).astype(np.uint8)


def _mse_at(db: float) -> float:
    return 255.0**2 / 10 ** (db / 10)


@pytest.mark.parametrize("mean_db, fails", [(38.5 + 0.06, False), (38.5 - 0.06, True)])
def test_encode_fidelity_mean_just_above_and_below_its_floor(mean_db, fails):
    rng = np.random.default_rng(7)
    busy = rng.integers(8, 248, (90, 160, 3), dtype=np.uint8)
    samples = {i: busy for i in range(6)}
    decoded = {i: _offset(busy, _mse_at(mean_db), rng) for i in range(6)}
    entry, failures, _ = check_fidelity(samples, decoded)
    assert entry["psnr_mean_db"] == pytest.approx(mean_db, abs=0.03)
    assert any("on average" in f for f in failures) is fails, failures


@pytest.mark.parametrize("frame_db, fails", [(34.9 + 0.1, False), (34.9 - 0.1, True)])
def test_one_frame_just_above_and_below_the_starved_frame_floor(frame_db, fails):
    rng = np.random.default_rng(8)
    busy = rng.integers(8, 248, (90, 160, 3), dtype=np.uint8)
    samples = {i: busy for i in range(8)}
    decoded = {i: (busy.astype(np.int16) + rng.choice([-2, 2], busy.shape)).astype(np.uint8) for i in range(8)}
    share = (_mse_at(frame_db) - 16.0) / 9.0  # samples moved by 5 (25) rather than 4 (16)
    step = np.where(rng.random(busy.shape) < share, 5, 4) * rng.choice([-1, 1], busy.shape)
    decoded[5] = (busy.astype(np.int16) + step).astype(np.uint8)
    entry, failures, _ = check_fidelity(samples, decoded)
    assert not any("on average" in f for f in failures)
    assert any("frame 5" in f for f in failures) is fails, (entry, failures)
