"""The camera's place said the way crews say it: side, distance_m, height_m, position, a lens in
millimetres on a sensor, aim, and a pan that follows (摇跟); defaults that scale with the framing
distance; a camera placed inside someone or behind someone is refused with the field named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from daotai.errors import PlanError, ScriptError
from daotai.plan import geometry
from daotai.plan.planner import plan_script
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

W, H = 320, 180
FACE_TO_FACE = [{"id": "a", "position": [-0.6, 0.0]}, {"id": "b", "position": [0.6, 0.0]}]


def _script(shot: dict, characters=FACE_TO_FACE, scene=None) -> dict:
    return {"size": {"width": W, "height": H}, "fps": 12,
            "scene": scene or {"name": "stage", "set_pieces": []},
            "characters": characters, "shots": [{"shot_id": "s", "duration": 1.0, **shot}]}


def _plan(shot: dict, **kw):
    return plan_script(validate_script(_script(shot, **kw)))


def _masks(plan, indexes=None):
    shot = plan.shots[0]
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan)) as r:
        return [r.render(s).masks for i, s in enumerate(frame_states(plan, shot)) if indexes is None or i in indexes]


def _eye(plan, frame=0):
    return np.array(plan.shots[0].cameras[frame].cam_to_world).reshape(4, 4)[:3, 3]


def test_face_to_face_master_from_the_side_shows_both_people():
    # Without place fields a single of A stands on A's facing axis, where B stands: B hides A.
    plan = _plan({"subject": "a", "framing": "wide",
                  "camera": {"side": "left", "height_m": 1.6, "focal_length_mm": 24, "distance_m": 5.0}})
    eye = _eye(plan)
    a = plan.shots[0].character_frames[0][0]
    assert math.isclose(eye[1], 1.6)
    # A faces +x (toward B); A's left is -z... seen from above, +90 from facing 90 is 180: camera at -z
    assert math.isclose(math.hypot(eye[0] - a.position[0], eye[2] - a.position[1]), 5.0, abs_tol=1e-6)
    masks = _masks(plan, {0})[0]
    assert (masks == 1).sum() > 150 and (masks == 2).sum() > 150  # both people, clearly


def test_side_names_the_subjects_own_left_and_right():
    one = [{"id": "a", "position": [0.0, 0.0], "facing": 0}]  # faces +z, so its left hand is +x
    left = _eye(_plan({"camera": {"side": "left", "distance_m": 3}}, characters=one))
    right = _eye(_plan({"camera": {"side": "右", "distance_m": 3}}, characters=one))
    back = _eye(_plan({"camera": {"side": 180, "distance_m": 3}}, characters=one))
    assert left[0] == pytest.approx(3.0) and right[0] == pytest.approx(-3.0) and back[2] == pytest.approx(-3.0)


def test_focal_length_reads_on_the_sensor_width():
    one = [{"id": "a"}]
    s35 = _plan({"camera": {"focal_length_mm": 35}}, characters=one).shots[0].cameras[0].fov
    ff = _plan({"camera": {"focal_length_mm": 35, "sensor": "full_frame"}}, characters=one).shots[0].cameras[0].fov
    horizontal = 2 * math.degrees(math.atan(24.89 / 70))
    assert s35 == pytest.approx(2 * math.degrees(math.atan(math.tan(math.radians(horizontal / 2)) * H / W)), abs=1e-4)
    assert ff > s35  # the same lens sees more on a bigger sensor
    with pytest.raises(ScriptError, match="focal_length_mm contradicts fov"):
        validate_script(_script({"camera": {"focal_length_mm": 35, "fov": 40}}, characters=one))


def test_absolute_position_and_aim_at_a_character():
    plan = _plan({"subject": "a", "camera": {"position": [0.0, 2.0, 6.0], "aim": "b"}})
    cam = np.array(plan.shots[0].cameras[0].cam_to_world).reshape(4, 4)
    assert np.allclose(cam[:3, 3], [0.0, 2.0, 6.0])
    b = plan.shots[0].character_frames[0][1]
    uv, depth = geometry.project(np.array([[b.position[0], 1.3, b.position[1]]]), cam,
                                 geometry.intrinsics_from_fov(plan.shots[0].cameras[0].fov, W, H))
    assert depth[0] > 0 and abs(uv[0, 0] - W / 2) < 2  # b is in the centre of the frame


def test_a_camera_inside_someone_is_refused_naming_the_field():
    with pytest.raises(PlanError) as err:
        _plan({"subject": "a", "camera": {"position": [0.6, 1.2, 0.05]}})
    assert "shots[0].camera.position" in str(err.value) and "inside b" in str(err.value)


def test_a_subject_wholly_hidden_is_refused_naming_the_field():
    # behind b on the line through both, at b's height: b covers a completely
    with pytest.raises(PlanError) as err:
        _plan({"subject": "a", "framing": "medium", "camera": {"side": "front", "distance_m": 3.0, "height_m": 1.5}})
    text = str(err.value)
    assert "shots[0].camera.distance_m" in text and "b between the lens and a" in text


def test_an_aim_at_someone_not_in_the_shot_is_refused():
    with pytest.raises(PlanError, match=r"shots\[0\].camera.aim"):
        _plan({"subject": "a", "characters": ["a"], "camera": {"aim": "b"}})


def test_pan_follow_keeps_a_runner_in_frame():
    runner = [{"id": "r", "position": [-6.0, 0.0], "facing": 90}]
    shot = {"framing": "full", "duration": 2.0, "camera": "摇跟",
            "blocking": [{"character": "r", "to": [6.0, 0.0]}]}
    plan = _plan(shot, characters=runner)
    ps = plan.shots[0]
    assert ps.move.pan_follow and ps.move.type == "pan" and ps.move.rotate[0] > 60  # turned right with the run
    eyes = np.array([np.array(c.cam_to_world).reshape(4, 4)[:3, 3] for c in ps.cameras])
    assert np.allclose(eyes, eyes[0])  # a pan: the camera stays where it stands
    masks = _masks(plan)
    for i, m in enumerate(masks):
        cols = np.nonzero((m == 1).any(axis=0))[0]
        assert len(cols) and cols.min() > 0 and cols.max() < W - 1, i  # whole, inside the frame, every frame
    # without follow, a plain pan of the same size does not keep them
    plain = _plan({**shot, "camera": {"type": "pan", "rotate": [30, 0, 0]}}, characters=runner)
    assert any(not (m == 1).any() or (m == 1)[:, [0, -1]].any() for m in _masks(plain))


def test_crane_default_rises_with_the_framing_distance():
    one = [{"id": "a"}]
    close = _plan({"framing": "medium", "camera": "crane"}, characters=one).shots[0]
    far = _plan({"framing": "extreme_wide", "camera": "crane"}, characters=one).shots[0]
    assert close.move.motion[1] == pytest.approx(1.5)  # a close shot keeps the old rise
    assert far.move.motion[1] > 0.3 * far.subject_distance > 1.5
    truck = _plan({"framing": "wide", "camera": "truck"}, characters=one).shots[0]
    assert truck.move.motion[0] >= 0.25 * truck.subject_distance > 1.0


def test_crane_on_an_extreme_wide_moves_the_picture(tmp_path: Path):
    data = _script({"framing": "extreme_wide", "duration": 2.0, "camera": "crane"},
                   characters=[{"id": "a"}], scene={"name": "street"})
    plan = plan_script(validate_script(data))
    assert [e for e in run(plan, tmp_path, PipelineSettings()) if isinstance(e, Finished)]
    entry = json.loads((tmp_path / "qc.json").read_text(encoding="utf-8"))["shots"][0]
    assert entry["frames"]["frozen_faulty"] == [] and entry["frames"]["frozen_runs"] == []
    assert entry["camera"]["ok"] is not False, entry["camera"]["summary"]


def test_unused_place_fields_leave_the_script_hash_alone():
    data = _script({"camera": {"type": "pan", "rotate": [20, 0, 0]}}, characters=[{"id": "a"}])
    dumped = validate_script(data).model_dump(mode="json")["shots"][0]["camera"]
    assert not {"side", "distance_m", "height_m", "position", "focal_length_mm", "sensor", "aim", "follow"} & set(dumped)


def test_a_placed_camera_without_a_framing_names_the_size_it_makes():
    one = [{"id": "a"}]
    far = _plan({"camera": {"side": "left", "distance_m": 6}}, characters=one).shots[0]
    near = _plan({"camera": {"position": [0.0, 1.4, 0.5]}}, characters=one).shots[0]
    asked = _plan({"framing": "close_up", "camera": {"distance_m": 6}}, characters=one).shots[0]
    assert far.framing == "wide" and far.prompt.startswith("Wide shot")
    assert near.framing in ("close_up", "medium_close_up")
    assert asked.framing == "close_up"  # a framing the script names stays (and QC holds the picture to it)
