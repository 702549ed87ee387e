"""The field types every part of the script is built from: numbers, seconds, ids, colours and words.

Each type reads the shorthand people write (``"2.5 s"``, ``"#3366ff"``, ``"推"``, aliases of a
vocabulary word) and states its bounds in the JSON Schema; they are kept apart from the script's
models so that the camera, sound and footage parts and the script itself share one definition.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Mapping

from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

from daotai.script import spellings, vocab
from daotai.script.vocab import Angle, Easing, Framing, SetKit, SetPieceKind, TimeOfDay, TransitionKind

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$"


class Model(BaseModel):
    """Base of every script model: frozen, unknown fields forbidden."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _alias_validator(table: Mapping[str, str], enum: type, what: str):
    def convert(value: Any) -> Any:
        if isinstance(value, enum):
            return value
        if not isinstance(value, str):
            raise ValueError(f"must be a string naming a {what}; one of: {vocab.canonical_names(enum)}")
        found = vocab.lookup(table, value)
        if found is None:
            close = spellings.nearest(value, table) if len(value) < 40 else []
            raise ValueError(
                f"is not a known {what}{spellings.did_you_mean(close)} (use one of: {vocab.canonical_names(enum)}, "
                f"or an alias such as {_example_aliases(table, enum)})"
            )
        return found

    return BeforeValidator(convert)


def _example_aliases(table: Mapping[str, str], enum: type) -> str:
    seen = [alias for alias, canonical in table.items() if alias != canonical]
    return ", ".join(seen[:4])


FramingField = Annotated[Framing, _alias_validator(vocab.FRAMING_ALIASES, Framing, "framing (shot size)")]
AngleField = Annotated[Angle, _alias_validator(vocab.ANGLE_ALIASES, Angle, "camera angle")]
EasingField = Annotated[Easing, _alias_validator(vocab.EASING_ALIASES, Easing, "easing")]
TimeOfDayField = Annotated[TimeOfDay, _alias_validator(vocab.TIME_OF_DAY_ALIASES, TimeOfDay, "time of day")]
SetKitField = Annotated[SetKit, _alias_validator(vocab.SET_KIT_ALIASES, SetKit, "set kit")]
TransitionKindField = Annotated[
    TransitionKind, _alias_validator(vocab.TRANSITION_ALIASES, TransitionKind, "transition")
]
DirectionField = Annotated[
    vocab.Direction, _alias_validator(vocab.DIRECTION_ALIASES, vocab.Direction, "direction")
]
SetPieceKindField = Annotated[SetPieceKind, _alias_validator(vocab.SET_PIECE_ALIASES, SetPieceKind, "set piece kind")]
CameraSideField = Annotated[
    vocab.CameraSide, _alias_validator(vocab.CAMERA_SIDE_ALIASES, vocab.CameraSide, "camera side")
]
SensorField = Annotated[vocab.Sensor, _alias_validator(vocab.SENSOR_ALIASES, vocab.Sensor, "camera sensor")]
PoseField = Annotated[vocab.Pose, _alias_validator(vocab.POSE_ALIASES, vocab.Pose, "pose")]
PropTypeField = Annotated[vocab.PropType, _alias_validator(vocab.PROP_ALIASES, vocab.PropType, "prop type")]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


# A JSON number (true/false and text refused), finite; bounds come from the field or bounded().
Finite = Annotated[float, BeforeValidator(spellings.read_number), AfterValidator(_finite)]
Whole = Annotated[int, BeforeValidator(spellings.read_whole)]
# Seconds: a number or text such as "3s", "2.5 s", "1m30s" (spellings.read_seconds).
Seconds = Annotated[float, BeforeValidator(spellings.read_seconds), AfterValidator(_finite)]
Identifier = Annotated[str, Field(pattern=ID_PATTERN)]
WORLD_LIMIT_M = 1000.0  # every position lies within this of the origin, per axis


# The bounds go first in these Annotated types: after a validator pydantic writes them into the
# JSON Schema as its own ge/le keys, which JSON Schema validators ignore.
def bounded(**bounds: float) -> Any:
    """A finite JSON number within ``bounds`` (ge / gt / le / lt), checked and stated in the JSON Schema."""
    return Annotated[float, Field(**bounds), BeforeValidator(spellings.read_number), AfterValidator(_finite)]


def bounded_seconds(**bounds: float) -> Any:
    """Seconds within ``bounds``, as a number or text such as '3s' (spellings.read_seconds)."""
    return Annotated[float, Field(**bounds), BeforeValidator(spellings.read_seconds), AfterValidator(_finite)]


def bounded_whole(**bounds: int) -> Any:
    """A whole JSON number within ``bounds``."""
    return Annotated[int, Field(**bounds), BeforeValidator(spellings.read_whole)]


Vec3 = tuple[Finite, Finite, Finite]
Vec2 = tuple[Finite, Finite]
WorldCoordinate = bounded(ge=-WORLD_LIMIT_M, le=WORLD_LIMIT_M)
Ground = tuple[WorldCoordinate, WorldCoordinate]  # [x, z] metres on the ground
Channel = bounded(ge=0.0, le=1.0)


def _parse_colour(value: Any) -> Any:
    """'#RRGGBB' or a colour name ('brown', 'dark blue', '深蓝') → (r, g, b) in 0..1; lists pass through."""
    if isinstance(value, str):
        match = re.fullmatch(r"#?([0-9a-fA-F]{6})", value.strip())
        if match:
            digits = match.group(1)
            return tuple(int(digits[i : i + 2], 16) / 255.0 for i in (0, 2, 4))
        named = spellings.read_colour_name(value)
        if named is None:
            raise ValueError(spellings.colour_name_rule(value))
        return named
    return value


Colour = Annotated[tuple[Channel, Channel, Channel], BeforeValidator(_parse_colour)]


def spelled(model: str, field: str) -> AliasChoices:
    """The field's own name first, then the other names it may be written with (spellings.ALTERNATIVE_KEYS)."""
    return AliasChoices(field, *spellings.alternatives(model, field))


def key_aliases(field: str) -> AliasChoices:
    """The field's own name and the other spellings vocab.KEY_ALIASES allows for it."""
    return AliasChoices(field, *vocab.KEY_ALIASES[field])


def omit_unused(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """Drop ``keys`` left empty (None, "", no items), so scripts that do not use them dump (and hash) as before."""
    return {k: v for k, v in data.items() if not (k in keys and (v is None or (isinstance(v, (str, list, tuple)) and not v)))}


def end_after_start(start: float, end: float | None) -> None:
    """A span of seconds (a walk, a stretch of footage) must hold time: its end, when given, after its start."""
    if end is not None and end <= start:
        raise ValueError(f"end {end:g} must be later than start {start:g}")
