"""QC's sparse camera sampling: the rule that lets a sparse pass decide, and on real previz clips
the same verdict as the dense check (a pan the wrong way, frames repeated between the sampled ones)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.read import decode_frames
from daotai.encode.video import VideoWriter
from daotai.errors import OptionError
from daotai.plan.planner import plan_script
from daotai.qc.camera_adherence import DEPTH_MAP_CONFIG, CameraAdherence
from daotai.qc.camera_metrics import uneven_steps
from daotai.qc.camera_similarity import COMPONENTS
from daotai.qc.camera_verdict import ComponentCheck
from daotai.qc.judder import JERK_BOUND, Judder
from daotai.qc.sampling import (
    DENSE,
    DEVIATION_SHARE,
    ENV_VAR,
    FAST,
    QcSampling,
    densify_reason,
    sampling_from_env,
)
from daotai.qc.shot import check_shot
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

WIDTH, HEIGHT = 640, 360
HALF_DIAG = 0.5 * math.hypot(WIDTH, HEIGHT)
SIGNIFICANT = 0.02 * WIDTH  # CameraCheckConfig.significant_frac of the width: 12.8 px
CONFIG = DEPTH_MAP_CONFIG


def _component(name: str, expected: float = 0.0, measured: float = 0.0) -> ComponentCheck:
    unit = {"horizontal": "px", "vertical": "px", "roll": "deg", "scale": "log"}[name]
    to_px = {"px": 1.0, "deg": math.radians(1.0) * HALF_DIAG, "log": HALF_DIAG}[unit]
    significant = abs(expected) * to_px > SIGNIFICANT
    return ComponentCheck(name, unit, expected, measured, abs(expected) * to_px, abs(measured) * to_px, significant,
                          (expected * measured > 0) if significant else None, False,
                          measured / expected if significant else None, "pan right", "rotation")


def _sparse(**changes) -> CameraAdherence:
    """A sparse (stride 3) pass of a pan right of 200 px that follows its plan closely."""
    components = tuple(_component(n, 200.0, 198.0) if n == "horizontal" else _component(n) for n in COMPONENTS)
    base = CameraAdherence(ok=True, summary="pans right 198 px as planned", pairs_evaluated=15, pairs_skipped=0,
                           stride=3, frames_seen=48, frames_planned=48, error_mean_px=0.12, error_p95_px=0.4,
                           error_limit_px=1.0, significant_px=SIGNIFICANT, tracks_used=4000, tracks_excluded=300,
                           components=components, worst_pair=(9, 12, 0.3), plan_fit_px=0.12, plain_fit_px=0.5)
    return replace(base, **changes)


def _with(adherence: CameraAdherence, name: str, expected: float, measured: float) -> CameraAdherence:
    return replace(adherence, components=tuple(_component(name, expected, measured) if c.name == name else c
                                               for c in adherence.components))


def _reason(adherence: CameraAdherence) -> str | None:
    return densify_reason(adherence, CONFIG, FAST.clear_share, HALF_DIAG)


def test_a_clear_sparse_pass_decides():
    assert _reason(_sparse()) is None


def test_a_failing_or_untracked_sparse_pass_goes_dense():
    assert _reason(_sparse(ok=False)) == "the sparse pass fails"
    assert "too little texture" in _reason(_sparse(pairs_evaluated=0, pairs_skipped=15))
    assert "too little texture" in _reason(_sparse(pairs_evaluated=9, pairs_skipped=6))  # 0.6 tracked
    assert _reason(_sparse(pairs_evaluated=10, pairs_skipped=5)) is None  # two thirds tracked: totals scaled up


def test_per_frame_values_are_held_at_the_stride_against_their_bounds():
    # a pair's noise does not grow with the step: 0.23 px/frame sparse may be 0.69 dense (of 1.0)
    assert FAST.clear_share == 0.7
    assert _reason(_sparse(error_mean_px=0.23)) is None
    assert "near the 1.00 limit" in _reason(_sparse(error_mean_px=0.24))
    assert _reason(_sparse(error_mean_px=0.24, stride=1)) is None  # (a stride-1 pass is the dense one)
    # the parallax rule: the plan must fit within 1.5 x the best similarity (0.5 here: 0.75)
    assert _reason(_sparse(plan_fit_px=0.17)) is None
    assert "parallax rule" in _reason(_sparse(plan_fit_px=0.18))
    # the 0.4 px floor: 0.09 x 3 is under 0.7 x 0.4 (1.5 x 0.1 alone would not clear it)
    assert _reason(_sparse(plan_fit_px=0.09, plain_fit_px=0.1)) is None
    assert "parallax rule" in _reason(_sparse(plan_fit_px=0.1, plain_fit_px=0.1))


@pytest.mark.parametrize("name", COMPONENTS)
def test_a_component_straying_from_the_plan_goes_dense(name):
    limit = DEVIATION_SHARE * SIGNIFICANT  # 6.4 px
    per_px = {"horizontal": 1.0, "vertical": 1.0, "roll": math.radians(1.0) * HALF_DIAG, "scale": HALF_DIAG}[name]
    close = 0.9 * limit / per_px
    far = 1.1 * limit / per_px
    if name == "horizontal":
        assert _reason(_with(_sparse(), name, 200.0, 200.0 - close)) is None
        assert "horizontal strays" in _reason(_with(_sparse(), name, 200.0, 200.0 - far))
    else:  # planned still: a small unplanned move is clear, one over half the significance is not
        assert _reason(_with(_sparse(), name, 0.0, close)) is None
        assert f"{name} strays" in _reason(_with(_sparse(), name, 0.0, -far))
    # with a third of the pairs skipped the deviation may be half as large again
    thin = _sparse(pairs_evaluated=10, pairs_skipped=5)
    assert f"{name} strays" in _reason(_with(thin, name, 0.0, close))


def test_repeated_frames_between_the_sampled_ones_go_dense():
    steady = Judder(score=0.02, mean_step_px=5.0, steps_px=(5.0,) * 10, jerk=0.1, mean_speed_px=5.0)
    assert uneven_steps(steady, FAST.clear_share) is None
    held = replace(steady, jerk=0.7 * JERK_BOUND + 0.01)
    assert "frame steps uneven" in uneven_steps(held, FAST.clear_share)
    # a picture moving under a pixel a frame is not judged (its jerk is flow noise), nor can
    # a frame held there move a track by more than the camera check's error limit
    assert uneven_steps(replace(held, mean_speed_px=0.5), FAST.clear_share) is None


def test_the_setting_comes_from_the_environment():
    assert sampling_from_env({}) is FAST
    assert sampling_from_env({ENV_VAR: "dense"}) is DENSE
    assert sampling_from_env({ENV_VAR: " fast "}) is FAST
    with pytest.raises(OptionError, match=f"{ENV_VAR}: 'sparse' must be one of dense, fast"):
        sampling_from_env({ENV_VAR: "sparse"})
    with pytest.raises(ValueError, match="camera_stride"):
        QcSampling("odd", camera_stride=0)
    assert DENSE.camera_stride == 1 and FAST.camera_stride == 3


# --------------------------------------------------------------------------- on real previz clips

PAN = {"size": "320x180", "fps": 24, "scene": {"name": "office"}, "characters": [{"id": "a"}],
       "shots": [{"shot_id": "pan", "duration": 1.5, "subject": "a", "framing": "medium",
                  "camera": {"type": "pan", "rotate": [20, 0, 0], "easing": "linear"}}]}


@pytest.fixture(scope="module")
def pan(tmp_path_factory):
    out = tmp_path_factory.mktemp("pan")
    plan = plan_script(validate_script(PAN))
    assert any(isinstance(e, Finished) for e in run(plan, out, PipelineSettings(qc_workers=0)))
    controls = {"depth": out / "control" / "pan_depth.mkv", "mask": out / "control" / "pan_mask.mkv"}
    return plan, out / "shots" / "pan.mp4", controls


def _write(frames: list[np.ndarray], path: Path, fps: int) -> Path:
    with VideoWriter(path, frames[0].shape[1], frames[0].shape[0], fps) as writer:
        for frame in frames:
            writer.write(frame)
    return path


def _both(plan, video: Path, controls) -> tuple[dict, dict]:
    shot = plan.shot("pan")
    return (check_shot(plan, shot, video, None, controls=controls, sampling=DENSE),
            check_shot(plan, shot, video, None, controls=controls, sampling=FAST))


def _verdicts(entry: dict) -> list[tuple[str, bool]]:
    return [(v["check"], v["ok"]) for v in entry["verdicts"]]


def test_a_correct_pan_is_decided_by_the_sparse_pass(pan):
    plan, video, controls = pan
    dense, fast = _both(plan, video, controls)
    assert fast["ok"] and _verdicts(fast) == _verdicts(dense)
    assert fast["camera"]["stride"] == 3 and "densified" not in fast["camera"]
    assert dense["camera"]["stride"] == 1
    assert fast["camera"]["pairs_evaluated"] < dense["camera"]["pairs_evaluated"]


def test_a_pan_the_wrong_way_gets_the_dense_verdict(pan, tmp_path):
    plan, video, controls = pan
    backwards = _write(list(decode_frames(video))[::-1], tmp_path / "pan.mp4", plan.fps)
    dense, fast = _both(plan, backwards, controls)
    assert fast["camera"]["ok"] is False and fast["camera"]["densified"] == "the sparse pass fails"
    assert fast["camera"] == {**dense["camera"], "densified": "the sparse pass fails"}
    assert _verdicts(fast) == _verdicts(dense)


def test_frames_held_between_the_sampled_ones_get_the_dense_verdict(pan, tmp_path):
    """Each sampled frame held for the two after it (8 fps shown at 24): the sampled pairs (0, 3),
    (3, 6) ... see an even pan, the frame steps do not."""
    plan, video, controls = pan
    frames = list(decode_frames(video))
    stride = FAST.camera_stride
    held = _write([frames[i - i % stride] for i in range(len(frames))], tmp_path / "pan.mp4", plan.fps)
    dense, fast = _both(plan, held, controls)
    assert fast["camera"]["densified"].startswith("frame steps uneven")
    assert fast["camera"] == {**dense["camera"], "densified": fast["camera"]["densified"]}
    assert _verdicts(fast) == _verdicts(dense)
    assert ("judder", False) in _verdicts(fast)
