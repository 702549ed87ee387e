"""Small helpers between numpy and moderngl: instance rows packed for the mesh shader, matrices as
uniform bytes, instance buffers that grow, and framebuffer write masks set so they take effect.

Apart from the renderer (``daotai.render.previz.gl``) because they hold moderngl's own rules (its
column-major uniforms, when a framebuffer's masks reach GL) rather than the order of the passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

INSTANCE_FLOATS = 29  # model 4x4 + normal 3x3 (column-major) + rgb + id


def instance_rows(models: np.ndarray, colours: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Pack instances into rows for the mesh shader: (N, 29) float32."""
    # models (N, 4, 4), colours (N, 3), ids (N,); normals transform by the inverse transpose
    normal = np.linalg.inv(models[:, :3, :3]).transpose(0, 2, 1)  # (N, 3, 3)
    rows = np.empty((len(models), INSTANCE_FLOATS), np.float32)
    rows[:, 0:16] = models.transpose(0, 2, 1).reshape(-1, 16)  # column-major for GLSL
    rows[:, 16:25] = normal.transpose(0, 2, 1).reshape(-1, 9)
    rows[:, 25:28] = colours
    rows[:, 28] = ids
    return rows


def gl_mat(m: np.ndarray) -> bytes:
    """A numpy matrix as column-major float32 bytes for a GLSL uniform."""
    return np.ascontiguousarray(m.T, dtype=np.float32).tobytes()


class Instanced:
    """A per-instance vertex buffer that grows (doubling) when a draw needs more rows."""

    def __init__(self, buffer: Any, capacity: int):
        self.buffer = buffer
        self.capacity = capacity  # rows

    def write(self, rows: np.ndarray) -> None:
        """Upload ``rows`` (N, K) float32 to the start of the buffer."""
        if len(rows) > self.capacity:
            self.capacity = 2 * len(rows)
            self.buffer.orphan(self.capacity * rows.shape[1] * 4)
        self.buffer.write(np.ascontiguousarray(rows, np.float32).tobytes())


def use_with_masks(fbo: Any, colour: Any, depth: bool = True) -> None:
    """Set a framebuffer's colour and depth write masks and bind it, so they take effect.

    moderngl (5.13) hands a single-attachment framebuffer's masks to GL only when it is bound
    (and on clear): setting them on the bound framebuffer alone left the colour-only pass masked
    off after the depth clear, so a renderer that never drew with controls gave black frames.
    """
    fbo.color_mask = colour
    fbo.depth_mask = depth
    fbo.use()


def colour_mask(n: int, first: tuple[bool, ...], rest: tuple[bool, ...] | None = None) -> Any:
    """A colour mask for a framebuffer of ``n`` attachments (moderngl takes a bare tuple for one)."""
    if n == 1:
        return first
    return (first,) + ((rest if rest is not None else first),) * (n - 1)
