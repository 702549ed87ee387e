"""Speed modes: parsing, which levers each device gets, the fixed step cache, and a tiny Wan on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from daotai.errors import BackendError, OptionError
from daotai.render.speed import (
    IntervalCacheState,
    SpeedConfig,
    check_config,
    computed_steps,
    guidance_steps,
    levers_for,
    parse_speed,
)

ROOT = Path(__file__).resolve().parents[1]


def test_speed_option_parses_and_defaults_to_exact():
    assert parse_speed(None) == "exact"
    assert parse_speed(" FAST ") == "fast"
    assert parse_speed("off") == "off"
    with pytest.raises(OptionError, match="speed: 'turbo' must be one of off, exact, fast"):
        parse_speed("turbo")


@pytest.mark.parametrize("kind", ["cpu", "mps"])
def test_kernel_levers_are_cuda_only(kind):
    exact = levers_for("exact", kind)
    assert (exact.sdpa, exact.attention, exact.compile_blocks, exact.vae_bf16, exact.vae_channels_last,
            exact.cache) == (None, None, False, False, False, None)
    assert exact.describe() == "speed exact: no levers"
    fast = levers_for("fast", kind)
    # The step cache is plain Python around the forward, so it is the one lever every device gets.
    assert (fast.sdpa, fast.compile_blocks, fast.vae_bf16, fast.cache) == (None, False, False, "interval")


def test_cuda_gets_exact_levers_and_fast_adds_approximations():
    exact = levers_for(None, "cuda")
    assert (exact.mode, exact.sdpa, exact.attention, exact.compile_blocks, exact.vae_bf16, exact.cache) == (
        "exact", "cudnn", "auto", True, False, None)
    fast = levers_for("fast", "cuda")
    assert (fast.sdpa, fast.compile_blocks, fast.vae_bf16, fast.vae_channels_last, fast.cache) == (
        "cudnn", True, True, True, "interval")
    assert levers_for("off", "cuda") == SpeedConfig(mode="off")
    # Wan's fast cadence is its own (measured on Wan); any other family keeps the general one
    assert (fast.cache_interval, fast.guidance_interval) == (3, 1)
    wan = levers_for("fast", "cuda", "wan")
    assert (wan.cache_interval, wan.guidance_interval) == (4, 2) and "guidance every 2" in wan.describe()
    # LTX-Video's decoder is slower in bfloat16 channels-last: its fast mode keeps the float32 decode
    ltx = levers_for("fast", "cuda", "ltx")
    assert (ltx.vae_bf16, ltx.vae_channels_last) == (False, False) and "vae=" not in ltx.describe()
    assert replace(ltx, vae_bf16=True, vae_channels_last=True) == fast
    assert "compile=blocks" in exact.describe() and "cache=interval" in fast.describe()


def test_attention_auto_resolves_to_nothing_without_a_hopper_gpu():
    pytest.importorskip("torch")
    import torch

    from daotai.render.speed import resolve_attention

    resolved = resolve_attention(levers_for("exact", "cuda"))
    if not torch.cuda.is_available():
        assert resolved.attention is None
    assert resolved.attention in (None, "_flash_3", "fa4")


def test_hand_made_configs_are_checked():
    with pytest.raises(BackendError, match="sdpa: 'tensorrt'"):
        check_config(SpeedConfig(mode="exact", sdpa="tensorrt"))
    with pytest.raises(BackendError, match="cache_interval: 0"):
        check_config(SpeedConfig(mode="fast", cache="interval", cache_interval=0))


def test_fixed_schedule_keeps_warmup_and_tail_and_skips_every_other_step():
    config = SpeedConfig(mode="fast", cache="interval")
    schedule = computed_steps(50, config)
    assert schedule[:10] == [True] * 10  # the first 20% set the composition
    assert schedule[-1] is True
    assert schedule[10:14] == [True, False, True, False]
    assert sum(schedule) == 31
    assert computed_steps(8, SpeedConfig(mode="exact")) == [True] * 8


def test_cache_state_counts_steps_per_guidance_branch_and_restarts_on_a_new_video():
    state = IntervalCacheState([True, False, True])
    decisions = []
    for t in (900.0, 900.0, 600.0, 600.0, 300.0, 300.0):  # cond then uncond at each of 3 steps
        state.advance(t)
        decisions.append((state.step, state.branch, state.should_compute()))
        if decisions[-1][2]:
            state.outputs[state.branch] = t
    assert decisions == [(0, 0, True), (0, 1, True), (1, 0, False), (1, 1, False), (2, 0, True), (2, 1, True)]
    state.advance(950.0)  # timesteps jump back up: the next video
    assert (state.step, state.branch, state.outputs) == (0, 0, {})


def test_render_rejects_an_unknown_speed_without_a_traceback(tmp_path):
    env = dict(os.environ, COLUMNS="120")
    result = subprocess.run([sys.executable, "-m", "daotai.cli", "render", "examples/minimal.json",
                             "-o", str(tmp_path / "out"), "--backend", "wan", "--speed", "ludicrous"],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    assert "speed: 'ludicrous' must be one of off, exact, fast" in result.stderr


def test_run_wide_speed_reaches_backends_that_have_it_and_explicit_options_are_checked():
    from daotai.errors import OptionError
    from daotai.run.settings import PipelineSettings, resolved_options

    assert resolved_options(PipelineSettings(backend="wan", option_defaults={"speed": "fast"})).speed == "fast"
    assert resolved_options(PipelineSettings(backend="wan-vace", options={"speed": "fast"})).speed == "fast"
    assert resolved_options(PipelineSettings(backend="wan")).speed is None
    # a run-wide default (the server's --speed) does not reach a backend without the field ...
    assert resolved_options(PipelineSettings(backend="previz", option_defaults={"speed": "fast"})).model_dump() == {
        "supersample": 1, "labels": True, "soften_px": 0.6}
    # ... but asking previz for it directly is an error naming previz's options
    with pytest.raises(OptionError, match="options.speed: 'fast' is not an option of the previz backend; "
                                          "valid options: labels, soften_px, supersample"):
        resolved_options(PipelineSettings(backend="previz", options={"speed": "fast"}))


def test_vace_honours_speed():
    """wan-vace used to drop --speed on the floor (its constructor swallowed it)."""
    from daotai.render.registry import create_backend

    assert create_backend("wan-vace", {"speed": "fast"}).runner.speed == "fast"
    assert create_backend("wan-vace", {"speed": "off"}).runner.speed == "off"


# ------------------------------------------------------------------ tiny Wan on the CPU


torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def plan():
    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    return plan_script(validate_script({
        "title": "speed", "fps": 16, "size": [64, 64], "seed": 3,
        "characters": [{"id": "ana", "appearance": "blue shirt"}],
        "shots": [{"shot_id": "s01", "duration": 1.0, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}}],
    }))


def render(folder: Path, plan, speed: str | None, **levers):
    """(frames (F, 64, 64, 3) uint8, notices, backend) of the plan's shot; ``levers`` replace the mode's."""
    from daotai.events import Frame, Notice
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.speed import apply_levers
    from daotai.render.wan import WanBackend

    backend = WanBackend(model=str(folder), device="cpu", steps=6, speed=speed)
    shot = plan.shots[0]
    if levers:
        list(backend.runner.ensure_loaded(plan, shot))
        config = SpeedConfig(mode="fast", **levers)
        apply_levers(backend.runner.pipe, config, 6)
        backend.runner.speed_config = config
    events = list(backend.render(RenderJob(plan, shot, controls=False), RunContext()))
    frames = np.stack([e.rgb for e in events if isinstance(e, Frame)])
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert frames.shape == (shot.frames, 64, 64, 3) and frames.dtype == np.uint8
    return frames, notices, backend


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def exact_frames(tiny_wan, plan):
    frames, notices, backend = render(tiny_wan, plan, "exact")
    pipe = backend.runner.pipe
    # Exact mode on the CPU changes nothing: no compiled blocks, no hooks, float32 VAE.
    assert all(block._compiled_call_impl is None for block in pipe.transformer.blocks)
    assert not hasattr(pipe.transformer, "_daotai_interval_cache")
    assert not getattr(getattr(pipe.transformer, "_diffusers_hook", None), "hooks", {})
    assert pipe.vae.dtype == torch.float32
    assert "speed exact: no levers" in notices
    backend.close()
    return frames


def test_exact_on_cpu_is_bitwise_the_unaccelerated_render(tiny_wan, plan, exact_frames):
    off, notices, backend = render(tiny_wan, plan, "off")
    backend.close()
    assert "speed off: no levers" in notices
    np.testing.assert_array_equal(off, exact_frames)


def test_fast_mode_hook_skips_steps_and_its_deviation_is_measured(tiny_wan, plan, exact_frames):
    fast, notices, backend = render(tiny_wan, plan, "fast")
    transformer = backend.runner.pipe.transformer
    from diffusers.hooks import HookRegistry

    assert "daotai_interval_cache" in HookRegistry.check_if_exists_or_initialize(transformer).hooks
    state = transformer._daotai_interval_cache
    # 6 steps, 2 guidance passes each; Wan's fast cadence (1 step in 4 after the warm-up) computes
    # steps 0 (warm-up), 1 and 5 (the tail) and reuses steps 2 to 4.
    assert (state.computed, state.reused) == (6, 6)
    assert any(n.startswith("speed fast: cache=interval") for n in notices)
    backend.close()
    deviation = psnr(fast, exact_frames)
    assert np.isfinite(deviation), "the cache changed nothing: no step was skipped"
    assert deviation > 15.0  # approximate, but the same picture


def test_guidance_reuse_runs_fewer_unconditional_passes_in_a_real_wan_render(tiny_wan, plan, exact_frames):
    # Every step computed (interval 1); after the one warm-up step, the unconditional pass runs on
    # every other step (1 and 3 of the middle four) and is answered from the conditional one on 2 and 4.
    frames, notices, backend = render(tiny_wan, plan, "off", cache="interval", cache_interval=1,
                                      guidance_interval=2)
    state = backend.runner.pipe.transformer._daotai_interval_cache
    assert (state.computed, state.reused) == (10, 2)
    assert any("guidance every 2" in n for n in notices)
    backend.close()
    deviation = psnr(frames, exact_frames)
    assert np.isfinite(deviation) and deviation > 15.0


def test_first_block_cache_attaches_and_renders(tiny_wan, plan, exact_frames):
    frames, notices, backend = render(tiny_wan, plan, "off", cache="fbc", fbc_threshold=0.05)
    from diffusers.hooks import HookRegistry

    first = backend.runner.pipe.transformer.blocks[0]
    assert "fbc_leader_block_hook" in HookRegistry.check_if_exists_or_initialize(first).hooks
    assert "speed fast: cache=first_block(threshold 0.05)" in notices
    backend.close()
    assert psnr(frames, exact_frames) > 15.0


def test_bf16_vae_decodes_close_to_float32(tiny_wan, plan, exact_frames):
    frames, _, backend = render(tiny_wan, plan, "off", vae_bf16=True)
    assert backend.runner.pipe.vae.dtype == torch.bfloat16
    backend.close()
    assert psnr(frames, exact_frames) > 25.0


@pytest.mark.parametrize("levers", [{"vae_channels_last": True}, {"sdpa": "math"}])
def test_exact_kernel_levers_keep_the_picture_when_forced_on_cpu(tiny_wan, plan, exact_frames, levers):
    # The runtime never selects these off CUDA; forcing them here checks the code paths run and
    # that they are layout/kernel changes only (numerically the same picture).
    frames, _, backend = render(tiny_wan, plan, "off", **levers)
    backend.close()
    assert psnr(frames, exact_frames) > 40.0


def test_interval_hook_reuses_each_branchs_output_with_per_token_timesteps():
    from daotai.render.speed import attach_interval_cache

    class Counting(torch.nn.Module):
        """Returns how many times it has run, so a reused output is recognisable."""

        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, hidden_states, timestep):
            self.calls += 1
            return hidden_states * 0 + self.calls

    model = Counting()
    schedule = computed_steps(6, SpeedConfig(mode="fast", cache="interval"))  # [T, T, F, T, F, T]
    attach_interval_cache(model, schedule)
    x = torch.zeros(1, 2)
    seen = []
    for t in (1000.0, 800.0, 600.0, 400.0, 200.0, 100.0):
        # A conditioned first token sits at timestep 0; the step is identified by the max.
        timestep = torch.tensor([[0.0, t, t]])
        seen.append((float(model(hidden_states=x, timestep=timestep)[0, 0]),
                     float(model(hidden_states=x + 1, timestep=timestep)[0, 0])))
    assert model.calls == 8
    assert seen == [(1, 2), (3, 4), (3, 4), (5, 6), (5, 6), (7, 8)]


def test_interval_hook_extrapolates_skipped_steps_linearly_in_the_timestep():
    from daotai.render.speed import attach_interval_cache

    class Linear(torch.nn.Module):
        """An output linear in the timestep (per guidance branch), returned as diffusers does with
        return_dict=False: extrapolation must then reproduce the skipped outputs exactly."""

        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, hidden_states, timestep, return_dict=False):
            self.calls += 1
            return (hidden_states + 2.0 * timestep / 1000.0, "extra")

    model = Linear()
    schedule = [True, True, False, True, False, False, True]
    state = attach_interval_cache(model, schedule, extrapolate=True)
    x = torch.zeros(1, 2)
    for t in (1000.0, 900.0, 750.0, 600.0, 500.0, 300.0, 100.0):
        timestep = torch.tensor([t])
        for branch_input in (x, x + 1):  # cond, uncond
            out, extra = model(hidden_states=branch_input, timestep=timestep)
            expected = branch_input + 2.0 * t / 1000.0
            assert extra == "extra"
            assert torch.allclose(out, expected, atol=1e-5), (t, out, expected)
    assert model.calls == 8 and (state.computed, state.reused) == (8, 6)
    assert "extrapolated" in SpeedConfig(mode="fast", cache="interval", cache_extrapolate=True).describe()


def test_interval_hook_without_extrapolation_repeats_the_last_output():
    from daotai.render.speed import attach_interval_cache

    model = torch.nn.Identity()
    model.forward = lambda hidden_states, timestep: hidden_states + timestep  # noqa: E731
    attach_interval_cache(model, [True, True, False])
    outs = [float(model(hidden_states=torch.zeros(1), timestep=torch.tensor([t]))[0]) for t in (3.0, 2.0, 1.0)]
    assert outs == [3.0, 2.0, 2.0]


def test_compile_mode_is_checked_and_described():
    tuned = SpeedConfig(mode="exact", compile_blocks=True, compile_mode="max-autotune-no-cudagraphs")
    assert check_config(tuned) is tuned
    assert "compile=blocks(max-autotune-no-cudagraphs)" in tuned.describe()
    with pytest.raises(BackendError, match="compile_mode: 'reduce-overhead'"):
        check_config(SpeedConfig(mode="exact", compile_blocks=True, compile_mode="reduce-overhead"))
    with pytest.raises(BackendError, match="compile_mode: 'turbo'"):
        check_config(SpeedConfig(mode="exact", compile_blocks=True, compile_mode="turbo"))


def test_compiled_blocks_get_a_compile_cache_key_per_attention_choice():
    # Compilation bakes the SDPA kernel into the cached artifact, so the attention choice must be
    # part of the cache key, or a later process with another choice silently reuses the wrong one.
    import torch.compiler.config as compiler_config
    from torch.nn.attention import SDPBackend

    from daotai.render.speed import SpeedConfig, denoise_context

    before = compiler_config.cache_key_tag
    tags = {}
    for name, config in {"cudnn": SpeedConfig(mode="exact", sdpa="cudnn", compile_blocks=True),
                         "flash": SpeedConfig(mode="exact", sdpa="flash", compile_blocks=True),
                         "uncompiled": SpeedConfig(mode="exact", sdpa="cudnn")}.items():
        with denoise_context(config):
            tags[name] = compiler_config.cache_key_tag
            preferred = SDPBackend.FLASH_ATTENTION if name == "flash" else SDPBackend.CUDNN_ATTENTION
            assert torch_priority_first() == int(preferred)
        assert compiler_config.cache_key_tag == before  # restored
    assert "cudnn" in tags["cudnn"] and "flash" in tags["flash"] and tags["cudnn"] != tags["flash"]
    assert tags["uncompiled"] == before  # nothing compiled, nothing to tag


def torch_priority_first():
    """The SDPA backend PyTorch tries first right now."""
    import torch

    return torch._C._get_sdp_priority_order()[0]


def test_guidance_schedule_runs_the_later_passes_every_nth_computed_step_after_the_warm_up():
    config = SpeedConfig(mode="fast", cache="interval", cache_interval=3, guidance_interval=2)
    computed, guided = computed_steps(50, config), guidance_steps(50, config)
    assert sum(computed) == 24  # 10 warm-up, 13 of the middle 39, the last step
    assert all(c for c, g in zip(computed, guided, strict=True) if g)  # never without the first pass
    assert guided[:10] == [True] * 10 and guided[-1]  # warm-up and tail: every pass
    middle = [g for i, (c, g) in enumerate(zip(computed, guided, strict=True)) if c and 10 <= i < 49]
    assert middle == [True, False] * 6 + [True]
    assert sum(computed) + sum(guided) == 24 + 18  # passes of a two-pass (CFG) render: 42 of 100
    assert guidance_steps(50, replace(config, guidance_interval=1)) == computed
    assert "guidance every 2" in config.describe()
    with pytest.raises(BackendError, match="guidance_interval: 0 must be >= 1"):
        check_config(replace(config, guidance_interval=0))
    with pytest.raises(BackendError, match="guidance_interval: 2 needs cache='interval'"):
        check_config(SpeedConfig(mode="fast", guidance_interval=2))


def test_guided_pass_is_the_first_pass_plus_the_last_measured_difference():
    from daotai.render.speed import attach_interval_cache

    class TwoBranches(torch.nn.Module):
        """cond = t/1000 + x, uncond = the same plus a constant gap: a guided pass is then exact."""

        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, hidden_states, timestep, return_dict=False):
            self.calls += 1
            return (hidden_states + timestep / 1000.0,)

    model = TwoBranches()
    schedule = [True, True, False, True, True, True]
    guidance = [True, True, False, False, True, False]
    state = attach_interval_cache(model, schedule, guidance=guidance)
    x = torch.zeros(1, 2)
    outputs = []
    for t in (1000.0, 800.0, 600.0, 400.0, 200.0, 100.0):
        timestep = torch.tensor([t])
        cond = model(hidden_states=x, timestep=timestep)[0]
        uncond = model(hidden_states=x + 5.0, timestep=timestep)[0]
        outputs.append((float(cond[0, 0]), float(uncond[0, 0])))
    # steps 0, 1, 4: both passes run; 3 and 5: cond runs, uncond = cond + 5; 2: both repeat step 1
    assert model.calls == 2 + 2 + 1 + 2 + 1
    expected = [(1.0, 6.0), (0.8, 5.8), (0.8, 5.8), (0.4, 5.4), (0.2, 5.2), (0.1, 5.1)]
    assert np.allclose(outputs, expected, atol=1e-5)
    assert (state.computed, state.reused) == (8, 4)
