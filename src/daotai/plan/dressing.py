"""The set around the blocking: props the words name, chairs under sitters, the scene's kit laid clear
of every path and camera, and warnings for props that stand in a shot's way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daotai.plan import blocking
from daotai.plan import props as prop_words
from daotai.plan.model import PlanSetPiece, ShotPlan
from daotai.plan.set_pieces import PieceSpec, Sightline, dress_set
from daotai.plan.sets import choose_kit
from daotai.plan.shot_camera import head_share
from daotai.plan.stable import derive_seed, rounded_all
from daotai.plan.staging import Body
from daotai.script.schema import Script


def props_said(script: Script, names: dict[str, str]) -> list[prop_words.PropMention]:
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



def props_in_the_way(shot: ShotPlan, placed: list[prop_words.PlacedProp], heights: dict[str, float]) -> ShotPlan:
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
                head_share(person, heights[person.id]) * heights[person.id]
            head = np.array([person.position[0], 0.93 * heights[person.id] - drop, person.position[1]])
        for prop in placed:
            problem = prop_words.in_the_way(prop, eye, head)
            if problem is not None:
                text = f"the {prop.type.replace('_', ' ')} at {list(rounded_all(prop.xz))} m {problem}"
                if shot.subject is not None:
                    text = text.replace("the subject", shot.subject)
                if text not in said:
                    said.append(text)
    return shot.model_copy(update={"warnings": shot.warnings + tuple(said)}) if said else shot



def chairs_for_sitters(shots: list[ShotPlan], placed: list[prop_words.PlacedProp],
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



def dressed_set(script: Script, shots: list[ShotPlan]) -> tuple[PieceSpec, ...]:
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
                     tuple(sightlines), given_kit(script))



def given_kit(script: Script) -> str | None:
    """The kit the script names (scene.set), else None: the scene's words choose."""
    return script.scene.set.value if script.scene.set is not None else None


@dataclass(frozen=True)
class DressedSet:
    """The scene's set as the plan carries it: every piece (the kit's or the script's, then the props'),
    the kit's name and what choosing it said (None and () when the script lists its own pieces)."""

    pieces: tuple[PlanSetPiece, ...]
    kit: str | None
    notices: tuple[str, ...]


def standing_props(script: Script, shots: list[ShotPlan] | tuple[ShotPlan, ...], placed: list[prop_words.PlacedProp],
                   kinds: dict[str, str]) -> list[prop_words.PlacedProp]:
    """The props standing in the scene: ``placed`` (the words' or the script's own) and a chair under every
    person who sits where there is no seat."""
    return placed + chairs_for_sitters(list(shots), placed,
                                       {c.id: c.height for c in script.characters if kinds[c.id] == "person"})


def set_of(script: Script, shots: list[ShotPlan], placed: list[prop_words.PlacedProp]) -> DressedSet:
    """The scene's set: the script's own pieces, else its kit dressed around the shots (a kit piece where
    a named prop stands is left out), then the pieces of every standing prop."""
    prop_pieces = tuple(
        PlanSetPiece(kind=p.kind, name=p.name, position=p.position, size=p.size, colour=p.colour, yaw=p.yaw, glow=p.glow)
        for prop in placed for p in prop_words.pieces(prop)
    )
    pieces = script.scene.set_pieces
    if pieces is not None:
        return DressedSet(tuple(
            PlanSetPiece(
                kind=p.kind.value,
                name=p.name,
                position=(p.position[0], 0.0, p.position[1]) if len(p.position) == 2 else tuple(p.position),
                size=tuple(p.size),
                colour=tuple(p.colour),
                yaw=p.yaw,
            )
            for p in pieces
        ) + prop_pieces, None, ())
    choice = choose_kit(script.scene.name, script.scene.description, given_kit(script))
    resolved = tuple(
        PlanSetPiece(kind=p.kind, name=p.name, position=p.position, size=p.size, colour=p.colour, yaw=p.yaw,
                     glow=p.glow)
        for p in dressed_set(script, shots)
        if not any(prop_words.footprint_overlaps(p, prop) for prop in placed)  # the named prop stands there
    )
    return DressedSet(resolved + prop_pieces, choice.kit.name, (choice.notice(),))
