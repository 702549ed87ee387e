"""Script → Plan: timing, staging, camera trajectories, seeds and prompts (pure, no torch).

The same script always gives the same plan, byte for byte (see :func:`plan_to_json`).
:func:`plan_script` is the order of the steps; each step lives in its own module: where the
characters are (:mod:`~daotai.plan.continuity`), each shot's transition
(:mod:`~daotai.plan.transitions`) and camera (:mod:`~daotai.plan.shot_camera`), the set around
them (:mod:`~daotai.plan.dressing`), the prompts (:mod:`~daotai.plan.prompt`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from daotai import __version__, catalog
from daotai.errors import NO_VALUE, Issue, PlanError
from daotai.plan import dressing
from daotai.plan import prompt as prompts
from daotai.plan import props as prop_words
from daotai.plan.continuity import Stage, all_bodies, arrivals, character_frames, held_pose_sentence, walks_from_words
from daotai.plan.framing import FRAMING_SIZE
from daotai.plan.model import (
    DialoguePlan,
    FootagePlan,
    MotionCodeJSON,
    Plan,
    PlanCharacter,
    PlanScene,
    ResolvedMove,
    ShotPlan,
    ShotSoundPlan,
    SnapInfo,
    SoundtrackPlan,
    TransitionPlan,
)
from daotai.plan.motion_code import encode_motion
from daotai.plan.reading import dialogue_warning
from daotai.plan.scene_words import character_kind, time_of_day_from_words
from daotai.plan.shot_camera import shot_camera
from daotai.plan.stable import derive_seed, rounded, rounded_all, script_hash
from daotai.plan.timing import fps_fraction, frames_for, snap_for
from daotai.plan.transitions import CUT, closing_fade, transition_in
from daotai.plan.wardrobe import wardrobe_from_appearance
from daotai.script.schema import DEFAULT_CHARACTER_COLOURS, Character, Script, Shot
from daotai.script.vocab import OVERLAPPING_TRANSITIONS

_SHOT_TYPE_WORDS = {"over_the_shoulder": "Over-the-shoulder", "two_shot": "Two-shot,"}


def plan_script(script: Script) -> Plan:
    """Turn a validated script into an exact, reproducible plan."""
    cast = _Cast.of(script)
    problems: list[Issue] = []  # every shot's plan problems, reported together once all shots were tried
    run = _plan_shots(script, cast, problems)
    closing = closing_fade(script.fade_out, script.shots[-1].shot_id, run.last_frames, run.last_transition,
                           float(script.fps), problems)
    if problems:
        raise PlanError.of(problems)
    placed = dressing.standing_props(script, run.shots, run.placed, cast.kinds)
    heights = {c.id: c.height for c in script.characters}
    shots = [dressing.props_in_the_way(shot, placed, heights) for shot in run.shots]
    return _assemble(script, cast, tuple(shots), run.total_frames, closing, dressing.set_of(script, shots, placed))


@dataclass(frozen=True)
class _Cast:
    """What the plan knows of the characters before any shot: names, kinds, colours, the scene's time."""

    names: dict[str, str]
    kinds: dict[str, str]  # "person" | "animal"
    colours: dict[str, tuple[float, float, float]]
    scene_time: str

    @classmethod
    def of(cls, script: Script) -> _Cast:
        return cls(
            names={c.id: c.name or c.id for c in script.characters},
            kinds={c.id: character_kind(c.name, c.appearance, c.id) for c in script.characters},
            colours={c.id: character_colour(c, i) for i, c in enumerate(script.characters)},
            scene_time=scene_time_of_day(script),
        )


@dataclass(frozen=True)
class _Shots:
    """The shots planned in order, and what the closing fade and the set need from the run of them."""

    shots: tuple[ShotPlan, ...]
    total_frames: int
    placed: list[prop_words.PlacedProp]  # the props the words name, placed as the shots went
    last_frames: int  # the last shot's frame count (0: no shot)
    last_transition: TransitionPlan  # the last shot's transition in


def _plan_shots(script: Script, cast: _Cast, problems: list[Issue]) -> _Shots:
    """Every shot in order, the characters carried from one to the next; a shot whose camera cannot be
    placed adds its problems and is left out (the next shots are still planned)."""
    fps = float(script.fps)
    names = cast.names
    said_props = dressing.props_said(script, names)
    stage = Stage(script, spacing=prop_words.TABLE_SPACING_M
                  if prop_words.table_between_defaults(said_props, tuple(c.id for c in script.characters)) else 1.2)
    placed = [prop_words.place(m, all_bodies(stage)) for m in said_props if m.source < 0]
    given_props = None if script.scene.props is None else [
        prop_words.PlacedProp(p.type.value, tuple(p.position), float(p.facing)) for p in script.scene.props]
    all_ids = tuple(c.id for c in script.characters)
    shots: list[ShotPlan] = []
    cursor, last_transition = 0, CUT
    prev_frames: int | None = None
    for index, shot in enumerate(script.shots):
        n_frames = frames_for(shot.duration, fps)
        present = shot.characters if shot.characters is not None else all_ids
        subject = shot.subject or (present[0] if present else None)
        seed = shot.seed if shot.seed is not None else derive_seed(script.seed, "shot", shot.shot_id)
        warnings: list[str] = []
        if len(present) == 2:
            stage.face_each_other(present)
        bodies = {c: stage.body(c) for c in present}  # where they stand as the shot starts
        placed += [prop_words.place(m, all_bodies(stage), arrivals(shot, stage)) for m in said_props
                   if m.source == index]
        shot = walks_from_words(shot, present, subject, names, stage, placed)
        frames = character_frames(shot, present, stage, n_frames, fps, subject, names, f"shots[{index}]",
                                  problems, warnings, given_props if given_props is not None else placed)
        transition = transition_in(shot, index, fps, prev_frames, n_frames, problems)
        prev_frames, last_transition = n_frames, transition
        try:
            framing, move, placement, cameras, framed_at = shot_camera(
                shot, index, shot.framing.value, present, subject, bodies, frames, cast.kinds,
                script.size.width, script.size.height, fps, seed, warnings,
                given_props if given_props is not None else placed)
        except PlanError as exc:  # this shot's camera cannot be placed: the next shots are still planned
            problems.extend(_issues_of(exc, f"shots[{index}].camera"))
            continue
        spoken = dialogue_warning([(names.get(d.character, d.character), d.line) for d in shot.dialogue],
                                  round(n_frames / fps, 3))
        if spoken is not None:  # a warning, not an error: a director may mean lines to run over the cut
            warnings.append(spoken)
        if transition.type in OVERLAPPING_TRANSITIONS:
            cursor -= transition.frames
        text = _shot_prompt(script, cast, shot, framing, move, subject, present,
                            held_pose_sentence(frames[0], shot, present, subject, names, stage))
        code = encode_motion(move.motion)
        shots.append(ShotPlan(
            index=index,
            shot_id=shot.shot_id,
            start_frame=cursor,
            frames=n_frames,
            duration_s=rounded(n_frames / fps),
            requested_duration_s=float(shot.duration),
            seed=seed,
            subject=subject,
            framing=framing,
            angle=shot.angle.value,
            characters=tuple(present),
            move=move,
            motion_code=MotionCodeJSON(theta_q=code.theta_q, phi_q=code.phi_q, magnitude=rounded(code.magnitude)),
            aim_point=rounded_all(placement.aim_point),  # type: ignore[arg-type]
            subject_distance=rounded(placement.distance),
            transition=transition,
            action=shot.action,
            prompt=text,
            negative_prompt=prompts.compose_negative(shot.negative_prompt),
            snapping=_snapping(script.size.width, script.size.height, n_frames),
            warnings=tuple(warnings),
            cameras=cameras,
            character_frames=tuple(frames),
            sound=_shot_sound(shot),
            framed_at=framed_at or None,
            reference_video=_footage(shot),
        ))
        cursor += n_frames
    return _Shots(tuple(shots), cursor, placed if given_props is None else list(given_props), prev_frames or 0,
                  last_transition)


def _shot_prompt(script: Script, cast: _Cast, shot: Shot, framing: str, move: ResolvedMove, subject: str | None,
                 present: tuple[str, ...], held: str) -> str:
    """The shot's model prompt: size and angle, who is in it and how they look, the scene, the move, the
    action, and ``held`` (the poses and things in hand carried into the shot that its words do not say)."""
    others = [(cast.names[c], script.character(c).appearance) for c in present if c != subject]
    subject_name = cast.names[subject] if subject else None
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
        cast.scene_time,
        move_phrase,
        shot.action,
        shot.prompt,
        held,
    )
    if framing in _SHOT_TYPE_WORDS:  # a two-person shot type before the size it is shot at
        text = f"{_SHOT_TYPE_WORDS[framing]} {text[:1].lower()}{text[1:]}"
    return text


def _snapping(width: int, height: int, frames: int) -> tuple[SnapInfo, ...]:
    """What each backend with a size or frame-count rule would need of the shot."""
    return tuple(
        SnapInfo(backend=name, width=r.width, height=r.height, frames=r.frames, changed=r.changed)
        for name, r in ((n, snap_for(rule, width, height, frames)) for n, rule in catalog.snap_rules().items())
    )


def _assemble(script: Script, cast: _Cast, shots: tuple[ShotPlan, ...], total_frames: int,
              closing: TransitionPlan | None, dressed: dressing.DressedSet) -> Plan:
    """The plan itself: the script's settings, the scene as dressed, the characters and the shots."""
    fps = float(script.fps)
    return Plan(
        daotai_version=__version__,
        script_hash=script_hash(script),
        title=script.title,
        fps=fps,
        fps_fraction=fps_fraction(fps),
        width=script.size.width,
        height=script.size.height,
        seed=script.seed,
        scene=PlanScene(
            name=script.scene.name,
            description=script.scene.description,
            time_of_day=cast.scene_time,
            palette=tuple(tuple(c) for c in script.scene.palette),
            set_pieces=dressed.pieces,
            set=dressed.kit,
            notices=dressed.notices,
        ),
        characters=tuple(
            PlanCharacter(
                id=c.id,
                name=cast.names[c.id],
                appearance=c.appearance,
                colour=tuple(rounded(v) for v in cast.colours[c.id]),  # type: ignore[arg-type]
                height=c.height,
                reference_images=c.reference_images,
                voice=c.voice,
                seed=c.seed if c.seed is not None else derive_seed(script.seed, "character", c.id),
                kind=cast.kinds[c.id],
            )
            for c in script.characters
        ),
        shots=shots,
        total_frames=total_frames,
        total_duration_s=rounded(total_frames / fps),
        fade_out=closing,
        letterbox=script.size.letterbox,
        soundtrack=(
            SoundtrackPlan(path=script.soundtrack.path, offset_s=script.soundtrack.offset, gain_db=script.soundtrack.gain_db)
            if script.soundtrack is not None else None
        ),
    )


def character_colour(character: Character, index: int) -> tuple[float, float, float]:
    """A character's colour: the script's `colour`, else the top its `appearance` names, else the palette's."""
    if character.colour is not None:
        return tuple(character.colour)  # type: ignore[return-value]
    named = wardrobe_from_appearance(character.appearance).top
    return named if named is not None else DEFAULT_CHARACTER_COLOURS[index % len(DEFAULT_CHARACTER_COLOURS)]



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
            transition = CUT
        if transition.type in OVERLAPPING_TRANSITIONS:
            cursor -= transition.frames
        retimed.append(shot.model_copy(update={"start_frame": cursor, "transition": transition}))
        cursor += shot.frames
    closing, last = plan.fade_out, retimed[-1]
    if closing is not None and closing.frames + last.transition.frames > last.frames:  # refused before any render
        raise PlanError.at("fade_out", closing.duration_s, f"s ({closing.frames} frames) must fit inside the last "
                           f"chosen shot {last.shot_id!r} ({last.frames} frames, {last.transition.frames} of them "
                           f"used by its {last.transition.type} in); choose another last shot or shorten fade_out")
    return plan.model_copy(update={"shots": tuple(retimed), "total_frames": cursor, "total_duration_s": rounded(cursor / plan.fps)})

