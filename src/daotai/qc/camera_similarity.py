"""Image-wide similarities (shift, roll, scale about the image centre) and the tracks that share one.

The camera check reads a frame pair's motion, measured and planned, as a similarity split into
its camera-grammar components, and keeps the tracks whose plan-vs-video disagreement is the
shot-wide one (``agreeing_tracks``). The fitting (RANSAC and least squares) is plain image
geometry, apart from both the plan and the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

__all__ = [
    "COMPONENTS",
    "Similarity",
    "agreeing_tracks",
    "apply_matrix",
    "fit_similarity",
    "least_squares_similarity",
    "matrix_components",
    "ransac_similarity",
]


# Component names in the order they are reported; signs follow the camera grammar:
# horizontal + = the view moves right (pan right / truck right), px at the image centre;
# vertical   + = the view moves up (tilt up / pedestal up), px at the image centre;
# roll       + = positive roll (camera turns clockwise, picture counter-clockwise), degrees;
# scale      + = the picture grows (dolly in / zoom in), natural log of the scale factor.
COMPONENTS: tuple[str, ...] = ("horizontal", "vertical", "roll", "scale")


@dataclass(frozen=True)
class Similarity:
    """A 4-dof image motion about the image centre, in camera-grammar signs (see COMPONENTS)."""

    horizontal: float  # px, + = view moves right (content moves left)
    vertical: float  # px, + = view moves up (content moves down)
    roll: float  # degrees, + = picture turns counter-clockwise
    scale: float  # log scale factor, + = picture grows


def ransac_similarity(src: np.ndarray, dst: np.ndarray, threshold_px: float,
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


def apply_matrix(matrix: np.ndarray, points: np.ndarray, centre: tuple[float, float]) -> np.ndarray:
    """Map points (N, 2) through a similarity fitted about centre."""
    c = np.asarray(centre, dtype=np.float64)
    return (points - c) @ matrix[:, :2].T + matrix[:, 2] + c


def matrix_components(matrix: np.ndarray) -> Similarity:
    """Camera-grammar components of a centred similarity matrix (2, 3)."""
    cos_s, sin_s = float(matrix[0, 0]), float(matrix[1, 0])
    # Image v points down, so an angle that turns +u toward +v is clockwise on screen.
    return Similarity(
        horizontal=-float(matrix[0, 2]),
        vertical=float(matrix[1, 2]),
        roll=-math.degrees(math.atan2(sin_s, cos_s)),
        scale=math.log(math.hypot(cos_s, sin_s)),
    )


def least_squares_similarity(src: np.ndarray, dst: np.ndarray,
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
    return None if fit is None else (matrix_components(fit[0]), fit[1])


def _two_stage(src: np.ndarray, dst: np.ndarray, threshold_px: float,
               centre: tuple[float, float],
               min_inliers: int) -> tuple[np.ndarray, np.ndarray] | None:
    """RANSAC with a tight threshold, then the generous one if the tight fit starves."""
    fit = None
    for stage in (threshold_px / 3.0, threshold_px):
        fit = ransac_similarity(src, dst, stage, centre)
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
        predicted = apply_matrix(fit[0], src, centre)
    else:
        return None
    miss = np.linalg.norm(predicted - dst, axis=1)  # (N,) px
    near = miss < threshold_px
    if int(near.sum()) < min_tracks:
        return None
    spread = 3.0 * 1.4826 * float(np.median(miss[near]))  # 3 sigma of the background's misses
    keep = miss < min(max(spread, tight), threshold_px)
    return keep if int(keep.sum()) >= min_tracks else None
