"""Camera-adherence QC on synthetic shots rendered by a tiny test-only ray caster.

The ray caster below is deliberately independent of daotai.qc.camera_adherence: it builds its own rays,
intersects its own ground plane and cylinders and never calls the code under test, so a sign
or axis mistake in the module cannot be mirrored here.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from daotai.errors import EncodeError, PlanError
from daotai.qc.camera_adherence import DEPTH_MAP_CONFIG, CameraAdherence, check_camera
from daotai.qc.camera_planned import expected_flow, focal_px
from daotai.qc.camera_scene import Cylinder, DepthMap, DepthModel, cast_rays
from daotai.qc.camera_similarity import fit_similarity
from daotai.qc.camera_tracking import track_pairs

W, H = 320, 180
FOV = 50.0  # degrees, vertical
EYE_M = 1.6  # camera height above the ground
PITCH = -20.0  # degrees; looking slightly down so most of the frame is textured ground
N = 13  # frames per synthetic shot: 12 frame pairs

# --------------------------------------------------------------------------- test-only renderer


def rot_x(deg: float) -> np.ndarray:
    """Rotation about +x by deg (right-handed)."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=np.float64)


def rot_y(deg: float) -> np.ndarray:
    """Rotation about +y by deg (right-handed)."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=np.float64)


def rot_z(deg: float) -> np.ndarray:
    """Rotation about +z by deg (right-handed)."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.float64)


def cam_matrix(rot: np.ndarray, pos) -> np.ndarray:
    """4x4 cam_to_world from a rotation (columns = camera axes) and a position."""
    cam = np.eye(4)
    cam[:3, :3] = rot
    cam[:3, 3] = pos
    return cam


def shot(pan=0.0, tilt=0.0, roll=0.0, motion=(0.0, 0.0, 0.0), fov=FOV, fov_end=None, n=N,
         start=(0.0, EYE_M, 0.0)):
    """Per-frame cams (n, 4, 4) and fovs (n,) for a linear move, following the conventions."""
    r0 = rot_x(PITCH)
    fov_end = fov if fov_end is None else fov_end
    tan0, tan1 = math.tan(math.radians(fov) / 2), math.tan(math.radians(fov_end) / 2)
    cams, fovs = [], []
    for i in range(n):
        e = i / (n - 1)
        rot = rot_y(-pan * e) @ r0 @ rot_x(tilt * e) @ rot_z(-roll * e)
        pos = np.asarray(start, dtype=np.float64) + r0 @ (np.asarray(motion) * e)
        cams.append(cam_matrix(rot, pos))
        fovs.append(math.degrees(2 * math.atan(tan0 + (tan1 - tan0) * e)))
    return np.stack(cams), np.array(fovs)


_RNG = np.random.default_rng(7)
_TEX = _RNG.random((2, 96, 96))  # two value-noise octaves, values in [0, 1)
_CYL_TEX = _RNG.random((48, 48))
_CELLS = (0.30, 0.08)  # metres per texel of each octave


def _bilinear(tex: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Periodic bilinear lookup of tex at continuous texel coordinates (a, b)."""
    n0, n1 = tex.shape
    a0, b0 = np.floor(a), np.floor(b)
    fa, fb = a - a0, b - b0
    i0, j0 = a0.astype(np.int64) % n0, b0.astype(np.int64) % n1
    i1, j1 = (i0 + 1) % n0, (j0 + 1) % n1
    top = tex[i0, j0] * (1 - fb) + tex[i0, j1] * fb
    bottom = tex[i1, j0] * (1 - fb) + tex[i1, j1] * fb
    return top * (1 - fa) + bottom * fa


def _side_hit(origin, dirs, cx, cz, radius, height):
    """Distance to a vertical cylinder's side (test-only), inf where missed."""
    px, pz = origin[0] - cx, origin[2] - cz
    a = dirs[:, 0] ** 2 + dirs[:, 2] ** 2
    b = 2 * (px * dirs[:, 0] + pz * dirs[:, 2])
    c = px * px + pz * pz - radius * radius
    disc = b * b - 4 * a * c
    t = (-b - np.sqrt(np.maximum(disc, 0))) / (2 * a)
    y = origin[1] + t * dirs[:, 1]
    return np.where((disc > 0) & (t > 0) & (y > 0) & (y < height), t, np.inf)


def render(cam: np.ndarray, fov: float, width: int = W, height: int = H,
           cylinders=()) -> np.ndarray:
    """(H, W, 3) uint8 frame: noise-textured ground y = 0, fog, sky gradient, cylinders."""
    f = (height / 2) / math.tan(math.radians(fov) / 2)
    u = np.arange(width) + 0.5  # rays through pixel centres
    v = np.arange(height) + 0.5
    uu, vv = np.meshgrid(u, v)  # (H, W)
    local = np.stack([(uu - width / 2) / f, -(vv - height / 2) / f, -np.ones_like(uu)], -1)
    dirs = local.reshape(-1, 3) @ cam[:3, :3].T
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)  # (HW, 3) unit world rays
    origin = cam[:3, 3]
    dy = dirs[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(dy < -1e-9, -origin[1] / dy, np.inf)  # (HW,) metres to the ground
    hit = np.isfinite(t)
    tg = np.where(hit, t, 0.0)
    x, z = origin[0] + tg * dirs[:, 0], origin[2] + tg * dirs[:, 2]
    # Fade each octave out where a texel covers too few pixels, so the far ground is smooth
    # instead of aliasing into features that no real camera would track.
    footprint = tg / (f * np.maximum(-dy, 1e-6))  # metres of ground per pixel, along depth
    grey = np.zeros(len(dirs))
    for octave, cell in enumerate(_CELLS):
        fade = np.clip((cell / np.maximum(footprint, 1e-9) - 2.0) / 2.0, 0.0, 1.0)
        grey += (0.5 + fade * (_bilinear(_TEX[octave], x / cell, z / cell) - 0.5)) / len(_CELLS)
    fog = np.exp(-tg / 30.0)
    ground = np.stack([grey * 0.9 + 0.05, grey * 0.8 + 0.1, grey * 0.7 + 0.1], -1)
    haze = np.array([0.75, 0.8, 0.85])
    ground = ground * fog[:, None] + haze * (1 - fog[:, None])
    elevation = np.clip(dy, 0.0, 1.0)[:, None]
    sky = haze * (1 - elevation) + np.array([0.3, 0.5, 0.9]) * elevation
    colour = np.where(hit[:, None], ground, sky)
    nearest = np.where(hit, t, np.inf)
    for (cx, cz, radius, cyl_h) in cylinders:
        tc = _side_hit(origin, dirs, cx, cz, radius, cyl_h)
        front = tc < nearest
        if front.any():
            tt = tc[front]
            px = origin[0] + tt * dirs[front, 0] - cx
            pz = origin[2] + tt * dirs[front, 2] - cz
            py = origin[1] + tt * dirs[front, 1]
            arc = np.arctan2(pz, px) * radius  # metres around the cylinder
            tex = _bilinear(_CYL_TEX, arc / 0.05, py / 0.05)
            colour[front] = np.stack([tex * 0.8 + 0.2, tex * 0.3, tex * 0.3], -1)
            nearest = np.where(front, tc, nearest)
    return (np.clip(colour, 0, 1) * 255 + 0.5).astype(np.uint8).reshape(height, width, 3)


def render_shot(cams, fovs, width=W, height=H, cylinders_per_frame=None):
    """Generator of rendered frames, one per camera."""
    for i, (cam, fov) in enumerate(zip(cams, fovs, strict=True)):
        cyl = () if cylinders_per_frame is None else cylinders_per_frame(i)
        yield render(cam, fov, width, height, cyl)


# --------------------------------------------------------------------------- scene model

def _project(cam, fov, point, width=W, height=H):
    """Project a world point with the conventions (test-only, independent of the module)."""
    local = cam[:3, :3].T @ (np.asarray(point, dtype=np.float64) - cam[:3, 3])
    f = (height / 2) / math.tan(math.radians(fov) / 2)
    return np.array([width / 2 + f * local[0] / -local[2], height / 2 - f * local[1] / -local[2]])


def test_focal_matches_conventions():
    assert focal_px(90.0, 180) == pytest.approx(90.0)
    assert focal_px(60.0, 1080) == pytest.approx(540 / math.tan(math.radians(30)))


def test_expected_flow_static_camera_is_zero():
    cams, fovs = shot()
    uv = np.array([[10.0, 170.0], [160.0, 90.0], [300.0, 5.0]])
    flow = expected_flow(cams[0], fovs[0], cams[0], fovs[0], uv, W, H, DepthModel())
    np.testing.assert_allclose(flow, 0.0, atol=1e-9)


def test_expected_flow_matches_independent_projection_of_ground_points():
    cams, fovs = shot(pan=10.0, tilt=-4.0, roll=3.0, motion=(0.4, 0.2, -0.8), fov_end=42.0)
    a, b = cams[2], cams[9]
    ground = np.array([[0.3, 0.0, -4.0], [-1.2, 0.0, -2.5], [2.0, 0.0, -9.0]])
    uv_a = np.stack([_project(a, fovs[2], p) for p in ground])
    uv_b = np.stack([_project(b, fovs[9], p) for p in ground])
    flow = expected_flow(a, fovs[2], b, fovs[9], uv_a, W, H, DepthModel())
    np.testing.assert_allclose(flow, uv_b - uv_a, atol=1e-6)


def test_pure_rotation_flow_ignores_depth():
    cams, fovs = shot(pan=8.0, tilt=5.0, roll=-4.0, fov_end=45.0)
    uv = np.array([[20.0, 170.0], [160.0, 120.0], [250.0, 10.0]])  # ground and sky
    near = DepthModel(occluders=(Cylinder(0.0, -3.0, 1.0, 3.0),))
    flow_a = expected_flow(cams[0], fovs[0], cams[-1], fovs[-1], uv, W, H, DepthModel())
    flow_b = expected_flow(cams[0], fovs[0], cams[-1], fovs[-1], uv, W, H, near)
    np.testing.assert_allclose(flow_a, flow_b, atol=1e-6)
    assert np.abs(flow_a).max() > 10  # it does move


def test_cylinder_occludes_and_sets_depth_for_truck():
    cam = cam_matrix(np.eye(3), (0.0, 1.0, 0.0))  # level camera looking down -z
    moved = cam_matrix(np.eye(3), (0.1, 1.0, 0.0))  # trucked 10 cm right
    model = DepthModel(occluders=(Cylinder(0.0, -5.0, 0.5, 2.0),))
    centre = np.array([[W / 2, H / 2]])
    t = cast_rays(cam[:3, 3], np.array([[0.0, 0.0, -1.0]]), model)
    assert t[0] == pytest.approx(4.5)  # front surface of the cylinder
    flow = expected_flow(cam, 60.0, moved, 60.0, centre, W, H, model)
    assert flow[0, 0] == pytest.approx(-focal_px(60.0, H) * 0.1 / 4.5, rel=1e-6)
    assert flow[0, 1] == pytest.approx(0.0, abs=1e-9)
    # Without the cylinder the level centre ray never meets the ground: pure rotation, no flow.
    bare = expected_flow(cam, 60.0, moved, 60.0, centre, W, H, DepthModel())
    assert np.abs(bare).max() < 1e-9
    # Looking down onto the cylinder's top (2 m) from 3 m: the cap is 1 m below.
    above = cam_matrix(rot_x(-90.0), (0.0, 3.0, -5.0))
    assert cast_rays(above[:3, 3], np.array([[0.0, -1.0, 0.0]]), model)[0] == pytest.approx(1.0)


def test_far_limit_turns_hits_into_directions():
    origin = np.array([0.0, 1.6, 0.0])
    grazing = np.array([[0.0, -0.01, -1.0]]) / np.linalg.norm([0.0, -0.01, -1.0])
    assert math.isfinite(cast_rays(origin, grazing, DepthModel())[0])
    assert math.isinf(cast_rays(origin, grazing, DepthModel(far_m=50.0))[0])


def test_depth_model_rejects_bad_values():
    with pytest.raises(PlanError, match="radius"):
        Cylinder(0.0, 0.0, -1.0, 1.0)
    with pytest.raises(PlanError, match="far_m"):
        DepthModel(far_m=0.0)


def test_similarity_components_use_camera_signs():
    rng = np.random.default_rng(3)
    centre = np.array([W / 2, H / 2])
    src = rng.uniform([0, 0], [W, H], (200, 2))
    angle = math.radians(-5.0)  # with v pointing down, a negative angle turns the picture CCW
    spin = 1.1 * np.array([[math.cos(angle), -math.sin(angle)],
                           [math.sin(angle), math.cos(angle)]])
    dst = (src - centre) @ spin.T + centre + np.array([-4.0, 3.0])  # content left and down
    dst[:40] += rng.uniform(10, 30, (40, 2)) * rng.choice([-1, 1], (40, 2))  # bad tracks
    fit = fit_similarity(src, dst, 1.0, (W / 2, H / 2))
    assert fit is not None
    motion, inliers = fit
    assert motion.horizontal == pytest.approx(4.0, abs=1e-3)  # view moves right
    assert motion.vertical == pytest.approx(3.0, abs=1e-3)  # view moves up
    assert motion.roll == pytest.approx(5.0, abs=1e-3)  # positive roll: picture turns CCW
    assert motion.scale == pytest.approx(math.log(1.1), abs=1e-5)
    assert inliers[40:].all() and not inliers[:40].any()


# --------------------------------------------------------------------------- shots

CASES = {
    # name: (shot kwargs, component that must move, expected sign)
    "pan_right": (dict(pan=12.0), "horizontal", +1),
    "tilt_up": (dict(tilt=8.0), "vertical", +1),
    "roll": (dict(roll=10.0), "roll", +1),
    "dolly_in": (dict(motion=(0.0, 0.0, -1.2)), "scale", +1),
    "dolly_out": (dict(motion=(0.0, 0.0, 1.2)), "scale", -1),
    "truck_right": (dict(motion=(0.6, 0.0, 0.0)), "horizontal", +1),
    "pedestal_up": (dict(motion=(0.0, 0.5, 0.0)), "vertical", +1),
    "zoom_in": (dict(fov_end=38.0), "scale", +1),
}


def _check(kwargs, **kw) -> CameraAdherence:
    """Render a shot with the given move and check it against its own plan."""
    cams, fovs = shot(**kwargs)
    return check_camera(render_shot(cams, fovs), cams, fovs, DepthModel(), **kw)


def test_static_camera_holds_still():
    report = _check({})
    assert report.ok, report.summary
    assert report.pairs_evaluated == N - 1 and report.pairs_skipped == 0
    assert report.error_mean_px <= 0.5
    for comp in report.components:
        assert comp.direction_ok is None and not comp.unplanned
        assert comp.measured_px < report.significant_px / 2
    assert report.summary.startswith("holds still as planned")


@pytest.mark.parametrize("case", sorted(CASES))
def test_planned_move_is_measured(case):
    kwargs, name, sign = CASES[case]
    report = _check(kwargs)
    comp = report.component(name)
    assert comp.significant, (case, comp)
    assert comp.direction_ok is True, (case, report.summary)
    assert np.sign(comp.expected_total) == sign
    assert np.sign(comp.measured_total) == sign
    assert 0.8 < comp.ratio < 1.25, (case, comp)
    assert report.error_mean_px <= 0.5, (case, report.error_mean_px)
    assert report.ok, (case, report.summary)
    assert "as planned" in report.summary


def test_summary_uses_camera_language():
    pan = _check(CASES["pan_right"][0])
    assert pan.summary.startswith("pans right")
    # A down-tilted camera's picture turns as it pans: checked, but no "roll" in the words.
    assert pan.component("roll").significant and pan.component("roll").cause == "other"
    assert "roll" not in pan.summary
    assert _check(CASES["truck_right"][0]).summary.startswith("trucks right")
    assert _check(CASES["roll"][0]).summary.startswith("rolls clockwise")
    assert "dollies in" in _check(CASES["dolly_in"][0]).summary
    assert "zooms in" in _check(CASES["zoom_in"][0]).summary


def test_wrong_direction_fails():
    planned, fovs = shot(pan=12.0)
    filmed, _ = shot(pan=-12.0)
    report = check_camera(render_shot(filmed, fovs), planned, fovs, DepthModel())
    horizontal = report.component("horizontal")
    assert horizontal.direction_ok is False
    assert horizontal.expected_total > 0 > horizontal.measured_total
    assert not report.ok
    assert report.error_mean_px > 2.0  # about twice the per-frame pan
    assert report.summary.startswith("planned to pan right")
    assert "but pans left" in report.summary


def test_unplanned_motion_fails_a_static_plan():
    planned, fovs = shot()
    filmed, _ = shot(pan=-12.0)
    report = check_camera(render_shot(filmed, fovs), planned, fovs, DepthModel())
    assert report.component("horizontal").unplanned
    assert not report.ok
    assert "unplanned" in report.summary


def test_walking_character_is_excluded_not_blamed():
    cams, fovs = shot(pan=6.0)

    def cylinders(i):  # a character crossing left to right, 0.12 m per frame, 4 m away
        return ((-0.9 + 0.12 * i, -4.0, 0.35, 1.8),)

    def models(i):  # the plan knows where the character stands in each frame
        x, z, r, h = cylinders(i)[0]
        return DepthModel(occluders=(Cylinder(x, z, r, h),))

    frames = render_shot(cams, fovs, cylinders_per_frame=cylinders)
    report = check_camera(frames, cams, fovs, models)
    assert report.ok, report.summary
    assert report.error_mean_px <= 0.5
    assert report.tracks_excluded > 0.3 * (report.tracks_used + report.tracks_excluded)
    assert report.component("horizontal").direction_ok is True


def test_unmodelled_walker_is_dropped_by_ransac():
    cams, fovs = shot(pan=6.0)

    def cylinders(i):  # 0.05 m per frame: within the generous threshold, clearly not background
        return ((-0.9 + 0.05 * i, -4.0, 0.35, 1.8),)

    frames = render_shot(cams, fovs, cylinders_per_frame=cylinders)
    report = check_camera(frames, cams, fovs, DepthModel())  # the plan knows of no walker
    assert report.ok, report.summary
    assert report.error_mean_px <= 0.5
    # The walker carries about 40 % of the tracks; nearly all of them must be dropped.
    assert report.tracks_excluded > 0.3 * (report.tracks_used + report.tracks_excluded)
    assert report.component("horizontal").direction_ok is True


def test_stride_max_pairs_and_json():
    cams, fovs = shot(pan=12.0)
    report = check_camera(render_shot(cams, fovs), cams, fovs, [DepthModel()] * N,
                          stride=2, max_pairs=3)
    assert report.pairs_evaluated == 3 and report.stride == 2
    assert report.frames_seen <= 7  # decoding stopped once three pairs were done
    assert report.component("horizontal").direction_ok is True
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["components"][0]["name"] == "horizontal"
    assert set(data) >= {"ok", "summary", "pairs_evaluated", "error_mean_px", "error_p95_px"}


def test_pairs_tracked_on_threads_are_the_pairs_tracked_one_after_another():
    """The camera check tracks a shot's pairs side by side: each pair from its own two frames, so
    every track is what one thread finds, in the same order; stopping early leaves no thread behind."""
    import threading

    cams, fovs = shot(pan=12.0, motion=(0.3, 0.0, -0.4), n=9)
    frames = list(render_shot(cams, fovs))
    one = list(track_pairs(frames, stride=1))
    for threads in (2, 3, 8):
        many = list(track_pairs(iter(frames), stride=1, threads=threads))
        assert [(p.index_a, p.index_b, p.detected) for p in many] == [(p.index_a, p.index_b, p.detected) for p in one]
        for a, b in zip(one, many, strict=True):
            assert np.array_equal(a.points_uv, b.points_uv) and np.array_equal(a.displacement, b.displacement)
    strided = list(track_pairs(frames, stride=2, threads=3))
    assert [(p.index_a, p.index_b) for p in strided] == [(0, 2), (2, 4), (4, 6), (6, 8)]
    pairs = track_pairs(frames, threads=3)
    next(pairs)
    pairs.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("daotai-tracks")]


def test_wide_frames_are_tracked_downscaled():
    cams, fovs = shot(pan=12.0, n=4)
    width, height = 1280, 720
    frames = list(render_shot(cams, fovs, width, height))
    pair = next(track_pairs(frames[:2]))
    assert pair.analysis_scale == pytest.approx(0.75)
    assert pair.width == width and pair.points_uv[:, 0].max() > 960  # full-resolution px
    report = check_camera(frames, cams, fovs, DepthModel())
    assert report.ok, report.summary
    horizontal = report.component("horizontal")
    assert horizontal.direction_ok is True
    assert horizontal.measured_total == pytest.approx(horizontal.expected_total, rel=0.1)
    assert report.error_mean_px <= 1.0


def test_textureless_frames_are_skipped_and_counted():
    cams, fovs = shot(n=4)
    flat = (np.full((H, W, 3), 128, np.uint8) for _ in range(4))
    report = check_camera(flat, cams, fovs, DepthModel())
    assert report.pairs_evaluated == 0 and report.pairs_skipped == 3
    assert not report.ok
    assert "not checked" in report.summary
    assert json.dumps(report.to_dict(), allow_nan=False)


def test_bad_inputs_raise_daotai_errors():
    cams, fovs = shot(n=3)
    frames = [np.zeros((H, W, 3), np.uint8)] * 4
    with pytest.raises(PlanError, match="more than the plan's 3 frames"):
        check_camera(frames, cams, fovs, DepthModel())
    with pytest.raises(PlanError, match=r"cams: shape"):
        check_camera(frames, cams[:, :3], fovs, DepthModel())
    with pytest.raises(PlanError, match=r"fovs\[1\]"):
        check_camera(frames, cams, np.array([50.0, 180.0, 50.0]), DepthModel())
    with pytest.raises(PlanError, match="depth_models"):
        check_camera(frames, cams, fovs, [DepthModel()] * 2)
    with pytest.raises(EncodeError, match=r"frames\[1\]"):
        check_camera([frames[0], frames[0].astype(np.float32)], cams, fovs, DepthModel())


def test_planner_trajectories_pass():
    """Cross-check with the planner's own trajectories."""
    from daotai.plan.camera_grammar import Move, trajectory
    start = cam_matrix(rot_x(PITCH), (0.0, EYE_M, 0.0))
    moves = {
        "pan": Move(rotate=(12.0, 0.0, 0.0), fov=FOV),
        "dolly": Move(motion=(0.0, 0.0, -1.2), fov=FOV),
        "orbit": Move(orbit=8.0, orbit_center=(0.0, 0.0, -4.4), fov=FOV),
    }
    for name, move in moves.items():
        traj = trajectory(start, move, N, 24.0)
        cams, fovs = np.asarray(traj.cam_to_world), np.asarray(traj.fov)
        report = check_camera(render_shot(cams, fovs), cams, fovs, DepthModel())
        assert report.ok, (name, report.summary)
        assert report.error_mean_px <= 0.5, (name, report.error_mean_px)
        assert any(c.significant for c in report.components), name


# --------------------------------------------------------------------------- depth maps


def render_depth(cam: np.ndarray, fov: float, width: int = W, height: int = H,
                 cylinders=()) -> np.ndarray:
    """(H, W) float32 view-axis depth in metres (inf = sky) of the test scene, test-only."""
    f = (height / 2) / math.tan(math.radians(fov) / 2)
    uu, vv = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)  # (H, W)
    local = np.stack([(uu - width / 2) / f, -(vv - height / 2) / f, -np.ones_like(uu)], -1)
    length = np.linalg.norm(local, axis=-1).reshape(-1)  # (HW,) |ray| per unit view depth
    dirs = local.reshape(-1, 3) @ cam[:3, :3].T / length[:, None]  # (HW, 3) unit world rays
    origin = cam[:3, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(dirs[:, 1] < -1e-9, -origin[1] / dirs[:, 1], np.inf)  # metres along rays
    for (cx, cz, radius, cyl_h) in cylinders:
        t = np.minimum(t, _side_hit(origin, dirs, cx, cz, radius, cyl_h))
    return (t / length).astype(np.float32).reshape(height, width)


def depth_maps(cams, fovs, cylinders_per_frame=None, exclude_cylinders=False):
    """Per-frame DepthMaps of the test scene; exclude marks the cylinders when asked."""
    maps = []
    for i, (cam, fov) in enumerate(zip(cams, fovs, strict=True)):
        cyl = () if cylinders_per_frame is None else cylinders_per_frame(i)
        depth = render_depth(cam, fov, cylinders=cyl)
        exclude = None
        if exclude_cylinders:
            exclude = np.isfinite(depth) & (depth < render_depth(cam, fov) - 1e-4)
        maps.append(DepthMap(depth, exclude))
    return maps


def test_depth_map_flow_matches_independent_projection():
    cams, fovs = shot(pan=10.0, tilt=-4.0, roll=3.0, motion=(0.4, 0.2, -0.8), fov_end=42.0)
    a, b = cams[2], cams[9]
    cylinder = (-0.2, -6.0, 0.4, 1.8)
    dmap = DepthMap(render_depth(a, fovs[2], cylinders=(cylinder,)))
    points = np.array([[0.3, 0.0, -4.0], [-1.2, 0.0, -2.5], [2.0, 0.0, -9.0],
                       [-0.2, 1.0, -5.6]])  # ground, ground, ground, the cylinder's front
    uv_a = np.stack([_project(a, fovs[2], p) for p in points])
    uv_b = np.stack([_project(b, fovs[9], p) for p in points])
    flow = expected_flow(a, fovs[2], b, fovs[9], uv_a, W, H, dmap)
    # Between pixel centres the map is interpolated in inverse depth: exact on the ground
    # plane, close on the curved cylinder.
    np.testing.assert_allclose(flow[:3], (uv_b - uv_a)[:3], atol=1e-3)
    np.testing.assert_allclose(flow[3], (uv_b - uv_a)[3], atol=0.05)
    sky = np.array([[160.0, 2.0]])  # above the horizon: a direction, only rotation moves it
    rotation_only = expected_flow(a, fovs[2], b, fovs[9], sky, W, H, DepthModel(ground_y=-1e9))
    np.testing.assert_allclose(expected_flow(a, fovs[2], b, fovs[9], sky, W, H, dmap),
                               rotation_only, atol=1e-6)


def test_depth_map_from_millimetres_and_validation():
    mm = np.array([[1500, 65535], [0, 20000]], dtype=np.uint16)
    dmap = DepthMap.from_millimetres(mm, np.array([[True, False], [False, False]]))
    assert dmap.depth_m[0, 0] == pytest.approx(1.5) and math.isinf(dmap.depth_m[0, 1])
    assert dmap.depth_m[1, 0] > 0  # 0 mm is clamped, never a division by zero
    with pytest.raises(PlanError, match="uint16"):
        DepthMap.from_millimetres(mm.astype(np.float32))
    with pytest.raises(PlanError, match="depth_m"):
        DepthMap(np.array([[1.0, np.nan], [1.0, 1.0]]))
    with pytest.raises(PlanError, match="exclude"):
        DepthMap(np.ones((4, 4)), np.zeros((2, 2), bool))


# A near post that the plan's geometric model does not know about: its parallax is only right
# when the depth map is used.
POST = (0.6, -2.6, 0.25, 3.0)


@pytest.mark.parametrize("case", ["dolly_in", "truck_right", "pan_right", "pedestal_up"])
def test_depth_map_moves_pass_with_unmodelled_geometry(case):
    kwargs, name, sign = CASES[case]
    cams, fovs = shot(**kwargs)

    def posts(i):
        return (POST,)

    frames = render_shot(cams, fovs, cylinders_per_frame=posts)
    report = check_camera(frames, cams, fovs, depth_maps(cams, fovs, posts),
                          config=DEPTH_MAP_CONFIG)
    comp = report.component(name)
    assert comp.direction_ok is True and np.sign(comp.measured_total) == sign, report.summary
    assert 0.8 < comp.ratio < 1.25, comp
    assert report.error_mean_px <= 0.5, (case, report.error_mean_px)
    assert report.ok, report.summary


def test_depth_map_excludes_edges_only_where_sides_move_apart():
    def posts(i):
        return (POST,)

    results = {}
    for case in ("truck_right", "pan_right"):
        cams, fovs = shot(**CASES[case][0])
        results[case] = check_camera(render_shot(cams, fovs, cylinders_per_frame=posts), cams,
                                     fovs, depth_maps(cams, fovs, posts), config=DEPTH_MAP_CONFIG)
    truck, pan = results["truck_right"], results["pan_right"]
    # A truck separates the post from the ground behind it: its outline tracks are dropped.
    # A pan moves both sides alike, so the same outline costs no tracks.
    truck_share = truck.tracks_excluded / (truck.tracks_used + truck.tracks_excluded)
    pan_share = pan.tracks_excluded / (pan.tracks_used + pan.tracks_excluded)
    assert truck_share > pan_share + 0.02, (truck_share, pan_share)


def test_depth_map_walker_in_exclude_is_not_blamed():
    cams, fovs = shot(pan=6.0)

    def walker(i):  # crossing left to right at 0.12 m per frame, 4 m away
        return ((-0.9 + 0.12 * i, -4.0, 0.35, 1.8),)

    frames = render_shot(cams, fovs, cylinders_per_frame=walker)
    report = check_camera(frames, cams, fovs,
                          depth_maps(cams, fovs, walker, exclude_cylinders=True),
                          config=DEPTH_MAP_CONFIG)
    assert report.ok, report.summary
    assert report.error_mean_px <= 0.5
    # The walker covers about a fifth of the detected corners; they must all be left out.
    assert report.tracks_excluded > 0.15 * (report.tracks_used + report.tracks_excluded)


def test_depth_map_wrong_direction_still_fails():
    planned, fovs = shot(motion=(0.6, 0.0, 0.0))
    filmed, _ = shot(motion=(-0.6, 0.0, 0.0))
    maps = depth_maps(planned, fovs)  # the planned camera's depth, as a renderer would write
    report = check_camera(render_shot(filmed, fovs), planned, fovs, maps, config=DEPTH_MAP_CONFIG)
    horizontal = report.component("horizontal")
    assert horizontal.direction_ok is False
    assert not report.ok
    assert report.error_mean_px > 1.0


def test_depth_map_callable_lookup_and_type_errors():
    cams, fovs = shot(pan=12.0, n=5)
    maps = depth_maps(cams, fovs)
    asked = []

    def lookup(i):
        asked.append(i)
        return maps[i]

    report = check_camera(render_shot(cams, fovs), cams, fovs, lookup, config=DEPTH_MAP_CONFIG)
    assert asked == [0, 1, 2, 3] and report.ok, report.summary
    with pytest.raises(PlanError, match="DepthMap"):
        check_camera(render_shot(cams, fovs), cams, fovs, [maps[0]] * 4 + [None])


def _one_by_one(origin: np.ndarray, dirs: np.ndarray, model: DepthModel) -> np.ndarray:
    """cast_rays as it was written before the solids were cast together: one occluder at a time."""
    from daotai.qc.camera_scene import Solid, cylinder_hits, ground_hits, solid_hits

    t = ground_hits(origin, dirs, model.ground_y)
    for occluder in model.occluders:
        solid = occluder.body if isinstance(occluder, Cylinder) and occluder.body is not None else occluder
        hits = solid_hits(origin, dirs, solid) if isinstance(solid, Solid) else \
            cylinder_hits(origin, dirs, solid, model.ground_y)
        t = np.minimum(t, hits)
    return np.where(t <= model.far_m, t, np.inf)


def test_casting_every_solid_of_a_kind_at_once_gives_the_same_distances_as_one_at_a_time(monkeypatch):
    """A scene's set pieces are intersected together, kind by kind, in blocks; every distance must be
    the one the solid-by-solid cast gives, to the bit (qc.json stays the same), boxes met by rays in
    a face's plane included."""
    import daotai.qc.camera_scene as scene
    from daotai.qc.camera_scene import Solid, solid_hits, solids_hits

    rng = np.random.default_rng(3)
    pieces = []
    for i in range(90):
        kind = ("box", "cylinder", "sphere")[i % 3]
        x, z = rng.uniform(-8, 8, 2)
        pieces.append(Solid.placed(kind, (float(x), 0.0, float(z)), tuple(rng.uniform(0.3, 2.0, 3)),
                                   float(rng.uniform(0, 360))))
    pieces.append(Solid.placed("box", (0.0, 0.0, -3.0), (2.0, 1.0, 2.0), 0.0))  # its top face at y = 1
    people = (Cylinder(1.0, -2.0, 0.3, 1.75), Cylinder(-1.0, -4.0, 0.3, 1.7, body=pieces[1]))
    model = DepthModel(occluders=tuple(pieces) + people)
    origin = np.array([0.0, 1.0, 6.0])  # level with the box's top face: rays along it hit its slab plane
    dirs = rng.normal(size=(400, 3))
    dirs[:, 1] = np.abs(dirs[:, 1]) * -0.3
    dirs[:40, 1] = 0.0
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    expected = _one_by_one(origin, dirs, model)
    assert np.isfinite(expected).sum() > 200 and np.isfinite(expected[:40]).any()
    monkeypatch.setattr(scene, "_CAST_BLOCK_VALUES", 3 * len(dirs) * 7)  # blocks of 7 solids: the seams too
    assert np.array_equal(cast_rays(origin, dirs, DepthModel(occluders=model.occluders)), expected)
    monkeypatch.undo()
    assert np.array_equal(cast_rays(origin, dirs, model), expected)
    rows = solids_hits(origin, dirs, pieces)
    assert rows.shape == (len(pieces), len(dirs))
    for row, piece in zip(rows, pieces, strict=True):
        assert np.array_equal(row, solid_hits(origin, dirs, piece))


def _visibility_one_by_one(cam, fov, width, height, subject, others):
    """subject_visibility's geometric case as it was written before solids were culled and cast together."""
    from daotai.plan import geometry
    from daotai.qc.camera_scene import Solid, cylinder_hits, solid_hits
    from daotai.qc.visibility import _subject_grid

    uv = _subject_grid(width, height, 4)
    dirs = geometry.camera_rays(uv, geometry.intrinsics_from_fov(fov, width, height)) @ cam[:3, :3].T
    origin = cam[:3, 3]
    t_subject = cylinder_hits(origin, dirs, subject, 0.0)
    region = np.isfinite(t_subject)
    dirs, t_subject = dirs[region], t_subject[region]
    nearest, who = np.full(len(dirs), np.inf), np.full(len(dirs), len(others))
    for i, (_, occluder) in enumerate(others):
        t = solid_hits(origin, dirs, occluder) if isinstance(occluder, Solid) else \
            cylinder_hits(origin, dirs, occluder, 0.0)
        closer = t < nearest
        nearest, who = np.where(closer, t, nearest), np.where(closer, i, who)
    covered = nearest < t_subject
    blockers = [others[i][0] for i in who[covered]]
    blocker = min(set(blockers), key=lambda name: (-blockers.count(name), name)) if blockers else None
    return int(region.sum()), int((~covered).sum()), int(covered.sum()), blocker


@pytest.mark.parametrize("seed", range(6))
def test_leaving_out_solids_beyond_the_subject_or_off_its_rays_changes_no_visibility(seed):
    """The subject check leaves out set pieces that cannot come between the lens and the subject (by
    their bounding spheres); what it reports must be what testing every piece gives."""
    from daotai.plan.camera_grammar import look_at
    from daotai.qc.camera_scene import Solid, solids_within_reach
    from daotai.qc.visibility import subject_visibility

    rng = np.random.default_rng(seed)
    subject = Cylinder(0.0, 0.0, 0.35, 1.75)
    others = []
    for i in range(120):
        kind = ("box", "cylinder", "sphere")[i % 3]
        x, z = rng.uniform(-12, 12, 2)
        size = tuple(float(v) for v in rng.uniform(0.2, 1.5, 3))
        others.append((f"piece{i}", Solid.placed(kind, (float(x), 0.0, float(z)), size, float(rng.uniform(0, 360)))))
    others.append(("bo", Cylinder(float(rng.uniform(-1, 1)), 2.0, 0.3, 1.7)))
    eye = np.array([rng.uniform(-2, 2), rng.uniform(0.8, 2.5), rng.uniform(4.5, 7.0)])
    for i in range(4):  # pieces between the lens and the subject, some of them hiding part of it
        x, z = eye[[0, 2]] * rng.uniform(0.2, 0.8) + rng.uniform(-0.6, 0.6, 2)
        others.append((f"near{i}", Solid.placed(("box", "sphere")[i % 2], (float(x), 0.0, float(z)),
                                                (0.4, float(rng.uniform(0.5, 1.4)), 0.4), 0.0)))
    cam = np.eye(4)
    cam[:3, :3], cam[:3, 3] = look_at(eye, (0.0, 1.0, 0.0)), eye
    seen = subject_visibility(cam, 40.0, 320, 180, subject, others)
    assert (seen.region, seen.visible, seen.covered, seen.blocker) == \
        _visibility_one_by_one(cam, 40.0, 320, 180, subject, others)
    assert seen.covered > 0
    solids = [o for _, o in others if isinstance(o, Solid)]
    kept = solids_within_reach(cam[:3, 3], np.array([[0.0, 0.0, -1.0]]) @ cam[:3, :3].T, solids, 8.0)
    assert 0 < kept.sum() < len(solids)  # the culling does leave pieces out here
