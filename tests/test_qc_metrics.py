"""Frame-quality metrics: black, green, frozen, flicker, PSNR, and one-pass video scans."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from daotai.encode.video import VideoWriter
from daotai.errors import DaotaiError
from daotai.qc.metrics import (
    THUMB_SIDE,
    flicker_score,
    frame_stats,
    frozen_runs,
    is_black,
    is_green,
    psnr,
    psnr_series,
    scan_video,
    thumbnail,
)

H, W = 72, 128


def moving_frame(index: int, height: int = H, width: int = W) -> np.ndarray:
    """(H, W, 3) uint8 gradient with a bright box that moves 4 px per frame."""
    frame = np.empty((height, width, 3), np.uint8)
    frame[...] = np.linspace(40, 160, width, dtype=np.uint8)[None, :, None]
    x = (4 * index) % (width - 16)
    frame[20:40, x : x + 16] = (230, 200, 60)
    return frame


def write(path: Path, frames: list[np.ndarray], fps=24) -> Path:
    """Encode RGB frames with the default settings."""
    height, width = frames[0].shape[:2]
    with VideoWriter(path, width, height, fps) as writer:
        for frame in frames:
            writer.write(frame)
    return path


def write_broken_green(path: Path, frames: int) -> Path:
    """An H.264 file whose Y, Cb and Cr planes are all zero: what a broken decode shows."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        for index in range(frames):
            frame = av.VideoFrame(W, H, "yuv420p")
            for plane in frame.planes:
                plane.update(bytes(plane.buffer_size))
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


# --------------------------------------------------------------------------- single frames


def test_frame_stats_of_flat_frames():
    grey = frame_stats(np.full((H, W, 3), 100, np.uint8))
    assert grey.mean_luma == pytest.approx(100, abs=1e-3)
    assert grey.std_luma == pytest.approx(0, abs=1e-3)
    assert grey.mean_rgb == pytest.approx((100, 100, 100))
    red = frame_stats(np.full((H, W, 3), (255, 0, 0), np.uint8))
    assert red.mean_luma == pytest.approx(0.2126 * 255, abs=1e-3)
    half = np.zeros((H, W, 3), np.uint8)
    half[:, : W // 2] = 200
    assert frame_stats(half).std_luma == pytest.approx(100, abs=0.5)


def test_thumbnail_limits_the_long_side():
    big = np.zeros((1080, 1920, 3), np.uint8)
    small = thumbnail(big)
    assert max(small.shape[:2]) <= THUMB_SIDE and small.shape == (180, 320, 3)
    assert thumbnail(np.zeros((10, 20, 3), np.uint8)).shape == (10, 20, 3)
    with pytest.raises(DaotaiError, match="dtype float32"):
        thumbnail(np.zeros((10, 20, 3), np.float32))


def test_black_detection_spares_dark_scenes_with_lights():
    assert is_black(np.zeros((H, W, 3), np.uint8))
    assert is_black(np.full((H, W, 3), 6, np.uint8))  # lifted black from a bad range
    night = np.full((H, W, 3), 8, np.uint8)
    night[10:30, 10:40] = (250, 220, 150)  # a lit window, ~6 % of the frame
    assert not is_black(night)
    assert not is_black(np.full((H, W, 3), 60, np.uint8))


def test_green_detection_spares_natural_greens():
    assert is_green(np.full((H, W, 3), (0, 77, 0), np.uint8))  # zero YUV through BT.709
    assert is_green(np.full((H, W, 3), (0, 135, 0), np.uint8))  # … through BT.601
    assert not is_green(np.full((H, W, 3), (70, 120, 45), np.uint8))  # grass
    assert not is_green(np.full((H, W, 3), (0, 177, 64), np.uint8))  # chroma-key green
    partly = np.zeros((H, W, 3), np.uint8)
    partly[: H // 3] = (0, 120, 0)  # a third of the frame: not "most of it"
    assert not is_green(partly)


def test_psnr_values_and_errors():
    a = np.zeros((H, W, 3), np.uint8)
    assert psnr(a, a.copy()) == math.inf
    assert psnr(a, a + 1) == pytest.approx(10 * math.log10(255**2), abs=1e-9)  # MSE 1
    assert psnr(a, np.full_like(a, 255)) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(DaotaiError, match="shapes"):
        psnr(a, a[:, :-1])
    with pytest.raises(DaotaiError, match="dtype float64"):
        psnr(a, a.astype(np.float64))
    series = psnr_series([a, a], [a, a + 2])
    assert series.shape == (2,) and series[0] == math.inf
    assert series[1] == pytest.approx(10 * math.log10(255**2 / 4))
    with pytest.raises(DaotaiError, match="ended after 1 frames"):
        psnr_series([a, a], [a])


# --------------------------------------------------------------------------- sequences


def test_frozen_run_found_and_moving_clip_clean():
    frames = [moving_frame(i) for i in range(5)]
    frames += [moving_frame(5)] * 12  # frames 5..16 hold still
    frames += [moving_frame(i) for i in range(6, 9)]
    assert frozen_runs(frames) == [(5, 12)]
    assert frozen_runs(frames, min_length=13) == []
    assert frozen_runs([moving_frame(i) for i in range(30)]) == []
    still = [moving_frame(0)] * 20  # a static camera on a static set: reported, not judged
    assert frozen_runs(still) == [(0, 20)]
    with pytest.raises(DaotaiError, match="min_length"):
        frozen_runs(still, min_length=1)


def test_frozen_run_continues_across_a_keyframe():
    """A keyframe inside a held picture codes it afresh: one step of up to FROZEN_MAX_DRIFT between
    still steps keeps the run; steps that large in a row are a move, not a hold."""
    held = moving_frame(5)
    refreshed = held.copy()
    refreshed[::3] = np.clip(held[::3].astype(np.int16) + 2, 0, 255).astype(np.uint8)  # ~0.67 per sample
    frames = [moving_frame(i) for i in range(5)] + [held] * 7 + [refreshed] * 9 + [moving_frame(9)]
    assert frozen_runs(frames) == [(5, 16)]
    creeping = []  # the same step every other frame: the picture drifts off the run's first frame
    for i in range(24):
        frame = held.astype(np.int16)
        frame[::3] += 2 * (i // 2)
        creeping.append(np.clip(frame, 0, 255).astype(np.uint8))
    assert frozen_runs(creeping) == []


def test_flicker_score_separates_flicker_from_fades():
    base = moving_frame(0).astype(np.int16)
    steady = [moving_frame(0)] * 30
    fade = [np.clip(base - 3 * i, 0, 255).astype(np.uint8) for i in range(30)]
    flicker = [np.clip(base + (8 if i % 2 else -8), 0, 255).astype(np.uint8) for i in range(30)]
    assert flicker_score(steady) == pytest.approx(0.0, abs=1e-6)
    assert flicker_score(fade) < 0.3
    assert flicker_score(flicker) > 8.0
    assert flicker_score(steady[:2]) == 0.0


# --------------------------------------------------------------------------- whole files


def test_scan_flags_black_clip(tmp_path):
    path = write(tmp_path / "black.mp4", [np.zeros((H, W, 3), np.uint8)] * 14)
    scan = scan_video(path)
    assert scan.frames == len(scan.stats) == 14
    assert scan.black_frames == tuple(range(14))
    assert scan.green_frames == ()
    assert scan.frozen_runs == ((0, 14),)  # black and still: both reported
    assert scan.flicker == pytest.approx(0.0, abs=1e-6)
    json.dumps(scan.to_dict())  # ready for qc.json


def test_scan_flags_broken_green_clip(tmp_path):
    scan = scan_video(write_broken_green(tmp_path / "green.mp4", 8))
    assert scan.green_frames == tuple(range(8))
    assert scan.black_frames == ()


def test_scan_finds_frozen_run_and_passes_moving_clip(tmp_path):
    frames = [moving_frame(i) for i in range(6)] + [moving_frame(6)] * 14
    frames += [moving_frame(i) for i in range(7, 12)]
    scan = scan_video(write(tmp_path / "frozen.mp4", frames, Fraction(24000, 1001)))
    assert scan.frames == 25
    assert scan.frozen_runs == ((6, 14),)
    moving = scan_video(write(tmp_path / "moving.mp4", [moving_frame(i) for i in range(25)]))
    assert moving.frozen_runs == ()
    assert moving.black_frames == moving.green_frames == ()
    assert moving.flicker < 1.0
    assert moving.stats[0].mean_luma == pytest.approx(frame_stats(moving_frame(0)).mean_luma,
                                                      abs=2.0)
