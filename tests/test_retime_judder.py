"""Retiming neural output to the plan's rate by motion interpolation: a steady pan stays steady."""

from __future__ import annotations

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from daotai.qc.judder import JUDDER_BOUND, judder  # noqa: E402
from daotai.render.neural.retime import (  # noqa: E402
    interpolator_available,
    retime_frames,
    retime_indexes,
    retime_positions,
)

NATIVE_FPS, PLAN_FPS = 16.0, 30.0
STEP_PX = 6.0  # the pan's motion per native frame


def texture(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Smooth random colour texture (H, W, 3) uint8: flow finds it everywhere."""
    rng = np.random.default_rng(seed)
    noise = rng.random((height // 4, width // 4, 3)).astype(np.float32)
    big = cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
    return np.clip(cv2.GaussianBlur(big, (0, 0), 1.5) * 255, 0, 255).astype(np.uint8)


def steady_pan(frames: int, step: float, width: int = 160, height: int = 96) -> np.ndarray:
    """A camera panning right at ``step`` px a frame over a textured wall: (F, H, W, 3) uint8."""
    wall = texture(width + int(step * frames) + 16, height)
    out = []
    for i in range(frames):
        shift = np.float32([[1, 0, -i * step], [0, 1, 0]])  # sub-pixel exact translation
        out.append(cv2.warpAffine(wall, shift, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT))
    return np.stack(out)


def plan_count(native: int) -> int:
    return int(np.floor((native - 1) * PLAN_FPS / NATIVE_FPS)) + 1


def test_positions_hit_native_frames_and_exact_times():
    positions = retime_positions(33, NATIVE_FPS, plan_count(33), PLAN_FPS)
    assert positions[0] == (0, 0.0) and positions[-1] == (32, 0.0)  # 60 / 30 s = 32 / 16 s
    for i, (a, t) in enumerate(positions):
        assert a + t == pytest.approx(i * NATIVE_FPS / PLAN_FPS, abs=1e-9)
        assert 0.0 <= t < 1.0


def test_a_16fps_steady_pan_retimed_to_30fps_moves_evenly_and_repetition_does_not():
    assert interpolator_available()
    native = steady_pan(33, STEP_PX)  # 2 s at 16 fps
    count = plan_count(len(native))
    interpolated = np.stack(list(retime_frames(native, NATIVE_FPS, count, PLAN_FPS)))
    repeated = native[retime_indexes(len(native), NATIVE_FPS, count, PLAN_FPS)]
    assert interpolated.shape == repeated.shape == (count, *native.shape[1:])

    smooth, stutter, source = judder(interpolated), judder(repeated), judder(native)
    print(f"judder: native {source.score:.3f}, interpolated {smooth.score:.3f}, repeated {stutter.score:.3f}; "
          f"steps {smooth.mean_step_px:.2f} px (expected {STEP_PX * NATIVE_FPS / PLAN_FPS:.2f})")
    assert source.score < 0.05  # the measure itself reads the steady source as steady
    assert smooth.score < JUDDER_BOUND < stutter.score
    assert smooth.mean_step_px == pytest.approx(STEP_PX * NATIVE_FPS / PLAN_FPS, rel=0.05)
    # Repetition: some steps do not move at all, others move a whole native step.
    assert min(stutter.steps_px) < 0.5 and max(stutter.steps_px) > 0.9 * STEP_PX


def test_a_still_clip_has_no_judder():
    still = np.repeat(texture(96, 64)[None], 10, axis=0)
    assert judder(still).score == 0.0


def test_equal_rates_pass_frames_through_and_without_opencv_frames_repeat(monkeypatch):
    from daotai.render.neural import retime

    native = steady_pan(9, 4.0, 64, 48)
    same = np.stack(list(retime_frames(native, 24.0, 9, 24.0)))
    assert np.array_equal(same, native)
    monkeypatch.setattr(retime, "interpolator_available", lambda: False)
    fallback = np.stack(list(retime_frames(native, NATIVE_FPS, plan_count(9), PLAN_FPS)))
    assert np.array_equal(fallback, native[retime_indexes(9, NATIVE_FPS, plan_count(9), PLAN_FPS)])


def test_the_retime_notice_names_the_method(monkeypatch):
    from daotai.plan.planner import plan_script
    from daotai.render.neural import retime
    from daotai.render.neural.request import family_defaults, native_request
    from daotai.script.schema import Script

    plan = plan_script(Script.model_validate({"title": "t", "fps": 30, "size": [64, 64], "scene": "office",
                                              "shots": [{"shot_id": "s1", "duration": 1.0}]}))
    request = native_request(plan, plan.shots[0], family_defaults("wan"))
    text = retime.retime_notice(request, plan, plan.shots[0]).text
    assert "at 16 fps, retimed to 30 at 30 fps by motion interpolation (DIS optical flow" in text
    monkeypatch.setattr(retime, "interpolator_available", lambda: False)
    assert "by repeating frames (no interpolator" in retime.retime_notice(request, plan, plan.shots[0]).text


def test_interpolated_frames_are_the_post_interpolators():
    """One implementation (daotai.render.motion) serves retiming and `daotai enhance --interpolate`."""
    from daotai.post.interpolate import in_between as post_in_between
    from daotai.render.neural.retime import retime_frames

    native = steady_pan(2, 5.0, 96, 64)
    frames = list(retime_frames(native, 10.0, 2, 25.0))  # plan frame 1 shows t = 0.4 between native 0 and 1
    assert np.array_equal(frames[1], post_in_between(native[0], native[1], 0.4))
