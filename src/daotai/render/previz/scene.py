"""What the previz rasteriser draws: set pieces, figures, environment, per-frame state.

Plain frozen dataclasses of floats and tuples (only ``FrameState`` carries a numpy array),
validated on construction so a bad value fails here with the field named, not deep inside
OpenGL. Units and axes follow docs/conventions.md: metres, degrees, y up, ground at y = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from daotai.errors import BackendError
from daotai.plan.geometry import FAR_M, NEAR_M

RGB = tuple[float, float, float]
Vec3 = tuple[float, float, float]

SET_PIECE_KINDS: tuple[str, ...] = ("box", "cylinder", "sphere")


def _check_rgb(where: str, value: RGB) -> None:
    """Raise unless ``value`` is three finite floats in 0..1."""
    if len(value) != 3 or not all(math.isfinite(c) and 0.0 <= c <= 1.0 for c in value):
        raise BackendError(f"{where}: {value!r} must be three floats in 0..1 (r, g, b)")


def _check_finite(where: str, value: tuple[float, ...], n: int) -> None:
    """Raise unless ``value`` is ``n`` finite floats."""
    if len(value) != n or not all(math.isfinite(c) for c in value):
        raise BackendError(f"{where}: {value!r} must be {n} finite numbers")


@dataclass(frozen=True)
class SetPiece:
    """A static prop: box, cylinder or sphere (ellipsoid) standing on its base centre."""

    kind: Literal["box", "cylinder", "sphere"]
    position: Vec3  # base centre (x, y, z) in metres; y = 0 stands on the ground
    size: Vec3  # (width along x, height along y, depth along z) in metres, before yaw
    colour: RGB
    yaw_deg: float = 0.0  # rotation about +y, same sense as a figure's facing
    glow: bool = False  # a practical light: lit, with a pool of light under it, where the environment has practicals

    def __post_init__(self) -> None:
        if self.kind not in SET_PIECE_KINDS:
            raise BackendError(f"set piece kind: {self.kind!r} must be one of {', '.join(SET_PIECE_KINDS)}")
        _check_finite("set piece position", self.position, 3)
        _check_finite("set piece size", self.size, 3)
        if min(self.size) <= 0.0:
            raise BackendError(f"set piece size: {self.size!r} must be positive in every axis (metres)")
        _check_rgb("set piece colour", self.colour)
        if not math.isfinite(self.yaw_deg):
            raise BackendError(f"set piece yaw_deg: {self.yaw_deg!r} must be finite")


DEFAULT_SKIN: RGB = (0.86, 0.66, 0.52)
DEFAULT_HAIR: RGB = (0.17, 0.12, 0.09)
DEFAULT_TROUSERS: RGB = (0.25, 0.26, 0.31)
DEFAULT_SHOES: RGB = (0.16, 0.14, 0.13)
HAIR_STYLES: tuple[str, ...] = ("short", "long", "bald")
SILHOUETTES: tuple[str, ...] = ("plain", "coat", "dress")


@dataclass(frozen=True)
class Look:
    """How a figure is dressed: garment colours, hair, skin, build and accessories.

    ``top`` None means the figure's own ``colour``; ``bottom`` None means neutral trousers
    (or, for a one-piece suit or dress, the top's colour).
    """

    top: RGB | None = None
    bottom: RGB | None = None
    shoes: RGB = DEFAULT_SHOES
    skin: RGB = DEFAULT_SKIN
    hair: RGB = DEFAULT_HAIR
    hair_style: str = "short"  # "short", "long" (to the shoulders) or "bald"
    silhouette: str = "plain"  # "plain", "coat" (hem to mid-thigh) or "dress" (skirt to the knee)
    skirt: bool = False  # a skirt to the knee over the legs (bottom colour)
    one_piece: bool = False  # suit or dress: the bottom follows the top unless given
    hat: RGB | None = None  # a hat in this colour, or none
    glasses: RGB | None = None  # glasses with lenses of this colour, or none
    build: float = 1.0  # torso and limb width factor

    def __post_init__(self) -> None:
        for name in ("top", "bottom", "shoes", "skin", "hair", "hat", "glasses"):
            value = getattr(self, name)
            if value is not None:
                _check_rgb(f"look {name}", value)
        if self.hair_style not in HAIR_STYLES:
            raise BackendError(f"look hair_style: {self.hair_style!r} must be one of {', '.join(HAIR_STYLES)}")
        if self.silhouette not in SILHOUETTES:
            raise BackendError(f"look silhouette: {self.silhouette!r} must be one of {', '.join(SILHOUETTES)}")
        if not (math.isfinite(self.build) and 0.6 <= self.build <= 1.6):
            raise BackendError(f"look build: {self.build!r} must be in 0.6..1.6")


@dataclass(frozen=True)
class Figure:
    """A character's proxy figure at one frame: where it stands, where it faces, its stride."""

    char_id: str  # ASCII id, also the label fallback when the font lacks the label's glyphs
    label: str  # text drawn above the head (may be CJK)
    colour: RGB
    height_m: float
    position: tuple[float, float]  # (x, z) on the ground, metres
    facing_deg: float = 0.0  # yaw about +y; 0 faces +z, 90 faces +x
    walk_phase: float = 0.0  # radians of the gait cycle; 0 = legs together
    walking: bool = False  # when False the figure stands still whatever walk_phase says
    look: Look = Look()  # garments, hair, skin; the top defaults to ``colour``
    pose: str | None = None  # "run" (with walking), "sit", "talk", "point", "lean", "lie", "kneel", "hold"
    pose_phase: float = 0.0  # radians of the talking gesture cycle
    head_turn_deg: float = 0.0  # the head turned from the facing, + to the figure's left
    kind: str = "person"  # "person" or "animal" (drawn on four legs)
    pose_weight: float = 1.0  # how far into ``pose`` from standing (sitting down, getting up)
    held: str | None = None  # what the right hand holds (daotai.script.vocab.HAND_PROPS), whatever the pose
    pose_dir_deg: float = 0.0  # from the facing, + to the left: where a lean tilts, where a lying body's feet point
    rest_height_m: float = 0.0  # the top of what a lying body lies on (0: the floor)

    def __post_init__(self) -> None:
        if not self.char_id:
            raise BackendError("figure char_id: \"\" must be a non-empty id")
        _check_rgb(f"figure {self.char_id!r} colour", self.colour)
        if not (math.isfinite(self.height_m) and 0.05 <= self.height_m <= 50.0):
            raise BackendError(f"figure {self.char_id!r} height_m: {self.height_m!r} must be in 0.05..50 metres")
        _check_finite(f"figure {self.char_id!r} position", self.position, 2)
        if not (math.isfinite(self.facing_deg) and math.isfinite(self.walk_phase)):
            raise BackendError(
                f"figure {self.char_id!r} facing_deg/walk_phase: "
                f"{(self.facing_deg, self.walk_phase)!r} must be finite"
            )


@dataclass(frozen=True)
class Environment:
    """Sky, ground and light of a set; colours are display-referred RGB in 0..1."""

    sky_zenith: RGB
    sky_horizon: RGB
    ground_colour: RGB
    grid_colour: RGB
    grid_spacing_m: float = 1.0
    sun_direction: Vec3 = (0.4, 0.8, 0.45)  # points from the scene toward the light
    ambient: float = 0.4  # share of light that reaches surfaces facing away from the sun
    practicals: float = 0.0  # how strongly practical lights (lamps, lanterns, signs) glow: 0 by day, 1 at night

    def __post_init__(self) -> None:
        for name in ("sky_zenith", "sky_horizon", "ground_colour", "grid_colour"):
            _check_rgb(f"environment {name}", getattr(self, name))
        if not (math.isfinite(self.grid_spacing_m) and self.grid_spacing_m > 0.0):
            raise BackendError(f"environment grid_spacing_m: {self.grid_spacing_m!r} must be > 0 metres")
        _check_finite("environment sun_direction", self.sun_direction, 3)
        if math.hypot(*self.sun_direction) < 1e-6:
            raise BackendError(f"environment sun_direction: {self.sun_direction!r} must not be the zero vector")
        if not (math.isfinite(self.ambient) and 0.0 <= self.ambient <= 1.0):
            raise BackendError(f"environment ambient: {self.ambient!r} must be in 0..1")


# Palettes chosen to be told apart at a glance on a contact sheet. The ground is a muted,
# darker tone than the figures will be lit to, so proxies pop out of the set.
_PALETTES: dict[str, Environment] = {
    "dawn": Environment(
        sky_zenith=(0.29, 0.33, 0.56), sky_horizon=(0.97, 0.70, 0.55),
        ground_colour=(0.40, 0.36, 0.36), grid_colour=(0.53, 0.46, 0.45),
        sun_direction=(1.0, 0.16, 0.25), ambient=0.48,
    ),
    "morning": Environment(
        sky_zenith=(0.32, 0.54, 0.84), sky_horizon=(0.82, 0.89, 0.95),
        ground_colour=(0.43, 0.46, 0.39), grid_colour=(0.56, 0.59, 0.51),
        sun_direction=(0.65, 0.5, 0.45), ambient=0.42,
    ),
    "day": Environment(
        sky_zenith=(0.20, 0.43, 0.84), sky_horizon=(0.71, 0.83, 0.95),
        ground_colour=(0.44, 0.47, 0.41), grid_colour=(0.58, 0.61, 0.55),
        sun_direction=(0.3, 0.9, 0.35), ambient=0.38,
    ),
    "afternoon": Environment(
        sky_zenith=(0.27, 0.47, 0.79), sky_horizon=(0.91, 0.86, 0.72),
        ground_colour=(0.47, 0.44, 0.37), grid_colour=(0.60, 0.56, 0.47),
        sun_direction=(-0.6, 0.55, 0.35), ambient=0.40,
    ),
    "dusk": Environment(
        sky_zenith=(0.19, 0.17, 0.39), sky_horizon=(0.97, 0.49, 0.29),
        ground_colour=(0.31, 0.27, 0.29), grid_colour=(0.46, 0.37, 0.37),
        sun_direction=(-1.0, 0.12, -0.2), ambient=0.48, practicals=0.6,
    ),
    "night": Environment(
        sky_zenith=(0.02, 0.03, 0.09), sky_horizon=(0.11, 0.14, 0.25),
        ground_colour=(0.12, 0.13, 0.17), grid_colour=(0.23, 0.26, 0.35),
        sun_direction=(0.3, 0.7, -0.4), ambient=0.55, practicals=1.0,
    ),
    "interior": Environment(
        sky_zenith=(0.80, 0.78, 0.74), sky_horizon=(0.64, 0.61, 0.57),
        ground_colour=(0.52, 0.38, 0.26), grid_colour=(0.42, 0.30, 0.20),
        sun_direction=(0.2, 1.0, 0.35), ambient=0.55,
    ),
}
_ALIASES: dict[str, str] = {"noon": "day", "sunset": "dusk"}

TIMES_OF_DAY: tuple[str, ...] = tuple(sorted([*_PALETTES, *_ALIASES]))


def environment_for(time_of_day: str) -> Environment:
    """The built-in palette and light for a time of day ("dawn" … "night", "interior")."""
    key = time_of_day.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _PALETTES:
        raise BackendError(f"time_of_day: {time_of_day!r} must be one of {', '.join(TIMES_OF_DAY)}")
    return _PALETTES[key]


@dataclass(frozen=True, eq=False)  # identity equality: an ndarray field has no truth value
class FrameState:
    """Everything that changes per frame: the camera and where the figures are."""

    cam_to_world: np.ndarray = field(repr=False)  # (4, 4) float64 rigid transform, conventions.md
    fov_deg: float  # vertical field of view
    figures: tuple[Figure, ...] = ()

    def __post_init__(self) -> None:
        m = np.asarray(self.cam_to_world, dtype=np.float64)
        if m.shape != (4, 4) or not np.all(np.isfinite(m)):
            raise BackendError(f"cam_to_world: shape {m.shape} must be a finite (4, 4) matrix")
        if not np.allclose(m[3], (0.0, 0.0, 0.0, 1.0), atol=1e-6):
            raise BackendError(f"cam_to_world: bottom row {m[3].tolist()!r} must be [0, 0, 0, 1]")
        r = m[:3, :3]
        if not np.allclose(r.T @ r, np.eye(3), atol=1e-4) or np.linalg.det(r) < 0.0:
            raise BackendError("cam_to_world: the 3x3 part must be a rotation (orthonormal, det +1)")
        if not (math.isfinite(self.fov_deg) and 1.0 < self.fov_deg < 170.0):
            raise BackendError(f"fov_deg: {self.fov_deg!r} must be in (1, 170)")
        object.__setattr__(self, "cam_to_world", m)
        object.__setattr__(self, "figures", tuple(self.figures))


@dataclass(frozen=True)
class RenderSettings:
    """Output size and clip planes of the rasteriser."""

    width: int
    height: int
    near: float = NEAR_M  # clip planes, metres along the view axis (daotai.plan.geometry)
    far: float = FAR_M
    labels: bool = True
    supersample: int = 1  # render k x larger and area-average RGB down; 1 = off
    # Gaussian "lens softness" (sigma in pixels) on the finished RGB; 0 = off. Rasterised
    # edges are perfectly hard, and a hard edge between saturated colours is exactly what
    # 4:2:0 chroma loses: the previz backend uses 0.6 px (~2 ms at 1080p, ~2.5 dB of
    # encode PSNR). Depth and masks are never softened.
    soften_px: float = 0.0

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= 8192:
                raise BackendError(f"render {name}: {v!r} must be an integer in 1..8192 pixels")
        if not (math.isfinite(self.near) and math.isfinite(self.far) and 0.0 < self.near < self.far):
            raise BackendError(f"render near/far: {(self.near, self.far)!r} must satisfy 0 < near < far")
        if not (math.isfinite(self.soften_px) and 0.0 <= self.soften_px <= 3.0):
            raise BackendError(f"render soften_px: {self.soften_px!r} must be in 0..3 pixels")
        if not isinstance(self.supersample, int) or not 1 <= self.supersample <= 4:
            raise BackendError(f"render supersample: {self.supersample!r} must be an integer in 1..4")
        if max(self.width, self.height) * self.supersample > 16384:
            raise BackendError(
                f"render supersample: {self.supersample} x {max(self.width, self.height)} px "
                "exceeds 16384 px; lower the size or the supersample"
            )
