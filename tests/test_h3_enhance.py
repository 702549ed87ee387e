"""`daotai enhance --method h3`: a clip re-rendered by MiniMax-H3 at a set strength, on the CPU with the tiny model.

The tiny folder's VAE is random, so its decode of an encoded clip looks nothing like the clip: how close
an output stays to its input is measured against that round trip (the input as the model's VAE gives it
back), which is what a re-render of strength near 0 returns.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

import builders  # noqa: E402
from builders import drain  # noqa: E402
from daotai.encode.audio import probe_audio  # noqa: E402
from daotai.encode.read import decode_frames, probe  # noqa: E402
from daotai.errors import EncodeError, OptionError  # noqa: E402
from daotai.events import Progress  # noqa: E402
from daotai.post.enhance import enhance_iter  # noqa: E402
from daotai.post.h3_rerender import H3RerenderConfig, denoise_count, forwards_of, noised, start_sigma  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
W, H = 112, 64  # the tiny folder's canvas for this aspect: 56x32
FRAMES = 48  # 2 s at 24 fps: generated at the model's 5 s (124 frames) and cut back


@pytest.fixture(scope="module")
def tiny_h3(tmp_path_factory) -> Path:
    """The tiny random MiniMax-H3 folder (both partitions); building it also lets Qwen3-VL load without torchvision."""
    return builders.build_h3(tmp_path_factory.mktemp("tiny_models") / "h3")


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Licence acceptances go to this test's own config folder, never the user's."""
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


def pattern(count: int = FRAMES) -> list[np.ndarray]:
    """Coloured stripes drifting right: (H, W, 3) uint8 frames with structure at every scale the VAE sees."""
    yy, xx = np.mgrid[0:H, 0:W]
    return [np.stack([(xx * 2 + 2 * i) % 256, (yy * 4) % 256, ((xx + yy + 3 * i) * 3) % 256], -1).astype(np.uint8)
            for i in range(count)]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """2 s of the pattern at 24 fps, no sound."""
    return builders.write_clip(tmp_path_factory.mktemp("clips") / "take.mp4", pattern(), 24)


def h3(model: Path, **fields) -> H3RerenderConfig:
    """A CPU re-render of the tiny model: 3 sigma points (2 forwards) unless told otherwise."""
    return H3RerenderConfig(**{"model": str(model), "device": "cpu", "steps": 3, "accept_licence": True, **fields})


def frames_of(path: Path) -> np.ndarray:
    return np.stack(list(decode_frames(path)))  # (F, H, W, 3) uint8


# ------------------------------------------------------------------ the schedule arithmetic


def test_the_last_int_forwards_x_strength_steps_run_from_their_sigma():
    assert forwards_of(50) == 49 and forwards_of(3) == 2
    assert [denoise_count(49, s) for s in (0.01, 0.3, 0.5, 1.0)] == [0, 14, 24, 49]
    sigmas = torch.tensor([1.0, 0.9, 0.5, 0.0])  # 3 forwards
    assert start_sigma(sigmas, 3, 3) == 1.0 and start_sigma(sigmas, 3, 1) == 0.5
    x0, noise = torch.full((2,), 4.0), torch.full((2,), -2.0)
    assert noised(x0, noise, 1.0).tolist() == [-2.0, -2.0]  # strength 1: pure noise, the clip is gone
    assert noised(x0, noise, 0.25).tolist() == [2.5, 2.5]  # 0.75 x 4 + 0.25 x -2


@pytest.mark.parametrize("strength", [0, 0.0, -0.2, 1.5, math.nan, True, "0.5"])
def test_a_strength_outside_zero_to_one_is_refused_naming_the_field(strength):
    with pytest.raises(EncodeError, match=r"rerender\.strength: .* must be a number in \(0, 1\]"):
        H3RerenderConfig(strength=strength)


def test_config_rules():
    assert H3RerenderConfig(strength=0.4).seed == 0 and H3RerenderConfig().model == "minimax-h3"
    with pytest.raises(EncodeError, match=r"rerender\.steps: 3 sigma points \(2 forwards\) at strength 0.4 run no step"):
        H3RerenderConfig(strength=0.4, steps=3)
    with pytest.raises(EncodeError, match=r"rerender\.shot: --script and --shot go together"):
        H3RerenderConfig(shot="s1")
    with pytest.raises(EncodeError, match=r"rerender\.prompt: the prompt comes from the script's shot"):
        H3RerenderConfig(script="a.json", shot="s1", prompt="rain")


# ------------------------------------------------------------------ end to end


def test_strength_one_regenerates_the_clip_in_its_format_with_generated_sound(tiny_h3, clip, tmp_path):
    out = tmp_path / "take_h3.mp4"
    events, result = drain(enhance_iter(clip, out, [h3(tiny_h3, strength=1.0)]))
    info = probe(out)
    assert (info.width, info.height, info.frames, info.fps) == (W, H, FRAMES, Fraction(24))
    assert (result.width, result.height, result.frames) == (W, H, FRAMES)
    denoise = [(e.done, e.total) for e in events if isinstance(e, Progress) and e.stage == "denoise"]
    assert denoise == [(1, 2), (2, 2)]  # strength 1: every forward of the schedule
    manifest = json.loads((tmp_path / "take_h3.enhance.json").read_text())
    assert manifest == result.manifest
    step = manifest["steps"][0]
    assert (step["step"], step["method"], step["strength"], step["seed"], step["steps"]) == ("rerender", "h3", 1.0, 0, 3)
    record = manifest["statistics"]["rerender"]
    assert (record["workflow"], record["start_sigma"], record["denoised_forwards"], record["schedule_forwards"],
            record["generated_frames"], record["canvas"]) == ("t2va", 1.0, 2, 2, 124, [56, 32])
    assert "MiniMax H3 Community License accepted" in record["licence"]
    sound = probe_audio(out)  # the clip had none: the sound MiniMax-H3 generated, cut to 2 s
    assert sound is not None and abs(sound.duration_s - 2.0) < 0.05
    assert manifest["audio"]["generated_by"] == "rerender (h3)" and manifest["audio"]["channels"] == 2


@pytest.mark.slow
def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not(tiny_h3, clip, tmp_path):
    def digest(name: str, seed: int) -> str:
        events, result = drain(enhance_iter(clip, tmp_path / name, [h3(tiny_h3, strength=0.5, seed=seed)]))
        denoise = [(e.done, e.total) for e in events if isinstance(e, Progress) and e.stage == "denoise"]
        assert denoise == [(1, 1)]  # int(2 forwards x 0.5): the transformer ran the schedule's last forward only
        return result.manifest["output"]["sha256"]

    first = digest("a.mp4", 7)
    assert digest("b.mp4", 7) == first
    assert (tmp_path / "a.mp4").read_bytes() == (tmp_path / "b.mp4").read_bytes()
    assert digest("c.mp4", 8) != first


def vae_round_trip(model: Path, frames: list[np.ndarray]) -> np.ndarray:
    """The clip as the model's VAE gives it back (canvas, 24 fps, 17n+5 frames, then the clip's size):
    (F, H, W, 3) uint8, what a re-render that denoises nothing would return."""
    from diffusers import AutoencoderKLMiniMaxH3
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline
    from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition

    from daotai.render.neural.retime import resize_rgb

    mean = MiniMaxH3ModularPipeline.pixel_mean.fget(None)
    std = MiniMaxH3ModularPipeline.pixel_std.fget(None)
    vae = AutoencoderKLMiniMaxH3.from_pretrained(model / "vae")
    small = [resize_rgb(f, 56, 32) for f in frames]
    small += [small[-1]] * (124 - len(small))
    pixels = torch.from_numpy(np.stack(small)).permute(3, 0, 1, 2)[None]  # (1, 3, 124, 32, 56) uint8
    x0 = encode_vae_condition(vae, pixels, mean, std, 42)
    shape = (1, -1, 1, 1, 1)
    with torch.no_grad():
        video = vae.decode(x0 * torch.tensor(vae.config.latents_std).view(shape)
                           + torch.tensor(vae.config.latents_mean).view(shape), return_dict=False)[0]
    video = (video.float() * torch.tensor(std).view(shape) + torch.tensor(mean).view(shape)).clamp(0, 1)
    rgb = (video[0].permute(1, 2, 3, 0).numpy() * 255 + 0.5).astype(np.uint8)[: len(frames)]
    return np.stack([resize_rgb(f, W, H) for f in rgb])


@pytest.mark.slow
def test_a_low_strength_stays_closer_to_the_input_than_a_high_one(tiny_h3, clip, tmp_path):
    source = frames_of(clip)
    reference = vae_round_trip(tiny_h3, list(source)).astype(np.float64)

    def distance(strength: float) -> tuple[float, float]:
        out = tmp_path / f"s{strength}.mp4"
        _, result = drain(enhance_iter(clip, out, [h3(tiny_h3, strength=strength, steps=21)]))
        error = float(np.abs(frames_of(out).astype(np.float64) - reference).mean())
        return error, result.manifest["statistics"]["rerender"]["start_sigma"]

    low, low_sigma = distance(0.1)  # 2 of 20 forwards, from sigma 0.57 (the video schedule's shift is 12)
    high, high_sigma = distance(1.0)
    assert low_sigma < high_sigma == 1.0
    assert low < 0.8 * high, (low, high)


def test_bad_strength_through_the_command_line_is_refused_and_nothing_is_written(tiny_h3, clip, tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    folder = tmp_path / "out"
    folder.mkdir()
    command = ["enhance", str(clip), "-o", str(folder / "x.mp4"), "--method", "h3", "--model", str(tiny_h3),
               "--accept-licence", "--strength"]
    # As a user meets it: exit status 2 and the field, the value and the rule, no traceback.
    done = subprocess.run([sys.executable, "-m", "daotai.cli", *command, "1.5"], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, COLUMNS="200"), timeout=300)
    assert done.returncode == 2, done.stderr
    assert "rerender.strength" in done.stderr and "1.5 must be a number in (0, 1]" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for strength in ("0", "-0.1"):
        result = CliRunner().invoke(app, [*command, strength])
        assert isinstance(result.exception, OptionError) and result.exception.exit_code == 2
        assert "rerender.strength" in str(result.exception) and "must be a number in (0, 1]" in str(result.exception)
    refused = CliRunner().invoke(app, ["enhance", str(clip), "-o", str(folder / "x.mp4"), "--method", "h3",
                                       "--upscale", "2"])
    assert isinstance(refused.exception, OptionError) and "--upscale" in str(refused.exception)
    assert list(folder.iterdir()) == []
    assert not any(p.name.startswith("x") for p in folder.parent.iterdir())


def test_a_clip_longer_than_one_generation_is_refused_before_anything_is_written(tiny_h3, tmp_path):
    long = builders.write_clip(tmp_path / "long.mp4", pattern(64), 4)  # 16 s at 4 fps
    with pytest.raises(EncodeError, match=r"rerender: the clip is 16.00 s; MiniMax-H3 re-renders at most 15 s"):
        drain(enhance_iter(long, tmp_path / "out.mp4", [h3(tiny_h3, strength=0.5)]))
    assert not (tmp_path / "out.mp4").exists()


def test_an_unaccepted_licence_is_refused_before_anything_is_written(tiny_h3, clip, tmp_path):
    with pytest.raises(OptionError, match="rerender.accept_licence"):
        drain(enhance_iter(clip, tmp_path / "out.mp4", [h3(tiny_h3, strength=0.5, accept_licence=False)]))
    assert list(tmp_path.glob("out*")) == []


SCRIPT = {
    "title": "rehearsal", "fps": 24, "size": [W, H], "seed": 3, "scene": "office",
    "characters": [{"id": "lin", "appearance": "blue shirt", "reference_images": ["lin.png"]},
                   {"id": "mara", "appearance": "glasses"}],
    "shots": [{"shot_id": "s1", "duration": 2, "subject": "lin", "characters": ["lin", "mara"]}],
}


def test_the_command_line_uses_the_scripts_characters_and_keeps_the_clips_sound(tiny_h3, tmp_path):
    from PIL import Image
    from typer.testing import CliRunner

    from daotai.cli import app
    from daotai.encode.audio import mux_audio

    Image.new("RGB", (48, 64), (200, 120, 40)).save(tmp_path / "lin.png")
    script = tmp_path / "rehearsal.json"
    script.write_text(json.dumps(SCRIPT))
    take = builders.write_clip(tmp_path / "phone.mp4", pattern(), 24)
    t = np.arange(96000, dtype=np.float32) / 48000
    mux_audio(take, np.stack([0.3 * np.sin(2 * np.pi * 440 * t)] * 2, axis=1), 48000)
    out = tmp_path / "phone_h3.mp4"
    result = CliRunner().invoke(app, ["enhance", str(take), "-o", str(out), "--method", "h3", "--strength", "0.5",
                                      "--steps", "3", "--seed", "5", "--model", str(tiny_h3), "--device", "cpu",
                                      "--script", str(script), "--shot", "s1", "--accept-licence"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "phone_h3.enhance.json").read_text())
    step = manifest["steps"][0]
    assert (step["method"], step["strength"], step["seed"], step["shot"]) == ("h3", 0.5, 5, "s1")
    record = manifest["statistics"]["rerender"]
    assert record["workflow"] == "ref2va" and record["shot"] == "s1"
    assert record["references"].startswith("<Picture 1> lin (") and "<Picture 2> mara (colour swatch #" in \
        record["references"]
    assert record["prompt"].startswith("<Picture 1> shows lin") and "<Video 1>" not in record["prompt"]
    assert manifest["audio"]["copied_from_input"] is True  # the clip's own sound, not the generated one
    assert probe_audio(out).codec == probe_audio(take).codec
    info = probe(out)
    assert (info.width, info.height, info.frames) == (W, H, FRAMES)


def test_a_shot_the_script_does_not_have_is_refused_before_anything_is_written(tiny_h3, clip, tmp_path):
    script = tmp_path / "rehearsal.json"
    script.write_text(json.dumps(SCRIPT))
    with pytest.raises(EncodeError, match=r"rerender.shot: 's9' is not a shot of .*rehearsal.json' \(s1\)"):
        drain(enhance_iter(clip, tmp_path / "out.mp4", [h3(tiny_h3, strength=0.5, script=str(script), shot="s9")]))
    assert list(tmp_path.glob("out*")) == []


def test_the_partial_blocks_over_the_whole_schedule_are_the_stock_generation(tiny_h3):
    """partial_steps = every forward: the same timesteps, row plan and audio schedule as diffusers' own blocks, so
    the same noise gives the same video and sound; fewer forwards from the same noise give another video."""
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_partial import PARTIAL_INPUT, partial_blocks
    from daotai.render.h3_runner import H3Runner
    from daotai.runtime.device import generator_for

    def loaded(blocks) -> H3Runner:
        runner = H3Runner(H3Options(model=str(tiny_h3), device="cpu", steps=4, accept_licence=True), "minimax-h3")
        runner.blocks = blocks
        runner.prepare()
        list(runner.start((W, H), {"t2va"}, 124, 0, "s"))
        list(runner.load_missing({"t2va"}, "s"))
        return runner

    stock, partial = loaded(None), loaded(partial_blocks)
    try:
        def call(runner: H3Runner, latents, **extra) -> dict:
            return runner.pipe(prompt="a quiet office", num_frames=124, height=32, width=56, num_inference_steps=4,
                               generator=generator_for(3), output_type="np", latents=latents,
                               output=["videos", "audio"], **extra)

        shape = stock.pipe(prompt="a quiet office", num_frames=124, height=32, width=56, num_inference_steps=4,
                           generator=generator_for(0), output="latents").shape  # (1, 24, F', h', w')
        noise = torch.randn(shape, generator=torch.Generator().manual_seed(1))
        expected = call(stock, noise.clone())
        whole = call(partial, noise.clone(), **{PARTIAL_INPUT: 3})  # 4 sigma points: 3 forwards
        assert np.array_equal(whole["videos"], expected["videos"])
        assert torch.equal(whole["audio"], expected["audio"])
        tail = call(partial, noise.clone(), **{PARTIAL_INPUT: 1})
        assert not np.array_equal(tail["videos"], expected["videos"])
        assert partial.pipe.scheduler.begin_index == 2  # the last forward of three
    finally:
        stock.close()
        partial.close()
