"""Blocking from words: who sits and who stands, for every character a sentence names, and what
carries across a cut (continuity).

Pure functions over the script's text; no numpy beyond the camera helper. A sentence is a
run of text up to ``. ; ! ? 。 ； ！ ？`` or a line break. Words are matched as in the rest of
the planner: English as whole words or phrases (lower case), Chinese as written.

Who a verb applies to: every character the sentence names (by id or name) takes the posture
verb nearest after their name (else the last one before it); a sentence that names nobody but
says "both", "they", "两人" … applies to everyone in the shot; one that names nobody and says
no group word applies to the shot's subject.
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from daotai.plan.camera import look_at, make_pose
from daotai.plan.staging import DUTCH_ROLL_DEG, MIN_CAMERA_HEIGHT_M, Placement
from daotai.script.vocab import ACTION_POSE_WORDS, SIT_DOWN_WORDS, STAND_UP_WORDS

# How far sitting lowers the crown, as a share of the standing height, and the seat's top:
# measured from the previz rig (daotai.render.previz.meshes: _sitting_drop() = 0.230 with the
# legs folded at right angles, SEAT_H = 0.235); tests/test_blocking_props.py holds them equal.
SEATED_DROP_SHARE = 0.23
SEAT_HEIGHT_SHARE = 0.235

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

Posture = tuple[str, str | None]  # ("sit" | "stand", "in" (sits down) | "out" (gets up) | None (held))


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


def _posture_verbs(sentence: str) -> list[tuple[int, Posture]]:
    """Posture verbs of a sentence in order; a longer phrase claims its words ("stands up" is not "stands")."""
    claimed: list[tuple[int, int]] = []
    verbs: list[tuple[int, Posture]] = []
    tables: tuple[tuple[tuple[str, ...], Posture], ...] = (
        (STAND_UP_WORDS, ("stand", "out")),
        (SIT_DOWN_WORDS, ("sit", "in")),
        (ACTION_POSE_WORDS["sit"], ("sit", None)),
        (STAND_WORDS, ("stand", None)),
    )
    for words, posture in tables:
        for start, end in find_words(sentence, tuple(sorted(words, key=len, reverse=True))):
            if any(start < e and s < end for s, e in claimed):
                continue
            claimed.append((start, end))
            verbs.append((start, posture))
    return sorted(verbs)


def _targets(sentence: str, at: int, present: tuple[str, ...], names: Mapping[str, str], subject: str | None,
             verbs: list[int]) -> list[str]:
    """Who the verb at ``at`` applies to: the named characters whose nearest verb it is, else the group or the subject."""
    named = named_in(sentence, names, present)
    if named:
        out = []
        for pos, char_id in named:
            after = [v for v in verbs if v >= pos]
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
        for at, posture in verbs:
            for char_id in _targets(sentence, at, present, names, subject, positions):
                out[char_id] = posture
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


def is_seated(pose: str | None, walking: bool, weight: float) -> bool:
    """Whether a character frame shows someone in a seat (more than halfway down)."""
    return pose == "sit" and not walking and weight >= 0.5
