"""The scene's words set the time of day when the script does not; practical lights glow at night;
a character whose appearance names a dog (狗) is drawn on four legs and framed at its head."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daotai.plan import geometry
from daotai.plan.planner import plan_script
from daotai.qc.framing import measure_framing
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states, set_pieces_for_plan
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent
W, H = 320, 180


def _plan(scene, characters=({"id": "a"},), shots=({"shot_id": "s", "duration": 0.2, "framing": "wide"},)):
    return plan_script(validate_script({"size": {"width": W, "height": H}, "scene": scene,
                                        "characters": list(characters), "shots": list(shots)}))


def _render(plan, index=0):
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan), set_pieces_for_plan(plan)) as r:
        return r.render(next(frame_states(plan, plan.shots[index])))


@pytest.mark.parametrize(("scene", "time"), [
    ({"name": "a park at sunset"}, "dusk"), ({"name": "street", "description": "late at night, rain"}, "night"),
    ({"name": "夜市"}, "night"), ({"name": "公园", "description": "黄昏时分"}, "dusk"), ({"name": "office"}, "day"),
    ({"name": "beach at dawn"}, "dawn"), ({"name": "a park at sunset", "time_of_day": "noon"}, "day"),
    ("diner at midnight", "night"), ({"name": "knightsbridge"}, "day"),
])
def test_time_of_day_comes_from_the_scene_words_unless_given(scene, time):
    plan = _plan(scene)
    assert plan.scene.time_of_day == time
    assert time in plan.shots[0].prompt or time == "day"


def test_practical_lights_glow_at_night_and_not_by_day():
    night, day = _plan({"name": "street at night"}), _plan({"name": "street", "time_of_day": "day"})
    lamps = [p for p in night.scene.set_pieces if p.glow]
    assert lamps and [p.name for p in lamps] == [p.name for p in day.scene.set_pieces if p.glow]
    lit, unlit = _render(night).rgb, _render(day).rgb
    # a lamp's head: at night it is near white, far brighter than the dark sky around it
    cam = np.array(night.shots[0].cameras[0].cam_to_world).reshape(4, 4)
    intr = geometry.intrinsics_from_fov(night.shots[0].cameras[0].fov, W, H)
    heads = np.array([[p.position[0], p.position[1] + p.size[1] / 2, p.position[2]] for p in lamps])
    uv, depth = geometry.project(heads, cam, intr)
    inside = [(int(u), int(v)) for (u, v), d in zip(uv, depth, strict=True)
              if d > 0 and 0 <= u < W and 0 <= v < H]
    assert inside, "no lamp in view"
    for u, v in inside:
        assert lit[v, u].mean() > 200 and lit[v, u].mean() > unlit[v, u].mean() - 10


def test_the_dog_of_the_chinese_example_walks_on_four_legs_and_is_framed_at_its_head():
    data = json.loads((ROOT / "examples" / "street_zh.json").read_text(encoding="utf-8"))
    data["size"] = {"width": W, "height": H}
    plan = plan_script(validate_script(data))
    kinds = {c.id: c.kind for c in plan.characters}
    assert kinds == {"xiaoyu": "person", "laowang": "person", "dog": "animal"}
    close = next(i for i, s in enumerate(plan.shots) if s.subject == "dog")
    frame = _render(plan, close)
    entry = measure_framing(plan, plan.shots[close], frame.masks, frame.depth)
    assert entry["ok"], entry
    dog = plan.shots[close].characters.index("dog") + 1
    rows, cols = np.nonzero(frame.masks == dog)
    assert len(cols) > 0.08 * W * H  # the head and snout fill a good part of the close-up
    # drawn lower and longer than a person: its mask is wider than tall in a side view
    side = _plan({"name": "stage", "set_pieces": []}, characters=[{"id": "rex", "appearance": "a brown dog", "height": 0.6,
                                                                    "facing": 90}],
                 shots=[{"shot_id": "s", "duration": 0.2, "framing": "full", "camera": {"side": "left"}}])
    m = _render(side).masks == 1
    rows, cols = np.nonzero(m)
    assert np.ptp(cols) > 1.2 * np.ptp(rows)
    assert json.loads(side.model_dump_json())["characters"][0]["kind"] == "animal"
    people = _plan({"name": "stage"})
    assert "kind" not in people.model_dump(mode="json")["characters"][0]  # plans of people are unchanged
