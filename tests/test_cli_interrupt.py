"""A Ctrl-C that a library wrapped in its own error still ends the command as cancelled (exit 130)."""

from __future__ import annotations

import pydantic
import pytest

from daotai.cli import interrupted_inside


class _Interrupted(pydantic.BaseModel):
    value: int = 1

    @pydantic.field_serializer("value")
    def _dump(self, value: int) -> int:
        raise KeyboardInterrupt


def test_a_ctrl_c_wrapped_by_pydantic_serialization_counts_as_an_interrupt():
    with pytest.raises(Exception) as caught:
        _Interrupted().model_dump_json()
    assert not isinstance(caught.value, KeyboardInterrupt)  # pydantic-core wraps it
    assert interrupted_inside(caught.value)


def test_other_errors_are_not_interrupts():
    assert not interrupted_inside(ValueError("KeyboardInterrupt is only a word here"))
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise RuntimeError("while stopping") from inner
    except RuntimeError as outer:
        assert interrupted_inside(outer)
