"""Blocking from words: who sits, stands, leans, lies, kneels or holds something, for every
character a sentence names, and what carries across a cut (continuity).

Pure functions over the script's text; no numpy beyond the camera helper. A sentence is a
run of text up to ``. ; ! ? 。 ； ！ ？`` or a line break. Words are matched as in the rest of
the planner: English as whole words or phrases (lower case), Chinese as written.

Who a verb applies to: every character the sentence names (by id or name) takes the posture
verb nearest after their name (else the last one before it); a sentence that names nobody but
says "both", "they", "两人" … applies to everyone in the shot; one that names nobody and says
no group word applies to the shot's subject. A thing held goes to the character named last before
the hold verb (with those joined to them by "and", "和" …), so "Mia sits holding a cup" gives Mia
both the seat and the cup; nobody named before it: the group or the subject, as above.
"""

from __future__ import annotations

import math
import re
from typing import Mapping

import numpy as np

from daotai.plan.camera_grammar import look_at, make_pose
from daotai.plan.framing import DUTCH_ROLL_DEG, MIN_CAMERA_HEIGHT_M
from daotai.plan.staging import Placement
from daotai.script.vocab import (
    ACTION_POSE_WORDS,
    HAND_PROPS,
    HELD_POSE_WORDS,
    HOLD_WORDS,
    RELEASE_WORDS,
    SIT_DOWN_WORDS,
    STAND_UP_WORDS,
)

# How far sitting lowers the crown, as a share of the standing height, and the seat's top:
# measured from the previz rig (daotai.render.previz.meshes: _sitting_drop() = 0.230 with the
# legs folded at right angles, SEAT_H = 0.235); tests/test_blocking_props.py holds them equal.
SEATED_DROP_SHARE = 0.23
SEAT_HEIGHT_SHARE = 0.235

# Held poses of the body other than sitting, measured from the previz rig the same way
# (daotai.render.previz.meshes; tests/test_held_poses.py holds them equal): kneeling on both knees
# lowers the crown by the shin's length; a lying head's centre is this share of the height above
# what the body lies on (the back of the chest on it); a lean tilts the body this far toward what
# it leans on, turning about the head (the feet step out), so the head only drops a little.
KNEEL_DROP_SHARE = 0.23
LIE_HEAD_SHARE = 0.072
LEAN_TILT_DEG = 12.0
HEAD_CENTRE_SHARE = 0.928  # the skull's centre of a standing figure (meshes.HEAD_C)
# Poses the body holds across a cut until an action changes them (besides standing).
BODY_POSES: tuple[str, ...] = ("sit", "lean", "lie", "kneel")
# How each held pose reads in a sentence: (verb, state), for notices, QC and prompts.
POSE_PHRASES: dict[str | None, tuple[str, str]] = {
    None: ("stands", "standing"), "sit": ("sits", "seated"), "lean": ("leans", "leaning"),
    "lie": ("lies down", "lying"), "kneel": ("kneels", "kneeling"),
}

# Sizes that show less than this (m of a 1.75 m person: medium and tighter, over-the-shoulder) bring
# the camera down with a seated subject; wider ones (medium full, two-shot, full, wide) hold the
# seated head as framed for standing (the head of a 1.75 m sitter is 0.40 m lower).
LOWERED_BELOW_M = 1.2

STAND_WORDS: tuple[str, ...] = ("stand", "stands", "standing", "stood", "站", "站着", "站立")
GROUP_WORDS: tuple[str, ...] = ("both", "they", "them", "everyone", "everybody", "all", "together", "each other",
                                "两人", "二人", "俩", "他们", "她们", "大家", "一起", "都")
# Words that say a character moves from where they were (so a new place after the cut is meant).
MOVE_WORDS: tuple[str, ...] = (
    "walk", "walks", "walked", "walking", "move", "moves", "moved", "go", "goes", "went", "cross", "crosses",
    "crossed", "step", "steps", "come", "comes", "came", "enter", "enters", "arrive", "arrives", "run", "runs",
    "ran", "head", "heads", "switch", "switches", "swap", "swaps", "trade", "trades", "change places",
    "走", "来到", "走到", "走向", "移到", "过去", "穿过", "换位", "跑", "进来", "离开", "回到",
)
_SENTENCE = re.compile(r"[.;!?。；！？\n]+")

# ("sit" | "stand" | "lean" | "lie" | "kneel", "in" (sits down) | "out" (gets up) | None (held))
Posture = tuple[str, str | None]
# Words that join the names of one group of doers ("Mia and Tom", "林和王").
_JOINERS = re.compile(r"^(?:\s|,|，|、|and|&|和|与|跟|同|both)*$")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, lower case, empty ones left out."""
    return [s.strip() for s in _SENTENCE.split(text.lower()) if s.strip()]


def find_words(sentence: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of every occurrence of ``words`` in a lower-case sentence (English whole words, Chinese as written)."""
    spans = []
    for word in words:
        if word.isascii():
            pattern = rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])"
        else:
            pattern = re.escape(word)
        spans += [(m.start(), m.end()) for m in re.finditer(pattern, sentence)]
    return sorted(spans)


def named_in(sentence: str, names: Mapping[str, str], among: tuple[str, ...]) -> list[tuple[int, str]]:
    """(position, id) of the characters of ``among`` the sentence names by id or name, in order of first mention."""
    found = []
    for char_id in among:
        words = tuple({char_id.lower(), names.get(char_id, char_id).lower()} - {""})
        spans = find_words(sentence, words)
        if spans:
            found.append((spans[0][0], char_id))
    return sorted(found)


def posture_spans(sentence: str) -> list[tuple[int, int, Posture]]:
    """(start, end, posture) of the posture verbs of a sentence in order; a longer phrase claims its
    words ("stands up" is not "stands", "lies down" is one verb)."""
    claimed: list[tuple[int, int]] = []
    verbs: list[tuple[int, int, Posture]] = []
    tables: tuple[tuple[tuple[str, ...], Posture], ...] = (
        (STAND_UP_WORDS, ("stand", "out")),
        (SIT_DOWN_WORDS, ("sit", "in")),
        (ACTION_POSE_WORDS["sit"], ("sit", None)),
        (HELD_POSE_WORDS["lie"], ("lie", None)),
        (HELD_POSE_WORDS["kneel"], ("kneel", None)),
        (HELD_POSE_WORDS["lean"], ("lean", None)),
        (STAND_WORDS, ("stand", None)),
    )
    for words, posture in tables:
        for start, end in find_words(sentence, tuple(sorted(words, key=len, reverse=True))):
            if any(start < e and s < end for s, e in claimed):
                continue
            claimed.append((start, end))
            verbs.append((start, end, posture))
    return sorted(verbs)


def _posture_verbs(sentence: str) -> list[tuple[int, Posture]]:
    """Posture verbs of a sentence in order: (start, posture)."""
    return [(start, posture) for start, _, posture in posture_spans(sentence)]


def _targets(sentence: str, at: int, present: tuple[str, ...], names: Mapping[str, str], subject: str | None,
             verbs: list[int], others: tuple[int, ...] = ()) -> list[str]:
    """Who the verb at ``at`` applies to: the named characters whose nearest verb it is, else the group or the subject.
    ``others``: where verbs of another kind stand (holding, putting down); one between a name and the
    posture verbs after it is what that character does ("Mia holds a cup and Tom kneels": Mia does not kneel)."""
    named = named_in(sentence, names, present)
    if named:
        out = []
        for pos, char_id in named:
            after = [v for v in verbs if v >= pos]
            if any(pos <= o and (not after or o < after[0]) for o in others):
                continue
            nearest = after[0] if after else max(v for v in verbs if v < pos)
            if nearest == at:
                out.append(char_id)
        return out
    if find_words(sentence, GROUP_WORDS):
        return list(present)
    return [subject] if subject is not None else []


def postures_said(text: str, present: tuple[str, ...], names: Mapping[str, str],
                  subject: str | None) -> dict[str, Posture]:
    """The posture each character of the shot is given by the action's words (the last one said wins)."""
    out: dict[str, Posture] = {}
    for sentence in sentences(text):
        verbs = _posture_verbs(sentence)
        positions = [p for p, _ in verbs]
        others = _hand_verbs(sentence)
        for at, posture in verbs:
            for char_id in _targets(sentence, at, present, names, subject, positions, others):
                out[char_id] = posture
    return out


def posture_targets(sentence: str, present: tuple[str, ...], names: Mapping[str, str],
                    subject: str | None) -> list[tuple[int, int, Posture, list[str]]]:
    """(start, end, posture, whom) of every posture verb of a lower-case sentence."""
    spans = posture_spans(sentence)
    positions = [start for start, _, _ in spans]
    others = _hand_verbs(sentence)
    return [(start, end, posture, _targets(sentence, start, present, names, subject, positions, others))
            for start, end, posture in spans]


def _hand_verbs(sentence: str) -> tuple[int, ...]:
    """Where the sentence's hold and put-down verbs start (a hold verb only with a thing named after it)."""
    return tuple(at for at, _ in _hand_events(sentence))


def _hand_events(sentence: str) -> list[tuple[int, str | None]]:
    """(start, thing held or None for putting down) of the hold and put-down verbs of a sentence, in order."""
    things = tuple(sorted(HAND_PROPS, key=len, reverse=True))
    events: list[tuple[int, str | None]] = []
    claimed: list[tuple[int, int]] = []
    for words, holds in ((RELEASE_WORDS, False), (HOLD_WORDS, True)):
        for start, end in find_words(sentence, tuple(sorted(words, key=len, reverse=True))):
            if any(start < e and s < end for s, e in claimed):
                continue
            claimed.append((start, end))
            if not holds:
                events.append((start, None))
                continue
            named = [(at, HAND_PROPS[w]) for w in things for at, _ in find_words(sentence[end:], (w.replace("_", " "),))]
            if named:
                events.append((start, min(named)[1]))
    return sorted(events, key=lambda e: e[0])


def _doers_before(sentence: str, at: int, present: tuple[str, ...], names: Mapping[str, str],
                  subject: str | None) -> list[str]:
    """Whom the verb at ``at`` is done by: the last character named before it and those joined to them
    by "and", "和" …; nobody named before it: the group (a group word) or the subject."""
    named = named_in(sentence[:at], names, present)
    if not named:
        if find_words(sentence, GROUP_WORDS):
            return list(present)
        return [subject] if subject is not None else []
    mentions = []  # (start, end, id) of each named character's last mention before the verb
    for _, char_id in named:
        words = tuple({char_id.lower(), names.get(char_id, char_id).lower()} - {""})
        start, end = find_words(sentence[:at], words)[-1]
        mentions.append((start, end, char_id))
    mentions.sort()
    doers = [mentions[-1][2]]
    for i in range(len(mentions) - 1, 0, -1):
        if not _JOINERS.match(sentence[mentions[i - 1][1]:mentions[i][0]]):
            break
        doers.append(mentions[i - 1][2])
    return doers


def holds_said(text: str, present: tuple[str, ...], names: Mapping[str, str],
               subject: str | None) -> dict[str, str | None]:
    """What each character the action's words give a thing to holds (a HAND_PROPS type), or None for
    one whose words put it down; the last one said wins. A hold verb with no thing named after it
    gives nothing ("holds his gaze")."""
    out: dict[str, str | None] = {}
    for sentence in sentences(text):
        for at, thing in _hand_events(sentence):
            for char_id in _doers_before(sentence, at, present, names, subject):
                out[char_id] = thing
    return out


def says_moves(text: str, char_id: str, present: tuple[str, ...], names: Mapping[str, str],
               subject: str | None) -> bool:
    """Whether the action says ``char_id`` moves (walks, crosses, comes in …)."""
    for sentence in sentences(text):
        spans = find_words(sentence, MOVE_WORDS)
        if not spans:
            continue
        named = [c for _, c in named_in(sentence, names, present)]
        if char_id in named or (not named and (find_words(sentence, GROUP_WORDS) or char_id == subject)):
            return True
    return False


def seated_drop_m(pose: str | None, walking: bool, weight: float, height: float) -> float:
    """How far (m) a character's crown is below its standing height: a seated one's by how far into the seat."""
    if pose != "sit" or walking:
        return 0.0
    return SEATED_DROP_SHARE * height * max(0.0, min(1.0, weight))


def lowered(placement: Placement, drop: float, angle: str) -> Placement:
    """The start camera lowered with its subject by ``drop`` metres (a seated person): the same view,
    the lens no lower than the floor line (where it would be, it looks down at the lowered aim)."""
    if drop <= 0.0:
        return placement
    pose = np.array(placement.cam_to_world, np.float64)  # (4, 4)
    aim = np.array(placement.aim_point, np.float64) - np.array([0.0, drop, 0.0])  # (3,) m
    eye = pose[:3, 3] - np.array([0.0, drop, 0.0])
    if eye[1] < MIN_CAMERA_HEIGHT_M:
        eye[1] = MIN_CAMERA_HEIGHT_M
        pose = make_pose(look_at(eye, aim, roll_deg=DUTCH_ROLL_DEG if angle == "dutch" else 0.0), eye)
    else:
        pose[:3, 3] = eye
    return Placement(pose, (float(aim[0]), float(aim[1]), float(aim[2])), float(np.linalg.norm(aim - eye)))


def body_posture(pose: str | None, walking: bool, weight: float) -> str | None:
    """The held pose of the body a character frame shows ("sit", "lean", "lie", "kneel"; more than
    halfway into it), None for standing, walking or a gesture."""
    return pose if pose in BODY_POSES and not walking and weight >= 0.5 else None


def head_drop_share(pose: str | None, walking: bool, weight: float, rest_share: float = 0.0) -> float:
    """How far below a standing figure's the head's centre is, as a share of the height: sitting and
    kneeling by the rig's drop, a lean a little, lying down to ``rest_share`` (what the body lies on, as
    a share of the height) plus LIE_HEAD_SHARE; ``weight`` of the way into the pose."""
    if walking or pose not in BODY_POSES:
        return 0.0
    w = max(0.0, min(1.0, weight))
    if pose == "sit":
        return SEATED_DROP_SHARE * w
    if pose == "kneel":
        return KNEEL_DROP_SHARE * w
    if pose == "lean":
        return HEAD_CENTRE_SHARE * (1.0 - math.cos(math.radians(LEAN_TILT_DEG * w)))
    return (HEAD_CENTRE_SHARE - LIE_HEAD_SHARE - rest_share) * w


def is_seated(pose: str | None, walking: bool, weight: float) -> bool:
    """Whether a character frame shows someone in a seat (more than halfway down)."""
    return pose == "sit" and not walking and weight >= 0.5
