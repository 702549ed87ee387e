"""What a shot asks its characters' bodies to do, read from its words and fields: held poses, where
they look, whom they turn to, what they hold."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from daotai.errors import Issue, PlanError
from daotai.plan import blocking
from daotai.plan import props as prop_words
from daotai.script.schema import Shot
from daotai.script.vocab import ACTION_POSE_WORDS, LOOK_WORDS, TURN_WORDS


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
