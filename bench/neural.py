"""Speed levers of the neural path: our `wan` backend against stock diffusers `WanPipeline`.

The full-size Wan2.1-T2V-1.3B architecture (30 blocks, 12 heads x 128, FFN 8960, text
width 4096; 1.42 B transformer parameters) and the stock Wan VAE are built with random
weights on the GPU and saved as a diffusers folder; every contender loads that folder in
this one process. The UMT5 text encoder keeps its 4096 width but only 2 layers and a word
vocabulary (both sides carry the same encoder, so its share is small and equal).

Two baselines (bench/baselines.py): ``stock`` as shipped, and ``strong`` = stock with the two lines
a user can type, ``set_attention_backend`` with the fastest diffusers backend that works here
(cuDNN, flash, FA3, Sage: tried, timed on one attention call at the model's shape, the fastest
kept) and ``compile_repeated_blocks(fullgraph=True)``. Every ratio is given against both, and the
run ends with the issue's targets met or missed (Wan: exact >= 1.15x strong, fast >= 4x stock and
>= 3.4x strong at >= 40 dB against exact; no peak above stock's).

Contenders (each loads fresh, warms up on the full-size request with 2 steps — which also
compiles when a config compiles; that warm-up is reported apart as ``warm s`` — then renders
the measured request once per repeat, best kept):
- ``stock``: ``WanPipeline.from_pretrained``, float32 VAE, PyTorch defaults.
- ``exact`` / ``fast``: our backend with ``speed="exact"`` / ``speed="fast"`` (the levers the
  runtime selects on this device, see daotai.render.speed).
- ablations: our backend with exactly one lever on (``sdpa-cudnn``, ``sdpa-flash``, ``compile``,
  ``vae-bf16``, ``vae-cl``, ``cache-interval``, ``cache-fbc``).

Per contender: s/step (denoise seconds / steps, warm), end-to-end seconds (text encode +
denoise + VAE decode + frames to uint8 + MP4 encode) and each stage's share, peak GPU memory,
PSNR/SSIM of the decoded frames against stock's (and against ``exact``'s) at the same seed,
and the transformer's output on fixed inputs as relative L2 against stock eager (``n/a`` for
step caches, whose single forward is not the thing they change). With random weights a
first-block cache's decisions say nothing about real weights; the fixed-schedule
``cache-interval`` skips the same steps whatever the weights, so its ratio carries over.

    python bench/neural.py --mode all --steps 8     # NVIDIA GPU: ~6-8 minutes
    python bench/neural.py --tiny --mode fast       # CPU smoke test with a tiny random model

One shot split over several GPUs (``--gpus 1,2``, see daotai.render.neural.parallel): the same
shot rendered by our backend with ``gpus=N`` for each N, reporting s/step (steps 2..n, so the
first step's warm-up is left out), scaling efficiency (s/step at 1 / (N x s/step at N)), peak
memory per GPU (each rank's own peak; host resident memory on the CPU) and the frames' match
with the 1-GPU render (max abs difference in 8-bit levels, PSNR). ``--arch 14b`` builds the
Wan2.1-14B transformer (40 blocks, 40 heads x 128, FFN 13824), ``--model wan-vace`` the VACE
variant (VACE blocks on every 5th layer), ``--resolution 720p`` renders 1280x720::

    python bench/neural.py --gpus 1,2 --arch 14b --resolution 480p --steps 4   # 2 GPUs
    python bench/neural.py --gpus 1,2 --arch 14b --model wan-vace --steps 4
    python bench/neural.py --gpus 1,2 --tiny --model wan-vace   # CPU processes (gloo)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PROCESS_STARTED = time.perf_counter()

FULL = {
    "transformer": dict(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                        out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
                        cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024),
    "vae": dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                temperal_downsample=[False, True, True]),
    "text": dict(d_model=4096, d_kv=64, d_ff=10240, num_layers=2, num_heads=64),
    "width": 832, "height": 480, "frames": 81,
}
TINY = {
    "transformer": dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16,
                        out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2,
                        cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32),
    "vae": dict(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]),
    "text": dict(d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=2),
    "width": 64, "height": 64, "frames": 17,
}
# LTX-Video 2B (0.9.x): 28 blocks, 32 heads x 64, 128 latent channels, T5 width 4096; the 0.9.0 VAE.
LTX_FULL = {
    "transformer": dict(in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
                        attention_head_dim=64, cross_attention_dim=2048, num_layers=28, caption_channels=4096),
    "vae": dict(),
    "text": dict(d_model=4096, d_kv=64, d_ff=10240, num_layers=2, num_heads=64),
    "width": 768, "height": 512, "frames": 121,
}
LTX_TINY = {
    "transformer": dict(in_channels=8, out_channels=8, patch_size=1, patch_size_t=1, num_attention_heads=2,
                        attention_head_dim=8, cross_attention_dim=16, num_layers=1, caption_channels=32),
    "vae": dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 8, 8, 8),
                decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
                decoder_layers_per_block=(1, 1, 1, 1, 1), spatio_temporal_scaling=(True, True, False, False),
                decoder_spatio_temporal_scaling=(True, True, False, False),
                decoder_inject_noise=(False, False, False, False, False),
                upsample_residual=(False, False, False, False),
                upsample_factor=(1, 1, 1, 1), timestep_conditioning=False, patch_size=1, patch_size_t=1,
                encoder_causal=True, decoder_causal=False),
    "text": dict(d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=2),
    "width": 64, "height": 64, "frames": 9,
}
# Wan2.1-T2V-14B: 40 blocks, 40 heads x 128 (width 5120), FFN 13824 (14.3 B transformer parameters).
WAN_14B = {**FULL, "transformer": {**FULL["transformer"], "num_attention_heads": 40, "ffn_dim": 13824,
                                   "num_layers": 40}}
RESOLUTIONS = {"480p": (832, 480), "720p": (1280, 720)}
VACE_LAYER_STRIDE = 5  # Wan2.1-VACE puts a VACE block on every 5th layer (0, 5, ..., 35 in the 14B model)
VACE_IN_CHANNELS = 96  # control video latents (32) + mask (64), as in the released VACE models

FAMILY = {  # per model family: guidance, native fps, default steps, configs
    "wan": {"guidance": 5.0, "fps": 16, "steps": 8, "full": None, "tiny": None},
    "ltx": {"guidance": 3.0, "fps": 24, "steps": 20, "full": LTX_FULL, "tiny": LTX_TINY},
    "wan-vace": {"guidance": 5.0, "fps": 16, "steps": 8, "full": None, "tiny": None},
}
WORDS = ("a the of and in on at with medium wide close shot camera slowly pushes toward woman man "
         "office street blue shirt glasses walks looks stands light day night").split()


def word_tokenizer() -> Any:
    """A word-level fast tokenizer built in code (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def build_folder(config: dict, folder: Path, device: str, dtype: Any, family: str = "wan") -> Path:
    """Random-weight pipeline of ``family`` and ``config`` saved as a diffusers folder (built on ``device``)."""
    if family == "ltx":
        return build_ltx_folder(config, folder, device, dtype)
    import torch
    from diffusers import (
        AutoencoderKLWan,
        FlowMatchEulerDiscreteScheduler,
        WanPipeline,
        WanTransformer3DModel,
        WanVACEPipeline,
        WanVACETransformer3DModel,
    )
    from transformers import UMT5Config, UMT5EncoderModel

    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: 1.4 B random parameters take minutes on a CPU
        if family == "wan-vace":
            layers = config["transformer"]["num_layers"]
            transformer = WanVACETransformer3DModel(
                **config["transformer"], vace_layers=list(range(0, layers, VACE_LAYER_STRIDE)),
                vace_in_channels=VACE_IN_CHANNELS).to(dtype)
        else:
            transformer = WanTransformer3DModel(**config["transformer"]).to(dtype)
        vae = AutoencoderKLWan(**config["vae"]).to(torch.float32)
        text = UMT5EncoderModel(UMT5Config(vocab_size=64, relative_attention_num_buckets=32, pad_token_id=0,
                                           eos_token_id=1, decoder_start_token_id=0, **config["text"])).to(dtype)
    pipe_class = WanVACEPipeline if family == "wan-vace" else WanPipeline
    pipe = pipe_class(tokenizer=word_tokenizer(), text_encoder=text, vae=vae,
                      scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0), transformer=transformer)
    pipe.save_pretrained(folder)
    del pipe, transformer, vae, text
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return folder


def build_ltx_folder(config: dict, folder: Path, device: str, dtype: Any) -> Path:
    """Random-weight LTXPipeline (T5 text encoder cut to 2 layers at full width) saved to ``folder``."""
    import torch
    from diffusers import (
        AutoencoderKLLTXVideo,
        FlowMatchEulerDiscreteScheduler,
        LTXPipeline,
        LTXVideoTransformer3DModel,
    )
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    with torch.device(device):
        transformer = LTXVideoTransformer3DModel(**config["transformer"]).to(dtype)
        vae = AutoencoderKLLTXVideo(**config["vae"]).to(dtype)
        text = T5EncoderModel(T5Config(vocab_size=64, relative_attention_num_buckets=32, pad_token_id=0,
                                       eos_token_id=1, decoder_start_token_id=0, **config["text"])).to(dtype)
    pipe = LTXPipeline(tokenizer=word_tokenizer(), text_encoder=text, vae=vae,
                       scheduler=FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True), transformer=transformer)
    pipe.save_pretrained(folder)
    del pipe, transformer, vae, text
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return folder


@dataclass
class Measure:
    """One contender's numbers (seconds unless named)."""

    name: str
    steps: int
    load_s: float = 0.0
    warm_s: float = 0.0  # full-size 2-step warm-up: kernel warm-up and, where compiled, compilation
    text_s: float = 0.0
    denoise_s: float = 0.0
    decode_s: float = 0.0
    post_s: float = 0.0  # frames to uint8, retiming, MP4 encode
    # of post_s: the MP4 encode (daotai's writer, the same for everyone): stock's after its frames are bytes,
    # ours from the first frame the backend hands over (later frames are still arriving) to the file closed
    encode_s: float = 0.0
    # of post_s, where it goes: from the VAE decode's end to the first frame reaching the encoder (frames
    # to bytes, our hand-over), and the encode still running after the last frame reached it
    to_first_frame_s: float = 0.0
    after_last_frame_s: float = 0.0
    total_s: float = 0.0
    peak_bytes: int = 0
    peak_denoise_bytes: int = 0  # peak from the render's start to the VAE decode (text encoding + denoising)
    peak_decode_bytes: int = 0  # peak from the VAE decode to the end (decode, frames to bytes)
    held_at_decode_bytes: int = 0  # allocated as the VAE decode starts: what the decode stage carries in
    # allocated before this contender loaded, everything freed: what earlier contenders left behind
    # (counted in this one's peaks; the memory verdicts take it off)
    leftover_bytes: int = 0
    rel_l2: float | None = None  # transformer output vs stock eager on fixed inputs
    psnr_stock: float | None = None
    ssim_stock: float | None = None
    psnr_exact: float | None = None
    ssim_exact: float | None = None
    computed: str = ""  # transformer passes computed / called (step caches)
    levers: str = ""
    frames: Any = field(default=None, repr=False)  # (F, H, W, 3) uint8

    @property
    def s_per_step(self) -> float:
        return self.denoise_s / self.steps


class Clock:
    """Synchronised marks around text encoding and VAE decoding (same wrapping for every contender)."""

    def __init__(self, sync, reset_peak=lambda: None, peak=lambda: 0, allocated=lambda: 0):
        self.sync, self.reset_peak, self.peak, self.allocated = sync, reset_peak, peak, allocated
        self.reset()

    def reset(self) -> None:
        self.text_s = 0.0
        self.text_end: float | None = None
        self.decode_start: float | None = None
        self.decode_end: float | None = None
        self.decode_s = 0.0
        self.peak_denoise = 0
        self.held_at_decode = 0

    def wrap(self, pipe) -> None:
        encode, decode = pipe.encode_prompt, pipe.vae.decode

        def timed_encode(*args, **kwargs):
            self.sync()
            began = time.perf_counter()
            out = encode(*args, **kwargs)
            self.sync()
            self.text_end = time.perf_counter()
            self.text_s += self.text_end - began
            return out

        def timed_decode(*args, **kwargs):
            self.sync()
            began = time.perf_counter()
            if self.decode_start is None:
                self.decode_start = began
                self.peak_denoise = int(self.peak())  # then the peak restarts: decode's own is read at the end
                self.held_at_decode = int(self.allocated())  # latents, weights and whatever denoising left behind
                self.reset_peak()
            out = decode(*args, **kwargs)
            self.sync()
            self.decode_end = time.perf_counter()
            self.decode_s += self.decode_end - began
            return out

        pipe.encode_prompt = timed_encode
        pipe.vae.decode = timed_decode


def _device_tools(device: str):
    import torch

    if device.startswith("cuda"):
        return torch.cuda.synchronize, torch.cuda.reset_peak_memory_stats, torch.cuda.max_memory_allocated
    return (lambda: None), (lambda: None), (lambda: 0)


def _left_over(device: str) -> int:
    """Bytes still allocated once everything collectable is freed, before a contender loads."""
    _free(device)
    return int(_allocated(device)())


def _allocated(device: str):
    """Bytes the caching allocator has handed out now (0 off CUDA)."""
    import torch

    return torch.cuda.memory_allocated if device.startswith("cuda") else (lambda: 0)


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _drop_blas_workspaces(device: str) -> None:
    """Free the cuBLAS workspaces cached per (thread handle, stream) before a measured render.

    They live in PyTorch's caching allocator and count in the peak (32 MiB each by default on
    Hopper). Our backend renders in a worker thread, whose handle gets its own workspace, while the
    warm-up above ran in this thread; without this, ours would carry one idle workspace more than
    stock (which renders in this thread too), a bench artefact: a rendering process has one.
    """
    import torch

    if device.startswith("cuda") and hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
        torch.cuda.synchronize()
        torch._C._cuda_clearCublasWorkspaces()


def encode_mp4(frames, path: Path, fps: float) -> None:
    """(F, H, W, 3) uint8 frames → H.264 MP4 with daotai's writer (same settings for everyone)."""
    with Mp4(path, fps) as mp4:
        for frame in frames:
            mp4.write(frame)


def warm_encoder(work: Path, fps: float) -> None:
    """Encode a few tiny frames once, before any contender is timed.

    The first MP4 of a process pays PyAV's import and x264's first open (0.1-0.4 s here). Stock is
    measured first, so without this its end to end carried that one-time cost and every ratio
    against it was a few percent too kind (a rendering process pays it once, not per shot)."""
    import numpy as np

    encode_mp4(np.zeros((8, 64, 64, 3), np.uint8), work / "warm-encoder.mp4", fps)


def natural_encode_s(shape: tuple[int, int, int], fps: float, work: Path, repeats: int = 2) -> float | None:
    """Seconds (best of ``repeats``) to encode a natural-like picture of the clip's (F, H, W) from memory.

    Random weights decode to noise, which costs x264 several times a real picture's encode (13 MB
    for LTX's 5 s clip). Moving waves stand in for a real model's picture (bench/encode_runs.py),
    so the MP4 stage a user's render pays can be set beside the proxy's. None without PyAV.
    """
    from encode_runs import clip

    count, height, width = shape
    frames = clip(width, height, count, "smooth")
    best = None
    for attempt in range(repeats):
        began = time.perf_counter()
        encode_mp4(frames, work / f"natural-{attempt}.mp4", fps)
        seconds = time.perf_counter() - began
        best = seconds if best is None else min(best, seconds)
    return None if getattr(Mp4, "warned", False) else best


class Mp4:
    """daotai's writer, opened at the first frame (its size), with the same settings for everyone.

    Our backend's frames are written as its Frame events arrive, as a render hands them to its
    encoder: the encode's runs start while the later frames are still being delivered."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.writer = path, fps, None

    def write(self, frame) -> None:
        if self.writer is None:
            from fractions import Fraction

            try:
                from daotai.encode.video import EncodeSettings, VideoWriter
            except ImportError as error:  # PyAV missing on a measuring box: the MP4 stage is left out for everyone
                if not getattr(Mp4, "warned", False):
                    print(f"MP4 encode skipped for every contender ({error}); post = frames to uint8 only", flush=True)
                    Mp4.warned = True  # type: ignore[attr-defined]
                self.writer = False
                return
            self.writer = VideoWriter(self.path, frame.shape[1], frame.shape[0],
                                      Fraction(self.fps).limit_denominator(1001),
                                      EncodeSettings(codec="h264", crf=18, preset="veryfast"))
        if self.writer:
            self.writer.write(frame)

    def __enter__(self) -> "Mp4":
        return self

    def __exit__(self, kind, error, trace) -> None:
        if self.writer:
            self.writer.__exit__(kind, error, trace)


def fixed_inputs(config: dict, request, device: str, dtype, family: str = "wan"):
    """Transformer inputs for the output check: seeded latents, one timestep, seeded text states."""
    import torch

    generator = torch.Generator("cpu").manual_seed(1234)
    if family == "ltx":
        t_down, s_down = 8, 32  # LTX VAE: 8x in time, 32x in space; patch size 1 → one token per latent cell
        f, h, w = (request.frames - 1) // t_down + 1, request.height // s_down, request.width // s_down
        channels = config["transformer"]["in_channels"]
        latents = torch.randn(1, f * h * w, channels, generator=generator)  # (B, tokens, C) packed
        text = torch.randn(1, 128, config["transformer"]["caption_channels"], generator=generator)
        return {"hidden_states": latents.to(device, dtype), "encoder_hidden_states": text.to(device, dtype),
                "timestep": torch.tensor([500.0], device=device),
                "encoder_attention_mask": torch.ones(1, 128, device=device), "num_frames": f, "height": h,
                "width": w, "rope_interpolation_scale": (t_down / request.fps, s_down, s_down), "return_dict": False}
    latent_frames = (request.frames - 1) // 4 + 1
    latents = torch.randn(1, 16, latent_frames, request.height // 8, request.width // 8, generator=generator)
    text = torch.randn(1, 512, config["transformer"]["text_dim"], generator=generator)
    return {"hidden_states": latents.to(device, dtype), "timestep": torch.tensor([500.0], device=device),
            "encoder_hidden_states": text.to(device, dtype), "return_dict": False}


def forward_output(transformer, inputs):
    """Float32 CPU output of one forward on fixed inputs (Wan (1, 16, f, h, w); LTX (1, tokens, 128))."""
    import torch

    with torch.no_grad():
        return transformer(**inputs)[0].float().cpu()


def relative_l2(a, b) -> float:
    """||a - b|| / ||b||."""
    return float((a - b).norm() / b.norm())


def ssim(a, b) -> float:
    """Mean SSIM of two uint8 frame stacks on luma, every 4th frame (Gaussian window 11, sigma 1.5)."""
    import cv2
    import numpy as np

    values = []
    for x, y in zip(a[::4], b[::4], strict=True):
        x = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).astype(np.float64)  # (H, W) float64
        y = cv2.cvtColor(y, cv2.COLOR_RGB2GRAY).astype(np.float64)
        blur = lambda img: cv2.GaussianBlur(img, (11, 11), 1.5)  # noqa: E731
        mx, my = blur(x), blur(y)
        vx, vy, cov = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
        c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
        values.append(float(np.mean((2 * mx * my + c1) * (2 * cov + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2)))))
    return float(np.mean(values))


def psnr_stack(a, b) -> float:
    """PSNR in dB over whole uint8 frame stacks (inf when identical)."""
    import numpy as np

    mse = float(np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(255.0**2 / mse)


def run_stock(folder: Path, device: str, dtype, request, steps: int, inputs, work: Path, repeats: int,
              keep: int, family: str = "wan", config: dict | None = None, reference=None):
    """Stock diffusers as its documentation loads it, everything on the device: ``WanPipeline`` with a
    float32 VAE, or ``LTXPipeline`` wholly in ``dtype``.

    ``keep``: frames delivered (the plan's count; ours drops the native extra frame the same way).
    ``config`` given: the strong stock (bench/baselines.py) for that model config, its transformer output
    compared with ``reference`` (plain stock's).
    """
    import torch
    from diffusers import AutoencoderKLWan, LTXPipeline, WanPipeline

    from daotai.render.neural.retime import to_uint8

    sync, reset_peak, peak = _device_tools(device)
    leftover = _left_over(device)
    began = time.perf_counter()
    if family == "ltx":
        pipe = LTXPipeline.from_pretrained(folder, torch_dtype=dtype).to(device)
        extra = {"frame_rate": int(round(request.fps))}
    else:
        vae = AutoencoderKLWan.from_pretrained(folder, subfolder="vae", torch_dtype=torch.float32)
        pipe = WanPipeline.from_pretrained(folder, vae=vae, torch_dtype=dtype).to(device)
        extra = {}
    pipe.set_progress_bar_config(disable=True)
    levers = "diffusers defaults"
    if config is not None:
        from baselines import make_strong

        shape = (_tokens(config, family), config["transformer"]["num_attention_heads"],
                 config["transformer"]["attention_head_dim"])
        levers = make_strong(pipe.transformer, shape, device, dtype).describe()
    sync()
    measure = Measure("strong" if config is not None else "stock", steps, load_s=time.perf_counter() - began,
                      levers=levers)
    guidance = FAMILY[family]["guidance"]

    def generate(n_steps: int):
        return pipe(prompt=request.prompt, negative_prompt=request.negative_prompt, height=request.height,
                    width=request.width, num_frames=request.frames, num_inference_steps=n_steps,
                    guidance_scale=guidance, generator=torch.Generator("cpu").manual_seed(request.seed),
                    output_type="np", **extra).frames

    began = time.perf_counter()
    generate(2)  # warm-up at the measured size: kernels, allocator
    sync()
    measure.warm_s = time.perf_counter() - began
    output = forward_output(pipe.transformer, inputs)
    if reference is not None:
        measure.rel_l2 = relative_l2(output, reference)
    clock = Clock(sync, reset_peak, peak, _allocated(device))
    clock.wrap(pipe)
    best = None
    for _ in range(repeats):
        clock.reset()
        _drop_blas_workspaces(device)
        reset_peak()
        sync()
        began = time.perf_counter()
        frames = to_uint8(generate(steps))[:keep]  # (keep, H, W, 3) uint8
        encoding = time.perf_counter()
        encode_mp4(frames, work / f"{measure.name}.mp4", request.fps)
        total = time.perf_counter() - began
        encode_s = time.perf_counter() - encoding
        handed = dict(to_first_frame_s=encoding - (clock.decode_end or encoding), after_last_frame_s=encode_s)
        if best is None or total < best.total_s:
            best = replace(measure, text_s=clock.text_s, denoise_s=clock.decode_start - clock.text_end,
                           decode_s=clock.decode_s, total_s=total, peak_bytes=max(clock.peak_denoise, int(peak())),
                           peak_denoise_bytes=clock.peak_denoise, peak_decode_bytes=int(peak()), frames=frames,
                           held_at_decode_bytes=clock.held_at_decode, leftover_bytes=leftover,
                           encode_s=encode_s, **handed)
            best.post_s = total - best.text_s - best.denoise_s - best.decode_s
    pipe = None  # frees the pipeline (rebound, not deleted: generate() closes over it)
    if config is not None and hasattr(torch, "_dynamo"):
        torch._dynamo.reset()  # compiled graphs hold the dead model's tensors alive otherwise
    _free(device)
    return best, output


def _uses_fa4(speed: Any) -> bool:
    """Whether a contender (a mode name or a SpeedConfig) runs attention on FlashAttention-4 here."""
    from daotai.render.speed import levers_for, resolve_attention

    config = levers_for(speed, "cuda") if isinstance(speed, str) else speed
    return resolve_attention(config).attention == "fa4"


def ablations(device: str, mode: str, family: str = "wan") -> dict[str, Any]:
    """Single-lever configs measured for ``mode`` (kernel levers only on CUDA) on a model ``family``."""
    from daotai.render.speed import SpeedConfig, fa4_available, hopper_attention_backend, levers_for

    cuda = device.startswith("cuda")
    table: dict[str, Any] = {}
    if mode in ("exact", "all") and cuda:
        table["sdpa-cudnn"] = SpeedConfig(mode="exact", sdpa="cudnn")
        table["sdpa-flash"] = SpeedConfig(mode="exact", sdpa="flash")
        table["compile"] = SpeedConfig(mode="exact", compile_blocks=True)
        table["compile-autotune"] = SpeedConfig(mode="exact", compile_blocks=True,
                                                compile_mode="max-autotune-no-cudagraphs")
        if hopper_attention_backend() == "_flash_3":  # only where FlashAttention-3 is installed
            table["attn-fa3"] = SpeedConfig(mode="exact", attention="_flash_3")
        if fa4_available():  # only where FlashAttention-4 is installed
            table["attn-fa4"] = SpeedConfig(mode="exact", attention="fa4")
            # exact mode picks FA4 by itself where it is installed: this is exact on cuDNN attention
            table["exact-cudnn"] = replace(levers_for("exact", "cuda"), attention=None)
        # exact mode with inductor's autotuned kernels (matmul and fused-op configs tried at compile time)
        table["exact-autotune"] = replace(levers_for("exact", "cuda"), compile_mode="max-autotune-no-cudagraphs")
        table["vae-cl"] = SpeedConfig(mode="exact", vae_channels_last=True)
        # the exact rewrites (daotai.render.rewrites) taken out all together and one at a time
        exact = levers_for("exact", "cuda")
        table["exact-prev"] = replace(exact, lean_attention=False, cross_attention=None, gelu_epilogue=False)
        table["exact-no-cross"] = replace(exact, cross_attention=None)
        table["exact-no-gelu"] = replace(exact, gelu_epilogue=False)
        # exact with q/k/v fused into one GEMM per attention (Wan; a no-op for LTX's attention)
        table["fuse-qkv"] = replace(levers_for("exact", "cuda"), fuse_qkv=True)
    if mode in ("fast", "all"):
        if cuda:
            # exact plus FP8 linears alone (its transformer deviation is measured: no cache), and
            # fast without them (fast asks for FP8 where the GPU has it)
            table["fp8"] = replace(levers_for("exact", "cuda"), mode="fast", fp8=True)
            table["fast-nofp8"] = replace(levers_for("fast", "cuda", family), fp8=False)
            table["fast-fused"] = replace(levers_for("fast", "cuda", family), fuse_qkv=True)  # wider FP8 GEMMs
            # fast's VAE levers taken out: its decode has read slower than exact's float32 one on LTX
            table["fast-vae-f32"] = replace(levers_for("fast", "cuda", family), vae_bf16=False, vae_channels_last=False)
            table["fast-vae-ncl"] = replace(levers_for("fast", "cuda", family), vae_channels_last=False)
        # the step cache's cadence (1 step computed in every i after the warm-up), its guidance reuse
        # (the passes after the first on 1 computed step in every g, in between the first pass plus
        # the last measured difference) and its first-order extrapolation of skipped steps; each
        # spelled out in full, so a row means the same whatever fast's own cadence for this family is
        fast = levers_for("fast", "cuda" if cuda else "cpu", family)
        cadences = {"fast-i2": (2, 1), "fast-i3": (3, 1), "fast-i4": (4, 1), "fast-i3-g2": (3, 2),
                    "fast-i3-g3": (3, 3), "fast-i4-g2": (4, 2), "fast-i4-g3": (4, 3), "fast-i5-g2": (5, 2),
                    "fast-i6-g2": (6, 2)}
        for name, (interval, guidance) in cadences.items():  # after a fifth of the steps
            table[name] = replace(fast, cache_interval=interval, guidance_interval=guidance, cache_warmup=0.2)
        # the warm-up (every pass of the first steps, which set the picture's layout) cut from a fifth
        # of the steps to a tenth or three twentieths, at Wan's cadence and at every 3rd step
        table["fast-w20"] = replace(fast, cache_interval=4, guidance_interval=2, cache_warmup=0.20)
        table["fast-w10"] = replace(fast, cache_interval=4, guidance_interval=2, cache_warmup=0.10)
        table["fast-w15"] = replace(fast, cache_interval=4, guidance_interval=2, cache_warmup=0.15)
        table["fast-w10-i3-g2"] = replace(fast, cache_interval=3, guidance_interval=2, cache_warmup=0.10)
        table["fast-x"] = replace(fast, cache_extrapolate=True)
        table["fast-i2-x"] = replace(fast, cache_interval=2, guidance_interval=1, cache_extrapolate=True)
        table["vae-bf16"] = SpeedConfig(mode="fast", vae_bf16=True)
        table["cache-interval"] = SpeedConfig(mode="fast", cache="interval")
        table["cache-interval3"] = SpeedConfig(mode="fast", cache="interval", cache_interval=3)
        table["cache-fbc"] = SpeedConfig(mode="fast", cache="fbc", fbc_threshold=0.05)
    return table


def load_ours(folder: Path, device: str, plan, steps: int, speed: str, family: str):
    """Our ``wan`` / ``ltx`` backend loaded with a speed mode: (backend, request, pipeline extras)."""
    from daotai.render.ltx import LTXBackend
    from daotai.render.wan import WanBackend

    backend_class = LTXBackend if family == "ltx" else WanBackend
    backend = backend_class(model=str(folder), device=device, steps=steps, guidance=FAMILY[family]["guidance"],
                            speed=speed)
    list(backend.runner.ensure_loaded(plan, plan.shots[0]))  # loads, places and applies the mode's levers
    request = shot_request(plan, backend.runner)
    extra = {"frame_rate": int(round(request.fps))} if family == "ltx" else {}
    return backend, request, extra


def run_ours(name: str, folder: Path, device: str, plan, steps: int, speed: Any, inputs, reference,
             work: Path, repeats: int, family: str = "wan", live: bool = False) -> Measure:
    """Our `wan` / `ltx` backend rendering the shot with a speed mode (str) or one hand-made SpeedConfig.

    ``live``: the renders ask for the server's live picture (a glimpse of the latents at most twice a
    second), after one unmeasured render that fits the picture's map, so the measured one shows it.
    """
    import torch

    from daotai.events import Frame, Glimpse
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.speed import apply_levers, denoise_context, resolve_levers
    from daotai.server.live import GLIMPSE_EVERY_S

    sync, reset_peak, peak = _device_tools(device)
    leftover = _left_over(device)
    shot = plan.shots[0]
    guidance = FAMILY[family]["guidance"]
    began = time.perf_counter()
    backend, request, extra = load_ours(folder, device, plan, steps, speed if isinstance(speed, str) else "off",
                                        family)
    runner = backend.runner
    if not isinstance(speed, str):
        speed = resolve_levers(speed, device)  # "auto" → what this machine has, as the backend does for modes
        apply_levers(runner.pipe, speed, steps)
        runner.speed_config = speed
    sync()
    measure = Measure(name, steps, load_s=time.perf_counter() - began, levers=runner.speed_config.describe())
    pipe = runner.pipe

    began = time.perf_counter()
    with denoise_context(runner.speed_config):  # warm-up (and compilation) at the measured size
        pipe(prompt="warm up", height=request.height, width=request.width, num_frames=request.frames,
             num_inference_steps=2, guidance_scale=guidance, output_type="np", **extra)
    sync()
    measure.warm_s = time.perf_counter() - began
    if runner.speed_config.cache is None:
        with denoise_context(runner.speed_config):
            measure.rel_l2 = relative_l2(forward_output(pipe.transformer, inputs), reference)
    clock = Clock(sync, reset_peak, peak, _allocated(device))
    clock.wrap(pipe)
    def context() -> RunContext:
        return RunContext(glimpse_every_s=GLIMPSE_EVERY_S if live else None)

    if live:  # the first shot a model renders has no map yet: this one fits it
        for _ in backend.render(RenderJob(plan, shot, controls=False), context()):
            pass
        clock.reset()
    state = getattr(pipe.transformer, "_daotai_interval_cache", None)
    counts = (state.computed, state.reused) if state is not None else (0, 0)
    best = None
    for _ in range(repeats):
        clock.reset()
        _drop_blas_workspaces(device)
        reset_peak()
        sync()
        began = time.perf_counter()
        frames, pictures, encoding, last = [], 0, None, began
        with Mp4(work / f"{name}.mp4", plan.fps) as mp4:  # frames encoded as they arrive, as a render does
            for event in backend.render(RenderJob(plan, shot, controls=False), context()):
                if isinstance(event, Frame):
                    encoding = encoding or time.perf_counter()
                    frames.append(event.rgb)
                    mp4.write(event.rgb)
                    last = time.perf_counter()
                pictures += isinstance(event, Glimpse)
        total = time.perf_counter() - began
        encode_s = time.perf_counter() - (encoding or began)  # from the first frame handed over to the file closed
        handed = dict(to_first_frame_s=(encoding or began) - (clock.decode_end or began),
                      after_last_frame_s=time.perf_counter() - last)
        if live:
            print(f"{name}: {pictures} live pictures in the render", flush=True)
        if best is None or total < best.total_s:
            import numpy as np

            best = replace(measure, text_s=clock.text_s, denoise_s=clock.decode_start - clock.text_end,
                           decode_s=clock.decode_s, total_s=total,
                           peak_bytes=max(clock.peak_denoise, int(peak())), peak_denoise_bytes=clock.peak_denoise,
                           peak_decode_bytes=int(peak()), frames=np.stack(frames),  # (F, H, W, 3) uint8
                           held_at_decode_bytes=clock.held_at_decode, leftover_bytes=leftover,
                           encode_s=encode_s, **handed)
            best.post_s = total - best.text_s - best.denoise_s - best.decode_s
    if state is not None:  # per measured render
        computed, reused = (state.computed - counts[0]) // repeats, (state.reused - counts[1]) // repeats
        best.computed = f"{computed}/{computed + reused}"
    backend.close()
    del backend, runner, pipe
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()  # compiled graphs hold the dead model's tensors alive otherwise
    _free(device)
    return best


def shot_request(plan, runner):
    """The native request of the plan's only shot under the runner's defaults."""
    from daotai.render.neural.request import native_request

    return native_request(plan, plan.shots[0], runner.defaults)


def bench_plan(width: int, height: int, frames: int, fps: int = 16):
    """A one-shot plan whose native request is exactly ``frames`` frames at ``width``x``height``."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    seconds = (frames - 1) / fps  # frames_for(.., fps) = frames - 1, snapped up to the model's 4k+1 / 8k+1
    script = validate_script({
        "title": "bench", "fps": fps, "size": [width, height], "seed": 1,
        "characters": [{"id": "ana", "appearance": "blue shirt, glasses"}],
        "shots": [{"shot_id": "s01", "duration": seconds, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}}],
    })
    return plan_script(script)


def projected_fraction(steps: int, config) -> float:
    """Share of transformer passes a config computes at ``steps`` steps (1.0 without a fixed cache).

    Counted as a guided render's two passes a step: the first runs on every computed step, the
    second only where its guidance interval lets it (a family that batches its guidance into one
    pass has an interval of 1, so the share is its computed steps')."""
    from daotai.render.speed import computed_steps, guidance_steps

    first, second = computed_steps(steps, config), guidance_steps(steps, config)
    return (sum(first) + sum(second)) / (2 * steps)


def fmt(value, spec: str, missing: str = "n/a") -> str:
    """Format a number, or ``missing`` for None."""
    if value is None:
        return missing
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return format(value, spec)


def print_table(rows: list[Measure], stock: Measure, strong: Measure | None = None) -> None:
    """The comparison table, ratios against both baselines, and each end-to-end's stage shares."""
    strong = strong or stock
    print(f"{'config':16}{'s/step':>8}{'x stock':>8}{'x strong':>9}{'e2e s':>8}{'x stock':>8}{'x strong':>9}"
          f"{'warm s':>8}{'peak GiB':>9}"
          f"{'relL2':>9}{'PSNR/st':>9}{'SSIM/st':>8}{'PSNR/ex':>9}{'SSIM/ex':>8}  computed")
    for r in rows:
        print(f"{r.name:16}{r.s_per_step:8.3f}{stock.s_per_step / r.s_per_step:8.2f}"
              f"{strong.s_per_step / r.s_per_step:9.2f}{r.total_s:8.2f}"
              f"{stock.total_s / r.total_s:8.2f}{strong.total_s / r.total_s:9.2f}{r.warm_s:8.1f}"
              f"{r.peak_bytes / 1024**3:9.2f}"
              f"{fmt(r.rel_l2, '9.4f'):>9}{fmt(r.psnr_stock, '9.2f'):>9}{fmt(r.ssim_stock, '8.4f'):>8}"
              f"{fmt(r.psnr_exact, '9.2f'):>9}{fmt(r.ssim_exact, '8.4f'):>8}  {r.computed}")
    print("\nend-to-end shares (text / denoise / decode / uint8+MP4):")
    for r in rows:
        shares = [x / r.total_s * 100 for x in (r.text_s, r.denoise_s, r.decode_s, r.post_s)]
        print(f"  {r.name:16}" + " / ".join(f"{s:5.1f}%" for s in shares)
              + f"   ({r.text_s:.2f} / {r.denoise_s:.2f} / {r.decode_s:.2f} / {r.post_s:.2f} s, "
                f"of which the MP4 encode {r.encode_s:.2f} s)")
    print("  of uint8+MP4: decode's end to the first frame at the encoder / the encode after the last frame reached it:")
    for r in rows:
        print(f"  {r.name:16}{r.to_first_frame_s:5.2f} s / {r.after_last_frame_s:5.2f} s")
    print("\npeak GPU memory by stage (text + denoise / decode + frames to bytes), GiB, and what the decode stage"
          " starts holding (its own growth is the difference):")
    for r in rows:
        print(f"  {r.name:16}{r.peak_denoise_bytes / 1024**3:6.2f} / {r.peak_decode_bytes / 1024**3:6.2f}"
              f"   held at decode {r.held_at_decode_bytes / 1024**3:6.2f}, "
              f"decode's own {(r.peak_decode_bytes - r.held_at_decode_bytes) / 1024**3:6.2f}"
              + (f", left over from earlier contenders {r.leftover_bytes / 1024**3:.2f}" if r.leftover_bytes else ""))
    print("\nlevers:")
    for r in rows:
        print(f"  {r.name:16}{r.levers}")


def natural_total(row: Measure, natural_s: float) -> float:
    """The row's end to end (s) had its encode cost a natural picture's: the measured encode swapped
    for ``natural_s``, a natural picture's encode of the same shape timed in the same run (from
    memory, as stock's is; ours overlaps the frames' arrival, so this is the worse case for ours)."""
    return row.total_s - row.encode_s + natural_s


def natural_share(row: Measure, natural_s: float) -> float:
    """The row's frames-to-MP4 share of its end to end (%) had its encode cost a natural picture's (a projection)."""
    return 100 * (row.post_s - row.encode_s + natural_s) / natural_total(row, natural_s)


def target_verdicts(rows: list[Measure], stock: Measure, strong: Measure | None, family: str,
                    natural_s: float | None = None) -> list[str]:
    """The issue's targets for this model, met or missed (only Wan has speed targets; memory holds for all).

    ``natural_s``: a natural picture's encode of the clip, for the MP4 share's projection beside the measured one."""
    from baselines import Target, memory_verdict

    found = {r.name: r for r in rows}

    def ratio(name: str, base: Measure | None) -> float | None:
        row = found.get(name)
        return base.s_per_step / row.s_per_step if row is not None and base is not None else None

    fast = found.get("fast")
    lines = []
    if family == "wan":
        lines += [Target("exact vs strong stock", 1.15).verdict(ratio("exact", strong)),
                  Target("fast vs plain stock", 4.0).verdict(ratio("fast", stock)),
                  Target("fast vs strong stock", 3.4).verdict(ratio("fast", strong)),
                  Target("fast PSNR vs exact", 40.0, " dB").verdict(fast.psnr_exact if fast else None)]
    elif family == "ltx" and fast is not None:  # issue 32: the render loop, end to end
        lines += [Target("fast end to end vs plain stock", 2.5).verdict(stock.total_s / fast.total_s),
                  Target("fast frames to MP4, share of end to end", 15.0, "%", at_most=True).verdict(
                      100 * fast.post_s / fast.total_s)]
        if natural_s is not None and fast.encode_s > 0 and stock.encode_s > 0:
            noise = f"({natural_s:.2f} s for this clip's encode against the noise's {fast.encode_s:.2f} s)"
            lines += ["(projection, not a measurement of a render: "
                      + Target(f"the same ratio had both encoded a natural picture {noise}", 2.5).verdict(
                          natural_total(stock, natural_s) / natural_total(fast, natural_s)) + ")",
                      "(projection, not a measurement of a render: "
                      + Target(f"the same share had the frames encoded as a natural picture {noise}", 15.0, "%",
                               at_most=True).verdict(natural_share(fast, natural_s)) + ")"]
    lines += memory_verdict({r.name: (r.peak_bytes - r.leftover_bytes) / 1024**3 for r in rows}, stock.name)
    return lines


def progress(row: Measure) -> None:
    """One line per contender as soon as it is measured (so a cut-short run still shows numbers)."""
    print(f"[{time.perf_counter() - PROCESS_STARTED:6.0f} s] {row.name}: {row.s_per_step:.3f} s/step, "
          f"e2e {row.total_s:.2f} s, warm-up {row.warm_s:.1f} s, peak {row.peak_bytes / 1024**3:.2f} GiB "
          f"(denoise {row.peak_denoise_bytes / 1024**3:.2f}, decode {row.peak_decode_bytes / 1024**3:.2f}), "
          f"rel L2 {fmt(row.rel_l2, '.4f')}", flush=True)


def _tokens(config: dict, family: str) -> int:
    """Latent tokens of one video at the bench's size (the transformer's sequence length)."""
    if family == "ltx":
        return ((config["frames"] - 1) // 8 + 1) * (config["height"] // 32) * (config["width"] // 32)
    return ((config["frames"] - 1) // 4 + 1) * (config["height"] // 16) * (config["width"] // 16)


def linear_table(config: dict, family: str) -> None:
    """The repeated block's big linear layers at full size: bf16 vs FP8 row-wise, eager and compiled."""
    import torch

    from daotai.render.fp8 import eligible, fp8_linear_class, fp8_supported

    transformer = config["transformer"]
    width = transformer["num_attention_heads"] * transformer["attention_head_dim"]
    ffn = transformer.get("ffn_dim", 4 * width)
    tokens = _tokens(config, family) * (2 if family == "ltx" else 1)  # LTX batches both guidance passes
    shapes = {"qkv/out": (width, width), "qkv fused": (width, 3 * width), "ffn up": (width, ffn),
              "ffn down": (ffn, width)}
    _gelu_epilogue_row(tokens, width, ffn)
    print(f"linear layers, {tokens} tokens, bf16 vs fp8 (e4m3, row-wise scales; quantising the "
          "activations included):", flush=True)
    if not fp8_supported("cuda"):
        print("  fp8 not supported on this GPU or PyTorch build", flush=True)
        return
    generator = torch.Generator("cuda").manual_seed(0)
    for name, (fan_in, fan_out) in shapes.items():
        x = torch.randn(tokens, fan_in, device="cuda", dtype=torch.bfloat16, generator=generator)
        linear = torch.nn.Linear(fan_in, fan_out, device="cuda", dtype=torch.bfloat16)
        fp8 = fp8_linear_class()(linear)
        flop = 2 * tokens * fan_in * fan_out
        timings = {}
        for label, module in (("bf16", linear), ("fp8", fp8), ("fp8 compiled", torch.compile(fp8, dynamic=False))):
            timings[label] = _cuda_ms(module, x)
            with torch.no_grad():
                out = module(x)
            if label == "bf16":
                reference = out.float()
            else:
                rel = relative_l2(out.float(), reference)
        line = "  ".join(f"{label} {ms:.3f} ms ({flop / ms / 1e9:.0f} TFLOP/s)" for label, ms in timings.items())
        chosen = "fp8" if eligible(linear) else "bf16"
        print(f"  {name:9} {fan_in}->{fan_out}: {line}; compiled fp8 {timings['bf16'] / timings['fp8 compiled']:.2f}x "
              f"bf16, rel L2 {rel:.2e}; fast mode runs it in {chosen}", flush=True)
        del x, linear, fp8, out, reference
    torch.cuda.empty_cache()


KERNEL_KINDS = (  # (kind, name fragments) in the order tried: inductor names list the ops they fused
    # (e.g. "..._rms_norm__scaled_dot_product_flash_attention_...") and attention names can contain "cutlass"
    ("fused (inductor)", ("triton_",)),
    ("attention", ("flash", "fmha", "attn", "attention", "sdpa")),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "matmul", "scaled_mm")),
    ("copy / convert", ("copy", "cat", "convert", "memcpy", "memset", "fill")),
    ("elementwise / reduce (eager)", ("elementwise", "reduce", "norm", "softmax", "vectorized")),
)


def kernel_kind(name: str) -> str:
    """The family a CUDA kernel belongs to, from its name."""
    lowered = name.lower()
    for kind, fragments in KERNEL_KINDS:
        if any(fragment in lowered for fragment in fragments):
            return kind
    return "other"


def profile_steps(folder: Path, device: str, plan, steps: int, speed: str, family: str, top: int = 20) -> None:
    """Where the GPU time of denoising steps goes: kernel time per family and the costliest kernels.

    Our backend with ``speed`` is loaded and warmed up at the measured size; then ``steps`` denoising
    steps (latents out: no VAE) run under ``torch.profiler``. Times are per step; "idle" is the wall
    time of the profiled call (synchronised, profiler overhead included) minus the kernel time.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    from daotai.render.speed import denoise_context

    guidance = FAMILY[family]["guidance"]
    backend, request, extra = load_ours(folder, device, plan, steps, speed, family)
    runner = backend.runner
    pipe = runner.pipe

    def call():
        return pipe(prompt="profile", height=request.height, width=request.width, num_frames=request.frames,
                    num_inference_steps=steps, guidance_scale=guidance, output_type="latent", **extra)

    sync = _device_tools(device)[0]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with denoise_context(runner.speed_config):
        call()  # warm-up and compilation
        sync()
        began = time.perf_counter()
        call()
        sync()
        plain_s = time.perf_counter() - began
        with profile(activities=activities) as prof:
            call()
            sync()
    kernels: dict[str, list[float]] = {}  # name -> [count, total µs]
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and event.time_range.elapsed_us() > 0:
            entry = kernels.setdefault(event.name, [0, 0.0])
            entry[0] += 1
            entry[1] += event.time_range.elapsed_us()
    total_us = sum(total for _, total in kernels.values())
    if total_us == 0:
        print(f"profile of {steps} steps, speed {speed}: {plain_s / steps * 1e3:.1f} ms per step; "
              "no GPU kernels recorded on this device", flush=True)
        backend.close()
        return
    by_kind: dict[str, float] = {}
    for name, (_, total) in kernels.items():
        by_kind[kernel_kind(name)] = by_kind.get(kernel_kind(name), 0.0) + total
    per_step = 1e3 * steps  # µs per step → ms: divide by this
    print(f"profile of {steps} denoising steps, speed {speed} ({runner.speed_config.levers_text()}): "
          f"{plain_s / steps * 1e3:.1f} ms per step unprofiled, kernels {total_us / per_step:.1f} ms per step",
          flush=True)
    for kind, total in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"  {kind:30}{total / per_step:9.1f} ms/step  {total / total_us:6.1%}")
    print(f"  {'idle (unprofiled wall - kernels)':30}{plain_s / steps * 1e3 - total_us / per_step:9.1f} ms/step")
    print(f"  costliest {top} kernels (calls per step, ms per step, µs per call, family):")
    for name, (count, total) in sorted(kernels.items(), key=lambda item: -item[1][1])[:top]:
        print(f"    {count / steps:6.0f} {total / per_step:8.2f} {total / count:9.1f}  "
              f"{kernel_kind(name):18} {name[:110]}")
    backend.close()
    del backend, runner, prof
    pipe = None  # rebound, not deleted: call() closes over it
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()
    _free(device)


def _cuda_ms(fn, x, calls: int = 10, warmups: int = 3) -> float:
    """Milliseconds per call of ``fn(x)`` on the GPU, timed with CUDA events after ``warmups`` calls."""
    import torch

    with torch.no_grad():
        for _ in range(warmups):
            fn(x)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(x)
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def _gelu_epilogue_row(tokens: int, width: int, ffn: int) -> None:
    """FFN up-projection + tanh-GELU: compiled linear then GELU vs the GELU in cuBLASLt's epilogue."""
    import torch

    from daotai.render.rewrites import gelu_linear_class

    generator = torch.Generator("cuda").manual_seed(0)
    x = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16, generator=generator)
    linear = torch.nn.Linear(width, ffn, device="cuda", dtype=torch.bfloat16)
    separate = torch.compile(lambda h: torch.nn.functional.gelu(linear(h), approximate="tanh"), dynamic=False)
    fused = torch.compile(gelu_linear_class()(linear), dynamic=False)
    with torch.no_grad():
        rel = relative_l2(fused(x).float(), separate(x).float())
    ms_separate, ms_fused = _cuda_ms(separate, x), _cuda_ms(fused, x)
    print(f"ffn up + tanh-GELU {width}->{ffn}, {tokens} tokens, compiled: separate {ms_separate:.3f} ms, "
          f"epilogue {ms_fused:.3f} ms ({ms_separate / ms_fused:.2f}x), rel L2 {rel:.2e}", flush=True)
    del x
    linear = None  # rebound, not deleted: the separate() lambda closes over it
    torch.cuda.empty_cache()


def attention_table(config: dict, family: str) -> None:
    """Self-attention (and Wan's cross-attention) at the model's full shape with each kernel: ms,
    TFLOP/s, rel L2 vs cuDNN."""
    from daotai.render.rewrites import cudnn_attention

    heads = config["transformer"]["num_attention_heads"]
    head_dim = config["transformer"]["attention_head_dim"]
    tokens = _tokens(config, family)
    # Wan's cross-attention: every video token against the 512 text tokens (LTX masks its own, so
    # PyTorch already sends it to cuDNN there)
    for label, kv_tokens in (("self-attention", tokens),) + ((("cross-attention", 512),) if family == "wan" else ()):
        _attention_rows(label, heads, head_dim, tokens, kv_tokens, cudnn_attention)


def _attention_rows(label: str, heads: int, head_dim: int, tokens: int, kv_tokens: int, cudnn_op) -> None:
    """One attention shape timed with each kernel (see attention_table)."""
    import torch

    from daotai.render.speed import SpeedConfig, denoise_context, fa4_available

    generator = torch.Generator("cuda").manual_seed(0)
    q = torch.randn(1, heads, tokens, head_dim, device="cuda", dtype=torch.bfloat16, generator=generator)
    k, v = (torch.randn(1, heads, kv_tokens, head_dim, device="cuda", dtype=torch.bfloat16, generator=generator)
            for _ in range(2))  # (B, H, S, D) as SDPA takes them
    flop = 4 * heads * tokens * kv_tokens * head_dim  # QK^T and PV, 2 FLOP per multiply-add
    kernels = {"default": SpeedConfig(), "cudnn": SpeedConfig(sdpa="cudnn"), "flash": SpeedConfig(sdpa="flash")}
    if fa4_available():
        kernels["fa4"] = SpeedConfig(attention="fa4")
    kernels["cudnn op"] = None  # the aten op on (B, L, H, D) views, as the lean Wan processor calls it
    print(f"{label}, {tokens} x {kv_tokens} tokens x {heads} heads x {head_dim}, bf16 "
          f"({flop / 1e12:.2f} TFLOP per call):", flush=True)

    def call():
        if config_ is None:
            return cudnn_op(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    reference = None
    for name, config_ in kernels.items():
        try:
            with denoise_context(config_ or SpeedConfig()):
                # 2 warm-up calls: FA4 compiles its kernel on the first one
                ms = _cuda_ms(lambda _: call(), None, calls=5, warmups=2)
                with torch.no_grad():
                    out = call()
        except Exception as error:  # noqa: BLE001 - a kernel that refuses the shape is a result too
            print(f"  {name:10} failed: {type(error).__name__}: {str(error)[:160]}", flush=True)
            continue
        if reference is None or name == "cudnn":
            reference = out.float() if name == "cudnn" or reference is None else reference
        rel = relative_l2(out.float(), reference)
        print(f"  {name:10}{ms:9.2f} ms{flop / ms / 1e9:9.0f} TFLOP/s   rel L2 vs cudnn {rel:.2e}", flush=True)
    del out, reference
    q = k = v = None  # rebound, not deleted: call() closes over them
    torch.cuda.empty_cache()


# ---------------------------------------------------------------- one shot over several GPUs


def render_split(folder: Path, family: str, device: str, plan, steps: int, gpus: int, speed: str) -> dict[str, Any]:
    """Our backend rendering the plan's one shot with ``gpus`` processes: timings, per-GPU peaks, frames."""
    import numpy as np
    import torch

    from daotai.events import Frame, Progress
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.registry import create_backend

    backend = create_backend(family, {"model": str(folder), "device": device, "steps": steps,
                                      "guidance": FAMILY[family]["guidance"], "gpus": gpus, "speed": speed})
    shot = plan.shots[0]
    try:
        began = time.perf_counter()
        list(backend.runner.ensure_loaded(plan, shot))
        load_s = time.perf_counter() - began
        if gpus == 1 and device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        stamps: list[float] = []
        frames = []
        began = time.perf_counter()
        for event in backend.render(RenderJob(plan, shot, controls=False), RunContext()):
            if isinstance(event, Progress) and event.stage == "denoise":
                stamps.append(time.perf_counter())
            elif isinstance(event, Frame):
                frames.append(event.rgb)
        total_s = time.perf_counter() - began
        if gpus > 1:
            peaks = [backend.runner.group.peaks[rank] for rank in sorted(backend.runner.group.peaks)]
        elif device.startswith("cuda"):
            peaks = [int(torch.cuda.max_memory_allocated())]
        else:
            import resource

            peaks = [int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024]
    finally:
        backend.close()
    s_per_step = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else float("nan")
    return {"gpus": gpus, "load_s": load_s, "total_s": total_s, "s_per_step": s_per_step,
            "peak_gib_per_gpu": [p / 1024**3 for p in peaks], "frames": np.stack(frames)}  # (F, H, W, 3) uint8


def gpus_bench(args: Any) -> None:
    """``--gpus 1,2,...``: the same shot split over each count; scaling and the frames' match with 1 GPU."""
    import numpy as np
    import torch

    counts = sorted({int(n) for n in args.gpus.split(",")})
    if counts[0] != 1:
        counts = [1] + counts  # the reference every split is compared with
    family = args.model
    facts = FAMILY[family]
    base = facts["full"] or FULL if not args.tiny else (facts["tiny"] or TINY)
    if args.arch == "14b" and not args.tiny:
        base = WAN_14B
    config = dict(base)
    if not args.tiny:
        config["width"], config["height"] = RESOLUTIONS[args.resolution]
    device = args.device or ("cpu" if args.tiny else "cuda")
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    if device == "cpu":
        # On the CPU a "GPU" is a share of the cores: each of N ranks takes cores // N threads,
        # so the 1-process reference gets one share too (else it races the others for every core).
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(counts)))
    steps = args.steps or (4 if args.tiny else facts["steps"])
    work = Path(tempfile.mkdtemp(prefix="daotai-bench-"))
    folder = args.folder or work / f"{family}-{args.arch}-random"
    rows = []
    try:
        if not (folder / "model_index.json").is_file():
            started = time.perf_counter()
            build_folder(config, folder, "cuda" if device.startswith("cuda") else "cpu", dtype, family)
            print(f"built random-weight folder in {time.perf_counter() - started:.1f} s: {folder}", flush=True)
        plan = bench_plan(config["width"], config["height"], config["frames"], facts["fps"])
        for gpus in counts:
            row = render_split(folder, family, device, plan, steps, gpus, args.speed)
            rows.append(row)
            print(f"gpus={gpus}: {row['s_per_step']:.3f} s/step, total {row['total_s']:.1f} s, load "
                  f"{row['load_s']:.1f} s, peak per GPU "
                  + ", ".join(f"{g:.2f}" for g in row["peak_gib_per_gpu"]) + " GiB", flush=True)
    finally:
        if args.folder is None:
            shutil.rmtree(work, ignore_errors=True)
    reference = rows[0]
    report = {"device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu", "model": family,
              "arch": "tiny" if args.tiny else args.arch, "size": f"{config['width']}x{config['height']}",
              "frames": config["frames"], "steps": steps, "speed": args.speed, "rows": {}}
    print(f"\n{'gpus':>4} {'s/step':>8} {'efficiency':>10} {'peak GiB/GPU':>14} {'max diff':>8} {'PSNR dB':>8}")
    for row in rows:
        efficiency = reference["s_per_step"] / (row["gpus"] * row["s_per_step"])
        difference = int(np.abs(row["frames"].astype(np.int16) - reference["frames"].astype(np.int16)).max())
        match = psnr_stack(row["frames"], reference["frames"])
        print(f"{row['gpus']:>4} {row['s_per_step']:>8.3f} {efficiency:>10.2f} {max(row['peak_gib_per_gpu']):>14.2f} "
              f"{difference:>8} {fmt(None if math.isinf(match) else match, '.1f', 'equal'):>8}")
        report["rows"][str(row["gpus"])] = {
            "s_per_step": row["s_per_step"], "efficiency": efficiency, "total_s": row["total_s"],
            "load_s": row["load_s"], "peak_gib_per_gpu": row["peak_gib_per_gpu"], "max_abs_diff_levels": difference,
            "psnr_vs_1": None if math.isinf(match) else match}
    print(json.dumps(report))


def main() -> None:
    import sys

    if "--model" in sys.argv and sys.argv[sys.argv.index("--model") + 1:][:1] == ["h3"]:
        # MiniMax-H3 has its own bench (a released-size partition cannot be saved on a bench machine's disk).
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import h3

        rest = sys.argv[1:sys.argv.index("--model")] + sys.argv[sys.argv.index("--model") + 2:]
        raise SystemExit(h3.main(rest))
    if "--model" in sys.argv and sys.argv[sys.argv.index("--model") + 1:][:1] == ["ltx2"]:
        # LTX-2 (picture and sound) has its own bench, built like MiniMax-H3's (bench/ltx2.py).
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import ltx2

        rest = sys.argv[1:sys.argv.index("--model")] + sys.argv[sys.argv.index("--model") + 2:]
        raise SystemExit(ltx2.main(rest))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny random model on the CPU (smoke test)")
    parser.add_argument("--gpus", default=None, metavar="COUNTS",
                        help="comma-separated process counts (e.g. 1,2): one shot split over each, then stop")
    parser.add_argument("--arch", choices=("1.3b", "14b"), default="1.3b", help="with --gpus: Wan transformer size")
    parser.add_argument("--resolution", choices=tuple(RESOLUTIONS), default="480p", help="with --gpus: frame size")
    parser.add_argument("--speed", default="off", help="with --gpus: the backend's speed mode for every count")
    parser.add_argument("--model", choices=("wan", "ltx", "wan-vace", "h3", "ltx2"), default="wan",
                        help="wan: Wan2.1-T2V-1.3B, 480x832, 81 frames, CFG 5; ltx: LTX-Video 2B, 768x512, "
                             "121 frames, CFG 3; h3: MiniMax-H3 at its released size (bench/h3.py); ltx2: LTX-2 at "
                             "its released size with sound (bench/ltx2.py)")
    parser.add_argument("--only", default=None,
                        help="comma-separated contenders to run after stock (e.g. exact,fast,attn-fa4)")
    parser.add_argument("--attention", action="store_true",
                        help="first time one self-attention call per SDPA kernel and the block linears in bf16 vs fp8 "
                             "at the model's shape")
    parser.add_argument("--attention-only", action="store_true",
                        help="only the kernel tables of --attention (attention and linear layers), no model")
    parser.add_argument("--profile", default=None, metavar="SPEEDS",
                        help="comma-separated speed modes (off,exact,fast) to profile over 2 denoising steps "
                             "(kernel time by family, costliest kernels), then stop")
    parser.add_argument("--mode", choices=("exact", "fast", "all"), default="exact",
                        help="exact: stock vs speed=exact (+ its ablations); fast: stock, exact, fast (+ its "
                             "ablations); all: everything")
    parser.add_argument("--no-ablate", action="store_true", help="skip the one-lever-at-a-time configs")
    parser.add_argument("--steps", type=int, default=None,
                        help="denoising steps measured (default wan 8, ltx 20; tiny 6)")
    parser.add_argument("--device", default=None, help="default cuda (cpu with --tiny)")
    parser.add_argument("--repeats", type=int, default=1, help="measured renders per contender (best kept)")
    parser.add_argument("--folder", type=Path, default=None, help="reuse/keep the random-weight folder here")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="skip the remaining contenders once this many seconds have passed since start")
    args = parser.parse_args()
    if args.gpus:
        gpus_bench(args)
        return
    if args.model == "wan-vace":
        parser.error("--model wan-vace is measured with --gpus only")

    import torch

    from daotai.render.speed import levers_for

    family = args.model
    facts = FAMILY[family]
    config = (facts["tiny"] or TINY) if args.tiny else (facts["full"] or FULL)
    device = args.device or ("cpu" if args.tiny else "cuda")
    kind = device.split(":")[0]
    dtype = torch.float32 if device == "cpu" else torch.bfloat16  # daotai's device rules
    steps = args.steps or (6 if args.tiny else facts["steps"])
    guidance = facts["guidance"]
    work = Path(tempfile.mkdtemp(prefix="daotai-bench-"))
    folder = args.folder or work / f"{family}-random"
    rows: list[Measure] = []
    try:
        if (args.attention or args.attention_only) and device.startswith("cuda"):
            attention_table(config, family)
            linear_table(config, family)
        if args.attention_only:
            return
        if not (folder / "model_index.json").is_file():
            started = time.perf_counter()
            build_folder(config, folder, device, dtype, family)
            print(f"built random-weight folder in {time.perf_counter() - started:.1f} s: {folder}", flush=True)
        from daotai.render.neural.request import effective_defaults, native_request
        from daotai.render.spec import NeuralOptions

        plan = bench_plan(config["width"], config["height"], config["frames"], facts["fps"])
        defaults = effective_defaults(family, NeuralOptions(steps=steps, guidance=guidance))
        request = native_request(plan, plan.shots[0], defaults)
        assert (request.width, request.height, request.frames) == (config["width"], config["height"], config["frames"])
        if args.profile:
            for speed in args.profile.split(","):
                profile_steps(folder, device, plan, 2, speed.strip(), family)
            return
        inputs = fixed_inputs(config, request, device, dtype, family)
        warm_encoder(work, request.fps)  # PyAV's import and x264's first open are no contender's cost

        stock, reference = run_stock(folder, device, dtype, request, steps, inputs, work, args.repeats,
                                     plan.shots[0].frames, family)
        rows.append(stock)
        progress(stock)
        try:
            strong, _ = run_stock(folder, device, dtype, request, steps, inputs, work, args.repeats,
                                  plan.shots[0].frames, family, config=config, reference=reference)
            rows.append(strong)
            progress(strong)
        except Exception as error:  # noqa: BLE001 - the strong baseline failing must not lose the others
            print(f"FAILED strong: {type(error).__name__}: {str(error)[:300]}", flush=True)
            _free(device)
        contenders: list[tuple[str, Any]] = [("exact", "exact")]
        if args.mode in ("fast", "all"):
            contenders.append(("fast", "fast"))
        if not args.no_ablate:
            contenders += list(ablations(device, args.mode, args.model).items())
            if args.mode in ("fast", "all"):  # what the server's live picture costs a render (fast: the shortest steps)
                contenders.append(("fast-live", "fast"))
        if args.only:
            wanted = {name.strip() for name in args.only.split(",")} | {"exact"}  # exact: the PSNR reference
            contenders = [(name, speed) for name, speed in contenders if name in wanted]
        if device.startswith("cuda"):
            # FA4 is a process-wide switch: an exact-on-cuDNN contender measured after FA4 ones came
            # out slower than stock (1.47 vs 1.24 s/step) on the H200, so those without FA4 go first.
            contenders.sort(key=lambda item: _uses_fa4(item[1]))
        for name, speed in contenders:
            elapsed = time.perf_counter() - PROCESS_STARTED
            if elapsed > args.budget_s and name != "exact":
                print(f"skipped {name}: {elapsed:.0f} s elapsed > --budget-s {args.budget_s:g}", flush=True)
                continue
            try:
                row = run_ours(name, folder, device, plan, steps, speed, inputs, reference, work, args.repeats,
                               family, live=name.endswith("-live"))
            except Exception as error:  # noqa: BLE001 - one failing lever must not lose the others' numbers
                import traceback

                traceback.print_exc()
                print(f"FAILED {name}: {type(error).__name__}: {str(error)[:300]}", flush=True)
                _free(device)
                continue
            rows.append(row)
            progress(row)
    finally:
        if args.folder is None:
            shutil.rmtree(work, ignore_errors=True)

    exact = next((r for r in rows if r.name == "exact"), None)
    if exact is None:  # it failed: compare the rest with stock only
        exact = replace(stock, name="exact (failed; stock shown)")
    for r in rows:
        r.psnr_stock, r.ssim_stock = psnr_stack(r.frames, stock.frames), ssim(r.frames, stock.frames)
        if r is not stock:
            r.psnr_exact, r.ssim_exact = psnr_stack(r.frames, exact.frames), ssim(r.frames, exact.frames)
    strong = next((r for r in rows if r.name == "strong"), None)
    print()
    print_table(rows, stock, strong)
    fast_config = levers_for("fast", kind, family)
    fraction_here, fraction_50 = projected_fraction(steps, fast_config), projected_fraction(50, fast_config)
    print(f"\nfast mode's fixed cache computes {fraction_here:.0%} of the transformer passes at {steps} steps "
          f"and {fraction_50:.0%} at 50 steps: projected 50-step denoise ratio vs exact = {1 / fraction_50:.2f}x "
          "(random weights: a first-block cache's skip decisions are not representative)")
    print(f"process start to end: {time.perf_counter() - PROCESS_STARTED:.1f} s; cold start of the first "
          f"'exact' shot (load + warm-up + render): {exact.load_s + exact.warm_s + exact.total_s:.1f} s")
    natural_s = None
    if stock.frames is not None and stock.encode_s > 0:
        with tempfile.TemporaryDirectory(prefix="daotai-natural-") as scratch:
            natural_s = natural_encode_s(stock.frames.shape[:3], request.fps, Path(scratch))
        print(f"a natural picture of the clip's size (moving waves) encodes in {fmt(natural_s, '.2f')} s here; "
              f"stock's random-weight frames took {stock.encode_s:.2f} s")
    verdicts = target_verdicts(rows, stock, strong, family, natural_s)
    print("\ntargets (issue 35, and 32 for LTX end to end; s/step at the measured steps, random weights"
          + ("; a tiny CPU smoke run: these verdicts say nothing about speed):" if args.tiny else "):"))
    for line in verdicts:
        print(f"  {line}")
    report = {
        "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
        "model": family, "size": f"{request.width}x{request.height}", "frames": request.frames, "steps": steps,
        "cfg": guidance,
        "dtype": str(dtype).replace("torch.", ""), "mode": args.mode,
        "rows": {r.name: {"s_per_step": r.s_per_step, "ratio_step": stock.s_per_step / r.s_per_step,
                          "ratio_step_strong": strong.s_per_step / r.s_per_step if strong else None,
                          "e2e_s": r.total_s, "ratio_e2e": stock.total_s / r.total_s,
                          "ratio_e2e_strong": strong.total_s / r.total_s if strong else None, "warm_s": r.warm_s,
                          "load_s": r.load_s, "text_s": r.text_s, "denoise_s": r.denoise_s, "decode_s": r.decode_s,
                          "post_s": r.post_s, "encode_s": r.encode_s, "to_first_frame_s": r.to_first_frame_s,
                          "after_last_frame_s": r.after_last_frame_s, "peak_gib": r.peak_bytes / 1024**3,
                          "peak_denoise_gib": r.peak_denoise_bytes / 1024**3,
                          "peak_decode_gib": r.peak_decode_bytes / 1024**3,
                          "held_at_decode_gib": r.held_at_decode_bytes / 1024**3,
                          "leftover_gib": r.leftover_bytes / 1024**3, "rel_l2": r.rel_l2,
                          "psnr_vs_stock": None if r.psnr_stock is None or math.isinf(r.psnr_stock) else r.psnr_stock,
                          "ssim_vs_stock": r.ssim_stock,
                          "psnr_vs_exact": None if r.psnr_exact is None or math.isinf(r.psnr_exact) else r.psnr_exact,
                          "ssim_vs_exact": r.ssim_exact, "computed": r.computed, "levers": r.levers}
                 for r in rows},
        "fast_projected_50_step_fraction": fraction_50,
        "natural_encode_s": natural_s,
        "ok_exact_rel_l2": exact.rel_l2 is not None and exact.rel_l2 <= 0.02,
        "ok_memory": exact.peak_bytes - exact.leftover_bytes <= stock.peak_bytes * 1.01 if device.startswith("cuda") else None,
        "targets": verdicts,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
