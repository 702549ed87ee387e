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

from typing import Any, Iterator

import numpy as np

from daotai.errors import BackendError
from daotai.events import Frame, Notice
from daotai.plan.model import Plan, ShotPlan
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
    from daotai.render.motion import Grids, flow_pair, new_dis, synthesise

    dis = None
    grids = Grids(native.shape[2], native.shape[1])
    pair = None
    pair_index = -1
    for a, t in retime_positions(len(native), native_fps, plan_frames, plan_fps):
        if t == 0.0:
            yield native[a]
            continue
        if pair_index != a:
            dis = dis or new_dis()
            pair, pair_index = flow_pair(dis, native[a], native[a + 1], grids), a
        assert pair is not None
        yield synthesise(native[a], native[a + 1], t, pair, grids)
