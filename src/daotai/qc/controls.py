"""A shot's depth and mask control files, read once for every check that needs them.

The camera check (the depth under each tracked frame), the subject and framing checks and the
look of each character (the masks) and the camera path (what moves on its own) all read the same
control frames; decoding them is the costly part, so one stream decodes them in order and hands
each frame to every reader. What in a frame moves on its own (walkers, previz name labels) is
judged here too: the camera check and the ComfyUI control check both leave it out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from daotai.errors import QualityError
from daotai.plan.layout import RenderLayout
from daotai.plan.model import ShotPlan
from daotai.qc.labels import _label_boxes


class ControlStream:
    """A shot's depth (uint16 mm) and mask control frames, decoded once, in order, for every check
    that reads them: the camera check asks for frames through :meth:`depth_map` (never backwards);
    the subject and framing checks and the camera path's excludes see each frame as it passes
    (``listeners``: ``f(index, depth_mm or None, mask or None)``); :meth:`read_to` reads on.

    Pixels of walking characters (mask value j + 1 for the shot's j-th character) and, for
    previz, the name labels above every character are marked as moving on their own
    (``excludes``: frame index -> (H, W) bool, for frames with a mask).
    """

    def __init__(self, shot: ShotPlan, depth_path: Path, mask_path: Path | None,
                 label_names: list[str] | None, listeners: list[Callable[..., None]]):
        self._shot = shot
        self._depth_path = depth_path
        self._depth = iter(_decode_gray(depth_path))
        self._mask = iter(_decode_gray(mask_path)) if mask_path is not None else None
        self._labels = label_names
        self._listeners = listeners
        self.index = -1
        self._current: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        self.excludes: dict[int, np.ndarray] = {}

    def read_to(self, index: int) -> None:
        """Decode up to frame ``index`` (both files, each as far as it goes)."""
        while self.index < index:
            depth_mm = next(self._depth, None)  # (H, W) uint16 mm
            mask = next(self._mask, None) if self._mask is not None else None  # (H, W) uint8
            if depth_mm is None and mask is None:
                return
            self.index += 1
            self._current = (depth_mm, mask)
            if mask is not None and self.index < self._shot.frames:
                self.excludes[self.index] = moving_on_their_own(self._shot, self.index, mask, self._labels)
            for listener in self._listeners:
                listener(self.index, depth_mm, mask)

    def depth_map(self, index: int):
        """Frame ``index`` as a camera.DepthMap; QualityError when the controls end before it."""
        from daotai.qc.camera_scene import DepthMap

        if index < self.index:
            raise QualityError(f"{self._shot.shot_id}: depth frame {index} asked for after "
                               f"frame {self.index}; control frames are read in order")
        self.read_to(index)
        depth_mm, mask = self._current
        if self.index < index or depth_mm is None or (self._mask is not None and mask is None):
            raise QualityError(f"{self._shot.shot_id}: the depth control has fewer frames "
                               f"than the {index + 1} the video needs")
        return DepthMap.from_millimetres(depth_mm, self.excludes.get(index))

    def replay(self) -> Callable[[int], Any]:
        """A fresh in-order ``index -> camera.DepthMap`` over the depth file, with the excludes this
        stream found (call it once the stream was read to the end: the dense camera pass's models)."""
        from daotai.qc.camera_scene import DepthMap

        frames = iter(enumerate(_decode_gray(self._depth_path)))

        def depth_map(index: int):
            for i, depth_mm in frames:  # (H, W) uint16 mm
                if i == index:
                    return DepthMap.from_millimetres(depth_mm, self.excludes.get(index))
            raise QualityError(f"{self._shot.shot_id}: the depth control has fewer frames "
                               f"than the {index + 1} the video needs")
        return depth_map


def moving_on_their_own(shot: ShotPlan, index: int, mask: np.ndarray, labels: list[str] | None) -> np.ndarray:
    """(H, W) bool of one frame: walking characters (from the mask control) and, for previz, name labels."""
    people = shot.character_frames[index]
    walkers = [j + 1 for j, person in enumerate(people) if person.walking]
    exclude = np.isin(mask, walkers) if walkers else np.zeros(mask.shape, dtype=bool)
    if labels:
        exclude |= _label_boxes(mask, labels)
    return exclude


def control_paths(path: Path, shot: ShotPlan,
                   controls: dict[str, Path] | None) -> tuple[Path | None, Path | None]:
    """The shot's depth and mask control files where they exist (mask only with depth)."""
    if controls is None:
        layout = RenderLayout(path.parent.parent)  # the render folder that holds shots/
        controls = {"depth": layout.depth(shot.shot_id), "mask": layout.mask(shot.shot_id)}
    depth, mask = controls.get("depth"), controls.get("mask")
    if depth is None or not Path(depth).is_file():
        return None, None
    return Path(depth), (Path(mask) if mask is not None and Path(mask).is_file() else None)


def _decode_gray(path: Path | None):
    from daotai.encode.video import decode_gray

    return decode_gray(path)
