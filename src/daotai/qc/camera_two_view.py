"""Two-view geometry of tracked points, for recovering a camera path from its frames.

Pure maths on normalised image coordinates: the rotation and zoom nearest a homography, the
parallax a rotation leaves, linear triangulation, Sampson distances and the essential matrices
of several robust estimators, and the angle between rotations. The path recovery
(daotai.qc.camera_path), its map adjustment (daotai.qc.camera_path_map) and the comparison with
the plan (daotai.qc.camera_path_check) all use them.
"""

from __future__ import annotations

import numpy as np

from daotai.plan import geometry

RANSAC_PX = 1.0  # inlier threshold of both models, pixels


def normalised(uv: np.ndarray, intrinsics: geometry.Intrinsics) -> np.ndarray:
    """Pixels (N, 2) -> normalised OpenCV image coordinates (N, 2) ((u - cx) / fx, (v - cy) / fy)."""
    fx, fy, cx, cy = intrinsics
    return np.stack([(uv[:, 0] - cx) / fx, (uv[:, 1] - cy) / fy], axis=1)


def _rotation(matrix: np.ndarray) -> np.ndarray:
    """The rotation nearest a 3x3 matrix (SVD, det +1)."""
    u, _, vt = np.linalg.svd(matrix)
    r = u @ vt
    if np.linalg.det(r) < 0:
        u[:, -1] *= -1
        r = u @ vt
    return r


def rotation_with_zoom(h: np.ndarray) -> tuple[np.ndarray, float]:
    """The rotation R and zoom z nearest a homography of normalised coordinates: h ∝ diag(z, z, 1) R."""
    m = h / np.cbrt(np.linalg.det(h))
    mm = m @ m.T  # diag(z^2, z^2, 1) / c^2 for an exact rotation with zoom
    z = float(np.sqrt(0.5 * (mm[0, 0] + mm[1, 1]) / mm[2, 2]))
    return _rotation(np.diag([1.0 / z, 1.0 / z, 1.0]) @ m), z


def transfer_px(xa: np.ndarray, xb: np.ndarray, rotation: np.ndarray, zoom: float, focal: float) -> np.ndarray:
    """Pixel distances (N,) between tracks in b and tracks in a moved by a rotation with zoom (no parallax)."""
    rays = np.hstack([xa, np.ones((len(xa), 1))]) @ rotation.T  # (N, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        predicted = zoom * rays[:, :2] / rays[:, 2:3]
    error = np.linalg.norm(predicted - xb, axis=1) * focal
    return np.where(rays[:, 2] > 0, error, np.inf)


def triangulate(xa: np.ndarray, xb: np.ndarray, rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """Points (N, 3) in camera a from normalised coordinates, camera b = [R | t] of camera a.

    Linear (DLT) triangulation: each point is the null vector of the 4x4 system its two views
    give, solved for all points at once by one batched SVD. Written here rather than called
    from OpenCV because ``cv2.triangulatePoints`` returns None in OpenCV 5.0."""
    pa = np.hstack([np.eye(3), np.zeros((3, 1))])  # (3, 4)
    pb = np.hstack([rotation, translation.reshape(3, 1)])  # (3, 4)
    xa = np.asarray(xa, dtype=np.float64)  # (N, 2)
    xb = np.asarray(xb, dtype=np.float64)  # (N, 2)
    system = np.stack([
        xa[:, :1] * pa[2] - pa[0],
        xa[:, 1:2] * pa[2] - pa[1],
        xb[:, :1] * pb[2] - pb[0],
        xb[:, 1:2] * pb[2] - pb[1],
    ], axis=1)  # (N, 4, 4)
    homogeneous = np.linalg.svd(system)[2][:, -1, :]  # (N, 4): right singular vector of the smallest value
    with np.errstate(divide="ignore", invalid="ignore"):
        return homogeneous[:, :3] / homogeneous[:, 3:4]


def sampson_px(e: np.ndarray, xa: np.ndarray, xb: np.ndarray, focal: float) -> np.ndarray:
    """Sampson distances (N,) in pixels of track pairs (normalised (N, 2) each) from an essential matrix."""
    ha = np.hstack([xa, np.ones((len(xa), 1))])
    hb = np.hstack([xb, np.ones((len(xb), 1))])
    line_b, line_a = ha @ e.T, hb @ e  # epipolar lines in b and in a, (N, 3)
    residual = np.einsum("ij,ij->i", hb, line_b)
    gradient = line_b[:, 0] ** 2 + line_b[:, 1] ** 2 + line_a[:, 0] ** 2 + line_a[:, 1] ** 2
    return np.abs(residual) / np.sqrt(np.maximum(gradient, 1e-300)) * focal


# Robust estimators tried for each step's essential matrix. A short sideways move with a turn (an
# orbit) reads almost as well as a move forward (the bas-relief ambiguity), and which one a single
# RANSAC lands on changed with a 0.03-level difference between two GPUs' renders of the same shot.
# Every estimator's answer is a candidate; the path keeps the one the points already placed agree
# with (see daotai.qc.camera_path).
ESSENTIAL_METHODS = ("RANSAC", "LMEDS", "USAC_ACCURATE", "USAC_MAGSAC")


def essential_candidates(xa: np.ndarray, xb: np.ndarray, focal: float) -> list[tuple[float, np.ndarray]]:
    """Essential matrices (3, 3) of normalised track pairs (N, 2) from several robust estimators, best first.

    Each is scored by the mean of squared Sampson distances capped at RANSAC_PX (an MSAC score over
    every track), so a degenerate fit that only some tracks obey scores worse than one most obey."""
    return essential_candidates_of_steps([(xa, xb, focal)])[0]


def essential_candidates_of_steps(steps: list[tuple[np.ndarray, np.ndarray, float]],
                                  threads: int | None = None) -> list[list[tuple[float, np.ndarray]]]:
    """:func:`essential_candidates` of each (xa, xb, focal) step, in the steps' order.

    Every estimator of every step runs as one task on a pool of threads (OpenCV lets go of the GIL;
    each call seeds its own sampling, so the answers are those of one call after the other): the
    camera path's costliest part, and on the last shot of a render nothing else waits for those
    cores. One pool for all steps, not one per step, because a step waits for its slowest estimator
    (RANSAC runs to its iteration cap on tracks that fit no motion, four times LMedS's time) while
    the others' threads would idle. ``threads``: default this process's share of the cores
    (daotai.qc.threads), at least one per estimator."""
    from concurrent.futures import ThreadPoolExecutor

    tasks = [(index, name) for index in range(len(steps)) for name in ESSENTIAL_METHODS]
    if not tasks:
        return []
    from daotai.qc.threads import check_threads

    workers = min(len(tasks), threads or max(len(ESSENTIAL_METHODS), check_threads()))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="daotai-essential") as pool:
        found = list(pool.map(lambda task: _essential_by(task[1], *steps[task[0]]), tasks))
    out: list[list[tuple[float, np.ndarray]]] = [[] for _ in steps]
    for (index, _), candidates in zip(tasks, found, strict=True):
        out[index].extend(candidates)
    return [sorted(candidates, key=lambda c: c[0]) for candidates in out]


def _essential_by(name: str, xa: np.ndarray, xb: np.ndarray, focal: float) -> list[tuple[float, np.ndarray]]:
    """(MSAC score, E (3, 3)) of every essential matrix OpenCV's estimator ``name`` returns."""
    import cv2

    try:
        found, _ = cv2.findEssentialMat(xa, xb, np.eye(3), getattr(cv2, name), 0.999, RANSAC_PX / focal)
    except cv2.error:
        return []
    if found is None or found.ndim != 2 or found.shape[1] != 3:
        return []
    out = []
    for j in range(0, found.shape[0] - 2, 3):
        e = found[j:j + 3]
        out.append((float(np.mean(np.minimum(sampson_px(e, xa, xb, focal), RANSAC_PX) ** 2)), e))
    return out


def geodesic_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (N,) in degrees between rotations a and b (N, 3, 3)."""
    # ||A - B||_F = 2 sqrt(2) sin(angle / 2) for rotations: stable near 0, unlike arccos of the trace
    chord = np.linalg.norm((np.asarray(a) - np.asarray(b)).reshape(len(a), -1), axis=1)
    return np.degrees(2.0 * np.arcsin(np.clip(chord / (2.0 * np.sqrt(2.0)), 0.0, 1.0)))
