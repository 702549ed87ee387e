"""What the tests build and share: tiny random diffusers models, the word-level tokenizer they
use, a small script helper, PNG bytes and encoded clips.

Everything is built in code (nothing is downloaded). torch, diffusers, transformers and OpenCV
are imported inside the builders, so test modules that never build a model can import this one
without them. tests/conftest.py turns the model folders into session fixtures (``tiny_wan``,
``tiny_vace``, ``tiny_ltx``); tests that need a variant call the builders here with overrides.
"""

from __future__ import annotations

import io
import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from daotai.encode.video import EncodeSettings, VideoWriter

# ------------------------------------------------------------------ tiny diffusers models

WORDS = (
    "a the of and in on at with to shot camera wide medium close up office street man woman "
    "glasses blue shirt walks talks sits looks dolly pan tilt orbit push pull day night"
).split()

# The 2-block Wan transformer every tiny Wan model starts from (text-to-video, 2 heads x 12).
WAN_TRANSFORMER: dict[str, Any] = dict(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
    text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
)
# diffusers' own tiny Wan VAE layout (z_dim 16 to match the transformer's channels).
WAN_VAE: dict[str, Any] = dict(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                               temperal_downsample=[False, True, True])
# A 2-layer UMT5 text encoder over the word tokenizer's ids (d_model 32 = the transformer's text_dim).
UMT5: dict[str, Any] = dict(vocab_size=64, d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                            relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1,
                            decoder_start_token_id=0)


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


def umt5(**overrides):
    """A random UMT5EncoderModel (UMT5 with ``overrides``); draws from torch's global generator."""
    from transformers import UMT5Config, UMT5EncoderModel

    return UMT5EncoderModel(UMT5Config(**{**UMT5, **overrides}))


def wan_vae(**overrides):
    """A random AutoencoderKLWan (WAN_VAE with ``overrides``); draws from torch's global generator."""
    from diffusers import AutoencoderKLWan

    return AutoencoderKLWan(**{**WAN_VAE, **overrides})


def flow_scheduler():
    """The flow-matching Euler scheduler the tiny pipelines are saved with."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(shift=3.0)


def wan_transformer(seed: int = 0, **overrides):
    """A random WanTransformer3DModel (WAN_TRANSFORMER with ``overrides``) in eval mode, seeded first.

    Variants pass diffusers' own arguments, e.g. ``attention_head_dim=16`` for FP8-eligible widths or
    ``image_dim=24, added_kv_proj_dim=24`` for image cross-attention.
    """
    import torch
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    return WanTransformer3DModel(**{**WAN_TRANSFORMER, **overrides}).eval()


def build_wan(folder: Path, **transformer) -> Path:
    """A random WanPipeline (2 layers unless ``transformer`` overrides say otherwise) saved to ``folder``."""
    from diffusers import WanPipeline

    pipe = WanPipeline(transformer=wan_transformer(**transformer), tokenizer=word_tokenizer(), text_encoder=umt5(),
                       vae=wan_vae(), scheduler=flow_scheduler())
    pipe.save_pretrained(folder)
    return folder


def published_camera_adapter(dim: int, seed: int = 0, stride: int = 4, downscale: int = 8,
                             patch: tuple[int, int] = (2, 2), blocks: int = 1, prefix: str = "") -> dict[str, Any]:
    """Random Control-Camera adapter tensors under the published checkpoint's names (``control_adapter.*``).

    Shapes as in the released checkpoints: a patch-sized convolution from 6 x ``stride`` ray channels
    unshuffled by ``downscale`` to ``dim``, then ``blocks`` residual blocks of two 3x3 convolutions.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=generator) * 0.02

    unshuffled = 6 * stride * downscale * downscale
    state = {f"{prefix}control_adapter.conv.weight": rand(dim, unshuffled, *patch),
             f"{prefix}control_adapter.conv.bias": rand(dim)}
    for i in range(blocks):
        for conv in ("conv1", "conv2"):
            state[f"{prefix}control_adapter.residual_blocks.{i}.{conv}.weight"] = rand(dim, dim, 3, 3)
            state[f"{prefix}control_adapter.residual_blocks.{i}.{conv}.bias"] = rand(dim)
    return state


# diffusers' Wan names -> the original Wan checkpoints' (what the published Control-Camera files use),
# in the order they are applied; the inverse of diffusers' convert_wan_transformer_to_diffusers.
_ORIGINAL_WAN_NAMES = (
    ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
    ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
    ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
    ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
    ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
    ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
    ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
    ("attn1", "self_attn"), ("attn2", "cross_attn"), (".to_out.0.", ".o."), (".to_q.", ".q."), (".to_k.", ".k."),
    (".to_v.", ".v."), (".add_k_proj.", ".k_img."), (".add_v_proj.", ".v_img."), (".norm_added_k.", ".norm_k_img."),
    ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2"), (".norm2.", ".norm3."), ("proj_out", "head.head"),
)


def original_wan_names(state: dict[str, Any]) -> dict[str, Any]:
    """A diffusers WanTransformer3DModel state dict under the original Wan checkpoint names."""
    renamed = {}
    for key, tensor in state.items():
        new = key
        for ours, theirs in _ORIGINAL_WAN_NAMES:
            new = new.replace(ours, theirs)
        if new == "scale_shift_table":
            new = "head.modulation"
        elif new.endswith(".scale_shift_table"):
            new = new[: -len("scale_shift_table")] + "modulation"
        renamed[new] = tensor.detach().clone().contiguous()
    return renamed


def published_camera_checkpoint(folder: Path, seed: int = 0) -> tuple[Path, Any]:
    """A random Control-Camera checkpoint in VideoX-Fun's layout (original Wan names plus control_adapter.*)
    saved as ``folder/diffusion_pytorch_model.safetensors``; returns the folder and the transformer it holds."""
    from safetensors.torch import save_file

    transformer = wan_transformer(seed, in_channels=32, image_dim=24, added_kv_proj_dim=24)
    dim = WAN_TRANSFORMER["num_attention_heads"] * WAN_TRANSFORMER["attention_head_dim"]
    folder.mkdir(parents=True, exist_ok=True)
    state = {**original_wan_names(transformer.state_dict()), **published_camera_adapter(dim, seed + 1)}
    save_file(state, str(folder / "diffusion_pytorch_model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"_class_name": "WanModel", "in_dim": 32, "model_type": "i2v"}))
    return folder, transformer


def build_wan_camera(folder: Path, seed: int = 0) -> Path:
    """A random Control-Camera-like WanPipeline saved to ``folder``: Fun input layout (noisy + start latents,
    32 channels), image cross-attention, and the adapter under its published names in ``camera_adapter/``."""
    from safetensors.torch import save_file

    build_wan(folder, in_channels=32, image_dim=24, added_kv_proj_dim=24)
    dim = WAN_TRANSFORMER["num_attention_heads"] * WAN_TRANSFORMER["attention_head_dim"]
    (folder / "camera_adapter").mkdir()
    save_file(published_camera_adapter(dim, seed), str(folder / "camera_adapter" / "diffusion_pytorch_model.safetensors"))
    return folder


def build_wan_camera_i2v(folder: Path, seed: int = 0) -> Path:
    """A random WanImageToVideoPipeline saved to ``folder`` around a Control-Camera-like transformer (Fun input
    layout: 32 channels), with a tiny CLIP image encoder and the adapter under its published names."""
    import torch
    from diffusers import WanImageToVideoPipeline
    from safetensors.torch import save_file
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    encoder = CLIPVisionModelWithProjection(CLIPVisionConfig(
        hidden_size=8, projection_dim=8, num_hidden_layers=2, num_attention_heads=2, image_size=32,
        intermediate_size=16, patch_size=4))
    pipe = WanImageToVideoPipeline(
        transformer=wan_transformer(seed, in_channels=32, image_dim=8, added_kv_proj_dim=24), tokenizer=word_tokenizer(),
        text_encoder=umt5(), vae=wan_vae(), scheduler=flow_scheduler(), image_encoder=encoder,
        image_processor=CLIPImageProcessor(crop_size=32, size=32))
    pipe.save_pretrained(folder)
    dim = WAN_TRANSFORMER["num_attention_heads"] * WAN_TRANSFORMER["attention_head_dim"]
    (folder / "camera_adapter").mkdir()
    save_file(published_camera_adapter(dim, seed), str(folder / "camera_adapter" / "diffusion_pytorch_model.safetensors"))
    return folder


def build_wan_vace(folder: Path, **transformer_overrides) -> Path:
    """A 3-layer random WanVACEPipeline (VACE blocks on layers 0 and 2) saved to ``folder``; overrides are
    WanVACETransformer3DModel arguments (e.g. ``attention_head_dim=32, ffn_dim=128`` for 64-wide groups)."""
    import torch
    from diffusers import WanVACEPipeline, WanVACETransformer3DModel

    torch.manual_seed(0)
    transformer = WanVACETransformer3DModel(**{**WAN_TRANSFORMER, "num_layers": 3, "vace_layers": [0, 2],
                                               "vace_in_channels": 96, **transformer_overrides})
    pipe = WanVACEPipeline(tokenizer=word_tokenizer(), text_encoder=umt5(), vae=wan_vae(),
                           scheduler=flow_scheduler(), transformer=transformer)
    pipe.save_pretrained(folder)
    return folder


def build_ltx(folder: Path, condition: bool = False) -> Path:
    """A 1-layer random LTXPipeline (or LTXConditionPipeline) with a tiny causal VAE saved to ``folder``."""
    import torch
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
    pipe = cls(scheduler=flow_scheduler(), vae=vae, text_encoder=text, tokenizer=word_tokenizer(),
               transformer=transformer)
    pipe.save_pretrained(folder)
    return folder


def qwen3vl_without_torchvision() -> bool:
    """Let a Qwen3-VL processor load and read videos where torchvision is not installed; True if patched.

    transformers runs Qwen3-VL's video processor through torchvision, and without it even builds no
    Qwen3VLProcessor (its class check trips over the absent video mapping). Here CPU torch has no
    matching torchvision wheel, so the tests make two substitutions, and only when it is missing:
    the class check finds ``VideoProcessorMixin``, and the video processor's resize and rescale run
    in PIL and numpy (its own ``smart_resize`` and ``patchify`` do the rest, so the shapes and the
    patch layout are transformers' own). With torchvision installed nothing is patched.
    """
    import importlib
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        return False
    import torch
    import transformers.processing_utils as processing
    from PIL import Image
    from transformers.feature_extraction_utils import BatchFeature
    from transformers.video_processing_utils import VideoProcessorMixin

    if getattr(processing, "_daotai_tests_patched", False):
        return True
    qwen = importlib.import_module("transformers.models.qwen3_vl.video_processing_qwen3_vl")
    auto = importlib.import_module("transformers.models.auto.video_processing_auto").AutoVideoProcessor
    lookup = processing.ProcessorMixin.get_possibly_dynamic_module

    def find(name: str):
        return VideoProcessorMixin if name == "VideoProcessorMixin" else lookup(name)

    class PilVideoProcessor(qwen.Qwen3VLVideoProcessor):
        def __call__(self, videos, return_tensors=None, **kwargs):
            patch, merge, temporal = self.patch_size, self.merge_size, self.temporal_patch_size
            flat, grids = [], []
            for video in videos:
                video = np.asarray(video)  # (F, H, W, 3) uint8
                height, width = qwen.smart_resize(num_frames=len(video), height=video.shape[1], width=video.shape[2],
                                                  temporal_factor=temporal, factor=patch * merge,
                                                  min_pixels=self.size["shortest_edge"],
                                                  max_pixels=self.size["longest_edge"])
                frames = np.stack([np.asarray(Image.fromarray(f).resize((width, height), Image.BICUBIC)) for f in video])
                pixels = (frames / 255.0 - np.array(self.image_mean)) / np.array(self.image_std)
                tensor = torch.from_numpy(pixels.astype(np.float32)).permute(0, 3, 1, 2)[None]  # (1, F, 3, H, W)
                patches, grid_t, grid_h, grid_w = self.patchify(tensor, patch_size=patch, merge_size=merge,
                                                                temporal_patch_size=temporal)
                flat.append(patches[0])
                grids.append([grid_t, grid_h, grid_w])
            return BatchFeature({"pixel_values_videos": torch.cat(flat), "video_grid_thw": torch.tensor(grids)},
                                tensor_type=return_tensors)

    processing.ProcessorMixin.get_possibly_dynamic_module = staticmethod(find)
    auto.from_pretrained = classmethod(lambda cls, path, *args, **kwargs: PilVideoProcessor.from_pretrained(path, **kwargs))
    processing._daotai_tests_patched = True
    return True


# MiniMax-H3 at toy size: every component class of the released model. The video VAE keeps the
# 17-frame chunks (5 latents each) with 4x spatial compression, the Qwen3-VL conditioner has the
# 51 decoder layers MiniMax-H3 reads hidden state 50 of (at width 32), and the canvas settings
# shrink the 768 short edge to 32 pixels, so a 5 s generation is 124 frames of 56x32.
H3_CANVAS = dict(canvas_short_edge=32, canvas_max_pixels=32 * 64, reference_image_short_edge=32)
H3_SPECIAL = ("<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<unk>")


def h3_tokenizer():
    """A word-level Qwen2 fast tokenizer with the vision tokens Qwen3-VL's presentation uses."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import Qwen2TokenizerFast

    vocab: dict[str, int] = {}
    for word in (*H3_SPECIAL, *WORDS, "Picture", "Video", "Audio", "previz", "frame"):
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = Qwen2TokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<|endoftext|>",
                                   eos_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": list(H3_SPECIAL[1:5])})
    return tokenizer


def h3_transformer(seed: int):
    """A 2-block random MiniMaxH3Transformer3DModel (width 32, 2 heads x 16)."""
    import torch
    from diffusers import MiniMaxH3Transformer3DModel

    torch.manual_seed(seed)
    return MiniMaxH3Transformer3DModel(
        num_attention_heads=2, attention_head_dim=16, hidden_size=32, num_layers=2, num_refiner_layers=1, ffn_dim=32,
        in_channels=8, audio_in_channels=8, text_dim=32, freq_dim=32, time_embed_hidden_dim=32, time_embed_dim=16,
        rope_freq_dim=2,
    ).eval()


def build_h3(folder: Path) -> Path:
    """A random MiniMaxH3ModularPipeline with both transformer partitions saved to ``folder`` (modular layout)."""
    import torch
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Scheduler
    from diffusers.modular_pipelines import MiniMaxH3Blocks, MiniMaxH3ModularPipeline
    from transformers import Qwen2VLImageProcessorPil, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

    qwen3vl_without_torchvision()
    video_processing = __import__("importlib").import_module("transformers.models.qwen3_vl.video_processing_qwen3_vl")
    tokenizer = h3_tokenizer()
    ids = tokenizer.get_vocab()
    torch.manual_seed(0)
    conditioner = Qwen3VLForConditionalGeneration(Qwen3VLConfig(
        text_config=dict(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=51,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2],
                                          "mrope_interleaved": True}),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2, deepstack_visual_indexes=[0],
                           num_position_embeddings=64),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )).eval()
    pixels = {"shortest_edge": 32 * 32, "longest_edge": 64 * 64}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                                 min_pixels=pixels["shortest_edge"], max_pixels=pixels["longest_edge"]),
        tokenizer=tokenizer,
        video_processor=video_processing.Qwen3VLVideoProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                                               size=pixels),
        chat_template="{{ '' }}",
    )
    vae = AutoencoderKLMiniMaxH3(
        latent_channels=8, block_out_channels=(8, 8), layers_per_block=1, spatial_downsample_factors=(2, 2),
        temporal_downsample_factors=(2, 2), norm_num_groups=4, decoder_num_layers=1, decoder_num_attention_heads=2,
        decoder_attention_head_dim=8, decoder_num_register_tokens=1, latents_mean=(0.0,) * 8, latents_std=(1.0,) * 8,
    ).eval()
    audio_vae = AutoencoderKLMiniMaxH3Audio(
        encoder_dim=4, latent_dim=16, latent_channels=8, num_attention_heads=2, decoder_dim=128,
        resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1,),), latents_mean=[0.0] * 8, latents_std=[1.0] * 8,
    ).eval()
    pipe = MiniMaxH3ModularPipeline(blocks=MiniMaxH3Blocks())
    pipe.update_components(text_encoder=conditioner, tokenizer=tokenizer, processor=processor, vae=vae,
                           audio_vae=audio_vae, scheduler=MiniMaxH3Scheduler(shift=12.0),
                           audio_scheduler=MiniMaxH3Scheduler(shift=3.0), transformer=h3_transformer(1),
                           transformer_ref=h3_transformer(2))
    pipe.register_to_config(**H3_CANVAS)
    pipe.save_pretrained(str(folder), overwrite_modular_index=True)
    return folder


# LTX-2 at toy size: every component class of the release. The video VAE keeps LTX-2's 32x spatial and 8x
# temporal compression (patch 4, three spatio-temporal stages), so the frame (8k+1) and size (32) rules are the
# real ones; Gemma 3 is 2 layers at width 32 (the connectors' width); the vocoder upsamples 160x (the audio VAE's
# mel hop), so a generation's sound spans its frames at 16 kHz.
LTX2_GEMMA = dict(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16, max_position_embeddings=2048, sliding_window=64)
LTX2_SIGLIP = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                   patch_size=14)


def build_ltx2(folder: Path, seed: int = 0, upsampler: bool = False) -> Path:
    """A random LTX2Pipeline (2-block transformer, tiny Gemma 3, video and audio VAEs, vocoder) saved to ``folder``;
    ``upsampler``: with a tiny 2x latent upsampler in ``latent_upsampler/``, where the release keeps it."""
    import torch
    from diffusers import (
        AutoencoderKLLTX2Audio,
        AutoencoderKLLTX2Video,
        FlowMatchEulerDiscreteScheduler,
        LTX2Pipeline,
        LTX2VideoTransformer3DModel,
    )
    from diffusers.pipelines.ltx2 import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    torch.manual_seed(seed)
    gemma = Gemma3ForConditionalGeneration(Gemma3Config(text_config=LTX2_GEMMA, vision_config=LTX2_SIGLIP,
                                                        mm_tokens_per_image=4)).eval()
    width = LTX2_GEMMA["hidden_size"]
    transformer = LTX2VideoTransformer3DModel(
        in_channels=4, out_channels=4, patch_size=1, patch_size_t=1, num_attention_heads=2, attention_head_dim=8,
        cross_attention_dim=16, audio_in_channels=4, audio_out_channels=4, audio_num_attention_heads=2,
        audio_attention_head_dim=4, audio_cross_attention_dim=8, num_layers=2, qk_norm="rms_norm_across_heads",
        caption_channels=width, rope_double_precision=False, rope_type="split",
    ).eval()
    connectors = LTX2TextConnectors(
        caption_channels=width, text_proj_in_factor=LTX2_GEMMA["num_hidden_layers"] + 1,
        video_connector_num_attention_heads=4, video_connector_attention_head_dim=8, video_connector_num_layers=1,
        video_connector_num_learnable_registers=None, audio_connector_num_attention_heads=4,
        audio_connector_attention_head_dim=8, audio_connector_num_layers=1, audio_connector_num_learnable_registers=None,
        connector_rope_base_seq_len=32, rope_theta=10000.0, rope_double_precision=False,
        causal_temporal_positioning=False, rope_type="split",
    ).eval()
    vae = AutoencoderKLLTX2Video(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8,) * 3,
        decoder_block_out_channels=(8,) * 3, layers_per_block=(1,) * 4, decoder_layers_per_block=(1,) * 4,
        spatio_temporal_scaling=(True,) * 3, decoder_spatio_temporal_scaling=(True,) * 3,
        decoder_inject_noise=(False,) * 4, downsample_type=("spatiotemporal",) * 3,
        upsample_type=("spatiotemporal",) * 3, upsample_residual=(False,) * 3, upsample_factor=(1,) * 3,
        timestep_conditioning=False, patch_size=4, encoder_causal=True, decoder_causal=False,
    ).eval()
    audio_vae = AutoencoderKLLTX2Audio(
        base_channels=4, output_channels=2, ch_mult=(1,), num_res_blocks=1, attn_resolutions=None, in_channels=2,
        resolution=32, latent_channels=2, norm_type="pixel", causality_axis="height", dropout=0.0,
        mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True, mel_bins=8,
    ).eval()
    vocoder = LTX2Vocoder(
        in_channels=2 * 8, hidden_channels=32, out_channels=2, upsample_kernel_sizes=[16, 10, 8],
        upsample_factors=[8, 5, 4], resnet_kernel_sizes=[3], resnet_dilations=[[1, 3, 5]],
        leaky_relu_negative_slope=0.1, output_sampling_rate=16000,
    ).eval()
    pipe = LTX2Pipeline(transformer=transformer, vae=vae, audio_vae=audio_vae, scheduler=FlowMatchEulerDiscreteScheduler(),
                        text_encoder=gemma, tokenizer=word_tokenizer(), connectors=connectors, vocoder=vocoder)
    pipe.save_pretrained(folder)
    if upsampler:
        from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

        LTX2LatentUpsamplerModel(in_channels=4, mid_channels=32, num_blocks_per_stage=1).save_pretrained(
            folder / "latent_upsampler")
    return folder


# The model family each builder's folder is for, as `--backend` and the loader name it.
BUILDERS = {"wan": build_wan, "wan-vace": build_wan_vace, "ltx": build_ltx}


# ------------------------------------------------------------------ scripts


def plan_from(path: Path, data: dict):
    """Write the script ``data`` to ``path`` as JSON, load and plan it: (plan, path)."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    path.write_text(json.dumps(data))
    return plan_script(load_script(path)), path


# ------------------------------------------------------------------ images


def png_bytes(width: int = 8, height: int = 8, rgb: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A valid one-colour RGB PNG."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims a huge image (a decompression bomb's calling card)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 1024))
            + chunk(b"IEND", b""))


# ------------------------------------------------------------------ clips

FINE = EncodeSettings(crf=8, tune="psnr")  # near-lossless, so codec loss does not decide the comparisons


def backdrop(width: int, height: int, seed: int = 1) -> np.ndarray:
    """A sharp synthetic picture: soft-edged discs and text on a flat ground; (h, w, 3) uint8."""
    import cv2

    rng = np.random.default_rng(seed)
    image = np.empty((height, width, 3), np.uint8)
    image[:] = (70, 90, 120)
    for i in range(max(20, width * height // 900)):
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        cv2.circle(image, centre, int(rng.integers(4, 30)), colour, -1, cv2.LINE_AA)
        if i % 4 == 0:
            cv2.putText(image, f"shot {i}", centre, cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    return cv2.GaussianBlur(image, (0, 0), 0.7)  # a little lens softness, as rendered frames have


def pan_frames(n: int, width: int = 320, height: int = 180, speed: float = 3.0) -> Iterator[np.ndarray]:
    """A smooth pan across the backdrop with a disc moving the other way: (H, W, 3) uint8 each."""
    import cv2

    big = backdrop(width + int(speed * n) + 40, height + 40)
    for k in range(n):
        shift = np.float32([[1, 0, -speed * k], [0, 1, -20]])
        frame = cv2.warpAffine(big, shift, (width, height), flags=cv2.INTER_LINEAR)
        cv2.circle(frame, (int(60 + 5 * k), height // 2), 25, (240, 200, 40), -1, cv2.LINE_AA)
        yield frame


def write_clip(path: Path, frames, fps, settings: EncodeSettings = FINE) -> Path:
    """Encode frames to path (atomic writer) and return the path."""
    frames = list(frames)
    h, w = frames[0].shape[:2]
    with VideoWriter(path, w, h, fps, settings) as out:
        for frame in frames:
            out.write(frame)
    return path


def drain(events):
    """Drain a generator that returns a value (e.g. enhance_iter): (events it yielded, its return value)."""
    seen = []
    while True:
        try:
            seen.append(next(events))
        except StopIteration as stop:
            return seen, stop.value


def wait_for(predicate, timeout_s: float, step_s: float = 0.05):
    """Poll until predicate() is truthy; its value, or AssertionError on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step_s)
    raise AssertionError(f"condition not met within {timeout_s} s")
