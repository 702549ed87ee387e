"""The core of ``bench/restore.py`` on a small case: its targets hold and its pieces measure what they say."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    """bench/restore.py imported as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("restore_bench", ROOT / "bench" / "restore.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_interpolation_beats_blending_on_a_previz_pan(bench):
    plan = bench.plan_at(bench.INTERP_SCRIPT, 60, "640x360", ("pan",), 1.0)
    ((shot_id, truth),) = list(bench.render_frames(plan))
    assert shot_id == "pan" and len(truth) == 60 and truth[0].shape == (360, 640, 3)
    result = bench.interpolation_case(truth, 60, shot_id)
    assert result.frames == 29  # odd frames 1..57; frame 59 has no right neighbour
    assert result.ours_db >= 30.0
    assert result.margin_db >= 3.0 and result.ok


def test_upscale_beats_bicubic_on_every_shot_of_an_example(bench):
    plan = bench.plan_at(bench.EXAMPLES / "office.json", 24, "640x360")
    frames = [f for _, shot in bench.render_frames(plan, 1) for f in shot]
    assert len(frames) == len(plan.shots) == 4
    result = bench.upscale_case(frames, "office")
    assert result.ours_psnr > result.bicubic_psnr and result.ours_ssim > result.bicubic_ssim
    assert result.worst_psnr_margin > 0 and result.worst_ssim_margin > 0 and result.ok


def test_sampled_shot_keeps_first_last_and_spread_frames(bench):
    plan = bench.plan_at(bench.INTERP_SCRIPT, 24, "320x180", ("orbit",))
    shot = plan.shots[0]
    cut = bench.sampled_shot(shot, 3)
    assert cut.frames == 3 and len(cut.cameras) == len(cut.character_frames) == 3
    assert cut.cameras[0] == shot.cameras[0] and cut.cameras[-1] == shot.cameras[-1]
    assert cut.cameras[1] in shot.cameras[1:-1] and cut.character_frames[-1] == shot.character_frames[-1]
    assert bench.sampled_shot(shot, shot.frames + 5) is shot


def test_ssim_is_one_for_identical_and_falls_with_damage(bench):
    rng = np.random.default_rng(0)
    image = cv2.GaussianBlur(rng.integers(0, 256, (90, 160, 3), dtype=np.uint8), (0, 0), 2)
    assert bench.ssim(image, image) == pytest.approx(1.0)
    blurred = cv2.GaussianBlur(image, (0, 0), 1.5)
    noisy = np.clip(image + rng.normal(0, 20, image.shape), 0, 255).astype(np.uint8)
    assert 0.5 < bench.ssim(image, blurred) < 0.99 and bench.ssim(image, noisy) < 0.9
    assert bench.ssim(image, noisy) == pytest.approx(bench.ssim(noisy, image))


def test_throughput_rows_measure_every_step(bench):
    plan = bench.plan_at(bench.THROUGHPUT_SCRIPT, 24, "320x180", ("s04",))
    frames = next(bench.render_frames(plan, 4))[1]
    rows = bench.throughput(frames, rounds=1)
    assert [r.step.split()[0] for r in rows] == ["upscale", "interpolate", "deflicker", "colour"]
    assert all(r.ours_fps > 0 and r.baseline_fps > 0 and r.output == "320x180" for r in rows)
    assert "flicker score" in rows[2].note and "white_balanced" in rows[3].note
