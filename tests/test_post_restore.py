"""Restoration steps on real encoded clips: upscale, interpolate, deflicker, colour match, enhance()."""

from __future__ import annotations

import json
import threading
from fractions import Fraction

import cv2
import numpy as np
import pytest

from builders import FINE, backdrop, pan_frames, write_clip
from daotai.encode.read import decode_frames, probe
from daotai.errors import BackendError, Cancelled, DependencyMissing, EncodeError, OptionError
from daotai.events import Progress
from daotai.files import sha256_file
from daotai.post.colour import DeflickerConfig, MatchColourConfig, lab_stats, to_lab
from daotai.post.enhance import enhance, enhance_iter, parse_steps, plan_output
from daotai.post.interpolate import InterpolateConfig
from daotai.post.upscale import UpscaleConfig, upscale_classical
from daotai.qc.metrics import flicker_score, psnr
from daotai.render.base import RunContext

W, H = 320, 180  # pan_frames' default size


# --------------------------------------------------------------------------- upscale


def test_classical_x2_beats_bicubic_on_encoded_clip(tmp_path):
    truth_path = write_clip(tmp_path / "hr.mp4", [backdrop(W, H, seed=s) for s in (3, 4)], 24)
    truth = list(decode_frames(truth_path))
    low = [cv2.resize(f, (W // 2, H // 2), interpolation=cv2.INTER_AREA) for f in truth]
    src = write_clip(tmp_path / "lr.mp4", low, 24)
    result = enhance(src, tmp_path / "up.mp4", [UpscaleConfig(2)], FINE)
    assert (result.width, result.height, result.frames, result.fps) == (W, H, 2, Fraction(24))
    info = probe(tmp_path / "up.mp4")
    assert (info.width, info.height, info.frames, info.fps) == (W, H, 2, Fraction(24))
    ours = list(decode_frames(tmp_path / "up.mp4"))
    # the baseline goes through the same encoder, so only the upscaler differs
    bicubic = [cv2.resize(lo, (W, H), interpolation=cv2.INTER_CUBIC) for lo in decode_frames(src)]
    baseline = list(decode_frames(write_clip(tmp_path / "bicubic.mp4", bicubic, 24)))
    for gt, up, bic in zip(truth, ours, baseline, strict=True):
        assert psnr(gt, up) > psnr(gt, bic) + 0.2  # RGB: 4:2:0 chroma loss dominates both
        assert psnr(_luma(gt), _luma(up)) > psnr(_luma(gt), _luma(bic)) + 0.8  # detail lives in luma


def _luma(frame: np.ndarray) -> np.ndarray:
    """(H, W) uint8 luma."""
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)


def test_classical_x4_beats_bicubic_and_keeps_flat_areas():
    truth = backdrop(256, 128, seed=7)
    low = cv2.resize(truth, (64, 32), interpolation=cv2.INTER_AREA)
    up = upscale_classical(low, 4)
    assert up.shape == (128, 256, 3) and up.dtype == np.uint8
    assert psnr(truth, up) > psnr(truth, cv2.resize(low, (256, 128), interpolation=cv2.INTER_CUBIC))
    flat = np.full((16, 16, 3), 93, np.uint8)
    assert np.array_equal(upscale_classical(flat, 2), np.full((32, 32, 3), 93, np.uint8))  # no halos


def test_upscale_config_rules(tmp_path):
    with pytest.raises(EncodeError, match="upscale.factor"):
        UpscaleConfig(3)
    with pytest.raises(EncodeError, match="upscale.sha256"):
        UpscaleConfig(2, method="spandrel", model="x.safetensors")


def test_spandrel_checks_hash_before_loading(tmp_path):
    from daotai.post.upscale import Upscaler

    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"not really weights")
    with pytest.raises(BackendError, match="SHA-256"):
        Upscaler(UpscaleConfig(2, method="spandrel", model=str(weights), sha256="0" * 64))
    try:
        import spandrel  # noqa: F401
    except ImportError:
        with pytest.raises(DependencyMissing, match=r"pip install 'daotai\[restore\]'"):
            Upscaler(UpscaleConfig(2, method="spandrel", model=str(weights), sha256=sha256_file(weights)))


# --------------------------------------------------------------------------- interpolate


def test_interpolation_recovers_dropped_frames(tmp_path):
    full = write_clip(tmp_path / "full60.mp4", pan_frames(20), 60)
    truth = list(decode_frames(full))
    half = write_clip(tmp_path / "half30.mp4", truth[0::2], 30)
    flow = enhance(half, tmp_path / "flow.mp4", [InterpolateConfig(fps=60)], FINE)
    blend = enhance(half, tmp_path / "blend.mp4", [InterpolateConfig(fps=60, method="blend")], FINE)
    assert (flow.frames, flow.fps) == (20, Fraction(60))
    info = probe(tmp_path / "flow.mp4")
    assert (info.frames, info.fps, info.width, info.height) == (20, Fraction(60), W, H)
    ours = list(decode_frames(tmp_path / "flow.mp4"))
    blended = list(decode_frames(tmp_path / "blend.mp4"))
    middles = range(1, 19, 2)  # the dropped frames (the last one has no right neighbour)
    p_flow = np.mean([psnr(truth[j], ours[j]) for j in middles])
    p_blend = np.mean([psnr(truth[j], blended[j]) for j in middles])
    p_dup = np.mean([psnr(truth[j], truth[j - 1]) for j in middles])
    assert p_flow >= 30.0
    assert p_flow >= p_blend + 3.0
    assert p_flow >= p_dup + 3.0
    assert blend.frames == 20


@pytest.mark.parametrize(
    ("config", "frames_in", "fps_in", "expected"),
    [
        (InterpolateConfig(2), 10, Fraction(24), (20, Fraction(48))),
        (InterpolateConfig(4), 10, Fraction(24), (40, Fraction(96))),
        (InterpolateConfig(fps=Fraction(60)), 48, Fraction(24), (120, Fraction(60))),
        (InterpolateConfig(fps=Fraction(30000, 1001)), 24, Fraction(24000, 1001), (30, Fraction(30000, 1001))),
    ],
)
def test_output_format_arithmetic(config, frames_in, fps_in, expected):
    _, _, fps, frames = plan_output([config], W, H, fps_in, frames_in)
    assert (frames, fps) == expected


def test_x4_and_target_fps_on_encoded_clip(tmp_path):
    src = write_clip(tmp_path / "in.mp4", list(pan_frames(6, 160, 96)), 24)
    x4 = enhance(src, tmp_path / "x4.mp4", parse_steps("interpolate=x4"))
    info = probe(x4.path)
    assert (info.frames, info.fps) == (24, Fraction(96))
    to50 = enhance(src, tmp_path / "50.mp4", parse_steps("interpolate=50"))
    info = probe(to50.path)
    assert (info.frames, info.fps) == (13, Fraction(50))  # 12.5 frames of time, rounded half up
    assert abs(info.duration_s - 6 / 24) <= 0.5 / 50 + 1e-6


# --------------------------------------------------------------------------- colour


def _flickering(n: int = 24):
    """A static picture whose brightness jumps ±12 % every other frame."""
    base = backdrop(W, H, seed=9).astype(np.float32)
    for k in range(n):
        gain = 1.12 if k % 2 else 0.88
        yield np.clip(base * gain, 0, 255).astype(np.uint8)


def test_deflicker_flattens_brightness(tmp_path):
    src = write_clip(tmp_path / "flicker.mp4", _flickering(), 24)
    result = enhance(src, tmp_path / "steady.mp4", [DeflickerConfig(window=5)])
    assert result.frames == 24
    before = flicker_score(decode_frames(src))
    after = flicker_score(decode_frames(result.path))
    assert after < before / 4


def test_deflicker_keeps_a_slow_fade():
    from daotai.post.colour import deflicker_frames

    base = backdrop(W, H, seed=2).astype(np.float32)
    ramp = [np.clip(base * (0.5 + k / 40), 0, 255).astype(np.uint8) for k in range(20)]
    out = list(deflicker_frames(iter(ramp), DeflickerConfig(window=7)))
    assert len(out) == 20
    for a, b in zip(ramp, out, strict=True):
        assert abs(to_lab(a)[..., 0].mean() - to_lab(b)[..., 0].mean()) < 0.8


def test_match_colour_moves_lab_statistics_to_reference(tmp_path):
    frames = list(pan_frames(8))
    ref = write_clip(tmp_path / "ref.mp4", frames, 24)
    graded = [np.clip(f.astype(np.float32) * (1.15, 0.95, 0.75) + (10, 0, -5), 0, 255).astype(np.uint8) for f in frames]
    src = write_clip(tmp_path / "warm.mp4", graded, 24)
    result = enhance(src, tmp_path / "matched.mp4", [MatchColourConfig(reference=str(ref))])
    target = lab_stats(decode_frames(ref))
    before, after = lab_stats(decode_frames(src)), lab_stats(decode_frames(result.path))
    for k in range(3):
        assert abs(after.mean[k] - target.mean[k]) < 0.6
        assert abs(after.std[k] - target.std[k]) < 1.5
    for k in (1, 2):  # the grade moved a* and b* far; L* barely
        assert abs(after.mean[k] - target.mean[k]) < abs(before.mean[k] - target.mean[k]) / 4
    matched = list(decode_frames(result.path))
    truth = list(decode_frames(ref))
    assert np.mean([psnr(a, b) for a, b in zip(truth, matched, strict=True)]) > np.mean(
        [psnr(a, b) for a, b in zip(truth, decode_frames(src), strict=True)]
    ) + 3
    assert "match_colour" in result.manifest["statistics"]


# --------------------------------------------------------------------------- enhance()


def test_all_steps_manifest_and_progress(tmp_path):
    src = write_clip(tmp_path / "in.mp4", list(pan_frames(8, 160, 96)), 24)
    steps = parse_steps(f"upscale=2,interpolate=x2,deflicker=5,match={src}")
    events = list(_drain(enhance_iter(src, tmp_path / "out.mp4", steps)))
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[0].done == 0 and progress[-1].done == progress[-1].total == 16
    assert [e.done for e in progress] == list(range(17))
    info = probe(tmp_path / "out.mp4")
    assert (info.width, info.height, info.frames, info.fps) == (320, 192, 16, Fraction(48))
    manifest = json.loads((tmp_path / "out.enhance.json").read_text())
    assert [s["step"] for s in manifest["steps"]] == ["match_colour", "deflicker", "interpolate", "upscale"]
    assert manifest["input"]["sha256"] == sha256_file(src)
    assert manifest["output"]["sha256"] == sha256_file(tmp_path / "out.mp4")
    assert manifest["output"]["frames"] == 16 and manifest["output"]["fps"] == "48"


def _drain(events):
    """Yield every event of an enhance_iter generator (its return value is dropped)."""
    yield from events


def test_cancel_leaves_nothing_at_output(tmp_path):
    src = write_clip(tmp_path / "in.mp4", list(pan_frames(8, 160, 96)), 24)
    ctx = RunContext(cancel=threading.Event())
    events = enhance_iter(src, tmp_path / "out.mp4", [UpscaleConfig(2)], ctx=ctx)
    with pytest.raises(Cancelled):
        for event in events:
            if isinstance(event, Progress) and event.done == 3:
                ctx.cancel.set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("upscale=3", "upscale"),
        ("interpolate=fast", "interpolate"),
        ("sharpen=2", "unknown step"),
        ("deflicker=4", "deflicker.window"),
        ("", "names no step"),
        ("upscale=2,upscale=4", "twice"),
    ],
)
def test_parse_steps_rejects_bad_specs(spec, message):
    with pytest.raises(OptionError, match=message):
        parse_steps(spec)


def test_corrupt_input_and_same_path_are_encode_errors(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 1000)
    with pytest.raises(EncodeError):
        enhance(bad, tmp_path / "out.mp4", [UpscaleConfig(2)])
    good = write_clip(tmp_path / "in.mp4", list(pan_frames(2, 64, 32)), 24)
    with pytest.raises(EncodeError, match="is the input"):
        enhance(good, good, [UpscaleConfig(2)])
    assert not (tmp_path / "out.mp4").exists()


def test_cli_enhance(tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    src = write_clip(tmp_path / "in.mp4", list(pan_frames(4, 96, 64)), 24)
    out = tmp_path / "out.mp4"
    result = CliRunner().invoke(app, ["enhance", str(src), "-o", str(out), "--upscale", "2", "--interpolate", "x2"])
    assert result.exit_code == 0, result.output
    info = probe(out)
    assert (info.width, info.height, info.frames, info.fps) == (192, 128, 8, Fraction(48))


def test_unknown_interpolation_method_lists_the_supported_ones():
    # No maintained loader runs neural interpolation weights (RIFE/FILM), so there is none to name.
    with pytest.raises(OptionError, match=r"interpolate.method: 'rife' must be one of dis, blend"):
        parse_steps("interpolate=x2,interpolate_method=rife")


@pytest.mark.parametrize("t", [0.25, 0.75])
def test_in_betweens_lean_toward_the_nearer_frame(t):
    # Off the middle, the frame at time t is (1 - t) of the first and t of the second: with no
    # motion every weighting path (visible pixels, occluded pixels, plain blend, flow) gives it.
    from daotai.render.motion import Grids, Pair, blend, in_between, synthesise

    a, b = np.full((48, 64, 3), 40, np.uint8), np.full((48, 64, 3), 200, np.uint8)
    expected = round(40 * (1 - t) + 200 * t)
    grids = Grids(64, 48)
    w, h = grids.flow_size
    still = np.zeros((h, w, 2), np.float32)
    for seen in (1.0, 0.0):  # 1: every pixel visible in the other frame; 0: all occluded (fallback)
        visible = np.full((h, w), seen, np.float32)
        out = synthesise(a, b, t, Pair(still, still, visible, visible), grids)
        assert np.abs(out.astype(int) - expected).max() <= 1, (seen, out.mean())
    assert np.abs(blend(a, b, t).astype(int) - expected).max() <= 1
    assert np.abs(in_between(a, b, t).astype(int) - expected).max() <= 1


@pytest.mark.parametrize("frames_in, fps_in, fps_out, frames_out", [
    (5, 24, 60, 13), (3, 24, 60, 8), (10, 24, 48, 20), (1, 24, 60, 3), (7, 30, 24, 6),
])
def test_interpolated_clips_keep_their_duration(frames_in, fps_in, fps_out, frames_out):
    from daotai.post.interpolate import output_frame_count

    assert output_frame_count(frames_in, Fraction(fps_in), Fraction(fps_out)) == frames_out


def test_the_colour_transfer_maps_source_statistics_exactly_onto_the_target():
    from daotai.post.colour import LabStats, reinhard

    source, target = LabStats((50.0, 4.0, -2.0), (10.0, 5.0, 8.0)), LabStats((60.0, -1.0, 3.0), (20.0, 5.0, 4.0))
    transfer = reinhard(source, target)
    for i in range(3):
        assert source.mean[i] * transfer.gain[i] + transfer.offset[i] == pytest.approx(target.mean[i])
        assert source.std[i] * transfer.gain[i] == pytest.approx(target.std[i])
