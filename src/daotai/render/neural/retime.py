"""Native model output back onto the plan's frame grid: bytes, resize, and retiming.

Neural models generate at their own rate (Wan 16 fps, LTX 24); the plan's rate is the
script's (24, 25, 30 …). Each plan frame shows the native video at its own time
``i * native_fps / plan_fps``: between two native frames it is synthesised by motion
interpolation (:func:`in_between`: DIS optical flow both ways, flow to the in-between time
approximated as in Super-SloMo, both neighbours warped and blended by time and visibility; the
algorithm of :mod:`daotai.post.interpolate`, which sits above this layer and so cannot be
imported here). Repeating the nearest frame instead (:func:`retime_indexes`) makes a steady
move stutter — 16 → 30 fps shows every native frame for 2 or 1 plan frames alternately — so
it is only the fallback when OpenCV is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from daotai.errors import BackendError
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import Frame, Notice
from daotai.render.neural.request import NativeRequest


def retime_indexes(native_frames: int, native_fps: float, plan_frames: int, plan_fps: float) -> list[int]:
    """For each plan frame, the native frame shown at the same time (repeats or drops frames)."""
    ratio = native_fps / plan_fps
    return [min(native_frames - 1, int(np.floor(i * ratio + 0.5))) for i in range(plan_frames)]


def plan_to_native_indexes(plan_frames: int, plan_fps: float, native_frames: int, native_fps: float) -> list[int]:
    """For each native frame, the plan frame at the same time (used to sample control signals)."""
    return retime_indexes(plan_frames, plan_fps, native_frames, native_fps)


def retime_notice(request: NativeRequest, plan: Plan, shot: ShotPlan) -> Notice | None:
    """A Notice describing the retiming and resizing, or None when the output maps 1:1."""
    parts = []
    if abs(request.fps - plan.fps) > 1e-6 or request.frames != shot.frames:
        if abs(request.fps - plan.fps) <= 1e-6:
            how = "trimming frames"
        elif interpolator_available():
            how = f"motion interpolation ({INTERPOLATION_METHOD})"
        else:
            how = ("repeating" if plan.fps > request.fps else "dropping") + " frames (no interpolator: OpenCV is missing)"
        parts.append(
            f"generated {request.frames} frames at {request.fps:g} fps, retimed to {shot.frames} at "
            f"{plan.fps:g} fps by {how}"
        )
    if (request.width, request.height) != (plan.width, plan.height):
        parts.append(f"generated at {request.width}x{request.height}, resized to {plan.width}x{plan.height}")
    return Notice("info", "; ".join(parts), shot.shot_id) if parts else None


UINT8_CHUNK_FRAMES = 8  # frames converted to bytes per pass on the device


def to_uint8(frames: Any) -> np.ndarray:
    """Pipeline output → (F, H, W, 3) uint8.

    Accepts numpy (1, F, H, W, 3) / (F, H, W, 3) floats in [0, 1], or a torch tensor as
    ``output_type="pt"`` returns it, (1, F, 3, H, W) / (F, 3, H, W) on the device: that one is
    scaled and rounded where it lies, so only 1 byte a sample crosses to the host instead of 4
    (81 frames at 832x480: 97 MB, not 388 MB) and the host does no float work.
    """
    if hasattr(frames, "permute"):  # torch tensor (channels first)
        import torch

        tensor = frames[0] if frames.ndim == 5 else frames
        if tensor.ndim != 4 or tensor.shape[1] != 3:
            raise BackendError(f"pipeline returned frames of shape {tuple(tensor.shape)}; expected (F, 3, H, W)")
        frames_n, _, height, width = tensor.shape
        with torch.no_grad():
            out = torch.empty(frames_n, height, width, 3, dtype=torch.uint8, device=tensor.device)
            # A few frames at a time: the float temporaries stay small (8 frames at 832x480: 38 MB
            # instead of 2 x 388 MB for 81), so converting never raises the shot's memory peak.
            for start in range(0, frames_n, UINT8_CHUNK_FRAMES):
                chunk = tensor[start:start + UINT8_CHUNK_FRAMES].float() * 255.0
                out[start:start + UINT8_CHUNK_FRAMES] = (chunk.add_(0.5).clamp_(0.0, 255.0)  # truncation = rounding
                                                         .to(torch.uint8).permute(0, 2, 3, 1))
            return out.cpu().numpy()  # (F, H, W, 3) uint8
    array = np.asarray(frames, dtype=np.float32)
    if array.ndim == 5:
        array = array[0]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise BackendError(f"pipeline returned frames of shape {array.shape}; expected (F, H, W, 3)")
    return np.clip(array * 255.0 + 0.5, 0, 255).astype(np.uint8)  # (F, H, W, 3) uint8


def resize_rgb(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    """(h, w, 3) uint8 → (height, width, 3) uint8, area filter when shrinking."""
    if frame.shape[1] == width and frame.shape[0] == height:
        return frame
    import cv2

    shrinking = width * height < frame.shape[0] * frame.shape[1]
    interpolation = cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC
    return np.ascontiguousarray(cv2.resize(frame, (width, height), interpolation=interpolation))


def plan_frames(native: np.ndarray, request: NativeRequest, plan: Plan, shot: ShotPlan) -> Iterator[Frame]:
    """Frames on the plan's grid from native (F, h, w, 3) uint8 output: retimed (interpolated) and resized."""
    frames = retime_frames(native, request.fps, shot.frames, plan.fps)
    for index, rgb in enumerate(frames):
        yield Frame(shot_id=shot.shot_id, index=index, rgb=resize_rgb(rgb, plan.width, plan.height))


# ---------------------------------------------------------------- motion interpolation

INTERPOLATION_METHOD = "DIS optical flow, occlusion-aware"
ON_FRAME = 1e-6  # a plan time this close to a native frame shows that frame as it is
OCCLUSION_TOLERANCE_PX = 1.0  # round-trip error still counted as visible (as daotai.post.interpolate)


def interpolator_available() -> bool:
    """Whether motion interpolation can run here (OpenCV's DIS optical flow)."""
    try:
        import cv2
    except ImportError:
        return False
    return hasattr(cv2, "DISOpticalFlow_create")


def retime_positions(native_frames: int, native_fps: float, plan_frames: int, plan_fps: float) -> list[tuple[int, float]]:
    """For each plan frame, (native frame a, t in [0, 1)): it shows the time between a and a + 1 at fraction t."""
    ratio = native_fps / plan_fps
    positions = []
    for i in range(plan_frames):
        time = i * ratio
        a = int(np.floor(time + ON_FRAME))
        t = max(0.0, time - a)
        if a >= native_frames - 1:  # at or past the last native frame: hold it
            a, t = native_frames - 1, 0.0
        positions.append((a, 0.0 if t <= ON_FRAME else t))
    return positions


def retime_frames(native: np.ndarray, native_fps: float, plan_frames: int, plan_fps: float) -> Iterator[np.ndarray]:
    """(F, h, w, 3) uint8 at ``native_fps`` -> ``plan_frames`` frames at ``plan_fps`` (h, w, 3) uint8.

    In-between times are motion-interpolated; without OpenCV the nearest frame is repeated.
    """
    if abs(native_fps - plan_fps) <= 1e-9 or not interpolator_available():
        for source in retime_indexes(len(native), native_fps, plan_frames, plan_fps):
            yield native[source]
        return
    dis = None
    pair: _Pair | None = None
    pair_index = -1
    for a, t in retime_positions(len(native), native_fps, plan_frames, plan_fps):
        if t == 0.0:
            yield native[a]
            continue
        if pair_index != a:
            dis = dis or _new_dis()
            pair, pair_index = flow_pair(dis, native[a], native[a + 1]), a
        assert pair is not None
        yield in_between(native[a], native[a + 1], t, pair)


@dataclass
class _Pair:
    """Flows both ways between two frames and where each frame's pixels are visible in the other."""

    f01: np.ndarray  # (h, w, 2) float32 pixels
    f10: np.ndarray  # (h, w, 2) float32 pixels
    v0: np.ndarray  # (h, w) float32, 1 = pixel of frame 0 visible in frame 1
    v1: np.ndarray  # (h, w) float32, 1 = pixel of frame 1 visible in frame 0
    grid: np.ndarray  # (h, w, 2) float32 pixel coordinates


def _new_dis():
    """A DIS flow estimator tuned for quality over speed (MEDIUM preset)."""
    import cv2

    return cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)


def _warp(image: np.ndarray, flow: np.ndarray, grid: np.ndarray, constant: bool = False) -> np.ndarray:
    """Sample ``image`` at x + flow(x) (bilinear; outside: edge replicated, or 0 when ``constant``)."""
    import cv2

    border = cv2.BORDER_CONSTANT if constant else cv2.BORDER_REPLICATE
    return cv2.remap(image, grid + flow, None, cv2.INTER_LINEAR, borderMode=border, borderValue=0)


def _visibility(forward: np.ndarray, backward: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """1 where the forward-backward flow round trip closes within tolerance, else 0: (h, w) float32."""
    import cv2

    error = cv2.magnitude(*cv2.split(forward + _warp(backward, forward, grid)))
    return (error <= OCCLUSION_TOLERANCE_PX + 0.05 * cv2.magnitude(*cv2.split(forward))).astype(np.float32)


def flow_pair(dis: Any, a: np.ndarray, b: np.ndarray) -> _Pair:
    """Flows both ways between frames a and b ((h, w, 3) uint8) and their visibility."""
    import cv2

    la, lb = cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), cv2.cvtColor(b, cv2.COLOR_RGB2GRAY)
    f01, f10 = dis.calc(la, lb, None), dis.calc(lb, la, None)  # (h, w, 2) float32
    xs, ys = np.meshgrid(np.arange(a.shape[1], dtype=np.float32), np.arange(a.shape[0], dtype=np.float32))
    grid = np.dstack((xs, ys))  # (h, w, 2) float32
    return _Pair(f01, f10, _visibility(f01, f10, grid), _visibility(f10, f01, grid), grid)


def in_between(a: np.ndarray, b: np.ndarray, t: float, pair: _Pair) -> np.ndarray:
    """The frame at time t in (0, 1) between a and b: (h, w, 3) uint8."""
    import cv2

    ft0 = cv2.addWeighted(pair.f01, -(1 - t) * t, pair.f10, t * t, 0.0)  # flow from t to frame 0
    ft1 = cv2.addWeighted(pair.f01, (1 - t) * (1 - t), pair.f10, -t * (1 - t), 0.0)  # from t to frame 1
    w0 = (1 - t) * _warp(pair.v0, ft0, pair.grid, constant=True)  # (h, w) float32
    w1 = t * _warp(pair.v1, ft1, pair.grid, constant=True)
    plain = (w0 + w1) < 1e-3  # seen by neither: the plain time weights
    w0[plain], w1[plain] = 1 - t, t
    return cv2.blendLinear(_warp(a, ft0, pair.grid), _warp(b, ft1, pair.grid), w0, w1)
