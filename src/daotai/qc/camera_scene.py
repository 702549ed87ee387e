"""The scene model of the camera check: what a planned camera's rays hit.

Planned image motion needs the depth of every tracked pixel. The geometric scene is a ground
plane, set pieces (``Solid``: unit boxes, cylinders and spheres placed by a matrix) and the
characters as vertical cylinders (``Cylinder``), everything else infinitely far
(``DepthModel``); the exact scene is a renderer's per-pixel depth (``DepthMap``). This module
holds those types and the ray casting through them, apart from the motion the check predicts
with them (daotai.qc.camera_planned) and from the subject's visibility, which casts the same
rays (daotai.qc.visibility).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from daotai.errors import PlanError

__all__ = [
    "Cylinder",
    "DepthMap",
    "DepthModel",
    "SceneModel",
    "Solid",
    "cast_rays",
    "check_cam",
    "cylinder_hits",
    "cylinder_span",
    "ground_hits",
    "solid_hits",
]


_EPS_T = 1e-6  # metres: hits closer than this to the ray origin are ignored (self hits)


@dataclass(frozen=True)
class Cylinder:
    """A vertical cylinder standing on the ground (a character proxy), in metres.

    The cylinder is where the character may be (arms swinging included): tracks that start on
    it are not trusted to follow the camera. ``body``, when given, is the surface rays stop at
    instead (a slimmer solid, e.g. the torso's elliptic section turned the way the character
    faces): in a close-up, where the character's own tracks have to be used, the wide
    cylinder would put the body several centimetres too near the lens.
    """

    center_x: float
    center_z: float
    radius: float
    height: float
    body: Solid | None = None

    def __post_init__(self) -> None:
        for name in ("center_x", "center_z", "radius", "height"):
            if not math.isfinite(getattr(self, name)):
                raise PlanError(f"Cylinder.{name}: {getattr(self, name)!r} must be finite")
        if self.radius <= 0:
            raise PlanError(f"Cylinder.radius: {self.radius!r} must be > 0 metres")
        if self.height <= 0:
            raise PlanError(f"Cylinder.height: {self.height!r} must be > 0 metres")
        if self.body is not None and not isinstance(self.body, Solid):
            raise PlanError(f"Cylinder.body: {self.body!r} must be a Solid or None")


@dataclass(frozen=True)
class Solid:
    """A set piece: a unit box / cylinder / sphere (extent ±0.5) placed by a 4x4 model matrix.

    Rays are intersected in the primitive's own space; an affine map keeps the ray
    parameter, so the distance found there is the distance along the world ray.
    """

    kind: str  # "box" | "cylinder" | "sphere"
    model: tuple[float, ...]  # 16 floats, row-major, unit primitive → world

    def __post_init__(self) -> None:
        if self.kind not in ("box", "cylinder", "sphere"):
            raise PlanError(f"Solid.kind: {self.kind!r} must be box, cylinder or sphere")
        matrix = np.asarray(self.model, dtype=np.float64)
        if matrix.shape != (16,) or not np.all(np.isfinite(matrix)):
            raise PlanError("Solid.model: must be 16 finite numbers (a row-major 4x4 matrix)")
        if abs(np.linalg.det(matrix.reshape(4, 4)[:3, :3])) < 1e-12:
            raise PlanError("Solid.model: the 3x3 part must be invertible")

    @staticmethod
    def placed(kind: str, base_centre: tuple[float, float, float], size: tuple[float, float, float],
               yaw_deg: float) -> "Solid":
        """A set piece standing on its base centre, ``size`` = (w, h, d) metres, yawed about +y."""
        x, y, z = base_centre
        w, h, d = size
        c, s_ = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
        rotation = np.array([[c, 0.0, s_], [0.0, 1.0, 0.0], [-s_, 0.0, c]])
        model = np.eye(4)
        model[:3, :3] = rotation @ np.diag([w, h, d])
        model[:3, 3] = (x, y + 0.5 * h, z)
        return Solid(kind, tuple(float(v) for v in model.ravel()))

    @cached_property
    def world_to_unit(self) -> tuple[np.ndarray, np.ndarray]:
        """The inverse placement as (3x3 linear part, (3,) translation): world → unit primitive.
        Worked out once per solid, not once per ray cast (a scene's set pieces meet every cast)."""
        inverse = np.linalg.inv(np.asarray(self.model, dtype=np.float64).reshape(4, 4))
        return inverse[:3, :3], inverse[:3, 3]


@lru_cache(maxsize=64)
def _world_to_unit_stack(solids: tuple[Solid, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(linears (K, 3, 3), shifts (K, 3)): each solid's world → unit map, as Solid.world_to_unit
    gives it (the batched inverse is the same per matrix). Cached: a shot's frames share their
    set pieces, and the scene model of every frame would otherwise stack them again."""
    inverse = np.linalg.inv(np.array([solid.model for solid in solids], dtype=np.float64).reshape(-1, 4, 4))
    return inverse[:, :3, :3], inverse[:, :3, 3]


_CAST_BLOCK_VALUES = 1 << 19  # float64 values per (K, N, 3) block of a batched cast: 4 MiB


def solid_hits(origin: np.ndarray, dirs: np.ndarray, solid: Solid) -> np.ndarray:
    """Distance along each world ray to the first hit on a placed unit primitive; inf if none."""
    linear, shift = solid.world_to_unit
    return _unit_hits(solid.kind, linear[None], shift[None], origin, dirs)[0]


def solids_hits(origin: np.ndarray, dirs: np.ndarray, solids: Sequence[Solid]) -> np.ndarray:
    """(K, N) distances along N world rays to each of K solids (rows in the order given); inf where
    missed. Solids of one kind are intersected together, the same numbers as :func:`solid_hits`."""
    hits = np.full((len(solids), len(dirs)), np.inf)
    rows: dict[str, list[int]] = {}
    for row, solid in enumerate(solids):
        rows.setdefault(solid.kind, []).append(row)
    block = max(1, _CAST_BLOCK_VALUES // max(1, 3 * len(dirs)))
    for kind, chosen in rows.items():
        for first in range(0, len(chosen), block):
            part = chosen[first:first + block]
            maps = [solids[row].world_to_unit for row in part]
            hits[part] = _unit_hits(kind, np.stack([m for m, _ in maps]), np.stack([v for _, v in maps]),
                                    origin, dirs)
    return hits


def solids_within_reach(origin: np.ndarray, dirs: np.ndarray, solids: Sequence[Solid], reach: float) -> np.ndarray:
    """(K,) bool: False only for a solid that no ray from ``origin`` along the unit ``dirs`` (N, 3) can
    hit nearer than ``reach`` metres, told from its bounding sphere alone (conservative: True may
    still miss). A sphere beyond the reach, or off the cone that holds every ray, is out of reach."""
    keep = np.ones(len(solids), dtype=bool)
    if not len(solids) or not len(dirs):
        return keep
    models = np.array([solid.model for solid in solids], dtype=np.float64).reshape(-1, 4, 4)
    centre = models[:, :3, 3] - origin  # (K, 3) from the ray origin
    # the unit primitive lies in the cube of half side 0.5: its corners bound every kind
    radius = 0.5 * np.linalg.norm(models[:, :3, :3], axis=1).sum(axis=1) * (1 + 1e-9)  # (K,) m
    distance = np.linalg.norm(centre, axis=1)
    axis = dirs.mean(axis=0)
    axis_norm = float(np.linalg.norm(axis))
    keep &= distance - radius <= reach
    if axis_norm > 1e-6:
        axis /= axis_norm
        cone = float(np.arccos(np.clip((dirs @ axis).min(), -1.0, 1.0)))  # rad: the widest ray off the axis
        outside = distance > radius
        with np.errstate(divide="ignore", invalid="ignore"):
            off_axis = np.arccos(np.clip(centre @ axis / distance, -1.0, 1.0))  # (K,) rad
            spread = np.arcsin(np.clip(radius / distance, 0.0, 1.0))
        keep &= ~outside | (off_axis <= cone + spread + 1e-6)
    return keep


def _unit_hits(kind: str, linears: np.ndarray, shifts: np.ndarray, origin: np.ndarray,
               dirs: np.ndarray) -> np.ndarray:
    """(K, N) distances along N world rays from ``origin`` (3,) with directions ``dirs`` (N, 3) to K
    unit primitives of one ``kind``, each given by its world → unit map (``linears`` (K, 3, 3),
    ``shifts`` (K, 3)); inf where a ray misses. An affine map keeps the ray parameter, so the
    distance found in the primitive's space is the distance along the world ray."""
    o = linears @ origin + shifts  # (K, 3) the ray origin in each primitive's space
    d = dirs @ linears.transpose(0, 2, 1)  # (K, N, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "sphere":
            a = np.einsum("kni,kni->kn", d, d)
            b = ((2.0 * d) @ o[:, :, None])[..., 0]  # matmul, not einsum: the same sums as one solid's
            c = (o[:, None, :] @ o[:, :, None])[:, :, 0] - 0.25  # (K, 1)
            disc = b * b - 4.0 * a * c
            root = np.sqrt(np.maximum(disc, 0.0))
            t0, t1 = (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)
            t = np.where(t0 > _EPS_T, t0, t1)
            return np.where((disc >= 0) & (t > _EPS_T), t, np.inf)
        if kind == "box":
            lo, hi = (-0.5 - o[:, None]) / d, (0.5 - o[:, None]) / d  # (K, N, 3) slab entry/exit per axis
            enter, leave = np.minimum(lo, hi), np.maximum(lo, hi)
            # fmax/fmin skip the NaN of a ray in a slab's plane, as nanmax/nanmin do; pairwise over
            # the three axes, as a reduction along a length-3 axis is several times slower
            near = np.fmax(np.fmax(enter[..., 0], enter[..., 1]), enter[..., 2])
            far = np.fmin(np.fmin(leave[..., 0], leave[..., 1]), leave[..., 2])
            t = np.where(near > _EPS_T, near, far)
            return np.where((far >= near) & (t > _EPS_T), t, np.inf)
        # cylinder: x² + z² ≤ 0.25 and |y| ≤ 0.5
        ox, oy, oz = o[:, 0:1], o[:, 1:2], o[:, 2:3]  # (K, 1) each
        dx, dy, dz = d[..., 0], d[..., 1], d[..., 2]  # (K, N) each
        best = np.full(dx.shape, np.inf)
        a = dx**2 + dz**2
        b = 2.0 * (ox * dx + oz * dz)
        c = ox**2 + oz**2 - 0.25
        disc = b * b - 4.0 * a * c
        root = np.sqrt(np.maximum(disc, 0.0))
        for sign in (-1.0, 1.0):
            t = (-b + sign * root) / (2.0 * a)
            y = oy + t * dy
            ok = (disc >= 0) & (a > 0) & (t > _EPS_T) & (np.abs(y) <= 0.5)
            best = np.where(ok & (t < best), t, best)
        for cap in (-0.5, 0.5):
            t = (cap - oy) / dy
            px, pz = ox + t * dx, oz + t * dz
            ok = np.isfinite(t) & (t > _EPS_T) & (px * px + pz * pz <= 0.25)
            best = np.where(ok & (t < best), t, best)
        return best


@dataclass(frozen=True)
class DepthModel:
    """Scene geometry used to predict image motion: ground plane, cylinders, far limit."""

    ground_y: float = 0.0
    far_m: float = 1e4
    occluders: tuple[Cylinder | Solid, ...] = ()

    def __post_init__(self) -> None:
        if not math.isfinite(self.ground_y):
            raise PlanError(f"DepthModel.ground_y: {self.ground_y!r} must be finite")
        if not (self.far_m > 0):
            raise PlanError(f"DepthModel.far_m: {self.far_m!r} must be > 0 metres")
        occluders = tuple(self.occluders)
        for i, cyl in enumerate(occluders):
            if not isinstance(cyl, (Cylinder, Solid)):
                raise PlanError(f"DepthModel.occluders[{i}]: {cyl!r} must be a Cylinder or a Solid")
        object.__setattr__(self, "occluders", occluders)

    @cached_property
    def solids_by_kind(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The model's solids (a figure's body standing in for its cylinder) as stacked world → unit
        maps per kind: {kind: (linears (K, 3, 3), shifts (K, 3))}, for one vectorised cast over all."""
        groups: dict[str, list[Solid]] = {}
        for occluder in self.occluders:
            solid = occluder.body if isinstance(occluder, Cylinder) else occluder
            if isinstance(solid, Solid):
                groups.setdefault(solid.kind, []).append(solid)
        return {kind: _world_to_unit_stack(tuple(solids)) for kind, solids in groups.items()}


@dataclass(frozen=True, eq=False)
class DepthMap:
    """Exact per-pixel depth of one frame (e.g. a renderer's depth control channel).

    ``depth_m`` is the distance along the camera's −z axis in metres at each pixel centre,
    ``inf`` for the sky (or anything too far to tell from it). ``exclude`` marks pixels that
    move on their own (a walking character): tracks starting on or next to them are not used.
    The map may have another size than the frames; positions are scaled to it.
    """

    depth_m: np.ndarray  # (H, W) float32 metres, inf = sky
    exclude: np.ndarray | None = None  # (H, W) bool, True = moves independently of the camera

    def __post_init__(self) -> None:
        depth = np.asarray(self.depth_m, dtype=np.float32)
        if depth.ndim != 2 or min(depth.shape) < 2:
            raise PlanError(f"DepthMap.depth_m: shape {depth.shape} must be (H, W), both >= 2")
        if np.isnan(depth).any() or (depth <= 0).any():
            raise PlanError("DepthMap.depth_m: depths must be > 0 metres (inf for sky), not NaN")
        object.__setattr__(self, "depth_m", depth)
        if self.exclude is not None:
            exclude = np.asarray(self.exclude, dtype=bool)
            if exclude.shape != depth.shape:
                raise PlanError(f"DepthMap.exclude: shape {exclude.shape} must match depth_m's "
                                f"{depth.shape}")
            object.__setattr__(self, "exclude", exclude)

    @staticmethod
    def from_millimetres(depth_mm: np.ndarray, exclude: np.ndarray | None = None,
                         sky_code: int = 65535) -> "DepthMap":
        """A map from a 16-bit control frame: millimetres, ``sky_code`` = sky / too far."""
        mm = np.asarray(depth_mm)
        if mm.dtype != np.uint16:
            raise PlanError(f"depth_mm: dtype {mm.dtype} must be uint16 millimetres")
        # 0 mm would be a surface on the lens; clamp it to 1 mm rather than divide by zero.
        depth = np.maximum(mm, 1).astype(np.float32) * np.float32(1e-3)  # (H, W) metres
        depth[mm == sky_code] = np.inf
        return DepthMap(depth, exclude)


SceneModel = DepthModel | DepthMap


def ground_hits(origin: np.ndarray, dirs: np.ndarray, ground_y: float) -> np.ndarray:
    """Distance along each unit ray to the plane y = ground_y; inf where it never gets there."""
    dy = dirs[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (ground_y - origin[1]) / dy  # (N,) metres
    return np.where(np.isfinite(t) & (t > _EPS_T), t, np.inf)


def cylinder_hits(origin: np.ndarray, dirs: np.ndarray, cyl: Cylinder,
                   ground_y: float) -> np.ndarray:
    """Distance along each unit ray to the first hit on a cylinder's side or top; inf if none."""
    ox, oz = origin[0] - cyl.center_x, origin[2] - cyl.center_z
    dx, dz, dy = dirs[:, 0], dirs[:, 2], dirs[:, 1]
    top = ground_y + cyl.height
    a = dx * dx + dz * dz
    b = 2.0 * (ox * dx + oz * dz)
    c = ox * ox + oz * oz - cyl.radius**2
    disc = b * b - 4.0 * a * c
    best = np.full(len(dirs), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(np.maximum(disc, 0.0))
        for sign in (-1.0, 1.0):  # nearer root first; the far one covers a camera inside
            t = (-b + sign * root) / (2.0 * a)
            y = origin[1] + t * dy
            ok = (disc >= 0) & (a > 0) & (t > _EPS_T) & (y >= ground_y) & (y <= top)
            best = np.where(ok & (t < best), t, best)
        t_cap = (top - origin[1]) / dy
        cx = ox + t_cap * dx
        cz = oz + t_cap * dz
        on_cap = np.isfinite(t_cap) & (t_cap > _EPS_T) & (cx * cx + cz * cz <= cyl.radius**2)
    return np.where(on_cap & (t_cap < best), t_cap, best)


def cast_rays(origin: np.ndarray, dirs: np.ndarray, model: DepthModel) -> np.ndarray:
    """Distance (m) along unit world rays to the first surface of the model; inf for misses."""
    origin = np.asarray(origin, dtype=np.float64).reshape(3)
    dirs = np.asarray(dirs, dtype=np.float64).reshape(-1, 3)  # (N, 3) unit vectors
    t = ground_hits(origin, dirs, model.ground_y)  # (N,) metres
    for occluder in model.occluders:
        if isinstance(occluder, Cylinder) and occluder.body is None:
            t = np.minimum(t, cylinder_hits(origin, dirs, occluder, model.ground_y))
    # every solid of a kind at once, in blocks that keep the (K, N, 3) arrays to a few MB
    block = max(1, _CAST_BLOCK_VALUES // max(1, 3 * len(dirs)))
    for kind, (linears, shifts) in model.solids_by_kind.items():
        for first in range(0, len(linears), block):
            hits = _unit_hits(kind, linears[first:first + block], shifts[first:first + block], origin, dirs)
            t = np.minimum(t, hits.min(axis=0, initial=np.inf))
    return np.where(t <= model.far_m, t, np.inf)


def cylinder_span(origin: np.ndarray, dirs: np.ndarray, cyl: Cylinder,
                   ground_y: float) -> tuple[np.ndarray, np.ndarray]:
    """Distances (N,) along unit rays where they enter and leave a cylinder's volume (side,
    top and ground); inf where they miss it."""
    ox, oz = origin[0] - cyl.center_x, origin[2] - cyl.center_z
    dx, dy, dz = dirs[:, 0], dirs[:, 1], dirs[:, 2]
    a = dx * dx + dz * dz
    b = 2.0 * (ox * dx + oz * dz)
    c = ox * ox + oz * oz - cyl.radius**2
    disc = b * b - 4.0 * a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(np.maximum(disc, 0.0))
        vertical = a < 1e-12  # a ray along y: inside the side for its whole length, or never
        side_in = np.where(vertical, np.where(c <= 0, -np.inf, np.inf), (-b - root) / (2.0 * a))
        side_out = np.where(vertical, np.where(c <= 0, np.inf, -np.inf), (-b + root) / (2.0 * a))
        side_in = np.where(vertical | (disc >= 0), side_in, np.inf)
        side_out = np.where(vertical | (disc >= 0), side_out, -np.inf)
        low, high = (ground_y - origin[1]) / dy, (ground_y + cyl.height - origin[1]) / dy
        flat = dy == 0
        inside_y = (ground_y <= origin[1]) & (origin[1] <= ground_y + cyl.height)
        slab_in = np.where(flat, np.where(inside_y, -np.inf, np.inf), np.minimum(low, high))
        slab_out = np.where(flat, np.where(inside_y, np.inf, -np.inf), np.maximum(low, high))
    t_in = np.maximum(np.maximum(side_in, slab_in), _EPS_T)
    t_out = np.minimum(side_out, slab_out)
    hit = t_out > t_in
    return np.where(hit, t_in, np.inf), np.where(hit, t_out, np.inf)


def check_cam(cam: np.ndarray, name: str) -> np.ndarray:
    """A validated (4, 4) float64 cam_to_world."""
    arr = np.asarray(cam, dtype=np.float64)
    if arr.shape != (4, 4):
        raise PlanError(f"{name}: shape {arr.shape} must be (4, 4) cam_to_world")
    if not np.all(np.isfinite(arr)):
        raise PlanError(f"{name}: cam_to_world must be finite")
    return arr
