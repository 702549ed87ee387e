"""Native model output back onto the plan's frame grid: bytes, resize, repeat or drop frames."""

from __future__ import annotations

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
        how = "repeating" if plan.fps > request.fps else "dropping" if plan.fps < request.fps else "trimming"
        parts.append(
            f"generated {request.frames} frames at {request.fps:g} fps, retimed to {shot.frames} at "
            f"{plan.fps:g} fps by {how} frames (no interpolator installed)"
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
    """Frames on the plan's grid from native (F, h, w, 3) uint8 output: retimed and resized."""
    for index, source in enumerate(retime_indexes(len(native), request.fps, shot.frames, plan.fps)):
        yield Frame(shot_id=shot.shot_id, index=index, rgb=resize_rgb(native[source], plan.width, plan.height))
