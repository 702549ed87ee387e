"""The previz rasteriser: OpenGL 3.3 through moderngl on a headless EGL context.

One pass per frame draws into three colour attachments at once (MRT):
0 lit RGB, 1 linear depth in metres (R32F, +inf for sky), 2 character index (R8UI).

* The projection's y axis is negated so that GL's first framebuffer row is the image's top
  row: read-back needs no flip and ``gl_FragCoord.xy`` equals the OpenCV pixel (u, v)
  of docs/conventions.md (pixel centres at +0.5). Mirroring turns the winding around, so
  front faces are clockwise on screen.
* Sky and ground are one full-screen pass that intersects each pixel's ray with y = 0:
  the ground is infinite and the horizon lands exactly where the camera model puts it.
  That pass writes every pixel (colour, depth, id and ``gl_FragDepth``), so nothing needs
  clearing; meshes are drawn after it and depth-tested against it.
* Meshes (set pieces, figure parts) are a handful of unit primitives, each drawn once per
  frame instanced with per-instance model matrices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daotai.errors import BackendError
from daotai.render.previz.labels import LabelPainter, find_label_font
from daotai.render.previz.meshes import (
    PRIMITIVES,
    Part,
    figure_head_top,
    figure_parts,
    primitive_meshes,
    set_piece_parts,
)
from daotai.render.previz.scene import Environment, FrameState, RenderSettings, SetPiece

EGL_HINT = (
    "OpenGL via EGL is unavailable: install Mesa's EGL driver "
    "(Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri; "
    "Fedora: dnf install mesa-libEGL mesa-dri-drivers)"
)
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
layout(location = 2) out uint f_id;
void main() {
    vec3 n = normalize(v_normal);
    float lambert = max(dot(n, u_sun), 0.0);
    // Lambert + ambient, plus a little sky fill from above so the side away from the sun
    // still shows its form; figures end up slightly brighter than the unlit ground palette.
    float light = u_ambient + (1.0 - u_ambient) * lambert + 0.12 * (0.5 + 0.5 * n.y);
    f_colour = vec4(min(v_colour * light, vec3(1.0)), 1.0);
    f_depth = v_depth;
    f_id = v_id;
}
"""

_BG_VS = """
#version 330
uniform mat3 u_rot;     // camera axes in world coordinates (columns x, y, z)
uniform vec4 u_intr;    // fx, fy, cx, cy in pixels of this framebuffer
uniform vec2 u_size;    // framebuffer width, height in pixels
noperspective out vec3 v_dir;
void main() {
    // one triangle that covers the viewport, wound clockwise like the mirrored meshes
    vec2 ndc = vec2(float((gl_VertexID & 2) << 1) - 1.0, float((gl_VertexID & 1) << 2) - 1.0);
    // window row 0 is the image's top row (see the mirrored projection), so v grows with ndc.y
    vec2 px = (ndc * 0.5 + 0.5) * u_size;
    // the camera ray through pixel (u, v), scaled so its camera-space z is -1: the ray
    // parameter at a hit is then the view depth. Affine in the pixel, so interpolating it
    // across the triangle is exact and saves the fragment shader a matrix product.
    v_dir = u_rot * vec3((px.x - u_intr.z) / u_intr.x, -(px.y - u_intr.w) / u_intr.y, -1.0);
    gl_Position = vec4(ndc, 0.0, 1.0);
}
"""

_BG_FS = """
#version 330
uniform vec3 u_eye;     // camera position, world
uniform vec2 u_clip;    // near, far
uniform vec3 u_zenith;
uniform vec3 u_horizon;
uniform vec3 u_ground;
uniform vec3 u_grid;
uniform vec3 u_haze;
uniform float u_spacing;
uniform float u_fog;    // metres over which the ground fades 63 % toward the haze
noperspective in vec3 v_dir;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
layout(location = 2) out uint f_id;

void main() {
    float t = -u_eye.y / v_dir.y;  // ray parameter = view depth at the ground; <= 0 or inf: no hit
    bool hit = t > 0.0 && t < 1e30;
    // derivatives need every pixel of a 2x2 quad to take part: sky pixels use a far point,
    // whose huge footprint fades the lines to nothing
    vec2 cell = (u_eye.xz + v_dir.xz * (hit ? min(t, 1e6) : 1e6)) / u_spacing;
    vec2 w = fwidth(cell);  // cells per pixel
    // box-filtered lines: coverage of a line of half-width hw over the pixel footprint, dimmed
    // when thinner than a pixel; minor lines vanish as cells shrink below ~3 px, major lines
    // (every 5th) below ~15 px, so distant ground never shimmers into moire
    vec2 g = abs(fract(cell - 0.5) - 0.5);
    vec2 hw = max(vec2(0.02), 0.5 * w);
    vec2 c = clamp((hw + 0.5 * w - g) / w, 0.0, 1.0) * (0.02 / hw);
    float minor = max(c.x, c.y) * (1.0 - smoothstep(0.15, 0.35, max(w.x, w.y)));
    vec2 g5 = abs(fract(cell * 0.2 - 0.5) - 0.5);
    vec2 w5 = 0.2 * w;
    vec2 hw5 = max(vec2(0.008), 0.5 * w5);
    vec2 c5 = clamp((hw5 + 0.5 * w5 - g5) / w5, 0.0, 1.0) * (0.008 / hw5);
    float major = max(c5.x, c5.y) * (1.0 - smoothstep(0.15, 0.35, max(w5.x, w5.y)));
    vec3 ground = mix(u_ground, u_grid, max(0.7 * minor, major));
    ground = mix(ground, u_haze, 1.0 - exp(-t / u_fog));

    float s = 1.0 - clamp(v_dir.y * inversesqrt(dot(v_dir, v_dir)), 0.0, 1.0);
    vec3 sky = mix(u_horizon, u_zenith, 1.0 - s * s * s);

    float n = u_clip.x;
    float f = u_clip.y;
    bool inside = hit && t <= f;
    f_colour = vec4(hit ? ground : sky, 1.0);
    f_depth = inside ? t : uintBitsToFloat(0x7F800000u);  // +inf: sky or past the far plane
    f_id = 0u;
    // window depth of view depth t under the standard GL projection, depth range [0, 1]
    gl_FragDepth = inside ? clamp(0.5 * ((f + n) / (f - n) - 2.0 * f * n / ((f - n) * t)) + 0.5, 0.0, 1.0) : 1.0;
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
    // soft contact shadow: black with a gaussian alpha, blended over the ground colour only
    f_colour = vec4(0.0, 0.0, 0.0, v_strength * exp(-2.5 * dot(v_local, v_local)));
}
"""


def projection_matrix(fov_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """OpenGL perspective matrix from a vertical fov, with y negated so row 0 is the image top."""
    f = 1.0 / math.tan(math.radians(fov_deg) / 2.0)
    return np.array(
        [
            [f / aspect, 0.0, 0.0, 0.0],
            [0.0, -f, 0.0, 0.0],
            [0.0, 0.0, (far + near) / (near - far), 2.0 * far * near / (near - far)],
            [0.0, 0.0, -1.0, 0.0],
        ]
    )


def intrinsics(fov_deg: float, width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in pixels for a vertical fov, as docs/conventions.md defines them."""
    fy = (height / 2.0) / math.tan(math.radians(fov_deg) / 2.0)
    return fy, fy, width / 2.0, height / 2.0


def project(cam_to_world: np.ndarray, fov_deg: float, width: int, height: int,
            points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel (u, v) of world points (N, 3) and their camera-space z (N,) (negative = in front)."""
    view = np.linalg.inv(cam_to_world)
    cam = points @ view[:3, :3].T + view[:3, 3]  # (N, 3) camera space
    fx, fy, cx, cy = intrinsics(fov_deg, width, height)
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = np.stack([cx + fx * cam[:, 0] / -cam[:, 2], cy - fy * cam[:, 1] / -cam[:, 2]], axis=1)
    return uv, cam[:, 2]


@dataclass(frozen=True, eq=False)
class RenderedFrame:
    """One rendered frame and its frame-aligned control channels (row 0 = image top)."""

    rgb: np.ndarray = field(repr=False)  # (H, W, 3) uint8
    depth: np.ndarray = field(repr=False)  # (H, W) float32 metres along the view axis, inf = sky
    masks: np.ndarray = field(repr=False)  # (H, W) uint8: 0 = none, i + 1 = figures[i]

    def character_mask(self, index: int) -> np.ndarray:
        """Mask of ``figures[index]`` per conventions: (H, W) uint8, 255 where visible."""
        return np.where(self.masks == index + 1, np.uint8(255), np.uint8(0))


def _instance_rows(parts: list[Part], ids: list[int]) -> np.ndarray:
    """Pack parts into per-instance rows: (N, 29) float32."""
    if not parts:
        return np.zeros((0, _INSTANCE_FLOATS), np.float32)
    models = np.stack([p.model for p in parts])  # (N, 4, 4) float64
    # normals transform by the inverse transpose (non-uniform scales)
    normal = np.transpose(np.linalg.inv(models[:, :3, :3]), (0, 2, 1))  # (N, 3, 3)
    rows = np.empty((len(parts), _INSTANCE_FLOATS), np.float32)
    rows[:, 0:16] = np.transpose(models, (0, 2, 1)).reshape(-1, 16)  # column-major
    rows[:, 16:25] = np.transpose(normal, (0, 2, 1)).reshape(-1, 9)
    rows[:, 25:28] = [p.colour for p in parts]
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
        self._ctx: Any = None
        self._ctx = _create_context()
        try:
            with self._ctx:
                self._build()
        except BaseException:
            self.close()
            raise
        self._labels = LabelPainter(find_label_font()) if settings.labels else None

    # ------------------------------------------------------------------ setup

    def _build(self) -> None:
        """Create programs, meshes, instance buffers and the framebuffer."""
        ctx = self._ctx
        k = self.settings.supersample
        self._size = (self.settings.width * k, self.settings.height * k)
        try:
            self._mesh_prog = ctx.program(vertex_shader=_MESH_VS, fragment_shader=_MESH_FS)
            self._bg_prog = ctx.program(vertex_shader=_BG_VS, fragment_shader=_BG_FS)
            self._decal_prog = ctx.program(vertex_shader=_DECAL_VS, fragment_shader=_DECAL_FS)
        except Exception as exc:  # moderngl raises plain Exception on compile/link errors
            raise BackendError(f"previz shaders failed to compile on this OpenGL driver: {exc}") from exc
        self._bg_vao = ctx.vertex_array(self._bg_prog, [])
        corners = np.array([-1, -1, 1, -1, 1, 1, -1, -1, 1, 1, -1, 1], np.float32)  # (6 * 2,) two triangles
        self._decal_vbo = ctx.buffer(corners.tobytes())
        self._decal_ibo = ctx.buffer(reserve=16 * 16, dynamic=True)
        self._decal_capacity = 16
        self._decal_vao = ctx.vertex_array(
            self._decal_prog, [(self._decal_vbo, "2f", "in_corner"), (self._decal_ibo, "4f/i", "i_blob")]
        )
        self._vbos: dict[str, Any] = {}
        self._ibos: dict[str, Any] = {}
        self._vaos: dict[str, Any] = {}
        self._capacity: dict[str, int] = {}
        for name, mesh in primitive_meshes().items():
            self._vbos[name] = ctx.buffer(mesh.tobytes())
            self._capacity[name] = 64
            self._ibos[name] = ctx.buffer(reserve=64 * _INSTANCE_FLOATS * 4, dynamic=True)
            self._vaos[name] = ctx.vertex_array(
                self._mesh_prog,
                [
                    (self._vbos[name], "3f 3f", "in_pos", "in_normal"),
                    (self._ibos[name], "4f 4f 4f 4f 3f 3f 3f 3f 1f/i",
                     "i_m0", "i_m1", "i_m2", "i_m3", "i_n0", "i_n1", "i_n2", "i_colour", "i_id"),
                ],
            )
        w, h = self._size
        self._attachments = [
            ctx.renderbuffer((w, h), components=4, dtype="f1"),
            ctx.renderbuffer((w, h), components=1, dtype="f4"),
            ctx.renderbuffer((w, h), components=1, dtype="u1"),
        ]
        self._depth_rb = ctx.depth_renderbuffer((w, h))
        self._fbo = ctx.framebuffer(color_attachments=self._attachments, depth_attachment=self._depth_rb)
        self._static_parts = [set_piece_parts(p) for p in self.set_pieces]
        env = self.environment
        sun = np.asarray(env.sun_direction, np.float64)
        self._mesh_prog["u_sun"].value = tuple(sun / np.linalg.norm(sun))
        self._mesh_prog["u_ambient"].value = env.ambient
        bg = self._bg_prog
        bg["u_zenith"].value = env.sky_zenith
        bg["u_horizon"].value = env.sky_horizon
        bg["u_ground"].value = env.ground_colour
        bg["u_grid"].value = env.grid_colour
        # distant ground fades to a haze between ground and sky: the horizon stays a visible edge
        bg["u_haze"].value = tuple(0.45 * g + 0.55 * s for g, s in zip(env.ground_colour, env.sky_horizon))
        bg["u_spacing"].value = env.grid_spacing_m
        bg["u_fog"].value = 150.0
        bg["u_clip"].value = (self.settings.near, self.settings.far)
        bg["u_size"].value = (float(w), float(h))
        # contact shadows (x, z, radius, strength) under set pieces standing on the ground
        self._static_blobs = [
            (p.position[0], p.position[2], 0.6 * max(p.size[0], p.size[2]), 0.3)
            for p in self.set_pieces if abs(p.position[1]) < 0.05
        ]

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> PrevizRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether the GL context has been released."""
        return self._ctx is None

    def close(self) -> None:
        """Release every GL object and the context; safe to call twice."""
        ctx, self._ctx = self._ctx, None
        if ctx is None:
            return
        with ctx:
            for name in ("_fbo", "_depth_rb", "_bg_vao", "_decal_vao", "_decal_ibo", "_decal_vbo",
                         "_mesh_prog", "_bg_prog", "_decal_prog"):
                obj = self.__dict__.pop(name, None)
                if obj is not None:
                    obj.release()
            for obj in [*self.__dict__.pop("_attachments", [])]:
                obj.release()
            for group in ("_vaos", "_ibos", "_vbos"):
                for obj in self.__dict__.pop(group, {}).values():
                    obj.release()
        ctx.release()

    # ------------------------------------------------------------------ frames

    def render(self, state: FrameState) -> RenderedFrame:
        """Draw one frame: RGB (H, W, 3) uint8, depth (H, W) float32 metres, masks (H, W) uint8."""
        if self._ctx is None:
            raise BackendError("previz renderer: render() called after close(); create a new renderer")
        s = self.settings
        k = s.supersample
        w, h = self._size
        with self._ctx:
            self._draw(state)
            rgb = np.empty((h, w, 3), np.uint8)  # (kH, kW, 3) uint8
            depth = np.empty((h, w), np.float32)  # (kH, kW) float32 metres
            masks = np.empty((h, w), np.uint8)  # (kH, kW) uint8 ids
            self._fbo.read_into(rgb, components=3, attachment=0, dtype="f1")
            self._fbo.read_into(depth, components=1, attachment=1, dtype="f4")
            self._fbo.read_into(masks, components=1, attachment=2, dtype="u1")
        if k > 1:
            rgb = _area_downsample(rgb, k)
            # depth and ids are not averaged: a blend of two depths or ids is neither
            depth = np.ascontiguousarray(depth[k // 2 :: k, k // 2 :: k])
            masks = np.ascontiguousarray(masks[k // 2 :: k, k // 2 :: k])
        if self._labels is not None and state.figures:
            self._draw_labels(state, rgb, masks)
        return RenderedFrame(rgb=rgb, depth=depth, masks=masks)

    def frames(self, states: Iterable[FrameState]) -> Iterator[RenderedFrame]:
        """Render a sequence of frame states lazily, one frame at a time."""
        for state in states:
            yield self.render(state)

    def _draw(self, state: FrameState) -> None:
        """Issue the GL commands of one frame into the framebuffer."""
        import moderngl

        ctx = self._ctx
        s = self.settings
        w, h = self._size
        if len(state.figures) > 254:
            raise BackendError(f"figures: {len(state.figures)} figures exceed the 254 a mask can index")
        c2w = state.cam_to_world
        view = np.linalg.inv(c2w)
        proj = projection_matrix(state.fov_deg, w / h, s.near, s.far)

        by_prim: dict[str, tuple[list[Part], list[int]]] = {name: ([], []) for name in PRIMITIVES}
        for part in self._static_parts:
            by_prim[part.primitive][0].append(part)
            by_prim[part.primitive][1].append(0)
        blobs = list(self._static_blobs)
        for i, fig in enumerate(state.figures):
            for part in figure_parts(fig):
                by_prim[part.primitive][0].append(part)
                by_prim[part.primitive][1].append(i + 1)
            blobs.append((fig.position[0], fig.position[1], 0.3 * fig.height_m, 0.35))

        self._fbo.use()
        ctx.viewport = (0, 0, w, h)
        ctx.enable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        ctx.front_face = "cw"  # the mirrored projection flips on-screen winding

        bg = self._bg_prog
        bg["u_rot"].write(_gl_mat(c2w[:3, :3]))
        bg["u_eye"].value = tuple(float(v) for v in c2w[:3, 3])
        bg["u_intr"].value = intrinsics(state.fov_deg, w, h)
        ctx.depth_func = "1"  # the background writes every pixel: no clear needed
        self._bg_vao.render(moderngl.TRIANGLES, vertices=3)

        view_b, proj_b = _gl_mat(view), _gl_mat(proj)
        if blobs:
            # Shadows lie on the ground and are drawn before any mesh, so they need no depth
            # test (meshes drawn later cover them) and write colour only, never depth or ids.
            rows = np.asarray(blobs, np.float32)  # (B, 4) x, z, radius, strength
            if len(rows) > self._decal_capacity:
                self._decal_capacity = 2 * len(rows)
                self._decal_ibo.orphan(self._decal_capacity * 16)
            self._decal_ibo.write(rows.tobytes())
            self._decal_prog["u_view"].write(view_b)
            self._decal_prog["u_proj"].write(proj_b)
            ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
            ctx.enable(moderngl.BLEND)
            ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
            self._fbo.color_mask = ((True, True, True, False), (False,) * 4, (False,) * 4)
            self._decal_vao.render(moderngl.TRIANGLES, instances=len(rows))
            self._fbo.color_mask = ((True,) * 4,) * 3
            ctx.disable(moderngl.BLEND)
            ctx.enable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)

        ctx.depth_func = "<"
        self._mesh_prog["u_view"].write(view_b)
        self._mesh_prog["u_proj"].write(proj_b)
        for name in PRIMITIVES:
            parts, ids = by_prim[name]
            if not parts:
                continue
            rows = _instance_rows(parts, ids)
            if len(parts) > self._capacity[name]:
                self._capacity[name] = 2 * len(parts)
                self._ibos[name].orphan(self._capacity[name] * _INSTANCE_FLOATS * 4)
            self._ibos[name].write(rows.tobytes())
            self._vaos[name].render(moderngl.TRIANGLES, instances=len(parts))

    def _draw_labels(self, state: FrameState, rgb: np.ndarray, masks: np.ndarray) -> None:
        """Draw each visible figure's label above its head onto ``rgb`` in place."""
        assert self._labels is not None
        s = self.settings
        n = len(state.figures)
        counts = np.bincount(masks.ravel(), minlength=n + 1)
        tops = np.stack([figure_head_top(f) for f in state.figures])  # (N, 3) world
        uv, z = project(state.cam_to_world, state.fov_deg, s.width, s.height, tops)
        fy = intrinsics(state.fov_deg, s.width, s.height)[1]
        order = np.argsort(z, kind="stable")  # most negative z = farthest: drawn first
        for i in order:
            fig = state.figures[i]
            if counts[i + 1] == 0 or z[i] >= -s.near:  # hidden, off-frame, or behind the camera
                continue
            on_screen_height = fy * fig.height_m / -z[i]
            size = int(round(min(max(0.065 * on_screen_height, 11.0), max(11.0, s.height / 22.0))))
            text = self._labels.text_for(fig.label, fig.char_id)
            colour = tuple(int(round(255 * c)) for c in fig.colour)
            self._labels.draw(rgb, (float(uv[i, 0]), float(uv[i, 1])), size, text, colour)  # type: ignore[arg-type]


def _area_downsample(rgb: np.ndarray, k: int) -> np.ndarray:
    """Average k x k blocks: (kH, kW, 3) uint8 -> (H, W, 3) uint8."""
    import cv2

    h, w = rgb.shape[0] // k, rgb.shape[1] // k
    return cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)


def _create_context() -> Any:
    """A standalone headless OpenGL 3.3 context through EGL, or BackendError saying what to install."""
    try:
        import moderngl
    except ImportError as exc:  # a base dependency; only a broken install gets here
        raise BackendError("the previz renderer needs the 'moderngl' package: pip install moderngl") from exc
    try:
        return moderngl.create_standalone_context(backend="egl", require=330)
    except Exception as exc:  # glcontext raises plain Exception when libEGL or a driver is missing
        raise BackendError(f"{EGL_HINT} ({exc})") from exc
