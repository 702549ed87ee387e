"""QC of sound: is it there where the plan has it, does it last as long as the picture and start
with it, does it clip, where is it silent, how loud is it.

Loudness is ITU-R BS.1770-4 / EBU R128: integrated loudness (LUFS, gated), loudness range
(LU) and true peak (dBTP, 4x oversampled), measured by FFmpeg's ``ebur128`` filter through
PyAV's filter graph (the implementation broadcasters use; no extra dependency). The tests
check it against the reference signals of EBU Tech 3341.
"""

from __future__ import annotations

import gc
import math
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from daotai.errors import EncodeError

SILENCE_DBFS = -60.0  # below this (sample peak over 50 ms windows) counts as silence
SILENCE_MIN_S = 1.0  # silence shorter than this is a pause, not worth reporting
CLIP_LEVEL = 0.999  # |sample| at or above this is at full scale
CLIP_MIN_RUN = 3  # this many full-scale samples in a row is clipping (a single one can be a peak)
START_TOLERANCE_S = 0.5 / 48000  # the first decoded sample must sit at time zero
AAC_FRAME = 1024  # samples: the granularity of an AAC stream's length


def _r128_metadata(samples: np.ndarray, rate: int) -> dict[str, str]:
    """The last ``lavfi.r128.*`` values FFmpeg's ebur128 meter gives for (N, C) float32 samples.

    The meter's figures travel as frame metadata, which PyAV exposes only from version 17 on, so
    an ``ametadata`` filter prints them to a log file instead: the same values (FFmpeg formats
    both with three decimals) on every PyAV the floor in pyproject.toml admits. FFmpeg closes
    the log when the graph is freed, so the graph lives in ``_meter_to_log`` alone."""
    with tempfile.TemporaryDirectory(prefix="daotai-r128-") as folder:
        log = Path(folder) / "r128.txt"
        _meter_to_log(samples, rate, log)
        gc.collect()  # frees the graph if a reference cycle kept it, closing the log
        values: dict[str, str] = {}
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.startswith("lavfi.r128."):
                values[key] = value.strip()
        return values


def _meter_to_log(samples: np.ndarray, rate: int, log: Path) -> None:
    """Run (N, C) float32 samples through ebur128 and an ametadata printer writing to ``log``."""
    import av
    import av.filter

    channels = samples.shape[1]
    layout = "mono" if channels == 1 else "stereo"
    graph = av.filter.Graph()
    source = graph.add_abuffer(format="flt", sample_rate=rate, layout=layout, time_base=Fraction(1, rate))
    meter = graph.add("ebur128", "metadata=1:peak=true+sample")
    # The path is quoted for FFmpeg's option parser; a temporary folder's name holds no quote.
    printer = graph.add("ametadata", f"mode=print:file='{log.as_posix()}'")
    sink = graph.add("abuffersink")
    source.link_to(meter)
    meter.link_to(printer)
    printer.link_to(sink)
    graph.configure()

    def drain() -> None:
        while True:
            try:
                graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return

    block = 1 << 15
    for start in range(0, samples.shape[0], block):
        chunk = np.ascontiguousarray(samples[start:start + block], dtype=np.float32)
        frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="flt", layout=layout)
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        graph.push(frame)
        drain()
    graph.push(None)
    drain()


def loudness(samples: np.ndarray, rate: int) -> dict[str, float | None]:
    """BS.1770 / R128 figures of (N, C) float32 samples: integrated LUFS, LRA, true and sample peak."""
    last = _r128_metadata(samples, rate)

    def number(key: str) -> float | None:
        try:
            value = float(last[key])
        except (KeyError, ValueError):
            return None
        return value if math.isfinite(value) else None

    def db(linear: float | None) -> float | None:
        return None if linear is None else (round(20 * math.log10(linear), 2) if linear > 0 else -math.inf)

    integrated = number("lavfi.r128.I")
    true_peak = db(number("lavfi.r128.true_peak"))
    sample_peak = db(number("lavfi.r128.sample_peak"))
    return {
        # -70 LUFS is the absolute gate: anything quieter has no integrated loudness
        "integrated_lufs": integrated if integrated is not None and integrated > -70.0 else None,
        "range_lu": number("lavfi.r128.LRA"),
        "true_peak_dbtp": true_peak if true_peak is None or math.isfinite(true_peak) else None,
        "sample_peak_dbfs": sample_peak if sample_peak is None or math.isfinite(sample_peak) else None,
    }


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of every run of True in a 1-D bool array."""
    if not mask.any():
        return []
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return [(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)]


def clipping_runs(samples: np.ndarray) -> list[tuple[int, int]]:
    """(first sample, length) of runs of CLIP_MIN_RUN or more full-scale samples (any channel)."""
    full = np.abs(samples).max(axis=1) >= CLIP_LEVEL
    return [run for run in _runs(full) if run[1] >= CLIP_MIN_RUN]


def silence_runs(samples: np.ndarray, rate: int) -> list[tuple[float, float]]:
    """(start s, length s) of stretches at least SILENCE_MIN_S long whose 50 ms peaks stay under SILENCE_DBFS."""
    window = max(1, rate // 20)
    count = samples.shape[0] // window
    if count == 0:
        return []
    peaks = np.abs(samples[: count * window]).max(axis=1).reshape(count, window).max(axis=1)  # (count,)
    quiet = peaks < 10 ** (SILENCE_DBFS / 20)
    return [(round(a * window / rate, 3), round(n * window / rate, 3)) for a, n in _runs(quiet)
            if n * window / rate >= SILENCE_MIN_S]


def length_failure(samples: int, rate: int, codec: str, picture_s: float) -> str | None:
    """The failure of sound lasting longer or shorter than the picture beyond the codec's grain
    (one AAC frame of 1024 samples, else one sample); None when it fits."""
    grain = AAC_FRAME if codec == "aac" else 1
    # compared exactly, in samples: one grain short passes as one grain long does
    if abs(samples - Fraction(picture_s) * rate) > grain:
        return (f"audio: lasts {samples / rate:.4f} s, the picture {picture_s:.4f} s "
                f"(allowed: ±{grain / rate * 1000:.1f} ms)")
    return None


def start_failure(first_s: float, stream_start_s: float) -> str | None:
    """The failure of sound whose first sample (or stream) does not start at time zero, early or late."""
    if abs(first_s) > START_TOLERANCE_S or abs(stream_start_s) > START_TOLERANCE_S:
        return f"audio: starts at {max(abs(first_s), abs(stream_start_s)) * 1000:.2f} ms, not with the picture"
    return None


def check_audio(path: Path, picture_s: float, planned: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """(qc.json "audio" entry or None, failures) of a delivered file's sound.

    ``planned``: the plan puts sound in this file (a soundtrack, or a backend that makes sound);
    a file without sound then fails. A file without sound that was not planned to have any gives
    (None, []), so reports of silent renders stay as they were.
    """
    from daotai.encode.audio import decode_audio, probe_audio

    try:
        info = probe_audio(path)
    except EncodeError as exc:
        return {"ok": False}, [f"audio: cannot read the file: {exc}"]
    if info is None:
        return (({"present": False}, ["audio: the plan has sound here but the file has none"]) if planned
                else (None, []))
    failures: list[str] = []
    try:
        samples, rate, first = decode_audio(path)
    except EncodeError as exc:
        return {"present": True, "codec": info.codec}, [f"audio: {exc}"]
    duration = samples.shape[0] / rate
    failures += [f for f in (length_failure(samples.shape[0], rate, info.codec, picture_s),
                             start_failure(first, info.start_s)) if f]
    clipped = clipping_runs(samples)
    if clipped:
        at, length = clipped[0]
        failures.append(f"audio: clips in {len(clipped)} place(s), first at {at / rate:.3f} s ({length} samples)")
    entry = {
        "present": True,
        "codec": info.codec,
        "rate": info.rate,
        "channels": info.channels,
        "role": info.role or None,
        "duration_s": round(duration, 6),
        "picture_s": round(picture_s, 6),
        "start_s": round(max(first, info.start_s), 6),
        "loudness": loudness(samples, rate),
        "clipping_runs": [[round(a / rate, 4), n] for a, n in clipped],
        "silence_runs_s": [list(run) for run in silence_runs(samples, rate)],
        "ok": not failures,
    }
    return entry, failures


def add_audio_entry(entry: dict[str, Any], path: Path, picture_s: float, planned: bool) -> list[str]:
    """Add the file's "audio" entry (only when it has sound or should have) and return its failures."""
    sound, failures = check_audio(path, picture_s, planned)
    if sound is not None:
        entry["audio"] = sound
    return failures
