"""Sets surround the action: any camera the planner or the script places sees set, not the void.

Checked from the depth channel, not by eye: a pixel whose depth is +inf is sky (the void an
interior must never show); a pixel nearer than the ground plane along its ray is set (a wall,
a facade, a tree, the sea, the horizon ring).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.errors import ScriptError
from daotai.plan import geometry
from daotai.plan.camera_grammar import look_at, make_pose
from daotai.plan.planner import plan_script
from daotai.plan.sets import KITS, choose_kit
from daotai.render.previz import FrameState, PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, set_pieces_for_plan
from daotai.script.load import validate_script
from daotai.script.vocab import SetKit

W, H = 160, 90  # a pixel is ~0.7 degrees: the row just above the horizon is ~0.4 degrees up
FOV = 60.0
INTERIORS = sorted(name for name, kit in KITS.items() if kit.interior)
EXTERIORS = sorted(name for name, kit in KITS.items() if not kit.interior)


def _dialogue(kit: str | None = None, scene: str = "set", **camera) -> dict:
    """Two people face to face: a master, both over-the-shoulders, a reverse close-up, and a last shot."""
    last = {"shot_id": "last", "duration": 0.25, "framing": "medium", "subject": "mia"}
    if camera:
        last["camera"] = camera
    return {
        "size": {"width": W, "height": H}, "fps": 12, "seed": 3,
        "scene": {"name": scene, **({"set": kit} if kit else {})},
        "characters": [{"id": "mia", "position": [-0.8, 0.0], "facing": 90},
                       {"id": "tom", "position": [0.8, 0.0], "facing": -90}],
        "shots": [
            {"shot_id": "master", "duration": 0.25, "framing": "wide", "subject": "mia"},
            {"shot_id": "ots_mia", "duration": 0.25, "framing": "OTS", "subject": "mia"},
            {"shot_id": "ots_tom", "duration": 0.25, "framing": "OTS", "subject": "tom"},
            {"shot_id": "cu_tom", "duration": 0.25, "framing": "close_up", "subject": "tom"},
            last,
        ],
    }


def _eye(shot) -> np.ndarray:
    return np.array(shot.cameras[0].cam_to_world).reshape(4, 4)[:3, 3]


def _turned(eye: np.ndarray, yaw_deg: float, pitch_deg: float = 0.0) -> np.ndarray:
    """cam_to_world (4, 4) at ``eye`` looking along yaw (0 = -z, + turns right) and pitch (+ up)."""
    yaw, pitch = math.radians(yaw_deg), math.radians(pitch_deg)
    ahead = np.array([math.sin(yaw) * math.cos(pitch), math.sin(pitch), -math.cos(yaw) * math.cos(pitch)])
    return make_pose(look_at(eye, eye + ahead), eye)


def _views(plan) -> list[tuple[str, np.ndarray]]:
    """Every planned shot's first camera, and 8 level directions from the staging centre and from the
    reverse over-the-shoulder's position (where a crew would turn the camera round)."""
    views = [(s.shot_id, np.array(s.cameras[0].cam_to_world).reshape(4, 4)) for s in plan.shots]
    reverse = _eye(plan.shot("ots_tom"))
    for where, eye in (("centre", np.array([0.0, 1.6, 0.0])), ("reverse ots", reverse)):
        views += [(f"{where} yaw {yaw}", _turned(eye, yaw)) for yaw in range(0, 360, 45)]
    return views


def _ground_depth(c2w: np.ndarray) -> np.ndarray:
    """Depth (H, W) along the view axis at which each pixel's ray meets the ground (inf where it rises)."""
    fx, fy, cx, cy = geometry.intrinsics_from_fov(FOV, W, H)
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    ray_y = c2w[1, 0] * (u - cx) / fx - c2w[1, 1] * (v - cy) / fy - c2w[1, 2]  # world y of the ray at depth 1
    with np.errstate(divide="ignore"):
        return np.where(ray_y < -1e-9, -c2w[1, 3] / ray_y, np.inf)


def _render(plan, views: list[tuple[str, np.ndarray]]):
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan), set_pieces_for_plan(plan)) as r:
        for name, c2w in views:
            yield name, c2w, r.render(FrameState(c2w, FOV)).depth


@pytest.mark.parametrize("kit", INTERIORS)
def test_interiors_show_walls_or_ceiling_in_every_direction(kit):
    plan = plan_script(validate_script(_dialogue(kit)))
    assert plan.scene.set == kit
    views = _views(plan)
    views += [("up", _turned(np.array([0.0, 1.6, 0.0]), 30.0, 60.0)),
              ("down", _turned(_eye(plan.shot("master")), 0.0, -30.0))]
    for name, _, depth in _render(plan, views):
        void = ~np.isfinite(depth)
        assert not void.any(), f"{kit}, {name}: {int(void.sum())} of {void.size} pixels look into the void"


def _into_room(wall, points: np.ndarray) -> np.ndarray:
    """How far (m) each point (N, 3) stands from the wall's centre plane toward the room: its +z faces the action."""
    yaw = math.radians(wall.yaw)
    rel = points - np.array(wall.position)
    return math.sin(yaw) * rel[:, 0] + math.cos(yaw) * rel[:, 2]


@pytest.mark.parametrize("kit", INTERIORS)
def test_every_camera_and_prop_stands_inside_the_walls(kit):
    script = _dialogue(kit, type="static", position=[6.0, 2.4, 9.0], aim="mia")  # the script puts one far out
    plan = plan_script(validate_script(script))
    walls = [p for p in plan.scene.set_pieces if p.name == "wall"]
    assert len(walls) == 4
    ceiling = next(p for p in plan.scene.set_pieces if p.name == "ceiling")
    eyes = np.array([np.array(c.cam_to_world).reshape(4, 4)[:3, 3] for s in plan.shots for c in s.cameras])
    furniture = np.array([p.position for p in plan.scene.set_pieces if p.name in KITS[kit].props
                          or p.name.replace(" ", "_") in KITS[kit].props])
    assert len(furniture)
    for wall in walls:
        eyes_in, furniture_in = _into_room(wall, eyes), _into_room(wall, furniture)
        assert (eyes_in >= wall.size[2] / 2 + 0.5 - 1e-6).all(), (kit, wall.yaw, eyes_in.min())
        assert (furniture_in > wall.size[2] / 2).all(), (kit, wall.yaw)  # nothing stands in or behind it
    assert (eyes[:, 1] <= ceiling.position[1] - 0.5 + 1e-6).all()
    far = plan.shot("last")
    depth = next(_render(plan, [("far", np.array(far.cameras[0].cam_to_world).reshape(4, 4))]))[2]
    assert np.isfinite(depth).all()


@pytest.mark.parametrize("kit", EXTERIORS)
def test_exteriors_are_dressed_in_every_direction(kit):
    plan = plan_script(validate_script(_dialogue(kit)))
    assert plan.scene.set == kit
    above = int(math.floor(geometry.intrinsics_from_fov(FOV, W, H)[3] - 0.5))  # the row just above the horizon
    for name, c2w, depth in _render(plan, _views(plan)):
        is_set = depth < 0.98 * _ground_depth(c2w)  # nearer than the ground along the ray: something stands there
        if "yaw" in name:  # level views: the horizon row is the one above the image centre
            assert is_set[above].mean() >= 0.9, (kit, name, is_set[above].mean())
        assert is_set.mean() >= 0.1, (kit, name, is_set.mean())


@pytest.mark.parametrize(
    ("name", "description", "kit"),
    [
        ("厨房", "", "kitchen"), ("the kitchen", "", "kitchen"), ("餐厅", "", "diner"), ("restaurant", "", "diner"),
        ("街道", "", "street"), ("a busy street", "", "street"), ("夜市", "", "night_market"),
        ("酒吧", "", "bar"), ("a dark bar", "", "bar"), ("卧室", "", "bedroom"), ("bedroom", "", "bedroom"),
        ("教室", "", "classroom"), ("classroom", "", "classroom"), ("商店", "", "shop"), ("a corner shop", "", "shop"),
        ("车里", "", "car"), ("in the car", "", "car"), ("公园", "", "park"), ("森林", "", "forest"),
        ("the forest", "", "forest"), ("海滩", "", "beach"), ("beach", "", "beach"), ("屋顶", "", "rooftop"),
        ("天台", "", "rooftop"), ("rooftop", "", "rooftop"), ("站台", "", "platform"),
        ("station platform", "", "platform"), ("办公室", "", "office"), ("客厅", "", "living_room"),
        ("living room", "", "living_room"), ("小巷", "", "alley"), ("back alley", "", "alley"),
        ("coffee shop", "", "diner"), ("night", "two friends argue in the kitchen of the flat", "kitchen"),
    ],
)
def test_scene_words_in_english_and_chinese_pick_the_kit(name, description, kit):
    assert choose_kit(name, description).kit.name == kit


def test_scene_set_overrides_the_words_and_kit_is_its_alias():
    plan = plan_script(validate_script(_dialogue("beach", scene="厨房")))
    assert plan.scene.set == "beach"
    assert any(p.name == "sea" for p in plan.scene.set_pieces)
    alias = _dialogue(scene="厨房")
    alias["scene"]["kit"] = "屋顶"
    assert plan_script(validate_script(alias)).scene.set == "rooftop"
    assert plan_script(validate_script(_dialogue(scene="厨房"))).scene.set == "kitchen"


def test_an_unknown_set_is_an_error_naming_the_field_the_value_and_the_kits():
    with pytest.raises(ScriptError) as caught:
        validate_script(_dialogue("spaceship"))
    text = str(caught.value)
    assert "scene.set" in text and "'spaceship'" in text
    for kit in ("office", "kitchen", "beach", "platform", "night_market"):
        assert kit in text


def test_the_plan_says_which_kit_it_built_and_how_to_choose_another():
    (notice,) = plan_script(validate_script(_dialogue(scene="厨房"))).scene.notices
    assert notice.startswith("set: kitchen") and "'厨房'" in notice and "scene.set" in notice and "beach" in notice
    (given,) = plan_script(validate_script(_dialogue("bar"))).scene.notices
    assert given.startswith("set: bar") and "scene.set" in given
    (fallback,) = plan_script(validate_script(_dialogue(scene="studio 4"))).scene.notices
    assert fallback.startswith("set: default")
    own = _dialogue(scene="kitchen")
    own["scene"]["set_pieces"] = []
    plan = plan_script(validate_script(own))
    assert plan.scene.set is None and plan.scene.notices == () and plan.scene.set_pieces == ()


def test_the_script_vocabulary_names_every_kit():
    assert {k.value for k in SetKit} == set(KITS)


def test_a_named_set_with_the_scripts_own_pieces_is_refused():
    script = _dialogue("bar")
    script["scene"]["set_pieces"] = []
    with pytest.raises(ScriptError, match="set 'bar' contradicts set_pieces"):
        validate_script(script)
