"""Diffusion re-render upscale (`--method diffusion`) end to end on CPU with a tiny random Wan model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from builders import drain, pan_frames, write_clip  # noqa: E402
from daotai.encode.read import decode_frames, probe  # noqa: E402
from daotai.errors import BackendError, OptionError  # noqa: E402
from daotai.events import Progress  # noqa: E402
from daotai.post.enhance import _for_shot, enhance, enhance_iter, parse_steps  # noqa: E402
from daotai.post.rerender import _windows, pad_to_multiple, rerender_frames, window_count  # noqa: E402
from daotai.post.upscale import UpscaleConfig, upscale_classical  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
W, H = 40, 28  # x2 = 80x56: the height needs padding to 64 for the model


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """Six frames of a pan at 40x28, 24 fps."""
    return write_clip(tmp_path_factory.mktemp("clips") / "in.mp4", list(pan_frames(6, W, H)), 24)


def diffusion(wan: Path, **options) -> UpscaleConfig:
    """A CPU re-render config for the tiny model: 2 steps, strength 0.5 unless told otherwise."""
    settings = {"steps": 2, "strength": 0.5, "device": "cpu", **options}
    return UpscaleConfig(2, method="diffusion", model=str(wan), **settings)


def test_rerender_output_format_progress_and_manifest(tiny_wan, clip, tmp_path):
    events, result = drain(enhance_iter(clip, tmp_path / "up.mp4", [diffusion(tiny_wan)]))
    info = probe(tmp_path / "up.mp4")
    assert (info.width, info.height, info.frames, info.fps) == (2 * W, 2 * H, 6, Fraction(24))
    assert (result.width, result.height, result.frames) == (2 * W, 2 * H, 6)
    stages = [e.stage for e in events if isinstance(e, Progress)]
    assert stages[:2] == ["enhance", "load"] and "denoise" in stages
    denoise = [e for e in events if isinstance(e, Progress) and e.stage == "denoise"]
    assert [(e.done, e.total) for e in denoise] == [(1, 1)]  # int(2 steps x 0.5): the schedule's last step
    assert "re-render window 1/1" in denoise[0].message
    frames = [e for e in events if isinstance(e, Progress) and e.stage == "enhance"]
    assert frames[-1].done == frames[-1].total == 6
    step = json.loads((tmp_path / "up.enhance.json").read_text())["steps"][0]
    assert step["method"] == "diffusion" and step["strength"] == 0.5 and step["steps"] == 2
    assert step["model"] == str(tiny_wan)


def test_strength_zero_is_the_classical_upscale_and_more_strength_changes_more(tiny_wan, clip, tmp_path):
    source = list(decode_frames(clip))
    classical = [upscale_classical(f, 2) for f in source]
    zero = list(rerender_frames(iter(source), diffusion(tiny_wan, strength=0.0)))
    assert all(np.array_equal(a, b) for a, b in zip(classical, zero, strict=True)) and len(zero) == 6

    def refined(**options) -> list[np.ndarray]:
        return [f for f in rerender_frames(iter(source), diffusion(tiny_wan, **options)) if isinstance(f, np.ndarray)]

    half = refined()
    assert len(half) == 6 and half[0].shape == (2 * H, 2 * W, 3) and half[0].dtype == np.uint8
    change = np.mean([np.abs(a.astype(np.int16) - b).mean() for a, b in zip(classical, half, strict=True)])
    assert change > 1.0  # the model really ran on the frames
    assert all(np.array_equal(a, b) for a, b in zip(half, refined(), strict=True))  # same seed, same frames
    assert not all(np.array_equal(a, b) for a, b in zip(half, refined(seed=7), strict=True))


def test_long_clips_run_in_overlapping_windows(tiny_wan):
    windows = list(_windows(range(11), 5, 2))
    assert [(list(run), last) for run, last in windows] == [
        ([0, 1, 2, 3, 4], False), ([3, 4, 5, 6, 7], False), ([6, 7, 8, 9, 10], True)]
    assert window_count(11, 5, 2) == 3 and window_count(5, 5, 2) == 1 and window_count(12, 5, 2) == 4
    assert [len(r) for r, _ in _windows(range(12), 5, 2)] == [5, 5, 5, 3]
    assert pad_to_multiple(np.zeros((56, 80, 3), np.uint8)).shape == (64, 80, 3)

    source = list(pan_frames(11, W, H))
    out = list(rerender_frames(iter(source), diffusion(tiny_wan), frames_total=11, window=5, overlap=2))
    frames = [f for f in out if isinstance(f, np.ndarray)]
    assert len(frames) == 11 and {f.shape for f in frames} == {(2 * H, 2 * W, 3)}
    runs = [e for e in out if isinstance(e, Progress) and e.stage == "denoise"]
    assert [e.message.split(":")[0] for e in runs] == [f"re-render window {k}/3" for k in (1, 2, 3)]


def test_missing_or_unsuitable_model_is_a_clear_error(clip, tmp_path):
    with pytest.raises(BackendError, match="does not exist"):
        enhance(clip, tmp_path / "a.mp4", [diffusion(tmp_path / "nowhere" / "wan")])
    vace = tmp_path / "vace"
    vace.mkdir()
    (vace / "model_index.json").write_text(json.dumps({"_class_name": "WanVACEPipeline"}))
    with pytest.raises(BackendError, match="needs a Wan 2.1 text-to-video model"):
        enhance(clip, tmp_path / "b.mp4", [diffusion(vace)])
    assert not (tmp_path / "a.mp4").exists() and not (tmp_path / "b.mp4").exists()

    # A registry model that was never pulled, through the command line as a user meets it.
    env = dict(os.environ, HF_HOME=str(tmp_path / "empty-hf-home"), COLUMNS="120")
    result = subprocess.run(
        [sys.executable, "-m", "daotai.cli", "enhance", str(clip), "-o", str(tmp_path / "c.mp4"), "--upscale", "2",
         "--method", "diffusion", "--device", "cpu"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr + result.stdout
    assert "wan2.1-t2v-1.3b is not downloaded" in result.stderr
    assert "daotai models pull wan2.1-t2v-1.3b" in result.stderr
    assert not (tmp_path / "c.mp4").exists()


def test_cli_method_diffusion(tiny_wan, clip, tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    out = tmp_path / "out.mp4"
    result = CliRunner().invoke(app, ["enhance", str(clip), "-o", str(out), "--upscale", "2", "--method", "diffusion",
                                      "--model", str(tiny_wan), "--steps", "2", "--strength", "0.5", "--device", "cpu",
                                      "--prompt", "a man walks"])
    assert result.exit_code == 0, result.output
    info = probe(out)
    assert (info.width, info.height, info.frames) == (2 * W, 2 * H, 6)
    assert json.loads(out.with_name("out.enhance.json").read_text())["steps"][0]["prompt"] == "a man walks"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("upscale=2,strength=0.5", "only used with method 'diffusion'"),
        ("strength=0.5", "belong to upscale"),
        ("upscale=2,method=diffusion,strength=2", r"upscale.strength: 2.0 must be a number in \[0, 1\]"),
        ("upscale=2,method=diffusion,strength=high", "strength='high' must be a number"),
        ("upscale=2,method=diffusion,steps=2,strength=0.3", "run no denoising step"),
        ("upscale=2,method=diffusion,upscale_method=classical", "not both"),
        ("upscale=2,method=magic", "must be one of classical, lanczos, spandrel, diffusion"),
    ],
)
def test_enhance_spec_rules(spec, message):
    with pytest.raises(OptionError, match=message):
        parse_steps(spec)


def test_render_spec_takes_prompt_and_seed_from_each_shot():
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    (step,) = parse_steps("upscale=2,method=diffusion,strength=0.4,steps=20,model=wan2.1-t2v-14b")
    assert (step.method, step.strength, step.steps, step.model, step.prompt, step.seed) == (
        "diffusion", 0.4, 20, "wan2.1-t2v-14b", None, None)
    shot = plan_script(load_script(ROOT / "examples" / "minimal.json")).shots[0]
    (mine,) = _for_shot([step], shot)
    assert (mine.prompt, mine.seed) == (shot.prompt, shot.seed)
    (fixed,) = _for_shot([UpscaleConfig(2, method="diffusion", prompt="rain", seed=3)], shot)
    assert (fixed.prompt, fixed.seed) == ("rain", 3)
