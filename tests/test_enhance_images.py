"""`daotai enhance` on still images: upscale, denoise, colour match (to an image or a clip), in
that order, written atomically with a manifest; video-only steps refused with the flag named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from daotai import cli
from daotai.errors import EncodeError, OptionError
from daotai.post.colour import DeflickerConfig, MatchColourConfig, lab_stats
from daotai.post.enhance import DenoiseConfig, enhance_image, image_steps, is_image
from daotai.post.interpolate import InterpolateConfig
from daotai.post.upscale import UpscaleConfig


def picture(height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """A smooth test picture: a colour gradient with a bright square.  (H, W, 3) uint8."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.stack([x / width * 200 + 20, y / height * 150 + 40, np.full_like(x, 90.0)], axis=-1)
    image[height // 4 : height // 2, width // 4 : width // 2] = (230, 220, 60)
    return image.astype(np.uint8)


def noisy(image: np.ndarray, sigma: float = 18.0, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(image.astype(np.float32) + rng.normal(0, sigma, image.shape), 0, 255).astype(np.uint8)


def save(path: Path, rgb: np.ndarray, alpha: np.ndarray | None = None) -> Path:
    image = Image.fromarray(rgb, "RGB")
    if alpha is not None:
        image.putalpha(Image.fromarray(alpha, "L"))
    image.save(path)
    return path


def load(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255**2 / mse)


def test_upscale_doubles_the_picture_and_keeps_alpha(tmp_path):
    alpha = np.full((48, 64), 255, np.uint8)
    alpha[:, :32] = 0
    src = save(tmp_path / "in.png", picture(), alpha)
    result = enhance_image(src, tmp_path / "out.png", [UpscaleConfig(factor=2)])
    with Image.open(result.path) as out:
        assert out.size == (128, 96) and out.mode == "RGBA"
        a = np.asarray(out.getchannel("A"))
    assert a[:, :60].max() == 0 and a[:, 68:].min() == 255  # transparent half stays transparent
    assert (result.width, result.height, result.frames) == (128, 96, 1)
    manifest = json.loads((tmp_path / "out.enhance.json").read_text(encoding="utf-8"))
    assert manifest["steps"][0]["step"] == "upscale" and manifest["input"]["alpha"] is True
    assert manifest["output"]["width"] == 128


def test_denoise_brings_a_noisy_picture_closer_to_the_clean_one(tmp_path):
    clean = picture()
    src = save(tmp_path / "noisy.png", noisy(clean))
    result = enhance_image(src, tmp_path / "clean.png", [DenoiseConfig(strength=15)])
    assert psnr(load(result.path), clean) > psnr(noisy(clean), clean) + 3  # dB


def test_colour_match_takes_on_the_reference_image(tmp_path):
    src = save(tmp_path / "cold.png", picture())
    warm = picture()[..., ::-1].copy()  # channels swapped: a very different palette
    ref = save(tmp_path / "warm.png", warm)
    result = enhance_image(src, tmp_path / "matched.jpg", [MatchColourConfig(reference=str(ref))])
    got, want, before = lab_stats([load(result.path)]), lab_stats([warm]), lab_stats([picture()])
    distance = lambda s: np.abs(np.subtract(s.mean, want.mean)).sum()  # noqa: E731
    assert distance(got) < distance(before) / 4
    assert tuple(result.manifest["statistics"]["match_colour"]["reference"]["mean"]) == want.mean


def test_colour_match_reference_may_be_a_clip(tmp_path):
    from daotai.encode.video import VideoWriter

    warm = np.ascontiguousarray(picture()[..., ::-1])
    clip = tmp_path / "ref.mp4"
    with VideoWriter(clip, 64, 48, 24) as writer:
        for _ in range(6):
            writer.write(warm)
    src = save(tmp_path / "in.png", picture())
    result = enhance_image(src, tmp_path / "out.png", [MatchColourConfig(reference=str(clip))])
    assert np.abs(np.subtract(lab_stats([load(result.path)]).mean, lab_stats([warm]).mean)).sum() < 12


def test_steps_run_in_the_fixed_order_whatever_order_they_were_given_in():
    steps = image_steps([UpscaleConfig(factor=2), DenoiseConfig(), MatchColourConfig(reference="r.png")])
    assert [type(s) for s in steps] == [MatchColourConfig, DenoiseConfig, UpscaleConfig]


@pytest.mark.parametrize("step, named", [
    (InterpolateConfig(factor=2), "interpolate works on video"),
    (DeflickerConfig(), "deflicker works on video"),
    (UpscaleConfig(factor=2, method="diffusion"), "'diffusion' re-renders video"),
])
def test_video_only_steps_are_refused_for_a_still(step, named):
    with pytest.raises(EncodeError, match=named):
        image_steps([step])


def test_refusals_leave_nothing_behind(tmp_path):
    src = save(tmp_path / "in.png", picture())
    with pytest.raises(EncodeError, match="must be an image file"):
        enhance_image(src, tmp_path / "out.mp4", [DenoiseConfig()])
    with pytest.raises(EncodeError, match="is the input"):
        enhance_image(src, src, [DenoiseConfig()])
    with pytest.raises(EncodeError, match="does not exist"):
        enhance_image(tmp_path / "none.png", tmp_path / "o.png", [DenoiseConfig()])
    (tmp_path / "broken.png").write_bytes(b"not a png")
    with pytest.raises(EncodeError, match="is not an image"):
        enhance_image(tmp_path / "broken.png", tmp_path / "o.png", [DenoiseConfig()])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.png", "in.png"]
    with pytest.raises(EncodeError, match=r"denoise.strength: 50 must be a number in \[1, 30\]"):
        DenoiseConfig(strength=50)


def test_cli_enhances_a_still(tmp_path):
    src = save(tmp_path / "frame.png", noisy(picture()))
    ref = save(tmp_path / "ref.png", picture()[..., ::-1].copy())
    result = CliRunner().invoke(cli.app, ["enhance", str(src), "-o", str(tmp_path / "frame_4k.png"), "--upscale", "2",
                                          "--denoise", "--match-colour", str(ref)])
    assert result.exit_code == 0, result.output
    assert "enhanced" in result.stdout and "128x96" in result.stdout and "match_colour, denoise, upscale" in result.stdout
    assert Image.open(tmp_path / "frame_4k.png").size == (128, 96)


@pytest.mark.parametrize("flags, named", [
    (["--interpolate", "60"], "--interpolate: '60' works on video"),
    (["--deflicker"], "--deflicker: True works on video"),
    (["--upscale", "2", "--method", "diffusion"], "'diffusion' re-renders video"),
    (["--denoise", "--denoise-strength", "99"], "--denoise-strength: 99.0 must be a number in [1, 30]"),
    ([], "no step given"),
])
def test_cli_refuses_what_a_still_cannot_take(tmp_path, flags, named):
    src = save(tmp_path / "frame.png", picture())
    result = CliRunner().invoke(cli.app, ["enhance", str(src), "-o", str(tmp_path / "o.png"), *flags])
    assert isinstance(result.exception, OptionError), result.output
    assert named in str(result.exception)
    assert not (tmp_path / "o.png").exists()


def test_cli_denoise_is_refused_for_a_clip(tmp_path):
    result = CliRunner().invoke(cli.app, ["enhance", str(tmp_path / "clip.mp4"), "-o", str(tmp_path / "o.mp4"),
                                          "--denoise"])
    assert isinstance(result.exception, OptionError) and "works on still images" in str(result.exception)


def test_image_suffixes_are_recognised():
    assert is_image("a.PNG") and is_image("b.jpeg") and is_image("c.webp") and not is_image("d.mp4")
