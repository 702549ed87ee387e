"""The packed sequence MiniMax-H3 reads, built in numpy: row order, (t, h, w) rotary positions, tags, timesteps.

One request is one sequence of L rows, in the released model's order:

- t2va / fl2va: ``[text | keyframe rows | target audio | target video]``;
- ref2va: ``[text | reference blocks, in request order | target audio | target video]``, where
  a picture is one frame of rows, a voice is audio rows, and a video reference is its
  soundtrack's rows then its frames' rows.

Rotary time is shared by sound and picture: text rows sit at 0..T-1, media continue from T;
a latent frame spans 5/3 x (1, 4, 4, 4, 4) units (the VAE's 17 frames -> 5 latents), an audio
latent one unit (40 latents/s = 24 fps x 5/3). Spatial axes are centred, normalised by the
square root of the latent area and scaled by 32. Audio rows are channel-major and sit at the
two ends of the width axis. The arithmetic (float64, which sums are pairwise and which
sequential) follows the released implementation, which diffusers reproduces; the tests
compare these builders with diffusers' own, exactly.

Nothing here imports MLX or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from daotai.mlx.h3_config import MODALITIES

VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2
AUDIO_CHANNELS = 2  # stereo: each audio latent is two rows, left channel's block first
ROPE_FRAME_RESCALE = 5.0 / 3.0
ROPE_FRAMES_PER_LATENT = (1, 4, 4, 4, 4)  # the first latent frame holds 1 video frame, the others 4
ROPE_SPATIAL_SCALE = 32


def _as_int_rows(value, name: str, length: int | None = None) -> np.ndarray:
    """A 1-D int64 numpy copy of ``value``; ValueError naming ``name`` when it is not (length,)."""
    arr = np.asarray(value)
    if arr.ndim != 1 or (length is not None and arr.shape[0] != length):
        want = f"({length},)" if length is not None else "1-D"
        raise ValueError(f"H3Layout.{name}: shape {list(arr.shape)} must be {want}")
    return arr.astype(np.int64)


@dataclass(frozen=True, eq=False)
class H3Layout:
    """The packed sequence of one request: where each modality's rows sit and how each row is conditioned.

    timestep (T,) float: the distinct noise levels in [0, 1]; timestep_indices (L,): each row's
    index into it; token_tags (L,): each row's modality (0 video, 1 text, 2 audio);
    position_ids (L, 3): each row's (t, h, w) rotary coordinates; video/audio/text_indices: the
    positions of that modality's input rows in the sequence, in the order the rows are given.
    The three index arrays together must cover every position exactly once.
    """

    timestep: np.ndarray
    timestep_indices: np.ndarray
    token_tags: np.ndarray
    position_ids: np.ndarray
    video_indices: np.ndarray
    audio_indices: np.ndarray
    text_indices: np.ndarray
    # (L,) gather index that puts [text | video | audio] input rows into sequence order
    scatter_order: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        pos = np.asarray(self.position_ids, dtype=np.float64)
        if pos.ndim != 2 or pos.shape[1] != 3:
            raise ValueError(f"H3Layout.position_ids: shape {list(pos.shape)} must be (seq_len, 3)")
        length = pos.shape[0]
        ts = np.asarray(self.timestep, dtype=np.float32).reshape(-1)
        tidx = _as_int_rows(self.timestep_indices, "timestep_indices", length)
        tags = _as_int_rows(self.token_tags, "token_tags", length)
        if tidx.size and (tidx.min() < 0 or tidx.max() >= ts.size):
            raise ValueError(f"H3Layout.timestep_indices: values must index timestep (0..{ts.size - 1})")
        if tags.size and (tags.min() < 0 or tags.max() >= MODALITIES):
            raise ValueError("H3Layout.token_tags: values must be 0 (video), 1 (text) or 2 (audio)")
        parts = [_as_int_rows(getattr(self, n), n) for n in ("text_indices", "video_indices", "audio_indices")]
        order = np.concatenate(parts)
        if order.size != length or not np.array_equal(np.sort(order), np.arange(length)):
            raise ValueError(f"H3Layout: text, video and audio indices ({order.size} in all) must cover the "
                             f"{length} sequence positions exactly once")
        for name, value in (("position_ids", pos), ("timestep", ts), ("timestep_indices", tidx), ("token_tags", tags),
                            ("text_indices", parts[0]), ("video_indices", parts[1]), ("audio_indices", parts[2])):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "scatter_order", np.argsort(order, kind="stable"))

    @property
    def length(self) -> int:
        """L, the packed sequence's length."""
        return int(self.position_ids.shape[0])

    @property
    def adaln_rows(self) -> np.ndarray:
        """(L,) each row's entry in the (timestep, modality) AdaLN table."""
        return self.timestep_indices * MODALITIES + self.token_tags


def spatial_grid(size: int, patch: int, sqrt_area: float) -> np.ndarray:
    """One spatial rotary axis: size // patch float64 coordinates, centred, area-normalised, scaled by 32."""
    ratio = size / sqrt_area
    left = (1.0 - ratio) / 2.0
    return np.linspace(left, left + ratio, size // patch, endpoint=False) * ROPE_SPATIAL_SCALE


def frame_grid(latent_height: int, latent_width: int, patch_h: int, patch_w: int) -> tuple[np.ndarray, np.ndarray]:
    """One latent frame's (h, w) coordinates, (rows, 2) row-major, and the width axis they came from."""
    sqrt_area = np.sqrt(latent_height * latent_width)
    heights = spatial_grid(latent_height, patch_h, sqrt_area)
    widths = spatial_grid(latent_width, patch_w, sqrt_area)
    hh, ww = np.meshgrid(heights, widths, indexing="ij")
    return np.stack([hh.reshape(-1), ww.reshape(-1)], axis=-1), widths


def frame_spans(num_latent_frames: int) -> np.ndarray:
    """(n,) float64 rotary time each latent frame spans: 5/3 x (1, 4, 4, 4, 4, 1, 4, …)."""
    pattern = [ROPE_FRAMES_PER_LATENT[i % len(ROPE_FRAMES_PER_LATENT)] for i in range(num_latent_frames)]
    return ROPE_FRAME_RESCALE * np.array(pattern, dtype=np.float64)


def temporal_grid(num_latent_frames: int, origin: float) -> np.ndarray:
    """(n,) rotary time of each latent frame from ``origin`` (a running sum of the spans before it)."""
    return origin + np.concatenate([[0.0], np.cumsum(frame_spans(num_latent_frames)[:-1])])


def _place_audio(pos: np.ndarray, start: int, latents: int, time: float, widths: np.ndarray,
                 channels: int = AUDIO_CHANNELS) -> None:
    """Write one channel-major audio block of ``latents`` x ``channels`` rows at ``start``: time, then width ends."""
    stop = start + latents * channels
    pos[start:stop, 0] = np.tile(time + np.arange(latents, dtype=np.float64), channels)
    pos[start:stop, 2] = np.concatenate([np.full(latents, widths[0]), np.full(stop - start - latents, widths[-1])])


@dataclass(frozen=True, eq=False)
class PackedRows:
    """A packed sequence's structure before timesteps are assigned (what :func:`with_timesteps` completes)."""

    position_ids: np.ndarray  # (L, 3) float64
    token_tags: np.ndarray  # (L,) int64
    video_indices: np.ndarray  # conditioning video rows first, then the target's
    audio_indices: np.ndarray  # reference audio rows first, then the target's
    text_indices: np.ndarray
    condition_video_rows: int
    condition_audio_rows: int


def _tagged(pos: np.ndarray, text_tags: np.ndarray, video: np.ndarray, audio: np.ndarray, cond_video: int,
            cond_audio: int) -> PackedRows:
    """Fill the tags of every row and wrap the arrays."""
    text = np.arange(len(text_tags))
    tags = np.empty(len(pos), dtype=np.int64)
    tags[text] = text_tags
    tags[audio] = AUDIO_TAG
    tags[video] = VIDEO_TAG
    return PackedRows(pos, tags, video, audio, text, cond_video, cond_audio)


def keyframe_rows(text_tags, num_latent_frames: int, latent_height: int, latent_width: int, num_audio_latents: int,
                  patch_size: tuple[int, int, int] = (1, 2, 2), anchors: tuple[str, ...] = ()) -> PackedRows:
    """The t2va / fl2va sequence; ``anchors`` has one "first" or "last" per keyframe block, in packed order.

    text_tags: each text row's tag (1, or 0 for the rows of a vision block inside the prompt).
    """
    text_tags = np.asarray(text_tags, dtype=np.int64)
    _, patch_h, patch_w = patch_size
    per_frame = (latent_height // patch_h) * (latent_width // patch_w)
    n_text = len(text_tags)
    cond = len(anchors) * per_frame
    n_audio = num_audio_latents * AUDIO_CHANNELS
    audio_start = n_text + cond
    video_start = audio_start + n_audio
    length = video_start + num_latent_frames * per_frame
    pos = np.zeros((length, 3), dtype=np.float64)
    pos[:n_text, 0] = np.arange(n_text, dtype=np.float64)
    grid, widths = frame_grid(latent_height, latent_width, patch_h, patch_w)
    for i, anchor in enumerate(anchors):
        if anchor == "first":
            time = float(n_text)
        elif anchor == "last":
            # numpy's pairwise sum, as the released code sums this span (it differs from a running
            # sum in the last bit from 16 latent frames on)
            time = float(n_text) + float(frame_spans(num_latent_frames).sum()) - ROPE_FRAME_RESCALE
        else:
            raise ValueError(f"keyframe anchors[{i}]: {anchor!r} must be 'first' or 'last'")
        rows = slice(n_text + i * per_frame, n_text + (i + 1) * per_frame)
        pos[rows, 0] = time
        pos[rows, 1:] = grid
    _place_audio(pos, audio_start, num_audio_latents, float(n_text), widths)
    pos[video_start:, 0] = np.repeat(temporal_grid(num_latent_frames, float(n_text)), per_frame)
    pos[video_start:, 1:] = np.tile(grid, (num_latent_frames, 1))
    video = np.concatenate([np.arange(n_text, audio_start), np.arange(video_start, length)])
    return _tagged(pos, text_tags, video, np.arange(audio_start, video_start), cond, 0)


@dataclass(frozen=True)
class ReferenceBlock:
    """One ref2va reference's latent geometry: a picture (1 latent frame), a voice, or a video with its soundtrack."""

    kind: Literal["image", "video", "audio"]
    latent_frames: int = 0
    latent_height: int = 0
    latent_width: int = 0
    audio_latents: int = 0  # per channel; 0 for a picture or a silent video

    def __post_init__(self):
        if self.kind not in ("image", "video", "audio"):
            raise ValueError(f"ReferenceBlock.kind: {self.kind!r} must be 'image', 'video' or 'audio'")
        visual = (self.latent_frames, self.latent_height, self.latent_width)
        if self.kind == "audio" and (self.audio_latents <= 0 or any(visual)):
            raise ValueError("ReferenceBlock: an audio reference needs audio_latents > 0 and no latent frames")
        if self.kind != "audio" and min(visual) <= 0:
            raise ValueError(f"ReferenceBlock: an {self.kind} reference needs latent_frames, latent_height and "
                             f"latent_width > 0, got {visual}")
        if self.kind == "image" and (self.audio_latents or self.latent_frames != 1):
            raise ValueError("ReferenceBlock: an image reference is one latent frame without audio")


def reference_rows(text_tags, references: list[ReferenceBlock], num_latent_frames: int, latent_height: int,
                   latent_width: int, num_audio_latents: int, patch_size: tuple[int, int, int] = (1, 2, 2)) -> PackedRows:
    """The ref2va sequence: every reference on the shared clock in request order, then the target."""
    text_tags = np.asarray(text_tags, dtype=np.int64)
    _, patch_h, patch_w = patch_size

    def frame_rows(ref: ReferenceBlock) -> int:
        return (ref.latent_height // patch_h) * (ref.latent_width // patch_w)

    n_text = len(text_tags)
    block_rows = [(r.latent_frames * frame_rows(r) if r.kind != "audio" else 0) + r.audio_latents * AUDIO_CHANNELS
                  for r in references]
    target_per_frame = (latent_height // patch_h) * (latent_width // patch_w)
    audio_start = n_text + sum(block_rows)
    video_start = audio_start + num_audio_latents * AUDIO_CHANNELS
    length = video_start + num_latent_frames * target_per_frame
    pos = np.zeros((length, 3), dtype=np.float64)
    pos[:n_text, 0] = np.arange(n_text, dtype=np.float64)
    target_grid, target_widths = frame_grid(latent_height, latent_width, patch_h, patch_w)
    video, audio = [], []
    cursor, clock = n_text, float(n_text)
    for ref in references:
        if ref.kind == "audio":
            _place_audio(pos, cursor, ref.audio_latents, clock, target_widths)
            audio.append(np.arange(cursor, cursor + ref.audio_latents * AUDIO_CHANNELS))
            cursor += ref.audio_latents * AUDIO_CHANNELS
            clock += float(ref.audio_latents)
            continue
        grid, widths = frame_grid(ref.latent_height, ref.latent_width, patch_h, patch_w)
        if ref.kind == "video":  # the soundtrack's rows come first, on the same origin as the frames
            _place_audio(pos, cursor, ref.audio_latents, clock, widths)
            audio.append(np.arange(cursor, cursor + ref.audio_latents * AUDIO_CHANNELS))
            cursor += ref.audio_latents * AUDIO_CHANNELS
        rows = slice(cursor, cursor + ref.latent_frames * frame_rows(ref))
        video.append(np.arange(rows.start, rows.stop))
        cursor = rows.stop
        if ref.kind == "image":
            pos[rows, 0] = clock
            pos[rows, 1:] = grid
            clock += 1.0  # a picture takes one integer slot, not a latent frame's span
        else:
            pos[rows, 0] = np.repeat(temporal_grid(ref.latent_frames, clock), len(grid))
            pos[rows, 1:] = np.tile(grid, (ref.latent_frames, 1))
            # a running sum here, as the released code sums this span (see keyframe_rows)
            span = 0.0
            for s in frame_spans(ref.latent_frames):
                span += float(s)
            clock += max(float(ref.audio_latents), span)
    _place_audio(pos, audio_start, num_audio_latents, clock, target_widths)
    pos[video_start:, 0] = np.repeat(temporal_grid(num_latent_frames, clock), target_per_frame)
    pos[video_start:, 1:] = np.tile(target_grid, (num_latent_frames, 1))
    video_idx = np.concatenate(video + [np.arange(video_start, length)])
    audio_idx = np.concatenate(audio + [np.arange(audio_start, video_start)])
    cond_video = sum(len(v) for v in video)
    cond_audio = sum(len(a) for a in audio)
    return _tagged(pos, text_tags, video_idx, audio_idx, cond_video, cond_audio)


def with_timesteps(rows: PackedRows, video_t: float, audio_t: float, condition_video_t: float = 0.0,
                   condition_audio_t: float = 0.0) -> H3Layout:
    """The layout for one step: target video / audio rows at their timesteps, conditioning rows at theirs.

    Text rows take the video's timestep (they never reach an output head, but their AdaLN row depends on it).
    """
    row_t = np.full(len(rows.position_ids), video_t, dtype=np.float32)
    row_t[rows.video_indices[: rows.condition_video_rows]] = condition_video_t
    row_t[rows.audio_indices[rows.condition_audio_rows:]] = audio_t
    row_t[rows.audio_indices[: rows.condition_audio_rows]] = condition_audio_t
    timestep, index = np.unique(row_t, return_inverse=True)
    return H3Layout(timestep, index.reshape(-1), rows.token_tags, rows.position_ids, rows.video_indices,
                    rows.audio_indices, rows.text_indices)


def patchify_video(latents, patch_size: tuple[int, int, int] = (1, 2, 2)):
    """Video latents (B, C, F, H, W) -> rows (B, F/pt * H/ph * W/pw, C * pt * ph * pw), frame-major then row-major.

    Works on numpy and MLX arrays alike (reshape and transpose only).
    """
    b, c, f, h, w = latents.shape
    pt, ph, pw = patch_size
    if f % pt or h % ph or w % pw:
        raise ValueError(f"video latents of shape {tuple(latents.shape)} do not divide into patches {patch_size}")
    x = latents.reshape(b, c, f // pt, pt, h // ph, ph, w // pw, pw).transpose(0, 2, 4, 6, 1, 3, 5, 7)
    return x.reshape(b, (f // pt) * (h // ph) * (w // pw), c * pt * ph * pw)


def unpatchify_video(rows, channels: int, frames: int, height: int, width: int,
                     patch_size: tuple[int, int, int] = (1, 2, 2)):
    """The inverse of :func:`patchify_video`: rows (B, n, C * pt * ph * pw) -> latents (B, C, F, H, W)."""
    pt, ph, pw = patch_size
    b = rows.shape[0]
    x = rows.reshape(b, frames // pt, height // ph, width // pw, channels, pt, ph, pw).transpose(0, 4, 1, 5, 2, 6, 3, 7)
    return x.reshape(b, channels, frames, height, width)


def pack_audio(latents):
    """Stereo audio latents (channels, C_a, T) -> rows (channels * T, C_a), channel-major (left block first)."""
    channels, width, length = latents.shape
    return latents.transpose(0, 2, 1).reshape(channels * length, width)


def unpack_audio(rows, channels: int = AUDIO_CHANNELS):
    """The inverse of :func:`pack_audio`: rows (channels * T, C_a) -> (channels, C_a, T), one batch item a channel."""
    total, width = rows.shape
    return rows.reshape(channels, total // channels, width).transpose(0, 2, 1)
