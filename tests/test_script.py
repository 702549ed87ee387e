"""The script schema: shorthand accepted, every rule enforced with path, value and rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pydantic
import pytest

from daotai.errors import ScriptError
from daotai.script.load import MAX_DEPTH, MAX_SCRIPT_BYTES, load_script, parse_script, validate_script
from daotai.script.schema import Script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

MINIMAL = """{"scene": "office",
 "characters": [{"id": "char_001", "appearance": "wearing glasses, blue shirt"}],
 "shots": [{"shot_id": "s01", "camera": {"type": "dolly", "motion": [0.1, 0.0, -0.3]}, "subject": "char_001",
            "framing": "medium_shot"}]}"""

BASE = {
    "scene": "office",
    "characters": [{"id": "a"}, {"id": "b"}],
    "shots": [{"shot_id": "s01", "subject": "a"}, {"shot_id": "s02", "subject": "b"}],
}


def test_minimal_published_script_validates_as_written():
    script = parse_script(MINIMAL)
    assert script.scene.name == "office"
    assert script.characters[0].appearance == "wearing glasses, blue shirt"
    shot = script.shots[0]
    assert shot.framing.value == "medium"
    assert shot.camera.type.value == "dolly"
    assert shot.camera.motion == (0.1, 0.0, -0.3)
    # documented defaults
    assert shot.duration == 4.0 and script.fps == 24.0 and shot.camera.fov == 60.0
    assert (script.size.width, script.size.height) == (1280, 720)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_every_example_validates(path):
    assert isinstance(load_script(path), Script)


@pytest.mark.parametrize(
    "alias, canonical",
    [("MS", "medium"), ("medium_shot", "medium"), ("中景", "medium"), ("ECU", "extreme_close_up"),
     ("特写", "close_up"), ("近景", "medium_close_up"), ("全景", "full"), ("远景", "wide"),
     ("大远景", "extreme_wide"), ("Medium Shot", "medium"), ("cowboy", "medium_full")],
)
def test_framing_aliases(alias, canonical):
    data = copy.deepcopy(BASE)
    data["shots"][0]["framing"] = alias
    assert validate_script(data).shots[0].framing.value == canonical


@pytest.mark.parametrize(
    "alias, kind, field, expected",
    [("推", "dolly", "direction", "in"), ("拉", "dolly", "direction", "out"), ("摇", "pan", None, None),
     ("移", "truck", None, None), ("跟", "follow", None, None), ("升降", "crane", None, None),
     ("环绕", "orbit", None, None), ("push_in", "dolly", "direction", "in"), ("pan_left", "pan", "direction", "left"),
     ("zoom_out", "zoom", "direction", "out"), ("手持", "handheld", None, None)],
)
def test_camera_aliases(alias, kind, field, expected):
    data = copy.deepcopy(BASE)
    data["shots"][0]["camera"] = alias
    cam = validate_script(data).shots[0].camera
    assert cam.type.value == kind
    if field:
        assert getattr(cam, field).value == expected


@pytest.mark.parametrize("alias, canonical", [("俯拍", "high"), ("仰拍", "low"), ("平视", "eye_level"),
                                              ("鸟瞰", "birds_eye"), ("dutch angle", "dutch")])
def test_angle_aliases(alias, canonical):
    data = copy.deepcopy(BASE)
    data["shots"][0]["angle"] = alias
    assert validate_script(data).shots[0].angle.value == canonical


@pytest.mark.parametrize("size, expected", [("1080p", (1920, 1080)), ("720p", (1280, 720)), ("480p", (854, 480)),
                                            ("360p", (640, 360)), ("final", (1920, 1080)), ("preview", (640, 360)),
                                            ("1024x576", (1024, 576)), ({"width": 800, "height": 450}, (800, 450))])
def test_size_shorthand(size, expected):
    data = dict(BASE, size=size)
    script = validate_script(data)
    assert (script.size.width, script.size.height) == expected


def test_hex_colour_and_yaml(tmp_path):
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text("scene: street\ncharacters:\n  - id: x\n    colour: '#FF8000'\nshots:\n  - shot_id: s1\n",
                         encoding="utf-8")
    script = load_script(yaml_file)
    assert script.characters[0].colour == pytest.approx((1.0, 128 / 255, 0.0))


def _issues(data) -> list[str]:
    with pytest.raises(ScriptError) as info:
        validate_script(data) if not isinstance(data, str) else parse_script(data)
    return [str(i) for i in info.value.issues]


def _with(path: str, value):
    """BASE with one value set at a dotted path like 'shots.1.camera.fov'."""
    data = copy.deepcopy(BASE)
    node = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return data


# (description, data, exact expected issue line)
BAD_SCRIPTS = [
    ("fov too wide", _with("shots.1.camera", {"fov": 190}),
     "shots[1].camera.fov: 190 must be between 1 and 170 (exclusive)"),
    ("unknown field", _with("shots.0.zoomy", 1),
     "shots[0].zoomy: 1 is not a known field of shots[0] (its fields: shot_id, duration, subject, framing, angle, "
     "camera, characters, action, blocking, prompt, negative_prompt, transition, seed, dialogue, sound, audio, pose, look_at, "
     "reference_video)"),
    ("misspelt field", _with("shots.0.camra", "pan"), "shots[0].camra: 'pan' is not a known field of shots[0]; did you "
     "mean 'camera'?"),
    ("negative duration", _with("shots.0.duration", -2),
     "shots[0].duration: -2 must be between 0 and 120 (excluding 0)"),
    ("absurd duration", _with("shots.0.duration", 5000),
     "shots[0].duration: 5000 must be between 0 and 120 (excluding 0)"),
    ("unknown subject", _with("shots.1.subject", "zed"),
     "shots[1].subject: 'zed' is not a character id; known characters: a, b"),
    ("colour out of range", _with("characters.0.colour", [1.5, 0, 0]),
     "characters[0].colour[0]: 1.5 must be between 0 and 1"),
    ("bad hex colour", _with("characters.0.colour", "#12345"),
     "characters[0].colour: '#12345' must be '#RRGGBB', a colour name such as 'brown', 'dark blue' or '深蓝', or "
     "[r, g, b] with floats in 0..1"),
    ("odd width", _with("size", "641x360"), "size.width: 641 must be even (H.264 4:2:0 video needs even sizes)"),
    ("absurd size", _with("size", {"width": 100000, "height": 360}), "size.width: 100000 must be between 64 and 7680"),
    ("unknown framing", _with("shots.0.framing", "mega"), None),
    ("static that moves", _with("shots.0.camera", {"type": "static", "motion": [0, 0, -1]}),
     "shots[0].camera: {'type': 'static', 'motion': [0, 0, -1]} type 'static' contradicts non-zero motion "
     "(a static camera does not move)"),
    ("pan without pan", _with("shots.0.camera", {"type": "pan", "rotate": [0, 10, 0]}),
     "shots[0].camera: {'type': 'pan', 'rotate': [0, 10, 0]} type 'pan' needs a non-zero rotate[0] (pan)"),
    ("direction contradicts amount",
     _with("shots.0.camera", {"type": "pan", "direction": "left", "rotate": [20, 0, 0]}), None),
    ("cut with duration", _with("shots.1.transition", {"type": "cut", "duration": 1}),
     "shots[1].transition: {'type': 'cut', 'duration': 1} duration 1 contradicts type 'cut' (a cut takes no time)"),
    ("bad id", _with("characters.0.id", "has space"),
     "characters[0].id: 'has space' must start with a letter or digit and use only letters, digits, '_' and '-' "
     "(max 64)"),
    ("shake negative", _with("shots.0.camera", {"type": "handheld", "shake": -1}),
     "shots[0].camera.shake: -1 must be between 0 and 10"),
    ("fps zero", _with("fps", 0), "fps: 0 must be between 1 and 120"),
    ("wrong type", _with("shots.0.duration", "long"), "shots[0].duration: 'long' must be seconds as a number or as "
     "text such as 3, 2.5, '3s', '2.5 s', '1m30s', '1:30', '500ms', '3秒'"),
    ("number as text", _with("fps", "24"), "fps: '24' must be a number"),
    ("true as a number", _with("characters.0.colour", [True, 0, 0]), "characters[0].colour[0]: True must be a number, "
     "not true or false"),
]


@pytest.mark.parametrize("name, data, expected", BAD_SCRIPTS, ids=[b[0] for b in BAD_SCRIPTS])
def test_bad_scripts_name_path_value_and_rule(name, data, expected):
    issues = _issues(data)
    if expected is None:
        assert len(issues) == 1, issues
    else:
        assert expected in issues, issues


def test_duplicates_and_every_problem_reported_at_once():
    data = copy.deepcopy(BASE)
    data["characters"].append({"id": "a"})
    data["shots"].append({"shot_id": "s01", "subject": "nobody", "camera": {"fov": 0.5}})
    data["shots"][0]["blocking"] = [{"character": "ghost", "to": [1, 1]}]
    issues = _issues(data)
    assert "characters[2].id: 'a' is a duplicate: character ids must be unique" in issues
    assert "shots[2].shot_id: 's01' is a duplicate: shot ids must be unique" in issues
    assert any(i.startswith("shots[2].subject: 'nobody'") for i in issues)
    assert any(i.startswith("shots[0].blocking[0].character: 'ghost'") for i in issues)
    assert "shots[2].camera.fov: 0.5 must be between 1 and 170 (exclusive)" in issues
    assert len(issues) == 5


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e309"])
def test_non_finite_numbers_rejected_with_path(literal):
    text = MINIMAL.replace('"framing": "medium_shot"', f'"framing": "medium_shot", "duration": {literal}')
    issues = _issues(text)
    assert issues == [f"shots[0].duration: '{literal}' is not a finite number "
                      "(NaN, Infinity and overflowing numbers are not allowed)"]


def test_yaml_nan_rejected(tmp_path):
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text("shots:\n  - shot_id: s1\n    duration: .nan\n", encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        load_script(yaml_file)
    assert str(info.value.issues[0]).startswith("shots[0].duration: nan is not a finite number")


def test_depth_and_size_caps(tmp_path):
    deep = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    issues = _issues('{"shots": ' + deep + "}")
    assert "nests deeper than" in issues[0]
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_SCRIPT_BYTES + 1), encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        load_script(big)
    assert "byte limit" in str(info.value)


def test_not_json_and_not_object():
    assert "is not valid JSON" in _issues("{oops")[0]
    assert _issues("[1, 2]") == ["(script): 'a list' must be an object with at least a 'shots' list"]


def test_missing_file_is_a_script_error(tmp_path):
    with pytest.raises(ScriptError) as info:
        load_script(tmp_path / "none.json")
    assert "does not exist" in str(info.value)


def test_script_is_frozen():
    script = parse_script(MINIMAL)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        script.title = "changed"  # type: ignore[misc]


def test_json_schema_lists_fields_and_aliases():
    from daotai.script.jsonschema import script_json_schema

    schema = script_json_schema()
    assert schema["$defs"]["Shot"]["additionalProperties"] is False
    assert "中景" in schema["$defs"]["Framing"]["description"]
    assert "fov" in schema["$defs"]["CameraSpec"]["properties"]
    json.dumps(schema)


@pytest.mark.parametrize("start, end, ok", [(1, 1, False), (1, 0.5, False), (1, 1.04, True)])
def test_a_walk_must_end_after_it_starts(start, end, ok):
    data = {"characters": [{"id": "a"}], "shots": [{"shot_id": "s", "duration": 3, "blocking": [
        {"character": "a", "to": [1, 0], "start": start, "end": end}]}]}
    if ok:
        validate_script(data)
        return
    with pytest.raises(ScriptError, match=r"shots\[0\]\.blocking\[0\].*must be later than start"):
        validate_script(data)


def test_a_script_over_two_mebibytes_is_refused_unread(tmp_path):
    # The limit is a number users read in the docs; tests that build inputs from the constant
    # itself would pass whatever it became.
    big = tmp_path / "big.json"
    big.write_text('{"shots": [{"shot_id": "s"}], "notes": "' + "x" * (2 * 1024 * 1024) + '"}', encoding="utf-8")
    with pytest.raises(ScriptError, match="byte limit"):
        load_script(big)
