"""Prompt composition quality: consistent characters, film vocabulary, quoted names, budgets."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.draft.drafter import DraftOptions, camera_vocabulary, english_issues, extract_json, system_prompt
from daotai.plan.planner import plan_script
from daotai.plan.prompt import (
    budget_for,
    character_phrase,
    estimate_tokens,
    fit_prompt,
    quote_name,
    quote_names_in,
)
from daotai.script.load import load_script, validate_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _script(shots: list[dict], characters: list[dict] | None = None):
    return validate_script(
        {
            "size": "360p",
            "scene": {"name": "rooftop", "description": "wet concrete, neon signs", "time_of_day": "night"},
            "characters": characters
            if characters is not None
            else [
                {"id": "lin", "name": "Lin", "appearance": "a tall man in a long black coat"},
                {"id": "yu", "name": "小雨", "appearance": "a girl in a yellow raincoat with a red backpack"},
            ],
            "shots": shots,
        }
    )


def test_every_shot_describes_each_character_identically():
    script = load_script(EXAMPLES / "office.json")
    plan = plan_script(script)
    looks = {c.id: character_phrase(c.name or c.id, c.appearance) for c in script.characters}
    for shot in plan.shots:
        for char_id in shot.characters:
            assert looks[char_id] in shot.prompt, (shot.shot_id, looks[char_id])


def test_non_ascii_names_are_always_quoted():
    plan = plan_script(load_script(EXAMPLES / "street_zh.json"))
    for shot in plan.shots:
        for name in ("小雨", "老王", "旺财"):
            bare = re.findall(rf'(?<!"){name}|{name}(?!")', shot.prompt)
            assert not bare, (shot.shot_id, name, shot.prompt)
    assert 'toward "小雨"' in plan.shots[1].prompt
    assert quote_name("Lin") == "Lin" and quote_name("小雨") == '"小雨"'
    assert quote_names_in('小雨 waves at "小雨"', ["小雨", "Lin"]) == '"小雨" waves at "小雨"'


def test_framing_angle_move_and_speed_vocabulary():
    plan = plan_script(
        _script(
            [
                {"shot_id": "a", "duration": 4, "subject": "lin", "framing": "cu", "angle": "low",
                 "camera": {"type": "dolly", "motion": [0, 0, -0.5]}},
                {"shot_id": "b", "duration": 2, "subject": "yu", "framing": "wide", "angle": "birds_eye",
                 "camera": {"type": "dolly", "motion": [0, 0, -4]}, "action": "小雨 runs to the edge"},
                {"shot_id": "c", "duration": 4, "subject": "lin", "camera": {"type": "pan", "rotate": [-80, 10, 0]}},
                {"shot_id": "d", "duration": 3, "subject": "yu", "framing": "ecu", "camera": "static"},
            ]
        )
    )
    a, b, c, d = (s.prompt for s in plan.shots)
    assert a.startswith("Close-up of Lin (a tall man in a long black coat), low angle looking up")
    assert "The camera slowly dollies in toward Lin." in a
    assert b.startswith('Wide shot of "小雨"') and "bird's-eye view" in b
    assert "The camera quickly dollies in toward \"小雨\"." in b and '"小雨" runs to the edge.' in b
    assert "The camera steadily pans left and slowly tilts up." in c
    assert "Static camera, locked-off tripod shot." in d and d.startswith("Extreme close-up")
    for prompt in (a, b, c, d):
        assert "in the rooftop (wet concrete, neon signs) at night" in prompt


def test_budget_keeps_subject_and_camera_and_fits():
    long_action = " ".join(f"then she does thing number {i} slowly and carefully." for i in range(20))
    plan = plan_script(
        _script([{"shot_id": "s", "duration": 4, "subject": "yu", "camera": "push_in", "action": long_action,
                  "prompt": "film grain, anamorphic lens flare"}])
    )
    prompt = plan.shots[0].prompt
    assert estimate_tokens(prompt) > budget_for("ltx").max_tokens
    fitted = fit_prompt(prompt, "ltx")
    assert estimate_tokens(fitted, budget_for("ltx")) <= 128
    assert fitted.startswith('Medium shot of "小雨" (a girl in a yellow raincoat with a red backpack)')
    assert 'The camera slowly dollies in toward "小雨".' in fitted
    assert estimate_tokens(prompt) <= 512 and fit_prompt(prompt, "wan") == prompt  # Wan reads it whole
    short = plan_script(_script([{"shot_id": "s", "subject": "lin"}])).shots[0].prompt
    assert fit_prompt(short, "ltx") == short  # within budget: untouched


def test_budget_lookup_and_token_estimate():
    assert budget_for("ltx").max_tokens == 128 and budget_for("wan").max_tokens == 512
    assert budget_for("wan_vace").max_tokens == 512 and budget_for("unknown").max_tokens == 512
    assert estimate_tokens("a b c d e") == 8  # 5 words × 1.4 → 7, plus the end token
    assert estimate_tokens("小雨") == 3  # one per CJK character, plus the end token


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from("abcdefg xyz.,小雨"), min_size=0, max_size=80), min_size=1, max_size=30),
    st.sampled_from(["wan", "ltx"]),
)
def test_fit_prompt_always_fits(sentences, model):
    text = ". ".join(sentences)
    fitted = fit_prompt(text, model)
    budget = budget_for(model)
    assert estimate_tokens(fitted, budget) <= budget.max_tokens
    assert len(fitted) <= len(text) + 1


def test_system_prompt_names_schema_vocabulary_and_language_rules():
    text = system_prompt(DraftOptions(shots=3, duration_s=12, style="film noir"))
    assert '"$id":"https://daotai.invalid/schema/script-v1.json"' in text
    for word in ("dolly_zoom", "extreme_close_up", "birds_eye", "crossfade", "ENGLISH", "idea's own language"):
        assert word in text
    assert "exactly 3 shots" in text and "about 12 seconds" in text and "film noir" in text
    assert camera_vocabulary() in text


def test_english_rule_allows_names_and_quoted_dialogue_only():
    data = {
        "scene": {"name": "街道"},
        "characters": [{"id": "yu", "name": "小雨", "appearance": "a girl in a raincoat"}],
        "shots": [
            {"shot_id": "a", "action": '小雨 says "早上好" and waves'},
            {"shot_id": "b", "prompt": "雨夜"},
        ],
    }
    paths = [issue.path for issue in english_issues(data)]
    assert paths == ["scene.name", "shots[1].prompt"]


def test_extract_json_ignores_fences_and_chatter():
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure, here it is: {"a": {"b": [1, 2]}} Hope it helps!') == {"a": {"b": [1, 2]}}
