"""qc.json carries the standard camera metrics and the judder per shot, each with a verdict.

A previz shot (exact camera) passes both; the same frames reversed fail the recovered camera
path with its reason; frames repeated to fake a lower rate fail the judder check.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from daotai.qc.judder import JERK_BOUND, judder  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def pan():
    """The all_moves example's plan, its pan shot and its previz frames (no labels)."""
    from daotai.events import Frame
    from daotai.plan.planner import plan_script
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.previz.backend import PrevizBackend
    from daotai.script.load import load_script

    plan = plan_script(load_script(EXAMPLES / "all_moves.json"))
    shot = plan.shot("pan")
    backend = PrevizBackend(labels=False)
    try:
        frames = [e.rgb for e in backend.render(RenderJob(plan, shot, controls=False), RunContext())
                  if isinstance(e, Frame)]
    finally:
        backend.close()
    return plan, shot, frames


def checked(plan, shot, frames, folder: Path) -> dict:
    """check_shot's qc.json entry for ``frames`` written as the shot's file."""
    from daotai.encode.video import VideoWriter
    from daotai.qc.shot import check_shot

    path = folder / f"{shot.shot_id}.mp4"
    with VideoWriter(path, plan.width, plan.height, Fraction(*plan.fps_fraction)) as writer:
        for frame in frames:
            writer.write(frame)
    return check_shot(plan, shot, path, None, camera=True, controls={}, labels=False)


def test_a_previz_shot_passes_with_its_metrics_in_qc_json(pan, tmp_path):
    plan, shot, frames = pan
    entry = checked(plan, shot, frames, tmp_path)
    path, motion = entry["camera_path"], entry["judder"]
    print(f"pan: RotErr {path['RotErr_per_frame_deg']} deg/frame, TransErr {path['TransErr_per_frame_m']} m/frame, "
          f"CamMC {path['CamMC']}, jerk {motion['jerk']}")
    assert path["checked"] and path["ok"] and path["RotErr_per_frame_deg"] < path["rot_bound_deg"]
    assert {"RotErr_deg", "TransErr_m", "CamMC", "rule"} <= set(path)
    assert motion["moving"] and motion["ok"] and motion["jerk"] < JERK_BOUND
    checks = {v["check"]: v["ok"] for v in entry["verdicts"]}
    assert checks["camera_path"] is True and checks["judder"] is True and entry["ok"], entry["failures"]


def test_a_reversed_pan_fails_the_camera_path_with_its_reason(pan, tmp_path):
    plan, shot, frames = pan
    entry = checked(plan, shot, frames[::-1], tmp_path)
    assert entry["camera_path"]["ok"] is False and not entry["ok"]
    reason = next(text for text in entry["failures"] if text.startswith("camera path:"))
    assert "turns the opposite way" in reason and "RotErr" in reason


def test_frames_repeated_to_fake_a_lower_rate_fail_the_judder_check(pan, tmp_path):
    plan, shot, frames = pan
    # 24 fps shown from a 16 fps source by repetition: each frame is the latest 16 fps instant
    repeated = [frames[int(int(i * 16 / 24) * 24 / 16)] for i in range(len(frames))]
    entry = checked(plan, shot, repeated, tmp_path)
    print(f"repeated: jerk {entry['judder']['jerk']}")
    assert entry["judder"]["ok"] is False and entry["judder"]["jerk"] > 2 * JERK_BOUND
    assert any(text.startswith("motion judders") for text in entry["failures"])


def test_the_jerk_ignores_easing_and_reads_a_roll():
    """An eased move's steps change slowly (jerk ~0); a roll's median flow is ~0 but its length is not."""
    rng = np.random.default_rng(3)
    texture = cv2.resize(rng.integers(0, 255, (60, 90), dtype=np.uint8), (360, 240), interpolation=cv2.INTER_CUBIC)
    texture = np.dstack([texture] * 3)
    eased = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, 40))  # 0..1, ease in and out
    shifted = [cv2.warpAffine(texture, np.float32([[1, 0, 60 * e], [0, 1, 0]]), (360, 240),
                              flags=cv2.INTER_CUBIC)[:, 60:300] for e in eased]  # sub-pixel steps up to 2.4 px
    eased_jerk = judder(shifted).jerk
    print(f"eased pan: jerk {eased_jerk:.3f}")
    assert eased_jerk < JERK_BOUND
    centre = (119.5, 119.5)
    rolled = [cv2.warpAffine(texture[:, 60:300], cv2.getRotationMatrix2D(centre, 0.5 * i, 1.0), (240, 240))
              for i in range(30)]
    measured = judder(rolled)
    assert measured.mean_speed_px > 0.5 and measured.jerk < JERK_BOUND


def test_timing_alone_is_a_warning_unless_the_flow_check_agrees_and_a_wrong_direction_fails():
    from daotai.qc.camera_metrics import path_verdict
    from daotai.qc.camera_path_check import CameraPathCheck, camera_errors

    poses = np.repeat(np.eye(4)[None], 3, axis=0)
    errors = camera_errors(poses, poses)

    def check(reason: str) -> CameraPathCheck:
        return CameraPathCheck(errors, 5.0, 0.05, 1.0, 0, 2, (reason,))

    late = check("runs behind the plan by 30% of the move at frame 20 (dropped or repeated frames, or another speed)")
    entry, failures, fine, note = path_verdict(late)
    assert entry["ok"] is None and not failures and fine is None and "flow-based camera check" in note
    entry, failures, _, note = path_verdict(late, flow_failed=True)
    assert entry["ok"] is False and failures[0].startswith("camera path: runs behind") and note is None
    _, failures, _, _ = path_verdict(check("turns the opposite way to the plan (20 deg planned)"))
    assert failures and "opposite way" in failures[0]
