"""Camera grammar: rotations, look_at, projection, every sign convention, trajectories."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.errors import PlanError
from daotai.plan.camera_grammar import (
    EASE_MAX_SLOPE,
    EASINGS,
    Move,
    dolly_zoom_fov_end,
    ease,
    frame_motion,
    intrinsics,
    invert_pose,
    look_at,
    make_pose,
    project,
    rot_x,
    rot_y,
    rot_z,
    shake_angles,
    trajectory,
)

W, H = 640, 480
SUBJECT = np.array([0.0, 1.5, 0.0])  # a head at 1.5 m, at the world origin


def camera_at(eye, target=SUBJECT, roll_deg=0.0):
    """Start pose at ``eye`` looking at ``target``."""
    return make_pose(look_at(eye, target, roll_deg=roll_deg), eye)


FRONT = camera_at((0.0, 1.5, 5.0))  # 5 m in front of the subject, looking along -z


def pixel(point, pose, fov=60.0):
    """Pixel (2,) of one world point."""
    uv, depth = project(np.asarray([point], dtype=float), pose, intrinsics(fov, W, H))
    assert depth[0] > 0
    return uv[0]


# ---------------------------------------------------------------- rotations and poses


def test_rotations_are_right_handed():
    np.testing.assert_allclose(rot_x(90) @ [0, 1, 0], [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(rot_y(90) @ [0, 0, 1], [1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(rot_z(90) @ [1, 0, 0], [0, 1, 0], atol=1e-15)
    for rot in (rot_x(37), rot_y(-123), rot_z(200)):
        np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=1e-15)
        assert np.linalg.det(rot) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("eye", "target"),
    [((0, 1.5, 5), (0, 1.5, 0)), ((3, 0.2, -2), (-1, 1.7, 4)), ((0, 10, 0.001), (0, 0, 0))],
)
def test_look_at_points_minus_z_at_target_and_keeps_horizon(eye, target):
    rot = look_at(eye, target)
    forward = -rot[:, 2]
    expected = np.subtract(target, eye) / np.linalg.norm(np.subtract(target, eye))
    np.testing.assert_allclose(forward, expected, atol=1e-12)
    np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=1e-12)
    assert np.linalg.det(rot) == pytest.approx(1.0)
    assert abs(rot[1, 0]) < 1e-12  # camera x stays level with an upright up hint
    assert rot[1, 1] >= 0.0  # and the picture is not upside down


def test_look_at_bird_and_worm_eye_use_a_stable_up():
    bird = look_at((0, 5, 0), (0, 0, 0))
    np.testing.assert_allclose(bird, [[1, 0, 0], [0, 0, 1], [0, -1, 0]], atol=1e-15)
    # picture-up is world -z: what a camera at +z facing -z shows after tilting down 90 deg
    np.testing.assert_allclose(bird, rot_x(-90), atol=1e-15)
    worm = look_at((0, -5, 0), (0, 0, 0))
    np.testing.assert_allclose(worm, rot_x(90), atol=1e-15)
    # Continuity: nearly overhead from the +z side matches the exactly-overhead fallback.
    np.testing.assert_allclose(look_at((0, 5, 1e-7), (0, 0, 0)), bird, atol=1e-7)


def test_look_at_roll_and_bad_input():
    np.testing.assert_allclose(
        look_at((1, 2, 3), (0, 0, 0), roll_deg=15),
        look_at((1, 2, 3), (0, 0, 0)) @ rot_z(-15),
        atol=1e-15,
    )
    with pytest.raises(PlanError, match="must differ"):
        look_at((1, 1, 1), (1, 1, 1))


def test_make_and_invert_pose():
    pose = make_pose(look_at((3, 1, 2), (0, 1, 0)), (3, 1, 2))
    np.testing.assert_allclose(pose @ invert_pose(pose), np.eye(4), atol=1e-12)
    stack = np.stack([pose, FRONT])  # (2, 4, 4)
    np.testing.assert_allclose(invert_pose(stack) @ stack, np.stack([np.eye(4)] * 2), atol=1e-12)
    np.testing.assert_array_equal(pose[3], [0, 0, 0, 1])


# ---------------------------------------------------------------- easing and optics


@pytest.mark.parametrize("name", EASINGS)
def test_easing_endpoints_monotone_and_slope(name):
    assert ease(name, 0.0) == 0.0 and ease(name, 1.0) == 1.0
    assert isinstance(ease(name, 0.3), float)
    grid = np.linspace(0.0, 1.0, 10_001)
    values = ease(name, grid)
    assert np.all(np.diff(values) >= 0.0)
    slope = np.max(np.diff(values) / np.diff(grid))
    # EASE_MAX_SLOPE is the true maximum (tight), which the continuity bounds rely on.
    assert EASE_MAX_SLOPE[name] * 0.999 <= slope <= EASE_MAX_SLOPE[name] + 1e-9


def test_easing_midpoints_and_unknown_name():
    assert ease("ease_in", 0.5) == 0.25
    assert ease("ease_out", 0.5) == 0.75
    assert ease("ease_in_out", 0.5) == 0.5
    assert ease("ease_in_out", 0.25) == pytest.approx(0.15625)
    with pytest.raises(PlanError, match="easing: 'bounce' must be one of"):
        ease("bounce", 0.5)


def test_intrinsics_by_hand():
    expected = [[240, 0, 320], [0, 240, 240], [0, 0, 1]]
    np.testing.assert_allclose(intrinsics(90, 640, 480), expected, atol=1e-12)
    assert intrinsics(60, 1280, 720)[0, 0] == pytest.approx(360 / math.tan(math.radians(30)))
    with pytest.raises(PlanError, match=r"fov: 190 must be in \(1, 170\)"):
        intrinsics(190, 640, 480)


def test_project_against_hand_computed_pixels():
    K = intrinsics(90, 640, 480)  # f = 240
    uv, depth = project(np.array([[1.0, 0.5, -2.0], [0.0, 0.0, 3.0]]), np.eye(4), K)
    np.testing.assert_allclose(uv[0], [320 + 240 * 1 / 2, 240 - 240 * 0.5 / 2])  # (440, 180)
    np.testing.assert_allclose(depth, [2.0, -3.0])
    assert np.all(np.isnan(uv[1]))  # behind the camera: no pixel
    pose = make_pose(look_at((0, 0, 5), (0, 0, 0)), (0, 0, 5))
    uv, depth = project(np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]), pose, K)
    np.testing.assert_allclose(uv, [[320, 240], [320 + 48, 240 - 48]], atol=1e-12)
    np.testing.assert_allclose(depth, [5.0, 5.0])


# ---------------------------------------------------------------- sign conventions


def end_pose(move, start=FRONT, n=25):
    """Last frame's cam_to_world of ``move``."""
    return trajectory(start, move, n, 24.0).cam_to_world[-1]


def test_push_in_moves_one_metre_toward_what_the_camera_sees():
    traj = trajectory(FRONT, Move(motion=(0, 0, -1)), 25, 24.0)
    distances = np.linalg.norm(traj.positions - SUBJECT, axis=1)
    assert distances[0] == pytest.approx(5.0) and distances[-1] == pytest.approx(4.0)
    assert np.all(np.diff(distances) < 0)
    np.testing.assert_allclose(traj.cam_to_world[-1][:3, :3], FRONT[:3, :3])  # no turn


def test_truck_and_pedestal_use_the_start_cameras_axes():
    side = camera_at((5.0, 1.5, 0.0))  # looking along -x: its right is world -z
    np.testing.assert_allclose(end_pose(Move(motion=(1, 0, 0)), side)[:3, 3], [5, 1.5, -1], atol=1e-12)
    np.testing.assert_allclose(end_pose(Move(motion=(0, 1, 0)), side)[:3, 3], [5, 2.5, 0], atol=1e-12)
    np.testing.assert_allclose(end_pose(Move(motion=(1, 0, 0)))[:3, 3], [1, 1.5, 5], atol=1e-12)


def test_positive_pan_moves_the_centre_point_left():
    pan = 10.0
    u, v = pixel(SUBJECT, end_pose(Move(rotate=(pan, 0, 0))))
    focal = intrinsics(60, W, H)[0, 0]
    assert u == pytest.approx(W / 2 - focal * math.tan(math.radians(pan)))
    assert v == pytest.approx(H / 2)


def test_positive_tilt_moves_the_centre_point_down():
    tilt = 10.0
    u, v = pixel(SUBJECT, end_pose(Move(rotate=(0, tilt, 0))))
    focal = intrinsics(60, W, H)[0, 0]
    assert u == pytest.approx(W / 2)
    assert v == pytest.approx(H / 2 + focal * math.tan(math.radians(tilt)))  # v grows downward


def test_positive_roll_turns_the_picture_counter_clockwise():
    roll, offset = 20.0, 100.0  # a point 100 px right of centre
    focal = intrinsics(60, W, H)[0, 0]
    right_point = SUBJECT + np.array([offset * 5.0 / focal, 0.0, 0.0])
    np.testing.assert_allclose(pixel(right_point, FRONT), [W / 2 + offset, H / 2])
    u, v = pixel(right_point, end_pose(Move(rotate=(0, 0, roll))))
    r = math.radians(roll)
    # counter-clockwise on screen: right of centre swings up (smaller v)
    np.testing.assert_allclose([u, v], [W / 2 + offset * math.cos(r), H / 2 - offset * math.sin(r)])


def test_orbit_circles_the_centre_toward_the_cameras_right_keeping_its_pixel():
    off_centre = camera_at((0.0, 1.5, 5.0), target=(0.4, 1.2, 0.0))  # subject not at image centre
    traj = trajectory(off_centre, Move(orbit=90, orbit_center=tuple(SUBJECT)), 31, 24.0)
    expected = pixel(SUBJECT, off_centre)
    assert abs(expected[0] - W / 2) > 10  # the check below is not trivially the centre
    for pose in traj.cam_to_world:
        np.testing.assert_allclose(pixel(SUBJECT, pose), expected, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(traj.positions - SUBJECT, axis=1), 5.0)
    np.testing.assert_allclose(traj.positions[-1], [5.0, 1.5, 0.0], atol=1e-12)  # a quarter turn to +x
    steps = frame_motion(traj)
    assert np.all(steps[:, 0] > 0)  # moves toward its own right
    assert np.all(steps[:, 3] < 0)  # turning left to keep the subject


def test_zoom_changes_fov_monotonically_and_linearly_in_tan():
    traj = trajectory(FRONT, Move(fov=60, fov_end=30), 11, 24.0)
    assert traj.fov[0] == 60 and traj.fov[-1] == 30  # the script's numbers, exactly
    assert np.all(np.diff(traj.fov) < 0)
    halves = np.tan(np.radians(traj.fov) / 2)
    np.testing.assert_allclose(np.diff(halves, 2), 0.0, atol=1e-12)
    widening = trajectory(FRONT, Move(fov=30, fov_end=70, easing="ease_in_out"), 11, 24.0)
    assert np.all(np.diff(widening.fov) > 0)


def test_dolly_zoom_keeps_the_subject_size():
    fov_end = dolly_zoom_fov_end(40.0, 5.0, 2.0)
    assert 5.0 * math.tan(math.radians(20)) == pytest.approx(2.0 * math.tan(math.radians(fov_end) / 2))
    traj = trajectory(FRONT, Move(motion=(0, 0, -3), fov=40, fov_end=fov_end), 25, 24.0)
    edge = SUBJECT + np.array([0.3, 0.0, 0.0])  # a point on the subject's plane, 0.3 m right
    first = pixel(edge, traj.cam_to_world[0], traj.fov[0])
    last = pixel(edge, traj.cam_to_world[-1], traj.fov[-1])
    np.testing.assert_allclose(first, last, atol=1e-9)
    background = SUBJECT + np.array([0.3, 0.0, -10.0])  # while the background recedes
    start_u = pixel(background, traj.cam_to_world[0], traj.fov[0])[0]
    assert pixel(background, traj.cam_to_world[-1], traj.fov[-1])[0] < start_u
    with pytest.raises(PlanError, match="fov_end"):
        dolly_zoom_fov_end(150.0, 5.0, 1.0)


def test_frame_motion_reads_back_the_grammar_per_step():
    n = 9
    # From a level start each rotation alone reads back exactly, with nothing else moving.
    for rotate, column in (((16, 0, 0), 3), ((0, -8, 0), 4), ((0, 0, 4), 5)):
        steps = frame_motion(trajectory(FRONT, Move(rotate=rotate), n, 24.0))
        np.testing.assert_allclose(steps[:, column], rotate[column - 3] / (n - 1), atol=1e-12)
        np.testing.assert_allclose(np.delete(steps, column, axis=1), 0.0, atol=1e-12)
    push = frame_motion(trajectory(FRONT, Move(motion=(0, 0, -1)), n, 24.0))
    np.testing.assert_allclose(push, np.tile([0, 0, -1 / (n - 1), 0, 0, 0], (n - 1, 1)), atol=1e-12)


def test_single_frame_is_the_start_pose():
    traj = trajectory(FRONT, Move(motion=(1, 2, 3), rotate=(30, 20, 10), fov_end=20), 1, 24.0)
    np.testing.assert_allclose(traj.cam_to_world[0], FRONT, atol=1e-12)
    assert traj.fov.tolist() == [60.0] and len(traj) == 1
    assert frame_motion(traj).shape == (0, 6)


def test_trajectory_is_read_only_and_refuses_bad_input():
    traj = trajectory(FRONT, Move(), 3, 24.0)
    with pytest.raises(ValueError):
        traj.cam_to_world[0, 0, 0] = 2.0
    with pytest.raises(PlanError, match="n_frames: 0"):
        trajectory(FRONT, Move(), 0, 24.0)
    with pytest.raises(PlanError, match="orthonormal"):
        trajectory(np.diag([2.0, 1.0, 1.0, 1.0]), Move(), 3, 24.0)
    with pytest.raises(PlanError, match="shake: -1"):
        Move(shake=-1)
    with pytest.raises(PlanError, match=r"fov_end: 0.5 must be in \(1, 170\)"):
        Move(fov_end=0.5)
    with pytest.raises(PlanError, match="motion"):
        Move(motion=(0, 0))
    with pytest.raises(PlanError, match="shake_seed: -3 must be an integer >= 0"):
        Move(shake_seed=-3)


# ---------------------------------------------------------------- shake


def test_shake_is_deterministic_peaks_at_the_amplitude_and_is_smooth():
    a = shake_angles(96, 24.0, 1.5, seed=7)
    np.testing.assert_array_equal(a, shake_angles(96, 24.0, 1.5, seed=7))
    assert not np.allclose(a, shake_angles(96, 24.0, 1.5, seed=8))
    np.testing.assert_allclose(np.max(np.abs(a), axis=0), 1.5, rtol=1e-12)
    for seed in range(50):
        steps = np.abs(np.diff(shake_angles(96, 24.0, 1.0, seed), axis=0))
        # sines of at most 3 Hz move under 0.75 of the peak per 1/24 s; white noise of the
        # same peak moves ~0.7 on average and up to ~2
        assert steps.max() < 0.75 and steps.mean() < 0.3


def test_shake_rotates_only_and_zero_shake_is_exact():
    still = trajectory(FRONT, Move(), 48, 24.0)
    shaken = trajectory(FRONT, Move(shake=2.0, shake_seed=3), 48, 24.0)
    calm = trajectory(FRONT, Move(shake=0.0, shake_seed=3), 48, 24.0)
    np.testing.assert_array_equal(calm.cam_to_world, still.cam_to_world)
    np.testing.assert_allclose(shaken.positions, still.positions, atol=1e-15)
    jitter = shake_angles(48, 24.0, 2.0, 3)
    # From a level start the jitter reads back exactly as pan/tilt/roll about the start camera.
    rel = np.swapaxes(still.cam_to_world[:, :3, :3], 1, 2) @ shaken.cam_to_world[:, :3, :3]
    for i in (0, 17, 47):
        expected = rot_y(-jitter[i, 0]) @ rot_x(jitter[i, 1]) @ rot_z(-jitter[i, 2])
        np.testing.assert_allclose(rel[i], expected, atol=1e-12)


# ---------------------------------------------------------------- properties


def _angle(rel: np.ndarray) -> np.ndarray:
    """Rotation angle in degrees of each (n, 3, 3) rotation."""
    # atan2 of the skew and trace parts stays accurate for tiny angles, unlike arccos.
    skew = np.stack(
        [rel[:, 2, 1] - rel[:, 1, 2], rel[:, 0, 2] - rel[:, 2, 0], rel[:, 1, 0] - rel[:, 0, 1]], axis=1
    )
    return np.degrees(np.arctan2(np.linalg.norm(skew, axis=1), np.trace(rel, axis1=1, axis2=2) - 1.0))


finite = st.floats(-5.0, 5.0, allow_nan=False)
vec3 = st.tuples(finite, finite, finite)


@st.composite
def shots(draw):
    """A random start pose, move, frame count and rate."""
    eye = np.array(draw(vec3))
    target = np.array(draw(vec3))
    if np.linalg.norm(target - eye) < 1e-3:
        target = eye + np.array([0.0, 0.0, -1.0])
    start = make_pose(look_at(eye, target, roll_deg=draw(st.floats(-45, 45))), eye)
    angle = st.floats(-180.0, 180.0)
    move = Move(
        motion=draw(vec3),
        rotate=(draw(angle), draw(angle), draw(angle)),
        orbit=draw(st.floats(-360.0, 360.0)),
        fov=draw(st.floats(10.0, 120.0)),
        fov_end=draw(st.one_of(st.none(), st.floats(10.0, 120.0))),
        easing=draw(st.sampled_from(EASINGS)),
        shake=draw(st.one_of(st.just(0.0), st.floats(0.0, 5.0))),
        orbit_center=tuple(target),
        shake_seed=draw(st.integers(0, 2**32 - 1)),
    )
    return start, move, draw(st.integers(2, 200)), draw(st.sampled_from([12.0, 24.0, 30.0, 60.0]))


@settings(max_examples=150, deadline=None)
@given(shots())
def test_every_frame_is_rigid_and_the_path_is_continuous(shot):
    start, move, n, fps = shot
    traj = trajectory(start, move, n, fps)
    poses = traj.cam_to_world
    assert poses.shape == (n, 4, 4) and traj.fov.shape == (n,)
    rot = poses[:, :3, :3]
    np.testing.assert_allclose(np.swapaxes(rot, 1, 2) @ rot, np.broadcast_to(np.eye(3), rot.shape), atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(rot), 1.0, atol=1e-9)
    np.testing.assert_array_equal(poses[:, 3], np.broadcast_to([0.0, 0.0, 0.0, 1.0], (n, 4)))

    # |dp/de| <= |m| + |orbit| (|p0 - c| + |m|), and e moves at most max_slope / (n - 1) per frame.
    de = EASE_MAX_SLOPE[move.easing] / (n - 1)
    motion = np.linalg.norm(move.motion)
    radius = np.linalg.norm(start[:3, 3] - np.array(move.orbit_center)) + motion
    position_bound = (motion + math.radians(abs(move.orbit)) * radius) * de
    steps = np.linalg.norm(np.diff(traj.positions, axis=0), axis=1)
    assert np.all(steps <= position_bound + 1e-9)

    # Geodesic distance is bi-invariant, so each factor of R(e) adds at most its own change.
    pan, tilt, roll = move.rotate
    jitter_steps = np.abs(np.diff(shake_angles(n, fps, move.shake, move.shake_seed), axis=0)).sum(axis=1)
    turn_bound = (abs(pan) + abs(move.orbit) + abs(tilt) + abs(roll)) * de + jitter_steps
    turns = _angle(np.swapaxes(rot[:-1], 1, 2) @ rot[1:])
    assert np.all(turns <= turn_bound + 1e-9)

    if move.fov_end is not None and move.fov_end != move.fov:
        # the fov moves one way only (steps below float noise, e.g. a 2e-15 zoom, have no direction)
        steps = np.diff(traj.fov)
        steps[np.abs(steps) < 1e-9] = 0.0
        assert np.all(np.sign(steps) * np.sign(move.fov_end - move.fov) >= 0)
