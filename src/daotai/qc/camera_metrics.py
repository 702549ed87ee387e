"""The camera path and judder checks as QC runs them on a shot's decoded frames, for qc.json.

The frames are shrunk once; the camera path is recovered from them (daotai.qc.camera_path) and
checked against the plan (daotai.qc.camera_path_check), the judder measured on them
(daotai.qc.judder); this module holds the sizes and strides QC uses and turns both results into
qc.json's entries, failures and warnings.
"""

from __future__ import annotations

import numpy as np

from daotai.plan import geometry
from daotai.qc.camera_path import recover_path
from daotai.qc.camera_path_check import (
    ROT_BOUND_DEG,
    ROT_BOUND_SHARE,
    TIMING_BOUND,
    TRANS_BOUND_M,
    TRANS_BOUND_SHARE,
    CameraPathCheck,
    check_camera_path,
    relative_cv,
)
from daotai.qc.judder import JERK_BOUND, JUDGED_SPEED_PX, Judder, judder

# QC decodes each shot once; while the flow-based check reads the frames, a copy shrunk to at most
# METRICS_SIDE wide is kept for the pose recovery and the judder measure. Measured on the previz
# renders of examples/all_moves.json and office.json (640x360, 48-72 frames a shot, 2 busy cores):
# at 480 px both take 0.5-1.5 s a shot together (full size: 1-3.5 s) and every shot keeps the
# verdict it has at full size; a 1080p shot costs the same as a 480 px one plus the shrinking.
METRICS_SIDE = 640
QC_STRIDE = 2  # the path is recovered from every other frame (the timing check still sees 24 steps in 2 s)
# px: the judder's flow is measured on frames shrunk to this wide. At 320 a wide previz dolly in the
# office (1.1 px a frame at 640 wide, 0.55 px measured) read jerk 0.70 from flow noise alone, at the
# bound; at 480 it reads 0.41 and at 640 0.37 (tests/test_qc_false_alarms.py's WIDE_DOLLY_AND_ZOOM).
JUDDER_SIDE = 480
JUDDER_PRESET = 0  # DIS ultrafast: global motion per step needs no fine flow (a third of medium's time)
UNRELIABLE_SKIPPED_SHARE = 0.5  # more steps than this without enough tracks: the path is not known


def shrink(frame: np.ndarray, side: int = METRICS_SIDE) -> np.ndarray:
    """An (H, W, 3) uint8 frame shrunk to at most ``side`` wide (area filter), or the frame itself."""
    import cv2

    height, width = frame.shape[:2]
    if width <= side:
        return frame
    return cv2.resize(frame, (side, max(8, round(height * side / width))), interpolation=cv2.INTER_AREA)


def shrink_mask(exclude: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """An (H, W) bool map shrunk to ``shape`` (h, w): a pixel is excluded when any part of it was."""
    import cv2

    if exclude.shape == shape:
        return exclude
    return cv2.resize(exclude.astype(np.uint8) * 255, (shape[1], shape[0]), interpolation=cv2.INTER_AREA) > 0


def scaled_intrinsics(intrinsics: geometry.Intrinsics, full: tuple[int, int],
                      small: tuple[int, int]) -> geometry.Intrinsics:
    """Pixel intrinsics (fx, fy, cx, cy) of a (w, h) frame carried to a resized (w, h) frame."""
    sx, sy = small[0] / full[0], small[1] / full[1]
    fx, fy, cx, cy = intrinsics
    return (fx * sx, fy * sy, cx * sx, cy * sy)


# Reasons that read the path's shape (its direction, whether it travels) fail a shot on their own.
# Timing and error-bound reasons fail it only where the flow-based camera check also fails: on
# close-ups without a depth control the path is recovered from the subject's own texture, and
# previz close-ups that follow their plan exactly measured up to 31% off in timing and 5.2 deg a
# frame of RotErr (tests/test_qc_false_alarms.py's CLOSE_UPS); alone they are a warning.
SHAPE_REASONS = ("turns the opposite way", "travels the opposite way", "does not travel")


def path_verdict(check: CameraPathCheck | None, reason: str = "",
                 flow_failed: bool = False) -> tuple[dict, list[str], str | None, str | None]:
    """qc.json's "camera_path" entry, its failures, its passing text and a warning (not checked, or
    only timing or error bounds off while the flow-based check passed: see SHAPE_REASONS)."""
    if check is None:
        return ({"checked": False, "ok": None, "reason": reason}, [], None,
                f"camera path not recovered: {reason}")
    entry = {**check.as_dict(), "checked": True, "ok": check.passed,
             "rule": (f"per compared frame: RotErr <= {ROT_BOUND_DEG:g} deg + {ROT_BOUND_SHARE:g} x the planned turn, "
                      f"TransErr <= {TRANS_BOUND_M:g} m + {TRANS_BOUND_SHARE:g} x the planned path (after one scale "
                      f"fit); direction, travel (parallax) and timing within {TIMING_BOUND:g} of the move; timing "
                      "and bounds fail only with the flow-based camera check, else they are a warning")}
    numbers = (f"RotErr {entry['RotErr_per_frame_deg']:.2f} deg/frame (bound {entry['rot_bound_deg']:.1f}), "
               f"TransErr {entry['TransErr_per_frame_m']:.3f} m/frame (bound {entry['trans_bound_m']:.2f}), "
               f"CamMC {entry['CamMC']:.2f}")
    if not check.passed:
        text = f"camera path: {'; '.join(check.reasons)} ({numbers})"
        if flow_failed or any(r.startswith(SHAPE_REASONS) for r in check.reasons):
            return entry, [text], None, None
        entry["ok"] = None
        return entry, [], None, f"{text}; the flow-based camera check found the move as planned"
    return entry, [], f"camera path as planned: {numbers}", None


def uneven_steps(measured: Judder, clear_share: float) -> str | None:
    """Why a shot's frame steps may hide a fault from a check that samples every other frame (a
    moving picture whose jerk is over ``clear_share`` of JERK_BOUND), or None."""
    if measured.mean_speed_px >= JUDGED_SPEED_PX and not measured.jerk <= clear_share * JERK_BOUND:
        return f"frame steps uneven: jerk {measured.jerk:.2f} near the {JERK_BOUND:g} bound"
    return None


def judder_verdict(measured: Judder) -> tuple[dict, list[str], str | None]:
    """qc.json's "judder" entry, its failures and its passing text (None for a picture that does not move)."""
    moving = measured.mean_speed_px >= JUDGED_SPEED_PX
    entry = {"jerk": round(measured.jerk, 4), "steady_score": round(measured.score, 4),
             "mean_step_px": round(measured.mean_speed_px, 3), "moving": moving, "ok": measured.smooth,
             "rule": f"mean |second difference of the frame steps| / mean step <= {JERK_BOUND:g} "
                     f"(pictures moving under {JUDGED_SPEED_PX:g} px a frame are not judged)"}
    if not moving:
        return entry, [], None
    if not measured.smooth:
        return entry, [f"motion judders: jerk {measured.jerk:.2f} (bound {JERK_BOUND:g}): frame steps alternate "
                       "between moving and standing still (repeated or dropped frames; retime by motion "
                       "interpolation)"], None
    return entry, [], f"motion even (jerk {measured.jerk:.2f})"


def shot_judder(frames: list[np.ndarray], full_size: tuple[int, int]) -> Judder:
    """The judder of a shot's (shrunk) frames as QC measures it, in pixels of ``full_size`` (w, h)."""
    return judder(frames, pixel_scale=full_size[0] / frames[0].shape[1], preset=JUDDER_PRESET, side=JUDDER_SIDE)


def assess_frames(frames: list[np.ndarray], full_size: tuple[int, int], cam_to_world: np.ndarray,
                  intrinsics: list[geometry.Intrinsics], excludes: list[np.ndarray | None] | None = None,
                  stride: int = QC_STRIDE, measured: Judder | None = None):
    """The camera path check and the judder of a shot's (shrunk) frames.

    ``full_size``: (w, h) of the delivered frames, which ``intrinsics`` (pixels, per frame) and the
    judder's pixels refer to; ``cam_to_world`` (F, 4, 4): the plan, OpenGL axes; ``measured``: the
    frames' :func:`shot_judder` when already measured. Returns (CameraPathCheck or None, why not, Judder)."""
    small = (frames[0].shape[1], frames[0].shape[0])
    measured = shot_judder(frames, full_size) if measured is None else measured
    lenses = [scaled_intrinsics(k, full_size, small) for k in intrinsics]
    if excludes is not None:
        excludes = [None if e is None else shrink_mask(e, (small[1], small[0])) for e in excludes]
    try:
        path = recover_path(frames, lenses, stride, excludes)
    except ValueError as exc:
        return None, str(exc), measured
    if path.skipped > UNRELIABLE_SKIPPED_SHARE * max(len(path.parallax), 1):
        return None, (f"{path.skipped} of {len(path.parallax)} steps had too few tracks "
                      "(too little texture to follow)"), measured
    planned = relative_cv(np.asarray(cam_to_world)[list(path.indexes)])
    return check_camera_path(planned, path), "", measured
