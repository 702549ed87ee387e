"""--encoder auto|software|hardware: the choice per platform, the real probe of this machine's FFmpeg,
and the fall back to software when a hardware encoder fails to open, errors or misses the fidelity gate."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import av
import pytest

from daotai.encode.hardware import (
    HARDWARE_ENCODERS,
    EncoderProbe,
    HardwareEncoder,
    candidates,
    choose_encoder,
    hardware_encoder,
    is_final_delivery,
    probe_encoder,
    probe_platform,
)
from daotai.encode.video import EncodeSettings, VideoWriter
from daotai.errors import EncodeError, OptionError
from daotai.events import Notice
from daotai.plan.planner import plan_script
from daotai.render.base import RunContext
from daotai.render.registry import create_backend
from daotai.run.encoder_choice import gate_frames, judge, measure_encoder
from daotai.run.pipeline import run
from daotai.run.records import Finished, ShotRecord
from daotai.run.settings import PipelineSettings
from daotai.run.shots import render_shot
from daotai.script.load import validate_script

# A stand-in "hardware" encoder that opens everywhere: libx264 at CRF 51 misses the gate (27.8 dB on
# the synthetic clip at 640x360, measured), at CRF 12 it passes.
LOW_QUALITY = HardwareEncoder("libx264", "h264", "test", (("crf", "51"), ("preset", "ultrafast")))
HIGH_QUALITY = HardwareEncoder("libx264", "h264", "test", (("crf", "12"), ("preset", "ultrafast")))
NVENC = hardware_encoder("h264_nvenc")
SCRIPT = {"fps": 24, "size": "320x180", "scene": {"name": "stage", "set_pieces": []},
          "characters": [{"id": "red", "colour": [0.9, 0.1, 0.1]}],
          "shots": [{"shot_id": "one", "duration": 0.5, "subject": "red", "framing": "full",
                     "camera": {"type": "pan", "rotate": [10, 0, 0]}}]}


def opens(*names: str) -> dict[str, EncoderProbe]:
    """A probe result where exactly ``names`` open and every other table encoder is compiled but fails."""
    return {e.name: EncoderProbe(e.name, True, e.name in names, "" if e.name in names else "no device")
            for e in HARDWARE_ENCODERS}


def nvidia_device_present() -> bool:
    return Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()


# ------------------------------------------------------------------ selection, platform injected


@pytest.mark.parametrize("platform,codec,expected", [
    ("darwin", "h264", "h264_videotoolbox"), ("darwin", "hevc", "hevc_videotoolbox"),
    ("linux", "h264", "h264_nvenc"), ("linux", "hevc", "hevc_nvenc"), ("win32", "h264", "h264_nvenc"),
])
def test_hardware_picks_the_platforms_encoder_when_it_opens(platform, codec, expected):
    choice = choose_encoder("hardware", codec, final=False, platform=platform, probes=opens(expected))
    assert choice.hardware is not None and choice.hardware.name == expected and not choice.fallback


def test_each_platform_has_only_its_own_families():
    assert {e.family for e in candidates("darwin", "h264")} == {"videotoolbox"}
    assert {e.family for e in candidates("linux", "h264")} == {"nvenc"}
    assert candidates("freebsd", "h264") == ()


def test_a_platform_without_hardware_falls_back_with_the_reason():
    choice = choose_encoder("hardware", "h264", final=True, platform="freebsd", probes={})
    assert choice.hardware is None and choice.fallback
    assert "freebsd" in choice.reason and "libx264" in choice.reason


def test_an_encoder_compiled_in_but_not_opening_falls_back_naming_why():
    choice = choose_encoder("hardware", "h264", final=True, platform="darwin", probes=opens())
    assert choice.hardware is None and choice.fallback
    assert "h264_videotoolbox: compiled in but does not open (no device)" in choice.reason


def test_auto_uses_hardware_only_for_final_deliveries():
    probes = opens("h264_videotoolbox")
    draft = choose_encoder("auto", "h264", final=False, platform="darwin", probes=probes)
    final = choose_encoder("auto", "h264", final=True, platform="darwin", probes=probes)
    assert draft.hardware is None and not draft.fallback
    assert final.hardware is not None and final.hardware.name == "h264_videotoolbox"
    assert is_final_delivery(1920, 1080) and is_final_delivery(3840, 2160)
    assert not is_final_delivery(1280, 720)


def test_software_and_prores_never_use_hardware():
    probes = opens(*(e.name for e in HARDWARE_ENCODERS))
    assert choose_encoder("software", "h264", final=True, platform="darwin", probes=probes).hardware is None
    prores = choose_encoder("hardware", "prores", final=True, platform="darwin", probes=probes)
    assert prores.hardware is None and prores.fallback and "prores_ks" in prores.reason


def test_an_unknown_mode_is_refused_naming_the_flag():
    with pytest.raises(OptionError, match="--encoder"):
        choose_encoder("gpu", "h264", final=True, platform="linux", probes={})


# ------------------------------------------------------------------ the real probe of this FFmpeg


def test_the_probe_opens_an_encoder_that_works_and_not_one_that_is_absent():
    assert probe_encoder("libx264").opens
    absent = probe_encoder("h264_no_such_encoder")
    assert not absent.compiled and not absent.opens


def test_the_real_probe_agrees_with_this_ffmpeg(tmp_path):
    found = probe_platform()
    assert set(found) == {e.name for codec in ("h264", "hevc") for e in candidates(os.sys.platform, codec)}
    for name, probe in found.items():
        assert probe.compiled == (name in av.codecs_available)
        if probe.compiled and not probe.opens:
            assert probe.detail  # why, for doctor and the notice
        if probe.opens:  # a machine with the hardware: the writer opens it too
            with VideoWriter(tmp_path / f"{name}.mp4", 320, 180, 24,
                             EncodeSettings(codec=hardware_encoder(name).codec, hardware=hardware_encoder(name))) as out:
                for frame in gate_frames(320, 180, 4):
                    out.write(frame)
    if os.sys.platform == "linux" and "h264_nvenc" in av.codecs_available and not nvidia_device_present():
        assert found["h264_nvenc"].compiled and not found["h264_nvenc"].opens  # PyAV's wheels: compiled, no GPU


def test_a_hardware_encoder_that_does_not_open_leaves_no_file(tmp_path):
    if probe_encoder("h264_nvenc").opens:
        pytest.skip("NVENC opens on this machine")
    target = tmp_path / "shot.mp4"
    with pytest.raises(EncodeError, match="h264_nvenc"):  # PyAV opens the encoder at the first frame
        with VideoWriter(target, 320, 180, 24, EncodeSettings(hardware=NVENC)) as out:
            out.write(next(gate_frames(320, 180, 1)))
    assert list(tmp_path.iterdir()) == []


def test_settings_refuse_a_hardware_encoder_of_another_codec():
    with pytest.raises(EncodeError, match="settings.hardware"):
        EncodeSettings(codec="hevc", hardware=NVENC)


def test_videotoolbox_rate_follows_size_and_fps():
    vt = hardware_encoder("h264_videotoolbox")
    assert vt.stream_options(1920, 1080, Fraction(24))["b"] == str(round(0.30 * 1920 * 1080 * 24))
    assert "b" not in EncodeSettings().stream_options(1920, 1080, Fraction(24))  # software: CRF as before


# ------------------------------------------------------------------ the gate and the fall back


def test_the_gate_passes_software_and_fails_a_low_quality_encoder():
    good = measure_encoder(None, 640, 360, Fraction(24))
    bad = measure_encoder(LOW_QUALITY, 640, 360, Fraction(24))
    assert good.gate.ok and good.gate.psnr_mean_db >= 38.5
    assert not bad.gate.ok and "under 38.5 dB" in bad.gate.reason
    assert not judge([45.0, 45.0, 41.0, 45.0]).ok  # spread 1.7 dB: over 1.2
    assert judge([float("inf")] * 3).ok
    # a shot: the spread follows the picture, so QC's rules apply (mean, and no starved frame)
    assert judge([45.0, 45.0, 41.0, 45.0], spread=False).ok
    assert "under 34.9 dB" in judge([45.0, 45.0, 34.0, 45.0], spread=False).reason


def _run(tmp_path: Path, name: str, **settings):
    plan = plan_script(validate_script(SCRIPT))
    notices, result = [], None
    for event in run(plan, tmp_path / name, PipelineSettings(camera_qc=False, **settings)):
        if isinstance(event, Notice):
            notices.append(event.text)
        elif isinstance(event, Finished):
            result = event.result
    assert result is not None
    manifest = json.loads((tmp_path / name / "manifest.json").read_text())
    return notices, manifest, (tmp_path / name / "shots").iterdir()


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "shots").iterdir())} | {
        "sequence": (folder / "sequence.mp4").read_bytes()}


@pytest.mark.skipif(os.sys.platform != "linux", reason="the NVENC fall back is what a Linux machine without a GPU shows")
def test_hardware_that_does_not_open_here_renders_in_software_with_a_notice(tmp_path):
    if probe_encoder("h264_nvenc").opens:
        pytest.skip("NVENC opens on this machine")
    notices, manifest, _ = _run(tmp_path, "hw", encoder="hardware", controls=False)
    _run(tmp_path, "sw", encoder="software", controls=False)
    assert any("no hardware H.264 encoder opens here" in n and "h264_nvenc" in n for n in notices)
    assert manifest["settings"]["encoder"] == "hardware"
    assert manifest["settings"]["hardware_encoder"] is None
    assert "libx264" in manifest["settings"]["encoder_notes"][0]
    assert _bytes(tmp_path / "hw") == _bytes(tmp_path / "sw")  # the software bytes, exactly


def test_a_gate_miss_before_the_run_means_software_for_the_run(tmp_path):
    notices, manifest, _ = _run(tmp_path, "low", hardware_encoder=LOW_QUALITY, controls=False)
    _run(tmp_path, "sw", controls=False)
    assert any("misses the fidelity gate" in n for n in notices)
    assert manifest["settings"]["hardware_encoder"] is None
    assert "misses the fidelity gate" in manifest["settings"]["encoder_notes"][0]
    assert _bytes(tmp_path / "low") == _bytes(tmp_path / "sw")


def test_a_hardware_encoder_that_passes_the_gate_is_used(tmp_path):
    notices, manifest, _ = _run(tmp_path, "high", hardware_encoder=HIGH_QUALITY, controls=False)
    assert manifest["settings"]["hardware_encoder"]["options"] == [["crf", "12"], ["preset", "ultrafast"]]
    assert manifest["settings"]["encoder_notes"] == []
    assert any("encoded with hardware encoder" in n for n in manifest["shots"][0]["notices"])
    assert any("test clip" in n for n in notices)


def _render_one(tmp_path: Path, hardware: HardwareEncoder | None):
    plan = plan_script(validate_script(SCRIPT))
    settings = PipelineSettings(controls=False, hardware_encoder=hardware)
    out = tmp_path / (hardware.name if hardware else "software")
    (out / "shots").mkdir(parents=True)
    backend = create_backend("previz", {})
    record = ShotRecord("one")
    try:
        events = list(render_shot(backend, plan, plan.shots[0], out, settings, RunContext(), record))
    finally:
        backend.close()
    return events, record, (out / "shots").iterdir()


@pytest.mark.parametrize("hardware,why", [(LOW_QUALITY, "misses the fidelity gate"), (NVENC, "failed")])
def test_a_shot_that_misses_the_gate_or_errors_is_rendered_again_in_software(tmp_path, hardware, why):
    if hardware is NVENC and probe_encoder("h264_nvenc").opens:
        pytest.skip("NVENC opens on this machine")
    events, record, files = _render_one(tmp_path, hardware)
    _, _, software = _render_one(tmp_path, None)
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert len(warnings) == 1 and why in warnings[0] and "rendered again with the software encoder" in warnings[0]
    assert record.notices[-1] == warnings[0] or warnings[0] in record.notices
    assert len(record.samples) > 0
    assert [p.read_bytes() for p in files] == [p.read_bytes() for p in software]


def test_the_cli_refuses_an_unknown_encoder(tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    result = CliRunner().invoke(app, ["render", str(script), "-o", str(tmp_path / "o"), "--encoder", "gpu"])
    # main() turns the error into its exit code, 2, before anything renders
    assert isinstance(result.exception, OptionError) and result.exception.exit_code == 2
    assert "--encoder" in str(result.exception)
    assert not (tmp_path / "o").exists()
