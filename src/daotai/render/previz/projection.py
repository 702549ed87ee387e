"""The previz camera as GL and pixels see it: the mirrored projection matrix, pixel intrinsics,
world points to pixels, and the polygon of the frame the sky pass must paint.

Thin wrappers on ``daotai.plan.geometry`` (the one implementation of the camera convention) in the
renderer's terms, plus the sky's exact region; pure numpy, no GL, so tests check them alone.
"""

from __future__ import annotations

import numpy as np

from daotai.plan import geometry


def projection_matrix(fov_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """OpenGL perspective matrix from a vertical fov, with y negated so row 0 is the image top."""
    return geometry.gl_projection(fov_deg, aspect, near, far, flip_y=True)


def intrinsics(fov_deg: float, width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in pixels for a vertical fov, as docs/conventions.md defines them."""
    return geometry.intrinsics_from_fov(fov_deg, width, height)


def project(cam_to_world: np.ndarray, fov_deg: float, width: int, height: int,
            points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel (u, v) of world points (N, 3) and their camera-space z (N,) (negative = in front; uv NaN behind)."""
    uv, depth = geometry.project(points, cam_to_world, geometry.intrinsics_from_fov(fov_deg, width, height))
    return uv, -depth


def sky_polygon(cam_to_world: np.ndarray, fov_deg: float, width: int, height: int,
                far: float) -> np.ndarray:
    """Pixel corners (K, 2), K <= 5, of the frame region the ground cannot cover.

    That is where the pixel's ray rises, or falls so gently that it meets the ground beyond
    the far plane: ``dir_y >= -eye_y / far`` with ``dir`` scaled to camera z = -1. ``dir_y``
    is affine in (u, v), so the region is the frame clipped by one straight line.
    """
    r = cam_to_world[:3, :3]
    eye_y = float(cam_to_world[1, 3])
    fx, fy, cx, cy = intrinsics(fov_deg, width, height)
    frame = np.array([[0.0, 0.0], [width, 0.0], [width, height], [0.0, height]])
    if eye_y <= 0.0:  # at or under the ground: draw the sky everywhere, the ground still wins
        return frame
    # dir_y(u, v) = a u + b v + c
    a = r[1, 0] / fx
    b = -r[1, 1] / fy
    c = -r[1, 0] * cx / fx + r[1, 1] * cy / fy - r[1, 2]
    # 1 % margin below the far-plane line so no sliver is left unpainted; the ground overdraws it
    level = a * frame[:, 0] + b * frame[:, 1] + c + 1.01 * eye_y / far
    out: list[np.ndarray] = []
    for i in range(4):
        j = (i + 1) % 4
        if level[i] >= 0.0:
            out.append(frame[i])
        if (level[i] >= 0.0) != (level[j] >= 0.0):
            k = level[i] / (level[i] - level[j])
            out.append(frame[i] + k * (frame[j] - frame[i]))
    return np.array(out).reshape(-1, 2)
