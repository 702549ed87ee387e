"""Words a pre-production planner writes: aspect ratios as sizes, pov and insert framings, the
steadicam move, wipes with a direction, and a fade_out that passes its own QC."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import opentimelineio as otio
import pytest

import daotai
from builders import FINE
from daotai.encode.read import decode_frames
from daotai.encode.video import VideoWriter
from daotai.errors import PlanError, ScriptError
from daotai.plan import geometry, steadicam, viewpoint
from daotai.plan.planner import plan_script
from daotai.plan.staging import Body
from daotai.post.assemble import ClipSpec, Transition, assemble
from daotai.post.wipe import wipe_frame
from daotai.qc.fades import planned_fade_frames
from daotai.qc.report import check_sequence
from daotai.script.load import validate_script
from daotai.script.presets import apply_preset

TWO = [{"id": "mia", "position": [-0.8, 0.0], "facing": 90}, {"id": "tom", "position": [0.8, 0.0], "facing": -90}]


def _plan(shots: list[dict], **script):
    return plan_script(validate_script({"fps": 12, "characters": TWO, "shots": shots, **script}))


def _pixel(shot, frame: int, point, width: int, height: int) -> np.ndarray:
    """Where a world point lands in a planned frame: (u, v) pixels."""
    cam = np.array(shot.cameras[frame].cam_to_world).reshape(4, 4)
    uv, depth = geometry.project(np.array([point], np.float64), cam,
                                 geometry.intrinsics_from_fov(shot.cameras[frame].fov, width, height))
    assert depth[0] > 0
    return uv[0]


# ------------------------------------------------------------------ aspect ratios


@pytest.mark.parametrize("size, expected", [
    ("1080p 2.39:1", (1920, 804)), ("2.39:1", (1280, 536)), ("1.85:1", (1280, 692)), ("9:16", (720, 1280)),
    ("1080p 9:16", (1080, 1920)), ("1080p 4:3", (1440, 1080)), ("4:3", (960, 720)), ("1:1", (720, 720)),
    ("4K 1.85:1", (3840, 2076)), ("1920x1080 2.39:1", (1920, 804)), ("720p scope", (1280, 536)),
    ("1080p 2.39：1", (1920, 804)), ("16:9", (1280, 720)),
])
def test_an_aspect_ratio_crops_the_named_size_to_its_shape(size, expected):
    script = validate_script({"size": size, "shots": [{"shot_id": "a"}]})
    assert (script.size.width, script.size.height) == expected
    plan = plan_script(script)
    assert (plan.width, plan.height) == expected


def test_a_preset_keeps_the_scripts_shape():
    scope = validate_script({"size": "1080p 2.39:1", "shots": [{"shot_id": "a"}]})
    assert apply_preset(scope, "preview").size.model_dump() == {"width": 640, "height": 268}
    vertical = validate_script({"size": "9:16", "shots": [{"shot_id": "a"}]})
    assert apply_preset(vertical, "final").size.model_dump() == {"width": 1080, "height": 1920}
    plain = validate_script({"shots": [{"shot_id": "a"}]})
    assert apply_preset(plain, "480p").size.model_dump() == {"width": 854, "height": 480}


@pytest.mark.parametrize("size, words", [
    ("1080p 5:0", ["size", "'1080p 5:0'", "side of 0", "WIDTH:HEIGHT"]),
    ("720p 9:1", ["size", "'720p 9:1'", "outside 1:4 to 4:1"]),
    ("1080p 2.39-1", ["size", "'1080p 2.39-1'", "aspect ratio ('1080p 2.39:1')"]),
    ("128x72 4:1", ["size", "'128x72 4:1'", "gives 128x32", "under 64 px"]),
    ("huge 2.39:1", ["size", "must be a size name"]),
])
def test_a_bad_aspect_ratio_is_refused_naming_the_field_value_and_rule(size, words):
    with pytest.raises(ScriptError) as caught:
        validate_script({"size": size, "shots": [{"shot_id": "a"}]})
    text = str(caught.value)
    assert all(w in text for w in words), text
    assert caught.value.issues[0].path == "size"


# ------------------------------------------------------------------ pov and insert


@pytest.mark.parametrize("word", ["pov", "POV", "point of view", "主观镜头"])
def test_a_pov_sees_through_the_subjects_eyes_toward_whom_it_faces(word):
    plan = _plan([{"shot_id": "p", "duration": 1, "subject": "mia", "framing": word}], size="640x360")
    shot = plan.shots[0]
    assert shot.framing == "pov" and shot.prompt.startswith("Point-of-view shot through the eyes of")
    eye = np.array(shot.cameras[0].cam_to_world).reshape(4, 4)[:3, 3]
    height = 1.75
    assert eye[1] == pytest.approx(viewpoint.EYE_FRACTION * height)
    # just in front of Mia's face (she stands at x = -0.8 facing +x), not behind her head
    assert eye[0] == pytest.approx(-0.8 + viewpoint.POV_FORWARD_M) and eye[2] == pytest.approx(0.0)
    u, v = _pixel(shot, 0, (0.8, viewpoint.FACE_FRACTION * height, 0.0), 640, 360)  # Tom's face
    assert abs(u - 320) < 1 and abs(v - 180) < 1


def test_a_pov_looks_at_the_shots_look_at_and_a_seated_one_from_lower():
    plan = _plan([{"shot_id": "p", "duration": 1, "subject": "tom", "framing": "pov", "look_at": [0, 1, -3]},
                  {"shot_id": "q", "duration": 1, "subject": "tom", "framing": "pov", "pose": "sit"}],
                 size="640x360")
    u, v = _pixel(plan.shots[0], 0, (0.0, 1.0, -3.0), 640, 360)
    assert abs(u - 320) < 1 and abs(v - 180) < 1
    seated = np.array(plan.shots[1].cameras[0].cam_to_world).reshape(4, 4)[1, 3]
    assert seated == pytest.approx(viewpoint.SEATED_EYE_FRACTION * 1.75)


@pytest.mark.parametrize("word", ["insert", "insert shot", "detail", "插入镜头"])
def test_an_insert_is_a_close_detail_of_the_subjects_hand(word):
    plan = _plan([{"shot_id": "i", "duration": 1, "subject": "tom", "framing": word}], size="640x360")
    shot = plan.shots[0]
    assert shot.framing == "insert"
    hand = viewpoint.hand_point(Body("tom", (0.8, 0.0), 1.75, -90.0), seated=False)
    u, v = _pixel(shot, 0, hand, 640, 360)
    assert abs(u - 320) < 1 and abs(v - 180) < 1
    eye = np.array(shot.cameras[0].cam_to_world).reshape(4, 4)[:3, 3]
    # about INSERT_VISIBLE_M fills the frame height, from above and from Tom's front (-x)
    assert np.linalg.norm(eye - hand) == pytest.approx(viewpoint.insert_distance(60.0))
    assert eye[1] > hand[1] and eye[0] < hand[0]


def test_an_insert_of_a_prop_frames_the_point_the_camera_aims_at():
    plan = _plan([{"shot_id": "i", "duration": 1, "subject": "mia", "framing": "insert",
                   "camera": {"aim": [0.0, 0.75, 0.4]}}], size="640x360")
    u, v = _pixel(plan.shots[0], 0, (0.0, 0.75, 0.4), 640, 360)
    assert abs(u - 320) < 1 and abs(v - 180) < 1


# ------------------------------------------------------------------ steadicam


@pytest.mark.parametrize("word", ["steadicam", "Steadicam", "斯坦尼康", "stabilizer", "gimbal"])
def test_steadicam_follows_the_walk_with_a_slow_small_float(word):
    walk = {"character": "mia", "to": [-0.8, 2.0]}
    steady, follow = (_plan([{"shot_id": "s", "duration": 4, "subject": "mia", "camera": move, "blocking": [walk]}])
                      .shots[0] for move in (word, "follow"))
    assert steady.move.type == "steadicam" and steady.move.follow
    a = np.array([c.cam_to_world for c in steady.cameras]).reshape(-1, 4, 4)
    b = np.array([c.cam_to_world for c in follow.cameras]).reshape(-1, 4, 4)
    assert np.allclose(a[0], b[0])  # the shot starts on the framing it names
    travelled = b[-1, :3, 3] - b[0, :3, 3]
    assert travelled[2] == pytest.approx(2.0, abs=1e-6)  # the follow carries the camera with the walk
    drift = np.linalg.norm(a[:, :3, 3] - b[:, :3, 3], axis=1)
    assert 0.005 < drift.max() <= math.hypot(*steadicam.FLOAT_M) + 1e-9
    turn = np.degrees(np.arccos(np.clip((np.trace(np.swapaxes(a[:, :3, :3], 1, 2) @ b[:, :3, :3], axis1=1, axis2=2)
                                         - 1) / 2, -1, 1)))
    assert 0.05 < turn.max() < 1.0
    # slow: from frame to frame the float moves the lens far less than a handheld shake would
    assert np.abs(np.diff(a[:, :3, 3] - b[:, :3, 3], axis=0)).max() < 0.01


def test_the_float_peaks_at_its_amplitudes_and_starts_at_zero():
    drift = steadicam.float_offsets(120, 24.0, seed=7)  # (n, 5)
    assert np.all(drift[0] == 0)
    assert np.allclose(np.abs(drift).max(axis=0), [*steadicam.FLOAT_M, *steadicam.FLOAT_DEG])


# ------------------------------------------------------------------ wipes


@pytest.mark.parametrize("word, kind", [("wipe_left", "wipe_left"), ("wipe right", "wipe_right"),
                                        ("wipe-up", "wipe_up"), ("wipe_down", "wipe_down"), ("wipe", "wipe_right"),
                                        ("划像", "wipe_right"), ("向左划像", "wipe_left")])
def test_a_wipe_overlaps_the_shots_as_a_crossfade_does(word, kind):
    plan = _plan([{"shot_id": "a", "duration": 1}, {"shot_id": "b", "duration": 1,
                                                    "transition": {"type": word, "duration": 0.5}}])
    second = plan.shots[1]
    assert (second.transition.type, second.transition.frames) == (kind, 6)
    assert second.start_frame == 6 and plan.total_frames == 18


def test_a_wipe_into_the_first_shot_and_an_unknown_wipe_are_refused_by_name():
    with pytest.raises(PlanError) as caught:
        _plan([{"shot_id": "a", "duration": 1, "transition": "wipe_left"}])
    assert caught.value.issues[0].path == "shots[0].transition.type"
    assert "needs a previous shot to wipe from" in str(caught.value)
    with pytest.raises(ScriptError) as bad:
        _plan([{"shot_id": "a"}, {"shot_id": "b", "transition": "wipe_diagonal"}])
    text = str(bad.value)
    assert "shots[1].transition" in text and "'wipe_diagonal'" in text and "wipe_left" in text


def _solid(path: Path, colour, frames: int, size=(64, 48)) -> Path:
    with VideoWriter(path, size[0], size[1], 24, FINE) as writer:
        for _ in range(frames):
            writer.write(np.full((size[1], size[0], 3), colour, np.uint8))
    return path


@pytest.mark.parametrize("kind", ["wipe_left", "wipe_right", "wipe_up", "wipe_down"])
def test_assembly_uncovers_the_incoming_shot_behind_an_edge_travelling_the_named_way(tmp_path, kind):
    red, blue = (230, 20, 20), (20, 20, 230)
    a, b = _solid(tmp_path / "a.mp4", red, 12), _solid(tmp_path / "b.mp4", blue, 12)
    result = assemble([ClipSpec(a), ClipSpec(b, Transition(kind, 3 / 24))], tmp_path / "seq.mp4", 24, FINE)
    assert (result.frames, result.clip_starts) == (21, (0, 9))
    frames = list(decode_frames(result.path))
    middle = frames[10]  # the second of three overlap frames: the edge halfway across
    blue_mask = middle[..., 2] > 128  # (H, W)
    half = {"wipe_right": blue_mask[:, :32], "wipe_left": blue_mask[:, 32:],
            "wipe_down": blue_mask[:24], "wipe_up": blue_mask[24:]}[kind]
    other = {"wipe_right": blue_mask[:, 32:], "wipe_left": blue_mask[:, :32],
             "wipe_down": blue_mask[24:], "wipe_up": blue_mask[:24]}[kind]
    # away from the edge (and the codec's softening of it) each half is one shot
    inner = half[2:-2, 2:-2] if kind in ("wipe_up", "wipe_down") else half[2:-2, 2:-2]
    assert inner.mean() > 0.9 and other[3:-3, 3:-3].mean() < 0.1
    assert frames[8][..., 0].mean() > 200 and frames[12][..., 2].mean() > 200


def test_the_wipe_edge_is_at_the_overlaps_progress():
    old = np.zeros((4, 10, 3), np.uint8)
    new = np.full((4, 10, 3), 255, np.uint8)
    assert (wipe_frame("wipe_right", old, new, 0.25)[0, :, 0] == [255] * 3 + [0] * 7).all()  # 2.5 rounds up
    assert (wipe_frame("wipe_left", old, new, 0.25)[0, :, 0] == [0] * 7 + [255] * 3).all()
    assert (wipe_frame("wipe_down", old, new, 0.5)[:, 0, 0] == [255, 255, 0, 0]).all()
    assert (wipe_frame("wipe_up", old, new, 0.5)[:, 0, 0] == [0, 0, 255, 255]).all()
    with pytest.raises(ValueError, match="not a wipe"):
        wipe_frame("crossfade", old, new, 0.5)


# ------------------------------------------------------------------ fades and QC


def test_the_planned_fades_are_the_frames_qc_lets_be_black():
    plan = _plan([{"shot_id": "a", "duration": 1, "transition": {"type": "fade", "duration": 0.5}},
                  {"shot_id": "b", "duration": 1, "transition": {"type": "fade", "duration": 0.5}},
                  {"shot_id": "c", "duration": 1, "transition": "wipe_up"}], fade_out=0.5)
    # the fade in of a (3 frames), the fade from a into b (3 + 3), the closing 6
    assert sorted(planned_fade_frames(plan)) == [0, 1, 2, 9, 10, 11, 12, 13, 14, 24, 25, 26, 27, 28, 29]


def _sequence(path: Path, plan, black: set[int]) -> Path:
    with VideoWriter(path, plan.width, plan.height, Fraction(*plan.fps_fraction), FINE) as writer:
        for i in range(plan.total_frames):
            grey = 0 if i in black else 150
            writer.write(np.full((plan.height, plan.width, 3), grey, np.uint8))
    return path


def test_a_black_frame_inside_the_fade_out_passes_and_one_outside_every_fade_fails(tmp_path):
    plan = _plan([{"shot_id": "a", "duration": 1}, {"shot_id": "b", "duration": 1}], size=[128, 72], fade_out=0.5)
    last = set(range(plan.total_frames - 6, plan.total_frames))
    faded = check_sequence(plan, _sequence(tmp_path / "faded.mp4", plan, last))
    assert faded["ok"], faded["failures"]
    stray = check_sequence(plan, _sequence(tmp_path / "stray.mp4", plan, last | {5}))
    assert not stray["ok"]
    assert stray["failures"] == ["1 black frame(s) outside the planned fades, first at frame 5"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command line, importing the daotai these tests import (whatever the working folder)."""
    source = str(Path(daotai.__file__).resolve().parents[1])
    env = {**os.environ, "DAOTAI_NO_CACHE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env=env)


def test_a_scope_render_with_wipes_pov_insert_steadicam_and_fade_out_passes_strict_qc(tmp_path):
    script = {
        "scene": "kitchen", "fps": 12, "size": "1080p 2.39:1", "characters": TWO, "fade_out": 0.5,
        "shots": [
            {"shot_id": "pov", "duration": 1.5, "subject": "mia", "framing": "主观镜头"},
            {"shot_id": "insert", "duration": 1.5, "subject": "tom", "framing": "insert", "transition": "wipe"},
            {"shot_id": "steady", "duration": 1.5, "subject": "mia", "camera": "斯坦尼康",
             "blocking": [{"character": "mia", "to": [-0.8, 1.5]}],
             "transition": {"type": "wipe_up", "duration": 0.5}},
        ],
    }
    (tmp_path / "script.json").write_text(json.dumps(script, ensure_ascii=False))
    rendered = _cli("render", "script.json", "-o", "out", "--preset", "preview", "--strict", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    checked = _cli("qc", "out", "--strict", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    qc = json.loads((tmp_path / "out" / "qc.json").read_text())
    assert qc["ok"] and qc["sequence"]["black_frames"] >= 1  # the fade out's black, not a fault
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert (plan["width"], plan["height"]) == (640, 268)
    frames = list(decode_frames(tmp_path / "out" / "sequence.mp4"))
    assert frames[0].shape == (268, 640, 3) and len(frames) == plan["total_frames"] == 18 + 18 + 18 - 6 - 6
    timeline = otio.adapters.read_from_file(str(tmp_path / "out" / "timeline.otio"))
    wipes = [t for t in timeline.tracks[0] if isinstance(t, otio.schema.Transition)]
    assert [(t.transition_type, t.metadata["daotai"]["direction"]) for t in wipes] == [
        ("SMPTE_Wipe", "right"), ("SMPTE_Wipe", "up")]
    edl = tmp_path / "out" / "timeline.edl"
    if edl.exists():  # the EDL adapter is installed: the wipes read back as wipes
        text = edl.read_text()
        assert " W001 " in text and " W002 " in text
        back = otio.adapters.read_from_file(str(edl))
        assert [t.transition_type for t in back.tracks[0] if isinstance(t, otio.schema.Transition)] == [
            "SMPTE_Wipe", "SMPTE_Wipe"]
    xml = tmp_path / "out" / "timeline.xml"
    if xml.exists():
        assert xml.read_text().count("<effectid>Edge Wipe</effectid>") == 2
