"""The previz rasteriser: camera exactness, channels, lighting, labels, determinism, lifecycle.

Everything renders for real through moderngl on headless EGL (Mesa llvmpipe) at small sizes.
"""

from __future__ import annotations

import math
import os

import cv2
import numpy as np
import pytest

from daotai.errors import BackendError
from daotai.render.previz import (
    Environment,
    Figure,
    FrameState,
    PrevizRenderer,
    RenderSettings,
    SetPiece,
    depth_to_preview,
    depth_to_uint16_mm,
    environment_for,
    intrinsics,
    project,
    projection_matrix,
)
from daotai.render.previz.gl_context import RASTERISER_THREADS
from daotai.render.previz.labels import LabelPainter, covers, find_label_font, load_font
from daotai.render.previz.meshes import EYE_X, EYE_Y, HEAD_C, HEAD_R, figure_instances, primitive_meshes
from daotai.render.previz.scene import Look

DAY = environment_for("day")


def camera(eye: tuple[float, float, float], yaw: float = 0.0, pitch: float = 0.0,
           roll: float = 0.0) -> np.ndarray:
    """cam_to_world (4, 4): yaw about world +y, then pitch about local +x, then roll about local +z."""

    def rot(axis: int, deg: float) -> np.ndarray:
        c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
        i, j = [(1, 2), (2, 0), (0, 1)][axis]
        m = np.eye(3)
        m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
        return m

    m = np.eye(4)
    m[:3, :3] = rot(1, yaw) @ rot(0, pitch) @ rot(2, roll)
    m[:3, 3] = eye
    return m


def figure(i: int, x: float, z: float, colour=(0.85, 0.25, 0.2), **kw) -> Figure:
    """A figure with a plain ASCII id and label."""
    return Figure(char_id=f"c{i}", label=f"C{i}", colour=colour, height_m=kw.pop("height_m", 1.7),
                  position=(x, z), **kw)


@pytest.fixture(scope="module")
def plain() -> PrevizRenderer:
    """320x240 renderer, no set pieces, no labels."""
    with PrevizRenderer(RenderSettings(320, 240, labels=False), DAY) as r:
        yield r


# ---------------------------------------------------------------- camera exactness

POSES = [
    # (eye, yaw, pitch, roll, fov, width, height)
    ((0.0, 1.6, 5.0), 0.0, 0.0, 0.0, 60.0, 320, 240),
    ((1.0, 2.5, 4.0), 30.0, -25.0, 0.0, 45.0, 320, 180),
    ((-2.0, 1.2, 3.0), -20.0, 10.0, 35.0, 75.0, 256, 256),
    ((0.5, 6.0, 6.0), 140.0, -40.0, -20.0, 90.0, 320, 240),
]


def _markers(c2w: np.ndarray, fov: float, w: int, h: int) -> np.ndarray:
    """World points (N, 3) spread over the frame, 4-9 m in front and clear of the ground."""
    fx, fy, cx, cy = intrinsics(fov, w, h)
    pts = []
    for k, (fu, fv) in enumerate([(0.2, 0.25), (0.75, 0.2), (0.5, 0.55), (0.25, 0.8), (0.8, 0.75)]):
        for d in (5.0 + k, 4.0, 9.0):
            cam = np.array([(fu * w - cx) / fx * d, -(fv * h - cy) / fy * d, -d, 1.0])
            p = (c2w @ cam)[:3]
            if p[1] > 0.4:
                pts.append(p)
                break
    return np.array(pts)


@pytest.mark.parametrize("pose", POSES, ids=["level", "tilted", "rolled", "looking-down-rolled"])
def test_world_point_lands_on_the_conventions_pixel(pose):
    eye, yaw, pitch, roll, fov, w, h = pose
    c2w = camera(eye, yaw, pitch, roll)
    points = _markers(c2w, fov, w, h)
    assert len(points) >= 3
    r = 0.15
    markers = [SetPiece("sphere", (p[0], p[1] - r, p[2]), (2 * r, 2 * r, 2 * r), (0.9, 0.1, 0.6)) for p in points]
    settings = RenderSettings(w, h, labels=False)
    state = FrameState(c2w, fov)
    with PrevizRenderer(settings, DAY) as bare, PrevizRenderer(settings, DAY, markers) as marked:
        covered = (marked.render(state).depth != bare.render(state).depth).astype(np.uint8)
    n, labels = cv2.connectedComponents(covered)
    assert n - 1 == len(points)
    rows, cols = np.indices(covered.shape)
    uv_expected, _ = project(c2w, fov, w, h, points)
    errors = []
    for i in range(1, n):
        blob = labels == i
        centroid = np.array([cols[blob].mean() + 0.5, rows[blob].mean() + 0.5])  # pixel centres
        err = np.linalg.norm(uv_expected - centroid, axis=1).min()
        assert err < 0.5, f"marker centroid {centroid} is {err:.3f} px from its projection"
        errors.append(err)
    # a half-pixel convention slip would show as a bias well above rasterisation noise
    assert np.mean(errors) < 0.3


def test_supersampled_frame_keeps_the_camera(plain):
    c2w = camera((0.0, 1.6, 5.0), 10.0, -5.0, 15.0)
    points = _markers(c2w, 60.0, 320, 240)
    r = 0.15
    markers = [SetPiece("sphere", (p[0], p[1] - r, p[2]), (2 * r,) * 3, (0.9, 0.1, 0.6)) for p in points]
    settings = RenderSettings(320, 240, labels=False, supersample=2)
    state = FrameState(c2w, 60.0)
    with PrevizRenderer(settings, DAY) as bare, PrevizRenderer(settings, DAY, markers) as marked:
        a, b = marked.render(state), bare.render(state)
    assert a.rgb.shape == (240, 320, 3) and a.depth.shape == a.masks.shape == (240, 320)
    covered = (a.depth != b.depth).astype(np.uint8)
    n, labels = cv2.connectedComponents(covered)
    uv_expected, _ = project(c2w, 60.0, 320, 240, points)
    rows, cols = np.indices(covered.shape)
    assert n - 1 == len(points)
    for i in range(1, n):
        blob = labels == i
        centroid = np.array([cols[blob].mean() + 0.5, rows[blob].mean() + 0.5])
        assert np.linalg.norm(uv_expected - centroid, axis=1).min() < 0.5


def test_level_camera_sees_the_horizon_on_the_centre_row(plain):
    frame = plain.render(FrameState(camera((0.0, 1.6, 0.0)), 60.0))
    col = frame.rgb[:, 160].astype(float) / 255.0  # (H, 3)
    horizon = np.array(DAY.sky_horizon)
    assert np.abs(col[119] - horizon).max() < 3 / 255  # last sky row: the horizon colour
    assert np.abs(col[120] - horizon).max() > 20 / 255  # first ground row: the distant haze
    assert np.abs(col[0] - np.array(DAY.sky_zenith)).max() < np.abs(col[0] - horizon).max()
    assert np.all(np.isinf(frame.depth[:120])) and not np.any(frame.masks)


def test_tilted_camera_moves_the_horizon_by_fy_tan_tilt(plain):
    tilt = 12.0
    frame = plain.render(FrameState(camera((0.0, 1.6, 0.0), pitch=tilt), 60.0))
    _, fy, _, cy = intrinsics(60.0, 320, 240)
    v_h = cy + fy * math.tan(math.radians(tilt))  # image row of the horizon line
    horizon = np.array(DAY.sky_horizon) * 255.0
    sky_like = np.abs(frame.rgb[:, 160].astype(float) - horizon).max(axis=1) < 6.0
    last_sky_row = int(np.nonzero(sky_like)[0].max())
    assert last_sky_row == math.floor(v_h - 0.5)


def test_ground_depth_is_linear_metres_along_the_view_axis(plain):
    eye_y = 1.6
    frame = plain.render(FrameState(camera((0.0, eye_y, 0.0)), 60.0))
    _, fy, _, cy = intrinsics(60.0, 320, 240)
    for row in (125, 150, 200, 239):
        expected = eye_y * fy / (row + 0.5 - cy)  # level camera: the ray meets y = 0 there
        assert frame.depth[row, 40] == pytest.approx(expected, rel=1e-3)
    assert frame.depth.dtype == np.float32 and frame.masks.dtype == np.uint8


# ---------------------------------------------------------------- figures, ids, depth order


def test_figure_torso_shows_its_colour_under_lighting():
    colour = (0.2, 0.45, 0.75)
    for env in (DAY, environment_for("dusk"), environment_for("interior")):
        with PrevizRenderer(RenderSettings(320, 240, labels=False), env) as r:
            fig = figure(0, 0.0, 0.0, colour=colour)
            c2w = camera((0.0, 1.1, 4.0))
            frame = r.render(FrameState(c2w, 50.0, (fig,)))
            ((u, v),), _ = project(c2w, 50.0, 320, 240, np.array([[0.0, 0.70 * 1.7, 0.075 * 1.7]]))
            patch = frame.rgb[int(v) - 1 : int(v) + 2, int(u) - 1 : int(u) + 2].reshape(-1, 3) / 255.0
            p = np.median(patch, axis=0)
            c = np.array(colour)
            scale = p @ c / (c @ c)  # best brightness factor: light between ambient and full sun
            assert 0.3 < scale < 1.2
            assert np.abs(p - scale * c).max() < 0.05, (env, p, scale * c)
            assert frame.masks[int(v), int(u)] == 1


def test_nearer_figure_has_smaller_depth_and_wins_the_mask(plain):
    c2w = camera((0.0, 1.2, 5.0))
    near_fig = figure(0, 0.0, 0.0, colour=(0.8, 0.2, 0.2))
    far_fig = figure(1, 0.25, -3.0, colour=(0.2, 0.2, 0.8))
    both = plain.render(FrameState(c2w, 50.0, (near_fig, far_fig)))
    only_far = plain.render(FrameState(c2w, 50.0, (far_fig,)))
    only_near = plain.render(FrameState(c2w, 50.0, (near_fig,)))
    overlap = (only_far.masks == 1) & (only_near.masks == 1)
    assert overlap.sum() > 50
    assert np.all(both.masks[overlap] == 1)  # figures[0], the nearer one
    assert np.all(both.depth[overlap] < only_far.depth[overlap])
    assert both.depth[both.masks == 1].max() < both.depth[both.masks == 2].min()
    assert np.count_nonzero(both.masks == 2) > 50  # the far one still shows beside it


def test_mask_ids_follow_figure_order(plain):
    c2w = camera((0.0, 1.4, 6.0))
    figs = (figure(0, -1.6, 0.0), figure(1, 0.0, -1.0, colour=(0.2, 0.7, 0.3)),
            figure(2, 1.6, 0.5, colour=(0.3, 0.3, 0.9)))
    frame = plain.render(FrameState(c2w, 55.0, figs))
    assert set(np.unique(frame.masks).tolist()) == {0, 1, 2, 3}
    torsos = np.array([[f.position[0], 0.645 * f.height_m, f.position[1]] for f in figs])
    uv, _ = project(c2w, 55.0, 320, 240, torsos)
    for i, (u, v) in enumerate(uv):
        assert frame.masks[int(v), int(u)] == i + 1
        m = frame.character_mask(i)
        assert m.dtype == np.uint8 and m[int(v), int(u)] == 255
        assert set(np.unique(m).tolist()) == {0, 255}
    assert np.isfinite(frame.depth[frame.masks > 0]).all()


def test_facing_direction_shows_the_face(plain):
    """Toward the camera the head shows skin with two dark eyes; away from it, hair only."""
    c2w = camera((0.0, 1.6, 1.2))
    h = 1.7
    box = np.array([[HEAD_C[0] + dx * HEAD_R[0], HEAD_C[1] + dy * HEAD_R[1], 0.0] for dx in (-1, 1) for dy in (-1, 1)]) * h
    uv, _ = project(c2w, 40.0, 320, 240, box)
    (u0, v0), (u1, v1) = uv.min(axis=0).astype(int), uv.max(axis=0).astype(int)
    eyes, _ = project(c2w, 40.0, 320, 240, np.array([[s * EYE_X * h, EYE_Y * h, 0.06 * h] for s in (1, -1)]))

    def skin_share(frame) -> float:
        patch = frame.rgb[v0:v1, u0:u1].astype(int)
        warm = (patch[..., 0] > patch[..., 2] + 40) & (patch[..., 0] > 120)  # lit skin: red well above blue
        return float(warm.mean())

    toward = plain.render(FrameState(c2w, 40.0, (figure(0, 0.0, 0.0, facing_deg=0.0),)))
    away = plain.render(FrameState(c2w, 40.0, (figure(0, 0.0, 0.0, facing_deg=180.0),)))
    assert skin_share(toward) > 0.25 and skin_share(away) < 0.03
    for u, v in eyes:  # both eyes, apart: no single visor band
        assert toward.rgb[int(v), int(u)].astype(int).sum() < 120
    mid = int(round(eyes[:, 0].mean()))
    assert toward.rgb[int(eyes[0, 1]), mid].astype(int).sum() > 300  # skin between the eyes


def test_walking_legs_swing_and_soles_stay_on_the_ground():
    meshes = primitive_meshes()
    from daotai.render.previz.meshes import PRIMITIVES

    def lowest(fig: Figure) -> float:
        models, _, prims = figure_instances(fig)
        ys = []
        for prim, m in zip(prims, models, strict=True):
            v = meshes[PRIMITIVES[int(prim)]][:, :3]
            ys.append((v @ m[:3, :3].T + m[:3, 3])[:, 1].min())
        return min(ys)

    standing = figure(0, 0.0, 0.0, walk_phase=math.pi / 2, walking=False)
    stride = figure(0, 0.0, 0.0, walk_phase=math.pi / 2, walking=True)
    assert lowest(standing) == pytest.approx(0.0, abs=1e-9)
    assert lowest(stride) == pytest.approx(0.0, abs=1e-9)  # the body dips: soles stay on the floor
    a, _, _ = figure_instances(standing)
    b, _, _ = figure_instances(stride)
    assert not np.allclose(a, b)


# ---------------------------------------------------------------- channels, determinism


def test_same_input_gives_byte_identical_frames():
    pieces = [SetPiece("box", (-2.0, 0.0, -3.0), (1.5, 1.0, 1.0), (0.6, 0.5, 0.4), 25.0),
              SetPiece("cylinder", (2.0, 0.0, -5.0), (0.8, 2.5, 0.8), (0.5, 0.6, 0.7))]
    figs = (Figure("lin", "林", (0.85, 0.25, 0.2), 1.7, (-0.5, -1.0), 30.0, 1.1, True),
            figure(1, 0.8, -2.0, colour=(0.2, 0.45, 0.85)))
    state = FrameState(camera((0.3, 1.5, 4.0), 5.0, -4.0, 3.0), 55.0, figs)
    other = FrameState(camera((0.0, 9.0, 0.0), 90.0, -60.0), 80.0, figs[:1])
    settings = RenderSettings(320, 180, labels=True)
    with PrevizRenderer(settings, DAY, pieces) as r1:
        a = r1.render(state)
        r1.render(other)  # nothing of a previous frame may leak into the next
        b = r1.render(state)
    with PrevizRenderer(settings, DAY, pieces) as r2:
        c = r2.render(state)
    for x in (b, c):
        assert x.rgb.tobytes() == a.rgb.tobytes()
        assert x.depth.tobytes() == a.depth.tobytes()
        assert x.masks.tobytes() == a.masks.tobytes()
    assert a.rgb.shape == (180, 320, 3) and a.rgb.dtype == np.uint8 and a.rgb.flags.c_contiguous


def test_locked_off_camera_reuses_the_background_without_changing_a_byte():
    # Frames 2.. of an unchanged camera copy a cached background under the figures; the
    # first draws it directly. Both must give the bytes a fresh renderer gives, figures that
    # moved must leave nothing behind, and switching the depth attachment on and off must
    # not serve a background drawn for the other framebuffer.
    pieces = [SetPiece("box", (-1.0, 0.0, -4.0), (1.5, 1.0, 1.0), (0.6, 0.5, 0.4), 25.0)]
    cam = camera((0.3, 1.5, 4.0), 5.0, -8.0)
    states = [FrameState(cam, 55.0, (figure(0, x, -2.0 - x),)) for x in (-1.0, 0.0, 1.0)]
    settings = RenderSettings(320, 180, labels=False)
    with PrevizRenderer(settings, DAY, pieces) as r:
        got = [r.render(s, with_depth=d) for s in states for d in (False, False, True)]
    for i, s in enumerate(states):
        with PrevizRenderer(settings, DAY, pieces) as fresh:
            want = fresh.render(s)
        for x in got[3 * i : 3 * i + 3]:
            assert x.rgb.tobytes() == want.rgb.tobytes()
            assert x.masks.tobytes() == want.masks.tobytes()
            if x.depth is not None:
                assert x.depth.tobytes() == want.depth.tobytes()
    assert not np.array_equal(got[0].masks, got[3].masks)  # the figure did move


_THREADS_PROBE = """
import hashlib, os, numpy as np
from daotai.render.previz import FrameState, PrevizRenderer, RenderSettings, SetPiece, environment_for
from daotai.render.previz.scene import Figure
c2w = np.eye(4); c2w[:3, 3] = (0.0, 1.6, 5.0)
state = FrameState(c2w, 55.0, (Figure("a", "A", (0.8, 0.3, 0.2), 1.7, (0.3, 0.0)),))
pieces = [SetPiece("box", (-1.5, 0.0, -2.0), (1.0, 1.0, 1.0), (0.5, 0.5, 0.6))]
with PrevizRenderer(RenderSettings(320, 180, labels=False), environment_for("day"), pieces) as r:
    f = r.render(state)
print(os.environ["LP_NUM_THREADS"], hashlib.sha256(f.rgb.tobytes() + f.depth.tobytes() + f.masks.tobytes()).hexdigest())
"""


def _probe_threads(lp_threads: str | None) -> tuple[str, str]:
    """(LP_NUM_THREADS seen after the first context, hash of a frame) from a fresh process."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LP_NUM_THREADS"}
    if lp_threads is not None:
        env["LP_NUM_THREADS"] = lp_threads
    out = subprocess.run([sys.executable, "-c", _THREADS_PROBE], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    return out[0], out[1]


def test_rasteriser_threads_default_to_one_and_a_preset_value_wins():
    default_threads, default_hash = _probe_threads(None)
    assert default_threads == RASTERISER_THREADS == "1"  # the same bytes on any machine
    assert _probe_threads("3")[0] == "3"  # a value already set wins
    assert _probe_threads("1")[1] == default_hash


def test_sky_depth_is_infinite_and_unmasked(plain):
    frame = plain.render(FrameState(camera((0.0, 1.6, 0.0), pitch=50.0), 60.0, (figure(0, 0.0, -6.0),)))
    sky = np.isinf(frame.depth)
    assert sky[:60].all() and np.all(frame.masks[sky] == 0)
    assert np.all(np.isinf(frame.depth[sky])) and np.all(frame.depth[sky] > 0)


def test_labels_touch_only_rgb_above_the_head():
    c2w = camera((0.0, 1.5, 5.0))
    state = FrameState(c2w, 50.0, (figure(0, 0.0, 0.0),))
    with PrevizRenderer(RenderSettings(320, 240, labels=True), DAY) as on, \
            PrevizRenderer(RenderSettings(320, 240, labels=False), DAY) as off:
        a, b = on.render(state), off.render(state)
        behind = FrameState(c2w, 50.0, (figure(0, 0.0, 9.0),))  # behind the camera
        assert on.render(behind).rgb.tobytes() == off.render(behind).rgb.tobytes()
    assert a.depth.tobytes() == b.depth.tobytes() and a.masks.tobytes() == b.masks.tobytes()
    changed = np.any(a.rgb != b.rgb, axis=2)
    assert changed.sum() > 100
    ((u, v),), _ = project(c2w, 50.0, 320, 240, np.array([[0.0, 1.7, 0.0]]))
    rows, cols = np.nonzero(changed)
    assert rows.max() < v  # the box sits above the head top
    assert rows.max() > v - 20  # ... close above it
    assert cols.min() < u < cols.max()


def test_hidden_figure_gets_no_label():
    wall = [SetPiece("box", (0.0, 0.0, -1.0), (3.0, 3.0, 0.4), (0.6, 0.6, 0.6))]
    state = FrameState(camera((0.0, 1.5, 5.0)), 50.0, (figure(0, 0.0, -3.0),))  # behind the wall
    with PrevizRenderer(RenderSettings(320, 240, labels=True), DAY, wall) as on, \
            PrevizRenderer(RenderSettings(320, 240, labels=False), DAY, wall) as off:
        a, b = on.render(state), off.render(state)
        seen = FrameState(camera((0.0, 1.5, 5.0)), 50.0, (figure(0, 2.5, -3.0),))  # beside it
        assert on.render(seen).rgb.tobytes() != off.render(seen).rgb.tobytes()
    assert not np.any(a.masks) and a.rgb.tobytes() == b.rgb.tobytes()


def test_label_clamped_inside_the_frame(plain):
    c2w = camera((0.0, 1.0, 2.5), pitch=-20.0)
    state = FrameState(c2w, 50.0, (figure(0, 0.0, 0.0),))  # head top above the frame
    with PrevizRenderer(RenderSettings(320, 240, labels=True), DAY) as on:
        a = on.render(state)
    b = plain.render(state)
    changed = np.any(a.rgb != b.rgb, axis=2)
    assert changed[:30].sum() > 50  # drawn against the top edge


def test_label_falls_back_to_the_ascii_id_without_glyphs():
    painter = LabelPainter(None)  # Pillow's built-in font: Latin only
    assert painter.text_for("林", "lin") == "lin"
    assert painter.text_for("Lin", "x") == "Lin"
    assert painter.text_for("  ", "x") == "x"
    path = find_label_font()
    if path is not None and covers(load_font(path, 16), "中"):
        assert LabelPainter(path).text_for("林", "lin") == "林"


def test_depth_codecs():
    d = np.array([[0.0, 1.2344, 65.534, 65.5349], [65.535, 100.0, np.inf, np.nan]], np.float32)
    mm = depth_to_uint16_mm(d)
    assert mm.dtype == np.uint16
    assert mm.tolist() == [[0, 1234, 65534, 65535], [65535, 65535, 65535, 65535]]
    p = depth_to_preview(np.array([[1.0, 2.0, 4.0, np.inf]], np.float32), 0.05, 500.0)
    assert p.dtype == np.uint8
    assert p[0, 0] == 255 and p[0, 3] == 0 and p[0, 2] == 24
    assert p[0, 1] in (139, 140)  # log scale: 2 m is half way between 1 m and 4 m
    assert depth_to_preview(np.full((2, 2), np.inf, np.float32), 0.05, 500.0).max() == 0


def _mm_reference(depth: np.ndarray) -> np.ndarray:
    """The plain numpy definition of depth_to_uint16_mm (boolean masks over the whole frame)."""
    d = np.asarray(depth, dtype=np.float32)
    mm = np.rint(d * np.float32(1000.0))
    far = ~(mm < 65535)
    np.clip(mm, 0.0, 65535, out=mm, where=~far)
    mm[far] = 65535
    return mm.astype(np.uint16)


def _preview_reference(depth: np.ndarray, near: float, far: float) -> np.ndarray:
    """The plain numpy definition of depth_to_preview (gather the valid pixels, scatter back)."""
    d = np.asarray(depth, dtype=np.float32)
    out = np.zeros(d.shape, np.uint8)
    valid = np.isfinite(d) & (d <= far)
    if not valid.any():
        return out
    logd = np.log(np.clip(d[valid], near, far))
    lo, hi = float(logd.min()), float(logd.max())
    if hi - lo < 1e-9:
        out[valid] = 255
        return out
    x = (logd - lo) / (hi - lo)
    out[valid] = np.rint(255.0 - x * (255.0 - 24)).astype(np.uint8)
    return out


def _assert_codecs_match_reference(d: np.ndarray, near: float = 0.05, far: float = 500.0) -> None:
    with np.errstate(all="ignore"):  # random bit patterns overflow the reference's multiply
        mm, ref_mm = depth_to_uint16_mm(d), _mm_reference(d)
        prev, ref_prev = depth_to_preview(d, near, far), _preview_reference(d, near, far)
    assert mm.dtype == np.uint16 and mm.shape == d.shape
    assert prev.dtype == np.uint8 and prev.shape == d.shape
    bad = np.argwhere(mm != ref_mm)[:3]
    assert not len(bad), [(d[tuple(i)], mm[tuple(i)], ref_mm[tuple(i)]) for i in bad]
    bad = np.argwhere(prev != ref_prev)[:3]
    assert not len(bad), [(d[tuple(i)], prev[tuple(i)], ref_prev[tuple(i)]) for i in bad]


def test_depth_codecs_match_their_plain_definition_bit_for_bit():
    rng = np.random.default_rng(7)
    # every float32 class: random bit patterns (NaN, inf, denormals, negatives, huge values)
    bits = rng.integers(0, 2**32, (6, 200, 300), dtype=np.uint64).astype(np.uint32)
    for frame in bits.view(np.float32):
        _assert_codecs_match_reference(frame)
        _assert_codecs_match_reference(np.abs(frame))
    # every millimetre step from -1 m to 66 m, with its float32 neighbours: the rounding ties
    # (x.5 mm) and the 65534.5 / 65535 boundary
    steps = (np.arange(-1000, 66_000, dtype=np.float64) / 1000.0 + 0.0005).astype(np.float32)
    for grid in (steps, np.nextafter(steps, np.float32(np.inf)), np.nextafter(steps, np.float32(-np.inf))):
        _assert_codecs_match_reference(grid.reshape(67, -1))
    # scenes with sky, NaN and depths past ``far``, at clip ranges float32 cannot hold exactly
    for near, far in ((0.05, 500.0), (0.3, 20.1), (0.01, 0.2), (1.0, 7.77)):
        d = rng.uniform(0.0, 1.3 * far, (90, 160)).astype(np.float32)
        d[rng.random(d.shape) < 0.2] = np.inf
        d[rng.random(d.shape) < 0.01] = np.nan
        above, below = np.nextafter(np.float32(far), np.float32(np.inf)), np.nextafter(np.float32(far), np.float32(0))
        d[0, :4] = (far, above, below, -np.inf)
        _assert_codecs_match_reference(d, near, far)
        _assert_codecs_match_reference(d.astype(np.float64), near, far)  # cast on the way in
        _assert_codecs_match_reference(d[::2, ::3], near, far)  # not contiguous
    for special in (np.full((3, 4), 2.5), np.full((3, 4), np.inf), np.zeros((0, 5))):  # one depth, all sky, empty
        _assert_codecs_match_reference(special.astype(np.float32))


def test_depth_codecs_match_their_plain_definition_on_rendered_frames():
    pieces = [SetPiece("box", (-2.0, 0.0, -3.0), (1.5, 1.0, 1.0), (0.6, 0.5, 0.4), 25.0),
              SetPiece("cylinder", (2.0, 0.0, -25.0), (0.8, 2.5, 0.8), (0.5, 0.6, 0.7))]
    figs = (figure(0, -0.5, -1.0), figure(1, 0.8, -6.0, colour=(0.2, 0.45, 0.85)))
    with PrevizRenderer(RenderSettings(320, 180, labels=False), DAY, pieces) as r:
        for pose in (camera((0.3, 1.5, 4.0), 5.0, -4.0), camera((0.0, 9.0, 0.0), 90.0, -60.0),
                     camera((0.0, 0.4, 2.0), pitch=12.0)):
            depth = r.render(FrameState(pose, 55.0, figs)).depth
            for near, far in ((0.05, 500.0), (0.5, 12.0)):
                _assert_codecs_match_reference(depth, near, far)


def test_depth_preview_of_a_rendered_frame(plain):
    frame = plain.render(FrameState(camera((0.0, 1.6, 0.0)), 60.0))
    prev = depth_to_preview(frame.depth, 0.05, 500.0)
    assert prev[:120].max() == 0 and prev[-1].min() > 200
    assert np.all(np.diff(prev[120:, 160].astype(int)) >= 0)  # nearer rows are brighter


# ---------------------------------------------------------------- validation and lifecycle


def test_bad_inputs_raise_backend_error(plain):
    with pytest.raises(BackendError, match="fov_deg"):
        FrameState(np.eye(4), 175.0)
    with pytest.raises(BackendError, match="rotation"):
        FrameState(np.diag([2.0, 1.0, 1.0, 1.0]), 60.0)
    with pytest.raises(BackendError, match="width"):
        RenderSettings(0, 240)
    with pytest.raises(BackendError, match="time_of_day: 'midnight'"):
        environment_for("midnight")
    with pytest.raises(BackendError, match="kind"):
        SetPiece("cone", (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.5, 0.5, 0.5))  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="colour"):
        Figure("a", "A", (1.5, 0.0, 0.0), 1.7, (0.0, 0.0))
    assert environment_for(" Sunset ") == environment_for("dusk")
    assert environment_for("noon") == environment_for("day")
    palettes = {environment_for(t).sky_zenith for t in ("dawn", "morning", "day", "afternoon", "dusk", "night",
                                                         "interior")}
    assert len(palettes) == 7


def test_missing_egl_is_reported_with_the_install_command(monkeypatch):
    import moderngl

    def no_egl(*args, **kwargs):
        raise Exception("libEGL.so.1: cannot open shared object file")

    monkeypatch.setattr(moderngl, "create_standalone_context", no_egl)
    with pytest.raises(BackendError, match="apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri"):
        PrevizRenderer(RenderSettings(64, 64), DAY)


def test_render_after_close_raises():
    r = PrevizRenderer(RenderSettings(64, 48), DAY)
    r.close()
    r.close()  # idempotent
    assert r.closed
    with pytest.raises(BackendError, match="after close"):
        r.render(FrameState(np.eye(4), 60.0))


def _resources() -> tuple[int, int, float]:
    """Open file descriptors, threads and resident memory (MB) of this process."""
    with open("/proc/self/statm") as f:
        rss_mb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    return len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task")), rss_mb


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")
def test_contexts_open_and_close_without_leaking():
    settings = RenderSettings(1280, 720, labels=False)  # ~15 MB of GL buffers per renderer
    state = FrameState(camera((0.0, 1.6, 3.0)), 60.0, (figure(0, 0.0, 0.0),))
    for _ in range(2):  # warm up: driver threads, shader caches, allocator pools
        with PrevizRenderer(settings, DAY) as r:
            r.render(state)
    # Two batches of five: a driver's pools (NVIDIA's EGL grew ~19 MB over the first batch) fill
    # once and stay, so the second batch is held to the bound; a leak grows with every renderer
    # (~15 MB each on Mesa, where the GL buffers live in this process's memory).
    batch = 5
    samples = [_resources()]
    for _ in range(2):
        for _ in range(batch):
            with PrevizRenderer(settings, DAY) as r:
                assert r.render(state).rgb.shape == (720, 1280, 3)
            assert r.closed
        samples.append(_resources())
    (fds, threads, rss0), (fds1, threads1, rss1), (fds2, threads2, rss2) = samples
    assert (fds1, threads1) == (fds2, threads2) == (fds, threads)
    # Against the highest earlier reading: the allocator may hand memory back in between
    # (651 MB after the first batch, from 663, then 667), which a leak never does. The bound is
    # per renderer, half of what one leaked renderer keeps: the allocator's arenas may still grow
    # by one step over a batch (15 MB once, at the dependency floors), while a leak grows by ~15 MB
    # with each of the batch's five renderers (75 MB).
    assert (rss2 - max(rss0, rss1)) / batch < 7.5, samples


def test_environment_rejects_bad_values():
    with pytest.raises(BackendError, match="ambient"):
        Environment((0.1, 0.1, 0.1), (0.2, 0.2, 0.2), (0.3, 0.3, 0.3), (0.4, 0.4, 0.4), ambient=2.0)
    with pytest.raises(BackendError, match="sun_direction"):
        Environment((0.1, 0.1, 0.1), (0.2, 0.2, 0.2), (0.3, 0.3, 0.3), (0.4, 0.4, 0.4), sun_direction=(0, 0, 0))


def test_projection_helpers_agree_with_the_gl_matrix():
    c2w = camera((1.0, 2.0, 3.0), 20.0, -10.0, 5.0)
    pts = np.array([[0.0, 1.0, -2.0], [2.0, 0.5, -4.0]])
    uv, z = project(c2w, 50.0, 400, 300, pts)
    clip = projection_matrix(50.0, 400 / 300, 0.05, 500.0) @ np.linalg.inv(c2w) @ np.c_[pts, np.ones(2)].T
    ndc = clip[:2] / clip[3]
    # mirrored y: window y (row from the top) = (ndc_y + 1) / 2 * H
    assert np.allclose(np.c_[(ndc[0] + 1) / 2 * 400, (ndc[1] + 1) / 2 * 300], uv)
    assert np.all(z < 0)


def test_softening_touches_rgb_only_and_keeps_colours():
    state = FrameState(camera((0.0, 1.0, 4.0)), 50.0, (figure(0, 0.0, 0.0),))
    with PrevizRenderer(RenderSettings(320, 240, labels=False), DAY) as hard, \
            PrevizRenderer(RenderSettings(320, 240, labels=False, soften_px=0.6), DAY) as soft:
        a, b = hard.render(state), soft.render(state)
    assert np.array_equal(a.depth, b.depth) and np.array_equal(a.masks, b.masks)
    assert not np.array_equal(a.rgb, b.rgb)
    # a mild blur: flat areas keep their colour, only edges change
    assert np.abs(a.rgb.astype(int) - b.rgb).mean() < 3.0


def test_depth_is_the_surface_the_depth_buffer_kept():
    # Linear depth and the hardware depth buffer come from the same draw: inverting the
    # projection of the depth buffer gives the linear depth (to the 24-bit buffer's precision)
    # on every pixel, so each pixel's depth belongs to the surface its colour and mask show.
    pieces = [SetPiece("box", (1.5, 0.0, -1.0), (1.0, 2.0, 0.4), (0.6, 0.6, 0.6)),
              SetPiece("box", (-3.0, 0.0, -40.0), (6.0, 4.0, 1.0), (0.5, 0.5, 0.6))]
    figs = (figure(0, -1.0, 0.0), figure(1, 1.6, -3.0, colour=(0.3, 0.3, 0.9)))
    settings = RenderSettings(320, 180, labels=False)
    n, f = settings.near, settings.far
    with PrevizRenderer(settings, DAY, pieces) as r:
        for pose in (camera((0.0, 1.5, 6.0), pitch=8.0), camera((1.0, 3.0, 5.0), yaw=10.0, pitch=-20.0, roll=5.0)):
            frame = r.render(FrameState(pose, 50.0, figs))
            with r._ctx:
                window_z = np.frombuffer(r._fbo_controls.read(components=1, attachment=-1, dtype="f4"),
                                         np.float32).reshape(180, 320).astype(np.float64)
            sky = window_z == 1.0  # nothing drawn into the depth buffer: only the sky pass
            assert 0 < sky.sum() < sky.size
            assert np.all(np.isposinf(frame.depth[sky])) and np.all(frame.masks[sky] == 0)
            ndc = 2.0 * window_z[~sky] - 1.0
            linear = 2.0 * f * n / ((f + n) - ndc * (f - n))
            assert np.allclose(frame.depth[~sky], linear, rtol=2e-3, atol=1e-4)


def test_first_colour_only_frame_of_a_fresh_renderer_is_drawn():
    # Frames without control channels, on a renderer that never drew with them (a run with
    # --no-controls): the same picture and masks, and contact shadows never touch the index.
    wall = [SetPiece("box", (1.5, 0.0, -1.0), (1.0, 2.0, 0.4), (0.6, 0.6, 0.6))]
    figs = (figure(0, -1.0, 0.0), figure(1, 0.5, -1.0, colour=(0.2, 0.7, 0.3)))
    state = FrameState(camera((0.0, 1.5, 6.0), pitch=-5.0), 50.0, figs)
    settings = RenderSettings(320, 240, labels=True)
    with PrevizRenderer(settings, DAY, wall) as light_only:
        light = [light_only.render(state, with_depth=False) for _ in range(2)]
    with PrevizRenderer(settings, DAY, wall) as full_only:
        full = full_only.render(state, with_depth=True)
    for frame in light:
        assert frame.depth is None
        assert frame.rgb.tobytes() == full.rgb.tobytes()
        assert frame.masks.tobytes() == full.masks.tobytes()
    assert set(np.unique(full.masks).tolist()) == {0, 1, 2}
    assert full.rgb.mean() > 60  # drawn, not black


def test_colour_only_frames_match_frames_with_controls():
    # Without control channels the renderer draws into its colour attachment alone and reads
    # the figure index from the alpha: the picture, the index and the labels must not change.
    wall = [SetPiece("box", (1.5, 0.0, -1.0), (1.0, 2.0, 0.4), (0.6, 0.6, 0.6))]
    figs = (figure(0, -1.0, 0.0), figure(1, 0.5, -1.0, colour=(0.2, 0.7, 0.3)),
            figure(2, 1.6, -3.0, colour=(0.3, 0.3, 0.9)))  # the last one partly behind the wall
    with PrevizRenderer(RenderSettings(320, 240, labels=True), DAY, wall) as renderer:
        for pose in (camera((0.0, 1.5, 6.0)), camera((1.0, 3.0, 5.0), yaw=10.0, pitch=-20.0, roll=5.0)):
            state = FrameState(pose, 50.0, figs)
            full = renderer.render(state, with_depth=True)
            light = renderer.render(state, with_depth=False)
            assert light.depth is None
            assert light.rgb.tobytes() == full.rgb.tobytes()
            assert light.masks.tobytes() == full.masks.tobytes()
            assert {0, 1, 2} <= set(np.unique(light.masks).tolist())


def test_label_of_a_figure_whose_head_is_covered_is_not_drawn():
    """A person standing behind another, head hidden, gets no name tag over the one in front."""
    c2w = camera((0.0, 1.5, 4.0))
    front = figure(0, 0.0, 0.0)
    behind = figure(1, 0.0, -1.0, colour=(0.2, 0.3, 0.9), height_m=1.7, look=Look(build=1.5))  # shoulders show
    tagged = {}
    with PrevizRenderer(RenderSettings(320, 240, labels=True), DAY) as on, \
            PrevizRenderer(RenderSettings(320, 240, labels=False), DAY) as off:
        for name, figs in (("both", (front, behind)), ("front", (front,))):
            state = FrameState(c2w, 50.0, figs)
            plain = off.render(state)
            tagged[name] = np.any(on.render(state).rgb != plain.rgb, axis=2)
            if name == "both":
                assert np.count_nonzero(plain.masks == 2) > 0  # a sliver of the one behind shows
    assert np.array_equal(tagged["both"], tagged["front"])  # only the front figure's label
