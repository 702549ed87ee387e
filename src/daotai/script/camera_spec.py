"""A shot's camera: its move, place and lens, and the rules its fields must keep with each other.

The largest single part of the script and the only one with rules across its own fields
(a static camera does not move, a direction must suit the move), so it has a module of its own.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from daotai.script import spellings, vocab
from daotai.script.fields import (
    ID_PATTERN,
    WORLD_LIMIT_M,
    CameraSideField,
    DirectionField,
    EasingField,
    Finite,
    Model,
    SensorField,
    WorldCoordinate,
    bounded,
    omit_unused,
    spelled,
)
from daotai.script.vocab import CameraType, Easing

MOTION_LIMIT_M = 100.0  # |motion| per axis over one shot
ROTATE_LIMIT_DEG = 720.0  # |rotate| per axis over one shot


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

    type: CameraType = Field(default=CameraType.static, validation_alias=spelled("CameraSpec", "type"))
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
        return omit_unused(handler(self), CAMERA_PLACE_FIELDS)

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
