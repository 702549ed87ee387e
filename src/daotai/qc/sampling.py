"""How densely QC samples a shot's frames: sparse first, dense only where the verdict is close.

The camera-adherence check (daotai.qc.camera_adherence.check_camera) used to track every neighbouring
frame pair; it was most of a previz render's QC time. Tracking every third frame (pairs (0, 3),
(3, 6), ...) costs about a third as much and sees the same move. A sparse result decides the
shot only when at least two thirds of its pairs were tracked and it passes with room to spare on
every rule the check applies; anywhere near a threshold, failing, or tracked too thinly, the shot
is checked again densely, so a failure (and every borderline pass) is exactly the verdict the
dense check gives.

Why the margins hold: the per-frame errors and fits a sparse pass reports are pair values
divided by the stride. A pair's tracking noise does not grow with the step, so noise reads
about 1 / stride as large sparse; a systematic miss (a wrong speed, a missing parallax) reads
the same. A sparse per-frame value times the stride therefore never reads under what the dense
pass would measure, and that product is what is held against the rule's bound. Per component
(pan, tilt, roll, zoom) what is held is how far the picture strays from the plan over the shot
(see DEVIATION_SHARE). Frames between the sampled ones are not tracked: a repeated or dropped
one there is seen by the judder measure (every step's flow), and a shot whose steps jump is
checked densely too.

``QcSampling`` names the setting; ``DENSE`` is the check as it was (every pair), the baseline
that bench/qc_share.py measures against. ``DAOTAI_QC_SAMPLING`` (dense or fast) picks one for
the checks of a whole process tree (worker processes inherit it); benchmarks set it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

ENV_VAR = "DAOTAI_QC_SAMPLING"


@dataclass(frozen=True)
class QcSampling:
    """One QC sampling setting."""

    name: str
    camera_stride: int  # frame step of the first camera-adherence pass (1: every neighbouring pair)
    # A sparse pass decides only when each per-frame value (error, plan fit) times the stride stays
    # under this share of its rule's bound (and each component strays under DEVIATION_SHARE).
    # Measured on bench/qc.py --quick at 640x360 (13 moves, correct and broken): the dense error and
    # plan fit of a correct shot came out at 0.55-0.9 of the sparse value times two, never over it.
    clear_share: float = 0.7

    def __post_init__(self) -> None:
        if not isinstance(self.camera_stride, int) or self.camera_stride < 1:
            raise ValueError(f"QcSampling.camera_stride: {self.camera_stride!r} must be an integer >= 1")
        if not 0.0 < self.clear_share <= 1.0:
            raise ValueError(f"QcSampling.clear_share: {self.clear_share!r} must be in (0, 1]")


DENSE = QcSampling("dense", camera_stride=1)
FAST = QcSampling("fast", camera_stride=3)
SAMPLINGS: dict[str, QcSampling] = {s.name: s for s in (DENSE, FAST)}

# A component's total is the sum of its per-pair similarities, and how the steps compose depends on
# their length: sparse and dense totals of one shot differ (a crane's planned vertical total read
# 3.7 px dense and 20 px sparse). What both passes agree on is how far the picture strays from
# the plan in each component (measured - planned over the shot: 0.1-10 px on the corpus's correct
# shots either way), and a component only fails (the wrong direction, or a move the plan keeps
# still) when that deviation exceeds the significance threshold. A sparse deviation under this
# share of the threshold is clear.
DEVIATION_SHARE = 0.5
# Fewer evaluated pairs than this share (the rest had too little texture): dense. A stride-3 pass
# of a 2 s shot has 15 pairs; with half of them skipped its totals would rest on 7.
MIN_COVERAGE = Fraction(2, 3)


def sampling_named(name: str) -> QcSampling:
    """The setting called ``name``; OptionError (at ``DAOTAI_QC_SAMPLING``) naming the known ones otherwise."""
    from daotai.errors import OptionError

    try:
        return SAMPLINGS[name]
    except KeyError:
        raise OptionError.at(ENV_VAR, name, f"must be one of {', '.join(SAMPLINGS)}") from None


def sampling_from_env(environ: Mapping[str, str] | None = None) -> QcSampling:
    """The setting ``DAOTAI_QC_SAMPLING`` names (FAST when unset or empty)."""
    name = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    return sampling_named(name) if name else FAST


def densify_reason(sparse, config, clear_share: float, half_diag: float) -> str | None:
    """Why a sparse camera-adherence result (a camera.CameraAdherence) cannot decide the shot, or
    None when it passes every rule of ``config`` (a camera.CameraCheckConfig) with room to spare.

    ``half_diag``: half the frame's diagonal, px (roll and zoom totals as pixels at the corner)."""
    from daotai.qc.camera_verdict import component_px

    stride = sparse.stride
    if not sparse.ok:
        return "the sparse pass fails"
    pairs = sparse.pairs_evaluated + sparse.pairs_skipped
    if sparse.pairs_evaluated == 0 or sparse.pairs_evaluated < MIN_COVERAGE * pairs:
        return f"{sparse.pairs_skipped} of {pairs} frame pairs had too little texture"
    coverage = sparse.pairs_evaluated / pairs  # skipped pairs leave the totals short by at most this
    if not sparse.error_mean_px * stride <= clear_share * sparse.error_limit_px:
        return f"error {sparse.error_mean_px:.2f} px/frame x {stride} near the {sparse.error_limit_px:.2f} limit"
    if math.isfinite(sparse.plan_fit_px):
        scale = sparse.error_limit_px / config.max_mean_error_px  # full-resolution px per analysis px
        bound = max(config.plain_fit_ratio * sparse.plain_fit_px, config.plain_fit_min_px * scale)
        if not sparse.plan_fit_px * stride <= clear_share * bound:
            return f"plan fit {sparse.plan_fit_px:.2f} px/frame x {stride} near the parallax rule's {bound:.2f}"
    for c in sparse.components:
        strays = component_px(c.name, c.measured_total - c.expected_total, half_diag) / coverage
        if not strays <= DEVIATION_SHARE * sparse.significant_px:
            return (f"{c.name} strays {strays:.1f} px from the plan, near the "
                    f"{sparse.significant_px:.1f} px significance")
    return None


def check_camera_sampled(frames: Iterable[np.ndarray], cams: np.ndarray, fovs: np.ndarray, models, config,
                         sampling: QcSampling, size: tuple[int, int],
                         again: Callable[[], tuple[Iterable[np.ndarray], object]],
                         uneven: Callable[[], str | None] = lambda: None):
    """The camera-adherence check at ``sampling``'s stride, done again on every pair when the
    sparse result is not clear (:func:`densify_reason`) or ``uneven()`` says why the frames
    between the sampled ones may hide a fault (steps that jump: repeated or dropped frames).

    ``frames`` and ``models`` are read once by the first pass; ``again()`` gives a fresh
    (frames, models) for the dense one, called only then; ``size``: (w, h) of the frames, px.
    Returns (CameraAdherence, why it was made dense or None)."""
    from daotai.qc.camera_adherence import check_camera

    first = check_camera(frames, cams, fovs, models, stride=sampling.camera_stride, config=config)
    if sampling.camera_stride == 1:
        return first, None
    reason = densify_reason(first, config, sampling.clear_share, 0.5 * math.hypot(*size)) or uneven()
    if reason is None:
        return first, None
    frames, models = again()
    return check_camera(frames, cams, fovs, models, stride=1, config=config), reason
