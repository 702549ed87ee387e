"""H.264 clips encoded as runs of whole GOPs side by side (daotai.encode.gops): the bytes never
depend on how many runs were encoded at once, the runs are cut where the layout says, a short
clip is exactly what one encoder writes, and a failure leaves nothing behind."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

import daotai.encode.gops as gops
import daotai.encode.video as video
from daotai.encode.read import decode_frames, probe
from daotai.encode.remux import keyframes
from daotai.encode.video import EncodeSettings, VideoWriter
from daotai.errors import EncodeError

W, H, FPS = 96, 64, 8  # 1 s GOPs of 8 frames: runs of 16 (RUN_MIN_FRAMES)


def frames(n: int, seed: int = 0) -> np.ndarray:
    """(n, H, W, 3) uint8: moving waves with some grain, so every frame differs."""
    yy, xx = np.mgrid[0:H, 0:W]
    grain = np.random.default_rng(seed).integers(-6, 7, (n, H, W, 3))
    base = np.stack([np.stack([np.sin(xx / 9 + t / 3), np.sin(yy / 7 - t / 4), np.sin((xx + yy) / 11 + t / 5)], -1)
                     for t in range(n)])
    return np.clip(128 + 90 * base + grain, 0, 255).astype(np.uint8)


def write(path: Path, clip: np.ndarray, settings: EncodeSettings | None = None) -> bytes:
    with VideoWriter(path, W, H, FPS, settings) as writer:
        for frame in clip:
            writer.write(frame)
    return path.read_bytes()


def serial(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every writer use one encoder for the whole clip, as before runs existed."""
    monkeypatch.setattr(video, "_in_gop_runs", lambda settings, path: False)


def test_runs_are_whole_gops_and_a_short_last_run_joins_the_one_before() -> None:
    layout = gops.RunLayout.for_gop(8)
    assert layout.run_frames == 16
    assert layout.runs(10) == [(0, 10)]
    assert layout.runs(33) == [(0, 16), (16, 33)]  # one frame past 32 is too short for a run
    assert layout.runs(36) == [(0, 16), (16, 32), (32, 36)]
    assert gops.RunLayout.for_gop(24).run_frames == 24
    assert gops.RunLayout.for_gop(5).run_frames == 20
    assert gops.RunLayout.for_gop(1).run_frames == 16


@pytest.mark.parametrize("count", [33, 36, 50])
def test_the_bytes_do_not_depend_on_how_many_runs_are_encoded_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    clip = frames(count)
    digests = set()
    for encoders in (1, 2, 5):
        monkeypatch.setattr(gops, "encoders_for", lambda threads, cores=None, n=encoders: n)
        digests.add(hashlib.sha256(write(tmp_path / f"{encoders}.mp4", clip)).hexdigest())
    assert len(digests) == 1
    path = tmp_path / "1.mp4"
    info = probe(path)
    assert (info.frames, info.width, info.height) == (count, W, H)
    # every run starts with a keyframe where the layout puts it (x264 may add its own between)
    starts = {first for first, _ in gops.RunLayout.for_gop(8).runs(count)}
    assert starts <= set(keyframes(path))
    assert sorted(os.listdir(tmp_path)) == ["1.mp4", "2.mp4", "5.mp4"]  # no run file left behind


def test_joined_runs_decode_to_the_frames_one_encoder_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = frames(40)
    write(tmp_path / "runs.mp4", clip)
    serial(monkeypatch)
    write(tmp_path / "one.mp4", clip)
    joined = np.stack(list(decode_frames(tmp_path / "runs.mp4")))
    single = np.stack(list(decode_frames(tmp_path / "one.mp4")))
    assert joined.shape == single.shape == clip.shape

    def psnr(decoded: np.ndarray) -> float:
        return float(10 * np.log10(255**2 / np.mean((decoded.astype(np.float64) - clip) ** 2)))

    # each run opens with a fresh IDR and rate control: the quality is one encoder's, within a fraction of a dB
    assert psnr(joined) > psnr(single) - 0.5


def test_a_clip_of_one_run_is_the_single_encoders_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = frames(19)  # 16 + 3: the last three frames join the first run
    runs = write(tmp_path / "runs.mp4", clip)
    serial(monkeypatch)
    assert write(tmp_path / "one.mp4", clip) == runs


@pytest.mark.parametrize("settings", [EncodeSettings(threads=0), EncodeSettings(codec="hevc")])
def test_auto_threads_and_other_codecs_keep_one_encoder(tmp_path: Path, settings: EncodeSettings) -> None:
    assert not video._in_gop_runs(settings, tmp_path / "a.mp4")
    assert not video._in_gop_runs(EncodeSettings(), tmp_path / "a.mkv")
    assert video._in_gop_runs(EncodeSettings(), tmp_path / "a.MOV")


def test_a_failed_write_leaves_no_file_and_no_run_files(tmp_path: Path) -> None:
    clip = frames(40)
    target = tmp_path / "shot.mp4"
    with pytest.raises(RuntimeError, match="stop"):
        with VideoWriter(target, W, H, FPS) as writer:
            for index, frame in enumerate(clip):
                if index == 37:
                    raise RuntimeError("stop")
                writer.write(frame)
    assert os.listdir(tmp_path) == []


def test_an_encoder_failure_in_a_run_reaches_the_caller_with_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = frames(40)
    target = tmp_path / "shot.mp4"
    real = video._rgb_picture

    def broken(out, frame, *args, **kwargs):
        if np.array_equal(frame, clip[20]):
            raise EncodeError("frame 20: the encoder refused it")
        return real(out, frame, *args, **kwargs)

    monkeypatch.setattr(video, "_rgb_picture", broken)
    with pytest.raises(EncodeError, match="frame 20: the encoder refused it"):
        write(target, clip)
    assert os.listdir(tmp_path) == []


def test_more_encoders_where_there_are_more_cores() -> None:
    assert gops.encoders_for(4, cores=2) == 2
    assert gops.encoders_for(4, cores=16) == 8
    assert gops.encoders_for(1, cores=12) == 12
    assert gops.encoders_for(2, cores=64) == 16
    assert gops.encoders_for(0, cores=16) == 1


def test_a_writer_dropped_without_closing_stops_its_runs_and_leaves_no_file(tmp_path: Path) -> None:
    import gc
    import threading
    import time

    before = {t for t in threading.enumerate() if t.name.startswith("daotai-gop-run-")}
    writer = VideoWriter(tmp_path / "shot.mp4", W, H, FPS)
    for frame in frames(40):
        writer.write(frame)
    del writer
    gc.collect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        running = {t for t in threading.enumerate() if t.name.startswith("daotai-gop-run-")} - before
        if not running:
            break
        time.sleep(0.05)
    gc.collect()
    assert not running
    assert os.listdir(tmp_path) == []
