"""vocab.CAMERA_MOVES is the one place each camera move's facts live: schema, phrases, planner,
prompts and the contact sheet read its rows, so each row's facts show up in all of them."""

from __future__ import annotations

import pytest

from daotai.deliver.contact_sheet import move_words
from daotai.errors import ScriptError
from daotai.plan.planner import plan_script
from daotai.script import spellings, vocab
from daotai.script.load import validate_script

MOVES = list(vocab.CAMERA_MOVES.values())


def _shot(camera) -> dict:
    return {"fps": 24, "size": [160, 96], "characters": [{"id": "lin"}],
            "shots": [{"shot_id": "a", "duration": 2, "subject": "lin", "camera": camera}]}


def _planned(camera):
    return plan_script(validate_script(_shot(camera))).shots[0]


def test_every_camera_type_has_one_row_in_the_types_order():
    assert list(vocab.CAMERA_MOVES) == [t.value for t in vocab.CameraType]
    assert all(key == row.type for key, row in vocab.CAMERA_MOVES.items())


def test_signs_and_amount_fields_are_read_from_the_rows():
    assert vocab.DIRECTION_SIGNS == {row.type: row.signs for row in MOVES if row.signs}
    phrase_amounts = {row.type for row in MOVES if row.amount is not None and row.amount.unit is not None}
    assert set(spellings._AMOUNT_FIELD) == phrase_amounts
    for row in MOVES:
        for spelling, preset in row.aliases.items():
            assert vocab.CAMERA_ALIASES[vocab.normalise_word(spelling)] == (row.type, preset)
            assert preset.get("direction", "") in ("", *row.signs), spelling  # an alias's direction suits its move


@pytest.mark.parametrize("row", [m for m in MOVES if m.signs], ids=lambda m: m.type)
def test_each_direction_of_a_row_reaches_plan_prompt_and_contact_sheet(row):
    for direction, sign in row.signs.items():
        shot = _planned({"type": row.type, "direction": direction})
        words = move_words(shot)
        assert words == row.label.format(way=row.way(sign), amount=shot.move.orbit, fov=shot.move.fov,
                                         fov_end=shot.move.fov_end, shake=shot.move.shake)
        # the prompt words the row gives its amount's sense (a dolly zoom's lens change is its own)
        verb = row.prompt[1 if sign > 0 else 0].split("{speed}")[-1].split("{")[0].removeprefix("the camera")
        assert verb.strip() in shot.prompt, (row.type, direction, shot.prompt)


@pytest.mark.parametrize("row", [m for m in MOVES if m.amount is not None], ids=lambda m: m.type)
def test_a_zero_amount_is_refused_by_the_rows_amount_field(row):
    field, axis = row.amount.field, row.amount.axis
    camera = {"type": row.type, field: [0, 0, 0] if axis is not None else (60 if field == "fov_end" else 0)}
    with pytest.raises(ScriptError, match=f"type '{row.type}' needs "):
        validate_script(_shot(camera))


def test_a_moves_own_phrase_reaches_its_prompt():
    for row in MOVES:
        if row.lead:  # the prompt's sentence starts with it, capitalised
            assert row.lead.lower() in _planned({"type": row.type}).prompt.lower()


@pytest.mark.parametrize("row", MOVES, ids=lambda row: row.type)
def test_a_move_that_holds_its_subject_never_lands_on_a_framing_as_a_push_does(row):
    """The rows say which moves hold the subject's size or go where it goes; the headroom rule reads them."""
    from daotai.plan.headroom import pushes_in

    forward = pushes_in(row.type, (0.0, 0.0, -1.0), (0.0, 0.0, 0.0), 0.0, 40.0, 40.0)
    assert forward is not row.holds_subject
    assert {r.type for r in MOVES if r.holds_subject} == {"dolly_zoom", "follow", "steadicam"}
