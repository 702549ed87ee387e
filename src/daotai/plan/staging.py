"""Staging: where the camera starts (framing + angle + subject) and what stands on the set.

Pure functions; distances in metres, angles in degrees, world y up (docs/conventions.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from daotai.plan.camera import look_at, make_pose


@dataclass(frozen=True)
class FramingRule:
    """How much of a standing subject fills the frame height, and where the camera aims."""

    visible_m: float  # subject height that fills the frame vertically, for a 1.75 m person
    aim_fraction: float  # aim point height as a fraction of the subject's height
    scale_with_height: bool = True  # tight shots scale with the person; wide shots with the set


FRAMING_RULES = MappingProxyType(
    {
        "extreme_close_up": FramingRule(0.22, 0.93),
        "close_up": FramingRule(0.45, 0.90),
        "medium_close_up": FramingRule(0.75, 0.83),
        "medium": FramingRule(1.10, 0.74),
        "medium_full": FramingRule(1.50, 0.64),
        "full": FramingRule(2.20, 0.52),
        "wide": FramingRule(5.50, 0.50, scale_with_height=False),
        "extreme_wide": FramingRule(16.0, 0.45, scale_with_height=False),
    }
)

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
    toward_camera = np.array([math.sin(facing), 0.0, math.cos(facing)])  # facing 0 → +z
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


@dataclass(frozen=True)
class PieceSpec:
    kind: str
    name: str
    position: tuple[float, float, float]
    size: tuple[float, float, float]
    colour: tuple[float, float, float]
    yaw: float = 0.0


def _piece(kind: str, name: str, x: float, z: float, w: float, h: float, d: float, colour, yaw: float = 0.0):
    return PieceSpec(kind, name, (x, 0.0, z), (w, h, d), tuple(colour), yaw)


# Block-outs for common locations, placed behind the subjects (they face +z, toward the
# default camera) so they read as background. Keyword → pieces.
_SET_PRESETS: dict[str, tuple[PieceSpec, ...]] = {
    "office": (
        _piece("box", "desk", -1.8, -1.6, 1.4, 0.75, 0.7, (0.55, 0.42, 0.30)),
        _piece("box", "desk", 1.9, -1.8, 1.4, 0.75, 0.7, (0.55, 0.42, 0.30)),
        _piece("box", "bookshelf", 0.0, -3.6, 2.2, 2.0, 0.4, (0.45, 0.35, 0.28)),
        _piece("box", "window wall", 0.0, -4.2, 8.0, 3.0, 0.1, (0.78, 0.80, 0.84)),
        _piece("cylinder", "plant", 2.8, -3.0, 0.4, 1.1, 0.4, (0.25, 0.55, 0.30)),
    ),
    "street": (
        _piece("box", "building", -6.0, -6.0, 5.0, 9.0, 6.0, (0.62, 0.58, 0.55)),
        _piece("box", "building", 6.5, -7.0, 6.0, 12.0, 6.0, (0.55, 0.57, 0.62)),
        _piece("box", "building", 0.0, -14.0, 7.0, 7.0, 5.0, (0.66, 0.60, 0.52)),
        _piece("cylinder", "lamp post", -2.5, -2.5, 0.12, 4.0, 0.12, (0.25, 0.25, 0.28)),
        _piece("cylinder", "lamp post", 2.5, -2.5, 0.12, 4.0, 0.12, (0.25, 0.25, 0.28)),
    ),
    "park": (
        _piece("cylinder", "tree trunk", -3.0, -4.0, 0.35, 2.2, 0.35, (0.42, 0.30, 0.20)),
        _piece("sphere", "tree crown", -3.0, -4.0, 2.4, 2.4, 2.4, (0.25, 0.55, 0.28)),
        _piece("cylinder", "tree trunk", 3.5, -6.0, 0.4, 2.5, 0.4, (0.42, 0.30, 0.20)),
        _piece("sphere", "tree crown", 3.5, -6.0, 2.8, 2.8, 2.8, (0.22, 0.50, 0.25)),
        _piece("box", "bench", 1.2, -2.2, 1.6, 0.45, 0.5, (0.50, 0.36, 0.24)),
    ),
    "room": (
        _piece("box", "sofa", -1.5, -2.2, 2.0, 0.8, 0.9, (0.45, 0.40, 0.55)),
        _piece("box", "table", 1.3, -1.5, 1.0, 0.7, 0.8, (0.58, 0.45, 0.32)),
        _piece("box", "back wall", 0.0, -4.0, 8.0, 2.8, 0.1, (0.82, 0.78, 0.72)),
    ),
    "default": (
        _piece("box", "block", -2.2, -3.0, 1.0, 1.0, 1.0, (0.62, 0.62, 0.66)),
        _piece("cylinder", "column", 2.4, -3.5, 0.6, 2.5, 0.6, (0.66, 0.64, 0.60)),
        _piece("box", "block", 0.6, -5.5, 2.0, 1.6, 1.0, (0.58, 0.60, 0.64)),
    ),
}

_SET_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("office", ("office", "desk", "studio", "workplace", "办公", "公司", "工作室")),
    ("street", ("street", "road", "city", "alley", "town", "market", "街", "路", "城市", "巷", "市场")),
    ("park", ("park", "garden", "forest", "field", "outdoor", "公园", "花园", "森林", "草地", "树林")),
    ("room", ("room", "home", "house", "bedroom", "kitchen", "living", "apartment", "cafe", "房间", "家", "卧室", "厨房", "客厅", "咖啡")),
)


def set_pieces_for_scene(name: str, description: str = "") -> tuple[PieceSpec, ...]:
    """A few block-out pieces chosen from words in the scene's name/description."""
    text = f"{name} {description}".lower()
    for preset, words in _SET_KEYWORDS:
        if any(word in text for word in words):
            return _SET_PRESETS[preset]
    return _SET_PRESETS["default"]
