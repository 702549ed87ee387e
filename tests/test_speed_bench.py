"""``bench/neural.py --tiny`` in both modes: it runs on the CPU, prints its table and sane JSON."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str) -> tuple[str, dict]:
    """Run the bench script; (stdout, its final JSON line)."""
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "neural.py"), "--tiny", *args],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_exact_mode_matches_stock_on_cpu():
    out, report = bench("--mode", "exact")
    assert "x stock" in out and "end-to-end shares" in out
    rows = report["rows"]
    assert set(rows) == {"stock", "strong", "exact"}  # kernel-lever ablations are CUDA-only
    # The strong baseline: no diffusers attention backend beyond native runs on the CPU; each one tried is named.
    strong = rows["strong"]
    assert strong["levers"].startswith("stock + set_attention_backend('native')")
    assert all(name in strong["levers"] for name in ("_native_cudnn", "flash", "_flash_3", "sage"))
    assert strong["rel_l2"] < 1e-5 and strong["ratio_step_strong"] == pytest.approx(1.0)
    assert rows["exact"]["ratio_step_strong"] > 0 and "x strong" in out
    assert report["targets"] == ["exact vs strong stock >= 1.15x: "
                                 f"{rows['exact']['ratio_step_strong']:.2f}x "
                                 f"{'met' if rows['exact']['ratio_step_strong'] >= 1.15 else 'MISSED'}",
                                 "fast vs plain stock >= 4x: not measured", "fast vs strong stock >= 3.4x: not measured",
                                 "fast PSNR vs exact >= 40 dB: not measured",
                                 "peak memory of strong <= stock's: not measured (no GPU)",
                                 "peak memory of exact <= stock's: not measured (no GPU)"]
    exact = rows["exact"]
    assert exact["levers"] == "speed exact: no levers"
    # Same weights, seed and arithmetic: the transformer output and the frames match stock's.
    assert exact["rel_l2"] < 1e-5 and report["ok_exact_rel_l2"]
    assert exact["psnr_vs_stock"] is None or exact["psnr_vs_stock"] > 60
    for row in rows.values():
        parts = row["text_s"] + row["denoise_s"] + row["decode_s"] + row["post_s"]
        assert math.isclose(parts, row["e2e_s"], rel_tol=1e-6) and row["denoise_s"] > 0


@pytest.mark.slow
def test_fast_mode_reports_its_skips_and_deviation():
    out, report = bench("--mode", "fast")
    rows = report["rows"]
    assert {"stock", "exact", "fast", "vae-bf16", "cache-interval", "cache-fbc"} <= set(rows)
    fast = rows["fast"]
    assert fast["computed"] == "6/12"  # 6 steps x 2 guidance passes; Wan's fast cadence reuses 3 steps
    assert fast["rel_l2"] is None
    assert fast["psnr_vs_exact"] is not None and 10 < fast["psnr_vs_exact"] < 80
    assert 0 < fast["ssim_vs_exact"] < 1
    # Wan's cadence, counted in passes: every pass of the first tenth of the steps, then 1 step in 4 with
    # the guidance pass on every other of those (29 of 100 passes at 50 steps, as CUDA runs count them)
    assert report["fast_projected_50_step_fraction"] == pytest.approx(29 / 100)
    assert "projected 50-step denoise ratio" in out


def test_profile_runs_and_says_when_there_are_no_gpu_kernels():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "neural.py"), "--tiny", "--profile", "off,fast"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("profile of 2 steps")]
    assert len(lines) == 2 and "speed fast" in lines[1]
    assert all("no GPU kernels recorded" in line for line in lines)


def test_kernel_families_from_names():
    sys.path.insert(0, str(ROOT / "bench"))
    from neural import kernel_kind

    assert kernel_kind("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90") == "attention"
    assert kernel_kind("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16") == "attention"
    assert kernel_kind("nvjet_sm90_tst_256x152_64x4_1x2_h_bz_coopA_bias_TNT") == "matmul"
    assert kernel_kind("triton_poi_fused_gelu_view_6") == "fused (inductor)"
    assert kernel_kind("triton_red_fused__fused_rms_norm__scaled_dot_product_flash_attention_permute_view_3") == \
        "fused (inductor)"
    assert kernel_kind("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl") == \
        "elementwise / reduce (eager)"
    assert kernel_kind("Memset (Device)") == "copy / convert"
    assert kernel_kind("something_else") == "other"


def _bench_module(name: str):
    """A bench script imported by its path (bench/ is no package; ``h3`` is also a PyPI name)."""
    import importlib.util

    sys.path.insert(0, str(ROOT / "bench"))  # the scripts import their sibling baselines.py
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def test_strong_stock_on_cpu_keeps_native_attention_and_names_each_backend_it_skipped():
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    import builders

    baselines = _bench_module("baselines")
    transformer = builders.h3_transformer(0)
    strong = baselines.make_strong(transformer, (16, 2, 16), "cpu", torch.float32)
    assert strong.backend == "native" and not strong.compiled
    assert [t.split(":")[0] for t in strong.tried] == list(baselines.ATTENTION_BACKENDS)
    assert all("skipped (" in t for t in strong.tried)
    assert baselines.Target("exact vs stock", 1.3).verdict(1.2) == "exact vs stock >= 1.3x: 1.20x MISSED"
    assert baselines.Target("clip", 45.0, " s", at_most=True).verdict(41.0) == "clip <= 45 s: 41.00 s met"
    assert baselines.Target("fast", 4.0).verdict(float("nan")) == "fast >= 4x: not measured"


def test_the_h3_benchs_turbo_lora_fits_the_partition_it_is_measured_with(tmp_path):
    from daotai.render.neural.lora import check_lora_shapes, h3_lora_state
    from daotai.render.neural.turbo import resolve_turbo

    h3_bench = _bench_module("h3")
    turbo = resolve_turbo(str(h3_bench.turbo_lora(tmp_path / "turbo.safetensors", tiny=True, rank=4)))
    assert (turbo.sampling.forwards, turbo.sampling.shift, turbo.sampling.alpha) == (h3_bench.TURBO_FORWARDS, 12.0, 1.0)
    state, prefix = h3_lora_state(turbo.lora, "transformer")
    check_lora_shapes(h3_bench.partition(True, "cpu"), state, prefix, "turbo.safetensors")  # every block linear fits
    assert len(state) == 2 * sum(1 for name, m in h3_bench.partition(True, "cpu").named_modules()
                                 if name.startswith("transformer_blocks.") and type(m).__name__ == "Linear")


def test_the_mp4_share_projected_for_a_natural_picture_swaps_only_the_encode(tmp_path):
    """The projection beside the LTX frames-to-MP4 target: the measured encode of random-weight noise is
    replaced by a natural picture's, and nothing else in the row moves."""
    sys.path.insert(0, str(ROOT / "bench"))
    neural = _bench_module("neural")
    row = neural.Measure("fast", 20, text_s=0.01, denoise_s=1.25, decode_s=0.20, post_s=0.98, encode_s=0.86,
                         total_s=2.44)
    assert neural.natural_share(row, 0.86) == pytest.approx(100 * 0.98 / 2.44)
    assert neural.natural_share(row, 0.30) == pytest.approx(100 * (0.98 - 0.86 + 0.30) / (2.44 - 0.86 + 0.30))
    stock = neural.Measure("stock", 20, text_s=0.01, denoise_s=3.52, decode_s=0.18, post_s=2.60, encode_s=1.14,
                           total_s=6.31)
    projected = [line for line in neural.target_verdicts([stock, row], stock, None, "ltx", natural_s=0.41)
                 if line.startswith("(projection")]
    ratio = (6.31 - 1.14 + 0.41) / (2.44 - 0.86 + 0.41)  # both encodes swapped, nothing else
    share = 100 * (0.98 - 0.86 + 0.41) / (2.44 - 0.86 + 0.41)
    assert [f"{ratio:.2f}x met" in projected[0], f"{share:.2f}% MISSED" in projected[1]] == [True, True], projected
    pytest.importorskip("av")
    seconds = neural.natural_encode_s((12, 64, 96), 24.0, tmp_path, repeats=1)
    assert seconds is not None and seconds > 0 and (tmp_path / "natural-0.mp4").stat().st_size > 0
