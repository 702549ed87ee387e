"""Continuity QC: does each cut keep where the characters are, which way they face, how they sit,
and which side of them the camera is on? Read from the plan (what every backend renders).

Per shot after the first, for every character it shows who was seen before, the state at the
last frame they were seen (the end of an earlier shot) against the state at this shot's first
frame:

* **jump**: the character starts more than ``JUMP_M`` from where they were last seen;
* **pose**: the body's held pose changes (seated, leaning, lying, kneeling or standing: seated then
  standing, standing then kneeling …);
* **hand**: something held at the end of the earlier shot is gone from the hand, or another thing is
  in it;
* **line**: for two characters who play to each other (each faces the other within
  ``PLAYING_CONE_DEG``) at the end of the shot before and at the start of this one, the camera is
  on the other side of the line that joins them (the 180 degree rule: who was on the left of the
  frame is now on the right, and their looks no longer meet). A camera within ``ON_THE_LINE_M``
  of the line is on it, on neither side. People who do not play to each other draw no line.

A change the shot's action says (it walks, crosses or moves the character for a jump or the
line; sits, stands, leans, lays down or kneels them for the pose; gives them a thing or has them put
it down for the hand, daotai.plan.blocking) is meant, not a fault.
"""

from __future__ import annotations

import math
from typing import Any

from daotai.plan import blocking
from daotai.plan.model import CharacterFrame, Plan, ShotPlan

JUMP_M = 0.3  # a character found further than this from where the last shot left them has jumped
ON_THE_LINE_M = 0.15  # a camera this near the line of action (on the ground) is on it, on neither side
PLAYING_CONE_DEG = 60.0  # two people each facing the other within this angle play to each other (a line between them)


def _names(plan: Plan) -> dict[str, str]:
    return {c.id: c.name or c.id for c in plan.characters}


def _posture(person: CharacterFrame) -> str | None:
    return blocking.body_posture(person.pose, person.walking, person.pose_weight)


def _holding(thing: str | None) -> str:
    """'holds a cup', 'holds some flowers', 'has empty hands'."""
    if thing is None:
        return "has empty hands"
    return f"holds {'some' if thing == 'flowers' else 'an' if thing[0] in 'aeiou' else 'a'} {thing}"


def _camera_side(shot: ShotPlan, frame: int, a: CharacterFrame, b: CharacterFrame) -> int:
    """+1 or -1: the side of the line from ``a`` to ``b`` the shot's camera is on at ``frame``; 0 on the line."""
    m = shot.cameras[frame].cam_to_world
    eye = (m[3], m[11])  # (x, z) of the camera, row-major 4x4
    ax, az = a.position
    bx, bz = b.position
    length = math.hypot(bx - ax, bz - az)
    if length < 1e-6:
        return 0
    cross = ((bx - ax) * (eye[1] - az) - (bz - az) * (eye[0] - ax)) / length  # signed distance, metres
    return 0 if abs(cross) < ON_THE_LINE_M else (1 if cross > 0 else -1)


def _play_to_each_other(a: CharacterFrame, b: CharacterFrame) -> bool:
    """Whether ``a`` and ``b`` face each other, each within PLAYING_CONE_DEG of the direction to the other."""
    for me, other in ((a, b), (b, a)):
        toward = math.degrees(math.atan2(other.position[0] - me.position[0], other.position[1] - me.position[1]))
        off = abs((toward - me.facing + 180.0) % 360.0 - 180.0)
        if off > PLAYING_CONE_DEG:
            return False
    return True


def cut_problems(plan: Plan, shot: ShotPlan) -> list[str]:
    """What the cut into ``shot`` breaks (empty: it keeps continuity, or it is the first shot)."""
    index = next(i for i, s in enumerate(plan.shots) if s.shot_id == shot.shot_id)
    if index == 0:
        return []
    names = _names(plan)
    last_seen: dict[str, tuple[ShotPlan, CharacterFrame]] = {}
    for earlier in plan.shots[:index]:
        for person in earlier.character_frames[-1]:
            last_seen[person.id] = (earlier, person)
    present = tuple(p.id for p in shot.character_frames[0])
    said = blocking.postures_said(shot.action, present, names, shot.subject)
    in_hand = blocking.holds_said(shot.action, present, names, shot.subject)
    problems = []
    for person in shot.character_frames[0]:
        if person.id not in last_seen:
            continue
        before_shot, before = last_seen[person.id]
        name = names.get(person.id, person.id)
        moves = blocking.says_moves(shot.action, person.id, present, names, shot.subject)
        distance = math.dist(before.position, person.position)
        if distance > JUMP_M and not moves:
            problems.append(f"{name} jumps {distance:.2f} m at the cut from {before_shot.shot_id} to {shot.shot_id} "
                            "with no action saying they move")
        if _posture(before) != _posture(person) and person.id not in said:
            was, now = (blocking.POSE_PHRASES[_posture(p)][1] for p in (before, person))
            problems.append(f"{name} is {was} at the end of {before_shot.shot_id} and {now} at the start of "
                            f"{shot.shot_id} with no action saying so")
        if before.held != person.held and person.id not in in_hand:
            was, now = (_holding(p.held) for p in (before, person))
            problems.append(f"{name} {was} at the end of {before_shot.shot_id} and {now} at the start of "
                            f"{shot.shot_id} with no action saying so")
    previous = plan.shots[index - 1]
    before_people = {p.id: p for p in previous.character_frames[-1]}
    now_people = {p.id: p for p in shot.character_frames[0]}
    both = sorted(set(before_people) & set(now_people))
    for i, a in enumerate(both):
        for b in both[i + 1:]:
            if not (_play_to_each_other(before_people[a], before_people[b])
                    and _play_to_each_other(now_people[a], now_people[b])):
                continue
            side_before = _camera_side(previous, previous.frames - 1, before_people[a], before_people[b])
            side_now = _camera_side(shot, 0, now_people[a], now_people[b])
            if side_before * side_now < 0 and not any(
                    blocking.says_moves(shot.action, c, present, names, shot.subject) for c in (a, b)):
                problems.append(f"the camera crosses the line between {names.get(a, a)} and {names.get(b, b)} at the "
                                f"cut from {previous.shot_id} to {shot.shot_id}: they swap sides of the frame")
    return problems


def check_cut(plan: Plan, shot: ShotPlan) -> tuple[list[str], str | None]:
    """The continuity verdict of the cut into ``shot``: (problems, what passed; None for the first shot)."""
    if not plan.shots or plan.shots[0].shot_id == shot.shot_id:
        return [], None
    problems = cut_problems(plan, shot)
    return problems, None if problems else "positions, poses and the line kept at the cut"


def continuity_report(plan: Plan) -> dict[str, Any]:
    """Every cut's continuity problems by shot id (shots without any left out)."""
    return {s.shot_id: found for s in plan.shots if (found := cut_problems(plan, s))}
