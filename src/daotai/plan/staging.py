"""Staging: where the camera starts (framing + angle + subject) and what stands on the set.

Pure functions; distances in metres, angles in degrees, world y up (docs/conventions.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from daotai.plan.camera import look_at, make_pose
from daotai.plan.sets import KITS, Kit, choose_kit, kit_for_scene  # noqa: F401 (KITS, kit_for_scene: re-exported)
from daotai.plan.sets import has_phrase as _has_phrase
from daotai.plan.surround import build_surround

RGB = tuple[float, float, float]


@dataclass(frozen=True)
class FramingRule:
    """How much of a standing subject fills the frame height, and where the camera aims."""

    visible_m: float  # subject height that fills the frame vertically, for a 1.75 m person
    aim_fraction: float  # aim point height as a fraction of the subject's height
    scale_with_height: bool = True  # tight shots scale with the person; wide shots with the set


FRAMING_RULES = MappingProxyType(
    {
        # close sizes aim so the eyes sit about the upper third (daotai.plan.headroom.HEADROOM): there
        # aim_fraction = 0.934 - visible_m / 1.75 / 6; a close-up aims a little higher, for its headroom
        "extreme_close_up": FramingRule(0.22, 0.913),
        "close_up": FramingRule(0.45, 0.90),
        "medium_close_up": FramingRule(0.75, 0.86),
        "medium": FramingRule(1.10, 0.83),
        "medium_full": FramingRule(1.50, 0.68),  # the knees at the bottom edge, headroom seen from above too
        "full": FramingRule(2.20, 0.52),
        "wide": FramingRule(5.50, 0.50, scale_with_height=False),
        "extreme_wide": FramingRule(16.0, 0.45, scale_with_height=False),
        # two-person shot types: the subject's size in them (the other person is staged too)
        "over_the_shoulder": FramingRule(0.95, 0.86),
        "two_shot": FramingRule(1.60, 0.62),
    }
)
# The shot size a two-person shot type is closest to (prompts name sizes).
FRAMING_SIZE = MappingProxyType({"over_the_shoulder": "medium_close_up", "two_shot": "medium_full"})
GROUP_FRAMINGS = ("wide", "extreme_wide")  # with several characters present these frame them all

# Elevation of the camera above the aim point (positive = camera looks down), and roll.
ANGLE_ELEVATION = MappingProxyType(
    {"eye_level": 0.0, "high": 25.0, "low": -20.0, "birds_eye": 80.0, "worms_eye": -45.0, "dutch": 0.0}
)
DUTCH_ROLL_DEG = 15.0
MIN_CAMERA_HEIGHT_M = 0.12  # a worm's-eye camera sits on the floor, not under it
REFERENCE_HEIGHT_M = 1.75


@dataclass(frozen=True)
class Placement:
    """The start camera of a shot."""

    cam_to_world: np.ndarray  # (4, 4) float64
    aim_point: tuple[float, float, float]  # world metres
    distance: float  # camera to aim point, metres


def framing_distance(framing: str, fov_deg: float, subject_height: float) -> float:
    """Camera-to-aim distance (m) at which the framing's visible height fills the vertical fov."""
    rule = FRAMING_RULES[framing]
    visible = rule.visible_m * (subject_height / REFERENCE_HEIGHT_M if rule.scale_with_height else 1.0)
    return visible / (2.0 * math.tan(math.radians(fov_deg) / 2.0))


SIZES = ("extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide", "extreme_wide")


def size_at(distance: float, fov_deg: float, subject_height: float, close_scale: float = 1.0) -> str:
    """The shot size a camera ``distance`` m from the aim with a vertical ``fov_deg`` makes of a subject:
    the one whose visible height is nearest (by ratio) to what the frame shows there. ``close_scale``:
    how many times a person's share a close size shows of this subject (an animal's)."""
    shows = 2.0 * distance * math.tan(math.radians(fov_deg) / 2.0)  # metres of frame height at the aim

    def visible(size: str) -> float:
        rule = FRAMING_RULES[size]
        if not rule.scale_with_height:
            return rule.visible_m
        return rule.visible_m * subject_height / REFERENCE_HEIGHT_M * close_scale

    return min(SIZES, key=lambda size: abs(math.log(shows / visible(size))))


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


@dataclass(frozen=True)
class PieceSpec:
    kind: str
    name: str
    position: tuple[float, float, float]
    size: tuple[float, float, float]
    colour: tuple[float, float, float]
    yaw: float = 0.0
    glow: bool = False  # a practical light (lamp, lantern, neon, screen, sign): lit at dusk and night


LIGHT_ROLES = frozenset(("lamp", "lantern", "neon", "screen", "sign"))




# Words in a scene's name or description that say when it happens (used when the script gives no
# time_of_day): English whole words and phrases, Chinese as written; tried in this order, so "night
# market" is night and "sunset" beats a "day" elsewhere in the text.
TIME_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("night", ("night", "nighttime", "midnight", "at night", "moonlight", "moonlit", "夜", "晚上", "深夜", "午夜",
               "月光")),
    ("dusk", ("dusk", "sunset", "evening", "twilight", "golden hour", "sundown", "黄昏", "傍晚", "日落", "夕阳")),
    ("dawn", ("dawn", "sunrise", "daybreak", "first light", "黎明", "日出", "破晓", "拂晓")),
    ("morning", ("morning", "早晨", "清晨", "上午", "早上")),
    ("afternoon", ("afternoon", "下午", "午后")),
    ("day", ("noon", "midday", "daytime", "白天", "中午", "正午")),
)


def time_of_day_from_words(name: str, description: str = "") -> str | None:
    """The time of day the scene's words name (name first, then description), else None."""
    for text in (name.lower(), description.lower()):
        for time, words in TIME_WORDS:
            if any(_has_phrase(text, w) for w in words):
                return time
    return None


ANIMAL_FRAMING_SCALE = 2.5  # a close size of an animal shows this many times what it shows of a person's height

# Words that make a character an animal on four legs (English whole words, Chinese as written).
ANIMAL_WORDS: tuple[str, ...] = (
    "dog", "dogs", "puppy", "pup", "hound", "doggy", "cat", "kitten", "kitty", "horse", "pony", "foal", "fox", "wolf",
    "狗", "小狗", "犬", "狗狗", "猫", "小猫", "猫咪", "骏马", "小马", "马匹", "狐狸", "狼",
)


def character_kind(name: str, appearance: str, char_id: str = "") -> str:
    """'animal' when the character's appearance (else its name or id) names a four-legged animal, else 'person'."""
    for text in (appearance.lower(), name.lower(), char_id.lower().replace("_", " ")):
        if any(_has_phrase(text, w) for w in ANIMAL_WORDS):
            return "animal"
    return "person"


@dataclass(frozen=True)
class Sightline:
    """A camera and what it must see (its subject's head and aim point), from one frame of a shot."""

    eye: tuple[float, float, float]
    targets: tuple[tuple[float, float, float], ...]


PERSON_CLEARANCE_M = 0.35  # props keep this far from every place a character stands
CAMERA_CLEARANCE_M = 0.3  # ... and from every camera position


def _layout(kit: Kit, seed: int, lo: np.ndarray, hi: np.ndarray) -> list[tuple[str, list[PieceSpec]]]:
    """Every prop copy of the kit laid around the action box [lo, hi] (x, z): (prop name, its pieces)."""
    rng = np.random.default_rng(seed)
    centre = (lo + hi) / 2.0
    out: list[tuple[str, list[PieceSpec]]] = []
    for row in kit.rows:
        count = int(rng.integers(row.count[0], row.count[1] + 1))
        along_x = row.side in ("back", "front", "over")
        span_lo, span_hi = (lo[0], hi[0]) if along_x else (lo[1], hi[1])
        width = max(span_hi - span_lo + row.extend, row.spacing * (count - 1))
        count = max(count, min(row.count[1], int(width // row.spacing) + 1)) if row.extend else count
        mid = (span_lo + span_hi) / 2.0
        for k in range(count):
            t = mid + (k - (count - 1) / 2.0) * row.spacing
            if row.side == "back":
                x, z, yaw = t, lo[1] - row.offset, 0.0
            elif row.side == "front":
                x, z, yaw = t, hi[1] + row.offset, 180.0
            elif row.side == "left":
                x, z, yaw = lo[0] - row.offset, t, 90.0
            elif row.side == "right":
                x, z, yaw = hi[0] + row.offset, t, -90.0
            else:  # over the action, along x
                x, z, yaw = t, centre[1], 0.0
            colours = {role: options[int(rng.integers(len(options)))] for role, options in kit.palette.items()}
            c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
            pieces = []
            for kind, (px, py, pz), size, role in kit.props[row.prop]:
                wx, wz = x + c * px + s * pz, z - s * px + c * pz  # the prop's frame turned by yaw about +y
                pieces.append(PieceSpec(kind, row.prop.replace("_", " "), (round(wx, 6), py, round(wz, 6)), size,
                                        colours.get(role, (0.6, 0.6, 0.6)), yaw, glow=role in LIGHT_ROLES))
            out.append((row.prop, pieces))
    return out


def _inside(points: np.ndarray, piece: PieceSpec, margin: float) -> np.ndarray:
    """Which points (N, 3) lie in the piece's box grown by ``margin`` on every side: (N,) bool."""
    yaw = math.radians(piece.yaw)
    c, s = math.cos(yaw), math.sin(yaw)
    rel = points - np.array(piece.position)
    lx = c * rel[:, 0] - s * rel[:, 2]  # into the piece's frame (inverse yaw)
    lz = s * rel[:, 0] + c * rel[:, 2]
    w, h, d = piece.size
    return (np.abs(lx) <= w / 2 + margin) & (np.abs(lz) <= d / 2 + margin) & (rel[:, 1] >= -margin) & (
        rel[:, 1] <= h + margin)


def _crosses(eye: np.ndarray, target: np.ndarray, piece: PieceSpec) -> bool:
    """Whether the segment from ``eye`` to ``target`` passes through the piece's box (slab test)."""
    yaw = math.radians(piece.yaw)
    c, s = math.cos(yaw), math.sin(yaw)

    def local(p: np.ndarray) -> np.ndarray:
        rel = p - np.array(piece.position)
        return np.array([c * rel[0] - s * rel[2], rel[1], s * rel[0] + c * rel[2]])

    a, b = local(eye), local(target)
    w, h, d = piece.size
    lo, hi = np.array([-w / 2, 0.0, -d / 2]), np.array([w / 2, h, d / 2])
    t0, t1 = 0.0, 0.97  # stop short of the target itself
    direction = b - a
    for k in range(3):
        if abs(direction[k]) < 1e-12:
            if a[k] < lo[k] or a[k] > hi[k]:
                return False
            continue
        u0, u1 = (lo[k] - a[k]) / direction[k], (hi[k] - a[k]) / direction[k]
        t0, t1 = max(t0, min(u0, u1)), min(t1, max(u0, u1))
        if t0 > t1:
            return False
    return True


def _footprint(pieces: list[PieceSpec]) -> np.ndarray:
    """Ground points (K, 2) that hold every piece's footprint: the corners of its box turned by its yaw."""
    if not pieces:
        return np.zeros((0, 2))
    out = []
    for p in pieces:
        c, s = math.cos(math.radians(p.yaw)), math.sin(math.radians(p.yaw))
        for dx, dz in ((-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)):
            lx, lz = dx * p.size[0], dz * p.size[2]
            out.append((p.position[0] + c * lx + s * lz, p.position[2] - s * lx + c * lz))
    return np.array(out)  # (4 * len(pieces), 2)


def dress_set(name: str, description: str, seed: int, people: np.ndarray, cameras: np.ndarray,
              sightlines: tuple[Sightline, ...], kit: str | None = None) -> tuple[PieceSpec, ...]:
    """The scene's kit laid out around where the characters stand, clear of them and of the cameras,
    closed all round beyond the cameras by the kit's surround (walls and a ceiling, or facades, trees
    and a horizon: ``daotai.plan.surround``).

    ``people``: (N, 2) ground positions every character takes during the script; ``cameras``:
    (M, 3) every camera position; ``sightlines``: what each shot's camera must see; ``kit``: the
    kit the script names (scene.set), else the scene's words choose. A prop of the kit's rows that
    stands on someone's path, holds a camera or hides a subject is left out whole; the surround
    stands beyond every camera, so it never does.
    """
    chosen = choose_kit(name, description, kit).kit
    pts = np.asarray(people, np.float64).reshape(-1, 2)
    if len(pts) == 0:
        pts = np.zeros((1, 2))
    lo, hi = pts.min(axis=0) - 0.4, pts.max(axis=0) + 0.4
    feet = np.column_stack([pts[:, 0], np.zeros(len(pts)), pts[:, 1]])  # (N, 3)
    bodies = np.concatenate([feet, feet + [0.0, 1.0, 0.0]])  # a person from the floor up
    eyes = np.asarray(cameras, np.float64).reshape(-1, 3)
    kept: list[PieceSpec] = []
    for _, pieces in _layout(chosen, seed, lo, hi):
        if any(_inside(bodies, p, PERSON_CLEARANCE_M).any() or _inside(eyes, p, CAMERA_CLEARANCE_M).any()
               for p in pieces):
            continue
        if any(_crosses(np.array(sl.eye), np.array(t), p) for sl in sightlines for t in sl.targets for p in pieces):
            continue
        kept.extend(pieces)
    shell = build_surround(chosen.surround, seed, lo, hi, eyes, LIGHT_ROLES, _footprint(kept))
    kept.extend(PieceSpec(p.kind, p.name, p.position, p.size, p.colour, p.yaw, p.glow) for p in shell)
    return tuple(kept)


# ---------------------------------------------------------------- wardrobe from appearance


# Garment words and what they dress: "top" (shirt, sweater), "jacket" (an outer top), "coat"
# (an outer top with a long hem), "suit" (top and trousers alike), "dress" (top and skirt
# alike), "skirt", "bottom" (trousers), "jeans" (trousers, denim unless a colour is named),
# "shoes", "hat", "hair", "glasses", "sunglasses", "skin".
_GARMENTS_EN: dict[str, str] = {
    **dict.fromkeys(("shirt", "shirts", "tshirt", "tee", "blouse", "sweater", "jumper", "hoodie", "top",
                     "polo", "vest", "cardigan", "turtleneck", "sweatshirt", "tunic", "pullover"), "top"),
    **dict.fromkeys(("jacket", "blazer", "windbreaker", "bomber", "anorak"), "jacket"),
    **dict.fromkeys(("coat", "overcoat", "raincoat", "trenchcoat", "trench", "parka", "robe", "cloak",
                     "cape", "poncho", "mac"), "coat"),
    **dict.fromkeys(("suit", "uniform", "tracksuit", "jumpsuit", "overalls", "tuxedo", "scrubs"), "suit"),
    **dict.fromkeys(("dress", "gown", "cheongsam", "qipao", "sundress"), "dress"),
    **dict.fromkeys(("skirt", "miniskirt"), "skirt"),
    **dict.fromkeys(("trousers", "pants", "slacks", "shorts", "leggings", "chinos"), "bottom"),
    "jeans": "jeans",
    **dict.fromkeys(("shoes", "boots", "sneakers", "trainers", "heels", "sandals", "loafers"), "shoes"),
    **dict.fromkeys(("hat", "cap", "beanie", "helmet", "beret", "fedora"), "hat"),
    **dict.fromkeys(("hair", "haired"), "hair"),
    **dict.fromkeys(("glasses", "spectacles", "eyeglasses"), "glasses"),
    **dict.fromkeys(("sunglasses", "shades"), "sunglasses"),
    **dict.fromkeys(("skin", "skinned"), "skin"),
}
_GARMENTS_ZH: dict[str, str] = {
    **dict.fromkeys(("衬衫", "衬衣", "T恤", "t恤", "上衣", "毛衣", "卫衣", "背心", "马甲", "衣服", "衣"), "top"),
    **dict.fromkeys(("外套", "夹克", "西装外套"), "jacket"),
    **dict.fromkeys(("大衣", "风衣", "雨衣", "羽绒服", "长袍", "袍"), "coat"),
    **dict.fromkeys(("西装", "西服", "制服", "中山装", "运动服", "工作服", "校服"), "suit"),
    **dict.fromkeys(("连衣裙", "旗袍", "长裙"), "dress"),
    **dict.fromkeys(("裙子", "短裙", "半身裙", "裙"), "skirt"),
    **dict.fromkeys(("裤子", "长裤", "短裤", "裤"), "bottom"),
    "牛仔裤": "jeans",
    **dict.fromkeys(("鞋", "鞋子", "靴子", "靴", "运动鞋", "皮鞋"), "shoes"),
    **dict.fromkeys(("帽子", "帽", "头盔"), "hat"),
    **dict.fromkeys(("头发", "发"), "hair"),
    "眼镜": "glasses",
    "墨镜": "sunglasses",
    "皮肤": "skin",
}
# A single Chinese character names a garment only right after a colour ("红衣", "黑发"):
# elsewhere it is part of another word (沙发, 出发, 衣柜).
_ZH_NEEDS_COLOUR = frozenset(w for w in _GARMENTS_ZH if len(w) == 1)
# Other words that shape the figure: hair style, age (grey hair), build, a feminine figure
# (long hair unless short hair is named), skin tone.
_FLAGS: dict[str, str] = {
    **dict.fromkeys(("bald", "光头", "秃头"), "bald"),
    **dict.fromkeys(("ponytail", "长发", "马尾", "马尾辫", "辫子"), "long_hair"),
    **dict.fromkeys(("短发", "寸头"), "short_hair"),
    **dict.fromkeys(("old", "elderly", "aged", "grandfather", "grandmother", "grandpa", "grandma",
                     "老人", "老奶奶", "老爷爷", "老太太", "老头", "大爷", "大妈"), "elderly"),
    **dict.fromkeys(("heavy", "stocky", "fat", "chubby", "plump", "burly", "heavyset", "胖", "壮", "魁梧"),
                    "heavy"),
    **dict.fromkeys(("slim", "thin", "skinny", "slender", "lanky", "瘦", "苗条", "纤细"), "slim"),
    **dict.fromkeys(("woman", "women", "girl", "lady", "she", "actress", "mother", "waitress",
                     "女", "女孩", "女人", "女士", "姑娘", "妈妈", "小姐", "女生", "奶奶", "老奶奶", "老太太", "大妈"),
                    "feminine"),
    **dict.fromkeys(("blonde", "blond"), "blonde"),
    "brunette": "brunette",
    **dict.fromkeys(("redhead", "ginger"), "redhead"),
    **dict.fromkeys(("pale", "fair", "白皙"), "skin_light"),
    **dict.fromkeys(("tanned", "黝黑"), "skin_dark"),
}
# Chinese words that contain a garment or colour character but are neither.
_ZH_OTHER = ("沙发", "出发", "发现", "发生", "开发", "发展", "衣柜", "黑板", "白天", "红绿灯", "黄昏", "金属")
_BARRIERS_EN = frozenset(("and", "with", "or", "but", "while", "carrying", "holding"))
_BARRIERS_ZH = frozenset("，,、；;。.和与及跟但!！?？（）()")
_FILLERS_ZH = frozenset("的色之")
LOOK_BACK = 3  # words a colour may stand before its garment ("a blue cotton shirt")

SKIN_TONES: dict[str, RGB] = {
    "light": (0.96, 0.82, 0.72), "medium": (0.86, 0.66, 0.52), "dark": (0.52, 0.35, 0.25),
}
HAIR_COLOURS: dict[str, RGB] = {
    "blonde": (0.86, 0.72, 0.42), "brunette": (0.36, 0.22, 0.13), "redhead": (0.62, 0.25, 0.12),
    "grey": (0.70, 0.70, 0.70),
}
DENIM: RGB = (0.24, 0.34, 0.52)

# Hair named in these colours is hair-coloured, not paint-coloured ("golden hair", "金发", "red hair").
_HAIR_WORDS = {
    **dict.fromkeys(("gold", "golden", "yellow", "金", "金色", "黄", "黄色"), "blonde"),
    **dict.fromkeys(("red", "红", "红色", "orange"), "redhead"),
}


@dataclass(frozen=True)
class Wardrobe:
    """What a character's `appearance` says about the figure; None = not said (use the default).

    ``top`` is the outermost upper garment named (coat > jacket > suit or dress > shirt > a lone
    colour, "a woman in red"); ``one_piece`` means the top's colour continues below (suit, dress).
    """

    top: RGB | None = None
    bottom: RGB | None = None
    shoes: RGB | None = None
    hat: RGB | None = None
    hair: RGB | None = None
    skin: RGB | None = None
    silhouette: str = "plain"  # "plain", "coat" (long hem) or "dress" (skirt to the knee)
    skirt: bool = False  # the lower garment is a skirt
    one_piece: bool = False  # suit or dress: the bottom takes the top's colour unless named
    hat_worn: bool = False
    glasses: str | None = None  # None, "clear" or "dark"
    hair_style: str = "short"  # "short", "long" or "bald"
    build: float = 1.0  # width factor of torso and limbs (slim 0.88 … heavy 1.18)


def _shade(colour: RGB, modifier: str | None) -> RGB:
    """A colour lightened, darkened or brightened by the modifier before it."""
    c = np.asarray(colour, np.float64)
    if modifier == "light":
        c = c + (1.0 - c) * 0.45
    elif modifier == "dark":
        c = c * 0.55
    elif modifier == "bright":
        c = np.clip(c.mean() + (c - c.mean()) * 1.3, 0.0, 1.0)
    return (round(float(c[0]), 4), round(float(c[1]), 4), round(float(c[2]), 4))


def _zh_lexicon() -> dict[str, tuple[str, str]]:
    """Chinese words the appearance tokenizer knows: word -> (kind, value)."""
    from daotai.script.vocab import COLOUR_MODIFIERS, COLOUR_WORDS

    lex: dict[str, tuple[str, str]] = {w: ("other", w) for w in _ZH_OTHER}
    lex.update({w: ("colour", w) for w in COLOUR_WORDS if not w.isascii()})
    lex.update({w: ("modifier", m) for w, m in COLOUR_MODIFIERS.items() if not w.isascii()})
    lex.update({w: ("garment", g) for w, g in _GARMENTS_ZH.items()})
    lex.update({w: ("flag", f) for w, f in _FLAGS.items() if not w.isascii()})
    return lex


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) tokens of an appearance: colour, modifier, garment, flag, barrier or other."""
    from daotai.script.vocab import COLOUR_MODIFIERS, COLOUR_WORDS

    lex = _zh_lexicon()
    longest = max(len(w) for w in lex)
    out: list[tuple[str, str]] = []
    for m in re.finditer(r"[a-z]+|[^\sa-z0-9]", text.lower().replace("t-shirt", "tshirt")):
        word = m.group()
        if word.isascii() and word.isalpha():
            if word in COLOUR_WORDS and word not in ("blonde", "blond"):
                out.append(("colour", word))
            elif word in COLOUR_MODIFIERS:
                out.append(("modifier", COLOUR_MODIFIERS[word]))
            elif word in _GARMENTS_EN:
                out.append(("garment", _GARMENTS_EN[word]))
            elif word in _FLAGS:
                out.append(("flag", _FLAGS[word]))
            elif word in _BARRIERS_EN:
                out.append(("barrier", word))
            else:
                out.append(("other", word))
        else:
            out.append(("char", word))
    # Chinese runs: greedy longest match over the lexicon, character by character
    merged: list[tuple[str, str]] = []
    i = 0
    while i < len(out):
        if out[i][0] != "char":
            merged.append(out[i])
            i += 1
            continue
        j = i
        while j < len(out) and out[j][0] == "char":
            j += 1
        run = "".join(v for _, v in out[i:j])
        k = 0
        while k < len(run):
            for n in range(min(longest, len(run) - k), 0, -1):
                piece = run[k:k + n]
                if piece in lex:
                    kind, value = lex[piece]
                    if kind == "garment" and piece in _ZH_NEEDS_COLOUR and not (merged and merged[-1][0] == "colour"):
                        continue
                    merged.append((kind, value))
                    k += n
                    break
            else:
                ch = run[k]
                merged.append(("barrier", ch) if ch in _BARRIERS_ZH else ("filler", ch) if ch in _FILLERS_ZH
                              else ("other", ch))
                k += 1
        i = j
    return merged


_WEARING = frozenset(("in", "wearing", "dressed", "穿", "着", "身", "一身"))


def _after_wearing(tokens: list[tuple[str, str]], i: int) -> bool:
    """Whether the colour token at ``i`` follows a word of wearing ("in", "穿", "一身"), modifiers skipped."""
    j = i - 1
    while j >= 0 and tokens[j][0] in ("modifier", "filler"):
        j -= 1
    return j >= 0 and tokens[j][1] in _WEARING


def wardrobe_from_appearance(text: str) -> Wardrobe:
    """Garment colours, hair, skin, build and accessories named in an `appearance` (English or 中文)."""
    from daotai.script.vocab import COLOUR_WORDS

    tokens = _tokens(text)
    found: dict[str, RGB] = {}  # garment role -> colour named for it (first mention wins)
    words: dict[str, str] = {}  # garment role -> the colour word itself
    named: set[str] = set()  # garment roles mentioned at all
    flags: set[str] = set()
    used: set[int] = set()  # colour tokens claimed by a garment
    for i, (kind, value) in enumerate(tokens):
        if kind == "flag":
            flags.add(value)
        if kind != "garment":
            continue
        named.add(value)
        colour, modifier = None, None
        steps = 0
        for j in range(i - 1, -1, -1):
            k2, v2 = tokens[j]
            if k2 == "barrier" or (k2 == "garment" and steps > 0):
                break
            if k2 == "colour" and colour is None and j not in used:
                colour = v2
                used.add(j)
                if j > 0 and tokens[j - 1][0] == "modifier":
                    modifier = tokens[j - 1][1]
                break
            if k2 == "modifier" and value == "skin":
                modifier = v2
                break
            if k2 != "filler":
                steps += 1
            if steps >= LOOK_BACK:
                break
        if colour is not None and value not in found:
            found[value] = _shade(COLOUR_WORDS[colour], modifier)
            words[value] = colour
        elif value == "skin" and modifier is not None and "skin" not in found:
            found["skin"] = SKIN_TONES["light" if modifier == "light" else "dark"]
    loose = [  # a colour worn without a garment: "a woman in red", "一身黑", "穿着白色的"
        _shade(COLOUR_WORDS[v], tokens[i - 1][1] if i > 0 and tokens[i - 1][0] == "modifier" else None)
        for i, (k, v) in enumerate(tokens)
        if k == "colour" and i not in used and _after_wearing(tokens, i)
    ]
    top = next((found[r] for r in ("coat", "jacket", "suit", "dress", "top") if r in found), None)
    if top is None and not ({"coat", "jacket", "suit", "dress", "top"} & named) and loose:
        top = loose[0]  # "a woman in red"
    one_piece = bool({"suit", "dress"} & named)
    bottom = found.get("bottom") or found.get("jeans") or found.get("skirt")
    if bottom is None and "suit" in found:
        bottom = found["suit"]
    if bottom is None and "jeans" in named:
        bottom = DENIM
    hair = found.get("hair")
    if words.get("hair") in _HAIR_WORDS:
        hair = HAIR_COLOURS[_HAIR_WORDS[words["hair"]]]
    for word in ("blonde", "brunette", "redhead"):
        if hair is None and word in flags:
            hair = HAIR_COLOURS[word]
    if hair is None and "elderly" in flags:
        hair = HAIR_COLOURS["grey"]
    skin = found.get("skin")
    if skin is None and "skin_light" in flags:
        skin = SKIN_TONES["light"]
    if skin is None and "skin_dark" in flags:
        skin = SKIN_TONES["dark"]
    style = "short"
    if "bald" in flags:
        style = "bald"
    elif "long_hair" in flags or ("feminine" in flags and "short_hair" not in flags):
        style = "long"
    silhouette = "dress" if "dress" in named else "coat" if "coat" in named else "plain"
    build = 1.18 if "heavy" in flags else 0.88 if "slim" in flags else 1.0
    return Wardrobe(
        top=top, bottom=bottom, shoes=found.get("shoes"), hat=found.get("hat"), hair=hair, skin=skin,
        silhouette=silhouette, skirt="skirt" in named and "bottom" not in named and "jeans" not in named,
        one_piece=one_piece, hat_worn="hat" in named,
        glasses="dark" if "sunglasses" in named else "clear" if "glasses" in named else None,
        hair_style=style, build=build,
    )


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
