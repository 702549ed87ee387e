"""A long shot as several MiniMax-H3 generations: their frames and sound joined into one shot."""

from __future__ import annotations

import numpy as np

from daotai.plan.timing import Segment
from daotai.render.h3_runner import Result

AUDIO_CROSSFADE_FRAMES = 1  # the frame two segments share: their sounds overlap (and are crossfaded) over it


def join_audio(parts: list[tuple[int, np.ndarray]], rate: int, total: int, fade: int) -> np.ndarray:
    """Segments' sounds on one timeline: (start sample, (C, n) samples) each; ``fade`` samples crossfaded at joins."""
    channels = parts[0][1].shape[0]
    out = np.zeros((channels, total), np.float32)
    for index, (start, samples) in enumerate(parts):
        end = min(total, start + samples.shape[1])
        if end <= start:
            continue
        piece = samples[:, : end - start].astype(np.float32)
        if index > 0 and fade > 0:
            n = min(fade, end - start)
            ramp = np.linspace(0.0, 1.0, n, endpoint=False, dtype=np.float32)
            out[:, start:start + n] *= 1.0 - ramp
            piece = piece.copy()
            piece[:, :n] *= ramp
            out[:, start:start + n] += piece[:, :n]
            out[:, start + n:end] = piece[:, n:]
        else:
            out[:, start:end] = piece
    return out


def join_segments(results: list[Result], segments: list[Segment], fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Segments' frames and sound joined: each later segment's first frame (the shared one) is dropped."""
    frames = []
    rate = results[0].rate
    parts = []
    for result, segment in zip(results, segments, strict=True):
        skip = 0 if segment.index == 0 else 1
        frames.append(result.frames[skip:skip + segment.keep])
        start_frame = segment.start - skip  # where the segment's own frame 0 sits on the shot's timeline
        parts.append((int(round(start_frame / fps * rate)), result.audio))
    joined = np.concatenate(frames)
    total = int(round(len(joined) / fps * rate))
    fade = int(round(AUDIO_CROSSFADE_FRAMES / fps * rate))
    return joined, join_audio(parts, rate, total, fade)
