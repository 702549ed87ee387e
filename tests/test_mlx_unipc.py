"""UniPC in MLX against diffusers' UniPCMultistepScheduler configured as Wan ships it."""

from __future__ import annotations

import json

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason='MLX not installed: pip install "mlx[cpu]" (Linux) or "daotai[mlx]"')
torch = pytest.importorskip("torch", reason="parity tests compare against torch: pip install 'daotai[neural]'")
diffusers = pytest.importorskip("diffusers", reason="parity tests need diffusers: pip install 'daotai[neural]'")

from daotai.errors import BackendError  # noqa: E402
from daotai.mlx.scheduler import EulerSampler, sampler_from_config, sampler_from_folder  # noqa: E402
from daotai.mlx.unipc import UniPCConfig, UniPCSampler, unipc_orders  # noqa: E402

# What Wan2.1's diffusers folders carry (480p: flow_shift 3; the 720p setting is 5).
WAN_UNIPC = dict(prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=3.0)


def reference(steps: int, **overrides):
    """diffusers' scheduler, set up the way WanPipeline sets it up."""
    sched = diffusers.UniPCMultistepScheduler(**{**WAN_UNIPC, **overrides})
    sched.set_timesteps(steps)
    sched.set_begin_index(0)
    return sched


def ours_for(ref) -> UniPCSampler:
    """Our sampler built from the reference's saved config, as the backend reads a folder."""
    cfg = UniPCConfig.from_dict(json.loads(ref.to_json_string()))
    return UniPCSampler.build(len(ref.timesteps), cfg, ref.config.flow_shift)


def velocity(x: np.ndarray, t: float, w: np.ndarray) -> np.ndarray:
    """A fixed, nonlinear stand-in for the transformer: a deterministic function of sample and t."""
    mixed = np.einsum("oc,bcthw->bothw", w, x)
    return (np.tanh(mixed) * (t / 1000.0) + 0.1 * x - 0.05 * np.roll(x, 1, axis=-1)).astype(np.float32)


def run_both(ref, ours, skip_last: bool = False) -> list[float]:
    """Step both samplers on the same model outputs; relative L2 after every step."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((1, 4, 3, 5, 6)).astype(np.float32)
    w = (rng.standard_normal((4, 4)) * 0.3).astype(np.float32)
    xr, xm, state, errs = torch.from_numpy(x0), mx.array(x0), None, []
    n = len(ref.timesteps) - (1 if skip_last else 0)
    for i in range(n):
        t = ref.timesteps[i]
        vr = velocity(xr.numpy(), float(t), w)
        vm = velocity(np.array(xm), float(ours.schedule.timesteps[i]), w)
        xr = ref.step(torch.from_numpy(vr), t, xr).prev_sample
        xm, state = ours.step(i, xm, mx.array(vm), state)
        a, b = np.array(xm, np.float64), xr.numpy().astype(np.float64)
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), f"step {i} not finite"
        errs.append(float(np.linalg.norm(a - b) / np.linalg.norm(b)))
    return errs


@pytest.mark.parametrize("steps,shift", [(1, 3.0), (2, 3.0), (10, 3.0), (30, 5.0), (50, 3.0), (50, 5.0)])
def test_schedule_is_diffusers_schedule(steps, shift):
    ref = reference(steps, flow_shift=shift)
    ours = ours_for(ref)
    # the model sees diffusers' int64 timesteps (truncated, e.g. 999 for sigma 0.999999)
    np.testing.assert_array_equal(ours.schedule.timesteps, ref.timesteps.numpy().astype(np.float32))
    np.testing.assert_array_equal(ours.schedule.sigmas, ref.sigmas.numpy())


@pytest.mark.parametrize("overrides", [
    {},  # Wan2.1 480p
    {"flow_shift": 5.0},  # Wan2.1 720p
    {"solver_order": 1},
    {"solver_order": 3},
    {"disable_corrector": [0, 3]},
    {"final_sigmas_type": "sigma_min"},
], ids=["wan480", "wan720", "order1", "order3", "no-corrector-0-3", "sigma-min"])
def test_every_step_matches_diffusers(overrides):
    """10 steps on the same model outputs: within 1e-5 relative L2 after each (measured <= 2e-7)."""
    ref = reference(10, **overrides)
    errs = run_both(ref, ours_for(ref))
    assert len(errs) == 10
    assert max(errs) < 1e-5, errs


def test_bh1_matches_until_diffusers_last_step():
    """bh1 agrees step by step; at the final sigma 0 diffusers computes (-inf) * 0 = nan where
    the limit is the data prediction, which is what wan-mlx returns."""
    ref = reference(10, solver_type="bh1")
    ours = ours_for(ref)
    assert max(run_both(ref, ours, skip_last=True)) < 1e-5
    x = mx.ones((1, 2, 1, 2, 2))
    state = None
    for i in range(10):
        x, state = ours.step(i, x, 0.5 * x, state)
    assert np.all(np.isfinite(np.array(x)))


def test_tiny_transformer_as_the_model():
    """The same check with the real (tiny, random) Wan transformer producing the velocities."""
    from daotai.mlx.transformer import WanTransformer, WanTransformerConfig
    from daotai.mlx.weights import load_into, map_transformer_name

    torch.manual_seed(0)
    cfg = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
               text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
               qk_norm="rms_norm_across_heads", rope_max_seq_len=32)
    tr = diffusers.WanTransformer3DModel(**cfg).eval()
    model = WanTransformer(WanTransformerConfig.from_dict(cfg))
    pairs = [map_transformer_name(k, mx.array(v.numpy())) for k, v in tr.state_dict().items()]
    load_into(model, [p for p in pairs if p is not None], "tiny transformer")
    g = torch.Generator().manual_seed(2)
    x0, ctx = torch.randn(1, 16, 2, 4, 4, generator=g), torch.randn(1, 5, 32, generator=g)
    ref = reference(10)
    ours = ours_for(ref)
    xr, xm, state = x0.clone(), mx.array(x0.numpy()), None
    for i, t in enumerate(ref.timesteps):
        with torch.no_grad():
            vr = tr(xr, t.expand(1), ctx).sample
        vm = model(xm, mx.array([float(ours.schedule.timesteps[i])]), mx.array(ctx.numpy()))
        xr = ref.step(vr, t, xr).prev_sample
        xm, state = ours.step(i, xm, vm, state)
        err = np.linalg.norm(np.array(xm) - xr.numpy()) / np.linalg.norm(xr.numpy())
        assert err < 1e-5, (i, err)


def test_orders_warm_up_and_lower_at_the_end():
    cfg = UniPCConfig()
    assert unipc_orders(5, cfg) == [1, 2, 2, 2, 1]
    assert unipc_orders(1, cfg) == [1]
    assert unipc_orders(6, UniPCConfig(solver_order=3)) == [1, 2, 3, 3, 2, 1]


@pytest.mark.parametrize("key,value,match", [
    ("prediction_type", "epsilon", r"prediction_type='epsilon' must be 'flow_prediction'"),
    ("use_flow_sigmas", False, r"use_flow_sigmas=False must be True"),
    ("use_karras_sigmas", True, r"use_karras_sigmas=True is not supported"),
    ("solver_type", "bh3", r"solver_type='bh3' must be 'bh1' or 'bh2'"),
    ("solver_order", 4, r"solver_order=4 must be 1, 2 or 3"),
    ("lower_order_final", False, r"lower_order_final=False .* diverges"),
    ("use_dynamic_shifting", True, r"use_dynamic_shifting=True is not supported"),
])
def test_unsupported_settings_are_refused_with_key_and_rule(key, value, match):
    cfg = {"_class_name": "UniPCMultistepScheduler", **WAN_UNIPC, key: value}
    with pytest.raises(BackendError, match=match):
        sampler_from_config(cfg, "scheduler/scheduler_config.json")


def test_sampler_is_chosen_from_the_folder(tmp_path):
    unipc_dir, euler_dir, other_dir = tmp_path / "unipc", tmp_path / "euler", tmp_path / "ddim"
    diffusers.UniPCMultistepScheduler(**WAN_UNIPC).save_config(unipc_dir)
    diffusers.FlowMatchEulerDiscreteScheduler(shift=3.0).save_config(euler_dir)
    diffusers.DDIMScheduler().save_config(other_dir)
    spec = sampler_from_folder(unipc_dir)
    assert spec.kind == "unipc" and spec.unipc == UniPCConfig(flow_shift=3.0)
    assert "UniPC (order 2, bh2" in spec.describe() and "UniPCMultistepScheduler" in spec.describe()
    assert isinstance(spec.build(4, 3.0), UniPCSampler)
    euler = sampler_from_folder(euler_dir)
    assert euler.kind == "euler" and isinstance(euler.build(4, 3.0), EulerSampler)
    assert "Euler" in euler.describe()
    assert sampler_from_folder(tmp_path / "missing").kind == "euler"
    with pytest.raises(BackendError, match=r"_class_name='DDIMScheduler' is not a sampler wan-mlx has"):
        sampler_from_folder(other_dir)
