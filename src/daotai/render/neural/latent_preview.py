"""A picture of a neural shot while it denoises, from its latents, learned from the model's own shots.

A video model spends most of a shot's time denoising, and its frames exist only after the VAE
decodes at the end. A director watching the live view would see nothing for most of the render.
The latents already carry the picture: for the video VAEs daotai drives, each latent pixel's
channels map to the colour of the pixels it decodes to, close to linearly. So a linear map
(channels plus a constant term → RGB) is fitted on a finished shot's last latents and its decoded
frames, and later shots show their current latents through it while they denoise. The map is
learned from the model as loaded, whatever its latent normalisation or channel count, and needs no
table of numbers per model; it is refitted after each shot, so it follows the model it serves.
Each fit is kept in the user's cache folder under the model's name (``latent_maps.json``, beside
the shot cache; not with DAOTAI_NO_CACHE), so a model loaded again shows its first shot forming too.

The first shot a model ever renders shows no denoise picture (nothing has been fitted yet); its
frames show as soon as they are decoded, like any shot's. The map reads 5-D latents (batch,
channels, time, height, width); a pipeline that keeps them packed as tokens (LTX-Video) is read
through its own unpacking when the token count matches the request's latent grid (a keyframe
condition adds tokens: that shot shows its frames once decoded). MiniMax-H3 packs each patch of
latents as one row of its sequence (``rows_as_video``: a row's features are one cell's channels) and
its runner keeps the scheduler's clean estimate rather than the noisy sample, so its picture is
sharp from the first steps. The picture is a courtesy: it changes nothing the render writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from daotai.events import GLIMPSE_WIDTH

MAPS_FILE = "latent_maps.json"  # in the user's cache folder: {model key: (channels + 1) x 3 weights}
FIT_LATENT_FRAMES = 8  # latent frames a fit reads at most (spread over the shot): plenty of samples
RIDGE = 1e-3  # relative ridge term: keeps the fit stable when channels are nearly collinear


@dataclass
class LatentPreview:
    """A linear map from one model's latent channels to RGB; ``weights`` is (channels + 1, 3) once fitted."""

    weights: np.ndarray | None = None

    def fit(self, latents: Any, frames: np.ndarray) -> bool:
        """Fit the map on a shot's final latents (1, C, T', H', W') and its decoded frames (F, H, W, 3)
        uint8. Latent frame t pairs with the frame at the same place in the shot, scaled to the latent
        grid by area. Returns False (the map unchanged) when the latents are not 5-D or frames are missing.
        """
        grid = _latent_grid(latents)
        if grid is None or frames.ndim != 4 or len(frames) == 0:
            return False
        import cv2

        channels, count, height, width = grid.shape
        picked = np.unique(np.linspace(0, count - 1, min(count, FIT_LATENT_FRAMES)).round().astype(int))
        inputs, targets = [], []
        for t in picked:
            frame = frames[frame_for(int(t), count, len(frames))]
            target = cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA).astype(np.float64)
            inputs.append(grid[:, t].reshape(channels, -1).T)
            targets.append(target.reshape(-1, 3))
        samples = _with_constant(np.concatenate(inputs))
        gram = samples.T @ samples
        ridge = RIDGE * np.trace(gram[:-1, :-1]) / channels * np.eye(len(gram))
        ridge[-1, -1] = 0.0  # the constant term (the picture's mean colour) is not shrunk
        gram += ridge
        self.weights = np.linalg.solve(gram, samples.T @ np.concatenate(targets)).astype(np.float32)
        return True

    def picture(self, latents: Any, frames: int) -> tuple[int, np.ndarray] | None:
        """The middle latent frame as (frame index in a shot of ``frames`` frames, (h, w, 3) uint8 at
        most GLIMPSE_WIDTH wide), or None before a fit or for latents the map does not fit."""
        if self.weights is None:
            return None
        grid = _latent_grid(latents, middle_only=True)
        if grid is None or grid.shape[0] + 1 != len(self.weights):
            return None
        import cv2

        channels, _, height, width = grid.shape
        middle = int(latents.shape[2]) // 2
        colour = _with_constant(grid[:, 0].reshape(channels, -1).T) @ self.weights
        rgb = np.clip(colour, 0, 255).round().astype(np.uint8).reshape(height, width, 3)
        size = (GLIMPSE_WIDTH, max(1, round(height * GLIMPSE_WIDTH / width)))
        return frame_for(middle, int(latents.shape[2]), frames), cv2.resize(rgb, size, interpolation=cv2.INTER_LINEAR)


@dataclass
class KeptPicture:
    """One loaded model's live picture: its map, recalled from the user's cache folder under ``key`` before
    the first shot and kept there after each fit. Every call is guarded: the picture is a courtesy."""

    key: str
    preview: LatentPreview = field(default_factory=LatentPreview)

    def recall(self) -> None:
        """Before a shot: the map kept by an earlier load, when none is fitted yet."""
        if self.preview.weights is None:
            self.preview.weights = recall_map(self.key)

    def picture(self, latents: Any, frames: int) -> tuple[int, np.ndarray] | None:
        """As :meth:`LatentPreview.picture`, or None where it fails."""
        try:
            return self.preview.picture(latents, frames)
        except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
            return None

    def learn(self, latents: Any, frames: np.ndarray) -> None:
        """Fit the map on a shot's final latents (1, C, T', H', W') and its decoded frames, and keep it."""
        try:
            if latents is not None and self.preview.fit(latents, frames):
                keep_map(self.key, self.preview.weights)
        except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
            pass


def maps_path() -> Path | None:
    """Where fitted maps are kept: the user's cache folder; None when caching is off (DAOTAI_NO_CACHE)."""
    if os.environ.get("DAOTAI_NO_CACHE", "") not in ("", "0"):
        return None
    from daotai.files import default_cache_dir

    return default_cache_dir() / MAPS_FILE


def recall_map(key: str) -> np.ndarray | None:
    """The map last fitted for ``key``, or None (none kept, caching off, an unreadable file)."""
    path = maps_path()
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get(key) if path is not None else None
        weights = np.asarray(found, dtype=np.float32) if found is not None else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return weights if weights is not None and weights.ndim == 2 and weights.shape[1] == 3 else None


def keep_map(key: str, weights: np.ndarray) -> None:
    """Keep ``weights`` as ``key``'s map (the file rewritten whole); a failure to write is ignored."""
    path = maps_path()
    if path is None:
        return
    from daotai.files import atomic_write_text

    try:
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            kept = {}
        kept = kept if isinstance(kept, dict) else {}
        kept[key] = np.round(weights.astype(np.float64), 6).tolist()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(kept, sort_keys=True))
    except OSError:
        pass


def as_video_latents(pipe: Any, latents: Any, frames: int, height: int, width: int, leading: bool = False) -> Any:
    """Latents as (B, C, T', H', W'): 5-D ones as they are; packed (B, tokens, features) ones unpacked
    with the pipeline's own ``_unpack_latents`` for a request of ``frames`` frames of ``width`` x
    ``height`` px, when the token count is that grid's (``leading``: at least that many, the grid's
    tokens first, as a pipeline that appends conditioning tokens after the video's keeps them); otherwise None."""
    shape = getattr(latents, "shape", None)
    if shape is None or len(shape) == 5:
        return latents
    unpack = getattr(pipe, "_unpack_latents", None)
    time_ratio = getattr(pipe, "vae_temporal_compression_ratio", None)
    space_ratio = getattr(pipe, "vae_spatial_compression_ratio", None)
    if len(shape) != 3 or unpack is None or not time_ratio or not space_ratio:
        return None
    patch, patch_t = getattr(pipe, "transformer_spatial_patch_size", 1), getattr(pipe, "transformer_temporal_patch_size", 1)
    grid = ((frames - 1) // time_ratio + 1, height // space_ratio, width // space_ratio)
    if grid[0] % patch_t or grid[1] % patch or grid[2] % patch:
        return None
    cells = (grid[0] // patch_t, grid[1] // patch, grid[2] // patch)
    count = cells[0] * cells[1] * cells[2]
    if shape[1] != count and not (leading and shape[1] > count):
        return None
    return unpack(latents[:, :count], *cells, patch, patch_t)


def rows_as_video(rows: Any, latent_frames: int, rows_high: int, rows_wide: int) -> Any:
    """The last ``latent_frames * rows_high * rows_wide`` rows of a packed (B, N, D) sequence (a video
    model's generated frames, frame after frame, each in raster order) as (B, D, T', rows_high,
    rows_wide): each row's D features stand as the channels of one cell. None when there are fewer rows."""
    count = latent_frames * rows_high * rows_wide
    shape = getattr(rows, "shape", None)
    if shape is None or len(shape) != 3 or count <= 0 or shape[1] < count:
        return None
    grid = rows[:, shape[1] - count:].reshape(shape[0], latent_frames, rows_high, rows_wide, shape[2])
    return grid.permute(0, 4, 1, 2, 3) if hasattr(grid, "permute") else np.transpose(grid, (0, 4, 1, 2, 3))


def frame_for(latent_index: int, latent_frames: int, frames: int) -> int:
    """The frame at the same place in the shot as a latent frame (first with first, last with last)."""
    if latent_frames <= 1 or frames <= 1:
        return 0
    return round(latent_index * (frames - 1) / (latent_frames - 1))


def _latent_grid(latents: Any, middle_only: bool = False) -> np.ndarray | None:
    """(C, T', H', W') float64 on the host from the first item of a 5-D latent batch, or None.

    With ``middle_only`` only the middle latent frame is copied from the device (shape (C, 1, H', W')),
    so a picture while denoising moves a few hundred kilobytes, not the whole clip's latents."""
    shape = getattr(latents, "shape", None)
    if shape is None or len(shape) != 5 or shape[0] < 1:
        return None
    first = latents[0]
    if middle_only and shape[2] > 1:
        first = first[:, shape[2] // 2: shape[2] // 2 + 1]
    if hasattr(first, "detach"):
        first = first.detach().float().cpu().numpy()
    return np.asarray(first, dtype=np.float64)


def _with_constant(samples: np.ndarray) -> np.ndarray:
    """(N, C) → (N, C + 1) with a column of ones: the map's constant term."""
    return np.concatenate([samples, np.ones((len(samples), 1))], axis=1)
