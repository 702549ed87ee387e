"""Props from words: furniture the scene and the actions name, placed where the sentence puts it.

"A table between them", "a lamp behind her", "Mia waits at the window", "桌子在他们中间": each
prop noun (daotai.script.vocab.PROP_ALIASES) found in the scene's description or a shot's action
is placed once, relative to the characters of its sentence, as they stand when that text
applies (the scene's words: where the characters start; a shot's words: where they are as the
shot starts). The script may instead list ``scene.props`` itself. A character who sits with no
seat near gets a chair where they sit; one who lies on a bed, a sofa or a bench the sentence names
gets it under them (the head at the end away from its foot); one who leans on a prop leans toward the
nearest one of the type the sentence names (else the nearest prop in reach). Props become set pieces (boxes and cylinders, like the
kit's), so the previz draws them and they are in the depth (and hide people in the masks).

Placement rules, metres on the ground (world y up, facing 0 toward +z, docs/conventions.md):

* ``between`` (between them / between A and B / across the table / 之间 / 中间 / 对面): the midpoint
  of the two characters, long side across the line that joins them.
* ``behind`` X (behind her / 身后 / 背后): ``BEHIND_M`` behind X, opposite X's facing.
* ``in_front`` of X (in front of / 面前 / 前面): ``IN_FRONT_M`` ahead along X's facing.
* ``beside`` / ``at`` (next to / beside / near / by / at / 旁边 / 边 / 前): ``BESIDE_M`` from X, on
  the side away from the other people and back from the audience, so the prop does not stand
  between the two actors nor in front of the lens.
* plural words ("desks", "large windows") dress the set (the kit's work): no prop of their own.
* no words of place: tables and desks go between the first two characters (in front of a lone
  one); seats under whoever the sentence sits on them, else behind the group; counters, bars,
  doors, windows and cars behind the group (away from the audience side); a lamp beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from daotai.plan.blocking import (
    SEAT_HEIGHT_SHARE,
    find_words,
    named_in,
    posture_targets,
    postures_said,
    sentences,
)
from daotai.plan.set_pieces import PieceSpec
from daotai.plan.staging import AUDIENCE, Body, line_of_action, yaw_toward
from daotai.script.vocab import PROP_ALIASES, SEATING_PROPS

BEHIND_M = 0.9
IN_FRONT_M = 0.8
BESIDE_M = 0.85
BACK_OF_GROUP_M = {"door": 2.4, "window": 2.4, "car": 3.4, "sofa": 1.6, "bench": 1.6, "bed": 1.8, "chair": 1.2,
                   "stool": 1.2, "counter": 1.1, "bar_counter": 1.1}
SEAT_CLEARANCE_M = 0.45  # a sitter within this of a seating prop sits on it (no chair is added)
TABLE_SPACING_M = 1.6  # two people who sit across a table, centre to centre (knees under its top)
TABLE_LIKE = ("table", "desk")  # people sit across these: between two, in front of one

RELATION_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("between", ("between", "across", "across from", "opposite", "之间", "中间", "两边", "两侧", "对面", "隔着")),
    ("in_front", ("in front of", "面前", "前面", "跟前")),
    ("behind", ("behind", "in back of", "身后", "背后", "后面", "后边")),
    ("beside", ("next to", "beside", "near", "by", "at", "against", "旁边", "旁", "边", "附近", "前")),
)
# Prop words that are part of other words, not the prop ("a train station" names no car).
_NOT_PROPS = ("车站", "火车站", "红绿灯", "灯光", "路灯", "街灯", "门票", "bar chart", "barely", "tabled")

# Verbs that walk someone to a prop or a person named after them ("walks to the window", "走到门口").
WALK_TO_WORDS: tuple[str, ...] = (
    "walks to", "walk to", "walking to", "walks over to", "walks up to", "goes to", "goes over to", "crosses to",
    "moves to", "heads to", "heads for", "steps to", "comes to", "comes over to", "returns to",
    "走到", "走向", "来到", "走去", "回到", "走近", "走过去到",
)

RGB = tuple[float, float, float]
WOOD: RGB = (0.55, 0.40, 0.27)
LIGHT_WOOD: RGB = (0.72, 0.58, 0.42)
FABRIC: RGB = (0.42, 0.47, 0.58)
PAINT: RGB = (0.84, 0.82, 0.77)
GLASS: RGB = (0.58, 0.72, 0.84)
STEEL: RGB = (0.30, 0.31, 0.34)
SHADE: RGB = (0.96, 0.90, 0.74)

# A prop's parts in its own frame: (kind, base centre (x, y, z), size (w, h, d), colour, glows);
# origin on the ground at the prop's centre, +z its front.
Part = tuple[str, tuple[float, float, float], tuple[float, float, float], RGB, bool]


def _legs(w: float, d: float, h: float, colour: RGB, t: float = 0.05) -> tuple[Part, ...]:
    return tuple(("box", (sx * (w / 2 - t), 0.0, sz * (d / 2 - t)), (t, h, t), colour, False)
                 for sx in (-1, 1) for sz in (-1, 1))


def _table(w: float, d: float, h: float, colour: RGB) -> tuple[Part, ...]:
    """A top on four legs: a sitter's knees go under it."""
    return (("box", (0.0, h - 0.04, 0.0), (w, 0.04, d), colour, False), *_legs(w, d, h - 0.04, colour))


def _seat(w: float, d: float, seat_h: float, back_h: float, colour: RGB) -> tuple[Part, ...]:
    """A solid seat to ``seat_h`` and a back behind it (a chair's, a sofa's)."""
    return (("box", (0.0, 0.0, 0.0), (w, seat_h, d), colour, False),
            ("box", (0.0, seat_h, -d / 2 + 0.03), (w, back_h, 0.06), colour, False))


def _wall_with(opening: Part) -> tuple[Part, ...]:
    return (("box", (0.0, 0.0, -0.06), (2.6, 2.7, 0.12), PAINT, False), opening)


SHAPES: Mapping[str, tuple[Part, ...]] = {
    "table": _table(1.2, 0.75, 0.74, LIGHT_WOOD),
    "desk": (*_table(1.4, 0.7, 0.74, WOOD), ("box", (0.0, 0.0, -0.3), (1.3, 0.7, 0.04), WOOD, False)),
    "counter": (("box", (0.0, 0.0, 0.0), (2.0, 0.92, 0.62), PAINT, False),
                ("box", (0.0, 0.92, 0.0), (2.06, 0.04, 0.68), STEEL, False)),
    "bar_counter": (("box", (0.0, 0.0, 0.0), (2.6, 1.06, 0.55), WOOD, False),
                    ("box", (0.0, 1.06, 0.0), (2.7, 0.05, 0.7), LIGHT_WOOD, False)),
    "chair": _seat(0.46, 0.44, 0.44, 0.48, WOOD),
    "stool": (("cylinder", (0.0, 0.0, 0.0), (0.36, 0.68, 0.36), STEEL, False),),
    "sofa": (*_seat(2.0, 0.85, 0.42, 0.45, FABRIC), ("box", (-0.95, 0.0, 0.0), (0.16, 0.62, 0.85), FABRIC, False),
             ("box", (0.95, 0.0, 0.0), (0.16, 0.62, 0.85), FABRIC, False)),
    "bench": (("box", (0.0, 0.40, 0.0), (1.6, 0.06, 0.45), WOOD, False), *_legs(1.6, 0.45, 0.40, STEEL)),
    "bed": (("box", (0.0, 0.0, 0.0), (1.5, 0.5, 2.0), PAINT, False),
            ("box", (0.0, 0.0, -1.0), (1.55, 1.0, 0.08), WOOD, False)),
    "door": _wall_with(("box", (0.0, 0.0, 0.01), (0.95, 2.1, 0.06), WOOD, False)),
    "window": _wall_with(("box", (0.0, 0.9, 0.01), (1.4, 1.2, 0.04), GLASS, False)),
    "lamp": (("cylinder", (0.0, 0.0, 0.0), (0.05, 1.5, 0.05), STEEL, False),
             ("cylinder", (0.0, 1.45, 0.0), (0.42, 0.32, 0.42), SHADE, True)),
    "car": (("box", (0.0, 0.25, 0.0), (4.2, 0.75, 1.8), (0.70, 0.12, 0.12), False),
            ("box", (-0.2, 1.0, 0.0), (2.2, 0.55, 1.6), GLASS, False),
            *(("box", (sx * 1.3, 0.0, sz * 0.85), (0.62, 0.6, 0.2), (0.08, 0.08, 0.09), False)
              for sx in (-1, 1) for sz in (-1, 1))),
}


@dataclass(frozen=True)
class PropMention:
    """A prop the words name: which, where relative to whom, and which text said it."""

    type: str  # a PropType value
    relation: str  # "between", "in_front", "behind", "beside", "walk_target" or "default"
    anchors: tuple[str, ...]  # character ids the place is relative to (may be empty: the group)
    source: int  # -1: the scene's description; else the index of the shot whose action names it
    sitters: tuple[str, ...] = ()  # characters the sentence sits (on a seat prop; across a table)
    liers: tuple[str, ...] = ()  # characters the sentence lays down (on a bed, a sofa, a bench)


@dataclass(frozen=True)
class PlacedProp:
    """A prop on the ground: its type, centre (x, z), facing and size scale."""

    type: str
    xz: tuple[float, float]
    facing: float  # degrees; 0: its front faces +z
    depth: float | None = None  # a table's depth along its facing, fitted between two people (None: its own)
    seat_height: float | None = None  # a chair's seat fitted to its sitter (None: its own)


def _prop_words() -> list[tuple[str, str]]:
    """(phrase as written in text, prop type), longest first: "bar counter" before "bar"."""
    words = [(alias.replace("_", " "), kind) for alias, kind in PROP_ALIASES.items()]
    return sorted(words, key=lambda w: len(w[0]), reverse=True)


def _plural(phrase: str) -> bool:
    """Whether an English prop word is a plural of another one ("desks", "benches")."""
    known = {alias.replace("_", " ") for alias in PROP_ALIASES}
    return phrase.isascii() and phrase.endswith("s") and (phrase[:-1] in known or phrase[:-2] in known)


def props_in(sentence: str, plurals: bool = True) -> list[tuple[int, str]]:
    """(position, type) of the props a lower-case sentence names, each span claimed once;
    ``plurals=False`` leaves out plural words ("desks": the set's dressing, not one prop)."""
    claimed = [span for word in _NOT_PROPS for span in find_words(sentence, (word,))]
    found = []
    for phrase, kind in _prop_words():
        for start, end in find_words(sentence, (phrase,)):
            if any(start < e and s < end for s, e in claimed):
                continue
            claimed.append((start, end))
            if plurals or not _plural(phrase):
                found.append((start, kind))
    return sorted(found)


def _relation(sentence: str, at: int) -> str:
    """The place word the prop at ``at`` is nearest to in its sentence, "default" for none."""
    best, best_gap = "default", math.inf
    for relation, words in RELATION_WORDS:
        for start, _ in find_words(sentence, words):
            gap = abs(start - at)
            if gap < best_gap:
                best, best_gap = relation, gap
    return best


def mentions(texts: list[tuple[int, str]], characters: tuple[str, ...], names: Mapping[str, str],
             subjects: Mapping[int, str | None]) -> list[PropMention]:
    """Every prop the texts name, one per type: the first mention that says where, else the first; a
    bed, sofa or bench someone lies on ("lies on the bed", no place word) stands under them.

    ``texts``: (source, text) pairs, -1 for the scene's description, else a shot's index;
    ``subjects``: each source's subject (whom a pronoun or a lone verb means).
    """
    chosen: dict[str, PropMention] = {}
    for source, text in texts:
        subject = subjects.get(source)
        for sentence in sentences(text):
            named = tuple(c for _, c in named_in(sentence, names, characters))
            said = postures_said(sentence, characters, names, subject)
            sat = tuple(c for c, (posture, _) in said.items() if posture == "sit")
            lay = tuple(c for c, (posture, _) in said.items() if posture == "lie")
            walk_spans = find_words(sentence, WALK_TO_WORDS)
            for at, kind in props_in(sentence, plurals=False):
                relation = _relation(sentence, at)
                if kind in TABLE_LIKE and relation == "beside":  # "sit at the table": at it, not off to one side
                    relation = "between" if len(named) >= 2 else "in_front"
                if relation == "default" and any(end <= at for _, end in walk_spans):
                    relation = "walk_target"  # "walks to his desk": the desk is where the walk ends
                anchors = named or ((subject,) if subject is not None and relation in ("behind", "in_front", "beside",
                                                                                      "walk_target") else ())
                mention = PropMention(kind, relation, anchors, source, sat, lay if kind in LIE_ON else ())
                if kind not in chosen or (chosen[kind].relation == "default" and relation != "default") or (
                        mention.liers and not chosen[kind].liers and relation == "default"):
                    chosen[kind] = mention  # lying on it says where it is: under them
    return list(chosen.values())


def _group_back(bodies: tuple[Body, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The group's centre (x, z) and the ground unit vector from it away from the audience side."""
    if not bodies:
        return np.zeros(2), -np.array(AUDIENCE, np.float64)
    centre, _, normal = line_of_action(bodies)
    return centre, -normal


def place(mention: PropMention, bodies: Mapping[str, Body], arrivals: Mapping[str, Body] | None = None) -> PlacedProp:
    """Where a mentioned prop stands, from the characters as they stand now (``bodies``: every character);
    ``arrivals``: where the shot's own blocking takes its walkers (a prop they walk to stands before them there)."""
    everyone = tuple(bodies.values())
    anchors = [bodies[c] for c in mention.anchors if c in bodies]
    kind, relation = mention.type, mention.relation
    if relation == "walk_target":
        walker = next((arrivals[c] for c in mention.anchors if arrivals and c in arrivals), None)
        if walker is not None:
            ahead = np.array([math.sin(math.radians(walker.facing)), math.cos(math.radians(walker.facing))])
            xz = np.array(walker.xz) + ahead * (IN_FRONT_M + 0.5 * min(SHAPES[kind][0][2][0], SHAPES[kind][0][2][2]))
            return PlacedProp(kind, (float(xz[0]), float(xz[1])), yaw_toward(tuple(xz), walker.xz))
        relation = "default"  # no blocking: placed as usual, and the words walk them to it
    centre, back = _group_back(everyone)
    if relation == "default":
        if kind in TABLE_LIKE:
            relation = "between" if len(everyone) >= 2 else "in_front"
        elif kind in LIE_ON and mention.liers:
            lier = bodies[mention.liers[0]]
            return under_lier(kind, lier, [b.xz for b in everyone if b is not lier])
        elif kind in SEATING_PROPS and mention.sitters:
            sitter = bodies[mention.sitters[0]]
            return PlacedProp(kind, sitter.xz, sitter.facing)
        elif kind == "lamp":
            relation = "beside"
    if relation == "between":
        pair = anchors if len(anchors) >= 2 else (anchors + [b for b in everyone if b not in anchors])[:2]
        if len(pair) < 2:
            relation = "in_front"
        else:
            a, b = np.array(pair[0].xz), np.array(pair[1].xz)
            mid = (a + b) / 2.0
            gap = float(np.linalg.norm(b - a))
            depth = min(0.9, max(0.5, gap - 0.9)) if kind in TABLE_LIKE else None
            return PlacedProp(kind, (float(mid[0]), float(mid[1])), yaw_toward(tuple(mid), pair[1].xz), depth)
    who = anchors[0] if anchors else (everyone[0] if len(everyone) == 1 else None)
    if who is not None and relation in ("behind", "in_front"):
        facing = np.array([math.sin(math.radians(who.facing)), math.cos(math.radians(who.facing))])
        step = -BEHIND_M if relation == "behind" else IN_FRONT_M
        xz = np.array(who.xz) + facing * step
        return PlacedProp(kind, (float(xz[0]), float(xz[1])), yaw_toward(tuple(xz), who.xz))
    if who is not None and relation == "beside":
        others = [np.array(b.xz) for b in everyone if b is not who]
        away = np.array(who.xz) - np.mean(others, axis=0) if others else np.array([1.0, 0.0])
        away = away / max(float(np.linalg.norm(away)), 1e-9)
        toward_back = _group_back((who,))[1] if not others else back
        direction = away + 0.6 * toward_back
        direction = direction / max(float(np.linalg.norm(direction)), 1e-9)
        xz = np.array(who.xz) + direction * BESIDE_M
        facing = yaw_toward(tuple(xz), who.xz) if kind not in ("door", "window") else yaw_toward(tuple(xz), tuple(centre))
        return PlacedProp(kind, (float(xz[0]), float(xz[1])), facing)
    # behind the group, facing it: doors, windows, cars, seats nobody sits on
    distance = BACK_OF_GROUP_M.get(kind, 1.4)
    xz = centre + back * distance
    return PlacedProp(kind, (float(xz[0]), float(xz[1])), yaw_toward(tuple(xz), tuple(centre)))


# What a body lies on: the top of its surface (m) and how far along its long side the lying head is
# from its centre (m); a bed's long side is its depth (the headboard behind), a sofa's and a bench's
# their width.
LIE_ON: Mapping[str, tuple[float, float]] = {"bed": (0.5, 0.85), "sofa": (0.42, 0.8), "bench": (0.46, 0.6)}
LIE_ON_REACH_M = 0.3  # someone lying whose head is within this of a bed's (sofa's …) footprint lies on it
LEAN_REACH_M = 2.0  # a lean goes toward a prop this near (m, centre to centre), else forward


def feet_yaw(xz: tuple[float, float], others: list[tuple[float, float]]) -> float:
    """Which way (yaw, degrees) a body lying with its head at ``xz`` points its feet: across the view
    from the audience side (the cameras on that side of the line see the whole body), away from the
    others (they are at the head, not under the feet); alone, toward +x."""
    across = np.array([AUDIENCE[1], -AUDIENCE[0]])  # (2,) the audience direction turned a quarter
    if others and float((np.array(xz) - np.mean(np.array(others), axis=0)) @ across) < 0.0:
        across = -across
    return yaw_toward((0.0, 0.0), (float(across[0]), float(across[1])))


def under_lier(kind: str, body: Body, others: list[tuple[float, float]]) -> PlacedProp:
    """A bed, sofa or bench under someone lying down: the head (at ``body.xz``) at one end of its long
    side, the feet along :func:`feet_yaw`, a bed's headboard behind the head, a sofa's back away from
    the audience."""
    feet = feet_yaw(body.xz, others)
    xz = np.array(body.xz) + np.array([math.sin(math.radians(feet)), math.cos(math.radians(feet))]) * LIE_ON[kind][1]
    # a bed's long side is its local z (the headboard at -z), a sofa's and a bench's local x (the back at -z)
    facing = feet if kind == "bed" else yaw_toward((0.0, 0.0), AUDIENCE)
    return PlacedProp(kind, (float(xz[0]), float(xz[1])), facing)


def lie_surface(xz: tuple[float, float], props: list[PlacedProp]) -> tuple[float, float | None, str | None]:
    """What someone lying with the head at ``xz`` lies on: (the top's height in m, the yaw in degrees their
    feet point along its long side, toward its centre, its type); (0, None, None) for the floor."""
    for prop in sorted((p for p in props if p.type in LIE_ON), key=lambda p: math.dist(p.xz, xz)):
        size = SHAPES[prop.type][0][2]
        here = _rectangle(xz, (0.01, 0.01), 0.0)
        if _rectangle_gap(_rectangle(prop.xz, (size[0], size[2]), prop.facing), here) > LIE_ON_REACH_M:
            continue
        axis = prop.facing if prop.type == "bed" else prop.facing + 90.0
        along = np.array([math.sin(math.radians(axis)), math.cos(math.radians(axis))])
        toward = np.array(prop.xz) - np.array(xz)
        if float(toward @ along) < 0.0:
            axis += 180.0
        return LIE_ON[prop.type][0], axis, prop.type
    return 0.0, None, None


def lean_target(xz: tuple[float, float], kind: str | None, props: list[PlacedProp]) -> PlacedProp | None:
    """The prop someone at ``xz`` leans on: the nearest of type ``kind`` within LEAN_REACH_M, else the
    nearest prop within it; None with none in reach."""
    near = sorted((p for p in props if math.dist(p.xz, xz) <= LEAN_REACH_M), key=lambda p: math.dist(p.xz, xz))
    named = [p for p in near if p.type == kind]
    return (named or near or [None])[0]


def pose_props_said(text: str, present: tuple[str, ...], names: Mapping[str, str],
                    subject: str | None) -> dict[str, str]:
    """The prop each character the words lean or lay down is on: the first prop named after the verb
    in its sentence ("leans on the counter", "躺在沙发上"); the last one said wins."""
    out: dict[str, str] = {}
    for sentence in sentences(text):
        for _, end, (posture, _), whom in posture_targets(sentence, present, names, subject):
            if posture not in ("lean", "lie"):
                continue
            after = props_in(sentence[end:])
            for char_id in whom:
                if after:
                    out[char_id] = after[0][1]
                else:
                    out.pop(char_id, None)
    return out


def chair_for(body: Body, facing: float) -> PlacedProp:
    """A chair under a sitter: its seat at the sitter's seat height, its back behind them."""
    return PlacedProp("chair", body.xz, facing, seat_height=SEAT_HEIGHT_SHARE * body.height)


def needs_a_seat(xz: tuple[float, float], props: list[PlacedProp]) -> bool:
    """Whether a sitter at ``xz`` has no seating prop under them."""
    return not any(p.type in SEATING_PROPS and math.dist(p.xz, xz) < SEAT_CLEARANCE_M
                   + (0.8 if p.type in ("sofa", "bench", "bed") else 0.0) for p in props)


def pieces(prop: PlacedProp) -> tuple[PieceSpec, ...]:
    """The set pieces that draw a placed prop (the prop's frame turned by its facing about +y)."""
    parts = SHAPES[prop.type]
    if prop.type == "table" and prop.depth is not None:
        parts = _table(1.2, prop.depth, 0.74, LIGHT_WOOD)
    if prop.type == "chair" and prop.seat_height is not None:
        # a sitter's chair: its seat is the one the figure sits on (the previz seat's size and place)
        parts = (("box", (0.0, 0.0, 0.05 * prop.seat_height / SEAT_HEIGHT_SHARE),
                  (0.26 / SEAT_HEIGHT_SHARE * prop.seat_height, prop.seat_height,
                   0.24 / SEAT_HEIGHT_SHARE * prop.seat_height), WOOD, False),
                 ("box", (0.0, prop.seat_height, -0.2), (0.44, 0.46, 0.05), WOOD, False))
    yaw = math.radians(prop.facing)
    c, s = math.cos(yaw), math.sin(yaw)
    x0, z0 = prop.xz
    out = []
    for kind, (px, py, pz), size, colour, glow in parts:
        # facing f turns local +z to (sin f, cos f): world = (x0 + c·px + s·pz, z0 − s·px + c·pz)
        wx, wz = x0 + c * px + s * pz, z0 - s * px + c * pz
        out.append(PieceSpec(kind, prop.type.replace("_", " "), (round(wx, 6), round(py, 6), round(wz, 6)),
                             (round(size[0], 6), round(size[1], 6), round(size[2], 6)), colour,
                             round(prop.facing, 6), glow=glow))
    return tuple(out)


def _rectangle(centre: tuple[float, float], size: tuple[float, float], yaw_deg: float) -> np.ndarray:
    """(4, 2) ground corners (x, z) of a w x d footprint about ``centre``, turned ``yaw_deg`` about +y."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    w, d = size
    local = np.array([(-w / 2, -d / 2), (w / 2, -d / 2), (w / 2, d / 2), (-w / 2, d / 2)])  # (4, 2)
    return np.column_stack([centre[0] + c * local[:, 0] + s * local[:, 1], centre[1] - s * local[:, 0] + c * local[:, 1]])


def _rectangle_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Metres between two convex ground quads (4, 2) each; 0 where they overlap."""
    def inside(point: np.ndarray, quad: np.ndarray) -> bool:
        edges = np.roll(quad, -1, axis=0) - quad  # (4, 2)
        cross = edges[:, 0] * (point[1] - quad[:, 1]) - edges[:, 1] * (point[0] - quad[:, 0])
        return bool((cross >= -1e-9).all() or (cross <= 1e-9).all())

    def to_edges(point: np.ndarray, quad: np.ndarray) -> float:
        start, edges = quad, np.roll(quad, -1, axis=0) - quad
        t = np.clip(((point - start) * edges).sum(axis=1) / np.maximum((edges * edges).sum(axis=1), 1e-12), 0.0, 1.0)
        return float(np.linalg.norm(start + t[:, None] * edges - point, axis=1).min())

    if any(inside(p, b) for p in a) or any(inside(p, a) for p in b):
        return 0.0
    return min(min(to_edges(p, b) for p in a), min(to_edges(p, a) for p in b))


def footprint_overlaps(piece: PieceSpec, prop: PlacedProp, margin: float = 0.3) -> bool:
    """Whether a set piece stands where a prop stands (so the kit leaves it out): their ground footprints
    come within ``margin`` of each other, and the piece is not hung above the prop's top.

    Footprints are measured edge to edge, not centre to centre: a wall or a ceiling spans the whole set,
    and measured by its middle and half its diagonal it would stand "where" every prop stands and be
    left out, opening the set onto the void behind it."""
    parts = SHAPES[prop.type]
    if piece.position[1] >= max(offset[1] + size[1] for _, offset, size, *_ in parts):
        return False  # a ceiling, a ceiling light: above the prop, not in its place
    prop_size = parts[0][2]
    prop_quad = _rectangle(prop.xz, (prop_size[0], prop_size[2] if prop.depth is None else prop.depth), prop.facing)
    piece_quad = _rectangle((piece.position[0], piece.position[2]), (piece.size[0], piece.size[2]), piece.yaw)
    return _rectangle_gap(prop_quad, piece_quad) < margin


def table_between_defaults(found: list[PropMention], characters: tuple[str, ...]) -> bool:
    """Whether the words put a table between the first two characters (who then sit ``TABLE_SPACING_M`` apart)."""
    return len(characters) >= 2 and any(
        m.type in TABLE_LIKE and m.relation in ("between", "default")
        and (len(m.anchors) < 2 or set(m.anchors[:2]) == set(characters[:2])) for m in found)


WALK_SPEED_MPS = 1.2  # a walk the words ask for goes at this pace (a 1.75 m person), or the whole shot
STANDOFF_M = 0.45  # a walker stops this far short of a prop's near side
BESIDE_PERSON_M = 0.9  # ... or this far from the person they walk to


def walks_said(text: str, present: tuple[str, ...], names: Mapping[str, str],
               subject: str | None) -> dict[str, tuple[str, str]]:
    """Who the action walks where: walker id -> ("prop", type) or ("character", id), the first prop or
    person named after the walk verb; the walkers are those named before it (else the group, else the subject)."""
    out: dict[str, tuple[str, str]] = {}
    for sentence in sentences(text):
        for start, end in find_words(sentence, tuple(sorted(WALK_TO_WORDS, key=len, reverse=True))):
            rest = sentence[end:]
            targets = [(pos, ("prop", kind)) for pos, kind in props_in(rest)]
            targets += [(pos, ("character", c)) for pos, c in named_in(rest, names, present)]
            if not targets:
                continue
            target = min(targets)[1]
            walkers = [c for _, c in named_in(sentence[:start], names, present)]
            if not walkers:
                walkers = list(present) if find_words(sentence[:start], ("both", "they", "两人", "他们", "她们")) else (
                    [subject] if subject is not None else [])
            for walker in walkers:
                if target != ("character", walker):
                    out.setdefault(walker, target)
    return out


def walk_goal(walker: Body, target: tuple[str, str], props: list[PlacedProp],
              bodies: Mapping[str, Body]) -> tuple[tuple[float, float], float] | None:
    """Where a walk the words ask for ends and which way the walker faces there; None when the target
    is not on the set or the walker is already there."""
    kind, name = target
    here = np.array(walker.xz, np.float64)
    if kind == "character":
        if name not in bodies:
            return None
        there, reach = np.array(bodies[name].xz, np.float64), BESIDE_PERSON_M
    else:
        found = [p for p in props if p.type == name]
        if not found:
            return None
        prop = min(found, key=lambda p: math.dist(p.xz, walker.xz))
        w, _, d = SHAPES[prop.type][0][2]
        there, reach = np.array(prop.xz, np.float64), 0.5 * min(w, d) + STANDOFF_M
    offset = here - there
    distance = float(np.linalg.norm(offset))
    if distance <= reach + 0.1:
        return None
    goal = there + offset / distance * reach
    return (float(goal[0]), float(goal[1])), yaw_toward((float(goal[0]), float(goal[1])), tuple(there))


def _box_hit(eye: np.ndarray, target: np.ndarray | None, piece: PieceSpec, margin: float) -> str | None:
    """"inside" when ``eye`` lies in the piece's box grown by ``margin``; "between" when the segment from
    ``eye`` to ``target`` passes through the box short of the target (slab test in the piece's frame)."""
    yaw = math.radians(piece.yaw)
    c, s = math.cos(yaw), math.sin(yaw)

    def local(p: np.ndarray) -> np.ndarray:
        rel = p - np.array(piece.position)
        return np.array([c * rel[0] - s * rel[2], rel[1], s * rel[0] + c * rel[2]])

    w, h, d = piece.size
    lo, hi = np.array([-w / 2, 0.0, -d / 2]), np.array([w / 2, h, d / 2])
    a = local(eye)
    if np.all(a >= lo - margin) and np.all(a <= hi + margin):
        return "inside"
    if target is None:
        return None
    direction = local(target) - a
    t0, t1 = 0.0, 0.95  # short of the target itself
    for k in range(3):
        if abs(direction[k]) < 1e-12:
            if a[k] < lo[k] or a[k] > hi[k]:
                return None
            continue
        u0, u1 = (lo[k] - a[k]) / direction[k], (hi[k] - a[k]) / direction[k]
        t0, t1 = max(t0, min(u0, u1)), min(t1, max(u0, u1))
        if t0 > t1:
            return None
    return "between"


CAMERA_MARGIN_M = 0.1  # a camera this near a prop's surface is in it


def in_the_way(prop: PlacedProp, eye: np.ndarray, head: np.ndarray | None) -> str | None:
    """What a placed prop does to a camera at ``eye`` looking at a subject's ``head`` (world metres):
    "holds the camera", "stands between the camera and the subject's head", or None."""
    hits = [_box_hit(eye, head, piece, CAMERA_MARGIN_M) for piece in pieces(prop)]
    if "inside" in hits:
        return "holds the camera"
    if "between" in hits:
        return "stands between the camera and the subject's head"
    return None
