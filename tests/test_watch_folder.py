"""daotai watch: complete files only, never its own outputs, bad files to failed/, restart-safe."""

from __future__ import annotations

import json
import os
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from daotai.encode.read import probe
from daotai.encode.video import VideoWriter
from daotai.post.upscale import UpscaleConfig
from daotai.post.watch import STATE_NAME, WatchConfig, scan_once

CONFIG = WatchConfig(steps=(UpscaleConfig(2, method="lanczos"),), settle_s=3600.0)


def _clip(path: Path, frames: int = 3) -> Path:
    """A small real H.264 clip: a gradient that moves, (32, 48, 3) uint8 frames."""
    with VideoWriter(path, 48, 32, 24) as out:
        for k in range(frames):
            frame = np.zeros((32, 48, 3), np.uint8)
            frame[..., 0] = (np.arange(48) * 5 + k * 9) % 256
            frame[..., 1] = 120
            out.write(frame)
    return path


def _scan(folder: Path, config: WatchConfig = CONFIG) -> dict[str, str]:
    """One poll: name → status."""
    return {event.name: event.status for event in scan_once(folder, config)}


def _age(path: Path, seconds: float) -> None:
    """Pretend the file was last written `seconds` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_slowly_written_file_waits_until_complete(tmp_path):
    whole = _clip(tmp_path / "source.mp4").read_bytes()
    target = tmp_path / "drop.mp4"
    with open(target, "wb") as sink:  # a copy in progress: each poll sees it grow
        cuts = [0, len(whole) // 4, len(whole) // 2, 3 * len(whole) // 4, len(whole)]
        for start, end in zip(cuts[:3], cuts[1:4], strict=True):
            sink.write(whole[start:end])
            sink.flush()
            assert _scan(tmp_path).get("drop.mp4") == "waiting"
            assert not (tmp_path / "drop_enhanced.mp4").exists()
        sink.write(whole[cuts[3] :])
    assert _scan(tmp_path)["drop.mp4"] == "waiting"  # size changed since the last poll
    assert _scan(tmp_path)["drop.mp4"] == "done"  # stable across two polls
    info = probe(tmp_path / "drop_enhanced.mp4")
    assert (info.width, info.height, info.frames, info.fps) == (96, 64, 3, Fraction(24))
    assert not (tmp_path / "failed").exists()


def test_sidecar_holds_a_file_back_and_quiet_files_go_at_once(tmp_path):
    clip = _clip(tmp_path / "a.mp4")
    _age(clip, 60)
    marker = tmp_path / "a.mp4.writing"
    marker.touch()
    quick = WatchConfig(steps=CONFIG.steps, settle_s=5.0)
    assert _scan(tmp_path, quick)["a.mp4"] == "waiting"
    assert _scan(tmp_path, quick)["a.mp4"] == "waiting"  # stable, but the writer says not yet
    marker.unlink()
    assert _scan(tmp_path, quick)["a.mp4"] == "done"  # quiet for a minute: taken on first sight


def test_corrupt_file_goes_to_failed_and_outputs_are_never_inputs(tmp_path):
    good = _clip(tmp_path / "good.mp4")
    bad = tmp_path / "bad.mov"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)  # a header, then garbage
    for path in (good, bad):
        _age(path, 60)
    quick = WatchConfig(steps=CONFIG.steps, settle_s=5.0)
    events = _scan(tmp_path, quick)
    assert events == {"bad.mov": "failed", "good.mp4": "done"}
    assert not bad.exists()
    assert (tmp_path / "failed" / "bad.mov").is_file()
    assert "EncodeError" in (tmp_path / "failed" / "bad.mov.error.txt").read_text()
    # its own output, the manifest and the failed folder are not picked up again
    _age(tmp_path / "good_enhanced.mp4", 60)
    assert _scan(tmp_path, quick) == {}
    assert not (tmp_path / "good_enhanced_enhanced.mp4").exists()


def test_restart_does_not_redo_work_but_a_replaced_file_is_redone(tmp_path):
    clip = _clip(tmp_path / "take.mp4")
    _age(clip, 60)
    quick = WatchConfig(steps=CONFIG.steps, settle_s=5.0)
    assert _scan(tmp_path, quick) == {"take.mp4": "done"}
    output = tmp_path / "take_enhanced.mp4"
    first = output.stat().st_mtime_ns
    state = json.loads((tmp_path / STATE_NAME).read_text())
    assert state["done"]["take.mp4"]["output"] == "take_enhanced.mp4"
    # a new watcher process: only the state file carries over
    assert _scan(tmp_path, quick) == {}
    assert output.stat().st_mtime_ns == first
    _clip(clip, frames=5)  # a new version of the take under the same name
    _age(clip, 30)
    assert _scan(tmp_path, quick) == {"take.mp4": "done"}
    assert probe(output).frames == 5


def test_cli_watch_once(tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    _age(_clip(tmp_path / "x.mp4"), 60)
    result = CliRunner().invoke(app, ["watch", str(tmp_path), "--once", "--upscale", "2", "--settle", "1"])
    assert result.exit_code == 0, result.output
    assert probe(tmp_path / "x_enhanced.mp4").width == 96
