"""Camera adherence: does the video's camera move the way the plan says?

The plan gives every frame's ``cam_to_world`` (4x4) and vertical ``fov`` (degrees), following
docs/conventions.md. This module predicts the image motion those cameras imply for a simple
scene model (a ground plane plus optional vertical cylinders for the characters; everything
else is infinitely far), measures the image motion of the decoded video with sparse feature
tracks, and compares the two per frame pair and over the whole shot.

Pixel coordinates here follow the conventions (origin at the top-left *corner* of the image,
``u`` right, ``v`` down, ``cx = W / 2``), so the centre of pixel ``(i, j)`` is
``(i + 0.5, j + 0.5)``. OpenCV reports feature positions with pixel centres on integers; the
tracker shifts them by half a pixel before anything is compared.

What is excluded from the error statistics, per frame pair, in this order (``T`` is
``CameraCheckConfig.inlier_px`` converted to full-resolution pixels, 3 px by default):

0. corners whose tracking window holds one straight edge (``TrackerConfig.min_corner_ratio``):
   motion along an edge cannot be measured (the aperture problem);
1. tracks that Lucas-Kanade loses in either direction, that land outside the image, or whose
   forward-backward round trip misses the start by more than ``TrackerConfig.fb_max_px``;
2. tracks whose planned position is undefined (the point falls behind camera b);
3. tracks that start on a character of the depth model (its cylinder grown by
   ``character_margin``), because characters move on their own — unless fewer than
   ``min_tracks`` other tracks remain (a close-up), then they stay in, planned anywhere
   between the depths of their cylinder's near side and the scene behind it (the body lies
   somewhere in between);
4. tracks that do not share the shot-wide plan-vs-video disagreement (``agreeing_tracks``):
   "the video follows the plan" competes with a RANSAC similarity fitted from planned to
   measured end points; the winner's misses set a noise level and tracks missing it by more
   than three robust standard deviations (clamped to [T/3, T]) are dropped. A uniform
   disagreement — wrong direction, wrong speed, an unasked roll or zoom — is a similarity, so
   it stays in the error; a walker missing from the depth model, a track sliding along an
   occlusion edge or a mismatch disagrees on its own and is dropped.

The measured and planned components are least-squares similarities on the same tracks: the
inliers (threshold T) of a RANSAC similarity fitted to the measured motion of the kept tracks.
Each planned component is named after what drives it (_cause): the camera's turn, its zoom,
or its travel along one of its own axes; a component another driver causes (the picture of a
low-angle push-in slides down) is checked but named only when it is the main effect.
A frame pair left with fewer than ``TrackerConfig.min_tracks`` tracks (too little texture) is
skipped and counted.

Scene models: a geometric ``DepthModel`` (above), or a ``DepthMap`` per frame, the exact
view-axis depth of every pixel (a renderer's depth control channel). With a DepthMap a track
start is unprojected at the map's depth, bilinearly interpolated in inverse depth (exact on
planes; the sky, inverse depth 0, becomes a direction at infinity), and reprojected into
frame b. Steps 2 and 3 above then become:

2'. tracks on a depth discontinuity: the planned flow of the map's pixels within
    ``CameraCheckConfig.depth_edge_radius_px`` of the start departs from an affine field by
    more than ``depth_edge_flow_px`` (the tracker's window straddles an occlusion edge whose
    sides move apart, or a curved silhouette that slides over its surface); an edge with no
    parallax between its sides (pure rotation or zoom) excludes nothing;
3'. tracks within ``depth_edge_radius_px`` of a pixel marked in ``DepthMap.exclude`` (what
    moves on its own: walking characters, overlays drawn over the picture), with no close-up
    fallback: a pair left with too few other tracks is skipped.

Where step 2' leaves fewer than ``min_tracks`` tracks (a flat-shaded set has its corners on
outlines: a long-lens truck past desks kept under a tenth), the depth-edge tracks come back,
planned at the point of their neighbourhood's band of planned motions nearest the measured one
(either side of the edge may carry them); a move the wrong way or of another size misses the band.

``DEPTH_MAP_CONFIG`` is the configuration meant for DepthMap scenes (weaker corners kept).

Known limit: a moving object missing from the depth model that carries clearly more tracks
than the background can be taken for the background.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import cv2
import numpy as np

from daotai.errors import EncodeError, PlanError
from daotai.plan import geometry

__all__ = [
    "COMPONENTS",
    "DEPTH_MAP_CONFIG",
    "CameraAdherence",
    "CameraCheckConfig",
    "ComponentCheck",
    "Cylinder",
    "DepthMap",
    "DepthModel",
    "SceneModel",
    "Similarity",
    "TrackedPair",
    "Solid",
    "TrackerConfig",
    "Visibility",
    "agreeing_tracks",
    "cast_rays",
    "check_camera",
    "expected_flow",
    "fit_similarity",
    "focal_px",
    "subject_visibility",
    "track_pairs",
]

# Component names in the order they are reported; signs follow the camera grammar:
# horizontal + = the view moves right (pan right / truck right), px at the image centre;
# vertical   + = the view moves up (tilt up / pedestal up), px at the image centre;
# roll       + = positive roll (camera turns clockwise, picture counter-clockwise), degrees;
# scale      + = the picture grows (dolly in / zoom in), natural log of the scale factor.
COMPONENTS: tuple[str, ...] = ("horizontal", "vertical", "roll", "scale")
_UNITS = {"horizontal": "px", "vertical": "px", "roll": "deg", "scale": "log"}

_EPS_T = 1e-6  # metres: hits closer than this to the ray origin are ignored (self hits)


# --------------------------------------------------------------------------- scene model


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


def _solid_hits(origin: np.ndarray, dirs: np.ndarray, solid: Solid) -> np.ndarray:
    """Distance along each world ray to the first hit on a placed unit primitive; inf if none."""
    inverse = np.linalg.inv(np.asarray(solid.model, dtype=np.float64).reshape(4, 4))
    o = inverse[:3, :3] @ origin + inverse[:3, 3]  # (3,) in primitive space
    d = dirs @ inverse[:3, :3].T  # (N, 3), same ray parameter t as the world ray
    n = len(dirs)
    with np.errstate(divide="ignore", invalid="ignore"):
        if solid.kind == "sphere":
            a = np.einsum("ij,ij->i", d, d)
            b = 2.0 * d @ o
            c = float(o @ o) - 0.25
            disc = b * b - 4.0 * a * c
            root = np.sqrt(np.maximum(disc, 0.0))
            t0, t1 = (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)
            t = np.where(t0 > _EPS_T, t0, t1)
            return np.where((disc >= 0) & (t > _EPS_T), t, np.inf)
        if solid.kind == "box":
            lo, hi = (-0.5 - o) / d, (0.5 - o) / d  # (N, 3) slab entry/exit per axis
            near = np.nanmax(np.minimum(lo, hi), axis=1)
            far = np.nanmin(np.maximum(lo, hi), axis=1)
            t = np.where(near > _EPS_T, near, far)
            return np.where((far >= near) & (t > _EPS_T), t, np.inf)
        # cylinder: x² + z² ≤ 0.25 and |y| ≤ 0.5
        best = np.full(n, np.inf)
        a = d[:, 0] ** 2 + d[:, 2] ** 2
        b = 2.0 * (o[0] * d[:, 0] + o[2] * d[:, 2])
        c = o[0] ** 2 + o[2] ** 2 - 0.25
        disc = b * b - 4.0 * a * c
        root = np.sqrt(np.maximum(disc, 0.0))
        for sign in (-1.0, 1.0):
            t = (-b + sign * root) / (2.0 * a)
            y = o[1] + t * d[:, 1]
            ok = (disc >= 0) & (a > 0) & (t > _EPS_T) & (np.abs(y) <= 0.5)
            best = np.where(ok & (t < best), t, best)
        for cap in (-0.5, 0.5):
            t = (cap - o[1]) / d[:, 1]
            px, pz = o[0] + t * d[:, 0], o[2] + t * d[:, 2]
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


def focal_px(fov_deg: float, height: int) -> float:
    """Focal length in pixels for a vertical field of view: (H / 2) / tan(fov / 2)."""
    return geometry.focal_from_fov(fov_deg, height)


def _ground_hits(origin: np.ndarray, dirs: np.ndarray, ground_y: float) -> np.ndarray:
    """Distance along each unit ray to the plane y = ground_y; inf where it never gets there."""
    dy = dirs[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (ground_y - origin[1]) / dy  # (N,) metres
    return np.where(np.isfinite(t) & (t > _EPS_T), t, np.inf)


def _cylinder_hits(origin: np.ndarray, dirs: np.ndarray, cyl: Cylinder,
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
    t = _ground_hits(origin, dirs, model.ground_y)  # (N,) metres
    for occluder in model.occluders:
        if isinstance(occluder, Cylinder) and occluder.body is not None:
            occluder = occluder.body
        if isinstance(occluder, Solid):
            t = np.minimum(t, _solid_hits(origin, dirs, occluder))
        else:
            t = np.minimum(t, _cylinder_hits(origin, dirs, occluder, model.ground_y))
    return np.where(t <= model.far_m, t, np.inf)


def _project(cam: np.ndarray, fov_deg: float, points: np.ndarray, w: np.ndarray,
             width: int, height: int) -> np.ndarray:
    """Project homogeneous world points (X, w), w = 0 for directions, to pixels; NaN behind.

    The homogeneous form of ``geometry.project`` (agreement: tests/test_geometry.py): points
    at infinity (the sky) need no stand-in distance; rot^T serves as the inverse rotation.
    """
    rot, pos = cam[:3, :3], cam[:3, 3]
    local = (points - w[:, None] * pos) @ rot  # (N, 3) camera space: rot^T applied row-wise
    uv, depth = geometry.project_camera(local, geometry.intrinsics_from_fov(fov_deg, width, height))
    uv[depth <= 1e-9] = np.nan  # (N, 2) float64 px
    return uv


def _reproject(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
               points_uv: np.ndarray, width: int, height: int,
               model: DepthModel | None) -> np.ndarray:
    """Positions in frame b of frame a's pixels; model None puts every pixel at infinity."""
    intr = geometry.intrinsics_from_fov(fov_a, width, height)
    dirs = geometry.camera_rays(points_uv, intr) @ cam_a[:3, :3].T  # (N, 3) unit, world
    if model is None:
        t = np.full(len(dirs), np.inf)
    else:
        t = cast_rays(cam_a[:3, 3], dirs, model)
    hit = np.isfinite(t)
    # Hits become points (w = 1); misses stay directions (w = 0) so only rotation and zoom
    # move them, exactly like the sky in a real camera.
    points = np.where(hit[:, None], cam_a[:3, 3] + np.where(hit, t, 0.0)[:, None] * dirs, dirs)
    return _project(cam_b, fov_b, points, hit.astype(np.float64), width, height)


def _inverse_depth(depth: DepthMap) -> np.ndarray:
    """(H, W) float64 inverse depth in 1/m, 0 for the sky; made once per map (a frame pair asks
    for it five times: its planned flow, its edge screen and three of its causes)."""
    inverse = depth.__dict__.get("_inverse")
    if inverse is None:
        inverse = 1.0 / depth.depth_m.astype(np.float64)  # inf -> 0
        inverse.setflags(write=False)
        depth.__dict__["_inverse"] = inverse  # a frozen dataclass: cached beside its fields
    return inverse


def _bilinear(image: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Bilinear samples (N,) of an (H, W) array at array coordinates (N, 2), clamped inside."""
    h, w = image.shape
    x = np.clip(xy[:, 0], 0.0, w - 1.0)
    y = np.clip(xy[:, 1], 0.0, h - 1.0)
    x0 = np.minimum(np.floor(x).astype(np.int64), w - 2)
    y0 = np.minimum(np.floor(y).astype(np.int64), h - 2)
    fx, fy = x - x0, y - y0
    top = image[y0, x0] * (1 - fx) + image[y0, x0 + 1] * fx
    bottom = image[y0 + 1, x0] * (1 - fx) + image[y0 + 1, x0 + 1] * fx
    return top * (1 - fy) + bottom * fy


def _unproject(cam: np.ndarray, fov_deg: float, points_uv: np.ndarray, inverse: np.ndarray,
               width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Homogeneous world points (X (N, 3), w (N,)) of pixels at view-axis inverse depths.

    A pixel at view-axis depth z is the camera-space point z * (x_n, y_n, -1); scaled by
    1 / z that is ((x_n, y_n, -1), 1 / z), so the sky (1 / z = 0) is a direction, no division.
    The homogeneous form of ``geometry.unproject`` (agreement: tests/test_geometry.py).
    """
    intr = geometry.intrinsics_from_fov(fov_deg, width, height)
    local = geometry.unproject_camera(points_uv, 1.0, intr)  # (N, 3) camera space, z = -1
    world = local @ cam[:3, :3].T + inverse[:, None] * cam[:3, 3]  # (N, 3)
    return world, inverse


def _depth_map_reproject(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                         points_uv: np.ndarray, width: int, height: int,
                         depth: DepthMap) -> np.ndarray:
    """Positions (N, 2) in frame b of frame a's pixels placed at the depth map's depths."""
    inverse = _inverse_depth(depth)  # (h, w) 1/m
    scale = np.array([inverse.shape[1] / width, inverse.shape[0] / height])
    # Inverse depth is affine in (u, v) on any plane, so bilinear interpolation of it is
    # exact on flat surfaces; depth itself would bend between pixel centres.
    inv = _bilinear(inverse, points_uv * scale - 0.5)  # (N,) 1/m
    world, w = _unproject(cam_a, fov_a, points_uv, inv, width, height)
    return _project(cam_b, fov_b, world, w, width, height)


def _depth_map_screen(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                      points_uv: np.ndarray, width: int, height: int, depth: DepthMap,
                      radius_px: float, edge_flow_px: float
                      ) -> tuple[np.ndarray, np.ndarray, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """(edge, moving) masks (N,) for tracks starting at points_uv in frame a, and a function
    giving the band (low, high), each (N, 2) px, of the planned flows within ``radius_px`` (NaN
    where none is defined): what a track on an edge may do, following either side.

    ``edge``: the planned flow of the pixels within ``radius_px`` is no affine field (off by
    more than ``edge_flow_px`` somewhere): the track's window straddles an occlusion edge
    whose two sides move apart, or reaches behind camera b. ``moving``: an ``exclude`` pixel
    lies within ``radius_px``.
    """
    inverse = _inverse_depth(depth)  # (h, w) 1/m
    h, w = inverse.shape
    scale = np.array([w / width, h / height])
    reach = max(1, math.ceil(radius_px * float(scale.max())))  # map px
    steps = np.arange(-reach, reach + 1)
    offsets = np.stack(np.meshgrid(steps, steps), -1).reshape(-1, 2)  # (M, 2) map px
    centre = np.floor(points_uv * scale).astype(np.int64)  # (N, 2) pixel index (col, row)
    cells = centre[:, None, :] + offsets[None]  # (N, M, 2)
    # windows cut by the map's edge: their cells are clamped, so their design differs
    cut = ((cells[..., 0] < 0) | (cells[..., 0] > w - 1) | (cells[..., 1] < 0) | (cells[..., 1] > h - 1)).any(axis=1)
    cells[..., 0] = np.clip(cells[..., 0], 0, w - 1)
    cells[..., 1] = np.clip(cells[..., 1], 0, h - 1)
    n, m = cells.shape[:2]
    uv = ((cells + 0.5) / scale).reshape(-1, 2)  # (N * M, 2) frame px of the pixel centres
    world, wh = _unproject(cam_a, fov_a, uv, inverse[cells[..., 1], cells[..., 0]].ravel(),
                           width, height)
    flow = (_project(cam_b, fov_b, world, wh, width, height) - uv).reshape(n, m, 2)
    known = np.nan_to_num(flow)
    with np.errstate(invalid="ignore"):
        # An affine fit's values depend on its design only through the design's column space,
        # and a whole window's offsets from its track differ from the bare offsets by one shift,
        # which the constant column absorbs: one (3, M) pseudo-inverse serves every window that
        # the map's edge does not cut (one pseudo-inverse per window cost a third of the check).
        bare = np.concatenate([offsets / scale, np.ones((m, 1))], axis=1)  # (M, 3)
        fitted = bare @ (np.linalg.pinv(bare) @ known)  # (N, M, 2) affine fit
        if cut.any():
            rel = uv.reshape(n, m, 2)[cut] - points_uv[cut][:, None, :]  # (C, M, 2) px from the track
            design = np.concatenate([rel, np.ones((len(rel), m, 1))], axis=2)  # (C, M, 3)
            fitted[cut] = design @ (np.linalg.pinv(design) @ known[cut])
        residual = np.linalg.norm(flow - fitted, axis=2).max(axis=1)  # (N,) px; NaN behind b
    edge = ~(residual <= edge_flow_px)

    def band() -> tuple[np.ndarray, np.ndarray]:  # asked for by few pairs; its two passes cost a tenth of the check
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN neighbourhoods: behind camera b
            return np.nanmin(flow, axis=1), np.nanmax(flow, axis=1)  # (N, 2) each
    if depth.exclude is None:
        return edge, np.zeros(n, dtype=bool), band
    return edge, depth.exclude[cells[..., 1], cells[..., 0]].any(axis=1), band


def _check_cam(cam: np.ndarray, name: str) -> np.ndarray:
    """A validated (4, 4) float64 cam_to_world."""
    arr = np.asarray(cam, dtype=np.float64)
    if arr.shape != (4, 4):
        raise PlanError(f"{name}: shape {arr.shape} must be (4, 4) cam_to_world")
    if not np.all(np.isfinite(arr)):
        raise PlanError(f"{name}: cam_to_world must be finite")
    return arr


def _check_fov(fov: float, name: str) -> float:
    """A validated vertical fov in degrees."""
    value = float(fov)
    if not (1.0 < value < 170.0):
        raise PlanError(f"{name}: {value!r} must be in (1, 170) degrees")
    return value


def expected_flow(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                  points_uv: np.ndarray, width: int, height: int,
                  depth_model: SceneModel = DepthModel()) -> np.ndarray:
    """Planned pixel displacement (N, 2) from frame a to b of pixels (N, 2) of frame a."""
    cam_a, cam_b = _check_cam(cam_a, "cam_a"), _check_cam(cam_b, "cam_b")
    fov_a, fov_b = _check_fov(fov_a, "fov_a"), _check_fov(fov_b, "fov_b")
    uv = np.asarray(points_uv, dtype=np.float64)
    if uv.ndim != 2 or uv.shape[1] != 2:
        raise PlanError(f"points_uv: shape {uv.shape} must be (N, 2)")
    if isinstance(depth_model, DepthMap):
        return _depth_map_reproject(cam_a, fov_a, cam_b, fov_b, uv, width, height,
                                    depth_model) - uv
    return _reproject(cam_a, fov_a, cam_b, fov_b, uv, width, height, depth_model) - uv


# --------------------------------------------------------------------------- subject visibility


@dataclass(frozen=True)
class Visibility:
    """How much of a subject one frame shows, sampled on a pixel grid.

    ``region``: grid pixels whose ray meets the subject's cylinder (its proxy, a little wider
    than the body); of those, ``visible`` show the subject and ``covered`` show something in
    front of it. The rest show what is behind (the gap between an arm and the body) and count
    for neither. ``share`` = visible / (visible + covered), None when the subject is out of
    the frame. ``blocker``: who covers most of it (a character id, "scenery"), or None.
    """

    region: int
    visible: int
    covered: int
    blocker: str | None

    @property
    def share(self) -> float | None:
        seen = self.visible + self.covered
        return self.visible / seen if seen else None


def _subject_grid(width: int, height: int, step: int) -> np.ndarray:
    """(N, 2) pixel centres every ``step`` px, conventions' pixel coordinates."""
    us = np.arange(step / 2.0, width, step)
    vs = np.arange(step / 2.0, height, step)
    grid = np.stack(np.meshgrid(us, vs), -1).reshape(-1, 2)
    return grid


def subject_visibility(cam: np.ndarray, fov: float, width: int, height: int, subject: Cylinder,
                       others: Sequence[tuple[str, Cylinder | Solid]] = (),
                       mask: tuple[np.ndarray, int, Sequence[str]] | None = None,
                       depth_m: np.ndarray | None = None, step: int = 4,
                       ground_y: float = 0.0) -> Visibility:
    """How much of ``subject`` the camera sees, from a character mask or from geometry.

    With ``mask`` = (index map (h, w) uint8, the subject's value, names of values 1, 2, …) and
    ``depth_m`` (h, w) the rendered view-axis depth, a grid pixel in the subject's region shows
    the subject when the mask says so, and something in front when its depth is nearer than the
    subject's cylinder there. Without them, the ``others`` (id, occluder) are ray-cast: a pixel
    is covered when one of them is hit before the subject's cylinder.
    """
    cam = _check_cam(cam, "cam")
    uv = _subject_grid(width, height, step)  # (N, 2) px
    local = geometry.camera_rays(uv, geometry.intrinsics_from_fov(fov, width, height))  # (N, 3)
    dirs = local @ cam[:3, :3].T  # (N, 3) unit, world
    origin = cam[:3, 3]
    t_subject = _cylinder_hits(origin, dirs, subject, ground_y)  # (N,) m, inf where missed
    region = np.isfinite(t_subject)
    if not region.any():
        return Visibility(0, 0, 0, None)
    uv, dirs, local, t_subject = uv[region], dirs[region], local[region], t_subject[region]
    if mask is not None and depth_m is not None:
        index_map, value, names = mask
        h, w = index_map.shape
        cols = np.clip((uv[:, 0] * w / width).astype(np.int64), 0, w - 1)
        rows = np.clip((uv[:, 1] * h / height).astype(np.int64), 0, h - 1)
        labels = index_map[rows, cols]  # (K,) mask values
        dh, dw = depth_m.shape
        depth = depth_m[np.clip((uv[:, 1] * dh / height).astype(np.int64), 0, dh - 1),
                        np.clip((uv[:, 0] * dw / width).astype(np.int64), 0, dw - 1)]
        front = t_subject * -local[:, 2]  # (K,) view-axis depth of the cylinder's near side
        visible = labels == value
        covered = ~visible & (depth < front)
        blockers = [names[v - 1] if 0 < v <= len(names) else "scenery" for v in labels[covered]]
    else:
        # The ground hides the subject only from below it (a camera that sank under the floor).
        nearest = _ground_hits(origin, dirs, ground_y) if origin[1] < ground_y else np.full(len(dirs), np.inf)
        who = np.full(len(dirs), len(others))  # index len(others): the ground
        others = [*others, ("ground", None)]
        for i, (_, occluder) in enumerate(others[:-1]):
            if isinstance(occluder, Solid):
                t = _solid_hits(origin, dirs, occluder)
            else:
                t = _cylinder_hits(origin, dirs, occluder, ground_y)
            closer = t < nearest
            nearest, who = np.where(closer, t, nearest), np.where(closer, i, who)
        covered = nearest < t_subject
        visible = ~covered
        blockers = [others[i][0] for i in who[covered]]
    blocker = min(set(blockers), key=lambda name: (-blockers.count(name), name)) if blockers else None
    return Visibility(int(region.sum()), int(visible.sum()), int(covered.sum()), blocker)


# --------------------------------------------------------------------------- measurement


@dataclass(frozen=True)
class TrackerConfig:
    """Feature tracking settings; pixel values are at the analysis resolution."""

    max_width: int = 960  # frames wider than this are tracked on a downscaled grey image
    max_corners: int = 500
    quality: float = 0.01  # Shi-Tomasi quality relative to the best corner
    min_distance: float = 6.0  # px between detected corners
    block_size: int = 7
    window: int = 21  # Lucas-Kanade window, px
    levels: int = 3  # pyramid levels above the base image
    fb_max_px: float = 0.5  # forward-backward round-trip error allowed, px
    min_tracks: int = 20  # fewer usable tracks than this: the pair is skipped
    # Smallest / largest eigenvalue of the image's structure tensor over the tracking window:
    # below this the window holds one straight edge and Lucas-Kanade cannot tell motion along
    # it (the aperture problem). Measured on previz renders (a low-angle push-in, a tilt at
    # night, an orbit; 1225 tracks against the exact depth): under 0.05, tracks on edges (a
    # building against the sky, a lamp post) slide along them and 36-66% miss the planned
    # motion by more than 1 px a frame; from 0.05 up, 10% (0.05-0.1) down to 1% (over 0.2).
    min_corner_ratio: float = 0.05


@dataclass(frozen=True)
class TrackedPair:
    """Sparse tracks between two frames, in full-resolution convention pixels."""

    index_a: int
    index_b: int
    points_uv: np.ndarray  # (N, 2) float64 positions in frame a (pixel centres at +0.5)
    displacement: np.ndarray  # (N, 2) float64 measured motion a -> b, px
    detected: int  # corners found in frame a; detected - N were lost or failed the round trip
    width: int  # full-resolution frame size, px
    height: int
    analysis_scale: float  # analysis px per full-resolution px (1.0 when not downscaled)


def _check_frame(frame: object, index: int, size: tuple[int, int] | None) -> np.ndarray:
    """A validated (H, W, 3) uint8 frame of the shot's size."""
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3:
        shape = getattr(frame, "shape", type(frame).__name__)
        raise EncodeError(f"frames[{index}]: {shape} must be an (H, W, 3) uint8 RGB array")
    if frame.dtype != np.uint8:
        raise EncodeError(f"frames[{index}]: dtype {frame.dtype} must be uint8")
    if size is not None and frame.shape[:2] != size:
        raise EncodeError(f"frames[{index}]: size {frame.shape[:2]} must match frame 0's {size}")
    return frame


def _analysis_grey(frame: np.ndarray, max_width: int) -> np.ndarray:
    """Grey image for tracking, (h, w) uint8, downscaled with area averaging when too wide."""
    grey = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
    height, width = grey.shape
    if width <= max_width:
        return grey
    small = (max_width, max(1, round(height * max_width / width)))
    return cv2.resize(grey, small, interpolation=cv2.INTER_AREA)


def _corner_ratio(grey: np.ndarray, points: np.ndarray, window: int) -> np.ndarray:
    """(K,) smallest / largest eigenvalue of the structure tensor in the window around each point.

    Near 0 on a straight edge (motion along it is unobservable), up to 1 on a corner or blob.
    """
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)  # (h, w)
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
    products = np.stack([gx * gx, gx * gy, gy * gy], axis=-1)  # (h, w, 3)
    summed = cv2.boxFilter(products, -1, (window, window), normalize=False,
                           borderType=cv2.BORDER_REFLECT)  # (h, w, 3) tensor sums per window
    h, w = grey.shape
    cols = np.clip(np.rint(points[:, 0]).astype(np.int64), 0, w - 1)
    rows = np.clip(np.rint(points[:, 1]).astype(np.int64), 0, h - 1)
    sxx, sxy, syy = summed[rows, cols].astype(np.float64).T  # (K,) each
    half_trace = 0.5 * (sxx + syy)
    root = np.sqrt(np.maximum(0.25 * (sxx - syy) ** 2 + sxy * sxy, 0.0))
    large, small = half_trace + root, half_trace - root
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(large > 0, small / large, 0.0)


def _track(grey_a: np.ndarray, grey_b: np.ndarray,
           cfg: TrackerConfig) -> tuple[np.ndarray, np.ndarray, int]:
    """Forward-backward checked LK tracks a -> b: starts, ends (K, 2) float32, corners found.

    Corners whose tracking window holds a single straight edge (``min_corner_ratio``) are
    dropped before tracking: their motion along the edge is a guess.
    """
    corners = cv2.goodFeaturesToTrack(grey_a, cfg.max_corners, cfg.quality, cfg.min_distance,
                                      blockSize=cfg.block_size)
    if corners is None or len(corners) == 0:
        empty = np.zeros((0, 2), np.float32)
        return empty, empty, 0
    found = len(corners)
    corners = corners.reshape(-1, 2)
    corners = corners[_corner_ratio(grey_a, corners, cfg.window) >= cfg.min_corner_ratio]
    if len(corners) == 0:
        empty = np.zeros((0, 2), np.float32)
        return empty, empty, found
    p0 = corners.reshape(-1, 1, 2).astype(np.float32)  # (K, 1, 2)
    lk = dict(winSize=(cfg.window, cfg.window), maxLevel=cfg.levels,
              criteria=(cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01))
    p1, st1, _ = cv2.calcOpticalFlowPyrLK(grey_a, grey_b, p0, None, **lk)
    p0_back, st2, _ = cv2.calcOpticalFlowPyrLK(grey_b, grey_a, p1, None, **lk)
    p0, p1, p0_back = p0.reshape(-1, 2), p1.reshape(-1, 2), p0_back.reshape(-1, 2)
    h, w = grey_b.shape
    inside = (p1[:, 0] >= 0) & (p1[:, 0] <= w - 1) & (p1[:, 1] >= 0) & (p1[:, 1] <= h - 1)
    round_trip = np.linalg.norm(p0 - p0_back, axis=1)
    keep = (st1.ravel() == 1) & (st2.ravel() == 1) & inside & (round_trip < cfg.fb_max_px)
    return p0[keep], p1[keep], found


def track_pairs(frames: Iterable[np.ndarray], stride: int = 1,
                config: TrackerConfig = TrackerConfig()) -> Iterator[TrackedPair]:
    """Yield tracks between frames (0, s), (s, 2s), … as they arrive; fresh corners per pair."""
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride: {stride!r} must be an integer >= 1")
    previous: tuple[int, np.ndarray] | None = None
    size: tuple[int, int] | None = None
    for index, frame in enumerate(frames):
        frame = _check_frame(frame, index, size)
        size = frame.shape[:2]
        if index % stride:
            continue
        grey = _analysis_grey(frame, config.max_width)  # (h, w) uint8
        if previous is not None:
            start, end, detected = _track(previous[1], grey, config)
            sx = grey.shape[1] / size[1]
            sy = grey.shape[0] / size[0]
            scale = np.array([sx, sy])
            # OpenCV puts pixel centres on integers; the conventions put them at +0.5.
            points_uv = (start.astype(np.float64) + 0.5) / scale  # (K, 2) full-res px
            displacement = (end.astype(np.float64) - start) / scale  # (K, 2) full-res px
            yield TrackedPair(previous[0], index, points_uv, displacement, detected,
                              size[1], size[0], float(min(sx, sy)))
        previous = (index, grey)


@dataclass(frozen=True)
class Similarity:
    """A 4-dof image motion about the image centre, in camera-grammar signs (see COMPONENTS)."""

    horizontal: float  # px, + = view moves right (content moves left)
    vertical: float  # px, + = view moves up (content moves down)
    roll: float  # degrees, + = picture turns counter-clockwise
    scale: float  # log scale factor, + = picture grows


def _ransac_similarity(src: np.ndarray, dst: np.ndarray, threshold_px: float,
                       centre: tuple[float, float]) -> tuple[np.ndarray, np.ndarray] | None:
    """RANSAC similarity src -> dst (N, 2) in centred coords: ((2, 3) matrix, inliers) or None."""
    if len(src) < 3:
        return None
    c = np.asarray(centre, dtype=np.float64)
    a = (src - c).astype(np.float32).reshape(-1, 1, 2)
    b = (dst - c).astype(np.float32).reshape(-1, 1, 2)
    # OpenCV seeds its RANSAC generator the same way on every call: results are repeatable.
    matrix, inliers = cv2.estimateAffinePartial2D(
        a, b, method=cv2.RANSAC, ransacReprojThreshold=float(threshold_px),
        maxIters=2000, confidence=0.995, refineIters=10)
    if matrix is None or inliers is None or math.hypot(matrix[0, 0], matrix[1, 0]) <= 0:
        return None
    return matrix.astype(np.float64), inliers.ravel().astype(bool)


def _apply(matrix: np.ndarray, points: np.ndarray, centre: tuple[float, float]) -> np.ndarray:
    """Map points (N, 2) through a similarity fitted about centre."""
    c = np.asarray(centre, dtype=np.float64)
    return (points - c) @ matrix[:, :2].T + matrix[:, 2] + c


def _components(matrix: np.ndarray) -> Similarity:
    """Camera-grammar components of a centred similarity matrix (2, 3)."""
    cos_s, sin_s = float(matrix[0, 0]), float(matrix[1, 0])
    # Image v points down, so an angle that turns +u toward +v is clockwise on screen.
    return Similarity(
        horizontal=-float(matrix[0, 2]),
        vertical=float(matrix[1, 2]),
        roll=-math.degrees(math.atan2(sin_s, cos_s)),
        scale=math.log(math.hypot(cos_s, sin_s)),
    )


def _least_squares_similarity(src: np.ndarray, dst: np.ndarray,
                              centre: tuple[float, float]) -> np.ndarray:
    """Least-squares similarity src -> dst (N, 2) about centre as a (2, 3) matrix."""
    c = np.asarray(centre, dtype=np.float64)
    x, y = (src - c).T
    ones, zeros = np.ones_like(x), np.zeros_like(x)
    # u' = a u - b v + tx, v' = b u + a v + ty; unknowns (a, b, tx, ty)
    rows = np.concatenate([np.stack([x, -y, ones, zeros], 1), np.stack([y, x, zeros, ones], 1)])
    rhs = np.concatenate([dst[:, 0] - c[0], dst[:, 1] - c[1]])  # (2N,)
    (a, b, tx, ty), *_ = np.linalg.lstsq(rows, rhs, rcond=None)
    return np.array([[a, -b, tx], [b, a, ty]])


def fit_similarity(src: np.ndarray, dst: np.ndarray, threshold_px: float,
                   centre: tuple[float, float]) -> tuple[Similarity, np.ndarray] | None:
    """Robust similarity src -> dst (N, 2) about centre; (components, inlier mask) or None.

    RANSAC runs first with a third of ``threshold_px``: with a generous threshold a
    similarity can bend (a small rotation) to cover both the background and a large moving
    object, while only one coherent group fits a tight one. The generous threshold is the
    fallback when the tight one finds fewer than a handful of inliers (noisy footage).
    """
    fit = _two_stage(src, dst, threshold_px, centre, min_inliers=8)
    return None if fit is None else (_components(fit[0]), fit[1])


def _two_stage(src: np.ndarray, dst: np.ndarray, threshold_px: float,
               centre: tuple[float, float],
               min_inliers: int) -> tuple[np.ndarray, np.ndarray] | None:
    """RANSAC with a tight threshold, then the generous one if the tight fit starves."""
    fit = None
    for stage in (threshold_px / 3.0, threshold_px):
        fit = _ransac_similarity(src, dst, stage, centre)
        if fit is not None and int(fit[1].sum()) >= min_inliers:
            return fit
    return fit


def agreeing_tracks(start: np.ndarray, moved: np.ndarray, planned: np.ndarray,
                    threshold_px: float, centre: tuple[float, float], min_tracks: int,
                    plan_preference: float = 0.5) -> np.ndarray | None:
    """Mask (N,) of tracks whose plan-vs-video disagreement follows the shot-wide one.

    Two explanations compete, both scored at a third of ``threshold_px``: "the video follows
    the plan" (no disagreement) and the best RANSAC similarity between planned and measured
    end points. The plan wins when it explains at least ``plan_preference`` times as many
    tracks, so a big character walking through a correctly filmed shot cannot pass itself off
    as the camera. Tracks are kept when they miss the winning model by less than three robust
    standard deviations of the misses, clamped to [threshold / 3, threshold].
    """
    src, dst = start + planned, start + moved  # (N, 2) planned and measured end points
    tight = threshold_px / 3.0
    fit = _two_stage(src, dst, threshold_px, centre, min_tracks)
    plan_count = int(np.count_nonzero(np.linalg.norm(dst - src, axis=1) < tight))
    fit_count = 0 if fit is None else int(fit[1].sum())
    if plan_count >= min_tracks and plan_count >= plan_preference * fit_count:
        predicted = src
    elif fit is not None:
        predicted = _apply(fit[0], src, centre)
    else:
        return None
    miss = np.linalg.norm(predicted - dst, axis=1)  # (N,) px
    near = miss < threshold_px
    if int(near.sum()) < min_tracks:
        return None
    spread = 3.0 * 1.4826 * float(np.median(miss[near]))  # 3 sigma of the background's misses
    keep = miss < min(max(spread, tight), threshold_px)
    return keep if int(keep.sum()) >= min_tracks else None


def _on_characters(cam: np.ndarray, fov: float, points_uv: np.ndarray, width: int,
                   height: int, model: DepthModel, margin: float) -> np.ndarray:
    """Mask (N,) of pixels whose ray meets a (slightly grown) cylinder before anything else."""
    characters = [c for c in model.occluders if isinstance(c, Cylinder)]
    if not characters:
        return np.zeros(len(points_uv), dtype=bool)
    grown = tuple(Cylinder(c.center_x, c.center_z, c.radius * (1 + margin),
                           c.height * (1 + margin)) for c in characters)
    solids = tuple(c for c in model.occluders if isinstance(c, Solid))  # set pieces stay as they are
    intr = geometry.intrinsics_from_fov(fov, width, height)
    dirs = geometry.camera_rays(points_uv, intr) @ cam[:3, :3].T  # (N, 3) unit, world
    bare = DepthModel(model.ground_y, model.far_m, solids)
    with_chars = DepthModel(model.ground_y, model.far_m, solids + grown)
    return cast_rays(cam[:3, 3], dirs, with_chars) < cast_rays(cam[:3, 3], dirs, bare)


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class CameraCheckConfig:
    """Thresholds of the camera-adherence check; px values are at the analysis resolution."""

    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    inlier_px: float = 3.0  # RANSAC threshold for plan-vs-video disagreement per track
    max_mean_error_px: float = 1.0  # mean endpoint error per frame allowed
    significant_frac: float = 0.02  # a component moving < this fraction of the width is "still"
    unplanned_factor: float = 2.0  # still-planned component moving > factor x significance
    character_margin: float = 0.15  # cylinders grow by this fraction when excluding their tracks
    plan_preference: float = 0.5  # "video follows the plan" wins with this share of RANSAC's count
    # With exact depth, the picture lacks the plan's parallax (a zoom or pan where a dolly,
    # truck or pedestal was planned) when the plan fits the measured motion worse than one
    # image-wide similarity by this factor and by at least plain_fit_min_px per frame.
    # Measured on previz (office, eye level, close-up to wide): a correct move fits the plan
    # 1.6-12 times better than a similarity (a zoom or pan about equally well); a zoom's video
    # under a dolly's plan, a pan's under a truck's, a tilt's under a pedestal's fit the
    # similarity 2-4.4 times better.
    plain_fit_ratio: float = 1.5
    plain_fit_min_px: float = 0.4
    # DepthMap scenes: a track is on a depth edge when the planned flow within this radius
    # departs from an affine field by more than depth_edge_flow_px.
    depth_edge_radius_px: float = 6.0
    depth_edge_flow_px: float = 0.1


# For DepthMap scenes: the exact depth lets nearly every corner be checked, so weak corners
# (flat-shaded renders have few strong ones, and bold overlay text would set the bar) are
# detected too, and closer together (an orbit's parallax leaves few corners off depth edges:
# at 6 px apart 4 of an orbit's 23 frame pairs kept too few to check); edge and moving-pixel
# screening then removes the unreliable ones.
DEPTH_MAP_CONFIG = CameraCheckConfig(tracker=TrackerConfig(quality=0.001, min_distance=4.0))


@dataclass(frozen=True)
class ComponentCheck:
    """Planned versus measured total of one motion component over the shot."""

    name: str  # one of COMPONENTS
    unit: str  # "px", "deg" or "log"
    expected_total: float
    measured_total: float
    expected_px: float  # |expected| as pixels moved (at the image corner for roll and scale)
    measured_px: float
    significant: bool  # the plan moves this component by more than the significance threshold
    direction_ok: bool | None  # sign agreement; None = not applicable (plan keeps it still)
    unplanned: bool  # plan keeps it still but the video moves it clearly
    ratio: float | None  # measured / expected when significant
    words: str  # the planned move in camera language, e.g. "pan right"; "hold still"
    cause: str  # what drives the planned move: "rotation" (pan/tilt/roll/zoom), "translation"
    #             (truck/pedestal/dolly), "other" (a side effect of another move: the picture
    #             of a down-tilted camera turns as it pans, the picture of a low-angle push-in
    #             slides down) or "none" when the plan keeps it still; see _cause


@dataclass(frozen=True)
class CameraAdherence:
    """Per-shot verdict on whether the video's camera follows the plan."""

    ok: bool
    summary: str
    pairs_evaluated: int
    pairs_skipped: int
    stride: int
    frames_seen: int
    frames_planned: int
    error_mean_px: float  # mean endpoint error per frame (pair error / stride), NaN if no pair
    error_p95_px: float
    error_limit_px: float  # the mean error allowed, full-resolution px per frame
    significant_px: float
    tracks_used: int
    tracks_excluded: int
    components: tuple[ComponentCheck, ...]
    worst_pair: tuple[int, int, float] | None  # (frame a, frame b, mean error px per frame)
    # With exact depth: how well the plan, and one image-wide zoom/pan/roll (a similarity), fit
    # the measured motion (mean px per frame on the same tracks); NaN without exact depth.
    plan_fit_px: float = math.nan
    plain_fit_px: float = math.nan
    parallax_missing: bool = False  # the plain similarity fits much better: no planned parallax

    def component(self, name: str) -> ComponentCheck:
        """The check of one component by name."""
        for comp in self.components:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (NaN becomes None, tuples become lists)."""
        return _jsonable(asdict(self))


def _jsonable(value: object) -> object:
    """Recursively turn numpy scalars, tuples and NaN into JSON-safe values."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def _as_cams(cams: np.ndarray) -> np.ndarray:
    """Validated (n, 4, 4) float64 cameras."""
    arr = np.asarray(cams, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1:] != (4, 4) or len(arr) < 2:
        raise PlanError(f"cams: shape {arr.shape} must be (n, 4, 4) with n >= 2")
    bad = np.flatnonzero(~np.all(np.isfinite(arr), axis=(1, 2)))
    if bad.size:
        raise PlanError(f"cams[{bad[0]}]: cam_to_world must be finite")
    return arr


def _as_fovs(fovs: np.ndarray, n: int) -> np.ndarray:
    """Validated (n,) float64 vertical fovs in degrees."""
    arr = np.asarray(fovs, dtype=np.float64).reshape(-1)
    if arr.shape != (n,):
        raise PlanError(f"fovs: shape {arr.shape} must be ({n},) to match cams")
    bad = np.flatnonzero(~((arr > 1.0) & (arr < 170.0)))
    if bad.size:
        raise PlanError(f"fovs[{bad[0]}]: {arr[bad[0]]!r} must be in (1, 170) degrees")
    return arr


DepthModels = Sequence[SceneModel] | SceneModel | Callable[[int], SceneModel]


def _depth_lookup(depth_models: DepthModels, n: int) -> Callable[[int], SceneModel]:
    """A frame index -> scene model function for one model, a per-frame sequence or a callable.

    A sequence of DepthMaps is read lazily (it may be a generator-backed sequence); only the
    model of each pair's first frame is asked for.
    """
    if isinstance(depth_models, (DepthModel, DepthMap)):
        return lambda index: depth_models
    if callable(depth_models):
        def lookup(index: int) -> SceneModel:
            model = depth_models(index)
            if not isinstance(model, (DepthModel, DepthMap)):
                raise PlanError(f"depth_models({index}): {model!r} must be a DepthModel or "
                                "a DepthMap")
            return model
        return lookup
    models = tuple(depth_models)
    if len(models) != n:
        raise PlanError(f"depth_models: {len(models)} models must match the plan's {n} frames")
    for i, model in enumerate(models):
        if not isinstance(model, (DepthModel, DepthMap)):
            raise PlanError(f"depth_models[{i}]: {model!r} must be a DepthModel or a DepthMap")
    return models.__getitem__


def _horizon_roll(cam: np.ndarray) -> float | None:
    """Camera roll against the horizon in degrees (conventions' sign); None looking straight
    up or down."""
    # For R = Ry(a) Rx(b) Rz(c) the world-y row is (cos b sin c, cos b cos c, -sin b).
    up_x, up_y = float(cam[1, 0]), float(cam[1, 1])
    if math.hypot(up_x, up_y) < 1e-3:
        return None
    return -math.degrees(math.atan2(up_x, up_y))


def _roll_change(cam_a: np.ndarray, cam_b: np.ndarray) -> float:
    """Change of horizon roll from camera a to b in degrees, 0 where undefined."""
    ra, rb = _horizon_roll(cam_a), _horizon_roll(cam_b)
    if ra is None or rb is None:
        return 0.0
    return (rb - ra + 180.0) % 360.0 - 180.0


def _bounded(frames: Iterable[np.ndarray], n: int, seen: list[int]) -> Iterator[np.ndarray]:
    """Pass frames through, counting them and refusing more than the plan has cameras."""
    for index, frame in enumerate(frames):
        if index >= n:
            raise PlanError(f"frames: the video has more than the plan's {n} frames")
        seen[0] = index + 1
        yield frame


_WORDS = {
    # component: (cause rotation/zoom, cause translation, cause unknown), each (+ verb, - verb)
    "horizontal": (("pan right", "pan left"), ("truck right", "truck left"),
                   ("move right", "move left")),
    "vertical": (("tilt up", "tilt down"), ("pedestal up", "pedestal down"),
                 ("move up", "move down")),
    "roll": (("roll clockwise", "roll counter-clockwise"),)
    + (("turn the picture counter-clockwise", "turn the picture clockwise"),) * 2,
    "scale": (("zoom in", "zoom out"), ("dolly in", "dolly out"), ("grow", "shrink")),
}


def _words(name: str, value: float, cause: str) -> str:
    """Camera-language verb (base form) for a component total given what drives it."""
    kind = {"rotation": 0, "translation": 1}.get(cause, 2)
    return _WORDS[name][kind][0 if value >= 0 else 1]


def _third_person(phrase: str) -> str:
    """'dolly in' -> 'dollies in', 'pan right' -> 'pans right'."""
    verb, _, rest = phrase.partition(" ")
    if verb.endswith("y"):
        verb = verb[:-1] + "ies"
    elif verb.endswith("sh"):
        verb += "es"
    else:
        verb += "s"
    return f"{verb} {rest}".strip()


def _amount(name: str, value: float) -> str:
    """Human-readable magnitude of a component total."""
    if name == "roll":
        return f"{abs(value):.1f}°"
    if name == "scale":
        return f"{abs(math.expm1(value)) * 100:.0f}%"
    return f"{abs(value):.0f} px"


def component_px(name: str, value: float, half_diag: float) -> float:
    """Pixels moved by a component total (image corner for roll and scale)."""
    if name == "roll":
        return abs(math.radians(value)) * half_diag
    if name == "scale":
        return abs(value) * half_diag
    return abs(value)


# The camera-local translation axis whose move is named after each component (truck along x,
# pedestal along y, dolly along z); see _cause.
_OWN_AXIS = {"horizontal": "x", "vertical": "y", "scale": "z"}


def _cause(name: str, expected: float, causes: dict[str, dict[str, float]]) -> str:
    """What drives a component's planned total: "rotation", "translation" or "other".

    ``causes`` holds, per driver, the part of the planned total it explains: "turn" (the
    camera's rotation: pixels at infinity move by it too), "zoom" (its change of field of
    view), "x", "y", "z" (its travel along its own axes). The driver explaining most of the
    planned direction names it: a pan or a truck, a tilt or a pedestal, a zoom or a dolly; any
    other driver is "other" (the picture of a low-angle push-in also slides down: parallax of
    the dolly, no pedestal; the picture of a pan grows on one side: perspective, no zoom).
    For roll the "turn" part is the camera's own roll against the horizon: the picture of a
    down-tilted camera also turns when it pans or orbits, which is no roll.
    """
    if name == "roll":
        share = causes["turn"][name] / expected if expected != 0 else 0.0
        return "rotation" if share >= 0.5 else "other"
    sign = 1.0 if expected >= 0 else -1.0
    parts = {driver: sign * part[name] for driver, part in causes.items()}
    driver = max(parts, key=parts.__getitem__)
    if driver == ("zoom" if name == "scale" else "turn"):
        return "rotation"
    return "translation" if driver == _OWN_AXIS[name] else "other"


def _component_checks(expected: dict[str, float], measured: dict[str, float],
                      causes: dict[str, dict[str, float]], half_diag: float,
                      significant_px: float, unplanned_factor: float) -> tuple[ComponentCheck, ...]:
    """Compare shot totals per component."""
    checks = []
    for name in COMPONENTS:
        exp_v, meas_v = expected[name], measured[name]
        exp_px, meas_px = component_px(name, exp_v, half_diag), component_px(name, meas_v, half_diag)
        significant = exp_px > significant_px
        cause = _cause(name, exp_v, causes) if significant else "none"
        checks.append(ComponentCheck(
            name=name,
            unit=_UNITS[name],
            expected_total=exp_v,
            measured_total=meas_v,
            expected_px=exp_px,
            measured_px=meas_px,
            significant=significant,
            direction_ok=(exp_v * meas_v > 0) if significant else None,
            unplanned=(not significant) and meas_px > unplanned_factor * significant_px,
            ratio=(meas_v / exp_v) if significant else None,
            words=_words(name, exp_v, cause) if significant else "hold still",
            cause=cause,
        ))
    return tuple(checks)


def _describe(c: ComponentCheck, flat: bool = False) -> str:
    """One component's outcome in words. ``flat``: the picture lacks the plan's parallax, so a
    component the camera's travel drives is told as what the picture did, not as that travel."""
    if c.significant and c.direction_ok and flat and c.cause == "translation":
        picture = _third_person(_words(c.name, c.measured_total, "other"))
        return f"the picture {picture} {_amount(c.name, c.measured_total)} as planned"
    if c.significant and c.direction_ok:
        return f"{_third_person(c.words)} {_amount(c.name, c.measured_total)} as planned"
    if c.significant:
        moved = _third_person(_words(c.name, c.measured_total, c.cause))
        return (f"planned to {c.words} {_amount(c.name, c.expected_total)} but {moved} "
                f"{_amount(c.name, c.measured_total)}")
    moved = _third_person(_words(c.name, c.measured_total, "unknown"))
    return f"unplanned: {moved} {_amount(c.name, c.measured_total)}"


def _summary(checks: tuple[ComponentCheck, ...], error: float, limit: float, stride: int,
             evaluated: int, skipped: int, small_move: str | None = None,
             flat: str | None = None) -> str:
    """One line in plain words for the report: what is wrong first, then what went as planned.

    ``small_move``: the plan's largest motion in words when the plan moves the camera but no
    component reaches the significance threshold (never "holds still" for a planned move).
    ``flat``: why the picture lacks the plan's parallax, when it does.
    """
    if evaluated + skipped == 0:
        return "camera not checked: the video has fewer than two frames to compare"
    if evaluated == 0:
        return f"camera not checked: none of {skipped} frame pairs had enough texture to track"
    per = "px/frame" if stride == 1 else f"px/frame (checked every {stride} frames)"
    failed = [c for c in checks if c.direction_ok is False or c.unplanned]
    parts = [_describe(c) for c in failed] + ([flat] if flat else [])
    if error > limit:
        parts.append(f"error {error:.2f} {per}, over the {limit:.2f} limit")
    # Side effects of the main move (the picture of a down-tilted camera turns as it pans, the
    # picture of a low-angle push-in slides down) are checked like any component, but named
    # only when they are the main effect (an orbit around a point on the ground).
    planned = [c for c in checks if c.significant and c not in failed]
    main_px = max((c.expected_px for c in checks if c.significant), default=0.0)
    shown = [c for c in planned if c.expected_px >= (main_px if c.cause == "other" else 0.5 * main_px)]
    parts += [_describe(c, flat is not None) for c in shown]
    if not failed and not shown:
        parts.append(small_move or "holds still as planned")
    if error <= limit:
        parts.append(f"error {error:.2f} {per}")
    text = "; ".join(parts)
    if skipped:
        text += f"; {skipped} of {evaluated + skipped} frame pairs skipped (too little texture)"
    return text


def _small_move(checks: tuple[ComponentCheck, ...], causes: dict[str, dict[str, float]],
                significant_px: float, partial: bool) -> str | None:
    """The largest planned component in words when the plan moves but none is significant.

    ``partial``: some frame pairs were skipped, so the totals cover only the pairs checked.
    """
    largest = max(checks, key=lambda c: c.expected_px)
    if largest.significant or largest.expected_px <= 0.0:
        return None
    words = _words(largest.name, largest.expected_total,
                   _cause(largest.name, largest.expected_total, causes))
    where = " over the frame pairs checked" if partial else ""
    return (f"planned to {words} {_amount(largest.name, largest.expected_total)}{where}, too "
            f"small a move to check its direction (under {significant_px:.0f} px)")


@dataclass(frozen=True)
class _PairResult:
    """What one frame pair contributes to the shot report."""

    errors: np.ndarray  # (K,) endpoint errors of the kept tracks, px per frame
    excluded: int  # tracks found but not kept
    measured: Similarity
    expected: Similarity
    causes: dict[str, Similarity] | None  # planned motion explained by each driver (_cause)
    plan_fit: np.ndarray  # (C,) |measured - planned| on the tracks the components use, px/frame
    plain_fit: np.ndarray  # (C,) |measured - best single similarity| on the same tracks, px/frame
    plan_depth: np.ndarray  # (C,) |planned - its own best similarity|: parallax and perspective
    exact_depth: bool  # the scene was a DepthMap


def _planned_depth_map(pair: TrackedPair, cams: np.ndarray, fovs: np.ndarray, model: DepthMap,
                       config: CameraCheckConfig
                       ) -> tuple[np.ndarray, np.ndarray, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """Planned motion (K, 2), NaN where undefined or on an edge, the moving-pixel mask and a
    function giving the band of planned motions around each track (see _depth_map_screen)."""
    a, b = pair.index_a, pair.index_b
    start = pair.points_uv
    radius = config.depth_edge_radius_px / pair.analysis_scale  # full-resolution px
    edge_flow = config.depth_edge_flow_px / pair.analysis_scale
    planned = _depth_map_reproject(cams[a], fovs[a], cams[b], fovs[b], start, pair.width,
                                   pair.height, model) - start  # (K, 2) px
    edge, moving, band = _depth_map_screen(cams[a], fovs[a], cams[b], fovs[b], start, pair.width,
                                           pair.height, model, radius, edge_flow)
    planned[edge] = np.nan
    return planned, moving, band


def _evaluate_pair(pair: TrackedPair, cams: np.ndarray, fovs: np.ndarray, model: SceneModel,
                   stride: int, config: CameraCheckConfig) -> _PairResult | None:
    """Compare one pair's tracks with the plan; None when too few usable tracks remain."""
    width, height = pair.width, pair.height
    threshold = config.inlier_px / pair.analysis_scale  # full-resolution px
    centre = (width / 2.0, height / 2.0)
    min_tracks = config.tracker.min_tracks
    a, b = pair.index_a, pair.index_b
    start, moved = pair.points_uv, pair.displacement  # (K, 2) each
    band = None
    if isinstance(model, DepthMap):
        planned, on_chars, band = _planned_depth_map(pair, cams, fovs, model, config)
    else:
        planned = _reproject(cams[a], fovs[a], cams[b], fovs[b], start, width, height,
                             model) - start  # (K, 2) px; NaN where the point falls behind cam b
        on_chars = _on_characters(cams[a], fovs[a], start, width, height, model,
                                  config.character_margin)
    usable = np.all(np.isfinite(planned), axis=1)
    # Characters move on their own, so their tracks say nothing about the camera; with the
    # geometric model a close-up may have nothing else, then they stay in (a standing
    # subject's cylinder only approximates the body). A depth map's excluded pixels never
    # stay in: the map already holds every surface that follows the camera, and what it
    # excludes (a walker, a name label snapped to whole pixels) does not.
    off_chars = usable & ~on_chars
    nominal = planned  # where the plan's motion is taken from for the components
    if band is not None and int(off_chars.sum()) < min_tracks:
        # A flat-shaded set has its corners on silhouettes, where the tracker's window holds both
        # sides (a truck past close set pieces keeps under a tenth of its tracks off them). Rather
        # than skip the pair, those tracks may follow either side: planned at the point of the
        # band of their neighbourhood's planned motions nearest the measured one, so a move the
        # wrong way or of another size still misses it.
        low, high = band()
        edge = ~usable & ~on_chars & np.all(np.isfinite(low), axis=1) & np.all(np.isfinite(high), axis=1)
        planned = planned.copy()
        planned[edge] = np.clip(moved[edge], low[edge], high[edge])
        nominal = planned
        usable = off_chars | edge
    elif isinstance(model, DepthMap) or int(off_chars.sum()) >= min_tracks:
        usable = off_chars
    elif on_chars.any():
        # A character's track follows the plan if it lands anywhere in its depth band.
        band = usable & on_chars
        planned, nominal = planned.copy(), planned.copy()
        planned[band], nominal[band] = _within_depth_band(
            cams[a], fovs[a], cams[b], fovs[b], start[band], moved[band], width, height, model, planned[band],
            threshold)
    start, moved, planned, nominal = start[usable], moved[usable], planned[usable], nominal[usable]
    if len(start) < min_tracks:
        return None
    keep = agreeing_tracks(start, moved, planned, threshold, centre, min_tracks,
                           config.plan_preference)
    if keep is None:
        return None
    s, m, e, nominal = start[keep], moved[keep], planned[keep], nominal[keep]
    # The measured similarity (RANSAC, generous threshold) names the tracks that move
    # together in the video; measured, planned and rotation-only motion are then fitted on
    # exactly those tracks by least squares, so the three stay comparable even where
    # parallax makes the flow no exact similarity.
    fit = _ransac_similarity(s, s + m, threshold, centre)
    if fit is None or int(fit[1].sum()) < min_tracks:
        return None
    common = fit[1]
    causes = _planned_causes(cams[a], fovs[a], cams[b], fovs[b], s[common], width, height,
                             model, centre)
    measured = _least_squares_similarity(s[common], (s + m)[common], centre)
    planned_similarity = _least_squares_similarity(s[common], (s + nominal)[common], centre)
    return _PairResult(
        errors=np.linalg.norm(m - e, axis=1) / stride,
        excluded=pair.detected - len(s),
        measured=_components(measured),
        expected=_components(_least_squares_similarity(s[common], (s + nominal)[common], centre)),
        causes=causes,
        plan_fit=np.linalg.norm((m - e)[common], axis=1) / stride,
        plain_fit=np.linalg.norm(_apply(measured, s[common], centre) - (s + m)[common], axis=1) / stride,
        plan_depth=np.linalg.norm(_apply(planned_similarity, s[common], centre) - (s + nominal)[common],
                                  axis=1) / stride,
        exact_depth=isinstance(model, DepthMap),
    )


def _cylinder_span(origin: np.ndarray, dirs: np.ndarray, cyl: Cylinder,
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


def _within_depth_band(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                       start: np.ndarray, moved: np.ndarray, width: int, height: int,
                       model: DepthModel, planned: np.ndarray,
                       tolerance_px: float) -> tuple[np.ndarray, np.ndarray]:
    """Planned motion (K, 2) of tracks on characters, their depth only known to a band: the
    band's point nearest the measured end, and the same for the components unless the measured
    end misses the band by more than ``tolerance_px`` (then the band's near end).

    A track starting inside a character's cylinder may be on the body anywhere between the
    cylinder's near side and its far side, or on what lies behind where the body does not
    fill the cylinder (between an arm and the torso, beside a narrow waist): its depth lies
    between the cylinder's near side and the scene behind it (the sky: at infinity). The
    planned end is the point of the segment those two depths project to in frame b that is
    nearest the measured end; a move the wrong way still misses the whole segment. Tracks on
    no cylinder keep ``planned`` for both.
    """
    intr = geometry.intrinsics_from_fov(fov_a, width, height)
    dirs = geometry.camera_rays(start, intr) @ cam_a[:3, :3].T  # (K, 3) unit, world
    origin = cam_a[:3, 3]
    near = np.full(len(start), np.inf)
    for cyl in (c for c in model.occluders if isinstance(c, Cylinder)):
        near = np.minimum(near, _cylinder_span(origin, dirs, cyl, model.ground_y)[0])
    scenery = DepthModel(model.ground_y, model.far_m, tuple(o for o in model.occluders if isinstance(o, Solid)))
    behind = cast_rays(origin, dirs, scenery)  # (K,) m, inf for the sky
    found = np.isfinite(near)
    sky = ~np.isfinite(behind)
    far_points = np.where(sky[:, None], dirs, origin + np.where(sky, 0.0, behind)[:, None] * dirs)
    ends = (_project(cam_b, fov_b, origin + np.where(found, near, 0.0)[:, None] * dirs,
                     np.ones(len(start)), width, height),
            _project(cam_b, fov_b, far_points, (~sky).astype(np.float64), width, height))
    seg = ends[1] - ends[0]
    target = start + moved
    with np.errstate(divide="ignore", invalid="ignore"):
        along = np.nan_to_num(np.einsum("ij,ij->i", target - ends[0], seg) / np.einsum("ij,ij->i", seg, seg))
    closest = ends[0] + np.clip(along, 0.0, 1.0)[:, None] * seg
    # Beyond the band the body's front stands for the plan: a move the wrong way then reads as
    # the planned direction missed, not as a move the plan never asked for.
    beyond = np.linalg.norm(target - closest, axis=1) > tolerance_px
    nominal = np.where(beyond[:, None], ends[0], closest)
    usable = (found & np.all(np.isfinite(closest), axis=1) & np.all(np.isfinite(nominal), axis=1))[:, None]
    return np.where(usable, closest - start, planned), np.where(usable, nominal - start, planned)


def _planned_causes(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                    points: np.ndarray, width: int, height: int, model: SceneModel,
                    centre: tuple[float, float]) -> dict[str, Similarity] | None:
    """Planned similarity explained by each driver of the move from camera a to b.

    "turn": camera b's rotation with every pixel at infinity; "zoom": what b's field of view
    adds to that; "x", "y", "z": what b's travel along one of camera a's own axes adds to
    turn and zoom (each fitted on the same tracks; for the small steps between frames the
    parts add up to the planned motion). None when a part is undefined (a point falls behind
    a camera).
    """
    def fitted(cam: np.ndarray, fov: float, scene: SceneModel | None) -> Similarity | None:
        if isinstance(scene, DepthMap):
            end = _depth_map_reproject(cam_a, fov_a, cam, fov, points, width, height, scene)
        else:
            end = _reproject(cam_a, fov_a, cam, fov, points, width, height, scene)
        if not np.all(np.isfinite(end)):
            return None
        return _components(_least_squares_similarity(points, end, centre))

    def minus(x: Similarity, y: Similarity) -> Similarity:
        return Similarity(*(getattr(x, c) - getattr(y, c) for c in COMPONENTS))

    turn, rotation = fitted(cam_b, fov_a, None), fitted(cam_b, fov_b, None)
    if turn is None or rotation is None:
        return None
    parts = {"turn": turn, "zoom": minus(rotation, turn)}
    travel = cam_a[:3, :3].T @ (cam_b[:3, 3] - cam_a[:3, 3])  # (3,) in camera a's axes
    for axis, name in enumerate("xyz"):
        cam = cam_b.copy()
        cam[:3, 3] = cam_a[:3, 3] + cam_a[:3, axis] * travel[axis]
        moved = fitted(cam, fov_b, model)
        if moved is None:
            return None
        parts[name] = minus(moved, rotation)
    return parts


def check_camera(frames: Iterable[np.ndarray], cams: np.ndarray, fovs: np.ndarray,
                 depth_models: DepthModels, *, stride: int = 1, max_pairs: int | None = None,
                 config: CameraCheckConfig = CameraCheckConfig()) -> CameraAdherence:
    """Measure the camera motion of decoded frames (H, W, 3) uint8 and compare it with the plan."""
    cams = _as_cams(cams)  # (n, 4, 4) float64
    n = len(cams)
    fovs = _as_fovs(fovs, n)  # (n,) degrees
    model_for = _depth_lookup(depth_models, n)
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride: {stride!r} must be an integer >= 1")
    if max_pairs is not None and (not isinstance(max_pairs, int) or max_pairs < 1):
        raise ValueError(f"max_pairs: {max_pairs!r} must be None or an integer >= 1")

    seen = [0]
    errors: list[np.ndarray] = []  # per evaluated pair: (K,) inlier endpoint errors, px/frame
    plan_fit: list[np.ndarray] = []  # per pair on exact depth: plan vs the best plain similarity
    plain_fit: list[np.ndarray] = []
    plan_depth: list[np.ndarray] = []
    expected = dict.fromkeys(COMPONENTS, 0.0)
    measured = dict.fromkeys(COMPONENTS, 0.0)
    # part of `expected` explained by each driver (see _cause): turn, zoom, travel along x, y, z
    causes = {driver: dict.fromkeys(COMPONENTS, 0.0) for driver in ("turn", "zoom", "x", "y", "z")}
    camera_roll = 0.0  # degrees the planned camera rolls against the horizon
    skipped = used = excluded = 0
    worst: tuple[int, int, float] | None = None
    width, height, analysis_scale = 0, 0, 1.0

    pairs = track_pairs(_bounded(frames, n, seen), stride, config.tracker)
    for pair in pairs:
        width, height, analysis_scale = pair.width, pair.height, pair.analysis_scale
        result = _evaluate_pair(pair, cams, fovs, model_for(pair.index_a), stride, config)
        if result is None:
            skipped += 1
        else:
            errors.append(result.errors)
            if result.exact_depth:
                plan_fit.append(result.plan_fit)
                plain_fit.append(result.plain_fit)
                plan_depth.append(result.plan_depth)
            used += len(result.errors)
            excluded += result.excluded
            for name in COMPONENTS:
                measured[name] += getattr(result.measured, name)
                expected[name] += getattr(result.expected, name)
                for driver, part in (result.causes or {}).items():
                    causes[driver][name] += getattr(part, name)
            camera_roll += _roll_change(cams[pair.index_a], cams[pair.index_b])
            pair_error = float(result.errors.mean())
            if worst is None or pair_error > worst[2]:
                worst = (pair.index_a, pair.index_b, pair_error)
        if max_pairs is not None and len(errors) + skipped >= max_pairs:
            pairs.close()  # stop decoding: the caller asked for no more pairs
            break

    evaluated = len(errors)
    pooled = np.concatenate(errors) if errors else np.zeros(0)  # (T,) px per frame
    error_mean = float(pooled.mean()) if pooled.size else math.nan
    error_p95 = float(np.percentile(pooled, 95)) if pooled.size else math.nan
    limit = config.max_mean_error_px / analysis_scale
    significant_px = config.significant_frac * width
    half_diag = 0.5 * math.hypot(width, height)
    causes["turn"]["roll"] = camera_roll
    camera_moves = bool(np.any(np.abs(cams - cams[0]) > 1e-9) or np.any(fovs != fovs[0]))
    checks = _component_checks(expected, measured, causes, half_diag, significant_px,
                               config.unplanned_factor)
    plan_px = float(np.concatenate(plan_fit).mean()) if plan_fit else math.nan
    plain_px = float(np.concatenate(plain_fit).mean()) if plain_fit else math.nan
    depth_px = float(np.concatenate(plan_depth).mean()) if plan_depth else math.nan
    flat = bool(plan_px > max(config.plain_fit_ratio * plain_px, config.plain_fit_min_px / analysis_scale))
    if not flat:
        flat_text = None
    elif depth_px >= config.plain_fit_min_px / (2 * analysis_scale):
        flat_text = (f"moves like one image-wide zoom or pan, without the depth of the planned move (such a "
                     f"zoom or pan fits the picture within {plain_px:.2f} px/frame, the plan only within "
                     f"{plan_px:.2f}): a zoom or pan where the camera should travel?")
    else:
        flat_text = (f"moves unlike the planned zoom, pan or roll (another one fits the picture within "
                     f"{plain_px:.2f} px/frame, the plan only within {plan_px:.2f})")
    ok = (evaluated > 0 and error_mean <= limit and not flat
          and all(c.direction_ok is not False and not c.unplanned for c in checks))
    return CameraAdherence(
        ok=bool(ok),
        summary=_summary(checks, error_mean, limit, stride, evaluated, skipped,
                         _small_move(checks, causes, significant_px, skipped > 0)
                         if camera_moves else None,
                         flat_text),
        pairs_evaluated=evaluated,
        pairs_skipped=skipped,
        stride=stride,
        frames_seen=seen[0],
        frames_planned=n,
        error_mean_px=error_mean,
        error_p95_px=error_p95,
        error_limit_px=limit,
        significant_px=significant_px,
        tracks_used=used,
        tracks_excluded=excluded,
        components=checks,
        worst_pair=worst,
        plan_fit_px=plan_px,
        plain_fit_px=plain_px,
        parallax_missing=flat,
    )
