"""Staging: where the camera starts (framing + angle + subject) among the people on the set, and who
stands in its way.

The framing rules it applies live in ``daotai.plan.framing``; the set around the action
(``daotai.plan.set_pieces``), the figures' looks (``daotai.plan.wardrobe``) and what the scene's
words say (``daotai.plan.scene_words``) are modules of their own.

Pure functions; distances in metres, angles in degrees, world y up (docs/conventions.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daotai.plan.camera_grammar import look_at, make_pose
from daotai.plan.framing import (
    ANGLE_ELEVATION,
    DUTCH_ROLL_DEG,
    FRAMING_RULES,
    GROUP_FRAMINGS,
    MIN_CAMERA_HEIGHT_M,
    REFERENCE_HEIGHT_M,
    framing_distance,
)


@dataclass(frozen=True)
class Placement:
    """The start camera of a shot."""

    cam_to_world: np.ndarray  # (4, 4) float64
    aim_point: tuple[float, float, float]  # world metres
    distance: float  # camera to aim point, metres


def place_camera(
    framing: str,
    angle: str,
    fov_deg: float,
    subject_xz: tuple[float, float],
    subject_height: float,
    subject_facing_deg: float,
) -> Placement:
    """Start camera in front of the subject (along its facing), framed and angled as asked."""
    rule = FRAMING_RULES[framing]
    aim = np.array([subject_xz[0], subject_height * rule.aim_fraction, subject_xz[1]])  # (3,) m
    distance = framing_distance(framing, fov_deg, subject_height)
    facing = math.radians(subject_facing_deg)
    return place_along(aim, (math.sin(facing), math.cos(facing)), distance, angle)  # facing 0 → +z


def place_along(aim: np.ndarray, toward: tuple[float, float], distance: float, angle: str) -> Placement:
    """Start camera ``distance`` from ``aim`` on the ground direction ``toward`` (x, z), raised by the angle."""
    toward_camera = np.array([toward[0], 0.0, toward[1]])  # (3,) unit on the ground
    elevation = math.radians(ANGLE_ELEVATION[angle])
    eye = aim + distance * (math.cos(elevation) * toward_camera + np.array([0.0, math.sin(elevation), 0.0]))
    if eye[1] < MIN_CAMERA_HEIGHT_M:
        # Keep the low look: same direction on the ground, camera lifted to the floor line.
        eye[1] = MIN_CAMERA_HEIGHT_M
    roll = DUTCH_ROLL_DEG if angle == "dutch" else 0.0
    rotation = look_at(eye, aim, roll_deg=roll)
    return Placement(make_pose(rotation, eye), (float(aim[0]), float(aim[1]), float(aim[2])), float(np.linalg.norm(aim - eye)))


def default_character_positions(count: int, spacing: float = 1.2) -> list[tuple[float, float]]:
    """Characters without a position stand in a row along x, centred on the origin."""
    return [((i - (count - 1) / 2.0) * spacing, 0.0) for i in range(count)]


# ---------------------------------------------------------------- staging two or more people

DIALOGUE_SINGLE_DEG = 35.0  # a single in a dialogue: camera this far off the line, on the audience side
PARTNER_CONE_DEG = 50.0  # someone within this angle of a subject's facing is who they talk to
OTS_BACK_M = 0.55  # an over-the-shoulder camera stands this far behind the near person (1.75 m scale)
OTS_LATERAL_M = 0.28  # ... and this far to the side of their axis: their shoulder and head edge the frame
OTS_EYE_LINE = 0.91  # ... with the lens no lower than their eye line (a share of their height)
BODY_RADIUS_M = 0.22  # a standing person, as an obstacle between the lens and the subject (1.75 m scale)
SWING_STEP_DEG = 15.0  # a blocked single swings around its subject in these steps ...
SWING_MAX_DEG = 75.0  # ... up to this far, toward the audience side
GROUP_MARGIN = 0.85  # a group fills at most this share of the frame width
AUDIENCE = (0.0, 1.0)  # the side of the set the cameras look from by default (+z, the default camera)


@dataclass(frozen=True)
class Body:
    """A character where it stands at the start of a shot."""

    id: str
    xz: tuple[float, float]
    height: float
    facing: float  # degrees, 0 faces +z


def yaw_toward(src: tuple[float, float], dst: tuple[float, float]) -> float:
    """Facing (degrees) from ``src`` toward ``dst`` on the ground; 0 faces +z, 90 faces +x."""
    return math.degrees(math.atan2(dst[0] - src[0], dst[1] - src[1]))


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.array([0.0, 1.0])


def _rotate(v: np.ndarray, deg: float) -> np.ndarray:
    """A ground vector (x, z) turned about +y by ``deg`` (yaw sense: +z toward +x)."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([v[0] * c + v[1] * s, -v[0] * s + v[1] * c])


def line_of_action(bodies: tuple[Body, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centre (x, z), line direction and audience-side normal of a group on the ground.

    Two people: the line joins them (in the order given, the script's). More: the group's
    principal axis. The normal is the side of the line the cameras keep to (the 180 degree
    rule): the side that faces ``AUDIENCE``, so reverse shots of a dialogue stay on one side.
    """
    pts = np.array([b.xz for b in bodies], np.float64)  # (N, 2)
    centre = pts.mean(axis=0)
    if len(pts) == 2:
        line = pts[1] - pts[0]
    elif len(pts) > 2:
        cov = np.cov((pts - centre).T)
        w, v = np.linalg.eigh(cov)
        line = v[:, int(np.argmax(w))]
        line = line if line[0] > 1e-12 or (abs(line[0]) <= 1e-12 and line[1] > 0) else -line
    else:
        line = np.array([1.0, 0.0])
    if float(np.linalg.norm(line)) < 1e-9:
        line = np.array([1.0, 0.0])
    line = _unit(line)
    normal = np.array([line[1], -line[0]])
    if float(normal @ np.array(AUDIENCE)) < -1e-9:
        normal = -normal
    return centre, line, normal


def partner_of(subject: Body, others: tuple[Body, ...], cone_deg: float | None = PARTNER_CONE_DEG) -> Body | None:
    """Who the subject plays to: the nearest other person in front of them (any, when ``cone_deg`` is None)."""
    facing = np.array([math.sin(math.radians(subject.facing)), math.cos(math.radians(subject.facing))])
    best, best_d = None, math.inf
    for other in others:
        offset = np.array(other.xz) - np.array(subject.xz)
        d = float(np.linalg.norm(offset))
        if d < 1e-6:
            continue
        if cone_deg is not None and float(offset @ facing) / d < math.cos(math.radians(cone_deg)):
            continue
        if d < best_d:
            best, best_d = other, d
    return best


def _blocks(eye: np.ndarray, target: np.ndarray, body: Body) -> bool:
    """Whether ``body`` (a vertical cylinder) stands across the sight line from ``eye`` to ``target``."""
    a, b = eye[[0, 2]], target[[0, 2]]
    ab = b - a
    length2 = float(ab @ ab)
    t = 0.0 if length2 < 1e-12 else float(np.clip((np.array(body.xz) - a) @ ab / length2, 0.0, 1.0))
    if t > 0.97:  # at the target itself
        return False
    closest = a + t * ab
    y = eye[1] + t * (target[1] - eye[1])
    radius = BODY_RADIUS_M * body.height / REFERENCE_HEIGHT_M
    return float(np.linalg.norm(closest - np.array(body.xz))) < radius and y < body.height * 1.02


def hidden_by(placement: Placement, subject: Body, others: tuple[Body, ...]) -> tuple[str, ...]:
    """Ids of the people standing between the camera and the subject's head or aim point."""
    eye = np.asarray(placement.cam_to_world)[:3, 3]
    targets = (np.array(placement.aim_point), np.array([subject.xz[0], 0.93 * subject.height, subject.xz[1]]))
    return tuple(o.id for o in others if any(_blocks(eye, t, o) for t in targets))


def stage_camera(
    framing: str,
    angle: str,
    fov_deg: float,
    aspect: float,
    subject: Body,
    others: tuple[Body, ...],
    *,
    fov_given: bool = True,
    path: np.ndarray | None = None,
) -> tuple[Placement, float, Body | None]:
    """The start camera of a shot with people in it: (placement, vertical fov, the other person staged).

    * ``over_the_shoulder``: behind the other person's near shoulder (on the audience side of the
      line between them), looking at the subject; without a script fov the lens is chosen so the
      subject fills the frame as the framing asks (a longer lens than 60 degrees, as crews shoot it).
    * ``two_shot``: the subject and the other person side by side, camera square to the line.
    * ``wide``/``extreme_wide`` with others present (a master): all of them, camera square to their line,
      far enough back to hold every ground point of ``path`` (N, 2) too: where they walk in the shot.
    * any other size: a single. Facing someone (a dialogue) the camera stands off the line by
      ``DIALOGUE_SINGLE_DEG`` on the audience side, so the other actor is not in the lens's way;
      else in front of the subject along its facing. If someone still blocks the subject, the camera
      swings around the subject toward the audience side until the subject is clear.

    Raises ValueError for a two-person framing with nobody else present.
    """
    size_rule = FRAMING_RULES[framing]
    if framing in ("over_the_shoulder", "two_shot"):
        partner = partner_of(subject, others, cone_deg=None)
        if partner is None:
            raise ValueError(f"{framing!r} needs a second character in the shot")
        pair = (subject, partner)
        _, _, normal = line_of_action(_canonical(pair))
        if framing == "over_the_shoulder":
            return _over_the_shoulder(angle, fov_deg, aspect, subject, partner, normal, fov_given) + (partner,)
        return _group(framing, angle, fov_deg, aspect, pair, normal, None), fov_deg, partner
    if framing in GROUP_FRAMINGS and others:
        group = (subject, *others)
        return _group(framing, angle, fov_deg, aspect, group, _group_side(group), path), fov_deg, None
    aim = np.array([subject.xz[0], subject.height * size_rule.aim_fraction, subject.xz[1]])  # (3,) m
    distance = framing_distance(framing, fov_deg, subject.height)
    facing = math.radians(subject.facing)
    toward = np.array([math.sin(facing), math.cos(facing)])
    partner = partner_of(subject, others)
    if partner is None:
        placement = place_along(aim, (math.sin(facing), math.cos(facing)), distance, angle)
        side = np.array(AUDIENCE)
    else:
        _, _, side = line_of_action(_canonical((subject, partner)))
        line = _unit(np.array(partner.xz) - np.array(subject.xz))
        a = math.radians(DIALOGUE_SINGLE_DEG)
        toward = _unit(math.cos(a) * line + math.sin(a) * side)
        placement = place_along(aim, (float(toward[0]), float(toward[1])), distance, angle)
    if not hidden_by(placement, subject, others):
        return placement, fov_deg, partner
    # swing toward the audience side: the turn that brings the camera direction nearer ``side``
    sign = 1.0 if float(_rotate(toward, 1.0) @ side) >= float(toward @ side) else -1.0
    steps = int(SWING_MAX_DEG // SWING_STEP_DEG)
    for k in range(1, steps + 1):
        for direction in (sign, -sign):
            turned = _rotate(toward, direction * k * SWING_STEP_DEG)
            candidate = place_along(aim, (float(turned[0]), float(turned[1])), distance, angle)
            if not hidden_by(candidate, subject, others):
                return candidate, fov_deg, partner
    return placement, fov_deg, partner


def _group_side(group: tuple[Body, ...]) -> np.ndarray:
    """Where a master of the group looks from (a ground unit vector from the group toward the camera).

    People who play to each other (each faces someone in the group) are seen square to their line
    of action, from the audience side; people who face one way together (a line-up, a crowd
    watching something) from where they face.
    """
    _, _, normal = line_of_action(_canonical(group))
    if all(partner_of(b, tuple(o for o in group if o is not b)) is not None for b in group):
        return normal
    mean = np.mean([[math.sin(math.radians(b.facing)), math.cos(math.radians(b.facing))] for b in group], axis=0)
    return _unit(mean) if float(np.linalg.norm(mean)) > 0.3 else normal


def _canonical(bodies: tuple[Body, ...]) -> tuple[Body, ...]:
    """People in id order: the line between two of them is the same whichever one is the subject."""
    return tuple(sorted(bodies, key=lambda b: b.id))


def _over_the_shoulder(angle: str, fov_deg: float, aspect: float, subject: Body, near: Body, side: np.ndarray,
                       fov_given: bool) -> tuple[Placement, float]:
    """Camera behind ``near``'s audience-side shoulder looking at ``subject``; the fov it needs."""
    rule = FRAMING_RULES["over_the_shoulder"]
    aim = np.array([subject.xz[0], subject.height * rule.aim_fraction, subject.xz[1]])  # (3,) m
    offset = np.array(near.xz) - np.array(subject.xz)
    gap = float(np.linalg.norm(offset))
    line = _unit(offset)
    scale_near = near.height / REFERENCE_HEIGHT_M
    along, lateral = gap + OTS_BACK_M * scale_near, OTS_LATERAL_M * scale_near
    reach = math.hypot(along, lateral)
    toward = (line * along + side * lateral) / reach
    if not fov_given:
        visible = rule.visible_m * subject.height / REFERENCE_HEIGHT_M
        fov_deg = round(math.degrees(2.0 * math.atan(visible / (2.0 * reach))), 3)
    distance = max(reach, framing_distance("over_the_shoulder", fov_deg, subject.height))
    # The lens looks over the near person's shoulder, not through it: at least at their eye line.
    lift = max(0.0, OTS_EYE_LINE * near.height - aim[1]) if ANGLE_ELEVATION[angle] == 0.0 else 0.0
    placement = place_along(aim, (float(toward[0]), float(toward[1])), distance, angle)
    if lift > 0.0:
        eye = np.asarray(placement.cam_to_world)[:3, 3] + np.array([0.0, lift, 0.0])
        placement = Placement(make_pose(look_at(eye, aim), eye), placement.aim_point, float(np.linalg.norm(aim - eye)))
    return placement, fov_deg


def _group(framing: str, angle: str, fov_deg: float, aspect: float, group: tuple[Body, ...],
           normal: np.ndarray, path: np.ndarray | None) -> Placement:
    """Camera square to the group's line on the audience side, far enough back to hold all of them."""
    rule = FRAMING_RULES[framing]
    line = np.array([normal[1], -normal[0]])  # across the frame
    points = [(np.array(b.xz, np.float64), b.height) for b in group]
    tallest = max(b.height for b in group)
    if path is not None:
        points += [(np.asarray(p, np.float64), tallest) for p in np.asarray(path, np.float64).reshape(-1, 2)]
    # centre the frame on the middle of everything it must hold, across and in depth
    across = [float(p @ line) for p, _ in points]
    deep = [float(p @ normal) for p, _ in points]
    centre = line * (min(across) + max(across)) / 2.0 + normal * (min(deep) + max(deep)) / 2.0
    # framed for the tallest, so nobody's head is cut
    aim = np.array([centre[0], tallest * rule.aim_fraction, centre[1]])  # (3,) m
    distance = framing_distance(framing, fov_deg, tallest)
    tan_half_w = math.tan(math.radians(fov_deg) / 2.0) * aspect
    for p, h in points:
        rel = p - centre
        half = abs(float(rel @ line)) + 0.3 * h / REFERENCE_HEIGHT_M  # body half-width beside the centre
        nearer = float(rel @ normal)  # people nearer the camera need it further back
        distance = max(distance, half / (GROUP_MARGIN * tan_half_w) + max(0.0, nearer))
    return place_along(aim, (float(normal[0]), float(normal[1])), distance, angle)


# ---------------------------------------------------------------- the camera's place, as crews say it


@dataclass(frozen=True)
class CameraPlace:
    """Explicit place fields of a shot's camera (None = left to the framing and angle)."""

    side_deg: float | None = None  # around the subject from its front, + toward its own left
    distance_m: float | None = None  # on the ground, subject to lens
    height_m: float | None = None  # lens above the ground
    position: tuple[float, float, float] | None = None  # world metres
    aim: tuple[float, float, float] | None = None  # world point the lens looks at

    @property
    def moves_the_camera(self) -> bool:
        return any(v is not None for v in (self.side_deg, self.distance_m, self.height_m, self.position))


def horizontal_fov_to_vertical(sensor_width_mm: float, focal_length_mm: float, aspect: float) -> float:
    """Vertical fov (degrees) of a lens on a sensor whose width spans the frame's width (W / H = ``aspect``)."""
    half_w = sensor_width_mm / (2.0 * focal_length_mm)  # tan of half the horizontal view
    return math.degrees(2.0 * math.atan(half_w / aspect))


def place_explicitly(default: Placement, subject: Body, place: CameraPlace, angle: str) -> Placement:
    """The start camera moved to the script's place fields; what is not given keeps ``default``'s.

    Side: the ground direction from the subject, ``side_deg`` from its facing (0 = in front).
    Without a side the default's direction is kept. Without a distance, the default's ground
    distance; without a height, the angle's elevation over that distance (never below the floor
    line). ``position`` replaces all three. The lens looks at ``place.aim`` or the default's aim.
    """
    aim = np.array(place.aim if place.aim is not None else default.aim_point, np.float64)  # (3,) m
    default_eye = np.asarray(default.cam_to_world)[:3, 3]
    if place.position is not None:
        eye = np.array(place.position, np.float64)
    else:
        centre = np.array(subject.xz, np.float64)
        if place.side_deg is not None:
            yaw = math.radians(subject.facing + place.side_deg)
            toward = np.array([math.sin(yaw), math.cos(yaw)])
        else:
            toward = _unit(default_eye[[0, 2]] - centre)
        ground = place.distance_m if place.distance_m is not None else float(np.linalg.norm(default_eye[[0, 2]] - centre))
        if place.height_m is not None:
            height = place.height_m
        elif place.distance_m is None and place.side_deg is None:
            height = float(default_eye[1])
        else:
            elevation = math.radians(ANGLE_ELEVATION[angle])
            height = max(MIN_CAMERA_HEIGHT_M, float(aim[1]) + ground * math.tan(min(elevation, math.radians(80.0))))
        eye = np.array([centre[0] + toward[0] * ground, height, centre[1] + toward[1] * ground])
    roll = DUTCH_ROLL_DEG if angle == "dutch" else 0.0
    rotation = look_at(eye, aim, roll_deg=roll)
    return Placement(make_pose(rotation, eye), (float(aim[0]), float(aim[1]), float(aim[2])),
                     float(np.linalg.norm(aim - eye)))


def inside_figure(eye: np.ndarray, bodies: tuple[Body, ...]) -> str | None:
    """Id of the person whose body (a vertical cylinder) holds the point ``eye``, else None."""
    for body in bodies:
        radius = BODY_RADIUS_M * body.height / REFERENCE_HEIGHT_M
        if float(np.hypot(eye[0] - body.xz[0], eye[2] - body.xz[1])) < radius and 0.0 <= eye[1] <= body.height:
            return body.id
    return None


def fully_hidden(eye: np.ndarray, subject: Body, others: tuple[Body, ...]) -> tuple[str, ...]:
    """Who hides the subject when every point of it the lens could see is behind someone (else ``()``).

    Points: head, chest, hips and knees on the body's axis and at both sides of it, across the view.
    """
    centre = np.array(subject.xz, np.float64)
    across = _unit(np.array([-(centre[1] - eye[2]), centre[0] - eye[0]]))  # ground, square to the view
    radius = 0.8 * BODY_RADIUS_M * subject.height / REFERENCE_HEIGHT_M
    blockers: set[str] = set()
    for share in (0.93, 0.72, 0.52, 0.28):
        for sideways in (-radius, 0.0, radius):
            x, z = centre + across * sideways
            target = np.array([x, share * subject.height, z])
            hit = [o.id for o in others if _blocks(eye, target, o)]
            if not hit:
                return ()
            blockers.update(hit)
    return tuple(sorted(blockers))
