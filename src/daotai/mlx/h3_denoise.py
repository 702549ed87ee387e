"""MiniMax-H3's denoising loop in MLX: one transformer pass a step over the packed sequence, two schedules.

The checkpoint is guidance-distilled: no unconditional pass. Each step conditions the target
video rows on the video schedule's t and the target audio rows on the audio schedule's t;
visual conditioning rows (keyframes, picture and video references) are held at
max(t, 0.999), just short of clean, as the model was trained; reference audio rows at 1
(clean). Only the target rows are ever stepped, so the conditioning rows stay as given.
"""

from __future__ import annotations

from collections.abc import Iterator

import mlx.core as mx

from daotai.mlx.h3_layout import PackedRows, with_timesteps
from daotai.mlx.h3_scheduler import AUDIO_SHIFT, VIDEO_SHIFT, h3_schedule, h3_step
from daotai.mlx.h3_transformer import H3Transformer

KEYFRAME_NOISE_AUG = 0.999  # the t visual conditioning rows are held at (the released model's training value)


def denoise_h3(model: H3Transformer, rows: PackedRows, video: mx.array, audio: mx.array, text: mx.array,
               steps: int, video_shift: float = VIDEO_SHIFT,
               audio_shift: float = AUDIO_SHIFT) -> Iterator[tuple[int, int, mx.array, mx.array, mx.array]]:
    """Yield (pass index, passes, video rows, audio rows, clean estimate) after each step.

    video (Nv, C * 4) float32: conditioning rows first, then the target's noise; audio (Na, C_a)
    float32 likewise; text (1, Nt, text_dim). ``steps`` grid points make steps - 1 passes. The clean
    estimate is the scheduler's own x0 = x_t + (1 - t) v of the target video rows (n, C * 4); MLX
    computes it only if it is read (a live picture of the shot), and after the last step it is the
    target's final rows.
    """
    video_schedule, audio_schedule = h3_schedule(steps, video_shift), h3_schedule(steps, audio_shift)
    passes = min(video_schedule.passes, audio_schedule.passes)  # a shift may collapse a grid point
    cv, ca = rows.condition_video_rows, rows.condition_audio_rows
    for i in range(passes):
        t, t_audio = float(video_schedule.timesteps[i]), float(audio_schedule.timesteps[i])
        layout = with_timesteps(rows, t, t_audio, max(t, KEYFRAME_NOISE_AUG), 1.0)
        v_video, v_audio = model(video[None], audio[None], text, layout)
        estimate = video[cv:] + (1.0 - t) * v_video[0, cv:].astype(mx.float32)  # lazy: computed only if read
        stepped_video = h3_step(v_video[0, cv:].astype(mx.float32), t, video[cv:], float(video_schedule.sigmas[i]),
                                float(video_schedule.sigmas[i + 1]))
        stepped_audio = h3_step(v_audio[0, ca:].astype(mx.float32), t_audio, audio[ca:],
                                float(audio_schedule.sigmas[i]), float(audio_schedule.sigmas[i + 1]))
        video = mx.concatenate([video[:cv], stepped_video], axis=0)
        audio = mx.concatenate([audio[:ca], stepped_audio], axis=0)
        mx.eval(video, audio)
        yield i, passes, video, audio, estimate
