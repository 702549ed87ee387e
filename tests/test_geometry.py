"""daotai.plan.geometry: the camera convention in one place, and the modules that keep variants of it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.plan import geometry as g
from daotai.plan.camera_grammar import intrinsics as plan_intrinsics
from daotai.plan.camera_grammar import look_at, make_pose, rot_x, rot_y, rot_z
from daotai.qc import camera_planned
from daotai.render.previz import projection as previz_projection
from daotai.render.previz.scene import RenderSettings

W, H = 640, 360

angles = st.floats(min_value=-180.0, max_value=180.0, allow_nan=False)
coords = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False)
fovs = st.floats(min_value=5.0, max_value=150.0, allow_nan=False)
sizes = st.tuples(st.integers(min_value=2, max_value=4096), st.integers(min_value=2, max_value=4096))


@st.composite
def poses(draw) -> np.ndarray:
    """A rigid cam_to_world (4, 4): yaw, pitch, roll anywhere, centre within 50 m."""
    rotation = rot_y(draw(angles)) @ rot_x(draw(angles)) @ rot_z(draw(angles))
    return make_pose(rotation, (draw(coords), draw(coords), draw(coords)))


def pixels_and_depths(n: int, width: int, height: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` pixel positions inside the image (N, 2) and depths in [NEAR_M, FAR_M] (N,)."""
    rng = np.random.default_rng(seed)
    uv = rng.uniform(0.0, 1.0, size=(n, 2)) * (width, height)
    depth = np.exp(rng.uniform(math.log(g.NEAR_M), math.log(g.FAR_M), size=n))
    return uv, depth


# ---------------------------------------------------------------- constants and intrinsics


def test_clip_planes_are_the_renderers():
    assert (g.NEAR_M, g.FAR_M) == (0.05, 500.0)
    settings_ = RenderSettings(64, 36)
    assert (settings_.near, settings_.far) == (g.NEAR_M, g.FAR_M)


def test_intrinsics_follow_the_conventions():
    fx, fy, cx, cy = g.intrinsics_from_fov(90.0, 320, 180)
    assert (fx, fy, cx, cy) == pytest.approx((90.0, 90.0, 160.0, 90.0))
    assert g.intrinsics_from_fov(60.0, 1920, 1080)[1] == pytest.approx(540.0 / math.tan(math.radians(30.0)))
    K = g.intrinsics_matrix((fx, fy, cx, cy))
    assert np.array_equal(K, [[fx, 0, cx], [0, fy, cy], [0, 0, 1]])
    assert g.intrinsics_from_matrix(K) == (fx, fy, cx, cy)
    # the planner's K and the previz renderer's tuple are this one
    assert np.array_equal(plan_intrinsics(47.0, W, H), g.intrinsics_matrix(g.intrinsics_from_fov(47.0, W, H)))
    assert previz_projection.intrinsics(47.0, W, H) == g.intrinsics_from_fov(47.0, W, H)
    assert camera_planned.focal_px(47.0, H) == g.focal_from_fov(47.0, H)


@settings(max_examples=200, deadline=None)
@given(fov=st.floats(min_value=1.001, max_value=169.999, allow_nan=False), size=sizes)
def test_intrinsics_fov_round_trip(fov, size):
    width, height = size
    intr = g.intrinsics_from_fov(fov, width, height)
    assert g.fov_from_intrinsics(intr, height) == pytest.approx(fov, rel=1e-12, abs=1e-12)
    assert g.fov_from_focal(g.focal_from_fov(fov, width), width) == pytest.approx(fov, rel=1e-12, abs=1e-12)
    normalized = g.normalized_intrinsics(intr, width, height)
    assert normalized[2:] == pytest.approx((0.5, 0.5))
    assert normalized[1] == pytest.approx(0.5 / math.tan(math.radians(fov) / 2.0))
    assert g.pixel_intrinsics(normalized, width, height) == pytest.approx(intr, rel=1e-14)


def test_normalized_intrinsics_are_resolution_free():
    a = g.normalized_intrinsics(g.intrinsics_from_fov(50.0, 1280, 720), 1280, 720)
    b = g.normalized_intrinsics(g.intrinsics_from_fov(50.0, 832, 468), 832, 468)
    assert a == pytest.approx(b, rel=1e-14)
    assert a[0] == pytest.approx(a[1] * 720 / 1280)  # square pixels: fx / W = (fy / H) * H / W


# ---------------------------------------------------------------- projection


def test_point_straight_ahead_projects_to_the_centre():
    intr = g.intrinsics_from_fov(60.0, W, H)
    uv, depth = g.project(np.array([[0.0, 0.0, -2.0]]), np.eye(4), intr)  # identity camera looks down -z
    assert uv.tolist() == [[W / 2, H / 2]] and depth.tolist() == [2.0]
    # the same from an arbitrary camera: 2 m along its view axis
    eye = np.array([1.0, 1.6, 4.0])
    pose = make_pose(look_at(eye, (-0.5, 1.0, 0.0), roll_deg=12.0), eye)
    ahead = eye - 2.0 * pose[:3, 2]
    uv, depth = g.project(ahead[None], pose, intr)
    assert np.allclose(uv, [[W / 2, H / 2]], atol=1e-9) and depth == pytest.approx([2.0])


def test_axes_signs_and_behind():
    intr = g.intrinsics_from_fov(60.0, W, H)
    uv, depth = g.project(np.array([[1.0, 0.0, -2.0], [0.0, 1.0, -2.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]),
                          np.eye(4), intr)
    assert uv[0, 0] > W / 2 and uv[0, 1] == pytest.approx(H / 2)  # +x is right
    assert uv[1, 1] < H / 2 and uv[1, 0] == pytest.approx(W / 2)  # +y is up: smaller v
    assert depth[2] == -2.0 and np.all(np.isnan(uv[2:]))  # behind / on the camera: no pixel


def test_pixel_centres_convention():
    centres = g.pixel_centres(4, 3)
    assert centres.shape == (3, 4, 2)
    assert centres[0, 0].tolist() == [0.5, 0.5] and centres[2, 3].tolist() == [3.5, 2.5]
    # with odd sizes the middle pixel's centre is the principal point
    _, _, cx, cy = g.intrinsics_from_fov(50.0, 5, 3)
    assert g.pixel_centres(5, 3)[1, 2].tolist() == [cx, cy]


@settings(max_examples=150, deadline=None)
@given(pose=poses(), fov=fovs, size=sizes, seed=st.integers(0, 2**32 - 1))
def test_project_unproject_round_trip(pose, fov, size, seed):
    width, height = size
    intr = g.intrinsics_from_fov(fov, width, height)
    uv, depth = pixels_and_depths(64, width, height, seed)
    world = g.unproject(uv, depth, pose, intr)
    uv2, depth2 = g.project(world, pose, intr)
    assert np.allclose(depth2, depth, rtol=1e-9)
    assert np.allclose(uv2, uv, atol=1e-6 * max(width, height))
    # and the other way: world points in front of the camera
    back = g.project(g.unproject(uv2, depth2, pose, intr), pose, intr)
    assert np.allclose(back[0], uv2, atol=1e-6 * max(width, height))


@settings(max_examples=100, deadline=None)
@given(pose=poses())
def test_world_camera_transforms_are_inverse(pose):
    view = g.world_to_camera(pose)
    assert np.allclose(view @ pose, np.eye(4), atol=1e-12)
    assert np.allclose(g.camera_to_world(view), pose, atol=1e-12)
    p = np.array([[1.0, -2.0, 3.0], [0.0, 0.5, -7.0]])
    assert np.allclose(g.points_camera_to_world(g.points_world_to_camera(p, pose), pose), p, atol=1e-12)
    # the camera centre is the camera-space origin
    assert np.allclose(g.points_world_to_camera(pose[:3, 3], pose), 0.0, atol=1e-12)


# ---------------------------------------------------------------- OpenGL <-> OpenCV


@settings(max_examples=100, deadline=None)
@given(pose=poses())
def test_gl_cv_conversion(pose):
    assert np.array_equal(g.cv_to_gl(g.gl_to_cv(pose)), pose)
    assert np.array_equal(g.gl_to_cv(g.gl_to_cv(pose)), pose)
    cv = g.gl_to_cv(pose)
    assert np.array_equal(cv[:, 0], pose[:, 0]) and np.array_equal(cv[:, 3], pose[:, 3])
    assert np.array_equal(cv[:3, 1:3], -pose[:3, 1:3])
    view = g.world_to_camera(pose)
    assert np.allclose(g.gl_to_cv_view(view), g.world_to_camera(cv), atol=1e-12)
    assert np.array_equal(g.gl_to_cv_view(g.gl_to_cv_view(view)), view)


def test_opencv_pinhole_agrees_with_project():
    # OpenCV's model: camera-space (x, y down, z forward), pixel = K (x/z, y/z, 1)
    eye = np.array([2.0, 1.2, 3.0])
    pose = make_pose(look_at(eye, (0.0, 1.0, 0.0), roll_deg=-7.0), eye)
    intr = g.intrinsics_from_fov(55.0, W, H)
    pts = np.array([[0.3, 1.1, 0.2], [-0.5, 0.0, -1.0], [1.0, 2.0, 0.5]])
    cam_cv = g.transform_points(g.world_to_camera(g.gl_to_cv(pose)), pts)
    assert np.all(cam_cv[:, 2] > 0)
    homog = cam_cv @ g.intrinsics_matrix(intr).T
    uv, depth = g.project(pts, pose, intr)
    assert np.allclose(homog[:, :2] / homog[:, 2:], uv, atol=1e-9)
    assert np.allclose(cam_cv[:, 2], depth, atol=1e-12)


def test_gl_projection_agrees_with_project_and_depth_linearisation():
    eye = np.array([1.0, 2.0, 3.0])
    pose = make_pose(look_at(eye, (0.0, 0.5, -2.0), roll_deg=5.0), eye)
    fov = 50.0
    proj = g.gl_projection(fov, W / H, flip_y=True)
    pts = np.array([[0.0, 1.0, -2.0], [2.0, 0.5, -4.0], [-3.0, 0.0, -30.0]])
    clip = (proj @ g.world_to_camera(pose) @ np.c_[pts, np.ones(3)].T).T  # (N, 4)
    ndc = clip[:, :3] / clip[:, 3:]
    window = np.c_[(ndc[:, 0] + 1) / 2 * W, (ndc[:, 1] + 1) / 2 * H]  # flipped: row 0 = image top
    uv, depth = g.project(pts, pose, g.intrinsics_from_fov(fov, W, H))
    assert np.allclose(window, uv, atol=1e-9)
    assert np.allclose(clip[:, 3], depth, atol=1e-12)  # w_clip is the view-axis depth
    window_z = 0.5 * ndc[:, 2] + 0.5
    assert np.allclose(g.window_depth(depth), window_z, atol=1e-12)
    assert np.allclose(g.linear_depth(window_z), depth, rtol=1e-9)
    assert g.window_depth(g.NEAR_M) == pytest.approx(0.0, abs=1e-12)
    assert g.window_depth(g.FAR_M) == pytest.approx(1.0, abs=1e-12)
    # without the flip the picture is upright in GL's bottom-up window rows
    assert np.array_equal(g.gl_projection(fov, W / H)[1], -proj[1])
    assert np.array_equal(previz_projection.projection_matrix(fov, W / H, g.NEAR_M, g.FAR_M), proj)


@settings(max_examples=100, deadline=None)
@given(t=st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
       near=st.sampled_from([0.01, 0.05, 0.1]), far=st.sampled_from([100.0, 500.0, 1000.0]))
def test_depth_linearisation_round_trip(t, near, far):
    depth = near * (far / near) ** t  # between the clip planes
    z = g.window_depth(depth, near, far)
    assert -1e-12 <= z <= 1.0 + 1e-12
    assert g.linear_depth(z, near, far) == pytest.approx(depth, rel=1e-6)


# ---------------------------------------------------------------- rays and Plücker


def test_rays_and_plucker_shapes_and_centre():
    eye = np.array([3.0, 1.5, 4.0])
    pose = make_pose(look_at(eye, (0.0, 0.0, 0.0), roll_deg=9.0), eye)  # looks at the world origin
    width, height = 9, 5  # odd: the middle pixel's ray is the view axis
    intr = g.intrinsics_from_fov(40.0, width, height)
    dirs = g.ray_directions(pose, intr, width, height)
    pl = g.plucker(pose, intr, width, height)
    assert dirs.shape == (height, width, 3) and pl.shape == (height, width, 6)
    assert np.array_equal(pl[..., 3:], dirs)
    assert np.allclose(dirs[height // 2, width // 2], -pose[:3, 2], atol=1e-12)
    # the view axis passes through the world origin: its moment is zero
    assert np.allclose(pl[height // 2, width // 2, :3], 0.0, atol=1e-12)
    # a camera at the world origin: every ray passes through it
    at_origin = make_pose(pose[:3, :3], (0.0, 0.0, 0.0))
    assert np.allclose(g.plucker(at_origin, intr, width, height)[..., :3], 0.0)


@settings(max_examples=100, deadline=None)
@given(pose=poses(), fov=fovs, size=st.tuples(st.integers(1, 48), st.integers(1, 48)))
def test_plucker_properties(pose, fov, size):
    width, height = size
    intr = g.intrinsics_from_fov(fov, width, height)
    pl = g.plucker(pose, intr, width, height)
    moment, d = pl[..., :3], pl[..., 3:]
    assert np.allclose(np.linalg.norm(d, axis=-1), 1.0, atol=1e-12)
    scale = max(1.0, float(np.linalg.norm(pose[:3, 3])))
    assert np.allclose(np.sum(moment * d, axis=-1), 0.0, atol=1e-12 * scale)  # moment ⟂ direction
    # the moment is the same from any point of the ray: here the point at depth 3 m
    far_points = g.unproject(g.pixel_centres(width, height).reshape(-1, 2), 3.0, pose, intr)
    assert np.allclose(np.cross(far_points, d.reshape(-1, 3)), moment.reshape(-1, 3), atol=1e-9 * scale)
    # each ray goes through its pixel centre
    uv, depth = g.project(pose[:3, 3] + d.reshape(-1, 3), pose, intr)
    assert np.allclose(uv, g.pixel_centres(width, height).reshape(-1, 2), atol=1e-7 * max(width, height))
    assert np.all(depth > 0)


# ---------------------------------------------------------------- modules that keep a variant


def test_previz_project_wrapper_keeps_its_sign():
    # previz.projection.project returns camera-space z (negative in front), geometry positive depth
    eye = np.array([0.0, 1.5, 5.0])
    pose = make_pose(look_at(eye, (0.0, 1.0, 0.0)), eye)
    pts = np.array([[0.0, 1.0, 0.0], [1.0, 2.0, -3.0]])
    uv, z = previz_projection.project(pose, 45.0, W, H, pts)
    uv2, depth = g.project(pts, pose, g.intrinsics_from_fov(45.0, W, H))
    assert np.array_equal(uv, uv2) and np.array_equal(z, -depth)


@settings(max_examples=150, deadline=None)
@given(pose=poses(), fov=fovs, size=sizes, seed=st.integers(0, 2**32 - 1))
def test_qc_homogeneous_project_agrees_with_geometry(pose, fov, size, seed):
    # qc.camera_planned.project_homogeneous: world points with w = 1 are geometry.project; w = 0 (directions)
    # project where a point one unit along the direction from the camera centre does.
    width, height = size
    intr = g.intrinsics_from_fov(fov, width, height)
    uv, depth = pixels_and_depths(32, width, height, seed)
    points = g.unproject(uv, depth, pose, intr)
    tol = 1e-6 * max(width, height)
    expected, _ = g.project(points, pose, intr)
    got = camera_planned.project_homogeneous(pose, fov, points, np.ones(len(points)), width, height)
    assert np.allclose(got, expected, atol=tol)
    directions = points - pose[:3, 3]
    got_dirs = camera_planned.project_homogeneous(pose, fov, directions, np.zeros(len(points)), width, height)
    assert np.allclose(got_dirs, expected, atol=tol)
    # behind the camera: NaN, like geometry
    behind = pose[:3, 3] + pose[:3, 2] * 2.0  # 2 m behind, along +z
    assert np.all(np.isnan(camera_planned.project_homogeneous(pose, fov, behind[None], np.ones(1), width, height)))


@settings(max_examples=150, deadline=None)
@given(pose=poses(), fov=fovs, size=sizes, seed=st.integers(0, 2**32 - 1))
def test_qc_inverse_depth_unproject_agrees_with_geometry(pose, fov, size, seed):
    # qc.camera_planned.unproject_homogeneous gives homogeneous (X, w = 1 / depth); X / w is geometry.unproject
    width, height = size
    intr = g.intrinsics_from_fov(fov, width, height)
    uv, depth = pixels_and_depths(32, width, height, seed)
    world, w = camera_planned.unproject_homogeneous(pose, fov, uv, 1.0 / depth, width, height)
    assert np.allclose(world / w[:, None], g.unproject(uv, depth, pose, intr), rtol=1e-9, atol=1e-9)
    # the sky (inverse depth 0) is the ray's direction, scaled to camera z = -1
    sky, w0 = camera_planned.unproject_homogeneous(pose, fov, uv, np.zeros(len(uv)), width, height)
    assert np.all(w0 == 0.0)
    rays = g.camera_rays(uv, intr) @ pose[:3, :3].T
    assert np.allclose(sky / np.linalg.norm(sky, axis=1, keepdims=True), rays, atol=1e-12)
