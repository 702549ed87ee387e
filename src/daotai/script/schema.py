"""The director's script, version 1 (pydantic v2, strict: unknown fields are errors).

Units and axes: metres, degrees, seconds; world y up, ground at y = 0; camera-local axes
x right, y up, -z forward (OpenGL), so ``motion: [0, 0, -1]`` is a 1 m push-in.
See docs/conventions.md for every sign convention.

Shorthand that people write is accepted and normalised here (``"scene": "office"``,
``"size": "1080p"`` or ``"4K"``, ``"camera": "推"`` or ``"slow push in"``, ``"colour": "#3366ff"`` or
``"brown"``, ``"duration": "2.5 s"``, ``"framing": "中景"``, ``color`` for ``colour``; the readers
are in :mod:`daotai.script.spellings`); nothing is silently *fixed*: a value that breaks a rule
is an error, and numbers are JSON numbers (``true`` or ``"24"`` is not a number).

The models that make up a script are here; the field types they are built from are in
:mod:`daotai.script.fields`, the camera in :mod:`daotai.script.camera_spec`, and the sound and
footage a script refers to in :mod:`daotai.script.sound_and_footage`.
"""

from __future__ import annotations

from typing import Annotated, Any, Mapping

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from daotai.script import aspect, spellings
from daotai.script.camera_spec import CameraSpec
from daotai.script.fields import (
    AngleField,
    Colour,
    Finite,
    FramingField,
    Ground,
    Identifier,
    Model,
    PoseField,
    PropTypeField,
    Seconds,
    SetKitField,
    SetPieceKindField,
    TimeOfDayField,
    TransitionKindField,
    Whole,
    WorldCoordinate,
    bounded,
    bounded_seconds,
    bounded_whole,
    end_after_start,
    key_aliases,
    omit_unused,
    spelled,
)
from daotai.script.sound_and_footage import (
    MAX_FOOTAGE_SPEED,
    DialogueLine,
    ReferenceVideo,
    ShotAudio,
    Soundtrack,
    parse_reference_video,
    parse_soundtrack,
)
from daotai.script.vocab import Angle, Framing, SetPieceKind, TimeOfDay, TransitionKind

SCRIPT_VERSION = 1
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
        return omit_unused(handler(self), ("letterbox",))

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
    colour: Colour = Field(default=(0.6, 0.6, 0.62), validation_alias=spelled("SetPiece", "colour"))
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
    time_of_day: TimeOfDayField = Field(default=TimeOfDay.day, validation_alias=spelled("Scene", "time_of_day"))
    palette: tuple[Colour, ...] = Field(default=(), max_length=16)
    set: SetKitField | None = Field(
        default=None, validation_alias=spelled("Scene", "set"),
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
    appearance: str = Field(default="", max_length=2000, validation_alias=spelled("Character", "appearance"))
    colour: Colour | None = Field(
        default=None, validation_alias=spelled("Character", "colour"),
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


class BlockingMove(Model):
    """A character walks to a point on the ground during the shot."""

    character: Identifier
    to: Ground = Field(description="[x, z] metres on the ground")
    start: Seconds = Field(default=0.0, ge=0, description="seconds from the start of the shot")
    end: bounded_seconds(gt=0) | None = Field(default=None, description="seconds; default: end of the shot")
    facing: bounded(ge=-360, le=360) | None = Field(default=None, description="degrees at arrival; default: walk direction")

    @model_validator(mode="after")
    def _order(self) -> "BlockingMove":
        end_after_start(self.start, self.end)
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


class Shot(Model):
    """One shot: who, how big, from where, how the camera moves, for how long."""

    shot_id: Identifier = Field(validation_alias=spelled("Shot", "shot_id"))
    duration: Seconds = Field(default=4.0, gt=0, le=MAX_SHOT_SECONDS, description="seconds (3, '3s', '1m30s')")
    subject: Identifier | None = Field(
        default=None, validation_alias=spelled("Shot", "subject"), description="character id; default: the first character"
    )
    framing: FramingField = Field(default=Framing.medium, validation_alias=spelled("Shot", "framing"))
    angle: AngleField = Angle.eye_level
    camera: CameraSpec = Field(
        default=CameraSpec(), validation_alias=spelled("Shot", "camera"),
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
        default=(), max_length=64, validation_alias=key_aliases("dialogue"),
        description="lines spoken in the shot, in order (alias: 对白, 台词)",
    )
    sound: str = Field(
        default="", max_length=2000, validation_alias=key_aliases("sound"),
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
    reference_video: Annotated[ReferenceVideo | None, BeforeValidator(parse_reference_video)] = Field(
        default=None, validation_alias=spelled("Shot", "reference_video"),
        description="footage the shot follows for motion and camera (h3, wan-vace): a video file name or "
                    "{path, start, end} (alias: footage; start/end also in/out)",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return omit_unused(handler(self), ("dialogue", "sound", "audio", "pose", "look_at", "reference_video"))

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
        default=Size(width=DEFAULT_SIZE[0], height=DEFAULT_SIZE[1]), validation_alias=spelled("Script", "size"),
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
    soundtrack: Annotated[Soundtrack | None, BeforeValidator(parse_soundtrack)] = Field(
        default=None, validation_alias=key_aliases("soundtrack"),
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
        return omit_unused(handler(self), ("soundtrack", "fade_out"))

    def character(self, char_id: str) -> Character:
        """The character with this id (the script is validated, so it exists)."""
        for character in self.characters:
            if character.id == char_id:
                return character
        raise KeyError(char_id)
