"""Continuity references: each character's best-seen frame of a finished shot, carried into the later shots.

After a shot is rendered, the character masks of its plan (the previz's, which draws the very
camera and blocking the model followed) say where each character is in the delivered frames. At
up to :data:`SAMPLES` evenly spaced frames every character in the picture is scored (each factor
0..1, their product the score)::

    size   min(1, mask area / frame area / FULL_SIZE)     large: a medium-full figure or closer scores 1
    front  max(0, cos(head direction, direction to camera)) frontal: the plan's facing + head turn
    sharp  L / (L + SHARP_HALF)                            sharp: L = variance of the Laplacian of
                                                           luma inside the figure's box
    whole  0 when the figure's box touches the frame's left or right edge (cut in part), else 1; the
           bottom (and, in the closest framings, the top) edge crops every figure and is allowed

The best-scoring frame of each character over every finished shot is kept (cropped to the
figure's box with a margin) and given to later shots that show the character as an extra picture
reference, after the script's own pictures and within the model's limit. A look scoring below
:data:`MIN_SCORE` (a back, a speck, a blur) is never carried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from daotai.plan.model import ShotPlan

SAMPLES = 16  # frames of a shot scored: enough to find a frontal moment, few enough to keep in memory
FULL_SIZE = 0.12  # share of the frame a figure covers in a medium-full shot (previz at 640x360: wide 0.011, full 0.071,
# medium_full 0.124, medium 0.148, close_up 0.279): closer framings add no more detail of the look
# Laplacian variance scoring 0.5. Previz figures measure ~55-120 at 640x360 and ~570 at 112x64 (flat shading
# has little texture): the factor ranks frames of one character, and a blurred frame falls well below.
SHARP_HALF = 100.0
MIN_SCORE = 0.05
MARGIN = 0.15  # crop margin around the figure's box, as a share of the box's size on each side
MIN_BOX_PIXELS = 12  # a figure shorter than this many pixels carries no usable look


@dataclass(frozen=True)
class Look:
    """One character as seen in one frame of a finished shot, and why it was chosen."""

    character: str
    shot_id: str
    frame: int
    size: float
    front: float
    sharp: float
    image: np.ndarray  # (h, w, 3) uint8: the figure's box (with margin) of the delivered frame

    @property
    def score(self) -> float:
        """The product of the factors (0..1)."""
        return self.size * self.front * self.sharp

    def describe(self) -> str:
        """Which frame, and its scores, for notices (and so the manifest)."""
        return (f"{self.character} from {self.shot_id} frame {self.frame} (score {self.score:.2f}: size "
                f"{self.size:.2f}, front {self.front:.2f}, sharp {self.sharp:.2f}; {self.image.shape[1]}x"
                f"{self.image.shape[0]} px)")


def sample_indexes(frames: int, samples: int = SAMPLES) -> list[int]:
    """Up to ``samples`` evenly spaced frame indexes of a shot, first and last included."""
    if frames <= samples:
        return list(range(frames))
    return sorted({round(i * (frames - 1) / (samples - 1)) for i in range(samples)})


def frontality(position: tuple[float, float], facing_deg: float, camera: tuple[float, float]) -> float:
    """cos of the angle between where a figure's head faces (degrees about +y, 0 = +z) and its direction to the
    camera, on the ground; 0 when it faces away."""
    to_camera = (camera[0] - position[0], camera[1] - position[1])
    length = math.hypot(*to_camera)
    if length < 1e-9:
        return 0.0
    heading = math.radians(facing_deg)
    return max(0.0, (math.sin(heading) * to_camera[0] + math.cos(heading) * to_camera[1]) / length)


def sharpness(rgb: np.ndarray) -> float:
    """Variance of the Laplacian of an (h, w, 3) uint8 picture's luma."""
    import cv2

    luma = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float(cv2.Laplacian(luma, cv2.CV_32F).var())


def box_of(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) of a boolean (H, W) mask's pixels, bottom/right exclusive; None when empty."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def with_margin(box: tuple[int, int, int, int], height: int, width: int) -> tuple[int, int, int, int]:
    """A box grown by MARGIN of its size on each side, within the frame."""
    top, bottom, left, right = box
    dy, dx = round((bottom - top) * MARGIN), round((right - left) * MARGIN)
    return max(0, top - dy), min(height, bottom + dy), max(0, left - dx), min(width, right + dx)


def frame_looks(shot: ShotPlan, index: int, rgb: np.ndarray, mask: np.ndarray) -> list[Look]:
    """Every character of one delivered frame (H, W, 3) uint8 with its plan mask (H, W) uint8 (0 = none,
    i + 1 = ``shot.character_frames[index][i]``), scored."""
    height, width = mask.shape
    camera = shot.cameras[index].cam_to_world  # 4x4 row-major: the translation is elements 3, 7, 11
    camera_ground = (camera[3], camera[11])
    looks = []
    for i, figure in enumerate(shot.character_frames[index]):
        box = box_of(mask == i + 1)
        if box is None or box[1] - box[0] < MIN_BOX_PIXELS:
            continue
        top, bottom, left, right = box
        if left == 0 or right == width:
            continue  # cut by the frame's side: part of the figure is missing (a closer framing's bottom edge is not)
        area = float(np.count_nonzero(mask == i + 1)) / (height * width)
        front = frontality(figure.position, figure.facing + figure.head_turn, camera_ground)
        top, bottom, left, right = with_margin(box, height, width)
        crop = np.ascontiguousarray(rgb[top:bottom, left:right])
        detail = sharpness(rgb[box[0]:box[1], box[2]:box[3]])
        looks.append(Look(figure.id, shot.shot_id, index, min(1.0, area / FULL_SIZE), front,
                          detail / (detail + SHARP_HALF), crop))
    return looks


def best_looks(shot: ShotPlan, frames: dict[int, np.ndarray], masks: dict[int, np.ndarray]) -> dict[str, Look]:
    """Each character's best-scoring look over the sampled frames of a shot (none below MIN_SCORE)."""
    best: dict[str, Look] = {}
    for index in sorted(frames):
        for look in frame_looks(shot, index, frames[index], masks[index]):
            if look.score >= MIN_SCORE and (look.character not in best or look.score > best[look.character].score):
                best[look.character] = look
    return best


class LookBook:
    """The best look of each character over the shots finished so far (one render's run)."""

    def __init__(self) -> None:
        self.best: dict[str, Look] = {}

    def add(self, looks: Iterable[Look]) -> list[Look]:
        """Keep each look that beats the character's best so far; the ones kept."""
        kept = []
        for look in looks:
            held = self.best.get(look.character)
            if held is None or look.score > held.score:
                self.best[look.character] = look
                kept.append(look)
        return kept

    def for_shot(self, shot_id: str, characters: Iterable[str], room: int) -> list[Look]:
        """Looks from other shots of ``characters`` (in that order), at most ``room`` of them."""
        chosen = [self.best[c] for c in characters if c in self.best and self.best[c].shot_id != shot_id]
        return chosen[:max(0, room)]
