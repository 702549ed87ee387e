"""A shot made of generations with sound (MiniMax-H3, LTX-2): one generation's output, several joined
into one shot, and the joined result delivered on the plan's frame grid with the shot's sound.

Both models make at most a few seconds in one generation; a longer shot is several generations
(segments, :func:`daotai.plan.timing.plan_segments`), each later one starting on the frame the one
before it ended on. The rules for that shared frame, for the sound across the join and for cutting
the sound to the shot are one rule whatever the model, so they live here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from daotai.events import Audio, Event, Frame, Notice, Progress
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.timing import Segment
from daotai.render.neural.retime import INTERPOLATION_METHOD, interpolator_available, resize_rgb, retime_frames

NATIVE_FPS = 24.0  # both models generate at 24 fps
AUDIO_CROSSFADE_FRAMES = 1  # the frame two segments share: their sounds overlap (and are crossfaded) over it


@dataclass(frozen=True)
class Result:
    """One generation's output: (F, H, W, 3) uint8 frames at 24 fps and (C, N) float32 sound at ``rate`` Hz."""

    frames: np.ndarray
    audio: np.ndarray
    rate: int


def join_audio(parts: list[tuple[int, np.ndarray]], total: int, fade: int) -> np.ndarray:
    """Segments' sounds on one timeline of ``total`` samples: (start sample, (C, n) samples) each; ``fade``
    samples crossfaded at each join."""
    channels = parts[0][1].shape[0]
    out = np.zeros((channels, total), np.float32)  # (C, total)
    for index, (start, samples) in enumerate(parts):
        end = min(total, start + samples.shape[1])
        if end <= start:
            continue
        piece = samples[:, : end - start].astype(np.float32)
        n = min(fade, end - start) if index > 0 else 0
        if n > 0:
            ramp = np.linspace(0.0, 1.0, n, endpoint=False, dtype=np.float32)
            out[:, start:start + n] = out[:, start:start + n] * (1.0 - ramp) + piece[:, :n] * ramp
        out[:, start + n:end] = piece[:, n:]
    return out


def join_segments(results: list[Result], segments: list[Segment], fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Segments' frames (F, H, W, 3) and sound (C, N) joined: each later segment's first frame (the shared one)
    is dropped and its sound starts on it, crossfaded with the previous segment's."""
    rate = results[0].rate
    frames, parts = [], []
    for result, segment in zip(results, segments, strict=True):
        skip = 0 if segment.index == 0 else 1
        frames.append(result.frames[skip:skip + segment.keep])
        parts.append((int(round((segment.start - skip) / fps * rate)), result.audio))
    joined = np.concatenate(frames)
    total = int(round(len(joined) / fps * rate))
    return joined, join_audio(parts, total, int(round(AUDIO_CROSSFADE_FRAMES / fps * rate)))


def shared_frame(frames: np.ndarray, segment: Segment) -> np.ndarray:
    """The last frame a segment supplies (H, W, 3) uint8: where the next segment starts."""
    skip = 0 if segment.index == 0 else 1
    return frames[skip + segment.keep - 1].copy()


def fit_sound(sound: np.ndarray, samples: int) -> np.ndarray:
    """(C, n) sound cut or zero-padded to ``samples`` (a vocoder's causal edge can end a few ms short)."""
    if sound.shape[1] >= samples:
        return sound[:, :samples]
    return np.pad(sound, ((0, 0), (0, samples - sound.shape[1])))


def deliver(name: str, plan: Plan, shot: ShotPlan, native: np.ndarray, sound: np.ndarray, rate: int,
            size_notes: list[str]) -> Iterator[Event]:
    """The shot's sound cut to its duration, a Notice of what was done to the generation (``size_notes``: how its
    size became the plan's, said by the backend ``name``), then its frames on the plan's grid at the plan's size.
    ``native``: (F, h, w, 3) uint8 at 24 fps; ``sound``: (C, N) float32 at ``rate`` Hz."""
    samples = int(round(shot.frames / plan.fps * rate))
    sound = fit_sound(sound, samples)
    layout = "stereo" if sound.shape[0] == 2 else "mono"
    yield Audio(shot.shot_id, np.ascontiguousarray(np.clip(sound.T, -1.0, 1.0), dtype=np.float32), rate, layout)
    parts = []
    if abs(plan.fps - NATIVE_FPS) > 1e-6:
        how = (f"motion interpolation ({INTERPOLATION_METHOD})" if interpolator_available() else
               ("repeating" if plan.fps > NATIVE_FPS else "dropping") + " frames (no interpolator: OpenCV is missing)")
        parts.append(f"retimed from {len(native)} frames at 24 fps to {shot.frames} at {plan.fps:g} fps by {how}")
    parts += size_notes
    parts.append(f"sound: {sound.shape[0]} channels at {rate} Hz, {samples} samples")
    yield Notice("info", f"{name}: " + "; ".join(parts), shot.shot_id)
    yield Progress("render", shot.shot_id, 0, shot.frames, "retiming")
    for index, rgb in enumerate(retime_frames(native, NATIVE_FPS, shot.frames, plan.fps)):
        yield Frame(shot_id=shot.shot_id, index=index, rgb=resize_rgb(rgb, plan.width, plan.height))
    yield Progress("render", shot.shot_id, shot.frames, shot.frames)
