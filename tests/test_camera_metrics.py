"""Standard camera metrics (RotErr, TransErr, CamMC) from poses recovered from the frames.

Previz renders follow their cameras exactly, so every example's shots must pass; broken versions
of them (a reversed pan, dropped frames, a zoom where a dolly was asked) must fail, each with its
own reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from daotai.plan import geometry  # noqa: E402
from daotai.qc.camera_path import recover_path  # noqa: E402
from daotai.qc.camera_path_check import camera_errors, check_camera_path, check_shot_camera, relative_cv  # noqa: E402
from daotai.qc.camera_two_view import geodesic_deg, rotation_with_zoom, triangulate  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def plan_of(name: str):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    return plan_script(load_script(EXAMPLES / name))


@pytest.fixture(scope="module")
def previz():
    from daotai.render.previz.backend import PrevizBackend

    backend = PrevizBackend(labels=False)
    yield backend
    backend.close()


def frames_of(previz, plan, shot) -> list[np.ndarray]:
    from daotai.events import Frame
    from daotai.render.base import RenderJob, RunContext

    return [e.rgb for e in previz.render(RenderJob(plan, shot, controls=False), RunContext()) if isinstance(e, Frame)]


def cameras_of(shot) -> tuple[np.ndarray, list]:
    poses = np.stack([np.reshape(c.cam_to_world, (4, 4)) for c in shot.cameras])
    return poses, [geometry.intrinsics_from_matrix(np.reshape(c.K, (3, 3))) for c in shot.cameras]


def test_metrics_are_zero_on_the_plan_itself_and_scale_free():
    plan = plan_of("all_moves.json")
    planned = relative_cv(cameras_of(plan.shot("orbit"))[0])
    exact = camera_errors(planned, planned)
    assert exact.rot_err_deg == pytest.approx(0.0, abs=1e-6) and exact.trans_err == pytest.approx(0.0, abs=1e-9)
    assert exact.cam_mc == pytest.approx(0.0, abs=1e-9)
    shrunk = planned.copy()
    shrunk[:, :3, 3] *= 0.1  # monocular recovery has no scale: one factor per shot is fitted
    again = camera_errors(planned, shrunk)
    assert again.scale == pytest.approx(10.0) and again.trans_err == pytest.approx(0.0, abs=1e-9)
    assert exact.planned_turn_deg == pytest.approx(40.0, abs=0.5)


def test_a_rotation_with_zoom_is_read_back_from_its_homography():
    rotation = cv2.Rodrigues(np.array([0.02, -0.05, 0.01]))[0]
    h = np.diag([1.3, 1.3, 1.0]) @ rotation * 2.0
    got, zoom = rotation_with_zoom(h)
    assert zoom == pytest.approx(1.3) and geodesic_deg(got[None], rotation[None])[0] < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("example", ["all_moves.json", "office.json", "minimal.json", "street_zh.json"])
def test_previz_renders_of_every_example_pass(previz, example):
    plan = plan_of(example)
    for shot in plan.shots:
        poses, intrinsics = cameras_of(shot)
        check = check_shot_camera(frames_of(previz, plan, shot), poses, intrinsics)
        row = check.as_dict()
        print(f"{example} {shot.shot_id}: RotErr {row['RotErr_per_frame_deg']} deg/frame (bound {row['rot_bound_deg']}), "
              f"TransErr {row['TransErr_per_frame_m']} m/frame (bound {row['trans_bound_m']}), CamMC {row['CamMC']}, "
              f"{row['frames_compared']} frames, {row['reasons']}")
        assert check.passed, (shot.shot_id, check.reasons)


def jittered(shot, px: float, seed: int):
    """The shot with each frame's camera turned by a random angle that moves the picture ``px`` pixels
    (frame centre, focal ~310 px at 640x360): the same move rasterised at sub-pixel offsets, as another
    GPU's renderer differs from Mesa's at triangle edges and in rounding."""
    rng = np.random.default_rng(seed)
    cameras = []
    for camera in shot.cameras:
        c2w = np.reshape(camera.cam_to_world, (4, 4)).copy()
        focal = float(np.reshape(camera.K, (3, 3))[1, 1])
        axis = np.array([*rng.normal(size=2), 0.0])  # about the camera's x and y: the picture shifts
        c2w[:3, :3] = c2w[:3, :3] @ cv2.Rodrigues(axis / np.linalg.norm(axis) * px / focal)[0]
        cameras.append(camera.model_copy(update={"cam_to_world": tuple(c2w.ravel())}))
    return shot.model_copy(update={"cameras": tuple(cameras)})


@pytest.mark.slow
def test_a_short_dolly_keeps_its_verdict_across_renders_and_key_frames(previz):
    # office s02 is a 0.32 m dolly. Rendered on an NVIDIA GPU (0.09 levels from Mesa's frames on
    # average) its path once came out 22% behind the plan: the recovery picked a key frame six frames
    # before the end and measured the last step's length on that short baseline. Cutting the shot two
    # frames after a key frame makes the same short last step from Mesa's own frames.
    plan = plan_of("office.json")
    shot = plan.shot("s02")
    poses, intrinsics = cameras_of(shot)
    frames = frames_of(previz, plan, shot)
    path = recover_path(frames, intrinsics)
    full = check_camera_path(relative_cv(poses[list(path.indexes)]), path)
    cut = path.indexes[-2] + 2
    short = check_shot_camera(frames[:cut], poses[:cut], intrinsics[:cut])
    again = check_shot_camera(frames_of(previz, plan, jittered(shot, 0.1, seed=2)), poses, intrinsics)
    checks = {"full": full, f"first {cut} frames": short, "re-rendered 0.1 px off": again}
    per_frame = {name: c.errors.trans_err / c.errors.frames for name, c in checks.items()}
    assert all(c.passed for c in checks.values()), {name: c.reasons for name, c in checks.items()}
    # the bound is 0.13 m a frame; the renders and cuts agree within a tenth of it
    assert max(per_frame.values()) - min(per_frame.values()) < 0.1 * full.trans_bound_m, per_frame


def test_a_reversed_pan_is_flagged(previz):
    plan = plan_of("all_moves.json")
    shot = plan.shot("pan")
    poses, intrinsics = cameras_of(shot)
    check = check_shot_camera(frames_of(previz, plan, shot)[::-1], poses, intrinsics)
    assert not check.passed and "turns the opposite way" in check.reasons[0]


def test_dropped_frames_are_flagged(previz):
    plan = plan_of("all_moves.json")
    shot = plan.shot("pan")
    poses, intrinsics = cameras_of(shot)
    frames = frames_of(previz, plan, shot)
    kept = frames[:12] + frames[28:]  # 16 frames lost mid-move; the last frame held to keep the length
    kept += [kept[-1]] * (len(frames) - len(kept))
    check = check_shot_camera(kept, poses, intrinsics)
    assert not check.passed and "runs ahead of the plan" in check.reasons[0]


def test_a_zoom_where_a_dolly_was_asked_is_flagged(previz):
    import json

    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    # the push starts on its full shot (a camera the script places): it ends 0.7 m from the subject, with
    # the parallax a zoom cannot fake (left to the planner, the push would land on the full shot instead)
    data = json.loads((EXAMPLES / "all_moves.json").read_text(encoding="utf-8"))
    dolly = next(s for s in data["shots"] if s["shot_id"] == "dolly_in")
    dolly["camera"]["distance_m"] = 1.9
    plan = plan_script(validate_script(data))
    shot = plan.shot("dolly_in")
    poses, intrinsics = cameras_of(shot)
    first = frames_of(previz, plan, shot)[0]
    height, width = first.shape[:2]
    zoomed = []
    for i in range(shot.frames):
        scale = 1.0 + 0.6 * i / (shot.frames - 1)
        matrix = cv2.getRotationMatrix2D((width / 2 - 0.5, height / 2 - 0.5), 0.0, scale)
        zoomed.append(cv2.warpAffine(first, matrix, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT))
    check = check_shot_camera(zoomed, poses, intrinsics)
    assert not check.passed and "does not travel (no parallax)" in check.reasons[0]
    assert "zooms x1.6" in check.reasons[0]


def test_triangulation_recovers_points_seen_from_two_cameras():
    """Known points in front of camera a, seen again by b = [R | t] (a 10° pan and a step right),
    come back to within 1e-9 m from their noiseless normalised coordinates; a point's depth sign
    is kept (the cheirality test depends on it)."""
    rng = np.random.default_rng(7)
    points = rng.uniform((-2.0, -1.0, -8.0), (2.0, 1.0, -3.0), size=(40, 3))  # (N, 3) in a, -z forward
    angle = np.radians(10.0)
    rotation = np.array([[np.cos(angle), 0.0, np.sin(angle)], [0.0, 1.0, 0.0], [-np.sin(angle), 0.0, np.cos(angle)]])
    translation = np.array([-0.5, 0.0, 0.1])
    in_b = points @ rotation.T + translation

    def normalised(p):  # pinhole x/z, y/z (the sign of z cancels in the ratio)
        return p[:, :2] / p[:, 2:3]

    recovered = triangulate(normalised(points), normalised(in_b), rotation, translation)
    assert recovered.shape == (40, 3)
    assert np.abs(recovered - points).max() < 1e-9
    assert (recovered[:, 2] < 0).all()


def test_the_essential_matrix_estimators_side_by_side_give_what_they_give_one_after_another():
    """The camera path's robust estimators run on threads; their candidates (scores and matrices, in
    order) must be those of running each in turn, on clean and on outlier-ridden track pairs."""
    import cv2

    from daotai.qc import camera_two_view as two_view

    rng = np.random.default_rng(1)
    steps, expected = [], []
    for case in range(12):
        n = int(rng.integers(30, 300))
        points = rng.uniform(-2, 2, (n, 3)) + np.array([0.0, 0.0, 6.0])  # (n, 3) m, in front of camera a
        rotation, _ = cv2.Rodrigues(rng.normal(scale=0.05, size=3))
        moved = points @ rotation.T + rng.normal(size=3) * 0.2
        xa, xb = points[:, :2] / points[:, 2:], moved[:, :2] / moved[:, 2:]
        xb = xb + rng.normal(scale=0.002, size=xb.shape)
        xb[: n * case // 30] += rng.uniform(-0.2, 0.2, (n * case // 30, 2))  # up to a third wrong
        in_turn = sorted((c for name in two_view.ESSENTIAL_METHODS for c in two_view._essential_by(name, xa, xb, 500.0)),
                         key=lambda c: c[0])
        together = two_view.essential_candidates(xa, xb, 500.0)
        assert len(together) == len(in_turn) >= len(two_view.ESSENTIAL_METHODS)
        for (cost_a, e_a), (cost_b, e_b) in zip(together, in_turn, strict=True):
            assert cost_a == cost_b and np.array_equal(e_a, e_b)
        steps.append((xa, xb, 500.0))
        expected.append(in_turn)
    # A path's steps all at once, on one pool: each step's candidates as that step's alone, whatever the threads.
    for threads in (1, 3, 16):
        pooled = two_view.essential_candidates_of_steps(steps, threads=threads)
        assert len(pooled) == len(expected)
        for got, want in zip(pooled, expected, strict=True):
            assert [c for c, _ in got] == [c for c, _ in want]
            assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(got, want, strict=True))
    assert two_view.essential_candidates_of_steps([]) == []
