"""The director's script, version 1 (pydantic v2, strict: unknown fields are errors).

Units and axes: metres, degrees, seconds; world y up, ground at y = 0; camera-local axes
x right, y up, -z forward (OpenGL), so ``motion: [0, 0, -1]`` is a 1 m push-in.
See docs/conventions.md for every sign convention.

Shorthand that people write is accepted and normalised here (``"scene": "office"``,
``"size": "1080p"`` or ``"4K"``, ``"camera": "推"`` or ``"slow push in"``, ``"colour": "#3366ff"`` or
``"brown"``, ``"duration": "2.5 s"``, ``"framing": "中景"``, ``color`` for ``colour``; the readers
are in :mod:`daotai.script.spellings`); nothing is silently *fixed*: a value that breaks a rule
is an error, and numbers are JSON numbers (``true`` or ``"24"`` is not a number).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Mapping

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from daotai.script import aspect, spellings, vocab
from daotai.script.vocab import (
    Angle,
    CameraType,
    Easing,
    Framing,
    SetKit,
    SetPieceKind,
    TimeOfDay,
    TransitionKind,
)

SCRIPT_VERSION = 1
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$"
SIZE_PRESETS: Mapping[str, tuple[int, int]] = {
    "preview": (640, 360),
    "draft": (1280, 720),
    "final": (1920, 1080),
    "360p": (640, 360),
    "480p": (854, 480),
    "720p": (1280, 720),
    "1080p": (1920, 1080),
}
MAX_WIDTH, MAX_HEIGHT = 7680, 4320
MIN_SIDE = 64
MAX_SHOT_SECONDS = 120.0
MAX_SHOTS = 500
MAX_CHARACTERS = 64
# Sound: files a soundtrack may be (decoded by FFmpeg through PyAV), and the gain range in dB.
SOUNDTRACK_SUFFIXES = (".wav", ".flac", ".mp3", ".aac", ".m4a", ".ogg", ".opus")
UPLOAD_PREFIX = "upload:"
# User footage a shot may follow (decoded by FFmpeg through PyAV; checked when a render starts).
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm")
# A reference video's stretch is laid over the shot's duration: played at most this much faster or slower.
MAX_FOOTAGE_SPEED = 2.0
MIN_GAIN_DB, MAX_GAIN_DB = -60.0, 24.0
MAX_SOUNDTRACK_OFFSET_S = 3600.0
LANGUAGE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$"

# Colours people get when they do not choose one: distinct, readable on grey ground.
DEFAULT_CHARACTER_COLOURS: tuple[tuple[float, float, float], ...] = (
    (0.20, 0.45, 0.85),
    (0.85, 0.30, 0.25),
    (0.25, 0.70, 0.35),
    (0.90, 0.65, 0.15),
    (0.60, 0.35, 0.80),
    (0.15, 0.70, 0.75),
    (0.85, 0.40, 0.65),
    (0.55, 0.50, 0.40),
)


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
MOTION_LIMIT_M = 100.0  # |motion| per axis over one shot
ROTATE_LIMIT_DEG = 720.0  # |rotate| per axis over one shot
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


def _spelled(model: str, field: str) -> AliasChoices:
    """The field's own name first, then the other names it may be written with (spellings.ALTERNATIVE_KEYS)."""
    return AliasChoices(field, *spellings.alternatives(model, field))


def _even(value: int) -> int:
    if value % 2:
        raise ValueError("must be even (H.264 4:2:0 video needs even sizes)")
    return value


EvenWidth = Annotated[bounded_whole(ge=MIN_SIDE, le=MAX_WIDTH), Field(json_schema_extra={"multipleOf": 2}),
                      AfterValidator(_even)]
EvenHeight = Annotated[bounded_whole(ge=MIN_SIDE, le=MAX_HEIGHT), Field(json_schema_extra={"multipleOf": 2}),
                       AfterValidator(_even)]


class Size(Model):
    """Output frame size in pixels (even numbers: H.264 4:2:0 needs them)."""

    width: EvenWidth
    height: EvenHeight
    letterbox: tuple[EvenWidth, EvenHeight] | None = Field(
        default=None, description="[width, height] of the frame the assembled sequence is delivered in, the "
        "picture (width x height) centred in it between black bars; None: delivered as the picture is",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # left out when unused, so scripts without bars dump (and hash) as before
        return _omit_unused(handler(self), ("letterbox",))

    @model_validator(mode="after")
    def _picture_fits(self) -> "Size":
        if self.letterbox is not None and (self.width > self.letterbox[0] or self.height > self.letterbox[1]):
            raise ValueError(f"letterbox: {list(self.letterbox)} must hold the {self.width}x{self.height} picture "
                             "(each side at least the picture's)")
        return self


DEFAULT_SIZE = (1280, 720)


def _parse_size(value: Any) -> Any:
    """'1080p', '4K', 'UHD', '1920x1080' or [w, h] → {width, height} (spellings.read_size); an aspect
    ratio after a size or alone ('1080p 2.39:1', '9:16') crops it to that shape (daotai.script.aspect)."""
    if isinstance(value, str):
        text, fit = aspect.split_fit(value)
        base, ratio_text = aspect.split_ratio(text)
        if ratio_text is not None:
            named = spellings.read_size(base, SIZE_PRESETS) if base else {"width": DEFAULT_SIZE[0],
                                                                           "height": DEFAULT_SIZE[1]}
            shape = aspect.picture_in_frame if fit == "letterbox" else aspect.frame_for_ratio
            width, height = shape(named["width"], named["height"], aspect.read_ratio(ratio_text))
            if min(width, height) < MIN_SIDE:
                raise ValueError(f"{value!r} gives {width}x{height}: a side under {MIN_SIDE} px; name a larger size "
                                 f"before the ratio ('1080p {ratio_text}')")
            if fit == "letterbox":  # the named frame as it stands; a portrait picture gets bars at its sides
                return {"width": width, "height": height, "letterbox": (named["width"], named["height"])}
            return {"width": width, "height": height}
        if fit is not None:
            raise ValueError(f"{value!r}: {fit!r} says how an aspect ratio meets the size, and none is given; "
                             f"write one before it ('1080p 2.39:1 {fit}')")
    return spellings.read_size(value, SIZE_PRESETS)


Side = bounded(ge=0.01, le=200.0)  # a set piece's side in metres


class SetPiece(Model):
    """A simple block-out object of the set, standing on the ground."""

    kind: SetPieceKindField = SetPieceKind.box
    name: str = Field(default="", max_length=80)
    position: Annotated[tuple[WorldCoordinate, ...], Field(min_length=2, max_length=3)] = Field(
        default=(0.0, 0.0, -3.0), description="[x, z] or [x, y, z] metres; y is the base"
    )
    size: tuple[Side, Side, Side] = Field(default=(1.0, 1.0, 1.0), description="[width, height, depth] metres")
    colour: Colour = Field(default=(0.6, 0.6, 0.62), validation_alias=_spelled("SetPiece", "colour"))
    yaw: Finite = Field(default=0.0, ge=-360, le=360, description="degrees about +y")


class Prop(Model):
    """A piece of furniture or a prop the script places itself (drawn as a proxy, seen in the depth)."""

    type: PropTypeField = Field(description="table, desk, counter, bar_counter, chair, stool, sofa, bench, bed, door, "
                                "window, lamp or car (桌子, 椅子, 沙发, 床, 门, 窗, 灯, 柜台 …)")
    position: Ground = Field(description="[x, z] metres on the ground: the prop's centre")
    facing: Finite = Field(default=0.0, ge=-360, le=360, description="degrees about +y; 0: its front faces +z")


class Scene(Model):
    """Where the shots happen."""

    name: str = Field(default="set", min_length=1, max_length=120)
    description: str = Field(default="", max_length=4000)
    time_of_day: TimeOfDayField = Field(default=TimeOfDay.day, validation_alias=_spelled("Scene", "time_of_day"))
    palette: tuple[Colour, ...] = Field(default=(), max_length=16)
    set: SetKitField | None = Field(
        default=None, validation_alias=_spelled("Scene", "set"),
        description="the dressed set built all round the action (alias: kit); None = chosen from the scene's "
                    "name, then its description",
    )
    set_pieces: tuple[SetPiece, ...] | None = Field(
        default=None,
        max_length=200,
        description="None = a few pieces chosen from the scene name; [] = an empty set",
    )
    props: tuple[Prop, ...] | None = Field(
        default=None,
        max_length=64,
        description="furniture and props where the script puts them; None = the ones the scene's and the "
        "actions' words name, placed where the sentence puts them ('a table between them'); [] = none",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # only None is left out ([] says "no props", which words must not fill): scripts without it hash as before
        data = handler(self)
        return data if data.get("props") is not None else {k: v for k, v in data.items() if k != "props"}

    @model_validator(mode="after")
    def _one_set(self) -> "Scene":
        if self.set is not None and self.set_pieces is not None:
            raise ValueError(f"set {self.set.value!r} contradicts set_pieces (the script's own pieces replace "
                             "any kit: give one of them)")
        return self


def _parse_scene(value: Any) -> Any:
    if isinstance(value, str):
        return {"name": value}
    return value


class Character(Model):
    """A character, always drawn the same way in every shot."""

    id: Identifier
    name: str = Field(default="", max_length=80, description="display name; defaults to the id")
    appearance: str = Field(default="", max_length=2000, validation_alias=_spelled("Character", "appearance"))
    colour: Colour | None = Field(
        default=None, validation_alias=_spelled("Character", "colour"),
        description="[r,g,b] in 0..1, '#RRGGBB' or a colour name; default from a palette",
    )
    height: Finite = Field(default=1.75, ge=0.3, le=3.0, description="metres")
    position: Ground | None = Field(default=None, description="[x, z] metres on the ground; default: spaced along x")
    facing: Finite = Field(default=0.0, ge=-360, le=360, description="degrees about +y; 0 faces +z")
    reference_images: tuple[Annotated[str, Field(min_length=1, max_length=1024)], ...] = Field(
        default=(), max_length=8
    )
    voice: str | None = Field(
        default=None, min_length=1, max_length=1024,
        description="a recording of the character's voice (wav, flac, mp3, m4a; relative to the script): "
                    "MiniMax-H3 speaks the character's lines in it",
    )
    seed: bounded_whole(ge=0, le=2**32 - 1) | None = None


Motion = bounded(ge=-MOTION_LIMIT_M, le=MOTION_LIMIT_M)
Rotation = bounded(ge=-ROTATE_LIMIT_DEG, le=ROTATE_LIMIT_DEG)


class CameraSpec(Model):
    """A shot's camera: a type shorthand plus explicit fields that override its defaults.

    motion: [x, y, z] metres over the shot in the start camera's axes (x right, y up, -z forward).
    rotate: [pan, tilt, roll] degrees over the shot (+pan view right, +tilt up, +roll clockwise
    as seen from behind the camera). orbit: degrees around the subject (+ = camera moves right).
    fov: vertical field of view in degrees; fov_end: at the end of the shot (zoom).
    shake: handheld jitter amplitude in degrees.
    """

    type: CameraType = Field(default=CameraType.static, validation_alias=_spelled("CameraSpec", "type"))
    motion: tuple[Motion, Motion, Motion] | None = None
    rotate: tuple[Rotation, Rotation, Rotation] | None = None
    orbit: bounded(ge=-ROTATE_LIMIT_DEG, le=ROTATE_LIMIT_DEG) | None = None
    fov: Finite = Field(default=60.0, gt=1, lt=170)
    fov_end: bounded(gt=1, lt=170) | None = None
    easing: EasingField = Easing.ease_in_out
    shake: bounded(ge=0, le=10) | None = None
    direction: DirectionField | None = Field(
        default=None, description="left/right/up/down/in/out: which way the type's default move goes"
    )
    # Where the camera stands and what it looks at, the way crews say it (all optional; the
    # framing and angle place it otherwise). Left out of the dump when unset, so scripts that
    # do not use them hash as before.
    side: CameraSideField | bounded(ge=-360, le=360) | None = Field(
        default=None,
        description="where the camera stands around the subject, seen from the subject: front, left, right, "
        "back, or degrees from its front (+ toward the subject's left)",
    )
    distance_m: bounded(gt=0, le=WORLD_LIMIT_M) | None = Field(
        default=None, description="metres on the ground from the subject to the camera; default: the framing's"
    )
    height_m: bounded(ge=0.01, le=WORLD_LIMIT_M) | None = Field(
        default=None, description="lens height above the ground, metres; default: the angle's"
    )
    position: tuple[WorldCoordinate, WorldCoordinate, WorldCoordinate] | None = Field(
        default=None, description="[x, y, z] world metres of the lens (instead of side, distance_m and height_m)"
    )
    focal_length_mm: bounded(ge=4, le=2000) | None = Field(
        default=None, description="lens focal length in mm on `sensor` (instead of fov)"
    )
    sensor: SensorField | None = Field(
        default=None, description="the sensor a focal length is read on (its width): super35 (default), "
        "full_frame, aps_c, micro_four_thirds, super16, large_format",
    )
    aim: Annotated[str, Field(pattern=ID_PATTERN)] | tuple[WorldCoordinate, WorldCoordinate, WorldCoordinate] | None = Field(
        default=None, description="what the lens looks at: 'subject' (default), a character id, or [x, y, z] world metres"
    )
    follow: Annotated[bool, Field(strict=True)] | None = Field(
        default=None, description="true: the lens turns to keep the moving subject in frame (a pan that follows, 摇跟)"
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_unused(handler(self), CAMERA_PLACE_FIELDS)

    @model_validator(mode="before")
    @classmethod
    def _read_move(cls, value: Any) -> Any:
        """A move name or phrase ('push_in', '推', 'slow push in', 'pan left 20°') → its type and fields.

        The fields a name or phrase implies are defaults: explicit fields of the camera win.
        """
        if isinstance(value, str):
            return spellings.read_camera(value)
        if not isinstance(value, dict):
            return value
        key = next((k for k in ("type", *spellings.alternatives("CameraSpec", "type")) if k in value), None)
        if key is None and value.get("follow") is True:
            return {**value, "type": CameraType.pan}  # a camera told to follow with a turn is a pan (摇跟)
        if key is None or isinstance(value[key], CameraType):
            return value
        raw_type = value[key]
        if not isinstance(raw_type, str):
            raise ValueError(f"{key} {raw_type!r} must be a camera move name")
        try:
            fields = spellings.read_camera(raw_type)
        except ValueError as exc:
            raise ValueError(f"{key} {raw_type!r} {exc}") from None
        canonical = fields.pop("type")
        return {**fields, **value, key: canonical}

    @model_validator(mode="after")
    def _consistent(self) -> "CameraSpec":
        problems = camera_contradictions(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


CAMERA_PLACE_FIELDS = ("side", "distance_m", "height_m", "position", "focal_length_mm", "sensor", "aim", "follow")


def _place_contradictions(cam: CameraSpec) -> list[str]:
    """Place and lens fields that say the same thing twice."""
    problems: list[str] = []
    if cam.position is not None:
        both = [name for name in ("side", "distance_m", "height_m") if getattr(cam, name) is not None]
        if both:
            problems.append(f"position contradicts {', '.join(both)} (give an absolute position or a place "
                            "around the subject, not both)")
    if cam.focal_length_mm is not None and "fov" in cam.model_fields_set:
        problems.append("focal_length_mm contradicts fov (give the lens one way)")
    if cam.sensor is not None and cam.focal_length_mm is None:
        problems.append("sensor contradicts a lens given as fov (a sensor only reads focal_length_mm)")
    if cam.follow and cam.type in (CameraType.orbit, CameraType.follow, CameraType.steadicam):
        problems.append(f"follow contradicts type '{cam.type.value}' (it moves the camera itself; follow turns it)")
    if cam.follow and cam.rotate is not None and any(cam.rotate):
        problems.append("follow contradicts rotate (the moving subject sets how far the camera turns)")
    if cam.follow and cam.type == CameraType.static:
        problems.append("follow contradicts type 'static' (a camera that turns with the subject is a pan)")
    return problems


def camera_contradictions(cam: CameraSpec) -> list[str]:
    """Rules a camera's explicit fields must keep with its type (empty list = consistent)."""
    problems: list[str] = _place_contradictions(cam)
    motion = cam.motion or (0.0, 0.0, 0.0)
    rotate = cam.rotate or (0.0, 0.0, 0.0)
    t = cam.type
    if t == CameraType.static:
        moving = [
            name
            for name, present in (
                ("motion", any(motion)),
                ("rotate", any(rotate)),
                ("orbit", bool(cam.orbit)),
                ("fov_end", cam.fov_end is not None and cam.fov_end != cam.fov),
                ("shake", bool(cam.shake)),
            )
            if present
        ]
        if moving:
            problems.append(f"type 'static' contradicts non-zero {', '.join(moving)} (a static camera does not move)")
    amount = vocab.CAMERA_MOVES[t.value].amount
    # a following pan turns with its subject, so it may name no turn of its own
    if _explicit_amount(cam, amount) == 0 and not (t == CameraType.pan and cam.follow):
        problems.append(f"type '{t.value}' needs {_amount_rule(amount)}")
    if cam.direction is not None:
        problems.extend(_direction_contradictions(cam))
    return problems


def _amount_rule(amount: vocab.MoveAmount | None) -> str:
    """What a move's defining part must be when the script gives it: 'a non-zero rotate[0] (pan)'."""
    if amount is None:
        return "no amount"
    if amount.field == "motion":
        return f"a non-zero motion[{amount.axis}] ({'xyz'[amount.axis or 0]})"
    if amount.field == "rotate":
        return f"a non-zero rotate[{amount.axis}] ({('pan', 'tilt', 'roll')[amount.axis or 0]})"
    if amount.field == "fov_end":
        return "fov_end different from fov"
    if amount.field == "shake":
        return "shake > 0"
    return f"a non-zero {amount.field}"


def _explicit_amount(cam: CameraSpec, amount: vocab.MoveAmount | None) -> float | None:
    """The size the script gave a move's defining part (``fov_end``: the lens change), or None."""
    if amount is None:
        return None
    given = getattr(cam, amount.field)
    if given is None:
        return None
    if amount.axis is not None:
        return given[amount.axis]
    return given - cam.fov if amount.field == "fov_end" else given


def _direction_contradictions(cam: CameraSpec) -> list[str]:
    """A direction must suit the type and agree with an explicit amount's sign."""
    assert cam.direction is not None
    signs = vocab.DIRECTION_SIGNS.get(cam.type.value)
    direction = cam.direction.value
    if signs is None:
        return [f"direction '{direction}' does not apply to a {cam.type.value} camera"]
    if direction not in signs:
        return [f"direction '{direction}' does not apply to a {cam.type.value}; use {' or '.join(signs)}"]
    explicit = _explicit_amount(cam, vocab.CAMERA_MOVES[cam.type.value].amount)
    if explicit is not None and explicit != 0 and (explicit > 0) != (signs[direction] > 0):
        return [f"direction '{direction}' contradicts the explicit amount {explicit:g} of the {cam.type.value}"]
    return []


def _end_after_start(start: float, end: float | None) -> None:
    """A span of seconds (a walk, a stretch of footage) must hold time: its end, when given, after its start."""
    if end is not None and end <= start:
        raise ValueError(f"end {end:g} must be later than start {start:g}")


class BlockingMove(Model):
    """A character walks to a point on the ground during the shot."""

    character: Identifier
    to: Ground = Field(description="[x, z] metres on the ground")
    start: Seconds = Field(default=0.0, ge=0, description="seconds from the start of the shot")
    end: bounded_seconds(gt=0) | None = Field(default=None, description="seconds; default: end of the shot")
    facing: bounded(ge=-360, le=360) | None = Field(default=None, description="degrees at arrival; default: walk direction")

    @model_validator(mode="after")
    def _order(self) -> "BlockingMove":
        _end_after_start(self.start, self.end)
        return self


class Transition(Model):
    """How this shot joins the previous one: a fade dips to black between them (on the first shot, fades
    in from black); a crossfade blends them and a wipe (wipe_left, wipe_right, wipe_up, wipe_down: the way
    its edge travels) uncovers this shot behind a moving edge, both over the end of the previous shot; the
    film's fade to black at its end is the script's fade_out."""

    type: TransitionKindField = TransitionKind.cut
    duration: bounded_seconds(ge=0, le=10) | None = Field(
        default=None, description="seconds; default 0.5 for every transition but a cut"
    )

    @model_validator(mode="after")
    def _cut_has_no_duration(self) -> "Transition":
        if self.type == TransitionKind.cut and self.duration:
            raise ValueError(f"duration {self.duration:g} contradicts type 'cut' (a cut takes no time)")
        if self.type != TransitionKind.cut and self.duration == 0:
            raise ValueError(f"a {self.type.value} needs a duration > 0")
        return self

    @property
    def seconds(self) -> float:
        """Duration in seconds with the documented defaults applied."""
        if self.type == TransitionKind.cut:
            return 0.0
        return 0.5 if self.duration is None else self.duration


def _parse_transition(value: Any) -> Any:
    if isinstance(value, str):
        return {"type": value}
    return value


def _key_aliases(field: str) -> AliasChoices:
    """The field's own name and the other spellings vocab.KEY_ALIASES allows for it."""
    return AliasChoices(field, *vocab.KEY_ALIASES[field])


def _omit_unused(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """Drop sound keys left empty (None, "", no items), so scripts without sound dump (and hash) as before."""
    return {k: v for k, v in data.items() if not (k in keys and (v is None or (isinstance(v, (str, list, tuple)) and not v)))}


def _check_soundtrack_path(value: str) -> str:
    text = value.strip()
    if text != value or not text:
        raise ValueError("must be a file name without leading or trailing spaces")
    if text.startswith(UPLOAD_PREFIX):
        if not re.fullmatch(ID_PATTERN, text[len(UPLOAD_PREFIX):]):
            raise ValueError("must be 'upload:<id>' with the id POST /v1/uploads returned")
        return value
    suffix = ("." + text.rsplit(".", 1)[-1].lower()) if "." in text.rsplit("/", 1)[-1] else ""
    if suffix not in SOUNDTRACK_SUFFIXES:
        raise ValueError(
            f"must be an audio file ({', '.join(SOUNDTRACK_SUFFIXES)}) or 'upload:<id>'; "
            f"{suffix or 'no suffix'} is not one"
        )
    return value


class Soundtrack(Model):
    """Music (or any sound bed) under the whole sequence.

    ``path``: an audio file relative to the script's folder (WAV, FLAC, MP3, AAC/M4A, Ogg,
    Opus) or ``upload:<id>`` for a file uploaded to the service. ``offset``: where the file's
    first sample plays on the sequence's timeline, in seconds; a negative offset skips that
    much of the file. The soundtrack is cut at the end of the picture.
    """

    path: Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_check_soundtrack_path)]
    offset: Seconds = Field(
        default=0.0, ge=-MAX_SOUNDTRACK_OFFSET_S, le=MAX_SOUNDTRACK_OFFSET_S,
        description="seconds on the sequence's timeline where the file starts; negative skips into the file",
    )
    gain_db: Finite = Field(default=0.0, ge=MIN_GAIN_DB, le=MAX_GAIN_DB, description="level change in dB")


def _parse_soundtrack(value: Any) -> Any:
    if isinstance(value, str):
        return {"path": value}
    return value


def _check_video_path(value: str) -> str:
    text = value.strip()
    if text != value or not text:
        raise ValueError("must be a file name without leading or trailing spaces")
    if text.startswith(UPLOAD_PREFIX):
        if not re.fullmatch(ID_PATTERN, text[len(UPLOAD_PREFIX):]):
            raise ValueError("must be 'upload:<id>' with the id POST /v1/uploads returned")
        return value
    suffix = ("." + text.rsplit(".", 1)[-1].lower()) if "." in text.rsplit("/", 1)[-1] else ""
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(
            f"must be a video file ({', '.join(VIDEO_SUFFIXES)}) or 'upload:<id>'; {suffix or 'no suffix'} is not one"
        )
    return value


class ReferenceVideo(Model):
    """User footage (a phone rehearsal, a rough cut, an old take) as the shot's motion and camera reference.

    ``path``: a video file relative to the script's folder, or ``upload:<id>`` on the service.
    ``start`` and ``end`` (also written ``in`` and ``out``): the stretch of the file, in seconds
    from its start; ``end`` defaults to ``start`` plus the shot's duration. A stretch of another
    length is laid over the shot's duration (played faster or slower, at most 2x either way).
    Backends that follow footage (``h3``, ``wan-vace``) use it instead of the previz render;
    that the file decodes and lasts to ``end`` is checked when a render starts.
    """

    path: Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_check_video_path)]
    start: Seconds = Field(default=0.0, ge=0, le=24 * 3600.0, validation_alias=_spelled("ReferenceVideo", "start"),
                           description="seconds into the file where the shot's reference begins (alias: in)")
    end: bounded_seconds(gt=0, le=24 * 3600.0) | None = Field(
        default=None, validation_alias=_spelled("ReferenceVideo", "end"),
        description="seconds into the file where it ends (alias: out); default: start + the shot's duration")

    @model_validator(mode="after")
    def _order(self) -> "ReferenceVideo":
        _end_after_start(self.start, self.end)
        return self

    def stretch(self, shot_seconds: float) -> tuple[float, float]:
        """(start, end) seconds of the file the shot follows."""
        return self.start, self.end if self.end is not None else self.start + shot_seconds


def _parse_reference_video(value: Any) -> Any:
    if isinstance(value, str):
        return {"path": value}
    return value


class DialogueLine(Model):
    """A line spoken in the shot (voiced by backends that make sound; previz shows none)."""

    character: Identifier = Field(description="character id of the speaker")
    line: str = Field(min_length=1, max_length=2000)
    language: Annotated[str, Field(pattern=LANGUAGE_PATTERN)] | None = Field(
        default=None, description="BCP 47 language tag such as en, zh, zh-CN; default: the script's language"
    )


class ShotAudio(Model):
    """How the shot's own sound enters the sequence mix (the shot file keeps what the backend made)."""

    mute: Annotated[bool, Field(strict=True)] = False
    gain_db: Finite = Field(default=0.0, ge=MIN_GAIN_DB, le=MAX_GAIN_DB, description="level change in dB")


class Shot(Model):
    """One shot: who, how big, from where, how the camera moves, for how long."""

    shot_id: Identifier = Field(validation_alias=_spelled("Shot", "shot_id"))
    duration: Seconds = Field(default=4.0, gt=0, le=MAX_SHOT_SECONDS, description="seconds (3, '3s', '1m30s')")
    subject: Identifier | None = Field(
        default=None, validation_alias=_spelled("Shot", "subject"), description="character id; default: the first character"
    )
    framing: FramingField = Field(default=Framing.medium, validation_alias=_spelled("Shot", "framing"))
    angle: AngleField = Angle.eye_level
    camera: CameraSpec = Field(
        default=CameraSpec(), validation_alias=_spelled("Shot", "camera"),
        description="{type, …} or a move name or phrase such as 'push_in', 'slow push in', 'pan left 20°', '推镜头'",
    )
    characters: tuple[Identifier, ...] | None = Field(
        default=None, description="characters present; default: every character"
    )
    action: str = Field(default="", max_length=4000)
    blocking: tuple[BlockingMove, ...] = Field(default=(), max_length=64)
    prompt: str = Field(default="", max_length=4000, description="extra words for the model prompt")
    negative_prompt: str = Field(default="", max_length=4000)
    transition: Annotated[Transition, BeforeValidator(_parse_transition)] = Transition()
    seed: bounded_whole(ge=0, le=2**32 - 1) | None = None
    dialogue: tuple[DialogueLine, ...] = Field(
        default=(), max_length=64, validation_alias=_key_aliases("dialogue"),
        description="lines spoken in the shot, in order (alias: 对白, 台词)",
    )
    sound: str = Field(
        default="", max_length=2000, validation_alias=_key_aliases("sound"),
        description="ambience and effects in words, e.g. 'rain on a tin roof, distant traffic' (alias: 音效)",
    )
    audio: ShotAudio | None = Field(default=None, description="the shot's level in the sequence mix")
    pose: PoseField | dict[Identifier, PoseField] | None = Field(
        default=None,
        description="what the subject does (stand, walk, run, sit, talk, point, lean, lie, kneel, hold; 跑, 坐, "
        "说话, 指, 靠, 躺, 跪, 拿), or {character id: pose}; default: read from the action's verbs, talk for whoever "
        "speaks; sit, lean, lie, kneel and a thing held carry to later shots until an action changes them",
    )
    look_at: Identifier | tuple[WorldCoordinate, WorldCoordinate, WorldCoordinate] | None = Field(
        default=None, description="where the subject looks: a character id or [x, y, z] world metres "
        "(the head turns, up to 70° either side)",
    )
    reference_video: Annotated[ReferenceVideo | None, BeforeValidator(_parse_reference_video)] = Field(
        default=None, validation_alias=_spelled("Shot", "reference_video"),
        description="footage the shot follows for motion and camera (h3, wan-vace): a video file name or "
                    "{path, start, end} (alias: footage; start/end also in/out)",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_unused(handler(self), ("dialogue", "sound", "audio", "pose", "look_at", "reference_video"))

    @property
    def uses_sound(self) -> bool:
        """Whether the script says anything about this shot's sound."""
        return bool(self.dialogue or self.sound or self.audio is not None)

    @model_validator(mode="after")
    def _footage_speed(self) -> "Shot":
        footage = self.reference_video
        if footage is not None and footage.end is not None:
            seconds = footage.end - footage.start
            if not 1 / MAX_FOOTAGE_SPEED <= seconds / self.duration <= MAX_FOOTAGE_SPEED:
                raise ValueError(
                    f"reference_video runs {footage.start:g}–{footage.end:g} s ({seconds:g} s) for a {self.duration:g} s "
                    f"shot; the stretch is laid over the shot and may play at most {MAX_FOOTAGE_SPEED:g}x faster or "
                    "slower"
                )
        return self

    @model_validator(mode="after")
    def _blocking_within_shot(self) -> "Shot":
        for move in self.blocking:
            end = self.duration if move.end is None else move.end
            if end > self.duration + 1e-9 or move.start >= self.duration:
                raise ValueError(
                    f"blocking of {move.character!r} runs {move.start:g}–{end:g} s, "
                    f"which must lie within the shot's {self.duration:g} s"
                )
        return self


class Script(Model):
    """A director's script: scene, characters and shots (schema version 1)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=True,
        json_schema_extra={"$comment": "daotai director's script v1; axes: x right, y up, -z forward (OpenGL)"},
    )

    version: Whole = Field(default=SCRIPT_VERSION, ge=1, le=1)
    title: str = Field(default="Untitled", max_length=200)
    fps: Finite = Field(default=24.0, ge=1, le=120)
    size: Annotated[Size, BeforeValidator(_parse_size)] = Field(
        default=Size(width=DEFAULT_SIZE[0], height=DEFAULT_SIZE[1]), validation_alias=_spelled("Script", "size"),
        description="{width, height}, [width, height], 'WIDTHxHEIGHT' or a name: " + ", ".join(SIZE_PRESETS)
        + ", 4K/UHD/2160p, 1440p, 8K (alias: resolution); an aspect ratio after it or alone ('1080p 2.39:1', "
        "'9:16', '4:3') crops the frame to that shape: the largest frame of the ratio inside the size "
        "(1280x720 when none is named), upright for a portrait ratio; rendered at that size, not letterboxed, "
        "unless 'letterbox' follows the ratio ('1080p 2.39:1 letterbox', 遮幅): the sequence is then delivered "
        "in the named frame with the picture between black bars",
    )
    seed: Whole = Field(default=0, ge=0, le=2**32 - 1)
    scene: Annotated[Scene, BeforeValidator(_parse_scene)] = Scene()
    characters: tuple[Character, ...] = Field(default=(), max_length=MAX_CHARACTERS)
    shots: tuple[Shot, ...] = Field(min_length=1, max_length=MAX_SHOTS)
    soundtrack: Annotated[Soundtrack | None, BeforeValidator(_parse_soundtrack)] = Field(
        default=None, validation_alias=_key_aliases("soundtrack"),
        description="music under the whole sequence: a file name or {path, offset, gain_db} (alias: 配乐, 音乐)",
    )
    # A shot's transition joins it to the shot before; the film's end has no next shot, so its
    # fade to black is said here. None (or 0): the film ends on its last frame.
    fade_out: bounded_seconds(ge=0, le=10) | None = Field(
        default=None, description="seconds over which the film fades to black and silence at its end; "
        "default: no fade (it ends on the last shot's last frame)",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_unused(handler(self), ("soundtrack", "fade_out"))

    def character(self, char_id: str) -> Character:
        """The character with this id (the script is validated, so it exists)."""
        for character in self.characters:
            if character.id == char_id:
                return character
        raise KeyError(char_id)
