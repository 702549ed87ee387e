"""Planned image motion: where the plan's cameras move each pixel of a frame, given the scene.

The camera check compares this with the motion measured in the video (daotai.qc.camera_adherence). A
pixel of frame a is cast into the scene (daotai.qc.camera_scene) or placed at a depth map's
depth, then projected with camera b; what misses everything is a direction at infinity that
only rotation and zoom move. Besides the flow itself: the depth-edge screen of a depth map, the
tracks that start on characters and the band of depths a character's track may lie in, and the
planned motion split by what drives it (turn, zoom, travel along each camera axis).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from daotai.errors import PlanError
from daotai.plan import geometry
from daotai.qc.camera_scene import (
    Cylinder,
    DepthMap,
    DepthModel,
    SceneModel,
    Solid,
    cast_rays,
    check_cam,
    cylinder_span,
)
from daotai.qc.camera_similarity import (
    COMPONENTS,
    Similarity,
    least_squares_similarity,
    matrix_components,
)

__all__ = [
    "depth_map_reproject",
    "depth_map_screen",
    "expected_flow",
    "focal_px",
    "on_characters",
    "planned_causes",
    "project_homogeneous",
    "reproject",
    "unproject_homogeneous",
    "within_depth_band",
]


def focal_px(fov_deg: float, height: int) -> float:
    """Focal length in pixels for a vertical field of view: (H / 2) / tan(fov / 2)."""
    return geometry.focal_from_fov(fov_deg, height)


def project_homogeneous(cam: np.ndarray, fov_deg: float, points: np.ndarray, w: np.ndarray,
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


def reproject(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
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
    return project_homogeneous(cam_b, fov_b, points, hit.astype(np.float64), width, height)


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


def unproject_homogeneous(cam: np.ndarray, fov_deg: float, points_uv: np.ndarray, inverse: np.ndarray,
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


def depth_map_reproject(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                         points_uv: np.ndarray, width: int, height: int,
                         depth: DepthMap) -> np.ndarray:
    """Positions (N, 2) in frame b of frame a's pixels placed at the depth map's depths."""
    inverse = _inverse_depth(depth)  # (h, w) 1/m
    scale = np.array([inverse.shape[1] / width, inverse.shape[0] / height])
    # Inverse depth is affine in (u, v) on any plane, so bilinear interpolation of it is
    # exact on flat surfaces; depth itself would bend between pixel centres.
    inv = _bilinear(inverse, points_uv * scale - 0.5)  # (N,) 1/m
    world, w = unproject_homogeneous(cam_a, fov_a, points_uv, inv, width, height)
    return project_homogeneous(cam_b, fov_b, world, w, width, height)


def depth_map_screen(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
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
    world, wh = unproject_homogeneous(cam_a, fov_a, uv, inverse[cells[..., 1], cells[..., 0]].ravel(),
                           width, height)
    flow = (project_homogeneous(cam_b, fov_b, world, wh, width, height) - uv).reshape(n, m, 2)
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


def _check_fov(fov: float, name: str) -> float:
    """A validated vertical fov in degrees."""
    value = float(fov)
    if not (1.0 < value < 170.0):
        raise PlanError(f"{name}: {value!r} must be in (1, 170) degrees")
    return value


# expected_flow's default scene: the ground plane at y = 0, nothing standing on it
_GROUND_ONLY = DepthModel()


def expected_flow(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
                  points_uv: np.ndarray, width: int, height: int,
                  depth_model: SceneModel = _GROUND_ONLY) -> np.ndarray:
    """Planned pixel displacement (N, 2) from frame a to b of pixels (N, 2) of frame a."""
    cam_a, cam_b = check_cam(cam_a, "cam_a"), check_cam(cam_b, "cam_b")
    fov_a, fov_b = _check_fov(fov_a, "fov_a"), _check_fov(fov_b, "fov_b")
    uv = np.asarray(points_uv, dtype=np.float64)
    if uv.ndim != 2 or uv.shape[1] != 2:
        raise PlanError(f"points_uv: shape {uv.shape} must be (N, 2)")
    if isinstance(depth_model, DepthMap):
        return depth_map_reproject(cam_a, fov_a, cam_b, fov_b, uv, width, height,
                                    depth_model) - uv
    return reproject(cam_a, fov_a, cam_b, fov_b, uv, width, height, depth_model) - uv


def on_characters(cam: np.ndarray, fov: float, points_uv: np.ndarray, width: int,
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


def within_depth_band(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
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
        near = np.minimum(near, cylinder_span(origin, dirs, cyl, model.ground_y)[0])
    scenery = DepthModel(model.ground_y, model.far_m, tuple(o for o in model.occluders if isinstance(o, Solid)))
    behind = cast_rays(origin, dirs, scenery)  # (K,) m, inf for the sky
    found = np.isfinite(near)
    sky = ~np.isfinite(behind)
    far_points = np.where(sky[:, None], dirs, origin + np.where(sky, 0.0, behind)[:, None] * dirs)
    ends = (project_homogeneous(cam_b, fov_b, origin + np.where(found, near, 0.0)[:, None] * dirs,
                     np.ones(len(start)), width, height),
            project_homogeneous(cam_b, fov_b, far_points, (~sky).astype(np.float64), width, height))
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


def planned_causes(cam_a: np.ndarray, fov_a: float, cam_b: np.ndarray, fov_b: float,
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
            end = depth_map_reproject(cam_a, fov_a, cam, fov, points, width, height, scene)
        else:
            end = reproject(cam_a, fov_a, cam, fov, points, width, height, scene)
        if not np.all(np.isfinite(end)):
            return None
        return matrix_components(least_squares_similarity(points, end, centre))

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
