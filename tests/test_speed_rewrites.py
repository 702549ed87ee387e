"""Exact rewrites of diffusers modules (daotai.render.rewrites): same outputs, other kernels."""

from __future__ import annotations

import pytest

from builders import wan_transformer
from daotai.errors import BackendError
from daotai.render.speed import SpeedConfig, cache_only, check_config, levers_for

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

IMAGE_CROSS_ATTENTION = {"image_dim": 24, "added_kv_proj_dim": 24}  # Wan image-to-video's extra attention


def wan_inputs(image: bool = False) -> dict:
    generator = torch.Generator().manual_seed(1)
    inputs = {"hidden_states": torch.randn(1, 16, 3, 8, 8, generator=generator),
              "timestep": torch.tensor([500.0]),
              "encoder_hidden_states": torch.randn(1, 7, 32, generator=generator), "return_dict": False}
    if image:
        inputs["encoder_hidden_states_image"] = torch.randn(1, 5, 24, generator=generator)
    return inputs


def forward(model, inputs):
    with torch.no_grad():
        return model(**inputs)[0]


def test_interleaved_rotary_form_matches_diffusers_bit_for_bit():
    # diffusers' form: two strided slice assignments into an empty tensor of x's dtype
    def reference(x, cos, sin):
        x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
        out = torch.empty_like(x)
        out[..., 0::2] = x1 * cos[..., 0::2] - x2 * sin[..., 1::2]
        out[..., 1::2] = x1 * sin[..., 1::2] + x2 * cos[..., 0::2]
        return out

    from daotai.render.rewrites import rotate_pairs

    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 10, 3, 8, generator=generator).to(dtype)  # (B, L, H, D)
        angles = torch.randn(1, 10, 1, 4, generator=generator).repeat_interleave(2, dim=-1)  # (1, L, 1, D)
        cos, sin = angles.cos(), angles.sin()
        assert torch.equal(rotate_pairs(x, cos, sin), reference(x, cos, sin))
        assert rotate_pairs(x, cos, sin).dtype == dtype


def test_lean_wan_processor_gives_the_same_output_as_diffusers():
    from daotai.render.rewrites import lean_wan_attention

    model = wan_transformer()
    inputs = wan_inputs()
    before = forward(model, inputs)
    assert lean_wan_attention(model, cross_kernel="cudnn") == 4  # 2 blocks x (self, cross)
    processors = {type(m.processor).__name__ for m in model.modules() if hasattr(m, "processor")}
    assert processors == {"LeanWanAttnProcessor"}
    # On the CPU the cuDNN cross kernel is not taken; everything else runs the rewritten path.
    assert torch.equal(forward(model, inputs), before)


def test_lean_wan_processor_with_fused_projections_and_image_attention():
    from daotai.render.rewrites import lean_wan_attention
    from daotai.render.speed import fuse_attention_projections

    model = wan_transformer(**IMAGE_CROSS_ATTENTION)
    inputs = wan_inputs(image=True)
    before = forward(model, inputs)
    lean_wan_attention(model)  # image cross-attention keeps diffusers' own path inside the processor
    assert torch.equal(forward(model, inputs), before)
    fuse_attention_projections(model)
    torch.testing.assert_close(forward(model, inputs), before, rtol=1e-5, atol=1e-5)


def test_lean_wan_processor_keeps_a_chosen_attention_backend():
    from daotai.render.rewrites import lean_wan_attention

    model = wan_transformer()
    model.set_attention_backend("native")
    lean_wan_attention(model)
    backends = {getattr(m.processor._attention_backend, "value", None) for m in model.modules()
                if hasattr(m, "processor")}
    assert backends == {"native"}


def test_lean_wan_attention_leaves_other_models_alone():
    from daotai.render.rewrites import lean_wan_attention

    with pytest.raises(ValueError, match="cross_kernel: 'flash'"):
        lean_wan_attention(wan_transformer(), cross_kernel="flash")
    assert lean_wan_attention(torch.nn.Sequential(torch.nn.Linear(2, 2))) == 0


def test_gelu_epilogue_replaces_tanh_gelu_projections_and_keeps_the_output():
    from daotai.render.rewrites import fuse_gelu_epilogues

    model = wan_transformer()
    inputs = wan_inputs()
    before = forward(model, inputs)
    keys = set(model.state_dict())
    assert fuse_gelu_epilogues(model) == 2  # one FFN per block
    assert set(model.state_dict()) == keys  # the linear stays at ffn.net.0.proj
    assert type(model.blocks[0].ffn.net[0]).__name__ == "GeluLinear"
    # Off CUDA the module runs the unfused form (torch._addmm_activation's GELU is the erf form
    # there), so the output is the same bits; the CUDA epilogue is measured by bench/neural.py.
    assert torch.equal(forward(model, inputs), before)
    assert fuse_gelu_epilogues(model) == 0  # idempotent


def test_gelu_epilogue_skips_fp8_projections(monkeypatch):
    from daotai.render import fp8
    from daotai.render.rewrites import fuse_gelu_epilogues

    monkeypatch.setattr(fp8, "FP8_MIN_OUT_FEATURES", 16)
    model = wan_transformer(attention_head_dim=16)  # widths of 32: FP8-eligible
    assert fp8.quantize_repeated_blocks(model) > 0
    assert fuse_gelu_epilogues(model) == 0


def test_exact_mode_on_cuda_selects_the_rewrites_and_cpu_does_not():
    cuda, cpu = levers_for("exact", "cuda"), levers_for("exact", "cpu")
    assert (cuda.lean_attention, cuda.cross_attention, cuda.gelu_epilogue) == (True, "cudnn", True)
    assert (cpu.lean_attention, cpu.cross_attention, cpu.gelu_epilogue) == (False, None, False)
    assert "rope=interleaved, cross=cudnn" in cuda.describe() and "gelu=epilogue" in cuda.describe()
    assert levers_for("off", "cuda") == SpeedConfig(mode="off")


def test_cross_kernel_needs_the_lean_processor_and_a_known_name():
    with pytest.raises(BackendError, match="cross_attention: needs lean_attention"):
        check_config(SpeedConfig(mode="exact", cross_attention="cudnn"))
    with pytest.raises(BackendError, match="cross_attention: 'math' must be one of"):
        check_config(SpeedConfig(mode="exact", lean_attention=True, cross_attention="math"))


def test_cache_only_keeps_the_step_cache_and_drops_every_kernel_lever():
    fast = levers_for("fast", "cuda")
    kept = cache_only(fast)
    assert kept == SpeedConfig(mode="fast", cache="interval", cache_interval=3)
    assert cache_only(SpeedConfig(mode="fast", cache="interval", cache_interval=3, cache_extrapolate=True,
                                  compile_blocks=True)).cache_extrapolate


def test_cudnn_cross_kernel_is_dropped_where_it_cannot_run():
    from daotai.render.rewrites import cudnn_attention_supported
    from daotai.render.speed import resolve_levers

    assert not cudnn_attention_supported("cpu")
    config = SpeedConfig(mode="exact", lean_attention=True, cross_attention="cudnn")
    assert resolve_levers(config, "cpu").cross_attention is None
    assert resolve_levers(config, "cpu").lean_attention


def test_lean_processor_and_gelu_epilogue_keep_a_vace_transformers_output():
    from diffusers import WanVACETransformer3DModel

    from daotai.render.rewrites import fuse_gelu_epilogues, lean_wan_attention

    torch.manual_seed(0)
    model = WanVACETransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
        text_dim=32, freq_dim=256, ffn_dim=32, num_layers=3, cross_attn_norm=True,
        qk_norm="rms_norm_across_heads", rope_max_seq_len=32, vace_layers=[0, 2], vace_in_channels=96).eval()
    inputs = wan_inputs()
    inputs["control_hidden_states"] = torch.randn(1, 96, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    before = forward(model, inputs)
    assert lean_wan_attention(model) == 10  # 3 main + 2 control blocks, self and cross each
    assert fuse_gelu_epilogues(model) == 5
    assert torch.equal(forward(model, inputs), before)


@pytest.mark.parametrize(("head_dim", "takes"), [(128, True), (64, True), (8, True), (4, False), (12, False)])
def test_the_cudnn_cross_kernel_takes_only_heads_cudnn_accepts(head_dim, takes):
    """cuDNN's fused attention refuses heads whose width is not a multiple of 8; the lean processor
    sends those to the dispatcher instead of failing the render (a tiny model's 4-wide heads did)."""
    from daotai.render.rewrites import cudnn_takes_head_dim

    assert cudnn_takes_head_dim(head_dim) is takes
