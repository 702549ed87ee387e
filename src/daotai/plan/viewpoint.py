"""Shots placed by what a character sees or holds, not by how big they are: POV and insert.

* ``pov`` (point of view, 主观镜头): the lens at the subject's eyes, a little in front of the face
  (so the previz head does not fill the lens), looking where the subject looks: at the shot's
  ``look_at`` (a character's face or a point), else at the person the subject faces, else
  straight ahead along its facing at eye height. The subject is behind the lens, not in the picture.
* ``insert`` (插入镜头): a close detail of the subject's right hand, or of the point the camera's
  ``aim`` names (a prop): about INSERT_VISIBLE_M of it fills the frame height, seen from in front of
  the subject and from above (INSERT_ELEVATION_DEG unless the shot names another angle).

Pure functions; metres, degrees, world y up (docs/conventions.md).
"""

from __future__ import annotations

import math

import numpy as np

from daotai.plan.camera_grammar import look_at, make_pose
from daotai.plan.framing import ANGLE_ELEVATION, DUTCH_ROLL_DEG, MIN_CAMERA_HEIGHT_M
from daotai.plan.staging import Body, Placement, partner_of

VIEWPOINT_FRAMINGS = ("pov", "insert")
# Eye height as a share of a figure's height: standing, and seated on a chair (0.45 m seat).
EYE_FRACTION = 0.93
SEATED_EYE_FRACTION = 0.70
# How far in front of the head's centre the POV lens sits: past the previz head's face (radius ~0.1 m).
POV_FORWARD_M = 0.15
POV_AHEAD_M = 5.0  # with nothing to look at, the lens looks this far ahead at eye height
FACE_FRACTION = 0.93  # where a looked-at person's face is, as a share of their height
# The right hand, as shares of the figure's height: (up, forward, to its right). Standing, the
# previz arm hangs beside the hip; seated, the hand rests on the lap, ahead of the body.
HAND_AT = (0.47, 0.03, 0.12)
SEATED_HAND_AT = (0.36, 0.17, 0.08)
INSERT_VISIBLE_M = 0.35  # height of the detail that fills the frame: a pair of hands, a cup, a phone
INSERT_ELEVATION_DEG = 35.0  # an insert looks down on what the hands hold


def eye_point(body: Body, seated: bool) -> np.ndarray:
    """(3,) world metres of a figure's eyes (the middle of its head)."""
    fraction = SEATED_EYE_FRACTION if seated else EYE_FRACTION
    return np.array([body.xz[0], body.height * fraction, body.xz[1]])


def _ahead(body: Body) -> np.ndarray:
    """(3,) unit ground direction the body faces."""
    yaw = math.radians(body.facing)
    return np.array([math.sin(yaw), 0.0, math.cos(yaw)])


def pov_target(viewer: Body, others: tuple[Body, ...], seated: bool, look: Body | np.ndarray | None) -> np.ndarray:
    """(3,) what a POV looks at: ``look`` (a body's face or a point), else the person faced, else straight ahead."""
    if isinstance(look, Body):
        return np.array([look.xz[0], look.height * FACE_FRACTION, look.xz[1]])
    if look is not None:
        return np.asarray(look, np.float64)
    partner = partner_of(viewer, others)
    if partner is not None:
        return np.array([partner.xz[0], partner.height * FACE_FRACTION, partner.xz[1]])
    return eye_point(viewer, seated) + POV_AHEAD_M * _ahead(viewer)


def pov_placement(viewer: Body, target: np.ndarray, seated: bool, angle: str) -> Placement:
    """The lens at the viewer's eyes, POV_FORWARD_M in front of them toward ``target``, looking at it."""
    head = eye_point(viewer, seated)
    toward = np.asarray(target, np.float64) - head
    ground = np.array([toward[0], 0.0, toward[2]])
    length = float(np.linalg.norm(ground))
    forward = ground / length if length > 1e-6 else _ahead(viewer)  # looking straight up or down: ahead
    eye = head + POV_FORWARD_M * forward  # (3,) m
    aim = np.asarray(target, np.float64)
    if float(np.linalg.norm(aim - eye)) < 0.05:  # a target at the lens itself: look ahead
        aim = eye + forward
    roll = DUTCH_ROLL_DEG if angle == "dutch" else 0.0
    return Placement(make_pose(look_at(eye, aim, roll_deg=roll), eye),
                     (float(aim[0]), float(aim[1]), float(aim[2])), float(np.linalg.norm(aim - eye)))


def hand_point(body: Body, seated: bool) -> np.ndarray:
    """(3,) world metres of a figure's right hand (HAND_AT, SEATED_HAND_AT)."""
    up, forward, right = SEATED_HAND_AT if seated else HAND_AT
    ahead = _ahead(body)
    to_right = np.array([-ahead[2], 0.0, ahead[0]])  # forward x up: a figure facing +z has its right at -x
    base = np.array([body.xz[0], up * body.height, body.xz[1]])
    return base + body.height * (forward * ahead + right * to_right)


def insert_distance(fov_deg: float) -> float:
    """Lens-to-detail distance (m) at which INSERT_VISIBLE_M fills the vertical ``fov_deg``."""
    return INSERT_VISIBLE_M / (2.0 * math.tan(math.radians(fov_deg) / 2.0))


def insert_placement(subject: Body, detail: np.ndarray, fov_deg: float, angle: str) -> Placement:
    """A close detail at ``detail`` (3,) m, seen from the subject's front and from above."""
    detail = np.asarray(detail, np.float64)
    elevation = math.radians(INSERT_ELEVATION_DEG if angle in ("eye_level", "dutch") else ANGLE_ELEVATION[angle])
    distance = insert_distance(fov_deg)
    front = _ahead(subject)
    eye = detail + distance * (math.cos(elevation) * front + np.array([0.0, math.sin(elevation), 0.0]))
    eye[1] = max(eye[1], MIN_CAMERA_HEIGHT_M)
    roll = DUTCH_ROLL_DEG if angle == "dutch" else 0.0
    return Placement(make_pose(look_at(eye, detail, roll_deg=roll), eye),
                     (float(detail[0]), float(detail[1]), float(detail[2])), float(np.linalg.norm(detail - eye)))
