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
Each planned component is named after what drives it (camera_verdict._cause): the camera's turn, its zoom,
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

This module runs the check and holds its configuration and result; the parts it stands on
are modules of their own: the scene model and ray casting (camera_scene), the planned motion
(camera_planned), the feature tracks (camera_tracking), the similarity fits and the agreeing
tracks (camera_similarity), and the per-component verdicts and words (camera_verdict).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from daotai.errors import PlanError
from daotai.qc.camera_planned import (
    depth_map_reproject,
    depth_map_screen,
    on_characters,
    planned_causes,
    reproject,
    within_depth_band,
)
from daotai.qc.camera_scene import DepthMap, DepthModel, SceneModel
from daotai.qc.camera_similarity import (
    COMPONENTS,
    Similarity,
    agreeing_tracks,
    apply_matrix,
    least_squares_similarity,
    matrix_components,
    ransac_similarity,
)
from daotai.qc.camera_tracking import TrackedPair, TrackerConfig, track_pairs
from daotai.qc.camera_verdict import ComponentCheck, component_checks, small_move_text, summary_text

__all__ = [
    "DEPTH_MAP_CONFIG",
    "CameraAdherence",
    "CameraCheckConfig",
    "DepthModels",
    "check_camera",
]


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


def tracking_threads() -> int:
    """Threads that track a shot's frame pairs: this process's share of the cores (daotai.qc.threads),
    at most 8 (decoding the frames, in the caller's thread, keeps no more busy)."""
    from daotai.qc.threads import check_threads

    return max(1, min(8, check_threads()))


def _bounded(frames: Iterable[np.ndarray], n: int, seen: list[int]) -> Iterator[np.ndarray]:
    """Pass frames through, counting them and refusing more than the plan has cameras."""
    for index, frame in enumerate(frames):
        if index >= n:
            raise PlanError(f"frames: the video has more than the plan's {n} frames")
        seen[0] = index + 1
        yield frame


@dataclass(frozen=True)
class _PairResult:
    """What one frame pair contributes to the shot report."""

    errors: np.ndarray  # (K,) endpoint errors of the kept tracks, px per frame
    excluded: int  # tracks found but not kept
    measured: Similarity
    expected: Similarity
    causes: dict[str, Similarity] | None  # planned motion explained by each driver (camera_verdict._cause)
    plan_fit: np.ndarray  # (C,) |measured - planned| on the tracks the components use, px/frame
    plain_fit: np.ndarray  # (C,) |measured - best single similarity| on the same tracks, px/frame
    plan_depth: np.ndarray  # (C,) |planned - its own best similarity|: parallax and perspective
    exact_depth: bool  # the scene was a DepthMap


def _planned_depth_map(pair: TrackedPair, cams: np.ndarray, fovs: np.ndarray, model: DepthMap,
                       config: CameraCheckConfig
                       ) -> tuple[np.ndarray, np.ndarray, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """Planned motion (K, 2), NaN where undefined or on an edge, the moving-pixel mask and a
    function giving the band of planned motions around each track (see depth_map_screen)."""
    a, b = pair.index_a, pair.index_b
    start = pair.points_uv
    radius = config.depth_edge_radius_px / pair.analysis_scale  # full-resolution px
    edge_flow = config.depth_edge_flow_px / pair.analysis_scale
    planned = depth_map_reproject(cams[a], fovs[a], cams[b], fovs[b], start, pair.width,
                                   pair.height, model) - start  # (K, 2) px
    edge, moving, band = depth_map_screen(cams[a], fovs[a], cams[b], fovs[b], start, pair.width,
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
        planned = reproject(cams[a], fovs[a], cams[b], fovs[b], start, width, height,
                             model) - start  # (K, 2) px; NaN where the point falls behind cam b
        on_chars = on_characters(cams[a], fovs[a], start, width, height, model,
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
        planned[band], nominal[band] = within_depth_band(
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
    fit = ransac_similarity(s, s + m, threshold, centre)
    if fit is None or int(fit[1].sum()) < min_tracks:
        return None
    common = fit[1]
    causes = planned_causes(cams[a], fovs[a], cams[b], fovs[b], s[common], width, height,
                             model, centre)
    measured = least_squares_similarity(s[common], (s + m)[common], centre)
    planned_similarity = least_squares_similarity(s[common], (s + nominal)[common], centre)
    return _PairResult(
        errors=np.linalg.norm(m - e, axis=1) / stride,
        excluded=pair.detected - len(s),
        measured=matrix_components(measured),
        expected=matrix_components(least_squares_similarity(s[common], (s + nominal)[common], centre)),
        causes=causes,
        plan_fit=np.linalg.norm((m - e)[common], axis=1) / stride,
        plain_fit=np.linalg.norm(apply_matrix(measured, s[common], centre) - (s + m)[common], axis=1) / stride,
        plan_depth=np.linalg.norm(apply_matrix(planned_similarity, s[common], centre) - (s + nominal)[common],
                                  axis=1) / stride,
        exact_depth=isinstance(model, DepthMap),
    )


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
    # part of `expected` explained by each driver (see camera_verdict._cause): turn, zoom, travel along x, y, z
    causes = {driver: dict.fromkeys(COMPONENTS, 0.0) for driver in ("turn", "zoom", "x", "y", "z")}
    camera_roll = 0.0  # degrees the planned camera rolls against the horizon
    skipped = used = excluded = 0
    worst: tuple[int, int, float] | None = None
    width, height, analysis_scale = 0, 0, 1.0

    # Pairs tracked side by side, unless the caller stops early (then no frame is read ahead).
    pairs = track_pairs(_bounded(frames, n, seen), stride, config.tracker,
                        threads=tracking_threads() if max_pairs is None else 1)
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
    checks = component_checks(expected, measured, causes, half_diag, significant_px,
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
        summary=summary_text(checks, error_mean, limit, stride, evaluated, skipped,
                         small_move_text(checks, causes, significant_px, skipped > 0)
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
