"""The previz mannequin: garment colours from `appearance`, triangle budget, walk cycle, masks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.plan import geometry
from daotai.plan.planner import plan_script
from daotai.render.previz import Figure, FrameState, PrevizRenderer, RenderSettings, environment_for
from daotai.render.previz.backend import frame_states, look_for
from daotai.render.previz.meshes import (
    HIP_X,
    PRIMITIVES,
    figure_instances,
    primitive_meshes,
    walk_pose,
)
from daotai.render.previz.scene import Look
from daotai.script.load import validate_script as parse_script

W, H = 320, 240


def _script(appearance: str, colour: str | None = None) -> dict:
    character = {"id": "a", "appearance": appearance}
    if colour is not None:
        character["colour"] = colour
    return {"size": {"width": W, "height": H}, "scene": "studio", "characters": [character],
            "shots": [{"shot_id": "s1", "duration": 0.5, "framing": "full", "camera": "static"}]}


def _sample(appearance: str, colour: str | None = None) -> dict[str, np.ndarray]:
    """Median RGB (0..1) of the chest and of a thigh of the one figure, each checked inside its mask."""
    plan = plan_script(parse_script(_script(appearance, colour)))
    shot = plan.shots[0]
    state = next(frame_states(plan, shot))
    fig = state.figures[0]
    h = fig.height_m
    points = np.array([[0.0, 0.70 * h, 0.0], [HIP_X * h, 0.36 * h, 0.0]])
    intr = geometry.intrinsics_from_fov(state.fov_deg, W, H)
    uv, _ = geometry.project(points, state.cam_to_world, intr)
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for("day")) as r:
        frame = r.render(state)
    out = {}
    for name, (u, v) in zip(("chest", "thigh"), uv, strict=True):
        u, v = int(u), int(v)
        assert frame.masks[v, u] == 1, name
        out[name] = np.median(frame.rgb[v - 1 : v + 2, u - 1 : u + 2].reshape(-1, 3), axis=0) / 255.0
    return out


def _is(rgb: np.ndarray, hue: str) -> bool:
    r, g, b = rgb
    return {
        "blue": b > r + 0.15 and b > g + 0.05,
        "red": r > g + 0.2 and r > b + 0.2,
        "green": g > r + 0.15 and g > b + 0.15,
        "yellow": r > b + 0.3 and g > b + 0.3,
        "dark": max(rgb) < 0.25,
        "grey": max(rgb) - min(rgb) < 0.06 and 0.25 < r < 0.75,
    }[hue]


@pytest.mark.parametrize(
    ("appearance", "chest", "thigh"),
    [
        ("a young programmer in a blue shirt and red trousers", "blue", "red"),
        ("red coat over a white shirt, black jeans", "red", "dark"),
        ("穿黄色雨衣的女孩，蓝色牛仔裤", "yellow", "blue"),
        ("穿灰色中山装的老人", "grey", "grey"),
        ("戴眼镜，红色外套，黑色裤子", "red", "dark"),
        ("a woman in a green dress", "green", "green"),
    ],
)
def test_garment_colours_from_appearance_reach_the_figure(appearance, chest, thigh):
    got = _sample(appearance)
    assert _is(got["chest"], chest), (appearance, got)
    assert _is(got["thigh"], thigh), (appearance, got)


def test_explicit_colour_wins_over_the_appearance():
    got = _sample("a blue shirt and red trousers", colour="#22aa33")
    assert _is(got["chest"], "green") and _is(got["thigh"], "red")
    plan = plan_script(parse_script(_script("a blue shirt", "#22aa33")))
    assert plan.characters[0].colour == pytest.approx((0x22 / 255, 0xAA / 255, 0x33 / 255))


def test_plan_colour_follows_the_appearance_when_none_is_given():
    plan = plan_script(parse_script(_script("穿红色外套的男人")))
    r, g, b = plan.characters[0].colour
    assert r > 0.6 and g < 0.3 and b < 0.3
    palette = plan_script(parse_script(_script("a tall man")))
    assert palette.characters[0].colour == pytest.approx((0.20, 0.45, 0.85))


def test_look_words():
    plan = plan_script(parse_script(_script("a blonde woman with sunglasses and a brown hat")))
    look = look_for(plan.characters[0])
    assert look.hair_style == "long" and look.hat is not None and look.glasses is not None
    assert sum(look.glasses) < 0.5  # sunglasses are dark
    assert look.hair[0] > 0.7  # blonde
    bald = look_for(plan_script(parse_script(_script("a bald old man"))).characters[0])
    assert bald.hair_style == "bald"


def test_triangle_budget_per_figure():
    """A dressed figure stays well inside the previz budget (~12k triangles for a scene)."""
    meshes = primitive_meshes()
    for look in (Look(), Look(hair_style="long", silhouette="dress", one_piece=True,
                              hat=(0.3, 0.2, 0.1), glasses=(0.8, 0.8, 0.8))):
        _, _, prims = figure_instances(Figure("a", "A", (0.5, 0.5, 0.5), 1.7, (0.0, 0.0), look=look))
        triangles = sum(len(meshes[PRIMITIVES[int(p)]]) // 3 for p in prims)
        assert triangles < 3000, (look, triangles)


def _lowest(fig: Figure) -> tuple[float, float]:
    """Lowest y of the left and right foot boxes (metres)."""
    models, _, prims = figure_instances(fig)
    box = primitive_meshes()["box"][:, :3]
    feet = [m for m, p in zip(models, prims, strict=True) if PRIMITIVES[int(p)] == "box" and m[1, 3] < 0.1 * fig.height_m]
    assert len(feet) == 2
    return tuple(float((box @ m[:3, :3].T + m[:3, 3])[:, 1].min()) for m in feet)  # type: ignore[return-value]


def test_walk_cycle_keeps_a_foot_on_the_ground_and_lifts_the_other():
    lifts = []
    for k in range(16):
        phase = 2 * math.pi * k / 16
        fig = Figure("a", "A", (0.5, 0.5, 0.5), 1.75, (0.0, 0.0), walk_phase=phase, walking=True)
        left, right = _lowest(fig)
        assert min(left, right) == pytest.approx(0.0, abs=1e-9)
        lifts.append(max(left, right))
    assert max(lifts) > 0.03  # the swinging foot clears the ground mid-swing
    pose = walk_pose(0.0)
    assert pose.knee[0] > 0.3 and pose.knee[1] == 0.0  # left leg swinging through, right in stance
    assert walk_pose(math.pi / 2).hip[0] > 0.4  # left leg forward at a quarter cycle


def test_mask_covers_the_new_figure_and_depth_matches():
    """Every figure pixel carries its index and a finite depth; hands and feet are in the mask."""
    c2w = np.eye(4)
    c2w[:3, 3] = (0.0, 0.9, 3.2)
    fig = Figure("a", "A", (0.2, 0.4, 0.8), 1.75, (0.0, 0.0), 0.0)
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for("day")) as r:
        frame = r.render(FrameState(c2w, 40.0, (fig,)))
    ys, xs = np.nonzero(frame.masks == 1)
    assert np.isfinite(frame.depth[ys, xs]).all()
    assert frame.depth[ys, xs].max() < 3.5
    intr = geometry.intrinsics_from_fov(40.0, W, H)
    crown_and_toe = np.array([[0.0, 1.75, 0.0], [0.0, 0.0, 0.11 * 1.75]])  # the toes reach 0.11 h forward
    (_, v_top), (_, v_sole) = geometry.project(crown_and_toe, c2w, intr)[0]
    assert ys.min() == pytest.approx(v_top, abs=2) and ys.max() == pytest.approx(v_sole, abs=2)
