"""Wipes: the incoming shot uncovered behind an edge that travels across the frame.

A wipe overlaps the shots like a crossfade (daotai.post.assemble): over its n frames, frame j
(0-based) of the overlap has the edge a fraction (j + 1) / (n + 1) of the way across, so the
first overlapped frame already shows a sliver of the incoming shot and the last still shows a
sliver of the outgoing one, as a crossfade's weights do. The name says where the edge travels
(daotai.script.vocab.WIPE_DIRECTIONS): in ``wipe_right`` it enters at the left side and leaves
at the right, so the incoming shot fills the frame from the left.

The edge is hard and falls on whole pixels (round half up): an editor's default wipe, and the
same pixels on every machine.
"""

from __future__ import annotations

import math

import numpy as np

from daotai.script.vocab import WIPE_DIRECTIONS

WIPES: tuple[str, ...] = tuple(WIPE_DIRECTIONS)


def wipe_edge(direction: str, progress: float, length: int) -> int:
    """Pixels (columns or rows) of the incoming shot at ``progress`` in [0, 1] of a frame side ``length`` long."""
    if direction not in WIPE_DIRECTIONS.values():
        raise ValueError(f"wipe direction {direction!r} must be one of {', '.join(WIPE_DIRECTIONS.values())}")
    return min(length, max(0, math.floor(progress * length + 0.5)))


def wipe_frame(kind: str, old: np.ndarray, new: np.ndarray, progress: float) -> np.ndarray:
    """The outgoing frame ``old`` with the incoming ``new`` uncovered ``progress`` of the way: (H, W, 3) uint8."""
    direction = WIPE_DIRECTIONS.get(kind)
    if direction is None:
        raise ValueError(f"transition {kind!r} is not a wipe; wipes are {', '.join(WIPES)}")
    height, width = old.shape[:2]
    out = old.copy()
    if direction == "right":  # the edge travels left to right: the incoming shot fills in from the left
        cut = wipe_edge(direction, progress, width)
        out[:, :cut] = new[:, :cut]
    elif direction == "left":
        cut = wipe_edge(direction, progress, width)
        out[:, width - cut:] = new[:, width - cut:]
    elif direction == "down":  # the edge travels top to bottom
        cut = wipe_edge(direction, progress, height)
        out[:cut] = new[:cut]
    else:  # up
        cut = wipe_edge(direction, progress, height)
        out[height - cut:] = new[height - cut:]
    return out
