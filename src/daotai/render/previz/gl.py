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

The pieces it draws with are modules beside this one: the GL context (``gl_context``), the shader
sources (``shaders``), the projection and the sky's region (``projection``), buffer and mask
helpers (``gl_buffers``) and which figures a frame shows (``figure_visibility``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from daotai.errors import BackendError
from daotai.plan import geometry
from daotai.render.previz.figure_visibility import face_box, figures_visible, heads_hidden
from daotai.render.previz.gl_buffers import (
    INSTANCE_FLOATS,
    Instanced,
    colour_mask,
    gl_mat,
    instance_rows,
    use_with_masks,
)
from daotai.render.previz.gl_context import context_backend, create_context, describe_context
from daotai.render.previz.labels import LabelPainter, find_label_font, place_label
from daotai.render.previz.meshes import PRIMITIVES, figure_head_top, figure_instances, primitive_meshes, set_piece_parts
from daotai.render.previz.projection import intrinsics, projection_matrix, sky_polygon
from daotai.render.previz.scene import Environment, FrameState, RenderSettings, SetPiece
from daotai.render.previz.shaders import DECAL_FS, DECAL_VS, GROUND_FS, GROUND_VS, MESH_FS, MESH_VS, SKY_FS, SKY_VS

CONTACT_SHADOW_MAX_M = 5.0  # set pieces wider than this (walls, facades, the sea) cast no contact shadow
PRACTICAL_GAIN = 2.5  # a glowing piece's colour is multiplied by 1 + this x the environment's practicals
PRACTICAL_POOL_M = 2.2  # radius of the light pool under a practical (a lamp 2 m up or higher)
PRACTICAL_POOL_STRENGTH = 0.35  # its opacity at the centre, at full night

# GL_RENDERER names of rasterisers that draw on the CPU (lower case)
SOFTWARE_RASTERISERS = ("llvmpipe", "softpipe", "swrast", "swiftshader")


@dataclass(frozen=True, eq=False)
class RenderedFrame:
    """One rendered frame and its frame-aligned control channels (row 0 = image top)."""

    rgb: np.ndarray = field(repr=False)  # (H, W, 3) uint8
    depth: np.ndarray | None = field(repr=False)  # (H, W) float32 metres along the view axis, inf = sky; None if not read
    masks: np.ndarray = field(repr=False)  # (H, W) uint8: 0 = none, i + 1 = figures[i]

    def character_mask(self, index: int) -> np.ndarray:
        """Mask of ``figures[index]`` per conventions: (H, W) uint8, 255 where visible."""
        return np.where(self.masks == index + 1, np.uint8(255), np.uint8(0))


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
            self._mesh_prog = self._own(ctx.program(vertex_shader=MESH_VS, fragment_shader=MESH_FS))
            self._ground_prog = self._own(ctx.program(vertex_shader=GROUND_VS, fragment_shader=GROUND_FS))
            self._decal_prog = self._own(ctx.program(vertex_shader=DECAL_VS, fragment_shader=DECAL_FS))
            self._sky_prog = self._own(ctx.program(vertex_shader=SKY_VS, fragment_shader=SKY_FS))
        except Exception as exc:  # moderngl raises plain Exception on compile/link errors
            raise BackendError(f"previz shaders failed to compile on this OpenGL driver: {exc}") from exc

        square = np.array([-1, -1, 1, -1, 1, 1, -1, -1, 1, 1, -1, 1], np.float32)  # (6 * 2,) two triangles
        square_vbo = self._own(ctx.buffer(square.tobytes()))
        self._ground_vao = self._own(ctx.vertex_array(self._ground_prog, [(square_vbo, "2f", "in_corner")]))
        # one instance buffer per layer (background, figures): a buffer rewritten while an
        # earlier draw from it is queued makes llvmpipe finish that draw first
        self._decals = {layer: Instanced(self._own(ctx.buffer(reserve=16 * 16, dynamic=True)), 16)
                        for layer in _LAYERS}
        self._decal_vaos = {layer: self._own(ctx.vertex_array(
            self._decal_prog, [(square_vbo, "2f", "in_corner"), (self._decals[layer].buffer, "4f/i", "i_blob")]
        )) for layer in _LAYERS}
        self._sky_vbo = self._own(ctx.buffer(reserve=9 * 2 * 4, dynamic=True))  # <= 3 triangles (u, v)
        self._sky_vao = self._own(ctx.vertex_array(self._sky_prog, [(self._sky_vbo, "2f", "in_px")]))

        self._meshes: dict[tuple[str, str], Instanced] = {}
        self._vaos: dict[tuple[str, str], Any] = {}
        for name, mesh in primitive_meshes().items():
            vbo = self._own(ctx.buffer(mesh.tobytes()))
            for layer in _LAYERS:
                inst = Instanced(self._own(ctx.buffer(reserve=64 * INSTANCE_FLOATS * 4, dynamic=True)), 64)
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
        static_rows = instance_rows(self._static_models, self._static_colours,
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

    @property
    def software(self) -> bool:
        """Whether a software rasteriser (Mesa's llvmpipe, softpipe or swrast, SwiftShader) draws the
        frames: then they are drawn by this machine's processor cores."""
        return any(name in self._description.lower() for name in SOFTWARE_RASTERISERS)

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
        rows = instance_rows(np.concatenate(models), np.concatenate(colours), np.concatenate(ids))
        return rows, np.concatenate(prims)

    def _draw(self, state: FrameState, fbo: Any) -> None:
        """Issue the GL commands of one frame into ``fbo``: the background, then the figures."""
        import moderngl

        ctx = self._ctx
        n_attach = len(fbo.color_attachments)
        s = self.settings
        w, h = self._size
        c2w = state.cam_to_world
        view_b = gl_mat(geometry.world_to_camera(c2w))
        proj_b = gl_mat(projection_matrix(state.fov_deg, w / h, s.near, s.far))
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
            use_with_masks(fbo, colour_mask(n_attach, (True,) * 4))
            ctx.copy_framebuffer(fbo, bg)
            use_with_masks(fbo, colour_mask(n_attach, (True,) * 4))
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
        use_with_masks(fbo, colour_mask(n_attach, (False,) * 4))
        fbo.clear(depth=1.0)
        use_with_masks(fbo, colour_mask(n_attach, (True,) * 4))
        ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)

        # Sky first, without a depth test and only over its own polygon: llvmpipe pays per
        # pixel touched, tested or not, and everything drawn later lies in front of it.
        poly = sky_polygon(c2w, state.fov_deg, w, h, s.far)
        if len(poly) >= 3:
            fan = poly[[i for t in range(1, len(poly) - 1) for i in (0, t, t + 1)]].astype(np.float32)
            self._sky_vbo.write(fan.tobytes())
            sp = self._sky_prog
            sp["u_rot"].write(gl_mat(c2w[:3, :3]))
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
        use_with_masks(fbo, colour_mask(n_attach, (True, True, True, False), (False,) * 4), depth=False)
        self._decal_vaos[layer].render(moderngl.TRIANGLES, instances=n)
        use_with_masks(fbo, colour_mask(n_attach, (True,) * 4))
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
        visible = [v and not h for v, h in zip(figures_visible(state, masks), heads_hidden(state, masks), strict=True)]
        heads = [face_box(f, state, intr, s.near) for f in state.figures]  # screen boxes, None behind the lens
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


def _area_downsample(rgb: np.ndarray, k: int) -> np.ndarray:
    """Average k x k blocks: (kH, kW, 3) uint8 -> (H, W, 3) uint8."""
    import cv2

    h, w = rgb.shape[0] // k, rgb.shape[1] // k
    return cv2.resize(rgb, (w, h), interpolation=cv2.INTER_AREA)
