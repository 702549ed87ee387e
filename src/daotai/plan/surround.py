"""Sets that surround the action: walls and a ceiling round an interior, dressing all round an exterior.

A kit's furniture stands in rows beside the action (``daotai.plan.set_pieces``); the surround closes
the set beyond it and beyond every camera the plan places, so a reverse over-the-shoulder, a
camera the script puts behind the actors or one that pans all the way round looks at set, never
at the grid and the sky. Interiors get four walls (with windows, doors, boards on their inner
faces) and a ceiling; exteriors get facades, trees, a parapet or the sea on every side and a far
horizon ring (a skyline, hills, headlands) above it.

Pure functions of plain numbers; metres, degrees, world y up, ground at y = 0 (docs/conventions.md).
Sides as in the kits' rows: back is -z, front +z, left -x, right +x; a prop's own +z faces the action.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

RGB = tuple[float, float, float]
PropPart = tuple[str, tuple[float, float, float], tuple[float, float, float], str]  # kind, base centre, size, role

SURROUND_MARGIN_M = 0.5  # walls and dressing stand at least this far beyond the farthest camera
WALL_THICKNESS_M = 0.2
CEILING_THICKNESS_M = 0.12
CEILING_LIGHT_SPACING_M = 3.0  # a ceiling light panel every this many metres, each way ...
CEILING_LIGHTS_MAX = 6  # ... at most this many along a side
HORIZON_SEGMENTS = 16  # pieces of the far horizon ring
SIDES = ("back", "front", "left", "right")
_YAW = MappingProxyType({"back": 0.0, "front": 180.0, "left": 90.0, "right": -90.0})  # prop +z toward the action


@dataclass(frozen=True)
class Band:
    """Copies of ``prop`` along sides of the surround, facing the action.

    In a prop's frame z = 0 is the surround line (a wall's inner face, a facade's front) and +z
    points into the set: wall fixtures stand a few centimetres proud of it, facades behind it.
    """

    name: str
    prop: tuple[PropPart, ...]
    spacing: float  # metres between neighbours along a side
    sides: tuple[str, ...] = SIDES
    inset: float = 0.0  # metres the band stands back behind the surround line (a second row of trees)
    stagger: float = 0.0  # shift along the side, as a share of ``spacing`` (rows of trees out of step)
    fill: bool = False  # copies reach past both ends of a side (facades, trees: no gap at the corners)


@dataclass(frozen=True)
class Horizon:
    """A ring of pieces far out round the set: a skyline, hills, headlands (heights drawn from the seed)."""

    role: str
    heights: tuple[float, float]  # metres, lowest and highest
    radius: float = 90.0  # metres from the action centre (further when the cameras reach further)
    depth: float = 10.0  # metres


@dataclass(frozen=True)
class Surround:
    """How a kit closes the set all round: walls and a ceiling, or bands of dressing and a horizon."""

    reach: float  # the surround line stands at least this far beyond the action box (the set's own size)
    walls: bool  # four walls (an interior; also a car's body)
    ceiling: float | None  # height of a ceiling or canopy at least, metres; None = open sky
    bands: tuple[Band, ...]
    palette: Mapping[str, tuple[RGB, ...]]  # role -> colours; each copy draws one from the seed
    horizon: Horizon | None = None

    @property
    def interior(self) -> bool:
        return self.walls


@dataclass(frozen=True)
class ShellPiece:
    """One primitive of the surround, as the planner lays set pieces (base centre, size, yaw)."""

    kind: str
    name: str
    position: tuple[float, float, float]
    size: tuple[float, float, float]
    colour: RGB
    yaw: float = 0.0
    glow: bool = False


def surround_bounds(action_lo: np.ndarray, action_hi: np.ndarray, cameras: np.ndarray, reach: float,
                    props: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The surround line (x, z) lo and hi: ``reach`` beyond the action box, ``SURROUND_MARGIN_M`` beyond
    every camera, and outside every ground point ``props`` (K, 2) of the kit's own furniture."""
    lo, hi = action_lo - reach, action_hi + reach
    if props is not None and len(props):
        lo = np.minimum(lo, np.asarray(props, np.float64).min(axis=0))
        hi = np.maximum(hi, np.asarray(props, np.float64).max(axis=0))
    eyes = np.asarray(cameras, np.float64).reshape(-1, 3)[:, [0, 2]]  # (M, 2) ground positions
    if len(eyes):
        lo = np.minimum(lo, eyes.min(axis=0) - SURROUND_MARGIN_M)
        hi = np.maximum(hi, eyes.max(axis=0) + SURROUND_MARGIN_M)
    return lo, hi


def ceiling_height(surround: Surround, cameras: np.ndarray) -> float | None:
    """The ceiling's underside: the kit's height, raised to stay ``SURROUND_MARGIN_M`` above the highest camera."""
    if surround.ceiling is None:
        return None
    eyes = np.asarray(cameras, np.float64).reshape(-1, 3)
    top = float(eyes[:, 1].max()) + SURROUND_MARGIN_M if len(eyes) else 0.0
    return max(surround.ceiling, top)


def _side_frame(side: str, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float, float, float]:
    """(start, end) along a side, the line's fixed coordinate and its yaw."""
    if side == "back":
        return lo[0], hi[0], lo[1], _YAW[side]
    if side == "front":
        return lo[0], hi[0], hi[1], _YAW[side]
    if side == "left":
        return lo[1], hi[1], lo[0], _YAW[side]
    return lo[1], hi[1], hi[0], _YAW[side]


def _placed(side: str, along: float, line: float, back: float) -> tuple[float, float]:
    """World (x, z) of a point ``along`` a side, ``back`` metres behind its line (away from the action)."""
    if side == "back":
        return along, line - back
    if side == "front":
        return along, line + back
    if side == "left":
        return line - back, along
    return line + back, along


def _prop_pieces(name: str, prop: tuple[PropPart, ...], origin: tuple[float, float], yaw: float,
                 colours: Mapping[str, RGB], light_roles: frozenset[str]) -> list[ShellPiece]:
    """The parts of one prop copy turned by ``yaw`` about +y and moved to ``origin`` (x, z)."""
    c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
    out = []
    for kind, (px, py, pz), size, role in prop:
        wx, wz = origin[0] + c * px + s * pz, origin[1] - s * px + c * pz
        out.append(ShellPiece(kind, name, (round(wx, 6), py, round(wz, 6)), size,
                              colours.get(role, (0.6, 0.6, 0.6)), yaw, glow=role in light_roles))
    return out


def build_surround(surround: Surround, seed: int, action_lo: np.ndarray, action_hi: np.ndarray,
                   cameras: np.ndarray, light_roles: frozenset[str],
                   props: np.ndarray | None = None) -> tuple[ShellPiece, ...]:
    """Every piece that closes the set round the action box [lo, hi] (x, z), the ``cameras`` (M, 3) and
    the ground points ``props`` (K, 2) of the furniture laid out (a row's lamp posts stay in the street).

    Walls (inner faces on the surround line, running past the corners so no seam shows), a
    ceiling over all of it, the bands of fixtures or dressing on every side they name, and the
    horizon ring. Colours are drawn from ``seed``: the same script always gets the same set.
    """
    rng = np.random.default_rng([seed, 0x5E7])
    lo, hi = surround_bounds(np.asarray(action_lo, np.float64), np.asarray(action_hi, np.float64), cameras,
                             surround.reach, props)
    centre = (lo + hi) / 2.0
    span = hi - lo
    roof = ceiling_height(surround, cameras)

    def pick(role: str) -> RGB:
        options = surround.palette.get(role, ((0.6, 0.6, 0.6),))
        return options[int(rng.integers(len(options)))]

    out: list[ShellPiece] = []
    if surround.walls:
        height = roof if roof is not None else 3.0
        wall = pick("wall")
        t = WALL_THICKNESS_M
        for side in SIDES:
            start, end, line, yaw = _side_frame(side, lo, hi)
            x, z = _placed(side, (start + end) / 2.0, line, t / 2.0)
            length = end - start + 2.0 * t  # past both corners
            out.append(ShellPiece("box", "wall", (round(x, 6), 0.0, round(z, 6)), (length, height + 0.02, t), wall, yaw))
    if roof is not None:
        cover = span + 2.0 * WALL_THICKNESS_M
        out.append(ShellPiece("box", "ceiling", (round(centre[0], 6), roof, round(centre[1], 6)),
                              (cover[0], CEILING_THICKNESS_M, cover[1]), pick("ceiling")))
        lamp = pick("lamp")
        nx, nz = (min(CEILING_LIGHTS_MAX, max(1, int(s // CEILING_LIGHT_SPACING_M))) for s in span)
        for i in range(nx):
            for k in range(nz):
                x = lo[0] + span[0] * (i + 0.5) / nx
                z = lo[1] + span[1] * (k + 0.5) / nz
                out.append(ShellPiece("box", "ceiling light", (round(x, 6), roof - 0.04, round(z, 6)),
                                      (0.6, 0.04, 0.6), lamp, glow=True))
    for band in surround.bands:
        for side in band.sides:
            start, end, line, yaw = _side_frame(side, lo, hi)
            length = end - start
            # a filled band runs a copy past each corner; fixtures fit whole copies on their wall
            count = int(math.ceil(length / band.spacing)) + 2 if band.fill else max(1, int(length // band.spacing))
            mid = (start + end) / 2.0 + band.stagger * band.spacing
            for k in range(count):
                along = mid + (k - (count - 1) / 2.0) * band.spacing
                colours = {role: pick(role) for role in surround.palette}
                origin = _placed(side, along, line, band.inset)
                out.extend(_prop_pieces(band.name, band.prop, origin, yaw, colours, light_roles))
    if surround.horizon is not None:
        h = surround.horizon
        radius = max(h.radius, 0.5 * float(np.hypot(*span)) + 2.0 * h.depth)
        width = 2.0 * radius * math.tan(math.pi / HORIZON_SEGMENTS) + 1.0  # each chord, overlapping its neighbours
        for k in range(HORIZON_SEGMENTS):
            yaw = 360.0 * k / HORIZON_SEGMENTS
            a = math.radians(yaw)
            x, z = centre[0] - math.sin(a) * (radius + h.depth / 2.0), centre[1] - math.cos(a) * (radius + h.depth / 2.0)
            height = float(rng.uniform(*h.heights))
            out.append(ShellPiece("box", "horizon", (round(x, 6), 0.0, round(z, 6)), (width, round(height, 3), h.depth),
                                  pick(h.role), yaw))
    return tuple(out)
