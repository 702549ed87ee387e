"""Camera geometry: the one implementation of the camera convention (docs/conventions.md).

Pure numpy (no torch, no GL), small pure functions; the planner, previz, control signals
and camera QC all project through here.

Axes and units
  World: metres, right-handed, y up. Camera-local axes follow OpenGL: x right, y up,
  -z forward (the view direction). The plan stores ``cam_to_world`` (4, 4): columns 0..2
  are the camera's x, y, z axes in world coordinates, column 3 its centre. Its inverse
  is ``world_to_camera`` (the GL view matrix).
Depth
  Always the positive distance in metres along the view axis, ``depth = -z_camera``
  (what the depth control channel stores); a point in front of the camera has depth > 0.
Pixels
  OpenCV image axes: origin at the top-left *corner* of the image, u right, v down, so
  pixel (column i, row j) covers [i, i + 1) x [j, j + 1) and its centre is
  (i + 0.5, j + 0.5); the image centre is (W / 2, H / 2). ``gl_FragCoord.xy`` of the
  previz renderer is this (u, v); OpenCV feature trackers put centres on integers, so
  their positions need + 0.5.
Intrinsics
  ``(fx, fy, cx, cy)`` in pixels, from a vertical fov: fx = fy = (H / 2) / tan(fov / 2),
  cx = W / 2, cy = H / 2. A camera-space point (x, y, z), depth d = -z > 0, lands at
  u = cx + fx * x / d, v = cy - fy * y / d.

The float order of operations in ``intrinsics_from_fov``, ``gl_projection`` and
``project`` is that of the previz renderer's matrices: previz output stays byte-identical
only while it is kept.
"""

from __future__ import annotations

import math

import numpy as np

NEAR_M = 0.05  # previz near clip plane, metres along the view axis
FAR_M = 500.0  # previz far clip plane, metres along the view axis

Intrinsics = tuple[float, float, float, float]  # (fx, fy, cx, cy) in pixels

# Right-multiplying a cam_to_world by this flips the camera's y and z axes: OpenGL camera
# axes (y up, -z forward) <-> OpenCV camera axes (y down, +z forward). It is its own inverse.
GL_CV_FLIP = np.diag([1.0, -1.0, -1.0, 1.0])  # (4, 4) float64
GL_CV_FLIP.flags.writeable = False


# ---------------------------------------------------------------- intrinsics


def focal_from_fov(fov_deg: float, size_px: float) -> float:
    """Focal length in pixels spanning ``fov_deg`` over ``size_px`` pixels: (size / 2) / tan(fov / 2)."""
    return (size_px / 2.0) / math.tan(math.radians(fov_deg) / 2.0)


def fov_from_focal(focal_px: float, size_px: float) -> float:
    """Field of view in degrees that a focal length of ``focal_px`` spans over ``size_px`` pixels."""
    return math.degrees(2.0 * math.atan((size_px / 2.0) / focal_px))


def intrinsics_from_fov(fov_deg: float, width: int, height: int) -> Intrinsics:
    """(fx, fy, cx, cy) in pixels of a ``width`` x ``height`` image with vertical fov ``fov_deg``."""
    fy = focal_from_fov(fov_deg, height)
    return fy, fy, width / 2.0, height / 2.0


def fov_from_intrinsics(intrinsics: Intrinsics, height: int) -> float:
    """Vertical field of view in degrees of intrinsics for an image ``height`` pixels tall."""
    return fov_from_focal(intrinsics[1], height)


def intrinsics_matrix(intrinsics: Intrinsics) -> np.ndarray:
    """The pixel matrix K (3, 3) float64 of (fx, fy, cx, cy), OpenCV form, no skew."""
    fx, fy, cx, cy = intrinsics
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def intrinsics_from_matrix(K: np.ndarray) -> Intrinsics:
    """(fx, fy, cx, cy) of a pixel matrix K (3, 3) (its skew, if any, is ignored)."""
    k = np.asarray(K, dtype=np.float64).reshape(3, 3)
    return float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2])


def normalized_intrinsics(intrinsics: Intrinsics, width: int, height: int) -> Intrinsics:
    """(fx / W, fy / H, cx / W, cy / H): the resolution-free form camera-conditioned video models take."""
    fx, fy, cx, cy = intrinsics
    return fx / width, fy / height, cx / width, cy / height


def pixel_intrinsics(normalized: Intrinsics, width: int, height: int) -> Intrinsics:
    """Pixel (fx, fy, cx, cy) of normalised intrinsics for a ``width`` x ``height`` image."""
    fx, fy, cx, cy = normalized
    return fx * width, fy * height, cx * width, cy * height


# ---------------------------------------------------------------- extrinsics


def world_to_camera(cam_to_world: np.ndarray) -> np.ndarray:
    """The view matrix (..., 4, 4): the exact inverse of ``cam_to_world`` (..., 4, 4)."""
    # np.linalg.inv rather than R^T: the plan stores poses rounded to a few decimals, so their
    # rotations are orthonormal only to ~1e-9, and the renderer's view matrix is this inverse.
    return np.linalg.inv(np.asarray(cam_to_world, dtype=np.float64))


def camera_to_world(world_to_cam: np.ndarray) -> np.ndarray:
    """The pose ``cam_to_world`` (..., 4, 4) of a view matrix ``world_to_cam`` (..., 4, 4)."""
    return np.linalg.inv(np.asarray(world_to_cam, dtype=np.float64))


def transform_points(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Points (..., 3) mapped by the affine 4x4 ``matrix``: ``p @ M[:3, :3].T + M[:3, 3]``."""
    m = np.asarray(matrix, dtype=np.float64)
    return np.asarray(points, dtype=np.float64) @ m[:3, :3].T + m[:3, 3]


def points_world_to_camera(points_world: np.ndarray, cam_to_world: np.ndarray) -> np.ndarray:
    """World points (..., 3) in metres -> camera-space points (..., 3) (x right, y up, -z forward)."""
    return transform_points(world_to_camera(cam_to_world), points_world)


def points_camera_to_world(points_cam: np.ndarray, cam_to_world: np.ndarray) -> np.ndarray:
    """Camera-space points (..., 3) in metres -> world points (..., 3)."""
    return transform_points(cam_to_world, points_cam)


def gl_to_cv(cam_to_world: np.ndarray) -> np.ndarray:
    """cam_to_world (..., 4, 4) with OpenGL camera axes -> the same camera with OpenCV axes (y down, +z forward)."""
    return np.asarray(cam_to_world, dtype=np.float64) @ GL_CV_FLIP


def cv_to_gl(cam_to_world: np.ndarray) -> np.ndarray:
    """cam_to_world (..., 4, 4) with OpenCV camera axes -> the same camera with OpenGL axes."""
    return np.asarray(cam_to_world, dtype=np.float64) @ GL_CV_FLIP


def gl_to_cv_view(world_to_cam: np.ndarray) -> np.ndarray:
    """A view matrix (..., 4, 4) into OpenGL camera axes -> the same view into OpenCV axes (and back)."""
    return GL_CV_FLIP @ np.asarray(world_to_cam, dtype=np.float64)


# ---------------------------------------------------------------- projection


def project_camera(points_cam: np.ndarray, intrinsics: Intrinsics) -> tuple[np.ndarray, np.ndarray]:
    """Camera-space points (N, 3) -> pixels (N, 2) and depths (N,) m; uv is NaN where depth <= 0."""
    cam = np.asarray(points_cam, dtype=np.float64).reshape(-1, 3)
    fx, fy, cx, cy = intrinsics
    depth = -cam[:, 2]  # (N,) metres along the view axis
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = np.stack([cx + fx * cam[:, 0] / depth, cy - fy * cam[:, 1] / depth], axis=1)  # (N, 2) px
    uv[~(depth > 0.0)] = np.nan  # on or behind the camera plane: no mirrored ghost pixels
    return uv, depth


def unproject_camera(uv: np.ndarray, depth: np.ndarray, intrinsics: Intrinsics) -> np.ndarray:
    """Pixels (N, 2) at view-axis depths (N,) m -> camera-space points (N, 3)."""
    uv = np.asarray(uv, dtype=np.float64).reshape(-1, 2)
    d = np.broadcast_to(np.asarray(depth, dtype=np.float64), uv.shape[:1])  # (N,) metres
    fx, fy, cx, cy = intrinsics
    return np.stack([(uv[:, 0] - cx) / fx * d, -(uv[:, 1] - cy) / fy * d, -d], axis=1)  # (N, 3)


def project(points_world: np.ndarray, cam_to_world: np.ndarray,
            intrinsics: Intrinsics) -> tuple[np.ndarray, np.ndarray]:
    """World points (N, 3) -> pixels (N, 2) and positive view-axis depths (N,) m; uv NaN where depth <= 0."""
    return project_camera(points_world_to_camera(np.reshape(points_world, (-1, 3)), cam_to_world), intrinsics)


def unproject(uv: np.ndarray, depth: np.ndarray, cam_to_world: np.ndarray,
              intrinsics: Intrinsics) -> np.ndarray:
    """Pixels (N, 2) at view-axis depths (N,) m -> world points (N, 3)."""
    return points_camera_to_world(unproject_camera(uv, depth, intrinsics), cam_to_world)


# ---------------------------------------------------------------- OpenGL


def gl_projection(fov_deg: float, aspect: float, near: float = NEAR_M, far: float = FAR_M,
                  flip_y: bool = False) -> np.ndarray:
    """OpenGL perspective matrix (4, 4) for a vertical fov; ``flip_y``: framebuffer row 0 is the image top."""
    f = 1.0 / math.tan(math.radians(fov_deg) / 2.0)
    return np.array(
        [
            [f / aspect, 0.0, 0.0, 0.0],
            [0.0, -f if flip_y else f, 0.0, 0.0],
            [0.0, 0.0, (far + near) / (near - far), 2.0 * far * near / (near - far)],
            [0.0, 0.0, -1.0, 0.0],
        ]
    )


def linear_depth(window_z: np.ndarray, near: float = NEAR_M, far: float = FAR_M) -> np.ndarray:
    """Depth-buffer values in [0, 1] (any shape) -> view-axis depth in metres (``gl_projection``'s inverse)."""
    ndc = 2.0 * np.asarray(window_z, dtype=np.float64) - 1.0  # [-1, 1]
    return 2.0 * far * near / ((far + near) - ndc * (far - near))


def window_depth(depth: np.ndarray, near: float = NEAR_M, far: float = FAR_M) -> np.ndarray:
    """View-axis depth in metres (any shape) -> the depth-buffer value in [0, 1] that ``gl_projection`` gives it."""
    d = np.asarray(depth, dtype=np.float64)
    ndc = ((far + near) - 2.0 * far * near / d) / (far - near)  # [-1, 1] between the planes
    return 0.5 * ndc + 0.5


# ---------------------------------------------------------------- rays


def pixel_centres(width: int, height: int) -> np.ndarray:
    """Pixel-centre coordinates (H, W, 2) float64: [j, i] = (i + 0.5, j + 0.5)."""
    u = np.arange(width, dtype=np.float64) + 0.5  # (W,)
    v = np.arange(height, dtype=np.float64) + 0.5  # (H,)
    return np.stack(np.meshgrid(u, v), axis=-1)  # (H, W, 2)


def camera_rays(uv: np.ndarray, intrinsics: Intrinsics) -> np.ndarray:
    """Unit camera-space ray directions (..., 3) through pixel positions (..., 2)."""
    uv = np.asarray(uv, dtype=np.float64)
    fx, fy, cx, cy = intrinsics
    x = (uv[..., 0] - cx) / fx
    y = -(uv[..., 1] - cy) / fy
    dirs = np.stack([x, y, -np.ones_like(x)], axis=-1)  # (..., 3), z = -1 plane
    return dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)


def ray_directions(cam_to_world: np.ndarray, intrinsics: Intrinsics, width: int, height: int) -> np.ndarray:
    """Unit world-space directions (H, W, 3) of the rays through every pixel centre."""
    rotation = np.asarray(cam_to_world, dtype=np.float64)[:3, :3]
    return camera_rays(pixel_centres(width, height), intrinsics) @ rotation.T  # (H, W, 3)


def plucker(cam_to_world: np.ndarray, intrinsics: Intrinsics, width: int, height: int) -> np.ndarray:
    """Plücker coordinates (H, W, 6) of every pixel's ray: (moment o x d, unit direction d), o the camera centre."""
    dirs = ray_directions(cam_to_world, intrinsics, width, height)  # (H, W, 3) unit, world
    origin = np.asarray(cam_to_world, dtype=np.float64)[:3, 3]  # (3,) metres
    moment = np.cross(np.broadcast_to(origin, dirs.shape), dirs)  # (H, W, 3) metres
    return np.concatenate([moment, dirs], axis=-1)  # (H, W, 6)
