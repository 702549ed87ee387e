"""Framing that respects the face: headroom, lead room, seated height and where a push lands.

Pure functions on the start camera the staging chose (``daotai.plan.staging.Placement``).
Shares are of the frame height measured down from its top edge (image rows grow downward);
distances in metres, world y up (docs/conventions.md).

The rules a crew frames by, stated once here and checked by tests from the rendered masks:

* **headroom**: close sizes put the eyes at about the upper third of the frame; from a close-up
  outward the top of the head stays inside the frame with a margin; an extreme close-up may
  crop the top of the head but keeps the eye line at the upper third (``HEADROOM``);
* **a push lands on its framing**: a push-in, dolly-in or zoom-in ends on the framing the shot
  names and starts wider, so the move never runs past the head (``lands_on_framing``);
* **lead room**: a single whose subject faces (or walks) sideways has the empty side of the frame
  in front of them: the camera trucks toward the side they face (``lead_room_shift``);
* **seated height**: a seated subject is framed where their head is, not where it would be
  standing (``seated_drop``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from daotai.plan.camera_grammar import look_at, make_pose
from daotai.plan.framing import FRAMING_RULES, MIN_CAMERA_HEIGHT_M
from daotai.plan.staging import Placement
from daotai.script.vocab import CAMERA_MOVES

# The previz mannequin's head, as a share of its standing height (daotai.render.previz.meshes):
EYE_SHARE = 0.934  # the eye line (meshes.EYE_Y)
HEAD_CENTRE_SHARE = 0.928  # the skull's centre (meshes.HEAD_C)
# half-sizes (x, y, z) of an ellipsoid holding skull and hair: its outline's top row is the rendered
# mask's top row within a pixel at 320x180 from close-up to full shot, eye level, high and low
HAIR_RADII = (0.055, 0.075, 0.066)
SEATED_HEAD_DROP = 0.23  # sitting lowers the head by this share of the standing height (the SITTING rig)


@dataclass(frozen=True)
class HeadroomRule:
    """Where a framing puts the head, as shares of the frame height from the top edge."""

    eye_line: float | None  # the eyes at about this share (None: no eye-line rule, the body decides)
    crown_margin: float | None  # at least this gap above the top of the head (None: it may be cropped)


EYE_LINE_TOLERANCE = 0.08  # "about the upper third": within this share of the frame height of it
UPPER_THIRD = 1.0 / 3.0
HEADROOM = MappingProxyType(
    {
        "extreme_close_up": HeadroomRule(UPPER_THIRD, None),  # the face fills the frame; the crown may go
        "close_up": HeadroomRule(UPPER_THIRD, 0.03),
        "medium_close_up": HeadroomRule(UPPER_THIRD, 0.08),
        "medium": HeadroomRule(UPPER_THIRD, 0.10),
        "medium_full": HeadroomRule(None, 0.05),
        "full": HeadroomRule(None, 0.05),
        "wide": HeadroomRule(None, 0.05),
        "extreme_wide": HeadroomRule(None, 0.05),
        "over_the_shoulder": HeadroomRule(None, 0.05),
        "two_shot": HeadroomRule(None, 0.05),
    }
)
SINGLE_SIZES = ("extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full")
LEAD_ROOM_SHARE = 1.0 / 6.0  # a subject in profile sits on the third line: the frame centre moves
# this share of the frame width toward the side they face (less as they turn toward the lens)
HEAD_AIMED = 0.6  # framings aimed at least this high on the body are framed on the head and chest


def pushes_in(move_type: str, motion: tuple[float, float, float], rotate: tuple[float, float, float],
              orbit: float, fov: float, fov_end: float) -> bool:
    """Whether a resolved move closes on the subject (travels forward or narrows the lens) and does
    nothing else that changes what the end frame looks at (no pan, tilt, roll or orbit)."""
    if CAMERA_MOVES[move_type].holds_subject or orbit or any(rotate):
        return False
    return motion[2] < 0.0 or fov_end < fov


def landing_distance(distance: float, fov: float, fov_end: float) -> float:
    """How far from the aim the lens must end so the end lens ``fov_end`` frames what ``fov`` frames at
    ``distance``: the same metres of frame height at the aim (d0 · tan(f0/2) = d1 · tan(f1/2))."""
    return distance * math.tan(math.radians(fov) / 2.0) / math.tan(math.radians(fov_end) / 2.0)


def lands_on_framing(named: Placement, fov: float, fov_end: float,
                     motion: tuple[float, float, float]) -> Placement | None:
    """The start camera of a push whose last frame is ``named`` (the framing the shot names, at ``fov``).

    The lens ends where the end fov frames the named framing, on the same line from the aim, and
    starts ``motion`` (metres, camera-local) before it with the same orientation: the move carries
    it onto the named framing. Where that start would be under the floor (a low push from far
    back) a straight push starts on the floor line instead, aimed at the aim and as far from it,
    so it still ends the named distance away; None when no start fits.
    """
    pose = np.asarray(named.cam_to_world, np.float64)
    aim = np.asarray(named.aim_point, np.float64)
    back = pose[:3, 3] - aim  # (3,) metres, aim -> lens
    end_eye = aim + back * landing_distance(1.0, fov, fov_end)  # (3,) where the lens ends
    start_eye = end_eye - pose[:3, :3] @ np.asarray(motion, np.float64)  # (3,) before the move
    if start_eye[1] >= MIN_CAMERA_HEIGHT_M:
        return Placement(make_pose(pose[:3, :3], start_eye), named.aim_point,
                         float(np.linalg.norm(aim - start_eye)))
    reach = float(np.linalg.norm(end_eye - aim)) - motion[2]  # straight pushes only: motion (0, 0, -m)
    rise = float(aim[1]) - MIN_CAMERA_HEIGHT_M
    ground = back[[0, 2]]
    if motion[0] or motion[1] or reach <= rise or float(np.linalg.norm(ground)) < 1e-9:
        return None
    along = ground / np.linalg.norm(ground) * math.sqrt(reach * reach - rise * rise)  # (2,) metres
    eye = np.array([aim[0] + along[0], MIN_CAMERA_HEIGHT_M, aim[2] + along[1]])
    return Placement(make_pose(look_at(eye, aim), eye), named.aim_point, reach)


def lead_room_shift(placement: Placement, facing_deg: float, fov: float, aspect: float) -> np.ndarray:
    """World shift (3,) metres of lens and aim that gives a subject facing ``facing_deg`` their lead room.

    Sideways-ness is how much of the facing points across the frame (1 in profile, 0 toward or away
    from the lens); the frame centre moves toward that side by LEAD_ROOM_SHARE of the frame width at
    the aim, so the subject sits off-centre with the open side in front of them.
    """
    pose = np.asarray(placement.cam_to_world, np.float64)
    right = pose[:3, 0]  # (3,) camera +x in the world
    facing = np.array([math.sin(math.radians(facing_deg)), 0.0, math.cos(math.radians(facing_deg))])
    sideways = float(facing @ right)
    width = 2.0 * placement.distance * math.tan(math.radians(fov) / 2.0) * aspect  # metres across at the aim
    return right * sideways * LEAD_ROOM_SHARE * width


def seated_drop(framing: str, height: float, drop_share: float) -> float:
    """How far (m) to lower the camera and its aim for a subject whose head sits ``drop_share`` of
    ``height`` lower than standing: all of it for framings on the head and chest, else the aim's
    share of it (a full shot of a seated person centres the seated body)."""
    aim_fraction = FRAMING_RULES[framing].aim_fraction
    share = 1.0 if aim_fraction >= HEAD_AIMED else aim_fraction
    return drop_share * height * share


def shifted(placement: Placement, shift: np.ndarray, roll_deg: float = 0.0,
            floor: float = MIN_CAMERA_HEIGHT_M) -> Placement:
    """``placement`` with its lens and aim both moved by ``shift`` (3,) metres; a lens that would go
    under the floor line (or the higher ``floor``, metres) stays on it and turns to the moved aim."""
    pose = np.asarray(placement.cam_to_world, np.float64)
    aim = np.asarray(placement.aim_point, np.float64) + shift
    eye = pose[:3, 3] + shift
    rotation = pose[:3, :3]
    floor = max(floor, MIN_CAMERA_HEIGHT_M)
    if eye[1] < floor:
        eye[1] = floor
        rotation = look_at(eye, aim, roll_deg=roll_deg)
    return Placement(make_pose(rotation, eye), (float(aim[0]), float(aim[1]), float(aim[2])),
                     float(np.linalg.norm(aim - eye)))


def _head_outline() -> np.ndarray:
    """Points (N, 3) on the head's ellipsoid, in height units about its centre."""
    theta, phi = np.meshgrid(np.linspace(0.0, math.pi, 19), np.linspace(0.0, 2.0 * math.pi, 36, endpoint=False))
    rx, ry, rz = HAIR_RADII
    return np.stack([rx * np.sin(theta) * np.cos(phi), ry * np.cos(theta), rz * np.sin(theta) * np.sin(phi)],
                    axis=-1).reshape(-1, 3)


_OUTLINE = _head_outline()


def head_rows(cam_to_world: np.ndarray, fov: float, xz: tuple[float, float], height: float,
              drop_share: float = 0.0) -> tuple[float, float, float] | None:
    """(crown, eye line, depth) of a person standing at ``xz`` seen by a camera: image rows as shares of
    the frame height from the top (the crown is the highest row of the head's outline), depth in
    metres to the head's centre; None when any of the head is behind the lens."""
    pose = np.asarray(cam_to_world, np.float64)
    centre = np.array([xz[0], (HEAD_CENTRE_SHARE - drop_share) * height, xz[1]])  # (3,) world
    eye = np.array([xz[0], (EYE_SHARE - drop_share) * height, xz[1]])
    points = np.vstack([centre + _OUTLINE * height, eye, centre])  # (N + 2, 3) world
    local = (points - pose[:3, 3]) @ pose[:3, :3]  # camera axes
    depth = -local[:, 2]
    if np.any(depth <= 1e-6):
        return None
    tan_half = math.tan(math.radians(fov) / 2.0)
    rows = 0.5 - local[:, 1] / (depth * 2.0 * tan_half)  # share of the frame height from the top
    return float(rows[:-2].min()), float(rows[-2]), float(depth[-1])


def cuts_the_head(framing: str, rows: tuple[float, float, float] | None) -> bool:
    """Whether the top of the head is above the frame's top edge where ``framing``'s rule keeps it in frame."""
    rule = HEADROOM.get(framing)
    if rule is None or rule.crown_margin is None or rows is None:
        return False
    return rows[0] < 0.0
