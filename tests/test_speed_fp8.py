"""FP8 linears of the fast mode: row-wise quantisation, the module, and which layers it replaces."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from builders import wan_transformer  # noqa: E402
from daotai.render.fp8 import eligible, fp8_linear_class, fp8_supported, quantize_rows  # noqa: E402
from daotai.render.speed import SpeedConfig, apply_levers, levers_for, resolve_levers  # noqa: E402


def relative_l2(got, want) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


def test_rows_are_scaled_by_their_own_largest_magnitude():
    matrix = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    matrix[2] *= 1000.0  # an outlier row must not coarsen the others
    matrix[3] = 0.0  # an all-zero row gets a floor scale, not a division by zero
    values, scales = quantize_rows(matrix)
    assert values.dtype == torch.float8_e4m3fn and scales.shape == (4, 1) and scales.dtype == torch.float32
    assert float(values.float().abs().amax(dim=1)[:3].min()) == 448.0  # each row reaches the format's max
    back = values.float() * scales
    for row in range(3):  # e4m3 keeps 3 mantissa bits: ~3% relative error per row
        assert relative_l2(back[row], matrix[row]) < 0.05
    assert torch.equal(back[3], torch.zeros(64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fp8_linear_matches_the_linear_it_replaces(dtype):
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48).to(dtype)
    fp8 = fp8_linear_class()(linear)
    x = torch.randn(2, 5, 64, dtype=dtype)  # (batch, tokens, features): any leading shape
    with torch.no_grad():
        got, want = fp8(x), linear(x)
    assert got.shape == (2, 5, 48) and got.dtype == dtype
    assert relative_l2(got, want) < 0.06
    assert fp8.weight_fp8.dtype == torch.float8_e4m3fn and not list(fp8.parameters())
    assert "fp8=e4m3 row-wise" in repr(fp8)


def test_the_reference_product_is_the_scaled_gemm_of_the_same_operands():
    """Off CUDA the module multiplies the float8 operands in fp32; where this torch's CPU kernel
    takes row-wise scales, _scaled_mm (what CUDA runs) gives the same product."""
    torch.manual_seed(3)
    linear = torch.nn.Linear(64, 48)
    fp8 = fp8_linear_class()(linear)
    x = torch.randn(7, 64)
    values, scales = quantize_rows(x)
    try:
        want = torch._scaled_mm(values, fp8.weight_fp8.t(), scale_a=scales, scale_b=fp8.weight_scale,
                                bias=linear.bias.detach(), out_dtype=torch.float32)
    except (RuntimeError, NotImplementedError) as error:
        pytest.skip(f"this torch's CPU _scaled_mm refuses row-wise scales: {error}")
    with torch.no_grad():
        got = fp8(x)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.fixture()
def narrow_ok(monkeypatch):
    """Let the tiny models' 32- and 64-wide layers take FP8 (the default floor is 2048 outputs)."""
    import daotai.render.fp8 as fp8

    monkeypatch.setattr(fp8, "FP8_MIN_OUT_FEATURES", 16)


def test_only_wide_outputs_take_fp8_by_default():
    # measured on an H200: 1536-wide outputs lost with FP8, 2048 and wider gained
    assert not eligible(torch.nn.Linear(1536, 1536)) and not eligible(torch.nn.Linear(8960, 1536))
    assert eligible(torch.nn.Linear(1536, 8960)) and eligible(torch.nn.Linear(2048, 2048))
    assert eligible(torch.nn.Linear(1536, 4608))  # Wan's fused q/k/v projection
    assert not eligible(torch.nn.Linear(2048, 2056 + 4))  # not a multiple of 16
    assert eligible(torch.nn.Linear(32, 64), min_out_features=16)


# 2 heads x 16 and an FFN of 64: every block linear is a multiple of 16 (FP8 GEMMs need that)
FP8_WIDTHS = {"attention_head_dim": 16, "ffn_dim": 64}


def wan_inputs():
    generator = torch.Generator().manual_seed(3)
    latents = torch.randn(1, 16, 2, 8, 8, generator=generator)  # (B, C, F, H, W)
    text = torch.randn(1, 7, 32, generator=generator)  # (B, tokens, text_dim)
    return {"hidden_states": latents, "timestep": torch.tensor([500]), "encoder_hidden_states": text,
            "return_dict": False}


def test_fast_levers_put_only_the_repeated_blocks_linears_in_fp8(narrow_ok):
    pytest.importorskip("diffusers")
    model = wan_transformer(**FP8_WIDTHS)
    with torch.no_grad():
        want = model(**wan_inputs())[0]
    block_linears = [m for block in model.blocks for m in block.modules() if isinstance(m, torch.nn.Linear)]
    assert block_linears and all(eligible(m) for m in block_linears)
    done = apply_levers(SimpleNamespace(transformer=model), SpeedConfig(mode="fast", fp8=True), steps=4)
    assert done == [f"{len(block_linears)} linears fp8"]
    fp8_linear = fp8_linear_class()
    assert not [m for block in model.blocks for m in block.modules() if isinstance(m, torch.nn.Linear)]
    assert sum(isinstance(m, fp8_linear) for m in model.modules()) == len(block_linears)
    # Conditioning, embeddings and the output projection keep their precision.
    assert isinstance(model.proj_out, torch.nn.Linear)
    assert any(isinstance(m, torch.nn.Linear) for m in model.condition_embedder.modules())
    with torch.no_grad():
        got = model(**wan_inputs())[0]
    assert got.shape == want.shape and torch.isfinite(got).all()
    deviation = relative_l2(got, want)
    assert 0.0 < deviation < 0.1  # approximate, but the same prediction


def test_fp8_is_asked_for_by_fast_on_cuda_and_kept_only_where_it_runs():
    fast = levers_for("fast", "cuda")
    assert fast.fp8 and "linears=fp8(e4m3, row-wise)" in fast.describe()
    assert not levers_for("exact", "cuda").fp8 and not levers_for("fast", "cpu").fp8
    # The CPU kernel is a slow reference: never selected there, whatever the config asks.
    assert not fp8_supported("cpu")
    assert not resolve_levers(fast, "cpu").fp8
    assert resolve_levers(SpeedConfig(mode="fast", cache="interval"), "cpu") == SpeedConfig(mode="fast",
                                                                                           cache="interval")


@pytest.mark.slow
def test_fp8_blocks_compile_as_one_graph(narrow_ok):
    # fast mode compiles the blocks after swapping their linears: the FP8 module must trace
    # without graph breaks (fullgraph=True, as apply_levers asks with PyTorch attention).
    pytest.importorskip("diffusers")
    model = wan_transformer(**FP8_WIDTHS, num_layers=1)
    with torch.no_grad():
        want = model(**wan_inputs())[0]
    config = SpeedConfig(mode="fast", fp8=True, compile_blocks=True)
    assert apply_levers(SimpleNamespace(transformer=model), config, steps=4)[-1] == "compiled repeated blocks"
    with torch.no_grad():
        got = model(**wan_inputs())[0]
    assert model.blocks[0]._compiled_call_impl is not None
    assert relative_l2(got, want) < 0.1
    torch._dynamo.reset()


def test_fused_projections_keep_the_output_and_hold_each_weight_once():
    pytest.importorskip("diffusers")
    from daotai.render.speed import fuse_attention_projections

    model = wan_transformer(**FP8_WIDTHS)
    with torch.no_grad():
        want = model(**wan_inputs())[0]
    weights = sum(p.numel() for p in model.parameters())
    assert fuse_attention_projections(model) == 4  # 2 blocks x (self, cross)
    block = model.blocks[0]
    assert block.attn1.to_qkv.out_features == 3 * 32 and block.attn1.to_q is None
    assert block.attn2.to_kv.out_features == 2 * 32 and block.attn2.to_q is not None and block.attn2.to_k is None
    assert sum(p.numel() for p in model.parameters()) == weights  # fused, not duplicated
    with torch.no_grad():
        got = model(**wan_inputs())[0]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert fuse_attention_projections(model) == 0  # already fused: nothing to do


def test_fp8_after_fusing_quantises_the_fused_projections(narrow_ok):
    pytest.importorskip("diffusers")
    model = wan_transformer(**FP8_WIDTHS, num_layers=1)
    config = SpeedConfig(mode="fast", fuse_qkv=True, fp8=True)
    done = apply_levers(SimpleNamespace(transformer=model), config, steps=4)
    # self: qkv, out; cross: q, kv, out; FFN: up, down
    assert done == ["2 attention projections fused", "7 linears fp8"]
    assert isinstance(model.blocks[0].attn1.to_qkv, fp8_linear_class())
    assert "qkv=fused" in config.describe()
    with torch.no_grad():
        assert torch.isfinite(model(**wan_inputs())[0]).all()
