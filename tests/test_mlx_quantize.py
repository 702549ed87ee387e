"""4/8-bit quantisation of the MLX Wan transformer: rules enforced and deviation from fp32 guarded."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason='MLX not installed: pip install "mlx[cpu]" (Linux) or "daotai[mlx]"')
nn = pytest.importorskip("mlx.nn")

from daotai.errors import BackendError  # noqa: E402
from daotai.mlx.pipeline import SampleSettings, denoise, sample_video  # noqa: E402
from daotai.mlx.quantize import QuantSpec, quantize_transformer  # noqa: E402
from daotai.mlx.transformer import WanTransformer, WanTransformerConfig  # noqa: E402
from daotai.mlx.vae import WanVAEConfig, WanVAEDecoder  # noqa: E402

# widths divisible by 64 so every block linear can take group size 64
CFG = WanTransformerConfig(
    num_attention_heads=2, attention_head_dim=32, text_dim=32, ffn_dim=128, num_layers=2, rope_max_seq_len=32
)


def _random_model(seed: int) -> WanTransformer:
    """A tiny transformer with all parameters drawn N(0, 0.02) (biases included), deterministic."""
    model = WanTransformer(CFG)
    mx.random.seed(seed)
    leaves = nn.utils.tree_flatten(model.parameters())
    model.update(nn.utils.tree_unflatten([(k, mx.random.normal(v.shape) * 0.02 + (1.0 if "norm" in k else 0.0))
                                          for k, v in leaves]))
    mx.eval(model.parameters())
    return model


def _inputs():
    mx.random.seed(7)
    return mx.random.normal((1, 16, 3, 8, 8)), mx.array([600.0]), mx.random.normal((1, 9, 32))


def rel_l2(a, b) -> float:
    a, b = np.array(a, np.float64), np.array(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("bits,group", [(3, 64), (2, 64), (16, 64), (4, 16), (4, 48), (4, 256)])
def test_bad_bits_or_group_rejected(bits, group):
    with pytest.raises(BackendError, match="bits|group_size"):
        QuantSpec(bits, group)


# limits ~5x the measured deviation (4/64: 0.0036, 8/64: 0.00016, 4/32: 0.0028, 4/128: 0.0004)
# group 128 only fits the FFN down-projection (input 128) of this tiny model: 2 layers quantised
@pytest.mark.parametrize(
    "bits,group,count,limit", [(4, 64, 20, 0.02), (8, 64, 20, 0.001), (4, 32, 20, 0.02), (4, 128, 2, 0.005)]
)
def test_quantised_deviation_guarded(bits, group, count, limit):
    x, t, ctx = _inputs()
    ref = _random_model(0)(x, t, ctx)
    q = _random_model(0)
    paths = quantize_transformer(q, QuantSpec(bits, group))
    # at most 2 blocks x (4 self-attn + 4 cross-attn + 2 ffn) linears; embedders and head stay full precision
    assert len(paths) == count and all(p.startswith("blocks.") for p in paths)
    assert isinstance(q.blocks[0].ffn.net[2], nn.QuantizedLinear)
    assert isinstance(q.proj_out, nn.Linear) and not isinstance(q.proj_out, nn.QuantizedLinear)
    err = rel_l2(q(x, t, ctx), ref)
    assert 0.0 < err < limit  # > 0: the weights really changed; < limit: still the same model


def psnr_u8(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two uint8 arrays (inf when identical)."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def render_fp32_and_q4(steps_seen: list[int]):
    """Render the same tiny shot with the fp32 and the 4-bit g64 transformer (fp32 VAE): (ref, q4) uint8."""
    vae = WanVAEDecoder(WanVAEConfig(base_dim=3, dim_mult=(1, 1, 1, 1), num_res_blocks=1,
                                     latents_mean=(0.0,) * 16, latents_std=(1.0,) * 16))
    mx.random.seed(3)
    vae.update(nn.utils.tree_unflatten([(k, mx.random.normal(v.shape) * 0.2)
                                        for k, v in nn.utils.tree_flatten(vae.parameters())]))
    mx.random.seed(11)
    latents = mx.random.normal((1, 16, 3, 2, 2))
    cond, uncond = mx.random.normal((1, 9, 32)), mx.random.normal((1, 9, 32))
    settings = SampleSettings(steps=3, guidance=4.0, shift=3.0)
    fp = _random_model(0)
    q = _random_model(0)
    quantize_transformer(q, QuantSpec(4, 64))
    lat_ref = [z for _, z, _ in denoise(fp, latents, cond, uncond, settings)][-1]
    lat_q = [z for _, z, _ in denoise(q, latents, cond, uncond, settings)][-1]
    ref = sample_video(fp, vae, latents, cond, uncond, settings)
    out = sample_video(q, vae, latents, cond, uncond, settings, on_step=steps_seen.append)
    return ref, out, rel_l2(lat_q, lat_ref)


def test_quantised_tiny_model_renders_end_to_end():
    """4-bit g64 transformer renders all frames; PSNR vs fp32 guarded (measured in docs/mlx.md)."""
    steps: list[int] = []
    ref, out, latent_err = render_fp32_and_q4(steps)
    assert steps == [0, 1, 2]
    assert out.shape == ref.shape == (9, 16, 16, 3) and out.dtype == np.uint8
    assert 0.0 < latent_err < 0.02  # final latents: measured 4-bit g64 deviation, see docs/mlx.md
    assert psnr_u8(out, ref) > 30.0
