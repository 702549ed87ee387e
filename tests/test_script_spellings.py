"""The spellings a script may use, each read one way: other field names, durations as text,
sizes and colours by name, cameras as short phrases; and the exact answer when one is wrong."""

from __future__ import annotations

import pytest

from daotai.errors import ScriptError
from daotai.script.load import validate_script
from daotai.script.spellings import focal_length_to_fov, read_camera_phrase, read_colour_name, read_seconds


def shot(**fields) -> dict:
    return {"characters": [{"id": "a"}], "shots": [{"shot_id": "s1", **fields}]}


def issues(doc) -> list[str]:
    with pytest.raises(ScriptError) as info:
        validate_script(doc)
    return [str(i) for i in info.value.issues]


@pytest.mark.parametrize("phrase, fields", [
    ("slow push in", {"type": "dolly", "direction": "in"}),
    ("Push-In", {"type": "dolly", "direction": "in"}),
    ("pan left 20°", {"type": "pan", "direction": "left", "rotate": [-20.0, 0.0, 0.0]}),
    ("pan 15 degrees", {"type": "pan", "rotate": [15.0, 0.0, 0.0]}),
    ("tilt down 10 deg", {"type": "tilt", "direction": "down", "rotate": [0.0, -10.0, 0.0]}),
    ("dolly in 1.5 m", {"type": "dolly", "direction": "in", "motion": [0.0, 0.0, -1.5]}),
    ("pull out 2m", {"type": "dolly", "direction": "out", "motion": [0.0, 0.0, 2.0]}),
    ("truck right 50cm", {"type": "truck", "direction": "right", "motion": [0.5, 0.0, 0.0]}),
    ("crane up 2 m", {"type": "crane", "direction": "up", "motion": [0.0, 2.0, 0.0]}),
    ("orbit right 90°", {"type": "orbit", "direction": "right", "orbit": 90.0}),
    ("fast pan right 90°", {"type": "pan", "direction": "right", "rotate": [90.0, 0.0, 0.0]}),
    ("slow zoom in", {"type": "zoom", "direction": "in"}),
    ("the camera slowly tracks left", None),  # 'tracks' is not a move word: refused, see below
    ("缓慢推进", {"type": "dolly", "direction": "in"}),
    ("镜头向左摇20度", {"type": "pan", "direction": "left", "rotate": [-20.0, 0.0, 0.0]}),
    ("快速右摇45度", {"type": "pan", "direction": "right", "rotate": [45.0, 0.0, 0.0]}),
    ("上升1米", {"type": "crane", "direction": "up", "motion": [0.0, 1.0, 0.0]}),
])
def test_camera_phrases(phrase, fields):
    if fields is None:
        with pytest.raises(ValueError):
            read_camera_phrase(phrase)
        return
    assert read_camera_phrase(phrase) == fields
    camera = validate_script(shot(camera=phrase)).shots[0].camera
    assert camera.type.value == fields["type"]


@pytest.mark.parametrize("phrase, rule", [
    ("fast pan left", "says 'fast' without an amount (the default pan is a slow move); give the amount, e.g. "
                      "'fast pan left 90°'"),
    ("pan left 2 m", "gives 2 m for a pan, which moves by degrees, e.g. 20°"),
    ("dolly 1 m", "gives a dolly amount without saying which way (in or out)"),
    ("pan left and tilt up", "names more than one move ('pan_left', 'tilt_up')"),
    ("pan left right", "names contradicting directions (left, right)"),
    ("pan left 20° 30°", "gives more than one amount"),
    ("pan sideways", "has 'sideways', which is not a word of camera phrases"),
    ("zoom in 20°", "gives an amount, which a zoom camera does not take in a phrase"),
])
def test_camera_phrases_that_do_not_read_say_why(phrase, rule):
    found = issues(shot(camera=phrase))
    assert found == [f"shots[0].camera: {phrase!r} {rule}" + ("; write the camera's fields" if "zoom" in phrase
                                                               else "")] or rule in found[0], found


def test_a_phrase_and_explicit_fields_meet_the_same_rules():
    """Explicit fields win over what a phrase implies, and contradictions are still contradictions."""
    camera = validate_script(shot(camera={"type": "pan left", "rotate": [-5, 0, 0]})).shots[0].camera
    assert camera.rotate == (-5.0, 0.0, 0.0)
    assert "contradicts the explicit amount" in issues(shot(camera={"type": "pan left", "rotate": [5, 0, 0]}))[0]


@pytest.mark.parametrize("text, seconds", [
    ("3", 3.0), ("3s", 3.0), ("2.5 s", 2.5), ("1m30s", 90.0), ("1 min 30 sec", 90.0), ("1:30", 90.0),
    ("0:02.5", 2.5), ("500ms", 0.5), ("3秒", 3.0), ("1分30秒", 90.0), (" 4 S ", 4.0), (".5s", 0.5), ("-2s", -2.0),
])
def test_durations_as_text(text, seconds):
    assert read_seconds(text) == seconds


@pytest.mark.parametrize("text", ["3 parsecs", "1h", "", "1:75", "3.", "s", "1m30m"])
def test_durations_that_do_not_read(text):
    with pytest.raises(ValueError, match="must be seconds as a number or as text"):
        read_seconds(text)


def test_duration_text_meets_the_same_bounds():
    assert issues(shot(duration="200s")) == ["shots[0].duration: '200s' must be between 0 and 120 (excluding 0)"]
    assert validate_script(shot(transition={"type": "fade", "duration": "500ms"})).shots[0].transition.duration == 0.5


@pytest.mark.parametrize("size, expected", [
    ("4K", (3840, 2160)), ("uhd", (3840, 2160)), ("2160p", (3840, 2160)), ("DCI 4K", (4096, 2160)),
    ("1440p", (2560, 1440)), ("Full HD", (1920, 1080)), ("8K", (7680, 4320)), ("1920 × 1080", (1920, 1080)),
])
def test_sizes_by_name(size, expected):
    script = validate_script({"resolution": size, "shots": [{"shot_id": "s1"}]})
    assert (script.size.width, script.size.height) == expected


@pytest.mark.parametrize("size, rule", [
    ("2K", "is ambiguous: cinema 2K is 2048x1080 ('dci_2k'), a '2K' screen is 2560x1440 ('1440p')"),
    ("HD", "is ambiguous: HD is 1280x720 ('720p') or full HD 1920x1080 ('1080p')"),
])
def test_ambiguous_sizes_are_answered_with_the_choices(size, rule):
    assert issues({"size": size, "shots": [{"shot_id": "s1"}]}) == [f"size: {size!r} {rule}"]


@pytest.mark.parametrize("name, rgb", [
    ("brown", (0.45, 0.29, 0.17)), ("Brown", (0.45, 0.29, 0.17)), ("dark blue", (0.099, 0.198, 0.429)),
    ("深蓝", (0.099, 0.198, 0.429)), ("light grey", (0.736, 0.736, 0.747)), ("红色", (0.8, 0.16, 0.14)),
])
def test_colours_by_name(name, rgb):
    assert read_colour_name(name) == pytest.approx(rgb)
    assert validate_script({"characters": [{"id": "a", "color": name}], "shots": [{"shot_id": "s1"}]}
                           ).characters[0].colour == pytest.approx(rgb)


def test_other_field_names_read_as_the_canonical_ones():
    doc = {"resolution": "720p", "scene": {"name": "street", "time": "night"},
           "characters": [{"id": "a", "color": "red", "description": "tall"}, {"id": "b", "look": "short"}],
           "shots": [{"id": "s1", "shot": "CU", "character": "a", "move": "pan left"},
                     {"shot_id": "s2", "camera": {"move": "tilt up"}}]}
    script = validate_script(doc)
    assert script.scene.time_of_day.value == "night"
    assert [c.appearance for c in script.characters] == ["tall", "short"]
    first = script.shots[0]
    assert (first.shot_id, first.framing.value, first.subject, first.camera.type.value) == ("s1", "close_up", "a", "pan")
    assert script.shots[1].camera.type.value == "tilt"
    # references made with another name are checked like any
    assert issues(dict(doc, shots=[{"id": "s1", "character": "zed"}])) == [
        "shots[0].character: 'zed' is not a character id; known characters: a, b"]


@pytest.mark.parametrize("doc, expected", [
    (shot(camra="pan"), "shots[0].camra: 'pan' is not a known field of shots[0]; did you mean 'camera'?"),
    (shot(lens=35), "shots[0].lens: 35 is not a known field of shots[0]; the lens is set as camera.focal_length_mm "
                    "(millimetres on camera.sensor, Super 35 unless named) or as camera.fov, the vertical "
                    "field of view in degrees: 35 mm on a full-frame camera is fov 37.8"),
    (shot(fov=40), "shots[0].fov: 40 is not a known field of shots[0]; it belongs to the shot's camera: write it as "
                   "camera.fov"),
    (shot(type="pan"), "shots[0].type: 'pan' is not a known field of shots[0]; it is ambiguous in a shot: the camera "
                       "move is camera.type, the shot size is framing"),
    ({"time": "night", "shots": [{"shot_id": "s1"}]}, "time: 'night' is not a known field of the script; it belongs "
                                                      "to the scene: write it as scene.time_of_day"),
    (shot(camera="pan", move="tilt"), "shots[0].move: 'tilt' is not a known field of the shot once it has a camera: "
                                      "write the move as camera.type"),
    ({"characters": [{"id": "a", "color": "red", "colour": "blue"}], "shots": [{"shot_id": "s1"}]},
     "characters[0].color: 'red' is another spelling of 'colour', which is also given; write one of them"),
    (shot(character=["a"]), "shots[0].character: ['a'] must be one character id (the shot's subject); list the "
                            "characters in the shot as 'characters'"),
    (shot(framing="medum"), "shots[0].framing: 'medum' is not a known framing (shot size); did you mean 'medium', "
                            "'medium_shot' or 'medium_full'?"),
])
def test_wrong_names_are_answered_with_the_right_one(doc, expected):
    found = issues(doc)
    assert any(issue.startswith(expected) for issue in found), found


def test_focal_length_to_fov():
    assert focal_length_to_fov(50) == pytest.approx(26.99, abs=0.01)
    assert focal_length_to_fov(24) == pytest.approx(53.13, abs=0.01)


@pytest.mark.parametrize("word, kind, direction", [
    ("左摇", "pan", "left"), ("右摇", "pan", "right"), ("上摇", "tilt", "up"), ("下摇", "tilt", "down"),
    ("推", "dolly", "in"), ("推进", "dolly", "in"), ("推镜头", "dolly", "in"), ("拉", "dolly", "out"),
    ("拉远", "dolly", "out"), ("左移", "truck", "left"), ("右移", "truck", "right"), ("升", "crane", "up"),
    ("降", "crane", "down"), ("上升", "crane", "up"), ("下降", "crane", "down"),
    ("pan_left", "pan", "left"), ("push_in", "dolly", "in"), ("pull_out", "dolly", "out"),
])
def test_camera_words_name_their_move_and_its_direction(word, kind, direction):
    for camera in (word, {"type": word}):
        cam = validate_script({"shots": [{"shot_id": "s", "camera": camera}]}).shots[0].camera
        assert (cam.type.value, cam.direction.value) == (kind, direction), camera


@pytest.mark.parametrize("fov_end", [0.5, 170, 175])
def test_validate_refuses_a_zoom_end_the_planner_cannot_make(fov_end):
    # validate and the planner agree on the lens: what validate passes, the plan can make.
    with pytest.raises(ScriptError) as caught:
        validate_script({"shots": [{"shot_id": "s", "camera": {"type": "zoom", "fov_end": fov_end}}]})
    assert "shots[0].camera.fov_end" in str(caught.value)


def test_the_widest_zoom_end_validate_passes_plans():
    from daotai.plan.planner import plan_script

    script = validate_script({"shots": [{"shot_id": "s", "camera": {"type": "zoom", "fov_end": 169.9}}]})
    assert plan_script(script).shots[0].move.fov_end == pytest.approx(169.9)


def test_the_editor_schema_lists_the_chinese_camera_words_the_reader_takes():
    # Editors and the console offer the words the schema lists; a word dropped from the alias
    # table would still read (as 推 + 进) but no longer be offered.
    from daotai.script.jsonschema import script_json_schema

    listed = script_json_schema()["$defs"]["CameraType"]["description"].split(": ", 1)[1].split(", ")
    for word in ("左摇", "右摇", "上摇", "下摇", "推", "推进", "推镜头", "拉", "拉远", "左移", "右移", "升", "降"):
        assert word in listed, word
