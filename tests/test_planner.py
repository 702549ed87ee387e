"""Script → Plan: timing, staging, camera paths, seeds, prompts; reproducible byte for byte."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from daotai.errors import PlanError
from daotai.plan.camera_grammar import project
from daotai.plan.planner import plan_from_json, plan_script, plan_to_json, select_shots
from daotai.plan.timing import fps_fraction
from daotai.script.load import load_script, validate_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _plan(data):
    return plan_script(validate_script(data))


def _one_shot(camera, framing="full", angle="eye_level", duration=2.0, **shot):
    return {
        "fps": 24,
        "size": "preview",
        "characters": [{"id": "hero", "height": 1.8, "position": [0, 0]}],
        "shots": [dict(shot_id="s1", subject="hero", framing=framing, angle=angle, duration=duration, camera=camera,
                       **shot)],
    }


def _c2w(frame) -> np.ndarray:
    return np.array(frame.cam_to_world).reshape(4, 4)


def _subject_pixel(plan, shot, i):
    frame = shot.cameras[i]
    K = np.array(frame.K).reshape(3, 3)
    uv, depth = project(np.array([shot.aim_point]), _c2w(frame), K)
    return uv[0], depth[0]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_plan_is_byte_identical_across_runs(path):
    first = plan_to_json(plan_script(load_script(path)))
    second = plan_to_json(plan_script(load_script(path)))
    assert first == second
    again = plan_to_json(plan_from_json(first))
    assert again == first


def test_frames_and_sequence_timing_with_transitions():
    data = {
        "fps": 24,
        "characters": [{"id": "a"}],
        "shots": [
            {"shot_id": "s1", "duration": 2},
            {"shot_id": "s2", "duration": 1.5, "transition": {"type": "crossfade", "duration": 0.5}},
            {"shot_id": "s3", "duration": 1, "transition": "fade"},
        ],
    }
    plan = _plan(data)
    frames = [s.frames for s in plan.shots]
    assert frames == [48, 36, 24]
    assert [s.start_frame for s in plan.shots] == [0, 36, 72]
    assert plan.shots[1].transition.frames == 12
    assert plan.total_frames == 48 + 36 - 12 + 24
    assert all(len(s.cameras) == s.frames for s in plan.shots)


def test_crossfade_longer_than_shot_is_refused():
    data = {"characters": [{"id": "a"}],
            "shots": [{"shot_id": "s1", "duration": 0.3},
                      {"shot_id": "s2", "transition": {"type": "crossfade", "duration": 2}}]}
    with pytest.raises(PlanError, match=r"shots\[1\]\.transition\.duration"):
        _plan(data)


def test_ntsc_rates():
    assert fps_fraction(23.976) == (24000, 1001)
    assert fps_fraction(29.97) == (30000, 1001)
    assert fps_fraction(25) == (25, 1)


def test_subject_centred_at_start_for_every_framing_and_angle():
    for framing in ["extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide",
                    "extreme_wide"]:
        for angle in ["eye_level", "high", "low", "birds_eye", "worms_eye", "dutch"]:
            plan = _plan(_one_shot({"type": "static"}, framing=framing, angle=angle))
            shot = plan.shots[0]
            uv, depth = _subject_pixel(plan, shot, 0)
            assert depth > 0
            assert np.allclose(uv, [320, 180], atol=1.0), (framing, angle, uv)


def test_framing_sets_distance_tighter_is_closer():
    distances = [
        _plan(_one_shot({"type": "static"}, framing=f)).shots[0].subject_distance
        for f in ["extreme_close_up", "close_up", "medium", "full", "wide", "extreme_wide"]
    ]
    assert distances == sorted(distances)


def test_high_angle_looks_down_low_angle_up():
    high = _c2w(_plan(_one_shot({"type": "static"}, angle="high")).shots[0].cameras[0])
    low = _c2w(_plan(_one_shot({"type": "static"}, angle="low")).shots[0].cameras[0])
    assert -high[1, 2] < 0 < -low[1, 2]  # view direction is -z column


def test_push_in_moves_toward_subject_and_pull_out_away():
    push = _plan(_one_shot({"type": "dolly", "motion": [0, 0, -1]})).shots[0]
    pull = _plan(_one_shot("pull_out")).shots[0]
    aim = np.array(push.aim_point)

    def dist(shot, i):
        return np.linalg.norm(_c2w(shot.cameras[i])[:3, 3] - aim)

    assert dist(push, -1) == pytest.approx(dist(push, 0) - 1.0, abs=1e-6)
    assert dist(pull, -1) > dist(pull, 0)


def test_default_dolly_stays_clear_of_subject():
    shot = _plan(_one_shot("推", framing="medium")).shots[0]
    assert shot.move.motion[2] < 0
    assert not shot.warnings


def test_too_close_push_in_is_warned():
    # where the script places the camera the push starts there, and 3 m runs it into the subject
    placed = _plan(_one_shot({"type": "dolly", "motion": [0, 0, -3], "distance_m": 1.2}, framing="medium")).shots[0]
    assert any("within" in w for w in placed.warnings)
    # a motion written out is the director's path: from the framing's distance 3 m runs into the subject
    written = _plan(_one_shot({"type": "dolly", "motion": [0, 0, -3]}, framing="medium")).shots[0]
    assert any("within" in w for w in written.warnings)
    # left to the planner, a push lands on the framing the shot names: it starts further back
    landed = _plan(_one_shot({"type": "dolly_in"}, framing="medium")).shots[0]
    assert not any("within" in w for w in landed.warnings)


def test_dolly_zoom_keeps_subject_size():
    shot = _plan(_one_shot({"type": "dolly_zoom", "motion": [0, 0, -1]})).shots[0]
    aim = np.array(shot.aim_point)
    sizes = []
    for i in (0, shot.frames // 2, shot.frames - 1):
        frame = shot.cameras[i]
        d = np.linalg.norm(_c2w(frame)[:3, 3] - aim)
        sizes.append(1.0 / (d * np.tan(np.radians(frame.fov) / 2)))
    assert np.allclose(sizes, sizes[0], rtol=1e-6)
    assert shot.move.fov_end > shot.move.fov


def test_zoom_in_default_narrows_fov():
    shot = _plan(_one_shot("zoom_in")).shots[0]
    fovs = [c.fov for c in shot.cameras]
    assert fovs[-1] < fovs[0] and all(b <= a + 1e-9 for a, b in zip(fovs, fovs[1:], strict=False))


def test_blocking_walks_and_follow_camera_follows():
    shot = _plan(_one_shot({"type": "follow"}, blocking=[{"character": "hero", "to": [2.0, 0.0]}])).shots[0]
    first, last = shot.character_frames[0][0], shot.character_frames[-1][0]
    assert first.position == (0.0, 0.0) and last.position == (2.0, 0.0)
    assert shot.character_frames[shot.frames // 2][0].walking
    assert shot.character_frames[shot.frames // 2][0].facing == pytest.approx(90.0)
    cam_shift = _c2w(shot.cameras[-1])[:3, 3] - _c2w(shot.cameras[0])[:3, 3]
    assert cam_shift == pytest.approx([2.0, 0.0, 0.0], abs=1e-6)


def test_positions_carry_over_between_shots():
    data = {"characters": [{"id": "a", "position": [0, 0]}],
            "shots": [{"shot_id": "s1", "blocking": [{"character": "a", "to": [1, -1]}]}, {"shot_id": "s2"}]}
    plan = _plan(data)
    assert plan.shots[1].character_frames[0][0].position == (1.0, -1.0)


def test_seeds_are_deterministic_distinct_and_overridable():
    data = {"seed": 5, "characters": [{"id": "a"}, {"id": "b", "seed": 99}],
            "shots": [{"shot_id": "s1"}, {"shot_id": "s2"}, {"shot_id": "s3", "seed": 1234}]}
    plan = _plan(data)
    seeds = [s.seed for s in plan.shots]
    assert len(set(seeds)) == 3 and seeds[2] == 1234
    assert plan.characters[1].seed == 99
    other = _plan(dict(copy.deepcopy(data), seed=6))
    assert other.shots[0].seed != plan.shots[0].seed


def test_snapping_recorded_not_applied():
    plan = _plan(_one_shot({"type": "static"}, duration=3.0))
    shot = plan.shots[0]
    assert shot.frames == 72
    wan = next(s for s in shot.snapping if s.backend == "wan")
    ltx = next(s for s in shot.snapping if s.backend == "ltx")
    assert (wan.frames, wan.changed) == (73, True)
    assert (ltx.frames, ltx.width, ltx.height) == (73, 640, 352)


def test_chinese_script_prompts_use_english_camera_vocabulary():
    plan = plan_script(load_script(EXAMPLES / "street_zh.json"))
    for shot in plan.shots:
        # Only the author's own words (names, looks, scene, action) may be Chinese.
        own_words = set(re.findall(r"[\u4e00-\u9fff，、]+", shot.prompt))
        script_text = (EXAMPLES / "street_zh.json").read_text(encoding="utf-8")
        assert all(w in script_text for w in own_words), own_words
        assert re.search(r"(shot|[Cc]lose-up)", shot.prompt)
        assert re.search(r"[Cc]amera|lens", shot.prompt)
    assert "cranes up" in plan.shots[0].prompt
    assert "dollies in" in plan.shots[1].prompt
    assert "pans right" in plan.shots[2].prompt
    assert "orbits" in plan.shots[3].prompt


def test_every_shot_is_planned_and_all_plan_problems_are_raised_together():
    """One problem no longer hides the next: each shot's pose, look, transition and camera, then the closing fade."""
    data = {"characters": [{"id": "a"}, {"id": "b"}], "fade_out": 5,
            "shots": [{"shot_id": "s1", "duration": 1, "transition": {"type": "crossfade"}, "pose": {"zed": "sit"}},
                      {"shot_id": "s2", "duration": 1, "characters": ["a"], "framing": "two_shot"},
                      {"shot_id": "s3", "duration": 1, "look_at": "nobody", "camera": {"aim": "zz"}},
                      {"shot_id": "s4", "duration": 1, "transition": {"type": "crossfade", "duration": 3}}]}
    with pytest.raises(PlanError) as caught:
        _plan(data)
    found = [(i.path, i.value) for i in caught.value.issues]
    assert found == [("shots[0].pose.zed", "sit"), ("shots[0].transition.type", "crossfade"),
                     ("shots[1].framing", "two_shot"), ("shots[2].look_at", "nobody"), ("shots[2].camera.aim", "zz"),
                     ("shots[3].transition.duration", 3.0), ("fade_out", 5.0)]
    assert all(i.rule for i in caught.value.issues)
    lines = str(caught.value).splitlines()
    assert lines[0] == "7 problems in the script (found while planning it)" and len(lines) == 8
    assert lines[1] == "  shots[0].pose.zed: 'sit' names no character of the shot (a, b)"
    assert caught.value.exit_code == 2


def test_one_plan_problem_reads_as_before_and_a_good_shot_after_it_adds_none():
    data = {"characters": [{"id": "a"}],
            "shots": [{"shot_id": "s1", "duration": 1, "transition": {"type": "crossfade"}},
                      {"shot_id": "s2", "duration": 1, "transition": {"type": "crossfade", "duration": 0.5}}]}
    with pytest.raises(PlanError) as caught:
        _plan(data)
    assert [i.path for i in caught.value.issues] == ["shots[0].transition.type"]
    assert str(caught.value).startswith("shots[0].transition.type: 'crossfade' needs a previous shot")


def test_a_dolly_zoom_through_the_subject_names_its_field():
    data = _one_shot({"type": "dolly_zoom", "motion": [0, 0, -10]})
    with pytest.raises(PlanError) as caught:
        _plan(data)
    (issue,) = caught.value.issues
    assert issue.path == "shots[0].camera.motion[2]" and issue.value == -10
    assert "through the subject" in issue.rule


def test_select_shots_retimes_and_rejects_unknown():
    plan = plan_script(load_script(EXAMPLES / "office.json"))
    part = select_shots(plan, ["s02", "s03"])
    assert [s.shot_id for s in part.shots] == ["s02", "s03"]
    assert part.shots[0].transition.type == "cut" and part.shots[0].start_frame == 0
    assert part.total_frames == part.shots[0].frames + part.shots[1].frames
    with pytest.raises(PlanError, match="nope"):
        select_shots(plan, ["nope"])


def test_motion_code_in_plan_round_trips():
    from daotai.plan.motion_code import ANGLE_ERROR_BOUND_RAD, MotionCode, decode_motion

    shot = _plan(_one_shot({"type": "dolly", "motion": [0.1, 0.0, -0.3]})).shots[0]
    code = shot.motion_code
    decoded = decode_motion(MotionCode(code.theta_q, code.phi_q, code.magnitude))
    m = np.array([0.1, 0.0, -0.3])
    angle = np.arccos(np.clip(decoded @ m / (np.linalg.norm(decoded) * np.linalg.norm(m)), -1, 1))
    assert angle <= ANGLE_ERROR_BOUND_RAD


def test_seeds_are_the_same_in_every_process():
    # Seeds come from sha256 of their parts, never from Python's per-process hash(): a plan made
    # tomorrow, on another machine or under another PYTHONHASHSEED gives the same numbers.
    data = {"seed": 5, "characters": [{"id": "a"}, {"id": "b", "seed": 99}],
            "shots": [{"shot_id": "s1"}, {"shot_id": "s2"}, {"shot_id": "s3", "seed": 1234}]}
    plan = _plan(data)
    assert [s.seed for s in plan.shots] == [3963576101, 681305572, 1234]
    assert plan.characters[0].seed == 2281398167


@pytest.mark.parametrize("camera, motion, rotate, fov_end", [
    # rises and tilts down by the angle the rise subtends 3 m away, so the subject stays in frame
    ({"type": "crane"}, (0, 1.5, 0), (0, -26.565, 0), 60),
    ({"type": "crane", "direction": "up"}, (0, 1.5, 0), (0, -26.565, 0), 60),
    ({"type": "crane", "direction": "down"}, (0, -1.5, 0), (0, 26.565, 0), 60),
    ({"type": "dolly"}, (0, 0, -1), (0, 0, 0), 60),  # a third of the 3 m to the subject, forward (-z)
    ({"type": "dolly", "direction": "out"}, (0, 0, 1), (0, 0, 0), 60),
    ({"type": "pan", "direction": "left"}, (0, 0, 0), (-30, 0, 0), 60),
    ({"type": "pan", "direction": "right"}, (0, 0, 0), (30, 0, 0), 60),
    ({"type": "tilt", "direction": "down"}, (0, 0, 0), (0, -15, 0), 60),
    ({"type": "truck", "direction": "left"}, (-1, 0, 0), (0, 0, 0), 60),
    ({"type": "truck", "direction": "right"}, (1, 0, 0), (0, 0, 0), 60),
    ({"type": "zoom"}, (0, 0, 0), (0, 0, 0), 36),  # a zoom in narrows the lens
    ({"type": "zoom", "direction": "out"}, (0, 0, 0), (0, 0, 0), 100),
], ids=lambda v: "-".join(str(x) for x in v.values()) if isinstance(v, dict) else None)
def test_default_moves_go_the_way_their_names_say(camera, motion, rotate, fov_end):
    from daotai.plan.moves import resolve_move
    from daotai.script.camera_spec import CameraSpec

    move = resolve_move(CameraSpec.model_validate(camera), 3.0)  # subject 3 m away
    assert move.motion == pytest.approx(motion)
    assert move.rotate == pytest.approx(rotate)
    assert move.fov_end == pytest.approx(fov_end)



@pytest.mark.parametrize("framing", ["medium", "close_up", "wide"])
def test_a_default_crane_up_keeps_the_subject_in_the_frame_to_its_end(framing):
    # A fixed 10° tilt lost a medium shot's subject below the frame by the end of the rise.
    import numpy as np

    from daotai.plan.geometry import intrinsics_from_matrix, project

    plan = _plan({"size": [640, 360], "characters": [{"id": "a", "height": 1.8}],
                  "shots": [{"shot_id": "up", "duration": 2, "subject": "a", "framing": framing, "camera": "crane"}]})
    shot = plan.shots[0]
    head = np.array([[0.0, 1.8 * 0.93, 0.0]]) + np.array([[*_ground(plan, shot, "a")]])
    for frame in (shot.cameras[0], shot.cameras[-1]):
        cam_to_world = np.array(frame.cam_to_world).reshape(4, 4)
        uv, depth = project(head, cam_to_world, intrinsics_from_matrix(np.array(frame.K).reshape(3, 3)))
        assert depth[0] > 0 and 0 <= uv[0, 0] <= 640 and 0 <= uv[0, 1] <= 360, (framing, uv[0])


def _ground(plan, shot, character_id: str) -> tuple[float, float, float]:
    """The character's ground point (x, 0, z) at the shot's start."""
    placed = next(p for p in shot.character_frames[0] if p.id == character_id)
    return (placed.position[0], 0.0, placed.position[1])
