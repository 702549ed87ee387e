"""MiniMax-H3 in MLX: transformer parity with diffusers on every packed layout, its 4/8-bit error, its memory plan."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from daotai.errors import BackendError
from daotai.mlx.h3_config import H3TransformerConfig
from daotai.mlx.h3_memory import (
    DEFAULT_FRAMES,
    H3_BITS,
    H3_CANVASES,
    RELEASED,
    block_bytes_per_row,
    check_h3_fits,
    format_mac_table,
    h3_mac_table,
    h3_parameter_counts,
    h3_peak,
    h3_transformer_bytes,
    latent_frames,
    packed_rows,
    smallest_mac,
)
from daotai.mlx.memory import GB, MAC_SIZES_GB

# ---- the memory planner: pure arithmetic, no MLX or torch needed ----


def test_released_parameter_count_and_bytes_match_the_catalog():
    params = h3_parameter_counts(RELEASED)
    assert params.total == 33_122_992_896  # diffusers' default MiniMaxH3Transformer3DModel, counted by torch
    assert params.quantizable / params.total > 0.99  # the block linears are nearly all of it
    # 61.7 GiB a partition at the published precision, as the h3 backend's notes say
    assert h3_transformer_bytes(params, 16) / GB == pytest.approx(61.7, abs=0.05)
    four, eight = h3_transformer_bytes(params, 4, 64), h3_transformer_bytes(params, 8, 64)
    assert four / GB == pytest.approx(17.5, abs=0.1) and eight / GB == pytest.approx(32.9, abs=0.1)
    assert h3_transformer_bytes(params, 4, 32) > four > h3_transformer_bytes(params, 4, 128)


def test_frames_and_rows_follow_the_models_geometry():
    assert [latent_frames(f) for f in (22, 124, 362)] == [7, 37, 107]
    for bad in (0, 23, 121):
        with pytest.raises(BackendError, match=rf"frames={bad} not allowed; rule: frames = 17 \* n \+ 5"):
            latent_frames(bad)
    # 1344x768, 124 frames: 37 latent frames x 42 x 24 video rows + 207 audio latents x 2 channels + text
    assert packed_rows(1344, 768, 124, "t2va", text_tokens=0) == 37 * 1008 + 414
    assert packed_rows(1344, 768, 124, "fl2va", text_tokens=0) == 38 * 1008 + 414
    assert packed_rows(1344, 768, 124, "ref2va", pictures=2, text_tokens=0) == 2 * (37 * 1008 + 414) + 2 * 4096
    with pytest.raises(BackendError, match="width=1000 not allowed; rule: a positive multiple of 32"):
        packed_rows(1000, 768, 124)
    with pytest.raises(BackendError, match="workflow='i2v' not allowed"):
        packed_rows(1344, 768, 124, "i2v")
    with pytest.raises(BackendError, match=r"bits=2 not allowed; rule: bits in \(4, 8, 16\)"):
        h3_peak(2, 1344, 768)


def test_peak_grows_with_bits_canvas_and_references_and_drops_the_conditioner_before_denoising():
    small, large = h3_peak(4, *H3_CANVASES["480p"]), h3_peak(4, *H3_CANVASES["768p"])
    assert small.peak_bytes < large.peak_bytes < h3_peak(8, *H3_CANVASES["768p"]).peak_bytes
    assert h3_peak(4, 1344, 768, workflow="ref2va", pictures=2).peak_bytes > large.peak_bytes
    phases = dict(h3_peak(16, 1344, 768).phases)
    # the ~33 B conditioner and the ~33 B partition are never resident together
    assert phases["denoise"] < 1.6 * h3_transformer_bytes(h3_parameter_counts(), 16)
    assert phases["encode"] < phases["denoise"]


def test_mac_table_covers_every_size_bit_width_and_canvas_and_fits_monotonically():
    cells = h3_mac_table()
    assert {(c.mac_gb, c.bits, c.canvas) for c in cells} == {
        (gb, bits, canvas) for gb in MAC_SIZES_GB for bits in H3_BITS for canvas in H3_CANVASES}
    for cell in cells:
        bigger_mac = [c for c in cells if (c.bits, c.canvas) == (cell.bits, cell.canvas) and c.mac_gb > cell.mac_gb]
        fewer_bits = [c for c in cells if (c.mac_gb, c.canvas) == (cell.mac_gb, cell.canvas) and c.bits < cell.bits]
        if cell.fits:
            assert all(c.fits for c in bigger_mac + fewer_bits)
    # the headline answers: a 4-bit 480p ref2va generation fits a 64 GB Mac; bf16 at the native canvas needs 192 GB
    assert smallest_mac(4, "480p") == 64
    assert smallest_mac(16, "768p") == 192
    assert all(c.fits for c in cells if c.mac_gb == 512)
    text = format_mac_table(cells)
    assert text.splitlines()[0].split()[-6:] == [str(gb) for gb in MAC_SIZES_GB]
    assert len(text.splitlines()) == 1 + len(H3_BITS) * len(H3_CANVASES)


def test_too_little_memory_is_refused_naming_what_would_fit():
    assert check_h3_fits(4, 864, 480, 64).peak_bytes <= 48 * GB
    with pytest.raises(BackendError) as err:
        check_h3_fits(16, 1344, 768, 96)
    message = str(err.value)
    assert "16-bit at 1344x768, 124 frames (t2va) needs ~" in message and "a 96 GB Mac lets the GPU use ~72 GB" in message
    assert "use --bits 8" in message
    with pytest.raises(BackendError, match="a larger Mac"):
        check_h3_fits(4, 1344, 768, 16, frames=362, workflow="ref2va", pictures=4)


def test_parameter_count_formula_matches_diffusers_on_a_tiny_config():
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    model = diffusers.MiniMaxH3Transformer3DModel(**TINY)
    counts = h3_parameter_counts(H3TransformerConfig(**TINY))
    assert counts.total == sum(p.numel() for p in model.parameters())
    float32 = sum(p.numel() for n, p in model.named_parameters()
                  if n.split(".")[0] in ("proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out"))
    assert counts.float32 == float32
    del torch


# ---- the MLX transformer against diffusers ----

# inner width (2 x 32) != hidden (48) and rotary 24 of 32 head channels: both of H3's particularities
TINY = dict(num_attention_heads=2, attention_head_dim=32, hidden_size=48, num_layers=2, num_refiner_layers=1,
            ffn_dim=64, in_channels=4, audio_in_channels=6, text_dim=40, freq_dim=32, time_embed_hidden_dim=40,
            time_embed_dim=24, rope_freq_dim=4)
PARITY_RTOL = 1e-5  # relative L2 of MLX vs diffusers, float32 on CPU; measured ~4e-7 to 6e-7


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    """A random diffusers H3 transformer saved with save_pretrained, and the MLX one loaded from that folder."""
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    pytest.importorskip("mlx.core")
    from daotai.mlx.h3_transformer import load_h3_transformer

    torch.manual_seed(0)
    model = diffusers.MiniMaxH3Transformer3DModel(**TINY).eval()
    with torch.no_grad():  # every weight random, norms around 1: a zero-initialised head would hide errors
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name else 0.0))
    folder = tmp_path_factory.mktemp("h3_tiny") / "transformer"
    model.save_pretrained(folder)
    return model, load_h3_transformer(folder), folder


def _layouts():
    """diffusers' own layout builders: t2va, fl2va (first and last keyframes) and ref2va (image, video+audio, audio)."""
    import torch
    from diffusers.modular_pipelines.minimax_h3.before_denoise import (
        MiniMaxH3PrepareLayoutStep,
        MiniMaxH3Ref2VAPrepareLayoutStep,
        MiniMaxH3SetTimestepsStep,
    )

    text_tags = torch.tensor([1] * 5 + [0] * 3 + [1] * 2)  # a vision block inside the text is tagged video
    t2va = MiniMaxH3PrepareLayoutStep.build_packed_sequence(text_tags, 3, 4, 6, 5, (1, 2, 2), 2, 2, 0)
    fl2va = MiniMaxH3PrepareLayoutStep.build_packed_sequence(text_tags, 3, 4, 6, 5, (1, 2, 2), 2, 2, 0,
                                                             ("first", "last"))
    references = [SimpleNamespace(kind="image", has_audio=False), SimpleNamespace(kind="video", has_audio=True),
                  SimpleNamespace(kind="audio", has_audio=True)]
    condition = [torch.zeros(1, 4, 1, 6, 4), torch.zeros(1, 4, 2, 4, 6)]  # only their shapes are read
    audio_condition = [torch.zeros(8, 6), torch.zeros(6, 6)]
    ref2va = MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        text_tags, references, condition, audio_condition, 3, 4, 6, 5, (1, 2, 2), 2, 2, 0)
    out = {}
    for name, (pos, tags, video, audio, text, cond_video, cond_audio) in (("t2va", t2va), ("fl2va", fl2va),
                                                                           ("ref2va", ref2va)):
        timestep, timestep_indices = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            video, audio, cond_video, cond_audio, text.numel(), 0.8, 0.55, 0.05, 0.0)
        out[name] = (timestep, timestep_indices, tags, pos, video, audio, text)
    return out


@pytest.mark.parametrize("workflow", ["t2va", "fl2va", "ref2va"])
def test_transformer_matches_diffusers(tiny_pair, workflow):
    import mlx.core as mx
    import torch

    from daotai.mlx.h3_transformer import H3Layout

    model, mlx_model, _ = tiny_pair
    timestep, timestep_indices, tags, pos, video_idx, audio_idx, text_idx = _layouts()[workflow]
    # target audio and target video at their own noise levels, and the conditioning rows at theirs
    assert len(timestep) == (2 if workflow == "t2va" else 4 if workflow == "ref2va" else 3)
    g = torch.Generator().manual_seed(1)
    video = torch.randn(2, video_idx.numel(), 16, generator=g)  # batch 2: the layout is shared by both
    audio = torch.randn(2, audio_idx.numel(), 6, generator=g)
    text = torch.randn(2, text_idx.numel(), 40, generator=g)
    with torch.no_grad():
        ref = model(video, audio, text, timestep, timestep_indices, tags, pos, video_idx, audio_idx, text_idx)
    layout = H3Layout(timestep.numpy(), timestep_indices.numpy(), tags.numpy(), pos.numpy(), video_idx.numpy(),
                      audio_idx.numpy(), text_idx.numpy())
    out_video, out_audio = mlx_model(mx.array(video.numpy()), mx.array(audio.numpy()), mx.array(text.numpy()), layout)
    assert out_video.shape == tuple(ref.sample.shape) and out_audio.shape == tuple(ref.audio_sample.shape)
    assert _rel(out_video, ref.sample.numpy()) < PARITY_RTOL
    assert _rel(out_audio, ref.audio_sample.numpy()) < PARITY_RTOL


def test_bfloat16_load_keeps_the_checkpoints_float32_modules_and_stays_close(tiny_pair):
    import mlx.core as mx

    from daotai.mlx.h3_transformer import load_h3_transformer

    _, fp32_model, folder = tiny_pair
    bf16 = load_h3_transformer(folder, dtype=mx.bfloat16)
    assert bf16.proj_in.weight.dtype == bf16.time_embedder.linear_1.weight.dtype == mx.float32
    assert bf16.audio_proj_out.weight.dtype == mx.float32
    assert bf16.transformer_blocks[0].attn.to_q.weight.dtype == bf16.context_embedder.weight.dtype == mx.bfloat16
    from h3_mlx_tiny import inputs_for, t2va_layout

    cfg = H3TransformerConfig(**TINY)
    layout = t2va_layout(text=6, latent_frames=2, latent_height=4, latent_width=6, audio_latents=4)
    rows = inputs_for(layout, cfg)
    ref_video, _ = fp32_model(*rows, layout)
    video, audio = bf16(*rows, layout)
    assert video.dtype == audio.dtype == mx.float32  # the output heads are float32
    assert 0 < _rel(video, np.array(ref_video)) < 0.05  # measured ~0.01


def test_bad_layouts_and_rows_are_refused_naming_the_field(tiny_pair):
    import mlx.core as mx

    from daotai.mlx.h3_transformer import H3Layout

    _, mlx_model, _ = tiny_pair
    pos = np.zeros((6, 3))
    ok = dict(timestep=np.array([0.5]), timestep_indices=np.zeros(6), token_tags=np.array([1, 1, 0, 0, 2, 2]),
              position_ids=pos, video_indices=np.array([2, 3]), audio_indices=np.array([4, 5]),
              text_indices=np.array([0, 1]))
    layout = H3Layout(**ok)
    assert layout.length == 6 and list(layout.adaln_rows) == [1, 1, 0, 0, 2, 2]
    for change, match in ((dict(video_indices=np.array([2, 2])), "cover the 6 sequence positions exactly once"),
                          (dict(position_ids=np.zeros((6, 2))), r"position_ids: shape \[6, 2\] must be \(seq_len, 3\)"),
                          (dict(token_tags=np.array([1, 1, 0, 0, 2, 3])), "token_tags: values must be 0"),
                          (dict(timestep_indices=np.ones(6)), r"timestep_indices: values must index timestep \(0..0\)"),
                          (dict(timestep_indices=np.zeros(5)), r"timestep_indices: shape \[5\] must be \(6,\)")):
        with pytest.raises(ValueError, match=match):
            H3Layout(**{**ok, **change})
    with pytest.raises(ValueError, match=r"audio rows have shape \[1, 3, 6\]; must be \(B, 2, 6\)"):
        mlx_model(mx.zeros((1, 2, 16)), mx.zeros((1, 3, 6)), mx.zeros((1, 2, 40)), layout)
    with pytest.raises(ValueError, match=r"batch sizes differ \(video 1, audio 2, text 1\)"):
        mlx_model(mx.zeros((1, 2, 16)), mx.zeros((2, 2, 6)), mx.zeros((1, 2, 40)), layout)


def test_loader_refuses_another_model_and_drops_the_rotary_buffer(tmp_path, tiny_pair):
    import json
    import shutil

    import mlx.core as mx

    from daotai.mlx.h3_transformer import load_h3_transformer

    _, _, folder = tiny_pair
    copy = tmp_path / "transformer"
    shutil.copytree(folder, copy)
    weights = mx.load(str(next(copy.glob("*.safetensors"))))
    weights["rope.inv_freq"] = mx.ones((4,))  # what an original-format checkpoint may carry
    mx.save_safetensors(str(next(copy.glob("*.safetensors"))), weights)
    load_h3_transformer(copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "_class_name": "WanTransformer3DModel"}))
    with pytest.raises(BackendError, match="not a MiniMaxH3Transformer3DModel"):
        load_h3_transformer(copy)


# ---- 4/8-bit quantisation through the wan-mlx quantiser ----

# limits ~3x the errors measured on this tiny model (bench/h3_mlx_quant.py prints them):
# weights alone 8-bit ~1.9e-4, 4-bit ~3e-3; converted from bf16 and run in bf16, vs bf16: 8-bit ~2.6e-3, 4-bit ~5e-3
@pytest.mark.parametrize("bits,group,weights_limit,converted_limit", [
    (8, 32, 6e-4, 8e-3), (8, 64, 6e-4, 8e-3), (8, 128, 8e-4, 8e-3),
    (4, 32, 1e-2, 1.6e-2), (4, 64, 1e-2, 1.6e-2), (4, 128, 1.2e-2, 1.8e-2),
])
def test_quantised_error_per_bit_width_and_group_size(bits, group, weights_limit, converted_limit):
    pytest.importorskip("mlx.core")
    from h3_mlx_tiny import quantisation_error

    err = quantisation_error(bits, group)
    # 2 blocks x (4 attention + 2 FFN + 1 AdaLN) + 1 refiner block x (4 + 2); embedders and heads stay full precision
    assert err.layers == 20
    assert 0 < max(err.weights_video, err.weights_audio) < weights_limit
    assert 0 < max(err.converted_video_vs_bf16, err.converted_audio_vs_bf16) < converted_limit


def test_four_bits_err_more_than_eight_and_skip_keeps_the_modulation():
    mx = pytest.importorskip("mlx.core")
    from daotai.mlx.quantize import H3_BLOCK_PREFIXES, QuantSpec, quantize_transformer
    from h3_mlx_tiny import QUANT_CFG, quantisation_error, random_h3

    four, eight = quantisation_error(4, 64), quantisation_error(8, 64)
    assert four.weights_video > 5 * eight.weights_video and four.weights_audio > 5 * eight.weights_audio
    model = random_h3(0)
    paths = quantize_transformer(model, QuantSpec(4, 64), H3_BLOCK_PREFIXES, skip=("adaln_proj.linear",))
    assert len(paths) == 18 and not any("adaln" in p for p in paths)
    assert model.transformer_blocks[0].adaln_proj.linear.weight.dtype == mx.float32
    assert model.transformer_blocks[0].attn.to_q.weight.dtype == mx.uint32
    assert model.proj_in.weight.dtype == mx.float32 and QUANT_CFG.hidden_size % 128 == 0


def test_planner_block_activations_bound_a_measured_mlx_block():
    """One block's live bytes per row, measured with MLX (CPU, float32) at two sequence lengths, with the CPU
    attention's L x L term fitted out: the planner's count with its margin must cover it."""
    mx = pytest.importorskip("mlx.core")
    from daotai.mlx.h3_memory import ACTIVATION_MARGIN
    from daotai.mlx.h3_transformer import Block, rope_cos_sin

    cfg = H3TransformerConfig(num_attention_heads=4, attention_head_dim=128, hidden_size=512, ffn_dim=1408,
                              time_embed_dim=128, rope_freq_dim=16, num_layers=1)
    block = Block(cfg)
    mx.eval(block.parameters())
    rng = np.random.default_rng(0)
    peaks = []
    for length in (512, 1024):
        x, temb = mx.random.normal((1, length, 512)), mx.random.normal((2, 128))
        rows = mx.array(rng.integers(0, 6, length).astype(np.int32))
        rope = rope_cos_sin(rng.random((length, 3)) * 50, 16, 10000.0)
        mx.eval(x, temb, rows, *rope)
        base = mx.get_active_memory()
        mx.reset_peak_memory()
        mx.eval(block(x, temb, rows, rope))
        peaks.append(mx.get_peak_memory() - base)
    # peak = a * L + b * L^2 at L and 2L: a = (4 * p(L) - p(2L)) / (2L)
    per_row = (4 * peaks[0] - peaks[1]) / (2 * 512)
    planned = block_bytes_per_row(cfg, bytes_per_value=4) * ACTIVATION_MARGIN
    assert 0.3 * planned < per_row < planned  # measured ~1.06x the count, i.e. ~0.7 of planned


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_default_frames_are_the_shortest_five_second_generation():
    assert DEFAULT_FRAMES == 124 and DEFAULT_FRAMES / 24 >= 5.0 and (DEFAULT_FRAMES - 5) % 17 == 0


def test_quantised_weights_round_trip_through_safetensors(tmp_path):
    pytest.importorskip("mlx.core")
    import json

    import mlx.core as mx

    from daotai.mlx.h3_transformer import load_quantized_h3_transformer, quantize_h3, save_h3_weights
    from h3_mlx_tiny import QUANT_CFG, inputs_for, random_h3, t2va_layout

    model = random_h3(3)
    layers = quantize_h3(model, 4, 32)
    folder = tmp_path / "transformer"
    folder.mkdir()
    save_h3_weights(model, folder / "model.safetensors")
    fields = QUANT_CFG.__dataclass_fields__
    (folder / "config.json").write_text(json.dumps({k: getattr(QUANT_CFG, k) for k in fields}))
    loaded = load_quantized_h3_transformer(folder, 4, 32, layers)
    layout = t2va_layout()
    rows = inputs_for(layout)
    for a, b in zip(model(*rows, layout), loaded(*rows, layout), strict=True):
        assert mx.array_equal(a, b)  # the packed weights, scales and biases come back bit for bit
    with pytest.raises(BackendError, match=r"quantised layers \(18\) differ from those recorded at conversion \(20\)"):
        load_quantized_h3_transformer(folder, 4, 32, layers, keep_modulation=True)
    with pytest.raises(BackendError, match="weights do not match the model"):
        load_quantized_h3_transformer(folder, 8, 32, layers)


def test_the_planner_imports_without_mlx_numpy_or_torch():
    import subprocess
    import sys

    code = ("import sys; import daotai.mlx.h3_memory as m; m.h3_mac_table(); "
            "print(sorted(k for k in ('mlx', 'numpy', 'torch') if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_docs_mac_table_is_the_planners():
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "mlx.md").read_text(encoding="utf-8")
    assert format_mac_table(h3_mac_table()) in doc
    assert f"({h3_peak(4, 1344, 768).peak_bytes / GB:.1f} GB at 1344x768)" in doc


# ---- the packed layout, built in numpy, against diffusers' own builders (exactly) ----

@pytest.mark.parametrize("frames,height,width,audio,anchors", [
    (3, 4, 6, 5, ()), (3, 4, 6, 5, ("first",)), (7, 6, 4, 9, ("first", "last")), (17, 4, 4, 30, ("last",)),
    (22, 6, 10, 40, ("first", "last")),  # >= 16 latent frames: the pairwise and running sums differ in the last bit
])
def test_keyframe_layout_equals_diffusers(frames, height, width, audio, anchors):
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers.modular_pipelines.minimax_h3.before_denoise import (
        MiniMaxH3PrepareLayoutStep,
        MiniMaxH3SetTimestepsStep,
    )

    from daotai.mlx.h3_layout import keyframe_rows, with_timesteps

    tags = [1] * 4 + [0] * 2 + [1] * 3
    ref = MiniMaxH3PrepareLayoutStep.build_packed_sequence(torch.tensor(tags), frames, height, width, audio,
                                                           (1, 2, 2), 2, 2, 0, anchors)
    rows = keyframe_rows(tags, frames, height, width, audio, (1, 2, 2), anchors)
    _assert_same_rows(rows, ref)
    ref_t, ref_idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(ref[2], ref[3], ref[5], ref[6], len(tags),
                                                                   0.9, 0.6, 0.02, 0.0)
    layout = with_timesteps(rows, 0.9, 0.6, 0.02, 0.0)
    assert np.array_equal(layout.timestep, ref_t.numpy()) and np.array_equal(layout.timestep_indices, ref_idx.numpy())


def test_reference_layout_equals_diffusers():
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3Ref2VAPrepareLayoutStep

    from daotai.mlx.h3_layout import ReferenceBlock, reference_rows, with_timesteps

    blocks = [ReferenceBlock("image", 1, 6, 4), ReferenceBlock("video", 17, 4, 6, audio_latents=30),
              ReferenceBlock("audio", audio_latents=7), ReferenceBlock("video", 2, 4, 4),
              ReferenceBlock("video", 3, 4, 4, audio_latents=2)]  # the soundtrack shorter than the frames' span
    refs = [SimpleNamespace(kind=b.kind, has_audio=b.audio_latents > 0) for b in blocks]
    condition = [torch.zeros(1, 4, b.latent_frames, b.latent_height, b.latent_width) for b in blocks
                 if b.kind != "audio"]
    audio_condition = [torch.zeros(2 * b.audio_latents, 6) for b in blocks if b.audio_latents]
    tags = [1] * 3 + [0] * 4 + [1] * 2
    ref = MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        torch.tensor(tags), refs, condition, audio_condition, 5, 4, 6, 12, (1, 2, 2), 2, 2, 0)
    rows = reference_rows(tags, blocks, 5, 4, 6, 12)
    _assert_same_rows(rows, ref)
    assert len(with_timesteps(rows, 0.5, 0.5, 0.1, 0.0).timestep) == 3  # equal target timesteps share a row


def _assert_same_rows(rows, ref):
    pos, tags, video, audio, text, cond_video, cond_audio = ref
    # float64 positions to the last bits: bit for bit on one torch release, a rounding apart on
    # another (torch 2.11's CUDA build rounds the reference's fractional strides differently)
    np.testing.assert_allclose(rows.position_ids, pos.numpy(), rtol=1e-12, atol=1e-12)
    for mine, theirs in ((rows.token_tags, tags), (rows.video_indices, video), (rows.audio_indices, audio),
                         (rows.text_indices, text)):
        assert np.array_equal(mine, theirs.numpy())
    assert (rows.condition_video_rows, rows.condition_audio_rows) == (cond_video, cond_audio)


@pytest.mark.parametrize("kwargs,match", [
    (dict(kind="picture"), "kind: 'picture' must be"),
    (dict(kind="audio"), "audio reference needs audio_latents > 0"),
    (dict(kind="image", latent_frames=2, latent_height=4, latent_width=4), "image reference is one latent frame"),
    (dict(kind="video", latent_frames=2), r"video reference needs latent_frames, latent_height and latent_width > 0"),
])
def test_bad_reference_blocks_are_refused(kwargs, match):
    from daotai.mlx.h3_layout import ReferenceBlock

    with pytest.raises(ValueError, match=match):
        ReferenceBlock(**kwargs)
    with pytest.raises(ValueError, match=r"anchors\[0\]: 'middle' must be 'first' or 'last'"):
        from daotai.mlx.h3_layout import keyframe_rows

        keyframe_rows([1], 2, 4, 4, 3, anchors=("middle",))


# ---- the rectified-flow Euler sampler against diffusers' MiniMaxH3Scheduler ----

@pytest.mark.parametrize("steps,shift", [(2, 12.0), (30, 12.0), (30, 3.0), (51, 12.0), (200, 12.0), (9, 1.0)])
def test_schedule_matches_diffusers(steps, shift):
    pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    from daotai.mlx.h3_scheduler import h3_schedule

    ref = diffusers.MiniMaxH3Scheduler(shift=shift)
    ref.set_timesteps(steps)
    mine = h3_schedule(steps, shift)
    assert mine.sigmas.dtype == mine.timesteps.dtype == np.float32
    assert mine.passes == ref.num_inference_steps and len(mine.sigmas) == len(ref.sigmas)
    # torch.linspace and numpy's round a few grid points differently in the last bit
    np.testing.assert_allclose(mine.sigmas, ref.sigmas.numpy(), rtol=0, atol=2e-7)
    np.testing.assert_allclose(mine.timesteps, ref.timesteps.numpy(), rtol=0, atol=2e-7)
    assert mine.sigmas[0] == 1.0 and mine.sigmas[-1] == 0.0 and np.all(np.diff(mine.sigmas) < 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_euler_steps_match_diffusers(dtype):
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    mx = pytest.importorskip("mlx.core")
    from daotai.mlx.h3_scheduler import h3_noised, h3_schedule, h3_step

    ref = diffusers.MiniMaxH3Scheduler(shift=12.0)
    ref.set_timesteps(12)
    sched = h3_schedule(12, 12.0)
    g = torch.Generator().manual_seed(4)
    x_ref = torch.randn(2, 50, 8, generator=g).to(getattr(torch, dtype))
    x = mx.array(x_ref.float().numpy()).astype(getattr(mx, dtype))
    for i, t in enumerate(ref.timesteps):
        v = torch.randn(2, 50, 8, generator=g).to(getattr(torch, dtype))
        x_ref = ref.step(v, t, x_ref).prev_sample
        # diffusers' own grid here, so the step formula alone is compared
        x = h3_step(mx.array(v.float().numpy()).astype(x.dtype), float(t), x, float(ref.sigmas[i]),
                    float(ref.sigmas[i + 1]))
    assert x.dtype == getattr(mx, dtype)
    tolerance = 1e-6 if dtype == "float32" else 1e-3  # both measured 0 here: bit for bit
    assert _rel(np.array(x.astype(mx.float32)), x_ref.float().numpy()) < tolerance
    assert sched.passes == len(ref.timesteps)
    clean, noise = np.ones(3, np.float32), np.zeros(3, np.float32)
    sample = torch.from_numpy(clean)
    assert np.allclose(h3_noised(clean, 0.25, noise), ref.scale_noise(sample, 0.25, torch.from_numpy(noise)).numpy())


def test_bad_schedules_are_refused():
    from daotai.mlx.h3_scheduler import h3_schedule

    with pytest.raises(ValueError, match="steps=1 must be >= 2"):
        h3_schedule(1, 12.0)
    with pytest.raises(ValueError, match="shift=0 must be > 0"):
        h3_schedule(10, 0)


def test_patchify_and_audio_packing_match_diffusers_and_invert():
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    mx = pytest.importorskip("mlx.core")
    from diffusers.modular_pipelines.minimax_h3.before_denoise import patchify_video_latents

    from daotai.mlx.h3_layout import pack_audio, patchify_video, unpack_audio, unpatchify_video

    latents = torch.randn(1, 3, 4, 6, 8, generator=torch.Generator().manual_seed(5))
    ref = patchify_video_latents(latents, (1, 2, 2)).numpy()  # (rows, C * 4), batch folded in
    for make in (np.asarray, mx.array):  # numpy for the pipeline's bookkeeping, MLX on the device
        rows = patchify_video(make(latents.numpy()))
        assert np.array_equal(np.array(rows)[0], ref)
        assert np.array_equal(np.array(unpatchify_video(rows, 3, 4, 6, 8)), latents.numpy())
    with pytest.raises(ValueError, match=r"shape \(1, 3, 4, 5, 8\) do not divide into patches \(1, 2, 2\)"):
        patchify_video(np.zeros((1, 3, 4, 5, 8)))
    audio = torch.randn(2, 6, 9, generator=torch.Generator().manual_seed(6))  # (stereo, C_a, T), as the VAE encodes
    ref_rows = audio.permute(0, 2, 1).reshape(-1, 6).numpy()  # the pipeline's packing of given audio latents
    assert np.array_equal(pack_audio(audio.numpy()), ref_rows)
    ref_back = torch.from_numpy(ref_rows).reshape(2, 9, 6).permute(0, 2, 1).numpy()  # its unpacking after denoising
    assert np.array_equal(unpack_audio(ref_rows), ref_back) and np.array_equal(ref_back, audio.numpy())


# ---- the denoising loop against diffusers' transformer and schedulers, stepped as its loop blocks do ----

@pytest.mark.parametrize("workflow", ["fl2va", "ref2va"])
def test_denoise_loop_matches_diffusers(tiny_pair, workflow):
    import mlx.core as mx
    import torch
    from diffusers import MiniMaxH3Scheduler
    from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3SetTimestepsStep

    from daotai.mlx.h3_denoise import KEYFRAME_NOISE_AUG, denoise_h3
    from daotai.mlx.h3_layout import ReferenceBlock, keyframe_rows, reference_rows

    model, mlx_model, _ = tiny_pair
    tags = [1] * 6
    if workflow == "fl2va":
        rows = keyframe_rows(tags, 3, 4, 6, 5, anchors=("first",))
    else:
        rows = reference_rows(tags, [ReferenceBlock("image", 1, 4, 4), ReferenceBlock("audio", audio_latents=3)],
                              3, 4, 6, 5)
    g = torch.Generator().manual_seed(8)
    video = torch.randn(len(rows.video_indices), 16, generator=g)
    audio = torch.randn(len(rows.audio_indices), 6, generator=g)
    text = torch.randn(1, len(tags), 40, generator=g)
    steps = 6
    video_sched, audio_sched = MiniMaxH3Scheduler(shift=12.0), MiniMaxH3Scheduler(shift=3.0)
    video_sched.set_timesteps(steps)
    audio_sched.set_timesteps(steps)
    latents, audio_latents = video.clone(), audio.clone()
    cv, ca = rows.condition_video_rows, rows.condition_audio_rows
    assert cv > 0 and (ca > 0) == (workflow == "ref2va")
    with torch.no_grad():  # diffusers' MiniMaxH3LoopDenoiser and MiniMaxH3LoopSchedulerStep, step by step
        for i, (t, t_audio) in enumerate(zip(video_sched.timesteps, audio_sched.timesteps, strict=True)):
            ts, idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
                torch.from_numpy(rows.video_indices), torch.from_numpy(rows.audio_indices), cv, ca, len(tags),
                float(t), float(t_audio), max(float(t), KEYFRAME_NOISE_AUG), 1.0)
            v, va = model(latents[None], audio_latents[None], text, ts, idx, torch.from_numpy(rows.token_tags),
                          torch.from_numpy(rows.position_ids), torch.from_numpy(rows.video_indices),
                          torch.from_numpy(rows.audio_indices), torch.from_numpy(rows.text_indices), return_dict=False)
            latents[cv:] = video_sched.step(v[0, cv:].float(), t, latents[cv:], return_dict=False)[0]
            audio_latents[ca:] = audio_sched.step(va[0, ca:].float(), audio_sched.timesteps[i], audio_latents[ca:],
                                                  return_dict=False)[0]
    history = list(denoise_h3(mlx_model, rows, mx.array(video.numpy()), mx.array(audio.numpy()),
                              mx.array(text.numpy()), steps))
    assert [(i, n) for i, n, *_ in history] == [(i, steps - 1) for i in range(steps - 1)]
    _, _, out_video, out_audio, estimate = history[-1]
    assert np.array_equal(np.array(estimate), np.array(out_video[cv:]))  # the last step lands on its estimate
    assert np.array_equal(np.array(out_video[:cv]), video.numpy()[:cv])  # conditioning rows are never written
    assert _rel(out_video, latents.numpy()) < 1e-5 and _rel(out_audio, audio_latents.numpy()) < 1e-5
    assert _rel(out_video[cv:], video.numpy()[cv:]) > 0.1  # and the target rows did move


def test_refusal_suggests_the_largest_canvas_that_fits():
    # t2va at 8 bits: 1344x768 ~61.6 GB, 1280x704 ~59.5 GB, 864x480 ~52.0 GB; an 80 GB machine grants 60 GB
    with pytest.raises(BackendError, match=r"use --bits 4 or the 720p canvas \(1280x704\)$"):
        check_h3_fits(8, 1344, 768, 80)


# ---- the audio decoder (BigVGAN) against diffusers' AutoencoderKLMiniMaxH3Audio.decode ----

def test_audio_decoder_matches_diffusers(tmp_path):
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    mx = pytest.importorskip("mlx.core")
    from daotai.mlx.h3_audio_vae import denormalize_audio, load_h3_audio_decoder

    torch.manual_seed(0)
    # the released upsampling (x800: 5, 5, 2, 2, 2, 2, 2), two AMP kernels with their own dilations, narrow channels
    mean, std = [0.1 * i for i in range(8)], [1.0 + 0.05 * i for i in range(8)]
    vae = diffusers.AutoencoderKLMiniMaxH3Audio(
        encoder_dim=4, latent_dim=16, latent_channels=8, num_attention_heads=2, decoder_dim=128,
        resblock_kernel_sizes=(3, 5), resblock_dilation_sizes=((1, 3), (1, 2)), latents_mean=mean, latents_std=std,
    ).eval()
    with torch.no_grad():  # SnakeBeta's log-space alpha and beta start at 0: spread them so both are exercised
        for name, p in vae.named_parameters():
            if name.endswith((".alpha", ".beta")):
                p.copy_(torch.randn_like(p) * 0.3)
    vae.save_pretrained(tmp_path / "audio_vae")
    sampled = torch.randn(2, 8, 5, generator=torch.Generator().manual_seed(1))  # stereo: one batch item a channel
    latents = torch.from_numpy(denormalize_audio(sampled.numpy(), mean, std))
    # the pipeline's own denormalisation (MiniMaxH3AudioDecodeStep)
    assert torch.allclose(latents, sampled * torch.tensor(std).view(1, -1, 1) + torch.tensor(mean).view(1, -1, 1))
    with torch.no_grad():
        ref = vae.decode(latents).sample.numpy()
    decoder = load_h3_audio_decoder(tmp_path / "audio_vae")
    out = np.array(decoder(mx.array(latents.numpy())))
    assert out.shape == ref.shape == (2, 1, 5 * 800)
    assert _rel(out, ref) < 1e-5  # measured ~5e-7
    with pytest.raises(ValueError, match=r"latents of shape \[2, 5, 8\]; must be \(B, 8, T\)"):
        decoder(mx.array(latents.numpy().transpose(0, 2, 1)))


def test_audio_decoder_refuses_another_model(tmp_path, tiny_pair):
    from daotai.mlx.h3_audio_vae import load_h3_audio_decoder

    with pytest.raises(BackendError, match="not an AutoencoderKLMiniMaxH3Audio"):
        load_h3_audio_decoder(tiny_pair[2])


# ---- the video decoder (ViT, one clip) against diffusers' AutoencoderKLMiniMaxH3 ----

TINY_VIDEO_VAE = dict(latent_channels=8, block_out_channels=(8, 8), layers_per_block=1,
                      spatial_downsample_factors=(2, 2), temporal_downsample_factors=(2, 2), norm_num_groups=4,
                      decoder_num_layers=2, decoder_num_attention_heads=2, decoder_attention_head_dim=16,
                      decoder_num_register_tokens=2)


@pytest.fixture(scope="module")
def tiny_video_vae(tmp_path_factory):
    """A random diffusers H3 video VAE (decoder weights all random) saved, and its MLX clip decoder."""
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    pytest.importorskip("mlx.core")
    from daotai.mlx.h3_video_vae import load_h3_video_clip_decoder

    torch.manual_seed(0)
    vae = diffusers.AutoencoderKLMiniMaxH3(**TINY_VIDEO_VAE).eval()
    with torch.no_grad():  # layer scales start at 0 in diffusers: random ones make every block count
        for name, p in vae.named_parameters():
            if name.startswith(("decoder.", "post_quant_conv.")):
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name and name.endswith("weight") else 0.0))
    folder = tmp_path_factory.mktemp("h3_vae") / "vae"
    vae.save_pretrained(folder)
    return vae, load_h3_video_clip_decoder(folder)


def test_video_clip_decoder_matches_diffusers(tiny_video_vae):
    import mlx.core as mx
    import torch

    vae, decoder = tiny_video_vae
    z = torch.randn(2, 8, 3, 4, 5, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = vae.decoder(vae.post_quant_conv(z)).numpy()
    out = np.array(decoder(mx.array(z.numpy())))
    assert out.shape == ref.shape == (2, 3, 12, 16, 20)  # 4 x 4 x 4 pixels a voxel in this tiny VAE
    assert _rel(out, ref) < 1e-5  # measured ~3e-7
    with pytest.raises(ValueError, match=r"latents of shape \[2, 3, 8, 4, 5\]; must be \(B, 8, F, H, W\)"):
        decoder(mx.array(z.numpy().transpose(0, 2, 1, 3, 4)))


@pytest.mark.parametrize("latent_frames,tiled", [(7, False), (12, True), (9, True), (3, False)])
def test_video_decode_chunks_and_tiles_as_diffusers(tiny_video_vae, latent_frames, tiled):
    """Whole decodes: 5n+2 latent frames (22 and 39 pixel frames), and lengths the decode pads (9, 3) and trims."""
    import mlx.core as mx
    import torch

    from daotai.mlx.h3_video_vae import VideoTiling, decode_video

    vae, decoder = tiny_video_vae
    if tiled:  # 8-pixel tiles with 4-pixel overlaps over a 16x20 frame: 3 x 4 tiles per chunk
        vae.enable_tiling(tile_sample_min_height=8, tile_sample_min_width=8, tile_sample_min_overlap_height=4,
                          tile_sample_min_overlap_width=4)
    else:
        vae.disable_tiling()
    z = torch.randn(1, 8, latent_frames, 4, 5, generator=torch.Generator().manual_seed(latent_frames))
    with torch.no_grad():
        ref = vae.decode(z).sample.numpy()
    out = np.array(decode_video(decoder, mx.array(z.numpy()), tiling=VideoTiling(8, 4) if tiled else None))
    assert out.shape == ref.shape
    if (latent_frames - 2) % 5 == 0:
        assert out.shape[2] == (latent_frames - 2) // 5 * 17 + 5  # 17n+5 frames from 5n+2 latents
    assert _rel(out, ref) < 1e-5


def test_tiles_cover_the_frame_with_latent_aligned_overlaps():
    pytest.importorskip("mlx.core")  # the module is MLX's; an environment without it skips
    from daotai.mlx.h3_video_vae import split_tiles

    assert split_tiles(200, 256, 64, 16) == ([0], [200], [])
    starts, lengths, overlaps = split_tiles(1344, 256, 64, 16)  # the released canvas' long edge
    assert starts[-1] + lengths[-1] == 1344 and all(o >= 64 and o % 16 == 0 for o in overlaps)
    assert len(starts) == 7


# ---- one whole tiny t2va generation: MLX against diffusers' own modular blocks, same embeddings and noise ----

def test_t2va_generation_matches_diffusers(tmp_path):
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    mx = pytest.importorskip("mlx.core")
    from diffusers.modular_pipelines import SequentialPipelineBlocks
    from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import (
        MiniMaxH3CoreDenoiseStep,
        MiniMaxH3DecodeStep,
    )

    from builders import h3_transformer
    from daotai.mlx.h3_audio_vae import load_h3_audio_decoder
    from daotai.mlx.h3_generate import generate_t2va
    from daotai.mlx.h3_transformer import load_h3_transformer
    from daotai.mlx.h3_video_vae import load_h3_video_clip_decoder

    torch.manual_seed(0)
    vae = diffusers.AutoencoderKLMiniMaxH3(**{**TINY_VIDEO_VAE, "latents_mean": [0.1 * i for i in range(8)],
                                              "latents_std": [1.0 + 0.1 * i for i in range(8)]}).eval()
    audio_vae = diffusers.AutoencoderKLMiniMaxH3Audio(
        encoder_dim=4, latent_dim=16, latent_channels=8, num_attention_heads=2, decoder_dim=128,
        resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1,),), latents_mean=[0.05 * i for i in range(8)],
        latents_std=[1.0 - 0.05 * i for i in range(8)]).eval()
    with torch.no_grad():  # layer scales and SnakeBeta parameters start at 0 in diffusers: make them count
        for name, p in [*vae.named_parameters(), *audio_vae.named_parameters()]:
            if name.endswith(("scale1", "scale2", ".alpha", ".beta")):
                p.copy_(torch.randn_like(p) * 0.3)
    transformer = h3_transformer(1)
    for name, module in (("transformer", transformer), ("vae", vae), ("audio_vae", audio_vae)):
        module.save_pretrained(tmp_path / name)
    pipe = SequentialPipelineBlocks.from_blocks_dict(
        {"denoise": MiniMaxH3CoreDenoiseStep, "decode": MiniMaxH3DecodeStep}).init_pipeline()
    pipe.update_components(transformer=transformer, vae=vae, audio_vae=audio_vae,
                           scheduler=diffusers.MiniMaxH3Scheduler(shift=12.0),
                           audio_scheduler=diffusers.MiniMaxH3Scheduler(shift=3.0))
    pipe.set_progress_bar_config(disable=True)
    g = torch.Generator().manual_seed(2)
    text = torch.randn(1, 6, 32, generator=g)
    tags = torch.tensor([1, 1, 0, 0, 1, 1])
    noise = torch.randn(1, 8, 37, 8, 8, generator=g)  # 124 frames (5 s) at 32x32: 37 latent frames of 8x8
    audio_noise = torch.randn(2, 8, 207, generator=g)  # 207 audio latents a channel
    ref = pipe(prompt_embeds=text, text_token_tags=tags, height=32, width=32, num_frames=124, num_inference_steps=4,
               latents=noise, audio_latents=audio_noise, output_type="np", output=["videos", "audio"])
    steps = []
    out = generate_t2va(load_h3_transformer(tmp_path / "transformer"), load_h3_video_clip_decoder(tmp_path / "vae"),
                        load_h3_audio_decoder(tmp_path / "audio_vae"), mx.array(text.numpy()), tags.numpy(),
                        mx.array(noise.numpy()), mx.array(audio_noise.numpy()), steps=4,
                        on_step=lambda i, n: steps.append((i, n)))
    assert steps == [(0, 3), (1, 3), (2, 3)]
    frames, audio = np.asarray(ref["videos"])[0], ref["audio"][0].numpy()
    assert out.frames.shape == frames.shape == (124, 32, 32, 3) and out.audio.shape == audio.shape == (2, 207 * 800)
    assert out.sample_rate == 32000
    # measured: frames 7e-8, audio 2e-7 (rel. L2)
    assert _rel(out.frames, frames) < 1e-5 and _rel(out.audio, audio) < 1e-5
