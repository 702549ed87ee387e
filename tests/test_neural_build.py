"""Tiny random Wan / Wan-VACE / LTX pipelines built in code and saved as diffusers folders.

The other neural tests import the builders from here; the tests in this file check that the
folders round-trip through the same loader users go through.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

WORDS = (
    "a the of and in on at with to shot camera wide medium close up office street man woman "
    "glasses blue shirt walks talks sits looks dolly pan tilt orbit push pull day night"
).split()


def word_tokenizer():
    """A word-level tokenizer (no download) wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def _umt5(d_model: int = 32):
    from transformers import UMT5Config, UMT5EncoderModel

    config = UMT5Config(vocab_size=64, d_model=d_model, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                        relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    return UMT5EncoderModel(config)


def _wan_vae():
    from diffusers import AutoencoderKLWan

    return AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                            temperal_downsample=[False, True, True])


def _scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(shift=3.0)


def build_wan(folder: Path) -> Path:
    """A 2-layer random WanPipeline saved to ``folder``."""
    from diffusers import WanPipeline, WanTransformer3DModel

    torch.manual_seed(0)
    transformer = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
        text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
        qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
    )
    pipe = WanPipeline(tokenizer=word_tokenizer(), text_encoder=_umt5(), vae=_wan_vae(), scheduler=_scheduler(),
                       transformer=transformer)
    pipe.save_pretrained(folder)
    return folder


def build_wan_vace(folder: Path) -> Path:
    """A 3-layer random WanVACEPipeline (VACE blocks on layers 0 and 2) saved to ``folder``."""
    from diffusers import WanVACEPipeline, WanVACETransformer3DModel

    torch.manual_seed(0)
    transformer = WanVACETransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
        text_dim=32, freq_dim=256, ffn_dim=32, num_layers=3, cross_attn_norm=True,
        qk_norm="rms_norm_across_heads", rope_max_seq_len=32, vace_layers=[0, 2], vace_in_channels=96,
    )
    pipe = WanVACEPipeline(tokenizer=word_tokenizer(), text_encoder=_umt5(), vae=_wan_vae(),
                           scheduler=_scheduler(), transformer=transformer)
    pipe.save_pretrained(folder)
    return folder


def build_ltx(folder: Path, condition: bool = False) -> Path:
    """A 1-layer random LTXPipeline (or LTXConditionPipeline) with a tiny causal VAE saved to ``folder``."""
    from diffusers import AutoencoderKLLTXVideo, LTXConditionPipeline, LTXPipeline, LTXVideoTransformer3DModel
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    transformer = LTXVideoTransformer3DModel(
        in_channels=8, out_channels=8, patch_size=1, patch_size_t=1, num_attention_heads=4, attention_head_dim=8,
        cross_attention_dim=32, num_layers=1, caption_channels=32,
    )
    vae = AutoencoderKLLTXVideo(
        in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1), spatio_temporal_scaling=(True, True, False, False),
        decoder_spatio_temporal_scaling=(True, True, False, False), decoder_inject_noise=(False,) * 5,
        upsample_residual=(False,) * 4, upsample_factor=(1,) * 4, timestep_conditioning=False,
        patch_size=1, patch_size_t=1, encoder_causal=True, decoder_causal=False,
    )
    text = T5EncoderModel(T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                                   relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1,
                                   decoder_start_token_id=0))
    cls = LTXConditionPipeline if condition else LTXPipeline
    pipe = cls(scheduler=_scheduler(), vae=vae, text_encoder=text, tokenizer=word_tokenizer(),
                       transformer=transformer)
    pipe.save_pretrained(folder)
    return folder


BUILDERS = {"wan": build_wan, "wan-vace": build_wan_vace, "ltx": build_ltx}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """Each tiny pipeline saved once per test session."""
    root = tmp_path_factory.mktemp("tiny_models")
    return {name: build(root / name) for name, build in BUILDERS.items()}


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_tiny_folder_loads_through_the_user_loader(family, tmp_path):
    from daotai.runtime.device import resolve_runtime
    from daotai.runtime.models import load_pipeline

    folder = BUILDERS[family](tmp_path / family)
    pipe, model = load_pipeline(str(folder), family, resolve_runtime("cpu"))
    assert model.spec is None and model.path == folder.resolve()
    assert pipe.transformer.dtype == torch.float32  # CPU rule: fp32 everywhere
    assert sum(p.numel() for p in pipe.transformer.parameters()) < 2_000_000


def test_footprint_measured_from_a_folder_counts_every_parameter(tmp_path):
    from daotai.runtime.device import resolve_runtime
    from daotai.runtime.memory import footprint_from_folder, plan_placement
    from daotai.runtime.models import load_pipeline

    folder = build_wan(tmp_path / "wan")
    footprint = footprint_from_folder(folder, "wan")
    pipe, _ = load_pipeline(str(folder), "wan", resolve_runtime("cpu"))
    for component in ("transformer", "text_encoder", "vae"):
        counted = sum(p.numel() for p in getattr(pipe, component).parameters())
        assert getattr(footprint, f"{component}_b") * 1e9 == pytest.approx(counted, abs=1)
    assert (footprint.hidden, footprint.ffn, footprint.layers) == (24, 32, 2)
    assert plan_placement(footprint, 64, 64, 9, 4 * 1024**3).tier == "none"


def test_accelerator_dtype_rules_reach_each_component(tmp_path):
    """The CUDA rule (bf16 transformer and text encoder, float32 VAE) applied at load time, checked on CPU."""
    from daotai.runtime.device import Runtime, dtype_rule
    from daotai.runtime.models import load_pipeline

    folder = build_wan(tmp_path / "wan")
    runtime = Runtime("cpu", "cpu", *dtype_rule("cuda"), memory_bytes=0)
    pipe, _ = load_pipeline(str(folder), "wan", runtime)
    assert pipe.transformer.blocks[0].attn1.to_q.weight.dtype == torch.bfloat16
    assert pipe.text_encoder.dtype == torch.bfloat16
    assert pipe.vae.dtype == torch.float32
