"""The encoder a render writes its videos with, held to the encode-fidelity gate.

``daotai.encode.hardware`` says which hardware encoders exist and open here and which one
``--encoder`` picks. This module (pipeline layer: it measures with ``daotai.qc``) makes the pick
safe to use:

1. Before any shot renders, the chosen hardware encoder encodes a short synthetic clip at the
   plan's size and rate (a sky gradient, a gridded ground, hard-edged moving figures and small
   text: what previz frames are made of); its decoded frames must meet the gate, PSNR mean
   ≥ ``PSNR_MEAN_MIN_DB`` and spread ≤ ``PSNR_STD_MAX_DB`` (``daotai.qc.fidelity``). The clip's
   detail is even from frame to frame (x264 at CRF 18, 12 and 48 frames: 40.7 dB ± 0.04 at
   640x360, 45.5 dB ± 0.07 at 1080p), so there the spread measures the encoder alone. A miss, or an encoder that fails to
   open or errors, means software for the whole run.
2. Each shot encoded in hardware is decoded again and its kept fidelity samples measured with
   what QC fails a shot on: mean ≥ ``PSNR_MEAN_MIN_DB`` and no frame under ``PSNR_FRAME_MIN_DB``,
   near-flat frames left out. (Across a real shot the spread follows the picture's detail more
   than the encoder, which is why QC only warns about it.) A shot that errors or misses is
   rendered again with the software encoder.

Every fallback is a Notice and is recorded in the manifest: the run's under
``settings.encoder_notes``, a shot's among that shot's notices.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from daotai.encode.hardware import (
    EncoderProbe,
    HardwareEncoder,
    choose_encoder,
    installed_probes,
    is_final_delivery,
)
from daotai.errors import EncodeError
from daotai.events import Notice

GATE_CLIP_FRAMES = 12  # frames of the synthetic clip: enough for a rate controller to settle, ~1 s at 1080p


@dataclass(frozen=True)
class GateResult:
    """Per-frame PSNR of decoded against source frames, judged against the fidelity gate."""

    ok: bool
    psnr_mean_db: float | None  # None: every compared frame was identical
    psnr_std_db: float
    frames: int
    reason: str  # what was measured and the rule, or what failed


@dataclass(frozen=True)
class EncoderMeasure:
    """An encoder's speed and fidelity on the synthetic clip."""

    encoder: str
    width: int
    height: int
    frames: int
    encode_s: float
    gate: GateResult

    @property
    def fps(self) -> float:
        """Frames encoded per second (the clip's encode time, muxing included)."""
        return self.frames / self.encode_s if self.encode_s > 0 else math.inf


def judge(values: Iterable[float], *, spread: bool = True) -> GateResult:
    """The gate over per-frame PSNR values (dB; inf for identical frames, which always pass).

    ``spread``: the test clip's rule, mean and std; else a shot's, mean and the worst frame.
    """
    from daotai.qc.fidelity import PSNR_FRAME_MIN_DB, PSNR_MEAN_MIN_DB, PSNR_STD_MAX_DB

    values = list(values)
    finite = np.array([v for v in values if math.isfinite(v)], dtype=np.float64)
    second = f"std <= {PSNR_STD_MAX_DB} dB" if spread else f"every frame >= {PSNR_FRAME_MIN_DB:.1f} dB"
    rule = f"mean >= {PSNR_MEAN_MIN_DB} dB and {second} over {len(values)} frames"
    if finite.size == 0:
        return GateResult(bool(values), None, 0.0, len(values),
                          f"lossless ({rule})" if values else "no frames to compare")
    mean, std, worst = float(finite.mean()), float(finite.std()), float(finite.min())
    if mean < PSNR_MEAN_MIN_DB:
        return GateResult(False, mean, std, len(values), f"PSNR {mean:.1f} dB on average, under {PSNR_MEAN_MIN_DB} dB")
    if spread and std > PSNR_STD_MAX_DB:
        return GateResult(False, mean, std, len(values), f"PSNR varies {std:.2f} dB, over {PSNR_STD_MAX_DB} dB")
    if not spread and worst < PSNR_FRAME_MIN_DB:
        return GateResult(False, mean, std, len(values), f"a frame at {worst:.1f} dB, under {PSNR_FRAME_MIN_DB:.1f} dB")
    return GateResult(True, mean, std, len(values), f"PSNR {mean:.1f} ± {std:.2f} dB ({rule})")


def gate_frames(width: int, height: int, count: int = GATE_CLIP_FRAMES) -> Iterator[np.ndarray]:
    """(H, W, 3) uint8 frames of a previz-like test picture moving a few pixels a frame."""
    import cv2

    rows = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]  # (H, 1, 1)
    sky = np.array([70, 120, 200], np.float32) * (1 - rows) + np.array([200, 215, 230], np.float32) * rows
    base = np.ascontiguousarray(np.repeat(sky, width, axis=1), dtype=np.uint8)  # (H, W, 3)
    horizon = height * 11 // 20
    base[horizon:] = (96, 104, 88)
    scale = max(1, width // 320)
    for step in range(0, width, 24 * scale):  # ground grid: hard thin lines
        cv2.line(base, (width // 2, horizon), (step, height - 1), (140, 148, 130), scale)
    span = width // 14  # the figures swing back and forth over this many pixels, so the detail in view stays even
    for k in range(count):
        frame = base.copy()
        travel = (3 * scale * k) % (2 * span)
        shift = travel if travel < span else 2 * span - travel
        for i, colour in enumerate(((200, 60, 50), (50, 140, 210), (230, 200, 60))):
            x = (width * (2 * i + 1)) // 7 + shift
            y = horizon - height // 10
            cv2.rectangle(frame, (x, y - height // 4), (x + width // 14, y + height // 8), colour, -1)
            cv2.circle(frame, (x + width // 28, y - height // 4 - height // 22), height // 22, colour, -1)
            cv2.putText(frame, f"C{i + 1} {k:02d}", (x, y + height // 8 + 14 * scale), cv2.FONT_HERSHEY_SIMPLEX,
                        0.4 * scale, (20, 20, 20), scale, cv2.LINE_AA)
        yield cv2.GaussianBlur(frame, (0, 0), 0.6)  # a renderer's antialiased edges, not aliased steps


def measure_encoder(hardware: HardwareEncoder | None, width: int, height: int, fps: Fraction,
                    frames: int = GATE_CLIP_FRAMES, codec: str | None = None) -> EncoderMeasure:
    """Encode the synthetic clip with ``hardware`` (None: the software encoder of ``codec``), decode
    it and judge it; raises EncodeError when the encoder fails to open or errors."""
    from daotai.encode.read import decode_frames
    from daotai.encode.video import EncodeSettings, VideoWriter
    from daotai.qc.metrics import psnr

    codec = hardware.codec if hardware is not None else (codec or "h264")
    settings = EncodeSettings(codec=codec, hardware=hardware)  # type: ignore[arg-type]
    source = list(gate_frames(width, height, frames))
    with tempfile.TemporaryDirectory(prefix="daotai-encoder-gate-") as folder:
        path = Path(folder) / f"gate{settings.container}"
        started = time.perf_counter()
        with VideoWriter(path, width, height, fps, settings) as writer:
            for frame in source:
                writer.write(frame)
        encode_s = time.perf_counter() - started
        decoded = list(decode_frames(path))
    if len(decoded) != len(source):
        raise EncodeError(f"{settings.encoder_name}: wrote {len(decoded)} frames of {len(source)}")
    result = judge(psnr(a, b) for a, b in zip(source, decoded, strict=True))
    return EncoderMeasure(settings.encoder_name, width, height, frames, encode_s, result)


def resolve_encoder(settings: Any, width: int, height: int, fps: Fraction, codec: str, *,
                    platform: str | None = None, probes: Mapping[str, EncoderProbe] | None = None,
                    ) -> Generator[Notice, None, Any]:
    """The run's settings with ``hardware_encoder`` decided and gated; yields the notices, returns the settings.

    ``settings`` is the pipeline's PipelineSettings. A ``hardware_encoder`` already set is kept (a
    caller that chose one) but still gated; otherwise ``settings.encoder`` picks from the probe
    (``probes`` and ``platform`` default to this machine's).
    """
    import sys

    notes: list[str] = []
    hardware = settings.hardware_encoder
    if hardware is None:
        if settings.encoder == "software":
            return settings
        choice = choose_encoder(settings.encoder, codec, final=is_final_delivery(width, height),
                                platform=platform or sys.platform,
                                probes=probes if probes is not None else installed_probes())
        hardware = choice.hardware
        if choice.fallback:
            notes.append(choice.reason)
            yield Notice("warning" if settings.encoder == "hardware" else "info", choice.reason)
    if hardware is not None:
        try:
            measured = measure_encoder(hardware, width, height, fps)
            miss = None if measured.gate.ok else f"misses the fidelity gate: {measured.gate.reason}"
        except EncodeError as exc:
            miss = f"failed: {exc}"
        if miss is not None:
            note = f"hardware encoder {hardware.name} {miss}; encoding with the software encoder"
            notes.append(note)
            yield Notice("warning", note)
            hardware = None
        else:
            yield Notice("info", f"hardware encoder {hardware.name}: test clip at {width}x{height} "
                                 f"{measured.gate.reason}; {measured.fps:.0f} fps")
    return replace(settings, hardware_encoder=hardware, encoder_notes=tuple(settings.encoder_notes) + tuple(notes))


def shot_gate(path: Path, samples: Mapping[int, np.ndarray]) -> GateResult:
    """A shot's gate over the file's kept samples (frame index → rendered (H, W, 3) uint8), near-flat
    frames left out as QC leaves them out (their PSNR is the encoder's noise floor)."""
    from daotai.encode.read import decode_frames
    from daotai.qc.fidelity import FLAT_LUMA_STD
    from daotai.qc.metrics import frame_stats, psnr

    values, seen = [], 0
    for index, frame in enumerate(decode_frames(path)):
        if index in samples:
            seen += 1
            if frame_stats(samples[index]).std_luma >= FLAT_LUMA_STD:
                values.append(psnr(samples[index], frame))
    if seen != len(samples):
        return GateResult(False, None, 0.0, seen, f"decoded {seen} of {len(samples)} kept frames")
    return judge(values, spread=False) if values else GateResult(True, None, 0.0, 0, "every kept frame is near-flat")


def render_shot_gated(render_once: Callable[..., Iterator[Any]], shot_path: Path, backend: Any, plan: Any,
                      shot: Any, out_dir: Path, settings: Any, ctx: Any, record: Any,
                      encoders: Any = None) -> Iterator[Any]:
    """``render_once`` (the pipeline's shot renderer) with a hardware encoder; the shot is rendered
    again with the software encoder when the hardware one errors or its file misses the gate."""
    before = list(record.notices)
    try:
        yield from render_once(backend, plan, shot, out_dir, settings, ctx, record, encoders)
        result = shot_gate(shot_path, record.samples)
        problem = None if result.ok else f"misses the fidelity gate: {result.reason}"
    except EncodeError as exc:
        problem = f"failed: {exc}"
    if problem is None:
        record.notices.append(f"encoded with hardware encoder {settings.hardware_encoder.name}: {result.reason}")
        return
    note = (f"hardware encoder {settings.hardware_encoder.name} {problem}; the shot is rendered again "
            "with the software encoder")
    yield Notice("warning", note, shot.shot_id)
    record.samples.clear()
    record.middle = None
    record.notices[:] = [*before, note]
    yield from render_once(backend, plan, shot, out_dir, replace(settings, hardware_encoder=None), ctx, record,
                           encoders)
