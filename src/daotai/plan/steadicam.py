"""A steadicam's float: the slow, small drift of a camera carried on a stabilised arm.

A steadicam shot follows its subject as ``follow`` does (the camera travels with the subject's
walk); the operator's steps and the sled's inertia add a gentle float on top: a sideways and
vertical sway of a few centimetres and a fraction of a degree of pan, tilt and roll, far slower
than handheld shake (0.15-0.45 Hz against handheld's 0.5-3 Hz), so the picture glides instead of
trembling. The float is zero on the first frame, so the shot starts on the framing it names.
"""

from __future__ import annotations

import math

import numpy as np

from daotai.plan.camera_grammar import axis_rotations

FLOAT_HZ = (0.15, 0.45)  # a sway every 2-7 s: the sled's pendulum and the operator's stride
FLOAT_M = (0.03, 0.02)  # peak sideways (camera x) and vertical (camera y) sway, metres
FLOAT_DEG = (0.4, 0.3, 0.3)  # peak pan, tilt and roll drift, degrees
_SINES = 2  # sines per axis: enough to keep the drift from reading as a metronome


def float_offsets(n_frames: int, fps: float, seed: int) -> np.ndarray:
    """(n, 5) drift per frame: x, y metres in the camera's axes; pan, tilt, roll degrees; 0 on frame 0.

    Each axis sums _SINES sines with frequencies in FLOAT_HZ and random phases from
    ``numpy.random.default_rng(seed)``, less its value at frame 0, scaled to peak at its amplitude."""
    peaks = np.array([*FLOAT_M, *FLOAT_DEG])  # (5,)
    if n_frames < 2:
        return np.zeros((n_frames, peaks.size))
    rng = np.random.default_rng(seed)
    freq = rng.uniform(*FLOAT_HZ, size=(peaks.size, _SINES))  # (5, k) Hz
    phase = rng.uniform(0.0, 2.0 * math.pi, size=(peaks.size, _SINES))  # (5, k) rad
    seconds = np.arange(n_frames) / fps  # (n,)
    signal = np.sin(2.0 * math.pi * freq[None] * seconds[:, None, None] + phase[None]).sum(axis=2)  # (n, 5)
    signal -= signal[0]
    top = np.max(np.abs(signal), axis=0)  # (5,)
    scale = np.where(top > 1e-12, peaks / np.where(top > 1e-12, top, 1.0), 0.0)
    return signal * scale[None]


def add_float(poses: np.ndarray, fps: float, seed: int) -> np.ndarray:
    """(n, 4, 4) cam_to_world ``poses`` with the float applied in each frame's own camera axes
    (+pan turns the view right, +tilt up, +roll clockwise seen from behind: the move grammar's signs)."""
    drift = float_offsets(poses.shape[0], fps, seed)  # (n, 5)
    out = np.array(poses, np.float64)
    rotation = out[:, :3, :3]
    out[:, :3, 3] += rotation[:, :, 0] * drift[:, 0:1] + rotation[:, :, 1] * drift[:, 1:2]
    local = axis_rotations(1, -drift[:, 2]) @ axis_rotations(0, drift[:, 3]) @ axis_rotations(2, -drift[:, 4])
    out[:, :3, :3] = rotation @ local
    return out
