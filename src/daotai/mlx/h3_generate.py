"""One MiniMax-H3 generation in MLX from prompt embeddings and noise: denoise, unpack, decode both streams.

The steps of diffusers' t2va workflow after its text encoder: the packed layout, the noise
as rows, the denoising loop over the video and audio schedules, the rows back to latents,
denormalised with each VAE's statistics, decoded (the video in chunks and tiles as released)
and mapped to [0, 1] RGB and a stereo waveform. The noise is given, not drawn, so a caller
can seed it (and a test can hand both implementations the same). :func:`generate_packed` takes a
request of any workflow already packed (conditioning rows in front), as the h3-mlx backend
gets it from diffusers' own preparation blocks; :func:`generate_t2va` packs a t2va one itself.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from daotai.mlx.h3_audio_vae import H3AudioDecoder, denormalize_audio
from daotai.mlx.h3_denoise import denoise_h3
from daotai.mlx.h3_layout import (
    PackedRows,
    keyframe_rows,
    pack_audio,
    patchify_video,
    unpack_audio,
    unpatchify_video,
)
from daotai.mlx.h3_scheduler import AUDIO_SHIFT, VIDEO_SHIFT
from daotai.mlx.h3_transformer import H3Transformer
from daotai.mlx.h3_video_vae import (
    RELEASED_TILING,
    H3VideoClipDecoder,
    VideoTiling,
    decode_video,
    denormalize_video,
    to_unit_rgb,
)


@dataclass(frozen=True, eq=False)
class Generation:
    """frames (F, H, W, 3) float32 in [0, 1]; audio (2, samples) float32 in [-1, 1] at the audio VAE's rate."""

    frames: np.ndarray
    audio: np.ndarray
    sample_rate: int


@dataclass(frozen=True, eq=False)
class PackedRequest:
    """One request as the denoising loop reads it, whatever made it (daotai's layout or diffusers' own blocks).

    rows: the packed structure; video (Nv, C * pt * ph * pw) float32 rows, conditioning rows first
    then the target's noise; audio (Na, C_a) float32 rows likewise; text (1, Nt, text_dim) float32;
    the target's latent geometry (channels, frames, height, width) to put its rows back.
    """

    rows: PackedRows
    video: np.ndarray
    audio: np.ndarray
    text: np.ndarray
    latent_shape: tuple[int, int, int, int]


def decode_h3(video_decoder: H3VideoClipDecoder, audio_decoder: H3AudioDecoder, video_rows: mx.array,
              audio_rows: mx.array, latent_shape: tuple[int, int, int, int], patch_size: tuple[int, int, int],
              tiling: VideoTiling | None = RELEASED_TILING) -> Generation:
    """The target's rows (video (n, C * 4), audio (2 * T_a, C_a)) decoded to [0, 1] frames and a stereo waveform."""
    channels, frames, height, width = latent_shape
    latents = unpatchify_video(video_rows[None], channels, frames, height, width, patch_size)
    pixels = to_unit_rgb(decode_video(video_decoder, denormalize_video(latents, video_decoder.cfg), tiling=tiling))
    cfg = audio_decoder.cfg
    audio_latents = denormalize_audio(np.array(unpack_audio(audio_rows)), cfg.latents_mean or (0.0,) * cfg.latent_channels,
                                      cfg.latents_std or (1.0,) * cfg.latent_channels)
    waveform = audio_decoder(mx.array(audio_latents))  # (2, 1, samples): one batch item a channel
    frames_out = np.array(pixels[0].transpose(1, 2, 3, 0))  # (F, H, W, 3)
    return Generation(frames_out, np.array(waveform[:, 0]), cfg.sampling_rate)


def generate_packed(transformer: H3Transformer, video_decoder: H3VideoClipDecoder, audio_decoder: H3AudioDecoder,
                    request: PackedRequest, steps: int, video_shift: float = VIDEO_SHIFT,
                    audio_shift: float = AUDIO_SHIFT, tiling: VideoTiling | None = RELEASED_TILING,
                    ) -> Generator[tuple[int, int, mx.array], None, Generation]:
    """Denoise a packed request of any workflow, yielding (pass, passes, clean estimate of the target's video
    rows, lazy) after each step; returns the decoded Generation. Only the target rows are decoded:
    conditioning rows lead each stream and are dropped."""
    rows = request.rows
    video, audio = mx.array(request.video.astype(np.float32)), mx.array(request.audio.astype(np.float32))
    text = mx.array(request.text.astype(np.float32))
    for i, passes, stepped_video, stepped_audio, estimate in denoise_h3(transformer, rows, video, audio, text, steps,
                                                                        video_shift, audio_shift):
        video, audio = stepped_video, stepped_audio
        yield i, passes, estimate
    return decode_h3(video_decoder, audio_decoder, video[rows.condition_video_rows:],
                     audio[rows.condition_audio_rows:], request.latent_shape, transformer.cfg.patch_size, tiling)


def generate_t2va(transformer: H3Transformer, video_decoder: H3VideoClipDecoder, audio_decoder: H3AudioDecoder,
                  text: mx.array, text_tags, noise: mx.array, audio_noise: mx.array, steps: int,
                  video_shift: float = VIDEO_SHIFT, audio_shift: float = AUDIO_SHIFT,
                  tiling: VideoTiling | None = RELEASED_TILING,
                  on_step: Callable[[int, int], None] | None = None) -> Generation:
    """text (1, Nt, text_dim) with its rows' tags; noise (1, C, T, H, W) video latents, audio_noise (2, C_a, T_a)."""
    _, channels, frames, height, width = noise.shape
    rows = keyframe_rows(text_tags, frames, height, width, audio_noise.shape[-1], transformer.cfg.patch_size)
    request = PackedRequest(rows, np.array(patchify_video(noise.astype(mx.float32), transformer.cfg.patch_size)[0]),
                            np.array(pack_audio(audio_noise.astype(mx.float32))), np.array(text.astype(mx.float32)),
                            (channels, frames, height, width))
    steps_run = generate_packed(transformer, video_decoder, audio_decoder, request, steps, video_shift, audio_shift,
                                tiling)
    while True:
        try:
            i, passes, _ = next(steps_run)
        except StopIteration as done:
            return done.value
        if on_step is not None:
            on_step(i, passes)
