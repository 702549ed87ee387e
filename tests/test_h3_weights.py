"""MiniMax-H3's weight options on the CPU: a LoRA fused per partition, int8 block weights, the fast mode.

Uses the tiny random MiniMax-H3 folder (tests/builders.py: ``build_h3``) through the h3 backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("peft")

import builders  # noqa: E402
from daotai.errors import BackendError, OptionError  # noqa: E402
from daotai.events import Frame, Notice  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

STEPS = 3
SCRIPT = {"title": "weights", "fps": 24, "size": [112, 64], "seed": 5, "scene": "office",
          "characters": [{"id": "mara"}], "shots": [{"shot_id": "s1", "duration": 2, "characters": ["mara"]}]}
LORA_TARGETS = ("attn.to_q", "attn.to_v", "ff.net.2")  # a few linears of every transformer block


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.fixture()
def plan(tmp_path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    (tmp_path / "s.json").write_text(json.dumps(SCRIPT))
    return plan_script(load_script(tmp_path / "s.json"))


def render(model: Path, plan, **options) -> tuple[np.ndarray, list[str], object]:
    """(frames (F, H, W, 3) uint8, notice texts, backend) of the plan's only shot."""
    from daotai.render.h3 import H3Backend

    backend = H3Backend(model=str(model), device="cpu", steps=options.pop("steps", STEPS), accept_licence=True,
                        **options)
    try:
        events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
    finally:
        runner = backend.runner
        backend.close()
    frames = np.stack([e.rgb for e in events if isinstance(e, Frame)])
    return frames, [e.text for e in events if isinstance(e, Notice)], runner


def lora_file(path: Path, prefix: str = "transformer", rank: int = 2, seed: int = 0, zero_b: bool = False) -> Path:
    """A diffusers-layout LoRA for the tiny transformer's blocks, saved as safetensors (alpha-less: alpha == rank)."""
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed)
    state = {}
    for block in range(2):
        for target in LORA_TARGETS:
            name = f"{prefix}.transformer_blocks.{block}.{target}"
            out_features = 32
            state[f"{name}.lora_A.weight"] = torch.randn(rank, 32, generator=generator) * 0.5
            b = torch.zeros(out_features, rank) if zero_b else torch.randn(out_features, rank, generator=generator) * 0.5
            state[f"{name}.lora_B.weight"] = b
    save_file(state, str(path))
    return path


# ------------------------------------------------------------------ int8 rows


def test_int8_rows_round_each_weight_within_half_a_step():
    from daotai.render.int8 import quantize_rows_int8

    weight = torch.randn(64, 48, generator=torch.Generator().manual_seed(1)) * torch.linspace(0.01, 3, 64)[:, None]
    quantized, scale = quantize_rows_int8(weight)
    assert quantized.dtype == torch.int8 and scale.shape == (64,)
    error = (quantized.float() * scale[:, None] - weight).abs()
    assert bool((error <= scale[:, None] / 2 + 1e-7).all())  # one rounding: at most half a step per row
    assert int(quantized.abs().max()) == 127  # every row uses its full range


def test_int8_linear_matches_the_float_layer_and_halves_its_bytes():
    from daotai.render.int8 import int8_linear

    linear = torch.nn.Linear(256, 128).to(torch.bfloat16)
    quantized = int8_linear(linear)
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    reference, got = linear(x).float(), quantized(x).float()
    assert (got - reference).norm() / reference.norm() < 0.02
    stored = quantized.weight_int8.numel() * 1 + quantized.weight_scale.numel() * 4
    assert stored < 0.6 * linear.weight.numel() * 2


def test_int8_weights_render_and_plan_memory_for_half_the_transformer(tiny_h3, plan):
    frames, notices, runner = render(tiny_h3, plan, weights="int8")
    assert frames.shape[0] == plan.shots[0].frames
    assert any("block linears as int8 rows" in n for n in notices)
    exact, _, _ = render(tiny_h3, plan)
    assert not np.array_equal(frames, exact)  # the weights were rounded: not the bf16 picture exactly

    from daotai.plan.timing import snap_frames
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest

    class Runtime:
        kind, device, memory_bytes = "cuda", "cuda", 79 * 1024**3

    request = NativeRequest(1344, 768, snap_frames(120, 17, 5), 24.0, "", "", 0)
    tiers = {}
    for weights in (None, "int8"):
        runner = H3Runner(H3Options(weights=weights), "minimax-h3")
        runner.runtime, runner.planned_workflows = Runtime(), {"t2va"}
        tiers[weights] = (runner._tier_for(request), runner.release_conditioner)
    assert tiers == {None: ("model", False), "int8": ("none", True)}  # an 80 GB card holds the int8 partition


# ------------------------------------------------------------------ LoRA


def test_a_lora_is_fused_into_the_weights_at_its_scale(tiny_h3, tmp_path):
    from daotai.render.neural.lora import fuse_lora, h3_lora_state, resolve_lora

    path = lora_file(tmp_path / "style.safetensors")
    lora = resolve_lora(str(path))
    transformer = builders.h3_transformer(1)
    before = {n: m.weight.detach().clone() for n, m in transformer.named_modules() if isinstance(m, torch.nn.Linear)}
    state, prefix = h3_lora_state(lora, "transformer")
    changed = fuse_lora(transformer, state, prefix, scale=0.5)
    assert changed == 2 * len(LORA_TARGETS)
    from safetensors.torch import load_file

    raw = load_file(str(path))
    for name, module in transformer.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        assert type(module) is torch.nn.Linear  # the adapter layers are gone
        key = f"transformer.{name}"
        if f"{key}.lora_A.weight" in raw:
            delta = 0.5 * raw[f"{key}.lora_B.weight"] @ raw[f"{key}.lora_A.weight"]
            torch.testing.assert_close(module.weight.detach(), before[name] + delta, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(module.weight.detach(), before[name])


def test_a_zero_lora_leaves_the_render_unchanged_and_a_real_one_changes_it(tiny_h3, plan, tmp_path):
    plain, _, _ = render(tiny_h3, plan)
    zero, notices, _ = render(tiny_h3, plan, lora=str(lora_file(tmp_path / "zero.safetensors", zero_b=True)))
    assert np.array_equal(plain, zero)
    assert any("LoRA zero.safetensors" in n and "fused into transformer at scale 1" in n for n in notices)
    styled, _, _ = render(tiny_h3, plan, lora=str(lora_file(tmp_path / "style.safetensors")))
    assert not np.array_equal(plain, styled)
    # A LoRA for the reference partition only does not touch a t2va shot.
    ref_only, notices, _ = render(tiny_h3, plan, lora=str(lora_file(tmp_path / "ref.safetensors")),
                                  lora_partition="transformer_ref")
    assert np.array_equal(plain, ref_only)
    assert not any("LoRA" in n for n in notices)


def test_lora_files_are_checked_before_loading(tmp_path):
    from daotai.render.neural.lora import h3_lora_state, resolve_lora

    (tmp_path / "weights.bin").write_bytes(b"\0" * 16)
    with pytest.raises(OptionError, match="pickled weights are never loaded"):
        resolve_lora(str(tmp_path / "weights.bin"))
    with pytest.raises(OptionError, match="existing .safetensors file"):
        resolve_lora(str(tmp_path / "missing.safetensors"))
    ref = resolve_lora(str(lora_file(tmp_path / "ref.safetensors", prefix="transformer_ref")))
    with pytest.raises(BackendError, match="holds layers for transformer_ref, none for transformer"):
        h3_lora_state(ref, "transformer")


# ------------------------------------------------------------------ the fast mode


def test_fast_mode_skips_steps_on_a_schedule_and_says_so(tiny_h3, plan):
    frames, notices, runner = render(tiny_h3, plan, speed="fast", steps=11)
    assert frames.shape[0] == plan.shots[0].frames
    assert any(n.startswith("speed fast:") and "cache=interval" in n for n in notices)
    exact, notices_exact, _ = render(tiny_h3, plan, steps=11)
    assert any(n.startswith("speed exact:") for n in notices_exact)
    assert not np.array_equal(frames, exact)


def test_fast_mode_levers_for_h3_leave_out_wan_rewrites():
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner

    class Runtime:
        kind, device, memory_bytes = "cpu", "cpu", 8 * 1024**3

    runner = H3Runner(H3Options(speed="fast"), "minimax-h3")
    runner.runtime, runner.tier = Runtime(), "none"
    runner.prepare()
    runner._speed_up([])
    config = runner.speed_config
    assert config.cache == "interval" and not (config.lean_attention or config.gelu_epilogue or config.vae_bf16)


def test_modulation_projections_keep_their_dtype_and_the_module_reports_its_compute_dtype():
    from diffusers.models.modeling_utils import get_parameter_dtype

    from daotai.render.int8 import quantize_repeated_blocks_int8

    transformer = builders.h3_transformer(1).to(torch.bfloat16)
    replaced = quantize_repeated_blocks_int8(transformer)
    block = transformer.transformer_blocks[0]
    assert type(block.adaln_proj.linear) is torch.nn.Linear  # AdaLN modulation is never rounded
    assert type(block.attn.to_q).__name__ == "Int8Linear" and replaced > 0
    assert get_parameter_dtype(block.attn.to_q) == torch.bfloat16  # what diffusers casts inputs to


def test_h3_decodes_in_the_dtype_its_vae_ships_for_on_cuda():
    from daotai.runtime.device import Runtime, vae_dtype_for

    cuda = Runtime("cuda", "cuda", "bfloat16", "bfloat16", "float32", 0)
    assert vae_dtype_for(cuda, "h3") == torch.bfloat16  # the device rule (float32) was 7.7x slower to decode
    assert vae_dtype_for(cuda, "wan") == torch.float32


def test_the_attention_kernel_choice_is_scoped_to_the_transformer_forward(monkeypatch):
    import contextlib
    import inspect

    from daotai.render import speed

    entered: list[str] = []

    @contextlib.contextmanager
    def recording(config):
        entered.append(config.sdpa)
        yield

    monkeypatch.setattr(speed, "denoise_context", recording)
    transformer = builders.h3_transformer(1)
    parameters = list(inspect.signature(transformer.forward).parameters)
    speed.scope_to_forward(transformer, speed.SpeedConfig(mode="exact", sdpa="cudnn"))
    assert list(inspect.signature(transformer.forward).parameters) == parameters  # modular blocks read these
    vae_like = torch.nn.Linear(4, 4)
    vae_like(torch.zeros(1, 4))  # anything else in the pipeline call runs outside the choice
    assert entered == []
    with pytest.raises(TypeError):  # the wrapped forward is the real one (it still checks its arguments)
        transformer.forward()
    assert entered == ["cudnn"]
    unchanged = builders.h3_transformer(1)
    original = unchanged.forward
    speed.scope_to_forward(unchanged, speed.SpeedConfig(mode="off"))
    assert unchanged.forward == original  # nothing to scope: left as it was
