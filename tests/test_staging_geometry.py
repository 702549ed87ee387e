"""Staging geometry off the face-to-face case, from the numbers alone (no render): over-the-shoulder,
two-shots, singles and masters of people standing anywhere on the set, facing each other or not;
the 180 degree line; and the symmetries the rules must keep (moving the whole set moves every
camera with it, mirroring the set left to right mirrors every camera). Distances and angles are the
numbers the rules state (a single 35 degrees off the line, an over-the-shoulder 0.55 m behind and
0.28 m beside the near person at a 1.75 m scale, the lens at 91% of their height, a partner within
50 degrees of the subject's facing)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from daotai.plan import geometry
from daotai.plan.framing import FRAMING_RULES, REFERENCE_HEIGHT_M
from daotai.plan.staging import (
    AUDIENCE,
    Body,
    CameraPlace,
    hidden_by,
    line_of_action,
    partner_of,
    place_explicitly,
    stage_camera,
    yaw_toward,
)

ASPECT = 16 / 9


def eye_of(placement) -> np.ndarray:
    return np.asarray(placement.cam_to_world)[:3, 3]


def view_of(placement) -> np.ndarray:
    return -np.asarray(placement.cam_to_world)[:3, 2]


def ground(v) -> np.ndarray:
    return np.asarray(v, np.float64)[[0, 2]]


def side_of_line(a: Body, b: Body, point_xz) -> float:
    """Signed area: > 0 on one side of the line a→b, < 0 on the other."""
    d = np.subtract(b.xz, a.xz)
    e = np.subtract(point_xz, a.xz)
    return float(d[0] * e[1] - d[1] * e[0])


def in_frame(placement, fov: float, point) -> bool:
    w, h = 320, 180
    intr = geometry.intrinsics_from_fov(fov, w, h)
    uv, depth = geometry.project(np.array([point], np.float64), np.asarray(placement.cam_to_world), intr)
    return bool(depth[0] > 0 and 0 <= uv[0, 0] <= w and 0 <= uv[0, 1] <= h)


def head(body: Body) -> tuple[float, float, float]:
    return (body.xz[0], 0.93 * body.height, body.xz[1])


# A pair on a diagonal, away from the origin: ann nearer the audience side at the left.
ANN_XZ, BO_XZ = (1.0, -2.0), (2.6, -0.8)
PAIRS = {
    "face_to_face": (yaw_toward(ANN_XZ, BO_XZ), yaw_toward(BO_XZ, ANN_XZ)),
    "both_to_audience": (0.0, 0.0),
    "back_to_back": (yaw_toward(BO_XZ, ANN_XZ), yaw_toward(ANN_XZ, BO_XZ)),
    "one_turned_away": (yaw_toward(ANN_XZ, BO_XZ), 90.0 + yaw_toward(ANN_XZ, BO_XZ)),
}


def pair(facings, ann_height=1.65, bo_height=1.85) -> tuple[Body, Body]:
    return Body("ann", ANN_XZ, ann_height, facings[0]), Body("bo", BO_XZ, bo_height, facings[1])


# ---------------------------------------------------------------- over the shoulder


@pytest.mark.parametrize("facing", sorted(PAIRS))
@pytest.mark.parametrize("subject_first", [True, False])
def test_over_the_shoulder_stands_behind_the_near_shoulder_on_the_audience_side(facing, subject_first):
    ann, bo = pair(PAIRS[facing])
    subject, near = (ann, bo) if subject_first else (bo, ann)
    placement, fov, partner = stage_camera("over_the_shoulder", "eye_level", 60.0, ASPECT, subject, (near,),
                                           fov_given=False)
    assert partner == near
    eye = eye_of(placement)
    line = np.subtract(near.xz, subject.xz)
    gap = float(np.linalg.norm(line))
    unit = line / gap
    rel = ground(eye) - np.array(subject.xz)
    along, lateral = float(rel @ unit), float(rel @ np.array([-unit[1], unit[0]]))
    scale = near.height / REFERENCE_HEIGHT_M
    # behind the near person, by the set-back, and off their axis by the lateral offset (the fov is
    # rounded to 1/1000 degree, so the lens may stand a hair further back along the same direction)
    assert along == pytest.approx(gap + 0.55 * scale, rel=1e-3)
    assert abs(lateral) / along == pytest.approx(0.28 * scale / (gap + 0.55 * scale), rel=1e-9)
    # on the audience side of the line (the side every camera of the pair keeps to)
    _, _, normal = line_of_action((ann, bo))
    assert float((ground(eye) - np.array(near.xz)) @ normal) > 0
    assert normal @ np.array(AUDIENCE) > 0
    # the lens no lower than the near person's eye line (level with the aim when that is higher),
    # looking at the subject's aim point
    aim = np.array(placement.aim_point)
    assert eye[1] == pytest.approx(max(0.91 * near.height, aim[1]), abs=1e-9)
    assert aim == pytest.approx([subject.xz[0], subject.height * FRAMING_RULES["over_the_shoulder"].aim_fraction,
                                 subject.xz[1]])
    assert view_of(placement) == pytest.approx((aim - eye) / np.linalg.norm(aim - eye), abs=1e-9)
    # the lens is chosen so the subject fills the frame as the framing asks
    visible = FRAMING_RULES["over_the_shoulder"].visible_m * subject.height / REFERENCE_HEIGHT_M
    reach = math.hypot(gap + 0.55 * scale, 0.28 * scale)
    assert fov == pytest.approx(math.degrees(2 * math.atan(visible / (2 * reach))), abs=1e-3)
    assert in_frame(placement, fov, head(subject))


@pytest.mark.parametrize("facing", sorted(PAIRS))
def test_both_over_the_shoulders_and_the_two_shot_keep_one_side_of_the_line(facing):
    ann, bo = pair(PAIRS[facing])
    sides = []
    for framing, subject, other in (("over_the_shoulder", ann, bo), ("over_the_shoulder", bo, ann),
                                    ("two_shot", ann, bo), ("two_shot", bo, ann)):
        placement, _, _ = stage_camera(framing, "eye_level", 50.0, ASPECT, subject, (other,))
        sides.append(np.sign(side_of_line(ann, bo, ground(eye_of(placement)))))
    assert len(set(sides)) == 1 and sides[0] != 0, sides


def test_an_over_the_shoulder_from_a_high_angle_keeps_its_elevation_and_is_not_lifted():
    ann, bo = pair(PAIRS["face_to_face"])
    level, _, _ = stage_camera("over_the_shoulder", "eye_level", 40.0, ASPECT, ann, (bo,))
    high, _, _ = stage_camera("over_the_shoulder", "high", 40.0, ASPECT, ann, (bo,))
    aim = np.array(high.aim_point)
    rise = eye_of(high)[1] - aim[1]
    assert math.degrees(math.asin(rise / np.linalg.norm(eye_of(high) - aim))) == pytest.approx(25.0, abs=1e-6)
    assert eye_of(level)[1] > aim[1]  # eye level is lifted to the near person's eye line


# ---------------------------------------------------------------- two-shots and masters


@pytest.mark.parametrize("facing", sorted(PAIRS))
def test_a_two_shot_is_square_to_the_pair_and_holds_both(facing):
    ann, bo = pair(PAIRS[facing])
    placement, fov, partner = stage_camera("two_shot", "eye_level", 50.0, ASPECT, bo, (ann,))
    assert partner == ann and fov == 50.0
    centre = (np.array(ann.xz) + np.array(bo.xz)) / 2
    _, line, normal = line_of_action((ann, bo))
    offset = ground(eye_of(placement)) - centre
    assert abs(float(offset @ line)) < 1e-9  # square to the line, centred between them
    assert float(offset @ normal) > 0  # on the audience side
    for body in (ann, bo):
        assert in_frame(placement, fov, head(body)), body.id


def test_a_master_of_three_frames_everyone_from_where_they_face():
    # three people in a row along a diagonal, all facing the same way (away from the audience)
    group = tuple(Body(n, (float(i), -1.0 - 0.5 * i), 1.75, 150.0) for i, n in enumerate("abc"))
    placement, fov, _ = stage_camera("wide", "eye_level", 50.0, ASPECT, group[1], (group[0], group[2]))
    for body in group:
        assert in_frame(placement, fov, head(body)), body.id
    facing = np.array([math.sin(math.radians(150.0)), math.cos(math.radians(150.0))])
    centre = np.mean([b.xz for b in group], axis=0)
    to_camera = ground(eye_of(placement)) - centre
    assert float(to_camera @ facing) / np.linalg.norm(to_camera) > 0.99  # seen from where they face


# ---------------------------------------------------------------- singles


def test_a_single_in_a_dialogue_stands_off_the_line_on_the_audience_side():
    ann, bo = pair(PAIRS["face_to_face"])
    for subject, partner in ((ann, bo), (bo, ann)):
        placement, _, found = stage_camera("medium", "eye_level", 60.0, ASPECT, subject, (partner,))
        assert found == partner
        _, _, normal = line_of_action((ann, bo))
        line = np.subtract(partner.xz, subject.xz)
        line = line / np.linalg.norm(line)
        toward = ground(eye_of(placement)) - np.array(subject.xz)
        toward /= np.linalg.norm(toward)
        assert float(toward @ line) == pytest.approx(math.cos(math.radians(35.0)), abs=1e-9)
        assert float(toward @ normal) == pytest.approx(math.sin(math.radians(35.0)), abs=1e-9)
        assert hidden_by(placement, subject, (partner,)) == ()


def test_a_single_of_someone_facing_nobody_is_in_front_of_them():
    ann, bo = pair(PAIRS["back_to_back"])
    placement, _, found = stage_camera("close_up", "eye_level", 60.0, ASPECT, ann, (bo,))
    assert found is None
    facing = np.array([math.sin(math.radians(ann.facing)), math.cos(math.radians(ann.facing))])
    toward = ground(eye_of(placement)) - np.array(ann.xz)
    assert float(toward @ facing) / np.linalg.norm(toward) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("off_deg, partner", [(50.0 - 2, "bo"), (50.0 + 2, None)])
def test_the_partner_is_whoever_stands_within_the_cone_of_the_subjects_facing(off_deg, partner):
    facing = yaw_toward(ANN_XZ, BO_XZ) + off_deg
    ann, bo = Body("ann", ANN_XZ, 1.7, facing), Body("bo", BO_XZ, 1.7, 0.0)
    found = partner_of(ann, (bo,))
    assert (found.id if found else None) == partner
    # the cone is the same on the other side of the facing
    mirrored = Body("ann", ANN_XZ, 1.7, yaw_toward(ANN_XZ, BO_XZ) - off_deg)
    found = partner_of(mirrored, (bo,))
    assert (found.id if found else None) == partner


@pytest.mark.parametrize("side_deg, expected", [(90.0, (-1.0, 0.0)), (-90.0, (1.0, 0.0)), (180.0, (0.0, 1.0))])
def test_an_explicit_side_turns_from_the_subjects_facing(side_deg, expected):
    # facing -z (180): its own left is world -x (facing +z, the audience, it is +x)
    subject = Body("a", (2.0, 1.0), 1.75, 180.0)
    default, _, _ = stage_camera("medium", "eye_level", 60.0, ASPECT, subject, ())
    placed = place_explicitly(default, subject, CameraPlace(side_deg=side_deg, distance_m=2.0), "eye_level")
    toward = ground(eye_of(placed)) - np.array(subject.xz)
    assert toward == pytest.approx(np.array(expected) * 2.0, abs=1e-9)


# ---------------------------------------------------------------- symmetries

coordinate = st.floats(-6.0, 6.0, allow_nan=False)
facing_deg = st.floats(-180.0, 180.0, allow_nan=False)
FRAMINGS = ("over_the_shoulder", "two_shot", "medium", "close_up", "wide", "full")
ANGLES = ("eye_level", "high", "low", "birds_eye")


def _staged(framing, angle, bodies, fov_given=False):
    placement, fov, _ = stage_camera(framing, angle, 50.0, ASPECT, bodies[0], tuple(bodies[1:]), fov_given=fov_given)
    return placement, fov


@settings(max_examples=60, deadline=None)
@given(a=st.tuples(coordinate, coordinate), b=st.tuples(coordinate, coordinate), fa=facing_deg, fb=facing_deg,
       shift=st.tuples(coordinate, coordinate), framing=st.sampled_from(FRAMINGS), angle=st.sampled_from(ANGLES))
def test_moving_the_whole_set_moves_every_camera_with_it(a, b, fa, fb, shift, framing, angle):
    assume(math.dist(a, b) > 0.8)
    bodies = [Body("ann", a, 1.7, fa), Body("bo", b, 1.8, fb)]
    moved = [Body(x.id, (x.xz[0] + shift[0], x.xz[1] + shift[1]), x.height, x.facing) for x in bodies]
    p, fov = _staged(framing, angle, bodies)
    q, fov_moved = _staged(framing, angle, moved)
    assert fov_moved == pytest.approx(fov)
    assert eye_of(q) == pytest.approx(eye_of(p) + [shift[0], 0.0, shift[1]], abs=1e-6)
    assert np.asarray(q.cam_to_world)[:3, :3] == pytest.approx(np.asarray(p.cam_to_world)[:3, :3], abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(a=st.tuples(coordinate, coordinate), b=st.tuples(coordinate, coordinate), fa=facing_deg, fb=facing_deg,
       framing=st.sampled_from(FRAMINGS), angle=st.sampled_from(ANGLES))
def test_mirroring_the_set_left_to_right_mirrors_every_camera(a, b, fa, fb, framing, angle):
    assume(math.dist(a, b) > 0.8 and abs(a[0] - b[0]) > 0.3)
    bodies = [Body("ann", a, 1.7, fa), Body("bo", b, 1.8, fb)]
    mirrored = [Body(x.id, (-x.xz[0], x.xz[1]), x.height, -x.facing) for x in bodies]
    p, fov = _staged(framing, angle, bodies)
    q, fov_mirrored = _staged(framing, angle, mirrored)
    flip = np.array([-1.0, 1.0, 1.0])
    assert fov_mirrored == pytest.approx(fov)
    assert eye_of(q) == pytest.approx(eye_of(p) * flip, abs=1e-6)
    assert view_of(q) == pytest.approx(view_of(p) * flip, abs=1e-6)
