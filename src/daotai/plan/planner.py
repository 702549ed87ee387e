"""Script → Plan: timing, staging, camera trajectories, seeds and prompts (pure, no torch).

The same script always gives the same plan, byte for byte (see :func:`plan_to_json`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from daotai import __version__, catalog
from daotai.errors import NO_VALUE, Issue, PlanError
from daotai.plan import blocking, headroom, steadicam, viewpoint
from daotai.plan import camera as cam
from daotai.plan import prompt as prompts
from daotai.plan import props as prop_words
from daotai.plan.model import (
    CameraFrame,
    CharacterFrame,
    DialoguePlan,
    FootagePlan,
    MotionCodeJSON,
    Plan,
    PlanCharacter,
    PlanScene,
    PlanSetPiece,
    ResolvedMove,
    ShotPlan,
    ShotSoundPlan,
    SnapInfo,
    SoundtrackPlan,
    TransitionPlan,
)
from daotai.plan.motion_code import encode_motion
from daotai.plan.reading import dialogue_warning
from daotai.plan.sets import choose_kit
from daotai.plan.staging import (
    ANIMAL_FRAMING_SCALE,
    DUTCH_ROLL_DEG,
    FRAMING_RULES,
    FRAMING_SIZE,
    Body,
    CameraPlace,
    PieceSpec,
    Sightline,
    character_kind,
    default_character_positions,
    dress_set,
    fully_hidden,
    hidden_by,
    horizontal_fov_to_vertical,
    inside_figure,
    place_camera,
    place_explicitly,
    size_at,
    stage_camera,
    time_of_day_from_words,
    wardrobe_from_appearance,
    yaw_toward,
)
from daotai.plan.timing import frames_for, snap_for, transition_length, transition_seconds
from daotai.plan.viewpoint import VIEWPOINT_FRAMINGS
from daotai.script.schema import DEFAULT_CHARACTER_COLOURS, BlockingMove, CameraSpec, Character, Script, Shot
from daotai.script.vocab import (
    ACTION_POSE_WORDS,
    CAMERA_MOVES,
    CAMERA_SIDE_DEG,
    LOOK_WORDS,
    OVERLAPPING_TRANSITIONS,
    SENSOR_WIDTH_MM,
    TURN_WORDS,
)

FLOAT_DIGITS = 9  # plan JSON keeps 1e-9 precision: stable text, far below a pixel
STRIDE_M = 0.75  # one walk cycle per 2 strides of a 1.75 m person
ZOOM_IN_RATIO = 0.6
_SHOT_TYPE_WORDS = {"over_the_shoulder": "Over-the-shoulder", "two_shot": "Two-shot,"}
TOO_CLOSE_M = 0.25
# Default amounts that grow with the framing distance, so a move reads on a wide as on a close-up:
# a crane rises at least this share of the distance to the subject, a truck travels at least this share.
CRANE_RISE_PER_M = 0.35
TRUCK_PER_M = 0.25
DEFAULT_SENSOR = "super35"

def fps_fraction(fps: float) -> tuple[int, int]:
    """Exact frame rate as a fraction; 23.976 / 29.97 / 59.94 mean the NTSC x/1.001 rates."""
    for nominal in (24, 30, 48, 60, 120):
        ntsc = nominal * 1000 / 1001
        if abs(fps - ntsc) < 0.005 and abs(fps - nominal) > 0.005:
            return nominal * 1000, 1001
    frac = Fraction(fps).limit_denominator(1001)
    return frac.numerator, frac.denominator


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from a tuple of parts (stable across runs and machines)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")


def script_hash(script: Script) -> str:
    """sha256 of the script's canonical JSON (defaults filled in, keys sorted)."""
    return hashlib.sha256(canonical_json(script.model_dump(mode="json")).encode("utf-8")).hexdigest()


def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the form hashed and compared byte for byte."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _r(value: float) -> float:
    """Round for stable JSON; -0.0 becomes 0.0."""
    rounded = round(float(value), FLOAT_DIGITS)
    return 0.0 if rounded == 0 else rounded


def _rt(values: Any) -> tuple[float, ...]:
    return tuple(_r(v) for v in np.asarray(values, dtype=np.float64).ravel())


def _signed(values: tuple[float, ...], axis: int | None, sign: int) -> tuple[float, ...]:
    """``values`` with component ``axis`` given the sign ``sign`` (its size kept)."""
    return tuple(sign * abs(v) if i == axis else v for i, v in enumerate(values))


def resolve_move(spec: CameraSpec, subject_distance: float, where: str = "camera") -> ResolvedMove:
    """Fill a camera spec's unset fields from its type's defaults (and direction); ``where`` is the
    spec's JSON path, for errors."""
    kind = spec.type.value
    row = CAMERA_MOVES[kind]  # the move's defaults (what it does when the script only names it) and signs
    defaults = dict(row.defaults)
    sign = 1
    if spec.direction is not None:
        sign = row.signs[spec.direction.value]
    motion = spec.motion if spec.motion is not None else defaults.get("motion", (0.0, 0.0, 0.0))
    if spec.motion is None and kind in ("dolly", "dolly_zoom"):
        # A push-in covers a third of the way to the subject: framing changes visibly
        # without the lens passing through anyone.
        motion = (0.0, 0.0, -round(subject_distance / 3.0, 3))
    if spec.motion is None and kind == "crane":
        rise = max(motion[1], round(CRANE_RISE_PER_M * subject_distance, 3))
        motion = (0.0, rise, 0.0)
    if spec.rotate is None and kind == "crane":
        # Tilt by the angle the rise subtends at the subject, so the aim point that starts in the
        # middle of the frame ends there (a fixed 10° lost a medium shot's subject below the frame).
        rise = abs(motion[1])
        tilt = round(math.degrees(math.atan2(rise, max(subject_distance, 0.1))), 3) if rise else 0.0
        defaults = {**defaults, "rotate": (0.0, -tilt if motion[1] >= 0 else tilt, 0.0)}
    if spec.motion is None and kind == "truck":
        motion = (max(motion[0], round(TRUCK_PER_M * subject_distance, 3)), 0.0, 0.0)
    rotate = spec.rotate if spec.rotate is not None else defaults.get("rotate", (0.0, 0.0, 0.0))
    orbit = spec.orbit if spec.orbit is not None else defaults.get("orbit", 0.0)
    amount = row.amount
    if spec.direction is not None and amount is not None and getattr(spec, amount.field) is None:
        # The direction gives the sign of the default amount's defining component; an explicit
        # amount already agrees with it (the schema refuses a contradiction). A zoom's sign
        # picks its ratio below.
        if amount.field == "motion":
            motion = _signed(motion, amount.axis, sign)
        elif amount.field == "rotate":
            rotate = _signed(rotate, amount.axis, sign)
        elif amount.field == "orbit":
            orbit = sign * abs(orbit)
        if kind == "crane" and spec.rotate is None:
            rotate = (0.0, -sign * abs(rotate[1]), 0.0)  # a crane keeps the subject in view
    shake = spec.shake if spec.shake is not None else defaults.get("shake", 0.0)
    fov_end = spec.fov_end
    if fov_end is None and kind == "zoom":
        ratio = ZOOM_IN_RATIO if sign < 0 or spec.direction is None else 1.0 / ZOOM_IN_RATIO
        fov_end = min(spec.fov * ratio, 160.0)
    if fov_end is None and kind == "dolly_zoom":
        end_distance = subject_distance + motion[2]
        if end_distance <= TOO_CLOSE_M:
            raise PlanError.at(f"{where}.motion[2]", motion[2], f"would carry a dolly zoom through the subject "
                               f"({subject_distance:.2f} m away); use a smaller push-in")
        fov_end = cam.dolly_zoom_fov_end(spec.fov, subject_distance, end_distance)
    if fov_end is None:
        fov_end = spec.fov
    return ResolvedMove(
        type=kind,
        motion=tuple(float(v) for v in motion),
        rotate=tuple(float(v) for v in rotate),
        orbit=float(orbit),
        fov=float(spec.fov),
        fov_end=_r(fov_end),
        easing=spec.easing.value,
        shake=float(shake),
        follow=kind in ("follow", "steadicam"),
    )


class _Stage:
    """Where every character stands; carried from one shot to the next (continuity)."""

    def __init__(self, script: Script, spacing: float = 1.2):
        defaults = default_character_positions(len(script.characters), spacing)
        self.position = {
            c.id: tuple(c.position) if c.position is not None else defaults[i] for i, c in enumerate(script.characters)
        }
        self.facing = {c.id: float(c.facing) for c in script.characters}
        self.heights = {c.id: float(c.height) for c in script.characters}
        # "sit", "lean", "lie" or "kneel" while a character holds that pose at the end of the last shot
        # they were in (else None): they keep it until an action, a `pose` or a walk gets them up
        self.posture: dict[str, str | None] = {c.id: None for c in script.characters}
        # what each character holds at the end of their last shot: kept until an action puts it down
        self.held: dict[str, str | None] = {c.id: None for c in script.characters}
        # the prop type a lean or a lying body of the last shot is on (None: nothing, the floor)
        self.on: dict[str, str | None] = {c.id: None for c in script.characters}
        self.seen: set[str] = set()  # characters some shot so far has shown
        # characters whose facing nothing has set yet (no `facing` in the script, no walk so far):
        # two of them in a scene or a shot face each other, as people in a dialogue do
        self.auto_facing = {c.id for c in script.characters if "facing" not in c.model_fields_set}
        if len(script.characters) == 2:
            self.face_each_other((script.characters[0].id, script.characters[1].id))

    def face_each_other(self, pair: tuple[str, ...]) -> None:
        """Turn the two characters of ``pair`` whose facing is still unset toward each other."""
        a, b = pair
        if self.position[a] == self.position[b]:
            return
        for me, other in ((a, b), (b, a)):
            if me in self.auto_facing:
                self.facing[me] = yaw_toward(self.position[me], self.position[other])

    def body(self, char_id: str) -> Body:
        """The character where it stands now."""
        return Body(char_id, self.position[char_id], self.heights[char_id], self.facing[char_id])


def character_colour(character: Character, index: int) -> tuple[float, float, float]:
    """A character's colour: the script's `colour`, else the top its `appearance` names, else the palette's."""
    if character.colour is not None:
        return tuple(character.colour)  # type: ignore[return-value]
    named = wardrobe_from_appearance(character.appearance).top
    return named if named is not None else DEFAULT_CHARACTER_COLOURS[index % len(DEFAULT_CHARACTER_COLOURS)]


def _character_frames(
    shot: Shot, present: tuple[str, ...], stage: _Stage, n_frames: int, fps: float,
    subject: str | None = None, names: dict[str, str] | None = None, where: str = "shots[0]",
    problems: list[Issue] | None = None, notices: list[str] | None = None,
    props: list[prop_words.PlacedProp] | None = None,
) -> list[tuple[CharacterFrame, ...]]:
    """Per-frame position/facing/walk phase/pose of every present character; updates the stage.

    A character seated at the end of their last shot is still seated (continuity) unless this
    shot's action, `pose` or blocking says otherwise; a break the plan had to make (a walk from
    the seat no word gets them up for, a `pose` that changes it with no action saying so) is
    added to ``notices``. Leaning, lying and kneeling carry the same way, and so does a thing held
    (until an action puts it down); ``props``: what a lean goes toward and a lying body lies on."""
    # Shot time of each frame: the last frame shows the end of the shot, as the camera's
    # easing does (t = i / (n - 1)), so a walk that ends with the shot arrives on screen.
    times = np.linspace(0.0, shot.duration, n_frames) if n_frames > 1 else np.zeros(1)  # (n,) seconds
    intent = _carry_postures(read_intent(shot, present, subject, names or {}, where, problems), shot, present,
                             stage, names or {}, where, notices)
    tracks: dict[str, dict[str, np.ndarray]] = {}
    arrivals: dict[str, float] = {}  # when each walker's last walk of the shot ends (s)
    for char_id in present:
        x0, z0 = stage.position[char_id]
        scale = stage.heights[char_id] / 1.75
        track = {
            "x": np.full(n_frames, x0),
            "z": np.full(n_frames, z0),
            "facing": np.full(n_frames, stage.facing[char_id]),
            "phase": np.zeros(n_frames),
            "walking": np.zeros(n_frames, dtype=bool),
            "running": np.zeros(n_frames, dtype=bool),
        }
        turn = intent.turn_to.get(char_id)
        if turn is not None:  # turns on the spot before anything else: toward someone, or half a turn
            target = stage.facing[char_id] + 180.0 if turn == "half" else _facing_toward(stage, char_id, turn)
            turned = _ease_angle(stage.facing[char_id], target, np.clip(times / min(TURN_S, shot.duration / 2), 0, 1))
            track["facing"] = turned
            stage.auto_facing.discard(char_id)
        moves = sorted((m for m in shot.blocking if m.character == char_id), key=lambda m: m.start)
        phase_so_far = 0.0
        for move in moves:
            start, end = move.start, shot.duration if move.end is None else move.end
            first = int(np.searchsorted(times, start))  # frame where this walk begins
            sx, sz = float(track["x"][min(first, n_frames - 1)]), float(track["z"][min(first, n_frames - 1)])
            tx, tz = move.to
            heading = math.degrees(math.atan2(tx - sx, tz - sz)) if (tx, tz) != (sx, sz) else track["facing"][0]
            u = np.clip((times - start) / (end - start), 0.0, 1.0)  # (n,) progress of this walk
            active = times >= start
            track["x"] = np.where(active, sx + (tx - sx) * u, track["x"])
            track["z"] = np.where(active, sz + (tz - sz) * u, track["z"])
            walking_now = (times >= start) & (times < end)
            track["walking"] |= walking_now
            track["facing"] = np.where(walking_now, heading, track["facing"])
            arrived = times >= end
            final_facing = move.facing if move.facing is not None else heading
            track["facing"] = np.where(arrived, final_facing, track["facing"])
            length = math.hypot(tx - sx, tz - sz)
            # a run: asked for, or a pace no walk keeps up with; its stride is longer, and the cycle
            # advances with the ground covered (so the feet do not slide at either pace)
            runs = intent.poses.get(char_id) == "run" or length / (end - start) > RUN_SPEED_MPS * scale
            track["running"] |= walking_now & runs
            stride = (RUN_STRIDE_M if runs else STRIDE_M) * scale
            distance = length * u  # (n,) metres covered on this move
            track["phase"] = np.where(active, phase_so_far + distance / stride * math.pi, track["phase"])
            phase_so_far += length / stride * math.pi
        if moves:
            stage.auto_facing.discard(char_id)  # the walk set where they face
            arrivals[char_id] = max(shot.duration if m.end is None else m.end for m in moves)
        tracks[char_id] = track
        stage.position[char_id] = (float(track["x"][-1]), float(track["z"][-1]))
        stage.facing[char_id] = float(track["facing"][-1])
    ends = {c: (float(tracks[c]["x"][-1]), float(tracks[c]["z"][-1])) for c in present}
    placing = {c: _pose_place(intent.poses.get(c), ends[c], float(tracks[c]["facing"][-1]), intent.on.get(c),
                              props or [], [xz for other, xz in ends.items() if other != c]) for c in present}
    frames = []
    for i in range(n_frames):
        people = []
        for char_id in present:
            track = tracks[char_id]
            walking = bool(track["walking"][i])
            held = intent.poses.get(char_id)
            pose = ("run" if track["running"][i] else None) if walking else (
                held if held in ("sit", "talk", "point", *blocking.BODY_POSES) else None)
            thing = intent.held.get(char_id)
            if pose is None and thing is not None and not walking:
                pose = "hold"  # standing with something in hand
            weight = 1.0
            if pose is not None and not walking:
                weight = _pose_weight(float(times[i]), intent.change.get(char_id), arrivals.get(char_id))
            head = 0.0
            look = intent.look_at.get(char_id)
            if look is not None:
                here = (float(track["x"][i]), float(track["z"][i]))
                there = _ground_point(look, tracks, i, stage)
                if there is not None and math.dist(here, there) > 1e-6:
                    head = _wrap(yaw_toward(here, there) - float(track["facing"][i]))
                    head = max(-HEAD_TURN_MAX_DEG, min(HEAD_TURN_MAX_DEG, head))
            people.append(CharacterFrame(
                id=char_id,
                position=(_r(track["x"][i]), _r(track["z"][i])),
                facing=_r(track["facing"][i]),
                walk_phase=_r(track["phase"][i] if walking else 0.0),
                walking=walking,
                pose=pose,
                pose_phase=_r(2.0 * math.pi * TALK_GESTURE_HZ * times[i]) if pose == "talk" else 0.0,
                head_turn=_r(head),
                pose_weight=_r(weight),
                held=thing,
                pose_dir=placing[char_id][0] if pose in ("lean", "lie") else 0.0,
                rest_height=placing[char_id][1] if pose == "lie" else 0.0,
            ))
        frames.append(tuple(people))
    for person in frames[-1]:
        stage.posture[person.id] = blocking.body_posture(person.pose, person.walking, person.pose_weight)
        stage.held[person.id] = person.held
        stage.on[person.id] = placing[person.id][2] if person.pose in ("lean", "lie") else None
        stage.seen.add(person.id)
    return frames


def _held_pose_sentence(people: tuple[CharacterFrame, ...], shot: Shot, present: tuple[str, ...],
                        subject: str | None, names: dict[str, str], stage: _Stage) -> str:
    """The prompt's words for the leans, lying, kneeling and things in hand at the shot's start that its
    action does not say (kept from an earlier shot, or given by `pose`): a model sees only this shot's words."""
    said = blocking.postures_said(shot.action, present, names, subject)
    in_hand = blocking.holds_said(shot.action, present, names, subject)
    phrases = [prompts.held_pose_words(
        names.get(p.id, p.id), p.pose if p.id not in said else None, stage.on.get(p.id),
        p.held if p.id not in in_hand else None) for p in people]
    return "; ".join(phrase for phrase in phrases if phrase)


def _pose_place(pose: str | None, xz: tuple[float, float], facing: float, on: str | None,
                props: list[prop_words.PlacedProp], others: list[tuple[float, float]]) -> tuple[float, float, str | None]:
    """(pose_dir degrees from the facing, rest height m, the prop type it is on) of a held pose: a lean
    toward the prop it leans on (``on``: the type the words name), a lying body along what it lies on
    (on the floor: across the audience's view, feet away from ``others``); (0, 0, None) otherwise."""
    if pose == "lean":
        target = prop_words.lean_target(xz, on, props)
        if target is None or math.dist(target.xz, xz) < 1e-6:
            return 0.0, 0.0, None
        return _r(_wrap(yaw_toward(xz, target.xz) - facing)), 0.0, target.type
    if pose == "lie":
        height, axis, kind = prop_words.lie_surface(xz, props)
        axis = prop_words.feet_yaw(xz, others) if axis is None else axis
        return _r(_wrap(axis - facing)), _r(height), kind
    return 0.0, 0.0, None


def _carry_postures(intent: Intent, shot: Shot, present: tuple[str, ...], stage: _Stage, names: dict[str, str],
                    where: str, notices: list[str] | None) -> Intent:
    """The shot's poses with each character who sits, leans, lies or kneels kept so unless the shot gets
    them up, and what each holds kept in hand unless the shot puts it down."""
    poses, change, held = dict(intent.poses), dict(intent.change), dict(intent.held)
    walkers = {m.character for m in shot.blocking}
    said: list[str] = []
    for char_id in present:
        if char_id not in intent.held_said and stage.held.get(char_id) is not None:
            held[char_id] = stage.held[char_id]  # still in hand (`pose: hold` holds what they hold)
        elif char_id not in intent.held_said and held.get(char_id) is not None and char_id in stage.seen:
            said.append(f"{names.get(char_id, char_id)} has something in hand at the cut ({where}.pose 'hold') "
                        "with no action saying so: empty-handed at the end of the last shot; name the thing in "
                        "the action ('holds a cup')")
    for char_id in present:
        name = names.get(char_id, char_id)
        before = stage.posture.get(char_id)  # the held pose at the end of their last shot, None: standing
        if before is not None and change.get(char_id) == "out":
            poses[char_id] = before  # getting up starts from the pose they were in
        if char_id in walkers and poses.get(char_id) in blocking.BODY_POSES and change.get(char_id) == "out":
            del poses[char_id], change[char_id]  # gets up and walks: the walk starts from standing
        state = blocking.POSE_PHRASES[before][1]
        if char_id in intent.explicit and before is not None and poses.get(char_id) in ("talk", "point") and \
                char_id not in intent.said:
            said.append(f"{name} stays {state} ({where}.pose {poses[char_id]!r}): the previz draws that gesture "
                        "standing only; write 'stands' in the action to have them up")
            poses[char_id] = before
            change.pop(char_id, None)
            continue
        if char_id in intent.explicit:
            wanted = poses.get(char_id) if poses.get(char_id) in blocking.BODY_POSES else None
            if before != wanted and char_id not in intent.said:
                said.append(f"{name} {blocking.POSE_PHRASES[wanted][0]} at the cut ({where}.pose) with no action "
                            f"saying so: {state} at the end of the last shot")
            continue
        if char_id in intent.said:
            if before is not None and before == poses.get(char_id) and change.get(char_id) == "in":
                del change[char_id]  # already in the seat: no sitting down again
            continue
        if before is None:
            continue
        if char_id in walkers:
            said.append(f"{name} was {state} at the end of the last shot and walks in this one ({where}.blocking): "
                        f"the plan stands them up at the cut; write 'stands up' in the action to have it seen")
            continue
        poses[char_id] = before  # still seated, lying … (a seated speaker talks from the seat)
        change.pop(char_id, None)
    if notices is not None:
        notices.extend(said)
    return dataclasses.replace(intent, poses=poses, change=change, held=held)


RUN_SPEED_MPS = 2.2  # a blocking move faster than this (1.75 m person) is a run
RUN_STRIDE_M = 1.35  # one running step of a 1.75 m person
TALK_GESTURE_HZ = 0.9  # a talking figure's hands go round this often
TURN_S = 0.8  # a turn on the spot takes this long (or half the shot)
POSE_CHANGE_S = 0.8  # sitting down, getting up, or settling into a pose after a walk takes this long
HEAD_TURN_MAX_DEG = 70.0  # the head turns this far from the body's facing, no further


@dataclass(frozen=True)
class Intent:
    """What the shot asks the characters' bodies to do: held poses, where they look, whom they turn to."""

    poses: dict[str, str]
    look_at: dict[str, str | tuple[float, float, float]]
    turn_to: dict[str, str]  # character id or "half"
    change: dict[str, str]  # "in": from standing into the pose at the start; "out": from it to standing
    said: frozenset[str] = frozenset()  # whom the action's words sit down or stand up (lay down, kneel …)
    explicit: frozenset[str] = frozenset()  # whose pose the shot's `pose` field gives
    held: dict[str, str | None] = dataclasses.field(default_factory=dict)  # what each holds (None: put down)
    held_said: frozenset[str] = frozenset()  # whose hand the action's words fill or empty
    on: dict[str, str] = dataclasses.field(default_factory=dict)  # the prop type a lean or a lying body is on


def _words(text: str) -> list[tuple[int, str]]:
    """(position, word) of the English words (lower case) and the Chinese characters of ``text``."""
    return [(m.start(), m.group()) for m in re.finditer(r"[a-z]+|[^\x00-\x7f]", text.lower())]


def _mentions(text: str, words: tuple[str, ...]) -> int | None:
    """Where the first of ``words`` occurs in ``text`` (English whole words or phrases, Chinese as written), else None."""
    lowered = text.lower()
    found = [pos for pos, w in _words(text) if w in words and w.isascii()]
    found += [lowered.find(w) for w in words if not w.isascii() and w in lowered]
    found += [m.start() for w in words if w.isascii() and " " in w
              for m in [re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", lowered)] if m]
    return min(found) if found else None


def _pose_weight(t: float, change: str | None, arrival: float | None) -> float:
    """How far into its held pose a character is at shot time ``t`` (smoothstep over POSE_CHANGE_S)."""
    def eased(u: float) -> float:
        u = min(max(u, 0.0), 1.0)
        return u * u * (3.0 - 2.0 * u)

    if arrival is not None:  # settles into the pose once the walk is over
        return eased((t - arrival) / POSE_CHANGE_S)
    if change == "in":
        return eased(t / POSE_CHANGE_S)
    if change == "out":
        return 1.0 - eased(t / POSE_CHANGE_S)
    return 1.0


def _named_after(text: str, at: int, candidates: dict[str, str]) -> str | None:
    """The character whose id or name occurs first in ``text`` after position ``at``, else the first anywhere."""
    lowered = text.lower()
    hits = []
    for char_id, name in candidates.items():
        for word in {char_id.lower(), name.lower()}:
            if not word:
                continue
            pattern = rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])" if word.isascii() else re.escape(word)
            hits += [(m.start() < at, m.start(), char_id) for m in re.finditer(pattern, lowered)]
    return min(hits)[2] if hits else None


def read_intent(shot: Shot, present: tuple[str, ...], subject: str | None, names: dict[str, str],
                where: str, problems: list[Issue] | None = None) -> Intent:
    """Poses, looks and turns from the shot's explicit `pose`/`look_at`, else from its `action` verbs
    (for the subject) and its dialogue (speakers talk).

    A `pose` or `look_at` that cannot be given is added to ``problems`` and left out; without
    ``problems`` it is raised (PlanError with every such issue of the shot)."""
    poses: dict[str, str] = {}
    said: dict[str, blocking.Posture] = {}
    held: dict[str, str | None] = {}
    on: dict[str, str] = {}
    for line in shot.dialogue:
        poses.setdefault(line.character, "talk")
    look_at: dict[str, str | tuple[float, float, float]] = {}
    turn_to: dict[str, str] = {}
    change: dict[str, str] = {}
    if subject is not None:
        others = {c: names.get(c, c) for c in present if c != subject}
        text = shot.action
        for pose, words in ACTION_POSE_WORDS.items():
            if pose == "sit":  # sitting and standing apply to everyone named (below)
                continue
            if _mentions(text, words) is not None:
                poses[subject] = pose
                break
        look = _mentions(text, LOOK_WORDS)
        if look is not None:
            target = _named_after(text, look, others)
            if target is not None:
                look_at[subject] = target
        said = blocking.postures_said(text, present, names, subject)
        for char_id, (posture, how) in said.items():
            if posture in ("lean", "lie", "kneel"):
                poses[char_id] = posture
            elif posture == "sit" or how == "out":  # getting up starts in the seat (or the pose they hold)
                poses[char_id] = "sit"
                if how is not None:
                    change[char_id] = how
            elif poses.get(char_id) in blocking.BODY_POSES:
                del poses[char_id]
        held = blocking.holds_said(text, present, names, subject)
        on = prop_words.pose_props_said(text, present, names, subject)
        turn = _mentions(text, TURN_WORDS)
        if turn is not None:
            turn_to[subject] = _named_after(text, turn, others) or "half"
        if poses.get(subject) == "point" and subject not in look_at:
            target = _named_after(text, 0, others)
            if target is not None:
                look_at[subject] = target
    found: list[Issue] = []  # a pose or look that cannot be given is left out and said
    if isinstance(shot.pose, dict):
        for char_id, pose in shot.pose.items():
            if char_id not in present:
                found.append(Issue(f"{where}.pose.{char_id}", pose.value, "names no character of the shot "
                                   f"({', '.join(present) or 'none'})"))
                continue
            poses[char_id] = pose.value
    elif shot.pose is not None:
        if subject is None:
            found.append(Issue(f"{where}.pose", shot.pose.value, "needs a subject in the shot"))
        else:
            poses[subject] = shot.pose.value
    in_hand = [c for c, pose in poses.items() if pose == "hold"]
    said_in_hand = frozenset(held)  # whose hand the words fill or empty
    for char_id in in_hand:
        del poses[char_id]  # `pose: hold` stands with something in hand: what they hold, else "object"
        if held.get(char_id) is None:
            held[char_id] = "object"
    if shot.look_at is not None:
        if subject is None:
            found.append(Issue(f"{where}.look_at", shot.look_at, "needs a subject in the shot"))
        elif isinstance(shot.look_at, str) and shot.look_at not in present:
            found.append(Issue(f"{where}.look_at", shot.look_at, "must be a character in the shot "
                               f"({', '.join(present)}) or [x, y, z]"))
        else:
            look_at[subject] = shot.look_at if isinstance(shot.look_at, str) else tuple(shot.look_at)
    if found and problems is None:
        raise PlanError.of(found)
    if problems is not None:
        problems.extend(found)
    explicit = frozenset(shot.pose) if isinstance(shot.pose, dict) else (
        frozenset((subject,)) if shot.pose is not None and subject is not None else frozenset())
    explicit = explicit - frozenset(in_hand)  # a hand's pose leaves the body as it was
    return Intent(poses, look_at, turn_to, change, frozenset(said), explicit & frozenset(present), held,
                  said_in_hand, on)


def _wrap(deg: float) -> float:
    """An angle in (-180, 180]."""
    return -((-deg + 180.0) % 360.0 - 180.0)


def _facing_toward(stage: _Stage, me: str, other: str) -> float:
    """My facing turned the short way toward ``other``, as a continuous angle from my facing now."""
    target = yaw_toward(stage.position[me], stage.position[other])
    return stage.facing[me] + _wrap(target - stage.facing[me])


def _ease_angle(start: float, end: float, u: np.ndarray) -> np.ndarray:
    """Angles from ``start`` to ``end`` degrees along ``u`` in [0, 1], eased in and out."""
    return start + (end - start) * u * u * (3.0 - 2.0 * u)


def _ground_point(look: str | tuple[float, float, float], tracks: dict[str, dict[str, np.ndarray]], i: int,
                  stage: _Stage) -> tuple[float, float] | None:
    """Where on the ground a look goes this frame: a character's place now, or the point's (x, z)."""
    if isinstance(look, str):
        if look in tracks:
            return float(tracks[look]["x"][i]), float(tracks[look]["z"][i])
        return stage.position.get(look)
    return float(look[0]), float(look[2])


_CUT = TransitionPlan(type="cut", duration_s=0.0, frames=0)


def _transition(shot: Shot, index: int, fps: float, prev_frames: int | None, frames: int,
                problems: list[Issue]) -> TransitionPlan:
    """The shot's transition in; one that cannot be made is added to ``problems`` and planned as a cut."""
    kind = shot.transition.type.value
    seconds = shot.transition.seconds
    if kind == "cut":
        return _CUT
    overlapping = kind in OVERLAPPING_TRANSITIONS  # a crossfade or a wipe: the shots overlap
    count = transition_length(seconds, Fraction(*fps_fraction(fps)), overlapping)
    where = f"shots[{index}].transition"
    problem = None
    if overlapping:
        if prev_frames is None:
            joins = "blend" if kind == "crossfade" else "wipe"
            problem = Issue(f"{where}.type", kind, f"needs a previous shot to {joins} from; use 'fade' or 'cut' "
                            "on the first shot")
        elif count > min(prev_frames, frames):
            problem = Issue(f"{where}.duration", seconds, f"s ({count} frames) must not exceed either adjacent "
                            f"shot ({prev_frames} and {frames} frames)")
    elif count > frames or (prev_frames is not None and count > prev_frames):
        problem = Issue(f"{where}.duration", seconds, "s of fade must fit inside the adjacent shots")
    if problem is not None:
        problems.append(problem)
        return _CUT
    return TransitionPlan(type=kind, duration_s=_r(transition_seconds(count, fps, overlapping)), frames=count)


def _closing_fade(seconds: float | None, shot_id: str, frames: int, incoming: TransitionPlan, fps: float,
                  problems: list[Issue]) -> TransitionPlan | None:
    """The film's fade to black at its end, on the last shot's last frames; None for no fade (or one
    that does not fit, added to ``problems``).

    It takes round(seconds·fps) frames (at least one) and must fit in the last shot beside the
    frames its own transition in already uses."""
    if not seconds:
        return None
    count = transition_length(seconds, Fraction(*fps_fraction(fps)), overlaps=True)
    if count + incoming.frames > frames:
        used = f", {incoming.frames} of them used by its {incoming.type} in" if incoming.frames else ""
        problems.append(Issue("fade_out", seconds, f"s ({count} frames) must fit inside the last shot "
                              f"{shot_id!r} ({frames} frames{used})"))
        return None
    return TransitionPlan(type="fade", duration_s=_r(transition_seconds(count, fps, overlaps=True)), frames=count)


def _issues_of(exc: PlanError, where: str) -> tuple[Issue, ...]:
    """A PlanError's issues; one raised without a JSON path is placed at ``where``."""
    return exc.issues or (Issue(where, NO_VALUE, str(exc)),)


def scene_time_of_day(script: Script) -> str:
    """The scene's time of day: as the script gives it, else as its name or description says
    ("a park at sunset" is dusk, 夜市 is night), else day."""
    scene = script.scene
    if "time_of_day" in scene.model_fields_set:
        return scene.time_of_day.value
    return time_of_day_from_words(scene.name, scene.description) or scene.time_of_day.value


def plan_script(script: Script) -> Plan:
    """Turn a validated script into an exact, reproducible plan."""
    scene_time = scene_time_of_day(script)
    fps = float(script.fps)
    width, height = script.size.width, script.size.height
    colours = {c.id: character_colour(c, i) for i, c in enumerate(script.characters)}
    names = {c.id: c.name or c.id for c in script.characters}
    said_props = _props_said(script, names)
    stage = _Stage(script, spacing=prop_words.TABLE_SPACING_M
                   if prop_words.table_between_defaults(said_props, tuple(c.id for c in script.characters)) else 1.2)
    placed: list[prop_words.PlacedProp] = [prop_words.place(m, _all_bodies(stage)) for m in said_props
                                           if m.source < 0]
    given_props = None if script.scene.props is None else [
        prop_words.PlacedProp(p.type.value, tuple(p.position), float(p.facing)) for p in script.scene.props]
    kinds = {c.id: character_kind(c.name, c.appearance, c.id) for c in script.characters}
    all_ids = tuple(c.id for c in script.characters)
    shots: list[ShotPlan] = []
    cursor = 0
    prev_frames: int | None = None
    last_transition = TransitionPlan(type="cut", duration_s=0.0, frames=0)
    problems: list[Issue] = []  # every shot's plan problems, reported together once all shots were tried
    for index, shot in enumerate(script.shots):
        n_frames = frames_for(shot.duration, fps)
        present = shot.characters if shot.characters is not None else all_ids
        subject = shot.subject or (present[0] if present else None)
        seed = shot.seed if shot.seed is not None else derive_seed(script.seed, "shot", shot.shot_id)
        warnings: list[str] = []
        if len(present) == 2:
            stage.face_each_other(present)
        framing = shot.framing.value
        bodies = {c: stage.body(c) for c in present}  # where they stand as the shot starts
        placed += [prop_words.place(m, _all_bodies(stage), _arrivals(shot, stage)) for m in said_props
                   if m.source == index]
        shot = _walks_from_words(shot, present, subject, names, stage, placed)
        character_frames = _character_frames(shot, present, stage, n_frames, fps, subject, names, f"shots[{index}]",
                                             problems, warnings, given_props if given_props is not None else placed)
        transition = _transition(shot, index, fps, prev_frames, n_frames, problems)
        prev_frames, last_transition = n_frames, transition
        try:
            framing, move, placement, cameras, framed_at = _shot_camera(
                shot, index, framing, present, subject, bodies, character_frames, kinds, width, height, fps, seed,
                warnings, given_props if given_props is not None else placed)
        except PlanError as exc:  # this shot's camera cannot be placed: the next shots are still planned
            problems.extend(_issues_of(exc, f"shots[{index}].camera"))
            continue
        code = encode_motion(move.motion)
        spoken = dialogue_warning([(names.get(d.character, d.character), d.line) for d in shot.dialogue],
                                   round(n_frames / fps, 3))
        if spoken is not None:  # a warning, not an error: a director may mean lines to run over the cut
            warnings.append(spoken)
        if transition.type in OVERLAPPING_TRANSITIONS:
            cursor -= transition.frames
        others = [(names[c], script.character(c).appearance) for c in present if c != subject]
        subject_name = names[subject] if subject else None
        move_phrase = prompts.describe_move(
            move.type, move.motion, move.rotate, move.orbit, move.fov, move.fov_end, move.shake, shot.duration, subject_name
        )
        text = prompts.compose_prompt(
            FRAMING_SIZE.get(framing, framing),
            shot.angle.value,
            subject_name,
            script.character(subject).appearance if subject else "",
            others,
            script.scene.name,
            script.scene.description,
            scene_time,
            move_phrase,
            shot.action,
            shot.prompt,
            _held_pose_sentence(character_frames[0], shot, present, subject, names, stage),
        )
        if framing in _SHOT_TYPE_WORDS:  # a two-person shot type before the size it is shot at
            text = f"{_SHOT_TYPE_WORDS[framing]} {text[:1].lower()}{text[1:]}"
        snapping = tuple(
            SnapInfo(backend=name, width=r.width, height=r.height, frames=r.frames, changed=r.changed)
            for name, r in ((n, snap_for(rule, width, height, n_frames)) for n, rule in catalog.snap_rules().items())
        )
        shots.append(
            ShotPlan(
                index=index,
                shot_id=shot.shot_id,
                start_frame=cursor,
                frames=n_frames,
                duration_s=_r(n_frames / fps),
                requested_duration_s=float(shot.duration),
                seed=seed,
                subject=subject,
                framing=framing,
                angle=shot.angle.value,
                characters=tuple(present),
                move=move,
                motion_code=MotionCodeJSON(theta_q=code.theta_q, phi_q=code.phi_q, magnitude=_r(code.magnitude)),
                aim_point=_rt(placement.aim_point),  # type: ignore[arg-type]
                subject_distance=_r(placement.distance),
                transition=transition,
                action=shot.action,
                prompt=text,
                negative_prompt=prompts.compose_negative(shot.negative_prompt),
                snapping=snapping,
                warnings=tuple(warnings),
                cameras=cameras,
                character_frames=tuple(character_frames),
                sound=_shot_sound(shot),
                framed_at=framed_at or None,
                reference_video=_footage(shot),
            )
        )
        cursor += n_frames
    closing = _closing_fade(script.fade_out, script.shots[-1].shot_id, prev_frames or 0, last_transition, fps,
                            problems)
    if problems:
        raise PlanError.of(problems)
    if given_props is not None:  # the script's own props replace the ones its words name
        placed = list(given_props)
    placed += _chairs_for_sitters(shots, placed, {c.id: c.height for c in script.characters if kinds[c.id] == "person"})
    prop_pieces = tuple(
        PlanSetPiece(kind=p.kind, name=p.name, position=p.position, size=p.size, colour=p.colour, yaw=p.yaw, glow=p.glow)
        for prop in placed for p in prop_words.pieces(prop)
    )
    shots = [_props_in_the_way(shot, placed, {c.id: c.height for c in script.characters}) for shot in shots]
    pieces = script.scene.set_pieces
    set_kit, set_notices = None, ()
    if pieces is None:
        choice = choose_kit(script.scene.name, script.scene.description, _given_kit(script))
        set_kit, set_notices = choice.kit.name, (choice.notice(),)
        resolved = tuple(
            PlanSetPiece(kind=p.kind, name=p.name, position=p.position, size=p.size, colour=p.colour, yaw=p.yaw,
                         glow=p.glow)
            for p in _dressed_set(script, shots)
            if not any(prop_words.footprint_overlaps(p, prop) for prop in placed)  # the named prop stands there
        )
    else:
        resolved = tuple(
            PlanSetPiece(
                kind=p.kind.value,
                name=p.name,
                position=(p.position[0], 0.0, p.position[1]) if len(p.position) == 2 else tuple(p.position),
                size=tuple(p.size),
                colour=tuple(p.colour),
                yaw=p.yaw,
            )
            for p in pieces
        )
    return Plan(
        daotai_version=__version__,
        script_hash=script_hash(script),
        title=script.title,
        fps=fps,
        fps_fraction=fps_fraction(fps),
        width=width,
        height=height,
        seed=script.seed,
        scene=PlanScene(
            name=script.scene.name,
            description=script.scene.description,
            time_of_day=scene_time,
            palette=tuple(tuple(c) for c in script.scene.palette),
            set_pieces=resolved + prop_pieces,
            set=set_kit,
            notices=set_notices,
        ),
        characters=tuple(
            PlanCharacter(
                id=c.id,
                name=names[c.id],
                appearance=c.appearance,
                colour=tuple(_r(v) for v in colours[c.id]),  # type: ignore[arg-type]
                height=c.height,
                reference_images=c.reference_images,
                voice=c.voice,
                seed=c.seed if c.seed is not None else derive_seed(script.seed, "character", c.id),
                kind=kinds[c.id],
            )
            for c in script.characters
        ),
        shots=tuple(shots),
        total_frames=cursor,
        total_duration_s=_r(cursor / fps),
        fade_out=closing,
        letterbox=script.size.letterbox,
        soundtrack=(
            SoundtrackPlan(path=script.soundtrack.path, offset_s=script.soundtrack.offset, gain_db=script.soundtrack.gain_db)
            if script.soundtrack is not None else None
        ),
    )


def _shot_camera(shot: Shot, index: int, framing: str, present: tuple[str, ...], subject: str | None,
                 bodies: dict[str, Body], character_frames: list, kinds: dict[str, str], width: int, height: int,
                 fps: float, seed: int, warnings: list[str], props: list[prop_words.PlacedProp] = ()):
    """The shot's camera: where it starts, its move and every frame's pose and lens; PlanError names the field
    that cannot be planned. Returns (framing, move, placement, cameras, framed_at); warnings are appended.
    ``props``: the props standing as the shot starts (a camera lowered for sitters stays above their table)."""
    n_frames = len(character_frames)
    camera_spec = shot.camera
    lens_fov = _lens_fov(shot.camera, width / height)
    fov_given = "fov" in shot.camera.model_fields_set or shot.camera.focal_length_mm is not None
    if subject is not None:
        others = tuple(bodies[c] for c in present if c != subject)
        path = np.array([p.position for frame in character_frames for p in frame], np.float64)
        if framing in VIEWPOINT_FRAMINGS:  # placed by what the subject sees (pov) or holds (insert)
            seated = {p.id: p.pose == "sit" for p in character_frames[0]}
            placement, fov = _viewpoint_camera(shot, framing, bodies, subject, others, seated, lens_fov), lens_fov
        else:
            try:
                placement, fov, _ = stage_camera(
                    framing, shot.angle.value, lens_fov, width / height, bodies[subject], others,
                    fov_given=fov_given, path=path,
                )
            except ValueError:
                raise PlanError.at(f"shots[{index}].framing", framing, "needs a second character in the shot "
                                   "(list both in shots[].characters)") from None
        if kinds[subject] == "animal" and framing in FRAMING_RULES and FRAMING_RULES[framing].scale_with_height:
            placement = _toward_the_head(placement, bodies[subject])
        lands = framing not in VIEWPOINT_FRAMINGS and _push_lands(shot)  # a pov's push starts at the eyes
        framed_at = n_frames - 1 if lands else 0  # the frame the named framing holds on
        drop = 0.0 if framing in VIEWPOINT_FRAMINGS else _seated_drop(  # a viewpoint knows who sits
            framing, subject, present, character_frames[framed_at], kinds, bodies)
        if drop > 0.0:  # seated people are framed at their seated height, from above the table they sit at
            floor = _table_floor(props, character_frames[framed_at],
                                 float(np.asarray(placement.cam_to_world)[1, 3]))
            placement = headroom.shifted(placement, np.array([0.0, -drop, 0.0]), _roll(shot), floor)
            lier = character_frames[framed_at][present.index(subject)]
            if _lies(lier):
                placement = _beside_lying(placement, lier.facing + lier.pose_dir, LYING_VIEW_DEG, _roll(shot))
        place = _camera_place(shot, index, framing, bodies)
        if framing in VIEWPOINT_FRAMINGS and place.aim is not None:
            place = dataclasses.replace(place, aim=None)  # the viewpoint already looks at the camera's aim
        if shot.camera.follow and not place.moves_the_camera:
            place = _beside_the_path(place, bodies[subject], character_frames, present.index(subject))
        if place.moves_the_camera or place.aim is not None:
            placement = place_explicitly(placement, bodies[subject], place, shot.angle.value)
        if _place_given(shot):  # where the planner chose, the warning below says what it found instead
            _refuse_a_blocked_start(shot, index, placement, bodies, subject)
            if "framing" not in shot.model_fields_set and (shot.camera.distance_m or shot.camera.position):
                # the script placed the camera and named no size: the plan names the size it makes
                framing = size_at(placement.distance, fov, bodies[subject].height,
                                  ANIMAL_FRAMING_SCALE if kinds[subject] == "animal" else 1.0)
        if fov != shot.camera.fov:
            camera_spec = shot.camera.model_copy(update={"fov": fov})
        if framing in headroom.SINGLE_SIZES and place.aim is None:
            me = character_frames[framed_at][present.index(subject)]
            if not _lies(me):  # lying face up, they look at the ceiling: no side of the frame is ahead of them
                placement = _with_lead_room(placement, me.facing, fov, width / height, _roll(shot))
        if framing not in ("over_the_shoulder", *VIEWPOINT_FRAMINGS) and not _place_given(shot):
            hidden = hidden_by(placement, bodies[subject], others)
            if hidden:
                warnings.append(f"{', '.join(hidden)} stands between the camera and {subject} at the start of the shot")
    elif framing in ("over_the_shoulder", "two_shot"):
        raise PlanError.at(f"shots[{index}].framing", framing, "needs two characters in the shot")
    else:
        lands = False
        placement = place_camera(framing, shot.angle.value, lens_fov, (0.0, 0.0), 1.75, 0.0)
        place = _camera_place(shot, index, framing, bodies)
        if place.moves_the_camera or place.aim is not None:
            placement = place_explicitly(placement, Body("", (0.0, 0.0), 1.75, 0.0), place, shot.angle.value)
        if lens_fov != shot.camera.fov:
            camera_spec = shot.camera.model_copy(update={"fov": lens_fov})
    move = resolve_move(camera_spec, placement.distance, f"shots[{index}].camera")
    landed = None
    if lands:  # a push-in ends on the framing the shot names: it starts wider, on the same line
        end_distance = headroom.landing_distance(placement.distance, move.fov, move.fov_end)
        if camera_spec.motion is None and move.motion[2] < 0.0:
            # the default push covers a third of the start distance: it starts 1.5 times as far as it ends
            move = resolve_move(camera_spec, 1.5 * end_distance, f"shots[{index}].camera")
        landed = headroom.lands_on_framing(placement, move.fov, move.fov_end, move.motion)
        placement = landed if landed is not None else placement
    traj = cam.trajectory(
        placement.cam_to_world,
        cam.Move(
            motion=move.motion,
            rotate=move.rotate,
            orbit=move.orbit,
            fov=move.fov,
            fov_end=move.fov_end if move.fov_end != move.fov else None,
            easing=move.easing,
            shake=move.shake,
            orbit_center=placement.aim_point,
            shake_seed=derive_seed(seed, "shake"),
        ),
        n_frames,
        fps,
    )
    poses = np.array(traj.cam_to_world)  # (n, 4, 4)
    fovs = np.array(traj.fov)  # (n,) degrees
    if move.type == "dolly_zoom" and shot.camera.fov_end is None:
        # Hold the subject's size on every frame, not only at both ends: the fov follows
        # the distance (d · tan(fov/2) constant) instead of a tan-linear blend.
        distances = np.linalg.norm(poses[:, :3, 3] - np.array(placement.aim_point), axis=1)
        half = math.tan(math.radians(move.fov) / 2.0) * placement.distance / distances
        fovs = np.degrees(2.0 * np.arctan(half))
    if move.follow and subject is not None:
        start = np.array(character_frames[0][present.index(subject)].position)
        for i, frame in enumerate(character_frames):
            now = np.array(frame[present.index(subject)].position)
            poses[i, 0, 3] += now[0] - start[0]
            poses[i, 2, 3] += now[1] - start[1]
    if move.type == "steadicam":
        poses = steadicam.add_float(poses, fps, derive_seed(seed, "steadicam"))
    if shot.camera.follow and subject is not None:
        track = np.array([frame[present.index(subject)].position for frame in character_frames], np.float64)
        poses = _turn_to_follow(poses, np.array(placement.aim_point), track - track[0],
                                DUTCH_ROLL_DEG if shot.angle.value == "dutch" else 0.0)
        move = move.model_copy(update={"rotate": _turns_over_shot(poses), "pan_follow": True})
    if subject is not None:
        aim = np.array(placement.aim_point)
        closest = float(np.min(np.linalg.norm(poses[:, :3, 3] - aim, axis=1)))
        if closest < min(TOO_CLOSE_M, 0.5 * placement.distance):
            warnings.append(
                f"the camera comes within {closest:.2f} m of {subject}'s aim point: it may pass through the subject"
            )
    if np.any(poses[:, 1, 3] < 0.02):
        warnings.append("the camera goes below the ground (y < 0) during the shot")
    if subject is not None and kinds[subject] == "person" and (_place_given(shot) or _aim_given(shot)):
        warnings.extend(_head_cut_warnings(framing, subject, present.index(subject), bodies[subject].height,
                                           poses, fovs, character_frames))
    cameras = tuple(
        CameraFrame(cam_to_world=_rt(poses[i]), fov=_r(fovs[i]), K=_rt(cam.intrinsics(float(fovs[i]), width, height)))
        for i in range(n_frames)
    )
    return framing, move, placement, cameras, (n_frames - 1 if landed is not None else 0)


def _roll(shot: Shot) -> float:
    """The camera's roll about its view axis at the start (a dutch angle's), degrees."""
    return DUTCH_ROLL_DEG if shot.angle.value == "dutch" else 0.0


def _aim_given(shot: Shot) -> bool:
    """Whether the script names what the lens looks at (a point, or a character other than the subject)."""
    return shot.camera.aim is not None and shot.camera.aim != "subject"


_TRACKING_MOVES = ("dolly_zoom", "follow", "steadicam")  # they hold the subject's size, or go where it goes


def _push_lands(shot: Shot) -> bool:
    """Whether the shot's move is a push the planner lands on the named framing: it closes on the subject
    (forward, or narrowing the lens) and the script leaves the camera's place, aim and path to the planner.
    A `motion` written out (by hand, or by dragging the move's end on the console's floor plan) is the
    director's own path: the shot starts on its framing and travels exactly that far."""
    spec = shot.camera
    if (_place_given(shot) or _aim_given(shot) or spec.follow or spec.type.value in _TRACKING_MOVES
            or spec.motion is not None):
        return False
    move = resolve_move(spec, 1.0)  # the signs of a move do not depend on the distance
    return headroom.pushes_in(move.type, move.motion, move.rotate, move.orbit, move.fov, move.fov_end)


def _seated_share(person: CharacterFrame) -> float:
    """How far below standing a person's head is this frame, as a share of their height."""
    if person.pose != "sit" or person.walking:
        return 0.0
    return headroom.SEATED_HEAD_DROP * person.pose_weight


def _head_share(person: CharacterFrame, height: float) -> float:
    """How far below standing a person's head is this frame (seated, kneeling, lying …), as a share of their height."""
    if person.pose == "sit":
        return _seated_share(person)
    return blocking.head_drop_share(person.pose, person.walking, person.pose_weight, person.rest_height / height)


# A lens framing someone lying down stands at their side and looks down at them from this far above
# level, the same distance from the head: over the edge of the bed or sofa, not along its top.
LYING_VIEW_DEG = 35.0


def _lies(person: CharacterFrame) -> bool:
    """Whether a character frame shows someone lying down (more than halfway)."""
    return blocking.body_posture(person.pose, person.walking, person.pose_weight) == "lie"


def _beside_lying(placement, feet_deg: float, elevation_deg: float, roll: float):
    """``placement`` with its lens swung about the aim, the same distance off, to the side of a body
    lying with its feet toward ``feet_deg`` (the side the lens was on) and up until it looks down at
    ``elevation_deg``: the whole body across the frame, the face the right way up, not seen from the crown."""
    eye = np.asarray(placement.cam_to_world, np.float64)[:3, 3]
    aim = np.asarray(placement.aim_point, np.float64)
    offset = eye - aim  # (3,) m
    distance = float(np.linalg.norm(offset))
    if distance < 1e-6:
        return placement
    feet = math.radians(feet_deg)
    across = np.array([math.cos(feet), 0.0, -math.sin(feet)])  # (3,) level, square to the body
    if float(across @ offset) < 0.0:
        across = -across
    e = math.radians(max(elevation_deg, math.degrees(math.asin(max(-1.0, min(1.0, offset[1] / distance))))))
    eye = aim + distance * (math.cos(e) * across + np.array([0.0, math.sin(e), 0.0]))
    return type(placement)(cam.make_pose(cam.look_at(eye, aim, roll_deg=roll), eye), placement.aim_point, distance)


def _seated_drop(framing: str, subject: str, present: tuple[str, ...], people: tuple[CharacterFrame, ...],
                 kinds: dict[str, str], bodies: dict[str, Body]) -> float:
    """Metres to lower the start camera for a seated subject; a framing of several people drops only as
    far as the least seated of them allows (a standing partner keeps their head in the two-shot)."""
    if kinds[subject] != "person":
        return 0.0
    share = _head_share(people[present.index(subject)], bodies[subject].height)
    if framing in ("over_the_shoulder", "two_shot") or (framing in ("wide", "extreme_wide") and len(present) > 1):
        share = min(_head_share(p, bodies[p.id].height) for p in people)
    return headroom.seated_drop(framing, bodies[subject].height, share) if share > 0.0 else 0.0


TABLE_CLEARANCE_M = 0.25  # a lens lowered for sitters stays this far above the top of the table they sit at
SAT_AT_M = 1.2  # a seated person this near a table's or desk's centre (m) sits at it


def _table_floor(props, people: tuple[CharacterFrame, ...], standing_lens: float) -> float:
    """The lowest a camera lowered for seated people may go (m): ``TABLE_CLEARANCE_M`` above the top of
    a table or desk one of them sits at, so the lens looks down on its top and across it rather than
    into its edge (never higher than the lens stood before it came down); 0 without such a table."""
    sat_at = [prop for prop in props if prop.type in prop_words.TABLE_LIKE and any(
        _seated_share(p) > 0.0 and math.dist(p.position, prop.xz) < SAT_AT_M for p in people)]
    if not sat_at:
        return 0.0
    top = max(piece.position[1] + piece.size[1] for prop in sat_at for piece in prop_words.pieces(prop))
    return min(standing_lens, top + TABLE_CLEARANCE_M)


def _with_lead_room(placement, facing_deg: float, fov: float, aspect: float, roll: float):
    """The start camera panned so a subject facing ``facing_deg`` has the open side of the frame in front."""
    shift = headroom.lead_room_shift(placement, facing_deg, fov, aspect)
    if float(np.linalg.norm(shift)) < 1e-6:
        return placement
    eye = np.asarray(placement.cam_to_world)[:3, 3]
    aim = np.asarray(placement.aim_point) + shift
    return type(placement)(cam.make_pose(cam.look_at(eye, aim, roll_deg=roll), eye), tuple(float(v) for v in aim),
                           float(np.linalg.norm(aim - eye)))


def _head_cut_warnings(framing: str, subject: str, slot: int, height: float, poses: np.ndarray, fovs: np.ndarray,
                       character_frames: list) -> list[str]:
    """Warnings for a camera the script places that cuts the top of the subject's head off where the
    framing's headroom rule keeps it in the frame, at the shot's first or last frame."""
    out = []
    for i, when in ((0, "first"), (len(poses) - 1, "last")):
        person = character_frames[i][slot]
        rows = headroom.head_rows(poses[i], float(fovs[i]), person.position, height, _head_share(person, height))
        if headroom.cuts_the_head(framing, rows):
            out.append(f"the camera the script places cuts the top of {subject}'s head off at the {when} frame "
                       f"(a {framing.replace('_', ' ')} keeps it in the picture); move the camera back or lower "
                       "its aim, or use a wider lens")
        if len(poses) == 1:
            break
    return out


def _viewpoint_camera(shot: Shot, framing: str, bodies: dict[str, Body], subject: str, others: tuple[Body, ...],
                      seated: dict[str, bool], fov: float):
    """The start camera of a pov or an insert (daotai.plan.viewpoint).

    pov: at the subject's eyes, looking at the shot's look_at, else the camera's aim, else whom it faces.
    insert: a close detail of the camera's aim (a point, or a character's hand), else the subject's hand."""
    body, angle = bodies[subject], shot.angle.value
    aim = shot.camera.aim if shot.camera.aim != "subject" else None
    if framing == "pov":
        wanted = shot.look_at if shot.look_at is not None else aim
        look = bodies.get(wanted) if isinstance(wanted, str) else (np.array(wanted, np.float64) if wanted else None)
        target = viewpoint.pov_target(body, others, seated[subject], look)
        return viewpoint.pov_placement(body, target, seated[subject], angle)
    if isinstance(aim, tuple):
        detail = np.array(aim, np.float64)
    elif isinstance(aim, str) and aim in bodies:
        detail = viewpoint.hand_point(bodies[aim], seated[aim])
    else:
        detail = viewpoint.hand_point(body, seated[subject])
    return viewpoint.insert_placement(body, detail, fov, angle)


def _props_said(script: Script, names: dict[str, str]) -> list[prop_words.PropMention]:
    """The props the scene's description and the shots' actions name (none when the script lists its own)."""
    if script.scene.props is not None:
        return []
    ids = tuple(c.id for c in script.characters)
    subjects: dict[int, str | None] = {-1: ids[0] if ids else None}
    texts = [(-1, script.scene.description)]
    for index, shot in enumerate(script.shots):
        present = shot.characters if shot.characters is not None else ids
        subjects[index] = shot.subject or (present[0] if present else None)
        texts.append((index, shot.action))
    return prop_words.mentions(texts, ids, names, subjects)


def _walks_from_words(shot: Shot, present: tuple[str, ...], subject: str | None, names: dict[str, str],
                      stage: _Stage, placed: list[prop_words.PlacedProp]) -> Shot:
    """The shot with a walk for each "walks to the window" / "走到门口" of its action whose walker the
    script's own blocking does not move (from the start, at a walking pace or over the whole shot)."""
    if not shot.action:
        return shot
    moves = []
    for walker, target in prop_words.walks_said(shot.action, present, names, subject).items():
        if any(m.character == walker for m in shot.blocking):
            continue
        goal = prop_words.walk_goal(stage.body(walker), target, placed, _all_bodies(stage))
        if goal is None:
            continue
        (x, z), facing = goal
        pace = math.dist(stage.position[walker], (x, z)) / prop_words.WALK_SPEED_MPS * 1.75 / stage.heights[walker]
        end = min(float(shot.duration), max(pace, 0.2 * float(shot.duration)))
        moves.append(BlockingMove(character=walker, to=(_r(x), _r(z)), start=0.0, end=_r(end), facing=_r(facing)))
    return shot.model_copy(update={"blocking": shot.blocking + tuple(moves)}) if moves else shot


def _arrivals(shot: Shot, stage: _Stage) -> dict[str, Body]:
    """Where the shot's own blocking leaves each walker, facing as they arrive."""
    out = {}
    for move in sorted(shot.blocking, key=lambda m: m.start):
        start = out[move.character].xz if move.character in out else stage.position[move.character]
        to = (float(move.to[0]), float(move.to[1]))
        facing = move.facing if move.facing is not None else (
            yaw_toward(start, to) if math.dist(start, to) > 1e-9 else stage.facing[move.character])
        out[move.character] = Body(move.character, to, stage.heights[move.character], float(facing))
    return out


def _props_in_the_way(shot: ShotPlan, placed: list[prop_words.PlacedProp], heights: dict[str, float]) -> ShotPlan:
    """The shot with a warning for each prop (the words' or the script's) its camera stands in or that
    hides its subject's head at the start, middle or end (the props stay: the script asked for them)."""
    if not placed:
        return shot
    said: list[str] = []
    for i in sorted({0, shot.frames // 2, shot.frames - 1}):
        eye = np.array(shot.cameras[i].cam_to_world[3:12:4], np.float64)  # (3,) m
        head = None
        if shot.subject is not None:
            person = next(p for p in shot.character_frames[i] if p.id == shot.subject)
            drop = blocking.seated_drop_m(person.pose, person.walking, person.pose_weight, heights[person.id]) or \
                _head_share(person, heights[person.id]) * heights[person.id]
            head = np.array([person.position[0], 0.93 * heights[person.id] - drop, person.position[1]])
        for prop in placed:
            problem = prop_words.in_the_way(prop, eye, head)
            if problem is not None:
                text = f"the {prop.type.replace('_', ' ')} at {list(_rt(prop.xz))} m {problem}"
                if shot.subject is not None:
                    text = text.replace("the subject", shot.subject)
                if text not in said:
                    said.append(text)
    return shot.model_copy(update={"warnings": shot.warnings + tuple(said)}) if said else shot


def _all_bodies(stage: _Stage) -> dict[str, Body]:
    """Every character where it stands now."""
    return {char_id: stage.body(char_id) for char_id in stage.position}


def _chairs_for_sitters(shots: list[ShotPlan], placed: list[prop_words.PlacedProp],
                        heights: dict[str, float]) -> list[prop_words.PlacedProp]:
    """A chair under every place someone sits with no seat near it (one per place, facing as they sit);
    ``heights``: the people's (animals are left out)."""
    chairs: list[prop_words.PlacedProp] = []
    for shot in shots:
        for frame in shot.character_frames:
            for person in frame:
                if person.id not in heights or not blocking.is_seated(person.pose, person.walking, person.pose_weight):
                    continue  # standing, or an animal (its figure sits on nothing)
                if prop_words.needs_a_seat(person.position, placed + chairs):
                    chairs.append(prop_words.chair_for(Body(person.id, person.position, heights[person.id],
                                                            person.facing), person.facing))
    return chairs


def _lens_fov(camera: CameraSpec, aspect: float) -> float:
    """The vertical fov the script asks for: from focal_length_mm on the sensor's width, else fov."""
    if camera.focal_length_mm is None:
        return float(camera.fov)
    sensor = camera.sensor.value if camera.sensor is not None else DEFAULT_SENSOR
    return round(horizontal_fov_to_vertical(SENSOR_WIDTH_MM[sensor], camera.focal_length_mm, aspect), 6)


def _camera_place(shot: Shot, index: int, framing: str, bodies: dict[str, Body]) -> CameraPlace:
    """The shot camera's place fields in world terms; an aim at someone not in the shot is refused."""
    cam = shot.camera
    side = cam.side
    side_deg = None if side is None else (CAMERA_SIDE_DEG[side.value] if hasattr(side, "value") else float(side))
    aim = None
    if isinstance(cam.aim, str) and cam.aim != "subject":
        if cam.aim not in bodies:
            raise PlanError.at(f"shots[{index}].camera.aim", cam.aim, "must be 'subject' or the id of a character "
                               f"in the shot ({', '.join(bodies) or 'none'})")
        body = bodies[cam.aim]
        rule = FRAMING_RULES.get(framing, FRAMING_RULES["close_up"])  # a pov or insert looks at the face
        aim = (body.xz[0], body.height * rule.aim_fraction, body.xz[1])
    elif isinstance(cam.aim, tuple):
        aim = tuple(float(v) for v in cam.aim)
    return CameraPlace(side_deg=side_deg, distance_m=cam.distance_m, height_m=cam.height_m,
                       position=tuple(cam.position) if cam.position is not None else None, aim=aim)


ANIMAL_HEAD_FORWARD = 0.52  # an animal's head is this far ahead of where it stands (share of its height)


def _toward_the_head(placement, body: Body):
    """A framing of an animal: aimed at its head (ahead of its feet, not above them) and
    ANIMAL_FRAMING_SCALE times as far back as a person of its height (its head is a larger share of it)."""
    yaw = math.radians(body.facing)
    shift = np.array([math.sin(yaw), 0.0, math.cos(yaw)]) * ANIMAL_HEAD_FORWARD * body.height  # (3,) m
    pose = np.array(placement.cam_to_world)
    aim = np.array(placement.aim_point) + shift
    pose[:3, 3] = aim + (pose[:3, 3] - np.array(placement.aim_point)) * ANIMAL_FRAMING_SCALE
    return type(placement)(pose, tuple(float(v) for v in aim), placement.distance * ANIMAL_FRAMING_SCALE)


def _place_given(shot: Shot) -> bool:
    """Whether the script itself places the camera (side, distance_m, height_m or position)."""
    return any(getattr(shot.camera, name) is not None for name in ("side", "distance_m", "height_m", "position"))


def _beside_the_path(place: CameraPlace, subject: Body, frames: list, slot: int) -> CameraPlace:
    """A following pan without a side given watches from beside the subject's path, on the audience side
    (in front of a runner it would stand in their way)."""
    start, end = np.array(frames[0][slot].position), np.array(frames[-1][slot].position)
    if float(np.linalg.norm(end - start)) < 0.5:
        return place
    heading = math.degrees(math.atan2(end[0] - start[0], end[1] - start[1]))
    sides = [heading + 90.0, heading - 90.0]
    best = max(sides, key=lambda yaw: math.cos(math.radians(yaw)))  # the side toward +z, the audience
    return CameraPlace(side_deg=best - subject.facing, distance_m=place.distance_m, height_m=place.height_m,
                       position=None, aim=place.aim)


def _place_path(shot: Shot, index: int) -> tuple[str, object]:
    """The JSON path and value of the place field that put the camera where it is (for errors)."""
    cam = shot.camera
    for name in ("position", "distance_m", "side", "height_m"):
        value = getattr(cam, name)
        if value is not None:
            shown = value.value if hasattr(value, "value") else list(value) if isinstance(value, tuple) else value
            return f"shots[{index}].camera.{name}", shown
    return f"shots[{index}].camera", None


def _refuse_a_blocked_start(shot: Shot, index: int, placement, bodies: dict[str, Body], subject: str) -> None:
    """A camera placed by the script must not start inside someone, nor with the subject wholly hidden."""
    eye = np.asarray(placement.cam_to_world)[:3, 3]
    path, value = _place_path(shot, index)
    inside = inside_figure(eye, tuple(bodies.values()))
    if inside is not None:
        raise PlanError.at(path, value, f"puts the lens inside {inside} (at {list(_rt(eye))} m); move it clear of "
                           "their body")
    others = tuple(b for c, b in bodies.items() if c != subject)
    blockers = fully_hidden(eye, bodies[subject], others)
    if blockers:
        raise PlanError.at(path, value, f"puts {', '.join(blockers)} between the lens and {subject}, who is wholly "
                           "hidden at the start of the shot; choose another side or raise the camera")


def _turn_to_follow(poses: np.ndarray, aim: np.ndarray, shift: np.ndarray, roll: float) -> np.ndarray:
    """Poses turned each frame toward ``aim`` moved by the subject's ground shift (n, 2): a pan that follows."""
    out = poses.copy()
    for i in range(len(out)):
        target = aim + np.array([shift[i, 0], 0.0, shift[i, 1]])
        out[i, :3, :3] = cam.look_at(out[i, :3, 3], target, roll_deg=roll)
    return out


def _turns_over_shot(poses: np.ndarray) -> tuple[float, float, float]:
    """(pan, tilt, 0) degrees from the first frame's view to the last's, summed frame by frame (pan unwrapped)."""
    forward = -poses[:, :3, 2]  # (n, 3) view directions
    yaw = np.unwrap(np.arctan2(forward[:, 0], -forward[:, 2]))  # + = view turned right
    pitch = np.arcsin(np.clip(forward[:, 1], -1.0, 1.0))
    return (_r(math.degrees(yaw[-1] - yaw[0])), _r(math.degrees(pitch[-1] - pitch[0])), 0.0)


def _dressed_set(script: Script, shots: list[ShotPlan]) -> tuple[PieceSpec, ...]:
    """The scene's set kit laid around the blocking, clear of every path, camera and subject (seeded).

    A shot's camera must see its subject; in a two-person shot or a master (a wide with several
    people) everyone in it, so no prop stands between the lens and any of them."""
    heights = {c.id: c.height for c in script.characters}
    people = [p.position for shot in shots for frame in shot.character_frames for p in frame]
    cameras = [shot.cameras[i].cam_to_world[3:12:4] for shot in shots for i in range(shot.frames)]
    sightlines = []
    for shot in shots:
        if shot.subject is None:
            continue
        everyone = shot.framing in ("over_the_shoulder", "two_shot") or (
            shot.framing in ("wide", "extreme_wide") and len(shot.characters) > 1)
        seen = shot.characters if everyone else (shot.subject,)
        for i in sorted({0, shot.frames // 2, shot.frames - 1}):
            for person in (p for p in shot.character_frames[i] if p.id in seen):
                h = heights[person.id]
                x, z = person.position
                sightlines.append(Sightline(tuple(shot.cameras[i].cam_to_world[3:12:4]),
                                            ((x, 0.93 * h, z), (x, 0.6 * h, z))))
    return dress_set(script.scene.name, script.scene.description, derive_seed(script.seed, "set"),
                     np.array(people, np.float64).reshape(-1, 2), np.array(cameras, np.float64).reshape(-1, 3),
                     tuple(sightlines), _given_kit(script))


def _given_kit(script: Script) -> str | None:
    """The kit the script names (scene.set), else None: the scene's words choose."""
    return script.scene.set.value if script.scene.set is not None else None


def _footage(shot: Shot) -> FootagePlan | None:
    """The stretch of user footage the shot follows, with its end filled in (None: the shot names none)."""
    if shot.reference_video is None:
        return None
    start, end = shot.reference_video.stretch(float(shot.duration))
    return FootagePlan(path=shot.reference_video.path, start_s=start, end_s=end)


def _shot_sound(shot: Shot) -> ShotSoundPlan | None:
    """The shot's sound as the plan carries it; None when the script says nothing about it."""
    if not shot.uses_sound:
        return None
    return ShotSoundPlan(
        dialogue=tuple(DialoguePlan(character=d.character, line=d.line, language=d.language) for d in shot.dialogue),
        sound=shot.sound,
        mute=shot.audio.mute if shot.audio is not None else False,
        gain_db=shot.audio.gain_db if shot.audio is not None else 0.0,
    )


def plan_to_json(plan: Plan) -> str:
    """The plan as stable, human-diffable JSON text (byte-identical for the same script)."""
    return json.dumps(plan.model_dump(mode="json"), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def plan_from_json(text: str) -> Plan:
    """Read a plan written by :func:`plan_to_json`."""
    return Plan.model_validate_json(text)


def select_shots(plan: Plan, shot_ids: list[str]) -> Plan:
    """A plan holding only the named shots (order of the plan kept), re-timed as a sequence."""
    known = [s.shot_id for s in plan.shots]
    unknown = [s for s in shot_ids if s not in known]
    if unknown:
        raise PlanError(f"--shots: {', '.join(unknown)} not in the plan; shots are: {', '.join(known)}")
    chosen = [s for s in plan.shots if s.shot_id in shot_ids]
    retimed = []
    cursor = 0
    for position, shot in enumerate(chosen):
        transition = shot.transition
        if position == 0 and transition.type in OVERLAPPING_TRANSITIONS:
            transition = TransitionPlan(type="cut", duration_s=0.0, frames=0)
        if transition.type in OVERLAPPING_TRANSITIONS:
            cursor -= transition.frames
        retimed.append(shot.model_copy(update={"start_frame": cursor, "transition": transition}))
        cursor += shot.frames
    closing, last = plan.fade_out, retimed[-1]
    if closing is not None and closing.frames + last.transition.frames > last.frames:  # refused before any render
        raise PlanError.at("fade_out", closing.duration_s, f"s ({closing.frames} frames) must fit inside the last "
                           f"chosen shot {last.shot_id!r} ({last.frames} frames, {last.transition.frames} of them "
                           f"used by its {last.transition.type} in); choose another last shot or shorten fade_out")
    return plan.model_copy(update={"shots": tuple(retimed), "total_frames": cursor, "total_duration_s": _r(cursor / plan.fps)})
