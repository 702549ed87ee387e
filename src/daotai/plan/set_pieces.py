"""The scene's kit laid out round the action: each prop of the kit's rows placed beside where the
characters stand, those in someone's path, over a camera or across a shot's sight line left out
whole, and the surround (``daotai.plan.surround``) closing the set beyond every camera.

The kits themselves are data (``daotai.plan.sets``); this module only lays one out. It is apart
from the staging because it places furniture around the people and cameras the staging chose,
and the previz and the plan's world read its pieces without caring how a camera was placed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daotai.plan.sets import Kit, choose_kit
from daotai.plan.surround import build_surround


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
