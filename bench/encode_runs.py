"""Frames to MP4: one H.264 encoder for the whole clip (the baseline, as daotai wrote until now)
against runs of whole GOPs encoded side by side (daotai.encode.gops), in one run.

Each clip is written from frames already in memory, as a neural shot's are once decoded: best
of ``--repeat`` seconds each way, the ratio, the encoders the runs used on this machine, the file
sizes, PSNR of each file's decoded frames against the source, and whether the runs' file has the
same bytes when its runs are encoded one at a time (it must).

Clips: LTX-Video's shot (768x512, 121 frames), Wan's (832x480, 81 frames) and a 1080p previz
shot (48 frames); each as smooth moving waves (a real model's picture encodes like this) and as
random-weight output (noise-like: what the GPU benches' models produce, several times costlier
to encode).

    python bench/encode_runs.py [--repeat 3] [--only ltx]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import tempfile
import time
from pathlib import Path

import numpy as np

import daotai.encode.gops as gops
import daotai.encode.video as video
from daotai.encode.read import decode_frames
from daotai.runtime.cores import usable_cores

CLIPS = {"ltx": (768, 512, 121, 24), "wan": (832, 480, 81, 16), "previz1080": (1920, 1080, 48, 24)}


def clip(width: int, height: int, count: int, kind: str) -> np.ndarray:
    """(count, height, width, 3) uint8 frames."""
    if kind == "noise":  # random-weight decoder output: blotches of colour with fine grain
        rng = np.random.default_rng(0)
        coarse = rng.integers(0, 256, (count, height // 8, width // 8, 3), dtype=np.uint8)
        blotches = coarse.repeat(8, axis=1).repeat(8, axis=2)
        grain = rng.integers(-40, 41, (count, height, width, 3))
        return np.clip(blotches.astype(np.int16) + grain, 0, 255).astype(np.uint8)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    frames = np.empty((count, height, width, 3), np.uint8)
    for t in range(count):
        waves = np.stack([np.sin(xx / 37 + t / 9), np.sin(yy / 23 - t / 11), np.sin((xx + yy) / 51 + t / 13)], -1)
        frames[t] = np.clip(128 + 100 * waves, 0, 255).astype(np.uint8)
    return frames


def encode(frames: np.ndarray, path: Path, fps: int, runs: bool, encoders: int | None = None) -> float:
    """Seconds to write ``frames`` to ``path`` one way or the other."""
    chosen_runs, chosen_encoders = video._in_gop_runs, gops.encoders_for
    video._in_gop_runs = chosen_runs if runs else (lambda settings, target: False)
    if encoders is not None:
        gops.encoders_for = lambda threads, cores=None: encoders
    try:
        began = time.perf_counter()
        with video.VideoWriter(path, frames.shape[2], frames.shape[1], fps) as writer:
            for frame in frames:
                writer.write(frame)
        return time.perf_counter() - began
    finally:
        video._in_gop_runs, gops.encoders_for = chosen_runs, chosen_encoders


def psnr(path: Path, frames: np.ndarray) -> float:
    decoded = np.stack(list(decode_frames(path)))
    return float(10 * math.log10(255**2 / np.mean((decoded.astype(np.float64) - frames) ** 2)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", help=f"comma-separated clips: {', '.join(CLIPS)}")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(CLIPS)
    encoders = gops.encoders_for(video.FRAME_THREADS)
    cores = usable_cores()
    print(f"cores: {cores}  runs encoded at once: {encoders}  (x264 frame threads each: "
          f"{video.FRAME_THREADS})")
    print(f"{'clip':22s} {'one encoder s':>13s} {'runs s':>8s} {'x one':>6s} {'MB one/runs':>12s} "
          f"{'PSNR one/runs dB':>17s}  same bytes at 1 encoder")
    worst = math.inf
    with tempfile.TemporaryDirectory(prefix="daotai-encode-runs-") as folder:
        work = Path(folder)
        for name in names:
            width, height, count, fps = CLIPS[name]
            for kind in ("smooth", "noise"):
                frames = clip(width, height, count, kind)
                one, runs = work / "one.mp4", work / "runs.mp4"
                one_s = min(encode(frames, one, fps, runs=False) for _ in range(args.repeat))
                runs_s = min(encode(frames, runs, fps, runs=True) for _ in range(args.repeat))
                digest = hashlib.sha256(runs.read_bytes()).digest()
                encode(frames, work / "serial-runs.mp4", fps, runs=True, encoders=1)
                same = hashlib.sha256((work / "serial-runs.mp4").read_bytes()).digest() == digest
                worst = min(worst, one_s / runs_s)
                print(f"{name + ' ' + kind:22s} {one_s:13.2f} {runs_s:8.2f} {one_s / runs_s:6.2f} "
                      f"{one.stat().st_size / 1e6:5.1f}/{runs.stat().st_size / 1e6:<6.1f} "
                      f"{psnr(one, frames):8.2f}/{psnr(runs, frames):<8.2f}  {'yes' if same else 'NO'}")
                if not same:
                    return 1
    print(f"slowest gain: {worst:.2f}x one encoder")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
