"""The previz rasteriser: OpenGL 3.3 through moderngl on a headless EGL context.

Every pass draws into colour attachment 0, RGBA8: lit RGB, and the character index in the
alpha (0 = none, i + 1 = figures[i]), so masks need no attachment of their own. When control
channels are wanted, the same passes also write attachment 1, R32F: linear depth in metres
(+inf for sky). llvmpipe pays per attachment on every pixel a draw touches: at 1080p the
depth attachment and its read-back add ~3 ms of CPU to a ~22 ms frame, an id attachment
would add ~1 ms more, and a separate depth-only pass (geometry rasterised twice) ~7 ms.

* The projection's y axis is negated so that GL's first framebuffer row is the image's top
  row: read-back needs no flip and ``gl_FragCoord.xy`` equals the OpenCV pixel (u, v)
  of docs/conventions.md (pixel centres at +0.5). Mirroring turns the winding around, so
  front faces are clockwise on screen.
* Passes, in order, chosen because llvmpipe pays for every pixel a pass touches, even one
  the depth test rejects: (1) the sky, without depth test, over only the polygon of the
  frame the ground cannot cover (the rays that rise or meet the ground past the far plane;
  exact, since that boundary is a straight line in the image), so the horizon lands where
  the camera model puts it; (2) the set pieces; (3) the ground, a square reaching past the far
  plane under the camera, with a procedural grid, depth-tested so it skips pixels the
  set pieces cover; (4) their soft contact shadows blended onto the ground. Between them
  every pixel of every attachment is written, so only the depth buffer is cleared. Then
  (5) the figures and (6) their shadows.
* (1)-(4), the background, depend on the camera alone. A locked-off camera keeps the
  background in framebuffers of its own and copies it in (~12 instead of ~33 ms of CPU per
  1080p frame of examples/office.json, shot s01); see ``_draw``.
  Contact shadows stay a blended pass: computed in the ground shader instead (an unrolled
  loop over the blobs) they cost llvmpipe more than the decal pass they replace. A moving
  camera pays ~0.5-1 ms per frame for the split (the ground is shaded under the figures and
  there are more draw calls, ~70 us each); a depth-only pre-pass of the figures to spare the
  ground those pixels cost as much as it saved.
* Meshes (set pieces, figure parts) are a handful of unit primitives, drawn instanced with
  per-instance model matrices, one call per primitive for the set pieces (uploaded once)
  and one per primitive for the figures; nothing else is rebuilt per frame.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daotai.errors import BackendError
from daotai.plan import geometry
from daotai.render.previz.labels import LabelPainter, find_label_font, place_label
from daotai.render.previz.meshes import (
    HEAD_C,
    PRIMITIVES,
    face_points,
    figure_head_top,
    figure_instances,
    head_drop,
    primitive_meshes,
    set_piece_parts,
)
from daotai.render.previz.scene import Environment, FrameState, RenderSettings, SetPiece

EGL_HINT = (
    "OpenGL via EGL is unavailable: install Mesa's EGL driver "
    "(Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri; "
    "Fedora: dnf install mesa-libEGL mesa-dri-drivers)"
)
CONTACT_SHADOW_MAX_M = 5.0  # set pieces wider than this (walls, facades, the sea) cast no contact shadow
PRACTICAL_GAIN = 2.5  # a glowing piece's colour is multiplied by 1 + this x the environment's practicals
PRACTICAL_POOL_M = 2.2  # radius of the light pool under a practical (a lamp 2 m up or higher)
PRACTICAL_POOL_STRENGTH = 0.35  # its opacity at the centre, at full night
_INSTANCE_FLOATS = 29  # model 4x4 + normal 3x3 (column-major) + rgb + id

_MESH_VS = """
#version 330
uniform mat4 u_view;  // world -> camera
uniform mat4 u_proj;  // camera -> clip, y negated (top row first)
in vec3 in_pos;
in vec3 in_normal;
in vec4 i_m0; in vec4 i_m1; in vec4 i_m2; in vec4 i_m3;  // model matrix columns
in vec3 i_n0; in vec3 i_n1; in vec3 i_n2;                 // normal matrix columns
in vec3 i_colour;
in float i_id;
out vec3 v_normal;
out vec3 v_colour;
out float v_depth;
flat out uint v_id;
void main() {
    vec4 eye = u_view * (mat4(i_m0, i_m1, i_m2, i_m3) * vec4(in_pos, 1.0));
    v_depth = -eye.z;  // linear metres along the view axis; interpolates exactly
    v_normal = mat3(i_n0, i_n1, i_n2) * in_normal;
    v_colour = i_colour;
    v_id = uint(i_id + 0.5);
    gl_Position = u_proj * eye;
}
"""

_MESH_FS = """
#version 330
uniform vec3 u_sun;       // unit vector toward the light, world
uniform float u_ambient;
in vec3 v_normal;
in vec3 v_colour;
in float v_depth;
flat in uint v_id;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
void main() {
    vec3 n = normalize(v_normal);
    float lambert = max(dot(n, u_sun), 0.0);
    // Lambert + ambient, plus a little sky fill from above so the side away from the sun
    // still shows its form; figures end up slightly brighter than the unlit ground palette.
    float light = u_ambient + (1.0 - u_ambient) * lambert + 0.12 * (0.5 + 0.5 * n.y);
    // alpha carries the figure index (unorm8: id / 255 reads back as the byte id), so the
    // masks need no attachment of their own (see PrevizRenderer.render)
    f_colour = vec4(min(v_colour * light, vec3(1.0)), float(v_id) / 255.0);
    f_depth = v_depth;
}
"""

_GROUND_VS = """
#version 330
uniform mat4 u_view;
uniform mat4 u_proj;
uniform vec3 u_eye;      // camera position, world
uniform float u_extent;  // half-size of the ground square, metres
in vec2 in_corner;       // unit square corner in [-1, 1]^2
out vec2 v_xz;           // world x, z
out float v_depth;
void main() {
    // a square under the camera, wide enough to reach the far plane in every direction
    vec2 xz = u_eye.xz + in_corner * u_extent;
    vec4 eye = u_view * vec4(xz.x, 0.0, xz.y, 1.0);
    v_xz = xz;
    v_depth = -eye.z;
    gl_Position = u_proj * eye;
}
"""

_GROUND_FS = """
#version 330
uniform vec3 u_ground;
uniform vec3 u_grid;
uniform vec3 u_haze;
uniform float u_inv_spacing;  // grid cells per metre
uniform vec2 u_fog;           // fog distance (m), (far + fog distance) / far
in vec2 v_xz;
in float v_depth;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
void main() {
    vec2 cell = v_xz * u_inv_spacing;
    vec2 w = max(fwidth(cell), vec2(1e-6));  // cells per pixel
    vec2 iw = 1.0 / w;
    // Box-filtered lines: coverage of a line of half-width hw (cells) over the pixel footprint;
    // a line thinner than a pixel is widened to one pixel and dimmed to keep its ink. Minor
    // lines fade out as cells shrink below ~3 px and major lines (every 5th) below ~15 px,
    // so distant ground never shimmers into moire. One reciprocal and no other division:
    // llvmpipe runs this for most pixels of every frame.
    vec2 g = abs(fract(cell - 0.5) - 0.5);
    vec2 c = clamp((max(vec2(0.02), 0.5 * w) - g) * iw + 0.5, 0.0, 1.0) * min(vec2(1.0), 0.04 * iw);
    float minor = max(c.x, c.y) * clamp(2.0 - 6.0 * max(w.x, w.y), 0.0, 1.0);
    vec2 g5 = abs(fract(0.2 * cell - 0.5) - 0.5);
    vec2 c5 = clamp((max(vec2(0.006), 0.1 * w) - g5) * (5.0 * iw) + 0.5, 0.0, 1.0) * min(vec2(1.0), 0.06 * iw);
    float major = max(c5.x, c5.y) * clamp(2.0 - 1.2 * max(w.x, w.y), 0.0, 1.0);
    vec3 ground = mix(u_ground, u_grid, max(0.7 * minor, major));
    // haze grows with depth and reaches the sky pass's below-horizon colour exactly at the
    // far plane, so the ground meets the sliver beyond it without a seam
    float fog = min(1.0, v_depth * u_fog.y / (v_depth + u_fog.x));
    f_colour = vec4(mix(ground, u_haze, fog), 0.0);  // alpha = figure index 0
    f_depth = v_depth;
}
"""

_SKY_VS = """
#version 330
uniform mat3 u_rot;     // camera axes in world coordinates (columns x, y, z)
uniform vec4 u_intr;    // fx, fy, cx, cy in pixels of this framebuffer
uniform vec2 u_size;    // framebuffer width, height in pixels
in vec2 in_px;          // polygon corner in pixels (u, v)
noperspective out vec3 v_dir;
void main() {
    // the world ray through pixel (u, v); affine in the pixel, so interpolation is exact
    v_dir = u_rot * vec3((in_px.x - u_intr.z) / u_intr.x, -(in_px.y - u_intr.w) / u_intr.y, -1.0);
    // window row 0 is the image's top row (see the mirrored projection): v maps straight to y
    gl_Position = vec4(2.0 * in_px / u_size - 1.0, 0.0, 1.0);
}
"""

_SKY_FS = """
#version 330
uniform vec3 u_zenith;
uniform vec3 u_horizon;
uniform vec3 u_haze;
noperspective in vec3 v_dir;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
void main() {
    float s = 1.0 - v_dir.y * inversesqrt(dot(v_dir, v_dir));  // 0 at the zenith, 1 at the horizon
    // above the horizon a gradient; below it (ground past the far plane) the distant haze
    f_colour = vec4(s > 1.0 ? u_haze : mix(u_horizon, u_zenith, 1.0 - s * s * s), 0.0);  // alpha: no figure
    f_depth = uintBitsToFloat(0x7F800000u);  // +inf
}
"""

_DECAL_VS = """
#version 330
uniform mat4 u_view;
uniform mat4 u_proj;
in vec2 in_corner;      // unit quad corner in [-1, 1]^2
in vec4 i_blob;         // x, z, radius, strength
out vec2 v_local;
flat out float v_strength;
void main() {
    v_local = in_corner * 2.0;  // the quad spans two radii; the shadow is ~gone by then
    v_strength = i_blob.w;
    vec3 world = vec3(i_blob.x + v_local.x * i_blob.z, 0.0, i_blob.y + v_local.y * i_blob.z);
    gl_Position = u_proj * (u_view * vec4(world, 1.0));
}
"""

_DECAL_FS = """
#version 330
in vec2 v_local;
flat in float v_strength;
layout(location = 0) out vec4 f_colour;
void main() {
    // soft contact shadow: black with a gaussian alpha, blended over the ground colour only;
    // a negative strength is a practical light's warm pool on the ground instead
    float falloff = exp(-2.5 * dot(v_local, v_local));
    f_colour = v_strength >= 0.0 ? vec4(0.0, 0.0, 0.0, v_strength * falloff)
                                 : vec4(1.0, 0.82, 0.52, -v_strength * falloff);
}
"""


def projection_matrix(fov_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """OpenGL perspective matrix from a vertical fov, with y negated so row 0 is the image top."""
    return geometry.gl_projection(fov_deg, aspect, near, far, flip_y=True)


def intrinsics(fov_deg: float, width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in pixels for a vertical fov, as docs/conventions.md defines them."""
    return geometry.intrinsics_from_fov(fov_deg, width, height)


def project(cam_to_world: np.ndarray, fov_deg: float, width: int, height: int,
            points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel (u, v) of world points (N, 3) and their camera-space z (N,) (negative = in front; uv NaN behind)."""
    uv, depth = geometry.project(points, cam_to_world, geometry.intrinsics_from_fov(fov_deg, width, height))
    return uv, -depth


def sky_polygon(cam_to_world: np.ndarray, fov_deg: float, width: int, height: int,
                far: float) -> np.ndarray:
    """Pixel corners (K, 2), K <= 5, of the frame region the ground cannot cover.

    That is where the pixel's ray rises, or falls so gently that it meets the ground beyond
    the far plane: ``dir_y >= -eye_y / far`` with ``dir`` scaled to camera z = -1. ``dir_y``
    is affine in (u, v), so the region is the frame clipped by one straight line.
    """
    r = cam_to_world[:3, :3]
    eye_y = float(cam_to_world[1, 3])
    fx, fy, cx, cy = intrinsics(fov_deg, width, height)
    frame = np.array([[0.0, 0.0], [width, 0.0], [width, height], [0.0, height]])
    if eye_y <= 0.0:  # at or under the ground: draw the sky everywhere, the ground still wins
        return frame
    # dir_y(u, v) = a u + b v + c
    a = r[1, 0] / fx
    b = -r[1, 1] / fy
    c = -r[1, 0] * cx / fx + r[1, 1] * cy / fy - r[1, 2]
    # 1 % margin below the far-plane line so no sliver is left unpainted; the ground overdraws it
    level = a * frame[:, 0] + b * frame[:, 1] + c + 1.01 * eye_y / far
    out: list[np.ndarray] = []
    for i in range(4):
        j = (i + 1) % 4
        if level[i] >= 0.0:
            out.append(frame[i])
        if (level[i] >= 0.0) != (level[j] >= 0.0):
            k = level[i] / (level[i] - level[j])
            out.append(frame[i] + k * (frame[j] - frame[i]))
    return np.array(out).reshape(-1, 2)


@dataclass(frozen=True, eq=False)
class RenderedFrame:
    """One rendered frame and its frame-aligned control channels (row 0 = image top)."""

    rgb: np.ndarray = field(repr=False)  # (H, W, 3) uint8
    depth: np.ndarray | None = field(repr=False)  # (H, W) float32 metres along the view axis, inf = sky; None if not read
    masks: np.ndarray = field(repr=False)  # (H, W) uint8: 0 = none, i + 1 = figures[i]

    def character_mask(self, index: int) -> np.ndarray:
        """Mask of ``figures[index]`` per conventions: (H, W) uint8, 255 where visible."""
        return np.where(self.masks == index + 1, np.uint8(255), np.uint8(0))


def _instance_rows(models: np.ndarray, colours: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Pack instances into rows for the mesh shader: (N, 29) float32."""
    # models (N, 4, 4), colours (N, 3), ids (N,); normals transform by the inverse transpose
    normal = np.linalg.inv(models[:, :3, :3]).transpose(0, 2, 1)  # (N, 3, 3)
    rows = np.empty((len(models), _INSTANCE_FLOATS), np.float32)
    rows[:, 0:16] = models.transpose(0, 2, 1).reshape(-1, 16)  # column-major for GLSL
    rows[:, 16:25] = normal.transpose(0, 2, 1).reshape(-1, 9)
    rows[:, 25:28] = colours
    rows[:, 28] = ids
    return rows


def _gl_mat(m: np.ndarray) -> bytes:
    """A numpy matrix as column-major float32 bytes for a GLSL uniform."""
    return np.ascontiguousarray(m.T, dtype=np.float32).tobytes()


class PrevizRenderer:
    """Draws previz frames (RGB, depth, character ids) for one set; use as a context manager.

    The GL context is created in ``__init__`` and released by ``close()`` (or leaving the
    ``with`` block). Each ``render`` makes the context current for its duration, so one
    renderer may be driven from any single thread at a time.
    """

    def __init__(self, settings: RenderSettings, environment: Environment,
                 set_pieces: Iterable[SetPiece] = ()):
        self.settings = settings
        self.environment = environment
        self.set_pieces = tuple(set_pieces)
        self._gl: list[Any] = []  # every GL object, released in reverse order by close()
        self._ctx: Any = create_context()
        # read while the new context is current (later, other contexts of the process may be)
        self._description = f"{describe_context(self._ctx)} ({context_backend() or 'platform default'} context)"
        try:
            with self._ctx:
                self._build()
        except BaseException:
            self.close()
            raise
        self._labels = LabelPainter(find_label_font()) if settings.labels else None

    # ------------------------------------------------------------------ setup

    def _own(self, obj: Any) -> Any:
        """Remember a GL object for release and return it."""
        self._gl.append(obj)
        return obj

    def _build(self) -> None:
        """Create programs, meshes, instance buffers and the framebuffer."""
        ctx = self._ctx
        s = self.settings
        k = s.supersample
        self._size = (s.width * k, s.height * k)
        try:
            self._mesh_prog = self._own(ctx.program(vertex_shader=_MESH_VS, fragment_shader=_MESH_FS))
            self._ground_prog = self._own(ctx.program(vertex_shader=_GROUND_VS, fragment_shader=_GROUND_FS))
            self._decal_prog = self._own(ctx.program(vertex_shader=_DECAL_VS, fragment_shader=_DECAL_FS))
            self._sky_prog = self._own(ctx.program(vertex_shader=_SKY_VS, fragment_shader=_SKY_FS))
        except Exception as exc:  # moderngl raises plain Exception on compile/link errors
            raise BackendError(f"previz shaders failed to compile on this OpenGL driver: {exc}") from exc

        square = np.array([-1, -1, 1, -1, 1, 1, -1, -1, 1, 1, -1, 1], np.float32)  # (6 * 2,) two triangles
        square_vbo = self._own(ctx.buffer(square.tobytes()))
        self._ground_vao = self._own(ctx.vertex_array(self._ground_prog, [(square_vbo, "2f", "in_corner")]))
        # one instance buffer per layer (background, figures): a buffer rewritten while an
        # earlier draw from it is queued makes llvmpipe finish that draw first
        self._decals = {layer: _Instanced(self._own(ctx.buffer(reserve=16 * 16, dynamic=True)), 16)
                        for layer in _LAYERS}
        self._decal_vaos = {layer: self._own(ctx.vertex_array(
            self._decal_prog, [(square_vbo, "2f", "in_corner"), (self._decals[layer].buffer, "4f/i", "i_blob")]
        )) for layer in _LAYERS}
        self._sky_vbo = self._own(ctx.buffer(reserve=9 * 2 * 4, dynamic=True))  # <= 3 triangles (u, v)
        self._sky_vao = self._own(ctx.vertex_array(self._sky_prog, [(self._sky_vbo, "2f", "in_px")]))

        self._meshes: dict[tuple[str, str], _Instanced] = {}
        self._vaos: dict[tuple[str, str], Any] = {}
        for name, mesh in primitive_meshes().items():
            vbo = self._own(ctx.buffer(mesh.tobytes()))
            for layer in _LAYERS:
                inst = _Instanced(self._own(ctx.buffer(reserve=64 * _INSTANCE_FLOATS * 4, dynamic=True)), 64)
                self._meshes[layer, name] = inst
                self._vaos[layer, name] = self._own(ctx.vertex_array(
                    self._mesh_prog,
                    [
                        (vbo, "3f 3f", "in_pos", "in_normal"),
                        (inst.buffer, "4f 4f 4f 4f 3f 3f 3f 3f 1f/i",
                         "i_m0", "i_m1", "i_m2", "i_m3", "i_n0", "i_n1", "i_n2", "i_colour", "i_id"),
                    ],
                ))

        w, h = self._size
        colour_rb = self._own(ctx.renderbuffer((w, h), components=4, dtype="f1"))  # lit colour; alpha = index
        linear_rb = self._own(ctx.renderbuffer((w, h), components=1, dtype="f4"))  # linear depth, metres
        depth_rb = self._own(ctx.depth_renderbuffer((w, h)))
        # Frames without control channels draw into the colour attachment alone: the depth
        # attachment would cost ~3 ms of CPU per 1080p frame for nothing.
        self._fbo_colour = self._own(ctx.framebuffer(color_attachments=[colour_rb], depth_attachment=depth_rb))
        self._fbo_controls = self._own(ctx.framebuffer(color_attachments=[colour_rb, linear_rb],
                                                       depth_attachment=depth_rb))
        # The background (sky, ground, set pieces, their shadows) is drawn into framebuffers
        # of its own and copied under the figures: while the camera holds still it is reused.
        bg_colour = self._own(ctx.renderbuffer((w, h), components=4, dtype="f1"))
        bg_linear = self._own(ctx.renderbuffer((w, h), components=1, dtype="f4"))
        bg_depth = self._own(ctx.depth_renderbuffer((w, h)))
        self._bg_fbos = {
            1: self._own(ctx.framebuffer(color_attachments=[bg_colour], depth_attachment=bg_depth)),
            2: self._own(ctx.framebuffer(color_attachments=[bg_colour, bg_linear], depth_attachment=bg_depth)),
        }
        self._bg_key: tuple[Any, ...] | None = None  # attachments and camera it holds, if any
        self._last_key: tuple[Any, ...] | None = None  # attachments and camera of the last frame
        # RGBA read-back staging, reused every frame: llvmpipe hands out RGBA far faster than
        # it repacks to RGB, and OpenCV drops the alpha in a fraction of a millisecond
        self._rgba = np.empty((h, w, 4), np.uint8)  # (kH, kW, 4) uint8

        env = self.environment
        sun = np.asarray(env.sun_direction, np.float64)
        self._mesh_prog["u_sun"].value = tuple(sun / np.linalg.norm(sun))
        self._mesh_prog["u_ambient"].value = env.ambient
        # distant ground fades to a haze between ground and sky: the horizon stays a visible edge
        haze = tuple(0.45 * g + 0.55 * c for g, c in zip(env.ground_colour, env.sky_horizon, strict=True))
        gp = self._ground_prog
        gp["u_ground"].value = env.ground_colour
        gp["u_grid"].value = env.grid_colour
        gp["u_haze"].value = haze
        gp["u_inv_spacing"].value = 1.0 / env.grid_spacing_m
        fog_m = min(150.0, 0.3 * s.far)  # depth at which the haze is half way (before scaling)
        gp["u_fog"].value = (fog_m, (s.far + fog_m) / s.far)
        sp = self._sky_prog
        sp["u_zenith"].value = env.sky_zenith
        sp["u_horizon"].value = env.sky_horizon
        sp["u_haze"].value = haze
        sp["u_size"].value = (float(w), float(h))

        pieces = [set_piece_parts(p) for p in self.set_pieces]
        self._static_models = np.array([p.model for p in pieces]).reshape(-1, 4, 4)  # (S, 4, 4)
        # practical lights glow: their colour is pushed past white so the lighting cannot dim them
        gain = np.array([1.0 + PRACTICAL_GAIN * env.practicals if p.glow else 1.0 for p in self.set_pieces])
        self._static_colours = np.array([p.colour for p in pieces]).reshape(-1, 3) * gain.reshape(-1, 1)  # (S, 3)
        self._static_prims = np.array([PRIMITIVES.index(p.primitive) for p in pieces], np.int64)
        # set pieces never move: their instances are uploaded once, here
        static_rows = _instance_rows(self._static_models, self._static_colours,
                                     np.zeros(len(self._static_prims)))  # (S, 29), id 0
        self._static_draws = self._upload_meshes("background", static_rows, self._static_prims)
        # soft contact shadows (x, z, radius, strength) under set pieces standing on the ground; not
        # under walls, facades or the sea: a blob as wide as they are is a dark smear, not a contact
        # shadow, and llvmpipe pays for every pixel of its quad
        self._static_blobs = [
            (p.position[0], p.position[2], 0.6 * max(p.size[0], p.size[2]), 0.3)
            for p in self.set_pieces if abs(p.position[1]) < 0.05 and max(p.size[0], p.size[2]) <= CONTACT_SHADOW_MAX_M
        ]
        if env.practicals > 0.0:  # a warm pool of light on the ground under each practical
            self._static_blobs += [
                (p.position[0], p.position[2], PRACTICAL_POOL_M * min(1.0, 0.5 + 0.25 * (p.position[1] + p.size[1])),
                 -PRACTICAL_POOL_STRENGTH * env.practicals)
                for p in self.set_pieces if p.glow
            ]
        if self._static_blobs:
            self._decals["background"].write(np.asarray(self._static_blobs, np.float32))  # (B, 4)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> PrevizRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether the GL context has been released."""
        return self._ctx is None

    def describe(self) -> str:
        """The OpenGL renderer, version and context backend that draw this renderer's frames."""
        return self._description

    def close(self) -> None:
        """Release every GL object and the context; safe to call twice."""
        ctx, self._ctx = self._ctx, None
        if ctx is None:
            return
        with ctx:
            while self._gl:
                self._gl.pop().release()
        ctx.release()
        self._rgba = np.empty((0, 0, 4), np.uint8)  # drop the staging buffer with the context

    # ------------------------------------------------------------------ frames

    def render(self, state: FrameState, with_depth: bool = True) -> RenderedFrame:
        """Draw one frame: RGB (H, W, 3) uint8, depth (H, W) float32 metres, masks (H, W) uint8.

        ``with_depth=False`` draws without the depth attachment and skips its read-back (the
        largest read, 4 bytes a pixel) when no control channel is wanted; ``RenderedFrame.depth``
        is then None. RGB and masks are the same either way.
        """
        if self._ctx is None:
            raise BackendError("previz renderer: render() called after close(); create a new renderer")
        if len(state.figures) > 254:
            raise BackendError(f"figures: {len(state.figures)} figures exceed the 254 a uint8 mask can index")
        # OpenCV's process-wide thread count is left alone: changing it per frame while encoder
        # threads of the same run are inside OpenCV calls made their output vary from run to run.
        return self._render(state, with_depth)

    def _render(self, state: FrameState, with_depth: bool) -> RenderedFrame:
        """The body of ``render`` (inputs already checked)."""
        import cv2

        k = self.settings.supersample
        w, h = self._size
        depth = np.empty((h, w), np.float32) if with_depth else None  # (kH, kW) float32 metres
        with self._ctx:
            fbo = self._fbo_colour if depth is None else self._fbo_controls
            self._draw(state, fbo)
            fbo.read_into(self._rgba, components=4, attachment=0, dtype="f1")
            if depth is not None:
                fbo.read_into(depth, components=1, attachment=1, dtype="f4")
        masks = cv2.extractChannel(self._rgba, 3)  # (kH, kW) uint8 ids from the alpha
        rgb = cv2.cvtColor(self._rgba, cv2.COLOR_RGBA2RGB)  # (kH, kW, 3) uint8, a new array
        if k > 1:
            rgb = _area_downsample(rgb, k)
            # depth and ids are sampled, not averaged: a blend of two depths or ids is neither
            if depth is not None:
                depth = np.ascontiguousarray(depth[k // 2 :: k, k // 2 :: k])
            masks = np.ascontiguousarray(masks[k // 2 :: k, k // 2 :: k])
        if self._labels is not None and state.figures:
            self._draw_labels(state, rgb, masks)
        if self.settings.soften_px > 0:
            rgb = cv2.GaussianBlur(rgb, (3, 3), self.settings.soften_px)
        return RenderedFrame(rgb=rgb, depth=depth, masks=masks)

    def frames(self, states: Iterable[FrameState]) -> Iterator[RenderedFrame]:
        """Render a sequence of frame states lazily, one frame at a time."""
        for state in states:
            yield self.render(state)

    def _instances(self, state: FrameState) -> tuple[np.ndarray, np.ndarray]:
        """Instance rows (N, 29) float32 of the figures, and each row's primitive (N,)."""
        models: list[np.ndarray] = [np.zeros((0, 4, 4))]
        colours: list[np.ndarray] = [np.zeros((0, 3))]
        ids: list[np.ndarray] = [np.zeros(0)]
        prims: list[np.ndarray] = [np.zeros(0, np.int64)]
        for i, fig in enumerate(state.figures):
            m, c, p = figure_instances(fig)
            models.append(m)
            colours.append(c)
            ids.append(np.full(len(m), i + 1.0))
            prims.append(p)
        rows = _instance_rows(np.concatenate(models), np.concatenate(colours), np.concatenate(ids))
        return rows, np.concatenate(prims)

    def _draw(self, state: FrameState, fbo: Any) -> None:
        """Issue the GL commands of one frame into ``fbo``: the background, then the figures."""
        import moderngl

        ctx = self._ctx
        n_attach = len(fbo.color_attachments)
        s = self.settings
        w, h = self._size
        c2w = state.cam_to_world
        view_b = _gl_mat(geometry.world_to_camera(c2w))
        proj_b = _gl_mat(projection_matrix(state.fov_deg, w / h, s.near, s.far))
        ctx.viewport = (0, 0, w, h)
        ctx.front_face = "cw"  # the mirrored projection flips on-screen winding

        # The background depends on the camera alone, so a locked-off shot draws it once: from
        # the second frame with an unchanged camera it is drawn into framebuffers of its own
        # and copied (an exact copy) under the figures. A moving camera draws it straight into
        # ``fbo``, as the copy would cost ~3 ms per 1080p frame for nothing. Either way ``fbo``
        # gets the same pixels before the figures, so a frame never depends on earlier ones.
        key = (n_attach, c2w.tobytes(), state.fov_deg)
        if key == self._bg_key or key == self._last_key:
            bg = self._bg_fbos[n_attach]
            if key != self._bg_key:
                self._bg_key = None  # left unset if drawing fails half way
                self._draw_background(state, bg, view_b, proj_b)
                self._bg_key = key
            # every attachment and the depth buffer is copied, write masks wide open
            _use_with_masks(fbo, _masks(n_attach, (True,) * 4))
            ctx.copy_framebuffer(fbo, bg)
            _use_with_masks(fbo, _masks(n_attach, (True,) * 4))
        else:
            self._draw_background(state, fbo, view_b, proj_b)
        self._last_key = key

        ctx.enable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        ctx.disable(moderngl.BLEND)
        ctx.depth_func = "<"
        self._draw_meshes("figures", self._upload_meshes("figures", *self._instances(state)), view_b, proj_b)
        blobs = [(f.position[0], f.position[1], 0.3 * f.height_m, 0.35) for f in state.figures]
        if blobs:
            self._decals["figures"].write(np.asarray(blobs, np.float32))  # (B, 4) x, z, radius, strength
        self._draw_decals("figures", len(blobs), fbo, view_b, proj_b)

    def _draw_background(self, state: FrameState, fbo: Any, view_b: bytes, proj_b: bytes) -> None:
        """Sky, set pieces, ground and the set pieces' contact shadows into ``fbo``."""
        import moderngl

        ctx = self._ctx
        n_attach = len(fbo.color_attachments)
        s = self.settings
        w, h = self._size
        c2w = state.cam_to_world

        # Only depth needs clearing: the sky covers the part of the frame the ground cannot
        # reach and the ground the rest, so every colour and linear-depth pixel gets written.
        _use_with_masks(fbo, _masks(n_attach, (False,) * 4))
        fbo.clear(depth=1.0)
        _use_with_masks(fbo, _masks(n_attach, (True,) * 4))
        ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)

        # Sky first, without a depth test and only over its own polygon: llvmpipe pays per
        # pixel touched, tested or not, and everything drawn later lies in front of it.
        poly = sky_polygon(c2w, state.fov_deg, w, h, s.far)
        if len(poly) >= 3:
            fan = poly[[i for t in range(1, len(poly) - 1) for i in (0, t, t + 1)]].astype(np.float32)
            self._sky_vbo.write(fan.tobytes())
            sp = self._sky_prog
            sp["u_rot"].write(_gl_mat(c2w[:3, :3]))
            sp["u_intr"].value = intrinsics(state.fov_deg, w, h)
            ctx.disable(moderngl.DEPTH_TEST)
            self._sky_vao.render(moderngl.TRIANGLES, vertices=len(fan))

        # Set pieces next, so the ground pass after them skips covered pixels (early depth test).
        ctx.enable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        ctx.depth_func = "<"
        self._draw_meshes("background", self._static_draws, view_b, proj_b)

        ctx.disable(moderngl.CULL_FACE)  # the ground is seen from below if the camera goes under it
        gp = self._ground_prog
        gp["u_view"].write(view_b)
        gp["u_proj"].write(proj_b)
        gp["u_eye"].value = tuple(float(v) for v in c2w[:3, 3])
        # Reach the far plane in every corner of the frame: at wide angles it cuts the ground
        # further out than ``far`` from the camera, up to far / cos(half the diagonal fov).
        tan_diag = math.tan(math.radians(state.fov_deg) / 2.0) * math.hypot(1.0, w / h)
        gp["u_extent"].value = 1.1 * s.far * math.hypot(1.0, tan_diag)
        self._ground_vao.render(moderngl.TRIANGLES)
        self._draw_decals("background", len(self._static_blobs), fbo, view_b, proj_b)

    def _upload_meshes(self, layer: str, rows: np.ndarray, prims: np.ndarray) -> list[tuple[str, int]]:
        """Write instance ``rows`` (N, 29) into the layer's buffers, grouped by primitive ``prims`` (N,).

        Returns the (primitive, instance count) draws that ``_draw_meshes`` then issues.
        """
        order = np.argsort(prims, kind="stable")
        rows = rows[order]
        counts = np.bincount(prims, minlength=len(PRIMITIVES))
        draws, start = [], 0
        for name, n in zip(PRIMITIVES, counts.tolist(), strict=True):
            if n:
                self._meshes[layer, name].write(rows[start : start + n])
                draws.append((name, n))
                start += n
        return draws

    def _draw_meshes(self, layer: str, draws: list[tuple[str, int]], view_b: bytes, proj_b: bytes) -> None:
        """One instanced draw per (primitive, count) of the layer's buffers, depth test as set."""
        import moderngl

        if not draws:
            return
        self._mesh_prog["u_view"].write(view_b)
        self._mesh_prog["u_proj"].write(proj_b)
        for name, n in draws:
            self._vaos[layer, name].render(moderngl.TRIANGLES, instances=n)

    def _draw_decals(self, layer: str, n: int, fbo: Any, view_b: bytes, proj_b: bytes) -> None:
        """Blend the layer's first ``n`` contact shadows onto the ground already in ``fbo``."""
        import moderngl

        if not n:
            return
        ctx = self._ctx
        n_attach = len(fbo.color_attachments)
        # Shadows lie on the ground: pulled slightly toward the camera they win the depth
        # test against it and lose against any mesh in front; colour only, no depth or ids.
        self._decal_prog["u_view"].write(view_b)
        self._decal_prog["u_proj"].write(proj_b)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.depth_func = "<"
        ctx.disable(moderngl.CULL_FACE)
        ctx.enable(moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        ctx.polygon_offset = (-1.0, -4.0)
        # RGB only: the alpha holds the figure index and the control attachments stay as drawn
        _use_with_masks(fbo, _masks(n_attach, (True, True, True, False), (False,) * 4), depth=False)
        self._decal_vaos[layer].render(moderngl.TRIANGLES, instances=n)
        _use_with_masks(fbo, _masks(n_attach, (True,) * 4))
        ctx.polygon_offset = (0.0, 0.0)
        ctx.disable(moderngl.BLEND)

    def _draw_labels(self, state: FrameState, rgb: np.ndarray, masks: np.ndarray) -> None:
        """Draw each visible figure's label near its head and off every face onto ``rgb`` in place."""
        assert self._labels is not None
        s = self.settings
        tops = np.stack([figure_head_top(f) for f in state.figures])  # (N, 3) world
        intr = geometry.intrinsics_from_fov(state.fov_deg, s.width, s.height)
        uv, depth = geometry.project(tops, state.cam_to_world, intr)  # (N, 2) px, (N,) m
        fy = intr[1]
        # a label needs its figure on screen, and its head not hidden behind someone or something
        visible = [v and not h for v, h in zip(_visible(state, masks), _head_hidden(state, masks), strict=True)]
        heads = [_face_box(f, state, intr, s.near) for f in state.figures]  # screen boxes, None behind the lens
        faces = [box for box, v in zip(heads, visible, strict=True) if box is not None and v]
        order = np.argsort(-depth, kind="stable")  # farthest drawn first
        for i in order:
            fig = state.figures[i]
            head = heads[i]
            if depth[i] <= s.near or not visible[i] or head is None:  # behind the camera, hidden, or off-frame
                continue
            on_screen_height = fy * fig.height_m / depth[i]
            size = int(round(min(max(0.065 * on_screen_height, 11.0), max(11.0, s.height / 22.0))))
            text = self._labels.text_for(fig.label, fig.char_id)
            colour = tuple(int(round(255 * c)) for c in fig.colour)
            patch = self._labels.patch(text, size, colour)  # type: ignore[arg-type]
            gap = round(self._labels.style.gap * size)
            corner = place_label((patch.shape[1], patch.shape[0]), head, faces, (s.width, s.height), gap)
            if corner is not None:  # None: the faces fill the frame, and a name on one would hide it
                self._labels.draw_at(rgb, corner, size, text, colour)  # type: ignore[arg-type]
                # a later label keeps off this one too
                faces.append((corner[0], corner[1], corner[0] + patch.shape[1], corner[1] + patch.shape[0]))


_LAYERS = ("background", "figures")


class _Instanced:
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


def _use_with_masks(fbo: Any, colour: Any, depth: bool = True) -> None:
    """Set a framebuffer's colour and depth write masks and bind it, so they take effect.

    moderngl (5.13) hands a single-attachment framebuffer's masks to GL only when it is bound
    (and on clear): setting them on the bound framebuffer alone left the colour-only pass masked
    off after the depth clear, so a renderer that never drew with controls gave black frames.
    """
    fbo.color_mask = colour
    fbo.depth_mask = depth
    fbo.use()


def _masks(n: int, first: tuple[bool, ...], rest: tuple[bool, ...] | None = None) -> Any:
    """A colour mask for a framebuffer of ``n`` attachments (moderngl takes a bare tuple for one)."""
    if n == 1:
        return first
    return (first,) + ((rest if rest is not None else first),) * (n - 1)


def _visible(state: FrameState, masks: np.ndarray) -> list[bool]:
    """Per figure, whether any of its pixels made it into ``masks`` (searched in its screen box)."""
    h, w = masks.shape
    # a generous box around each figure, walking limbs included: (N * 8, 3) world corners
    corners = np.array([
        [f.position[0] + dx * f.height_m, y * f.height_m, f.position[1] + dz * f.height_m]
        for f in state.figures for dx in (-0.5, 0.5) for dz in (-0.5, 0.5) for y in (0.0, 1.1)
    ])
    uv, depth = geometry.project(corners, state.cam_to_world, geometry.intrinsics_from_fov(state.fov_deg, w, h))
    out = []
    for i in range(len(state.figures)):
        box_uv, box_depth = uv[8 * i : 8 * i + 8], depth[8 * i : 8 * i + 8]
        if np.all(box_depth > 0.0):
            x0, y0 = np.floor(box_uv.min(axis=0)).astype(int)
            x1, y1 = np.ceil(box_uv.max(axis=0)).astype(int) + 1
            x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
            region = masks[y0:y1, x0:x1] if x0 < x1 and y0 < y1 else masks[:0, :0]
        else:  # the box straddles the camera plane: its projection is unbounded, search everything
            region = masks
        out.append(bool((region == i + 1).any()))
    return out


def _face_box(fig: Any, state: FrameState, intr: Any, near: float) -> tuple[float, float, float, float] | None:
    """Screen box (x0, y0, x1, y1) px of a figure's head (it may reach past the frame); None when
    part of it is behind the near plane."""
    uv, depth = geometry.project(face_points(fig), state.cam_to_world, intr)  # (N, 2) px, (N,) m
    if not np.all(depth > near):
        return None
    x0, y0 = np.floor(uv.min(axis=0))
    x1, y1 = np.ceil(uv.max(axis=0)) + 1.0
    return float(x0), float(y0), float(x1), float(y1)


def _head_hidden(state: FrameState, masks: np.ndarray) -> list[bool]:
    """Per figure, whether its head is inside the frame yet none of its pixels show (something covers it)."""
    h, w = masks.shape
    intr = geometry.intrinsics_from_fov(state.fov_deg, w, h)
    out = []
    for i, f in enumerate(state.figures):
        # the head from the chin to the top of the hair, as wide as the hair, in a plane through its centre
        if f.kind != "person":  # an animal's head is ahead of its feet: its body test decides
            out.append(False)
            continue
        centre = np.array([f.position[0], (HEAD_C[1] - head_drop(f)) * f.height_m, f.position[1]])
        lo, hi, side = -0.055 * f.height_m, 0.075 * f.height_m, 0.052 * f.height_m
        right = state.cam_to_world[:3, 0]  # the box faces the camera
        corners = centre + np.array([s * side * right + [0.0, dy, 0.0] for s in (-1, 1) for dy in (lo, hi)])
        uv, depth = geometry.project(corners, state.cam_to_world, intr)
        if not np.all(depth > 0.0):
            out.append(False)  # the head straddles the camera plane: leave it to the body test
            continue
        x0, y0 = np.maximum(np.floor(uv.min(axis=0)).astype(int), 0)
        x1, y1 = np.ceil(uv.max(axis=0)).astype(int) + 1
        x1, y1 = min(x1, w), min(y1, h)
        if x0 >= x1 or y0 >= y1:
            out.append(False)  # off-frame, not covered: the label still says who this is
            continue
        out.append(not bool((masks[y0:y1, x0:x1] == i + 1).any()))
    return out


def _area_downsample(rgb: np.ndarray, k: int) -> np.ndarray:
    """Average k x k blocks: (kH, kW, 3) uint8 -> (H, W, 3) uint8."""
    import cv2

    h, w = rgb.shape[0] // k, rgb.shape[1] // k
    return cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)


RASTERISER_THREADS = "1"  # llvmpipe threads unless LP_NUM_THREADS is set (see create_context)
GL_BACKENDS = ("egl", "glx", "default")  # DAOTAI_GL: egl (Linux default), glx (an X display), default
GL_HINTS = {
    "egl": EGL_HINT,
    "glx": "OpenGL via GLX needs an X display (DISPLAY, e.g. under Xvfb) and Mesa's GL driver",
    "Darwin": "macOS did not give an OpenGL 3.3 core context (CGL); previz needs a Mac with OpenGL 4.1",
    "Windows": "Windows did not give an OpenGL 3.3 context (WGL); update the graphics driver",
}


def context_backend(system: str | None = None, choice: str | None = None) -> str | None:
    """The moderngl context backend: EGL on Linux (headless), else the platform's own (CGL, WGL).

    ``choice`` (default: $DAOTAI_GL) forces one: ``egl``, ``glx`` (an X display, as CI uses to run
    the non-EGL path a Mac runs) or ``default`` (moderngl's choice for the platform).
    """
    import platform

    system = system or platform.system()
    choice = (os.environ.get("DAOTAI_GL", "") if choice is None else choice).strip().lower()
    if choice and choice not in GL_BACKENDS:
        raise BackendError(f"DAOTAI_GL: {choice!r} must be one of {', '.join(GL_BACKENDS)}")
    if choice == "default" or (not choice and system != "Linux"):
        return None  # macOS: a CGL core-profile context (OpenGL 4.1); Windows: WGL
    if choice == "glx":
        return None  # on Linux moderngl's default standalone context is GLX
    return "egl"


def create_context() -> Any:
    """A standalone headless OpenGL 3.3 core context for this platform, or BackendError saying what to install."""
    import platform

    try:
        import moderngl
    except ImportError as exc:  # a base dependency; only a broken install gets here
        raise BackendError("the previz renderer needs the 'moderngl' package: pip install moderngl") from exc
    # Mesa's llvmpipe reads its rasteriser thread count once, when the first context of the
    # process opens; by default it takes one thread per core. One thread is the default here:
    # (1) a run keeps the main thread and the encoder processes busy on the other cores, and on
    # 2 cores one rasteriser thread spent ~20 % less CPU per 1080p frame than two (bench/previz.py);
    # (2) llvmpipe's pixels can depend on its thread count (an orbit shot differed between 1 and 2
    # threads), so a fixed count keeps renders byte-identical across machines with different core
    # counts and across processes (cluster workers, the server's workers). An LP_NUM_THREADS
    # already set wins: a many-core machine may trade that reproducibility for speed.
    os.environ.setdefault("LP_NUM_THREADS", RASTERISER_THREADS)
    backend = context_backend()
    try:
        if backend is None:
            return moderngl.create_standalone_context(require=330)
        return moderngl.create_standalone_context(backend=backend, require=330)
    except Exception as exc:  # noqa: BLE001  (glcontext raises plain Exception when a library or driver is missing)
        system = platform.system()
        hint = GL_HINTS.get(backend or "", GL_HINTS.get(system, GL_HINTS["glx"] if system == "Linux" else ""))
        raise BackendError(f"{hint} ({exc})") from exc


def describe_context(ctx: Any) -> str:
    """One line naming the OpenGL renderer and version of a context (manifests and doctor show it)."""
    info = ctx.info
    return f"{info.get('GL_RENDERER', '?')}; OpenGL {info.get('GL_VERSION', '?')}"
