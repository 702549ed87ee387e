"""Every camera word and direction of the vocabulary, English and Chinese, pinned to its move, its
sign and its axis: the word reads as the move it names, and the move goes the way the word says
in the picture (the start camera at the origin looking down -z, the subject 3 m ahead)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.plan import camera_grammar as cam
from daotai.plan.moves import resolve_move
from daotai.script import vocab
from daotai.script.camera_spec import CameraSpec
from daotai.script.load import validate_script
from daotai.script.prompt_reader import read_prompt
from daotai.script.spellings import read_camera, read_camera_phrase

# Every spelling of the camera table: (move, direction or None, pan follow). A word added to the
# vocabulary without a row here fails the first test, so each new word gets its direction pinned.
WORDS: dict[str, tuple[str, str | None, bool]] = {
    **{t.value: (t.value, None, False) for t in vocab.CameraType},
    "fixed": ("static", None, False), "locked": ("static", None, False), "locked_off": ("static", None, False),
    "still": ("static", None, False), "固定": ("static", None, False), "固定镜头": ("static", None, False),
    "定": ("static", None, False),
    "pan_right": ("pan", "right", False), "pan_left": ("pan", "left", False), "摇": ("pan", None, False),
    "横摇": ("pan", None, False), "左摇": ("pan", "left", False), "右摇": ("pan", "right", False),
    "tilt_up": ("tilt", "up", False), "tilt_down": ("tilt", "down", False), "竖摇": ("tilt", None, False),
    "上摇": ("tilt", "up", False), "下摇": ("tilt", "down", False),
    "dutch_roll": ("roll", None, False), "旋转": ("roll", None, False), "横滚": ("roll", None, False),
    "push_in": ("dolly", "in", False), "dolly_in": ("dolly", "in", False), "pull_out": ("dolly", "out", False),
    "pull_back": ("dolly", "out", False), "dolly_out": ("dolly", "out", False), "推": ("dolly", "in", False),
    "推进": ("dolly", "in", False), "推镜头": ("dolly", "in", False), "拉": ("dolly", "out", False),
    "拉远": ("dolly", "out", False), "拉镜头": ("dolly", "out", False),
    "track": ("truck", None, False), "tracking": ("truck", None, False), "slide": ("truck", None, False),
    "truck_right": ("truck", "right", False), "truck_left": ("truck", "left", False), "移": ("truck", None, False),
    "横移": ("truck", None, False), "移镜头": ("truck", None, False), "左移": ("truck", "left", False),
    "右移": ("truck", "right", False),
    "pedestal_up": ("pedestal", "up", False), "pedestal_down": ("pedestal", "down", False),
    "boom": ("crane", None, False), "jib": ("crane", None, False), "crane_up": ("crane", "up", False),
    "crane_down": ("crane", "down", False), "升降": ("crane", None, False), "升": ("crane", "up", False),
    "降": ("crane", "down", False), "上升": ("crane", "up", False), "下降": ("crane", "down", False),
    "arc": ("orbit", None, False), "circle": ("orbit", None, False), "orbit_left": ("orbit", "left", False),
    "orbit_right": ("orbit", "right", False), "环绕": ("orbit", None, False), "环拍": ("orbit", None, False),
    "绕拍": ("orbit", None, False),
    "zoom_in": ("zoom", "in", False), "zoom_out": ("zoom", "out", False), "变焦": ("zoom", None, False),
    "拉近": ("zoom", "in", False),
    "vertigo": ("dolly_zoom", None, False), "zolly": ("dolly_zoom", None, False),
    "希区柯克变焦": ("dolly_zoom", None, False), "滑动变焦": ("dolly_zoom", None, False),
    "shaky": ("handheld", None, False), "hand_held": ("handheld", None, False), "手持": ("handheld", None, False),
    "晃动": ("handheld", None, False),
    "follow_shot": ("follow", None, False), "跟": ("follow", None, False), "跟拍": ("follow", None, False),
    "跟随": ("follow", None, False),
    "pan_follow": ("pan", None, True), "follow_pan": ("pan", None, True), "panning_follow": ("pan", None, True),
    "摇跟": ("pan", None, True), "跟摇": ("pan", None, True),
    "steady_cam": ("steadicam", None, False), "stabilizer": ("steadicam", None, False),
    "stabiliser": ("steadicam", None, False), "gimbal": ("steadicam", None, False),
    "斯坦尼康": ("steadicam", None, False), "斯坦尼康跟拍": ("steadicam", None, False),
    "稳定器": ("steadicam", None, False),
}

# Direction words, alone or beside a move, and what they mean.
DIRECTION_WORDS = {
    "left": "left", "左": "left", "right": "right", "右": "right", "up": "up", "上": "up", "down": "down",
    "下": "down", "in": "in", "forward": "in", "进": "in", "推": "in", "out": "out", "back": "out",
    "backward": "out", "出": "out", "拉": "out",
}

SUBJECT_M = 3.0


def test_every_camera_word_has_a_row():
    assert set(vocab.CAMERA_ALIASES) == set(WORDS)


@pytest.mark.parametrize("word", sorted(WORDS))
def test_each_camera_word_reads_as_its_move_and_direction(word):
    kind, direction, follow = WORDS[word]
    fields = read_camera(word)
    assert fields.get("type") == kind and fields.get("direction") == direction
    assert bool(fields.get("follow")) is follow
    if follow or kind == "follow":
        return  # a follow needs someone walking: read, not planned here
    camera = validate_script({"shots": [{"shot_id": "s", "camera": word}]}).shots[0].camera
    assert (camera.type.value, camera.direction.value if camera.direction else None) == (kind, direction)


@pytest.mark.parametrize("word, direction", sorted(DIRECTION_WORDS.items()))
def test_each_direction_word_reads_as_its_direction(word, direction):
    assert vocab.lookup(vocab.DIRECTION_ALIASES, word) == direction


def _end_pose(kind: str, direction: str | None) -> tuple[np.ndarray, float, float]:
    """Last cam_to_world (4, 4), start and end fov of a default move from the origin looking down -z."""
    spec = CameraSpec.model_validate({"type": kind, **({"direction": direction} if direction else {})})
    move = resolve_move(spec, SUBJECT_M)
    plan_move = cam.Move(motion=move.motion, rotate=move.rotate, orbit=move.orbit, fov=move.fov,
                         fov_end=move.fov_end, orbit_center=(0.0, 0.0, -SUBJECT_M))
    traj = cam.trajectory(np.eye(4), plan_move, 10, 24.0)
    return traj.cam_to_world[-1], float(traj.fov[0]), float(traj.fov[-1])


def _view(pose: np.ndarray) -> np.ndarray:
    return -pose[:3, 2]


# (move, direction): what the picture does, as a test on the last pose (and the lens).
PICTURE = {
    ("pan", "right"): lambda p, f0, f1: _view(p)[0] > 0.3 and abs(p[:3, 3]).max() < 1e-9,
    ("pan", "left"): lambda p, f0, f1: _view(p)[0] < -0.3 and abs(p[:3, 3]).max() < 1e-9,
    ("tilt", "up"): lambda p, f0, f1: _view(p)[1] > 0.2 and abs(_view(p)[0]) < 1e-9,
    ("tilt", "down"): lambda p, f0, f1: _view(p)[1] < -0.2 and abs(_view(p)[0]) < 1e-9,
    # roll right turns the body clockwise seen from behind: its right side dips
    ("roll", "right"): lambda p, f0, f1: p[1, 0] < -0.2 and _view(p) @ [0, 0, -1] > 0.999,
    ("roll", "left"): lambda p, f0, f1: p[1, 0] > 0.2 and _view(p) @ [0, 0, -1] > 0.999,
    ("dolly", "in"): lambda p, f0, f1: p[2, 3] == pytest.approx(-1.0) and f1 == f0,
    ("dolly", "out"): lambda p, f0, f1: p[2, 3] == pytest.approx(1.0) and f1 == f0,
    ("truck", "right"): lambda p, f0, f1: p[0, 3] >= 1.0 and abs(p[1, 3]) + abs(p[2, 3]) < 1e-9,
    ("truck", "left"): lambda p, f0, f1: p[0, 3] <= -1.0 and abs(p[1, 3]) + abs(p[2, 3]) < 1e-9,
    ("pedestal", "up"): lambda p, f0, f1: p[1, 3] == pytest.approx(0.5) and _view(p) @ [0, 0, -1] > 0.999,
    ("pedestal", "down"): lambda p, f0, f1: p[1, 3] == pytest.approx(-0.5) and _view(p) @ [0, 0, -1] > 0.999,
    # a crane rises and tilts down toward the subject (or sinks and tilts up)
    ("crane", "up"): lambda p, f0, f1: p[1, 3] > 1.0 and _view(p)[1] < -0.2,
    ("crane", "down"): lambda p, f0, f1: p[1, 3] < -1.0 and _view(p)[1] > 0.2,
    # an orbit right carries the camera to its right around the subject, still facing it
    ("orbit", "right"): lambda p, f0, f1: p[0, 3] > 1.0 and _view(p)[0] < -0.3,
    ("orbit", "left"): lambda p, f0, f1: p[0, 3] < -1.0 and _view(p)[0] > 0.3,
    ("zoom", "in"): lambda p, f0, f1: f1 < f0 and abs(p[:3, 3]).max() < 1e-9,
    ("zoom", "out"): lambda p, f0, f1: f1 > f0 and abs(p[:3, 3]).max() < 1e-9,
    # a dolly zoom in pushes in and widens the lens; out pulls back and narrows it
    ("dolly_zoom", "in"): lambda p, f0, f1: p[2, 3] < -0.5 and f1 > f0,
    ("dolly_zoom", "out"): lambda p, f0, f1: p[2, 3] > 0.5 and f1 < f0,
}


def test_every_direction_of_every_move_has_a_picture_row():
    assert set(PICTURE) == {(k, d) for k, signs in vocab.DIRECTION_SIGNS.items() for d in signs}


@pytest.mark.parametrize("kind, direction", sorted(PICTURE))
def test_each_direction_moves_the_picture_the_way_it_says(kind, direction):
    pose, f0, f1 = _end_pose(kind, direction)
    assert PICTURE[(kind, direction)](pose, f0, f1), (kind, direction, pose.round(3), f0, f1)


@pytest.mark.parametrize("word", sorted(w for w, (k, d, f) in WORDS.items() if d is not None))
def test_each_directed_word_moves_the_picture_like_its_direction(word):
    kind, direction, _ = WORDS[word]
    spec = validate_script({"shots": [{"shot_id": "s", "camera": word}]}).shots[0].camera
    move = resolve_move(spec, SUBJECT_M)
    plain = resolve_move(CameraSpec.model_validate({"type": kind, "direction": direction}), SUBJECT_M)
    assert move == plain


@pytest.mark.parametrize("phrase, fields", [
    ("向右摇", {"type": "pan", "direction": "right"}),
    ("向上摇15度", {"type": "tilt", "direction": "up", "rotate": [0.0, 15.0, 0.0]}),
    ("下摇10度", {"type": "tilt", "direction": "down", "rotate": [0.0, -10.0, 0.0]}),
    ("左移1米", {"type": "truck", "direction": "left", "motion": [-1.0, 0.0, 0.0]}),
    ("右移50厘米", {"type": "truck", "direction": "right", "motion": [0.5, 0.0, 0.0]}),
    ("下降2米", {"type": "crane", "direction": "down", "motion": [0.0, -2.0, 0.0]}),
    ("拉远1米", {"type": "dolly", "direction": "out", "motion": [0.0, 0.0, 1.0]}),
    ("推进0.5米", {"type": "dolly", "direction": "in", "motion": [0.0, 0.0, -0.5]}),
    ("向左环绕30度", {"type": "orbit", "direction": "left", "orbit": -30.0}),
    ("tilt up 12°", {"type": "tilt", "direction": "up", "rotate": [0.0, 12.0, 0.0]}),
    ("roll left 5°", {"type": "roll", "direction": "left", "rotate": [0.0, 0.0, -5.0]}),
    ("roll right 5°", {"type": "roll", "direction": "right", "rotate": [0.0, 0.0, 5.0]}),
    ("pedestal down 30 cm", {"type": "pedestal", "direction": "down", "motion": [0.0, -0.3, 0.0]}),
    ("pedestal up 1 ft", {"type": "pedestal", "direction": "up", "motion": [0.0, 0.3048, 0.0]}),
    ("truck left 2 m", {"type": "truck", "direction": "left", "motion": [-2.0, 0.0, 0.0]}),
    ("crane down 1 m", {"type": "crane", "direction": "down", "motion": [0.0, -1.0, 0.0]}),
    ("orbit left 45°", {"type": "orbit", "direction": "left", "orbit": -45.0}),
    ("dolly back 1 m", {"type": "dolly", "direction": "out", "motion": [0.0, 0.0, 1.0]}),
    ("dolly forward 1 m", {"type": "dolly", "direction": "in", "motion": [0.0, 0.0, -1.0]}),
    ("dolly zoom in 1 m", {"type": "dolly_zoom", "direction": "in", "motion": [0.0, 0.0, -1.0]}),
    ("zoom out", {"type": "zoom", "direction": "out"}),
])
def test_phrases_of_every_direction(phrase, fields):
    assert read_camera_phrase(phrase) == fields


@pytest.mark.parametrize("prompt, fields", [
    ("slow tilt up on a tower", {"type": "tilt", "direction": "up"}),
    ("a dog in a park, crane down", {"type": "crane", "direction": "down"}),
    ("orbit left around a dancer", {"type": "orbit", "direction": "left"}),
    ("zoom out from a face", {"type": "zoom", "direction": "out"}),
    ("truck right 2 m past a shop", {"type": "truck", "direction": "right", "motion": [2.0, 0.0, 0.0]}),
    ("女人，下摇", {"type": "tilt", "direction": "down"}),
    ("男人，拉近", {"type": "zoom", "direction": "in"}),
    ("街道，降", {"type": "crane", "direction": "down"}),
    ("公园，右移", {"type": "truck", "direction": "right"}),
    ("夜市，拉镜头", {"type": "dolly", "direction": "out"}),
    ("boom up over a crowd", {"type": "crane", "direction": "up"}),
    # short move words are words, not abbreviations: read in lower case (they were only in capitals)
    ("jib down to a child", {"type": "crane", "direction": "down"}),
    ("arc left around a dancer", {"type": "orbit", "direction": "left"}),
    ("slow pan across a street", {"type": "pan"}),
    ("a frying pan on a stove", None),  # a pan without a direction, speed or amount is a pan
])
def test_prompts_read_each_direction(prompt, fields):
    reading = read_prompt(prompt)
    if fields is None:
        assert reading.camera is None, reading
        return
    assert reading.camera is not None and reading.camera.value == fields, reading


# ---------------------------------------------------------------- symmetric and inverse forms

MIRRORED = [("pan", "left", "right"), ("tilt", "up", "down"), ("roll", "left", "right"), ("truck", "left", "right"),
            ("pedestal", "up", "down"), ("crane", "up", "down"), ("orbit", "left", "right"), ("dolly", "in", "out")]


@settings(max_examples=60, deadline=None)
@given(pair=st.sampled_from(MIRRORED), distance=st.floats(0.5, 30.0))
def test_opposite_directions_are_mirror_moves(pair, distance):
    kind, one, other = pair
    a = resolve_move(CameraSpec.model_validate({"type": kind, "direction": one}), distance)
    b = resolve_move(CameraSpec.model_validate({"type": kind, "direction": other}), distance)
    assert a.motion == pytest.approx(tuple(-v for v in b.motion))
    assert a.rotate == pytest.approx(tuple(-v for v in b.rotate))
    assert a.orbit == pytest.approx(-b.orbit)
    assert any(v != 0 for v in (*a.motion, *a.rotate, a.orbit))


@settings(max_examples=80, deadline=None)
@given(pair=st.sampled_from(MIRRORED + [("dolly_zoom", "in", "out")]), amount=st.floats(0.1, 80.0).map(lambda v: round(v, 2)))
def test_opposite_directions_with_an_amount_read_as_opposite_signs(pair, amount):
    kind, one, other = pair
    unit = "°" if kind in ("pan", "tilt", "roll", "orbit") else " m"
    a = read_camera_phrase(f"{kind.replace('_', ' ')} {one} {amount}{unit}")
    b = read_camera_phrase(f"{kind.replace('_', ' ')} {other} {amount}{unit}")
    field = next(k for k in ("rotate", "motion", "orbit") if k in a)
    values_a = np.atleast_1d(a[field])
    values_b = np.atleast_1d(b[field])
    assert np.allclose(values_a, -values_b) and np.abs(values_a).max() == pytest.approx(amount)
    # and the sign is the vocabulary's: the direction's sign times the amount
    assert values_a[np.argmax(np.abs(values_a))] == pytest.approx(vocab.DIRECTION_SIGNS[kind][one] * amount)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(vocab.DIRECTION_SIGNS)), data=st.data())
def test_a_move_written_as_words_reads_back_as_that_move(kind, data):
    direction = data.draw(st.sampled_from(sorted(vocab.DIRECTION_SIGNS[kind])))
    spelled = data.draw(st.sampled_from([f"{kind} {direction}", f"{kind}_{direction}", f"{kind.upper()} {direction}"]))
    fields = read_camera(spelled)
    assert (fields["type"], fields["direction"]) == (kind, direction)
