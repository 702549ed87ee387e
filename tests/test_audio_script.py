"""Sound in the script and the plan: soundtrack, dialogue, effects, shot levels; aliases, errors, plan.json."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from daotai.errors import ScriptError
from daotai.plan.planner import plan_from_json, plan_script, plan_to_json
from daotai.plan.stable import script_hash
from daotai.script.jsonschema import script_json_schema
from daotai.script.load import check_reference_files, load_script, validate_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

BASE = {
    "scene": "office",
    "characters": [{"id": "a"}, {"id": "b"}],
    "shots": [{"shot_id": "s01", "subject": "a"}, {"shot_id": "s02", "subject": "b", "duration": 2}],
}


def issues_of(data) -> dict[str, str]:
    with pytest.raises(ScriptError) as caught:
        validate_script(data)
    return {issue.path: issue.rule for issue in caught.value.issues}


def test_sound_fields_validate_and_reach_the_plan():
    data = copy.deepcopy(BASE)
    data["soundtrack"] = {"path": "music/theme.mp3", "offset": -1.5, "gain_db": -6}
    data["shots"][0]["dialogue"] = [{"character": "a", "line": "Morning.", "language": "en"}]
    data["shots"][0]["sound"] = "rain on a tin roof"
    data["shots"][1]["audio"] = {"mute": True, "gain_db": -3}
    script = validate_script(data)
    assert script.soundtrack.path == "music/theme.mp3" and script.soundtrack.offset == -1.5
    plan = plan_script(script)
    assert plan.soundtrack.offset_s == -1.5 and plan.soundtrack.gain_db == -6
    assert plan.shots[0].sound.dialogue[0].line == "Morning." and plan.shots[0].sound.sound == "rain on a tin roof"
    assert plan.shots[1].sound.mute and plan.shots[1].sound.gain_db == -3
    assert plan.has_sound
    text = plan_to_json(plan)
    assert plan_to_json(plan_from_json(text)) == text


def test_chinese_keys_and_string_shorthand():
    data = copy.deepcopy(BASE)
    data["配乐"] = "theme.wav"
    data["shots"][0]["对白"] = [{"character": "a", "line": "早上好", "language": "zh-CN"}]
    data["shots"][1]["音效"] = "雨声"
    script = validate_script(data)
    assert script.soundtrack.path == "theme.wav" and script.soundtrack.gain_db == 0
    assert script.shots[0].dialogue[0].line == "早上好" and script.shots[1].sound == "雨声"


def test_errors_name_field_value_and_rule():
    data = copy.deepcopy(BASE)
    data["soundtrack"] = {"path": "notes.txt", "offset": 99999, "gain_db": 40}
    data["shots"][0]["dialogue"] = [{"character": "nobody", "line": ""},
                                    {"character": "a", "line": "x", "language": "english!"}]
    data["shots"][1]["characters"] = ["b"]
    data["shots"][1]["dialogue"] = [{"character": "a", "line": "off screen"}]
    data["shots"][1]["audio"] = {"mute": "maybe", "volume": 3}
    found = issues_of(data)
    assert "audio file" in found["soundtrack.path"]
    assert found["soundtrack.offset"] == "must be between -3600 and 3600"
    assert found["soundtrack.gain_db"] == "must be between -60 and 24"
    assert "is not a character id" in found["shots[0].dialogue[0].character"]
    assert found["shots[0].dialogue[0].line"] == "must not be empty"
    assert "BCP 47" in found["shots[0].dialogue[1].language"]
    assert found["shots[1].dialogue[0].character"] == "must be one of the shot's characters"
    assert found["shots[1].audio.mute"] == "must be true or false"
    assert "not a known field" in found["shots[1].audio.volume"]


def test_upload_soundtrack_is_accepted_and_not_checked_on_disk(tmp_path):
    data = copy.deepcopy(BASE)
    data["soundtrack"] = "upload:aud_0123456789abcdef0123456789abcdef"
    script = validate_script(data)
    assert check_reference_files(script, tmp_path) == []
    data["soundtrack"] = "missing.wav"
    issues = check_reference_files(validate_script(data), tmp_path)
    assert [(i.path, i.value) for i in issues] == [("soundtrack.path", "missing.wav")]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_scripts_without_sound_plan_and_hash_as_before(path):
    """No sound key appears in a sound-less script's dump or plan: plan.json stays byte-identical."""
    script = load_script(path)
    dumped = script.model_dump(mode="json")
    assert "soundtrack" not in dumped and all(not {"dialogue", "sound", "audio"} & set(s) for s in dumped["shots"])
    plan = plan_script(script)
    text = plan_to_json(plan)
    assert '"soundtrack"' not in text and '"sound"' not in text
    assert not plan.has_sound
    assert plan.script_hash == script_hash(script)


def test_json_schema_lists_sound_fields_and_aliases():
    schema = script_json_schema()
    assert {"soundtrack", "配乐"} <= set(schema["properties"])
    shot = schema["$defs"]["Shot"]["properties"]
    assert {"dialogue", "对白", "sound", "音效", "audio"} <= set(shot)
    assert json.dumps(schema)  # serialisable
