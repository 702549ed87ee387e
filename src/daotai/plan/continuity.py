"""Where every character is, frame by frame, and what carries from one shot to the next: places,
facings, held poses and things in hand (continuity), walks from the blocking and from the words."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from daotai.errors import Issue
from daotai.plan import blocking
from daotai.plan import prompt as prompts
from daotai.plan import props as prop_words
from daotai.plan.intent import Intent, read_intent
from daotai.plan.model import CharacterFrame
from daotai.plan.stable import rounded
from daotai.plan.staging import Body, default_character_positions, yaw_toward
from daotai.script.schema import BlockingMove, Script, Shot

STRIDE_M = 0.75  # one walk cycle per 2 strides of a 1.75 m person
RUN_SPEED_MPS = 2.2  # a blocking move faster than this (1.75 m person) is a run
RUN_STRIDE_M = 1.35  # one running step of a 1.75 m person
TALK_GESTURE_HZ = 0.9  # a talking figure's hands go round this often
TURN_S = 0.8  # a turn on the spot takes this long (or half the shot)
POSE_CHANGE_S = 0.8  # sitting down, getting up, or settling into a pose after a walk takes this long
HEAD_TURN_MAX_DEG = 70.0  # the head turns this far from the body's facing, no further


class Stage:
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



def character_frames(
    shot: Shot, present: tuple[str, ...], stage: Stage, n_frames: int, fps: float,
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
                position=(rounded(track["x"][i]), rounded(track["z"][i])),
                facing=rounded(track["facing"][i]),
                walk_phase=rounded(track["phase"][i] if walking else 0.0),
                walking=walking,
                pose=pose,
                pose_phase=rounded(2.0 * math.pi * TALK_GESTURE_HZ * times[i]) if pose == "talk" else 0.0,
                head_turn=rounded(head),
                pose_weight=rounded(weight),
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



def held_pose_sentence(people: tuple[CharacterFrame, ...], shot: Shot, present: tuple[str, ...],
                        subject: str | None, names: dict[str, str], stage: Stage) -> str:
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
        return rounded(_wrap(yaw_toward(xz, target.xz) - facing)), 0.0, target.type
    if pose == "lie":
        height, axis, kind = prop_words.lie_surface(xz, props)
        axis = prop_words.feet_yaw(xz, others) if axis is None else axis
        return rounded(_wrap(axis - facing)), rounded(height), kind
    return 0.0, 0.0, None



def _carry_postures(intent: Intent, shot: Shot, present: tuple[str, ...], stage: Stage, names: dict[str, str],
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



def _wrap(deg: float) -> float:
    """An angle in (-180, 180]."""
    return -((-deg + 180.0) % 360.0 - 180.0)



def _facing_toward(stage: Stage, me: str, other: str) -> float:
    """My facing turned the short way toward ``other``, as a continuous angle from my facing now."""
    target = yaw_toward(stage.position[me], stage.position[other])
    return stage.facing[me] + _wrap(target - stage.facing[me])



def _ease_angle(start: float, end: float, u: np.ndarray) -> np.ndarray:
    """Angles from ``start`` to ``end`` degrees along ``u`` in [0, 1], eased in and out."""
    return start + (end - start) * u * u * (3.0 - 2.0 * u)



def _ground_point(look: str | tuple[float, float, float], tracks: dict[str, dict[str, np.ndarray]], i: int,
                  stage: Stage) -> tuple[float, float] | None:
    """Where on the ground a look goes this frame: a character's place now, or the point's (x, z)."""
    if isinstance(look, str):
        if look in tracks:
            return float(tracks[look]["x"][i]), float(tracks[look]["z"][i])
        return stage.position.get(look)
    return float(look[0]), float(look[2])



def walks_from_words(shot: Shot, present: tuple[str, ...], subject: str | None, names: dict[str, str],
                      stage: Stage, placed: list[prop_words.PlacedProp]) -> Shot:
    """The shot with a walk for each "walks to the window" / "走到门口" of its action whose walker the
    script's own blocking does not move (from the start, at a walking pace or over the whole shot)."""
    if not shot.action:
        return shot
    moves = []
    for walker, target in prop_words.walks_said(shot.action, present, names, subject).items():
        if any(m.character == walker for m in shot.blocking):
            continue
        goal = prop_words.walk_goal(stage.body(walker), target, placed, all_bodies(stage))
        if goal is None:
            continue
        (x, z), facing = goal
        pace = math.dist(stage.position[walker], (x, z)) / prop_words.WALK_SPEED_MPS * 1.75 / stage.heights[walker]
        end = min(float(shot.duration), max(pace, 0.2 * float(shot.duration)))
        moves.append(BlockingMove(character=walker, to=(rounded(x), rounded(z)), start=0.0, end=rounded(end), facing=rounded(facing)))
    return shot.model_copy(update={"blocking": shot.blocking + tuple(moves)}) if moves else shot



def arrivals(shot: Shot, stage: Stage) -> dict[str, Body]:
    """Where the shot's own blocking leaves each walker, facing as they arrive."""
    out = {}
    for move in sorted(shot.blocking, key=lambda m: m.start):
        start = out[move.character].xz if move.character in out else stage.position[move.character]
        to = (float(move.to[0]), float(move.to[1]))
        facing = move.facing if move.facing is not None else (
            yaw_toward(start, to) if math.dist(start, to) > 1e-9 else stage.facing[move.character])
        out[move.character] = Body(move.character, to, stage.heights[move.character], float(facing))
    return out



def all_bodies(stage: Stage) -> dict[str, Body]:
    """Every character where it stands now."""
    return {char_id: stage.body(char_id) for char_id in stage.position}
