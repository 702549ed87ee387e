"""The Plan: everything a backend needs to render a script, exact and serialisable.

A plan is the single source of truth for frame counts, sizes, seeds, prompts and the
per-frame camera (4x4 ``cam_to_world`` row-major, vertical ``fov`` degrees, pixel
intrinsics ``K``; axes per docs/conventions.md). Previz renders it, control signals are
made from it and camera QC checks against it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

PLAN_VERSION = 1


class PlanModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CameraFrame(PlanModel):
    cam_to_world: tuple[float, ...] = Field(description="4x4 row-major, camera-local x right, y up, -z forward")
    fov: float = Field(description="vertical field of view, degrees")
    K: tuple[float, ...] = Field(description="3x3 row-major intrinsics in pixels (OpenCV image axes)")


class CharacterFrame(PlanModel):
    id: str
    position: tuple[float, float] = Field(description="[x, z] metres on the ground")
    facing: float = Field(description="degrees about +y; 0 faces +z")
    walk_phase: float = Field(description="radians of the walk cycle; 0 when standing")
    walking: bool
    pose: str | None = Field(default=None, description="run, sit, talk, point, lean, lie, kneel or hold (standing "
                             "with something in hand); None: stand, or walk when walking")
    pose_phase: float = Field(default=0.0, description="radians of a talking figure's gesture cycle")
    head_turn: float = Field(default=0.0, description="degrees the head turns from the body's facing, + to its left")
    pose_weight: float = Field(default=1.0, description="how far into its pose from standing: 0..1 (sitting down, "
                               "getting up, settling after a walk)")
    held: str | None = Field(default=None, description="what the right hand holds (cup, phone, book …; "
                             "daotai.script.vocab.HAND_PROPS), whatever the body does; None: nothing")
    pose_dir: float = Field(default=0.0, description="degrees from the facing, + to the figure's left: where a lean "
                            "tilts the body (toward what it leans on), where a lying body's feet point")
    rest_height: float = Field(default=0.0, description="metres: the top of what a lying body lies on (0: the floor)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        unused = {"pose": None, "pose_phase": 0.0, "head_turn": 0.0, "pose_weight": 1.0, "held": None,
                  "pose_dir": 0.0, "rest_height": 0.0}
        return {k: v for k, v in data.items() if not (k in unused and v == unused[k])}


class ResolvedMove(PlanModel):
    """The camera move after type defaults were filled in (what is actually rendered)."""

    type: str
    motion: tuple[float, float, float]
    rotate: tuple[float, float, float]
    orbit: float
    fov: float
    fov_end: float
    easing: str
    shake: float
    follow: bool
    pan_follow: bool = Field(default=False, description="the lens turns to keep the moving subject in frame (摇跟)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return data if data.get("pan_follow") else {k: v for k, v in data.items() if k != "pan_follow"}


class MotionCodeJSON(PlanModel):
    theta_q: int
    phi_q: int
    magnitude: float


class SnapInfo(PlanModel):
    """What a backend would need: recorded, never applied silently."""

    backend: str
    width: int
    height: int
    frames: int
    changed: bool


class TransitionPlan(PlanModel):
    type: str
    duration_s: float
    frames: int


class DialoguePlan(PlanModel):
    character: str
    line: str
    language: str | None = None


class ShotSoundPlan(PlanModel):
    """What the script says about a shot's sound: words for backends that make sound, levels for the mix."""

    dialogue: tuple[DialoguePlan, ...] = ()
    sound: str = ""
    mute: bool = False
    gain_db: float = 0.0


class SoundtrackPlan(PlanModel):
    """Music under the sequence: the file as the script names it (relative to the script's folder, or upload:<id>)."""

    path: str
    offset_s: float = Field(description="where the file's first sample plays on the sequence timeline; < 0 skips into it")
    gain_db: float


def _without_none(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """Drop optional sound keys that are None: plans of scripts without sound serialise as before."""
    return {k: v for k, v in data.items() if not (k in keys and v is None)}


class FootagePlan(PlanModel):
    """User footage the shot follows for motion and camera: a file and the stretch of it laid over the shot."""

    path: str = Field(description="as the script names it (relative to the script's folder, or upload:<id>)")
    start_s: float = Field(description="seconds into the file where the shot's first frame is taken")
    end_s: float = Field(description="seconds into the file where the shot's last frame ends")


class ShotPlan(PlanModel):
    index: int
    shot_id: str
    start_frame: int = Field(description="first frame of this shot in the assembled sequence")
    frames: int
    duration_s: float = Field(description="frames / fps (the requested duration rounded to whole frames)")
    requested_duration_s: float
    seed: int
    subject: str | None
    framing: str
    angle: str
    characters: tuple[str, ...]
    move: ResolvedMove
    motion_code: MotionCodeJSON
    aim_point: tuple[float, float, float]
    subject_distance: float
    transition: TransitionPlan
    action: str
    prompt: str
    negative_prompt: str
    snapping: tuple[SnapInfo, ...]
    warnings: tuple[str, ...]
    cameras: tuple[CameraFrame, ...]
    character_frames: tuple[tuple[CharacterFrame, ...], ...] = Field(description="frame-major")
    sound: ShotSoundPlan | None = Field(default=None, description="present when the script says anything about the shot's sound")
    framed_at: int | None = Field(default=None, description="the frame the named framing holds on when it is not "
                                  "the first: a push-in starts wider and lands on its framing at the last frame")
    reference_video: FootagePlan | None = Field(default=None, description="footage the shot follows (h3, wan-vace)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self), ("sound", "framed_at", "reference_video"))

    @property
    def framing_frame(self) -> int:
        """Index of the frame on which the shot's framing is measured (0 unless a push lands on it)."""
        return self.framed_at or 0


class PlanCharacter(PlanModel):
    id: str
    name: str
    appearance: str
    colour: tuple[float, float, float]
    height: float
    reference_images: tuple[str, ...]
    seed: int
    kind: str = Field(default="person", description="person, or animal (a dog, cat or horse: drawn on four legs)")
    voice: str | None = Field(default=None, description="the character's voice recording, as the script names it")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Defaults are left out, so plans of scripts that do not use these fields stay as they were.
        data = handler(self)
        return {k: v for k, v in data.items()
                if not (k == "kind" and v == "person") and not (k == "voice" and v is None)}


class PlanSetPiece(PlanModel):
    kind: str
    name: str
    position: tuple[float, float, float]
    size: tuple[float, float, float]
    colour: tuple[float, float, float]
    yaw: float
    glow: bool = Field(default=False, description="a practical light: lit at dusk and at night")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return data if data.get("glow") else {k: v for k, v in data.items() if k != "glow"}


class PlanScene(PlanModel):
    name: str
    description: str
    time_of_day: str
    palette: tuple[tuple[float, float, float], ...]
    set_pieces: tuple[PlanSetPiece, ...]
    set: str | None = Field(default=None, description="the dressed set kit the pieces come from; None: the "
                                                        "script's own set_pieces")
    notices: tuple[str, ...] = Field(default=(), description="what the planner decided about the scene "
                                                             "(the kit chosen and how to choose another)")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # left out when unused, so plans of scripts with their own set_pieces stay as they were
        data = handler(self)
        return {k: v for k, v in data.items() if not (k == "set" and v is None) and not (k == "notices" and not v)}


class Plan(PlanModel):
    plan_version: int = PLAN_VERSION
    daotai_version: str
    script_hash: str
    title: str
    fps: float
    fps_fraction: tuple[int, int]
    width: int
    height: int
    seed: int
    scene: PlanScene
    characters: tuple[PlanCharacter, ...]
    shots: tuple[ShotPlan, ...]
    total_frames: int
    total_duration_s: float
    soundtrack: SoundtrackPlan | None = None
    # The film's closing fade to black over the last shot's last ``frames`` (Script.fade_out);
    # None: the film ends on a cut. Unlike a shot's transition it joins to nothing after it.
    fade_out: TransitionPlan | None = None
    # The frame (width, height) the assembled sequence is delivered in, the picture (width x height)
    # centred in it between black bars (daotai.script.aspect.bars); None: delivered as the picture is.
    letterbox: tuple[int, int] | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self), ("soundtrack", "fade_out", "letterbox"))

    @property
    def delivery_size(self) -> tuple[int, int]:
        """(width, height) of the assembled sequence: the letterbox frame, else the picture."""
        return self.letterbox if self.letterbox is not None else (self.width, self.height)

    @property
    def has_sound(self) -> bool:
        """Whether the script asked for any sound (a soundtrack, dialogue, effects or shot levels)."""
        return self.soundtrack is not None or any(s.sound is not None for s in self.shots)

    def shot(self, shot_id: str) -> ShotPlan:
        for shot in self.shots:
            if shot.shot_id == shot_id:
                return shot
        raise KeyError(shot_id)
