"""Frame interpolation ×2 / ×4 or to a target frame rate with classical optical flow.

For every pair of neighbouring frames (I0, I1) OpenCV's DIS flow gives F01 and F10 on luma.
An in-between frame at 0 < t < 1 is made by backward-warping both neighbours with the flow
from t to them, approximated (as in Super-SloMo) by

    F_t0 = −(1 − t)·t·F01 + t²·F10,   F_t1 = (1 − t)²·F01 − t·(1 − t)·F10,

and blending them with weights (1 − t)·v0 and t·v1, where v0 (v1) says whether the sampled
pixel of I0 (I1) is visible in the other frame: the forward–backward flow round trip of a
visible pixel returns to where it started, an occluded one does not. Where both are
occluded the plain time-weighted blend is used.

Output timing: frame j of the result shows source time j·(fps_in / fps_out); frames past
the last source frame hold it. The result has round(n · fps_out / fps_in) frames, so the
clip's duration is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from daotai.encode.video import as_fps
from daotai.errors import EncodeError
from daotai.render.motion import Grids as _Grids
from daotai.render.motion import blend as _blend
from daotai.render.motion import flow_pair as _pair
from daotai.render.motion import in_between
from daotai.render.motion import new_dis as _new_dis
from daotai.render.motion import synthesise as _synthesise

__all__ = ["InterpolateConfig", "interpolate_frames", "output_frame_count", "output_fps", "in_between"]

METHODS = ("dis", "blend")
# No maintained PyPI loader runs RIFE/FILM-style interpolation weights (spandrel loads
# single-image models only), so there is no neural method to name here.


@dataclass(frozen=True)
class InterpolateConfig:
    """Interpolate step: either factor (2 or 4) or a target fps; method dis (flow) | blend."""

    factor: int | None = 2
    fps: Fraction | None = None  # target frame rate; overrides factor when set
    method: str = "dis"

    def __post_init__(self) -> None:
        if self.fps is not None:
            object.__setattr__(self, "fps", as_fps(self.fps))
            object.__setattr__(self, "factor", None)
        elif isinstance(self.factor, bool) or self.factor not in (2, 4):
            raise EncodeError(f"interpolate.factor: {self.factor!r} must be 2 or 4 (or give a target fps)")
        if self.method not in METHODS:
            raise EncodeError(
                f"interpolate.method: {self.method!r} must be one of {', '.join(METHODS)} "
                "(dis: optical flow with occlusion handling; blend: plain cross-dissolve)"
            )


def output_fps(config: InterpolateConfig, fps_in: Fraction) -> Fraction:
    """Frame rate of the interpolated clip."""
    return config.fps if config.fps is not None else fps_in * config.factor


def output_frame_count(frames_in: int, fps_in: Fraction, fps_out: Fraction) -> int:
    """Frames of the result: the same duration at the new rate (at least one frame)."""
    return max(1, math.floor(Fraction(frames_in) * fps_out / fps_in + Fraction(1, 2)))


def interpolate_frames(
    frames: Iterator[np.ndarray], frames_in: int, fps_in: Fraction, config: InterpolateConfig
) -> Iterator[np.ndarray]:
    """Resample a stream of ``frames_in`` frames at ``fps_in`` to ``output_fps(config)``."""
    fps_out = output_fps(config, fps_in)
    total = output_frame_count(frames_in, fps_in, fps_out)
    step = Fraction(fps_in) / fps_out  # source frames per output frame
    source = iter(frames)
    try:
        a = next(source)
    except StopIteration:
        raise EncodeError("interpolate: the clip has no frames") from None
    b = next(source, None)
    index = 0  # source index of a
    dis = _new_dis() if config.method == "dis" else None
    grids = _Grids(a.shape[1], a.shape[0]) if dis is not None else None
    pair = None
    for j in range(total):
        position = j * step
        while b is not None and position >= index + 1:
            a, b, index, pair = b, next(source, None), index + 1, None
        t = float(position - index)
        if b is None or t <= 1e-6:
            yield a  # on a source frame, or past the end: hold it
            continue
        if dis is None:
            yield _blend(a, b, t)
            continue
        if pair is None:
            pair = _pair(dis, a, b, grids)
        yield _synthesise(a, b, t, pair, grids)
    for _ in source:  # drain, so a decoder behind the iterator is closed cleanly
        pass
