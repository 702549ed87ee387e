"""Compose an English model prompt per shot from the script's words.

Camera vocabulary always comes out in English (video models are trained on it); the
author's own words (appearance, action, names) are kept as written. Names that are not
ASCII are quoted (``"小雨"``) so a text encoder reads them as a name, not as a description,
and each character is described by exactly the same phrase in every shot (consistency).
Prompts are fitted to a per-model length budget (T5 tokens, estimated from words).
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType

from daotai import catalog
from daotai.catalog import WAN_PROMPT, PromptBudget
from daotai.plan.model import Plan, ShotPlan
from daotai.script.vocab import CAMERA_MOVES, CameraMove

FRAMING_WORDS = MappingProxyType(
    {
        "extreme_close_up": "Extreme close-up",
        "close_up": "Close-up",
        "medium_close_up": "Medium close-up",
        "medium": "Medium shot",
        "medium_full": "Medium full shot",
        "full": "Full shot",
        "wide": "Wide shot",
        "extreme_wide": "Extreme wide shot",
        "pov": "Point-of-view shot through the eyes",
        "insert": "Insert close-up of the hands",
    }
)

ANGLE_WORDS = MappingProxyType(
    {
        "eye_level": "eye-level angle",
        "high": "high angle looking down",
        "low": "low angle looking up",
        "birds_eye": "bird's-eye view from directly above",
        "worms_eye": "worm's-eye view from the ground",
        "dutch": "Dutch angle, tilted horizon",
    }
)

TIME_WORDS = MappingProxyType(
    {
        "dawn": "at dawn, soft pink light",
        "morning": "in the morning, fresh daylight",
        "day": "in daylight",
        "afternoon": "in the afternoon, warm light",
        "dusk": "at dusk, golden-hour light",
        "night": "at night, artificial light",
        "interior": "indoors, soft interior light",
    }
)

DEFAULT_NEGATIVE = (
    "blurry, low quality, distorted face, extra limbs, deformed hands, text, watermark, "
    "flicker, jitter, abrupt cuts"
)


def _speed(amount_per_second: float, slow: float, fast: float) -> str:
    """'slowly' / 'steadily' / 'quickly' from a rate and two thresholds."""
    if amount_per_second < slow:
        return "slowly"
    if amount_per_second > fast:
        return "quickly"
    return "steadily"


# The order a prompt names the parts of a move in, by the part of the camera each one moves.
_PHRASE_ORDER: tuple[tuple[str, int | None], ...] = (
    ("motion", 2), ("motion", 0), ("motion", 1), ("rotate", 0), ("rotate", 1), ("rotate", 2),
    ("orbit", None), ("fov_end", None), ("shake", None),
)


def _wording(move_type: str, part: tuple[str, int | None]) -> CameraMove:
    """The move whose words say ``part``: the shot's own move when it is that move's amount (a crane
    cranes up where a pedestal rises), else the first move of the table whose amount it is."""
    own = CAMERA_MOVES.get(move_type)
    if own is not None and own.amount is not None and (own.amount.field, own.amount.axis) == part:
        return own
    return next(row for row in CAMERA_MOVES.values()
                if row.amount is not None and (row.amount.field, row.amount.axis) == part)


def describe_move(
    move_type: str,
    motion: tuple[float, float, float],
    rotate: tuple[float, float, float],
    orbit: float,
    fov: float,
    fov_end: float,
    shake: float,
    duration_s: float,
    subject_name: str | None,
) -> str:
    """English camera-move phrase, e.g. 'the camera slowly dollies in toward Lin' (the words are
    the rows of daotai.script.vocab.CAMERA_MOVES)."""
    name = quote_name(subject_name) if subject_name else ""
    names = {"toward": f" toward {name}" if name else "", "around": f" around {name}" if name else ""}
    d = max(duration_s, 1e-6)
    own = CAMERA_MOVES.get(move_type)
    values = {("motion", 0): motion[0], ("motion", 1): motion[1], ("motion", 2): motion[2],
              ("rotate", 0): rotate[0], ("rotate", 1): rotate[1], ("rotate", 2): rotate[2],
              ("orbit", None): orbit, ("fov_end", None): fov_end - fov, ("shake", None): shake}
    phrases: list[str] = [own.lead] if own is not None and own.lead else []
    for part in _PHRASE_ORDER:
        value = values[part]
        if not value or (part == ("fov_end", None) and own is not None and own.zooms):
            continue  # still, or a lens change that belongs to the move (a dolly zoom)
        row = _wording(move_type, part)
        speed = _speed(abs(value) / d, *row.speed) if row.speed is not None else ""
        phrases.append(row.prompt[1 if value > 0 else 0].format(speed=speed, **names))  # type: ignore[index]
    if not phrases:
        return "static camera, locked-off tripod shot"
    return _join_moves(phrases)


def _join_moves(phrases: list[str]) -> str:
    """'the camera pans left' + 'the camera tilts up' → 'the camera pans left and tilts up'."""
    subject = "the camera "
    merged = [phrases[0]] + [
        p[len(subject):] if p.startswith(subject) and phrases[0].startswith(subject) else p for p in phrases[1:]
    ]
    if len(merged) == 1:
        return merged[0]
    return ", ".join(merged[:-1]) + " and " + merged[-1]


def compose_prompt(
    framing: str,
    angle: str,
    subject_name: str | None,
    subject_appearance: str,
    others: list[tuple[str, str]],
    scene_name: str,
    scene_description: str,
    time_of_day: str,
    move_phrase: str,
    action: str,
    extra: str,
    held_poses: str = "",
) -> str:
    """The English prompt for one shot: framing, who, where, when, action, poses held from before
    (``held_poses``, :func:`held_pose_words`), camera, extras."""
    names = [n for n in [subject_name, *(name for name, _ in others)] if n]
    who = f" of {character_phrase(subject_name, subject_appearance)}" if subject_name else ""
    first = [f"{FRAMING_WORDS[framing]}{who}", ANGLE_WORDS[angle]]
    if others:
        first.append("with " + ", ".join(character_phrase(name, look) for name, look in others))
    where = f"in {_with_article(_sentence(scene_name, names))}" if scene_name else ""
    if scene_description:
        described = _sentence(scene_description, names)
        where = f"{where} ({described})" if where else described
    first.append(f"{where} {TIME_WORDS[time_of_day]}".strip())
    parts = [", ".join(first)]
    if action:
        parts.append(_capitalised(_sentence(action, names)))
    if held_poses:
        parts.append(_capitalised(held_poses))
    parts.append(move_phrase[0].upper() + move_phrase[1:])
    if extra:
        parts.append(_sentence(extra, names))
    return ". ".join(p for p in parts if p) + "."


_POSE_WORDS = {"lean": "leaning", "lie": "lying", "kneel": "kneeling"}
_PROP_WORDS = {"bar_counter": "bar", "floor": "floor"}


def held_pose_words(name: str, pose: str | None, on: str | None, held: str | None) -> str:
    """'Mia is lying on the bed and holding a cup': a pose a character keeps from an earlier shot (or
    is given by `pose`) that this shot's action does not say; "" for none. ``pose``: lean, lie or kneel
    (others say nothing); ``on``: the prop it is on; ``held``: a thing in hand."""
    bits = []
    if pose in _POSE_WORDS:
        where = ""
        if pose == "lie":
            where = f" on the {_PROP_WORDS.get(on or 'floor', (on or '').replace('_', ' '))}"
        elif on is not None:
            where = f" on the {_PROP_WORDS.get(on, on.replace('_', ' '))}"
        bits.append(f"{_POSE_WORDS[pose]}{where}")
    if held is not None:
        article = "some" if held == "flowers" else "an" if held[0] in "aeiou" else "a"
        bits.append("holding something" if held == "object" else f"holding {article} {held}")
    return f"{quote_name(name)} is {' and '.join(bits)}" if bits else ""


def quote_name(name: str) -> str:
    """A name as it appears in prompts: ASCII names bare, others in double quotes."""
    return name if name.isascii() else f'"{name}"'


def character_phrase(name: str, appearance: str) -> str:
    """The one phrase that describes a character in every shot, e.g. 'Lin (a tall man)'."""
    look = appearance.strip().rstrip(".。 ")
    return f"{quote_name(name)} ({look})" if look else quote_name(name)


def quote_names_in(text: str, names: list[str]) -> str:
    """Quote every bare occurrence of a non-ASCII name in free text (already quoted ones stay)."""
    for name in sorted({n for n in names if n and not n.isascii()}, key=len, reverse=True):
        # A name right after or before a double quote is already quoted; leave it alone.
        text = re.sub(rf'(?<!")({re.escape(name)})(?!")', r'"\1"', text)
    return text


def _with_article(place: str) -> str:
    """'office' → 'the office'; places with an article, a capital or non-English words stay."""
    first = place.split(" ", 1)[0].lower()
    if not place.isascii() or first in ("a", "an", "the") or place[:1].isupper():
        return place
    return f"the {place}"


def _capitalised(text: str) -> str:
    """First letter upper-case, so every prompt sentence reads as one."""
    return text[:1].upper() + text[1:]


def _sentence(text: str, names: list[str]) -> str:
    """Author's words as one prompt fragment: trailing stops dropped, names quoted."""
    return quote_names_in(text.strip().rstrip(".。 "), names)


def compose_negative(extra: str) -> str:
    """Default negative prompt plus the shot's own negative words."""
    return f"{DEFAULT_NEGATIVE}, {extra}" if extra else DEFAULT_NEGATIVE


_WORD = re.compile(r"[A-Za-z0-9'’-]+|[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\sA-Za-z0-9]")
_CAMERA_SENTENCE = re.compile(r"^(The camera|The lens|Static camera|Handheld camera)")


def estimate_tokens(text: str, budget: PromptBudget = WAN_PROMPT) -> int:
    """Approximate T5 token count: words × ratio, one per CJK character or symbol, plus end token."""
    words = punctuation = 0
    for match in _WORD.finditer(text):
        piece = match.group(0)
        if piece[0].isalnum() and piece.isascii():
            words += 1
        else:
            punctuation += 1
    return int(math.ceil(words * budget.tokens_per_word)) + punctuation + 1


def budget_for(model: str) -> PromptBudget:
    """The budget of a model family ('wan', 'wan-vace', 'ltx', …) or a catalog model; unknown names get Wan's."""
    budgets = catalog.prompt_budgets()
    row = catalog.model_row(model)
    if row is not None:
        return budgets[row.family]
    key = model.lower().split(":")[0].split("-")[0]
    return budgets.get(model.lower(), budgets.get(key, WAN_PROMPT))


def fit_prompt(text: str, model: str | PromptBudget = "wan") -> str:
    """Shorten a prompt to a model's budget, keeping the first sentence and the camera move.

    Sentences are dropped from the end (the author's extra words, then the action); if the
    kept ones are still too long, the text is cut at a word boundary.
    """
    budget = model if isinstance(model, PromptBudget) else budget_for(model)
    if estimate_tokens(text, budget) <= budget.max_tokens:
        return text
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
    keep = [i == 0 or bool(_CAMERA_SENTENCE.match(s)) for i, s in enumerate(sentences)]
    # Earlier sentences matter more (subject, action), so they are added back first.
    for index in range(len(sentences)):
        if keep[index]:
            continue
        keep[index] = True
        if estimate_tokens(" ".join(s for s, k in zip(sentences, keep, strict=True) if k), budget) > budget.max_tokens:
            keep[index] = False
    kept = " ".join(s for s, k in zip(sentences, keep, strict=True) if k)
    return _cut_words(kept, budget)


def _cut_words(text: str, budget: PromptBudget) -> str:
    """Cut text at a word boundary so its estimate fits the budget."""
    if estimate_tokens(text, budget) <= budget.max_tokens:
        return text
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # binary search for the most words that fit
        mid = (low + high + 1) // 2
        if estimate_tokens(" ".join(words[:mid]), budget) <= budget.max_tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low]).rstrip(",;:") + ("." if low else "")


# ------------------------------------------------------------------ MiniMax-H3

H3_WORKFLOWS = ("t2va", "fl2va", "ref2va")
H3_MAX_PICTURES = 9  # image references one MiniMax-H3 request takes


def camera_moves(shot: ShotPlan) -> bool:
    """Whether the shot's camera moves at all (any motion, rotation, orbit, zoom, shake or follow)."""
    move = shot.move
    return bool(
        move.type != "static" or any(move.motion) or any(move.rotate) or move.orbit or move.fov_end != move.fov
        or move.shake or move.follow
    )


def h3_workflow(plan: Plan, shot: ShotPlan, forced: str = "auto") -> tuple[str, str]:
    """MiniMax-H3's workflow for a shot and the reason: ref2va, t2va, or the one asked for.

    ``ref2va`` when the camera moves or a character in the shot has reference images (the previz
    render then carries camera and blocking, the pictures the looks); ``t2va`` otherwise. ``fl2va``
    is never chosen for a shot's start here (scripts pin no keyframes): the backend uses it to
    continue a long shot from its previous segment, and ``forced`` may ask for it.
    """
    if forced != "auto":
        if forced not in H3_WORKFLOWS:
            raise ValueError(f"workflow {forced!r} is not one of auto, {', '.join(H3_WORKFLOWS)}")
        return forced, "as asked (workflow option)"
    looks = [c.id for c in plan.characters if c.id in shot.characters and c.reference_images]
    reasons = []
    if camera_moves(shot):
        reasons.append(f"the camera moves ({shot.move.type})")
    if looks:
        reasons.append(f"{', '.join(looks)} {'has' if len(looks) == 1 else 'have'} reference images")
    if shot.reference_video is not None:
        reasons.append("the shot follows reference footage")
    if reasons:
        return "ref2va", " and ".join(reasons)
    return "t2va", "static camera and no character reference images"


def h3_pictures(shot: ShotPlan) -> tuple[str, ...]:
    """The characters whose pictures a ref2va request carries, in label order: the subject first, at most 9."""
    ordered = ([shot.subject] if shot.subject in shot.characters else []) + [c for c in shot.characters if c != shot.subject]
    return tuple(ordered[:H3_MAX_PICTURES])


def _labelled(text: str, labels: dict[str, str]) -> str:
    """The first mention of each name followed by its picture label: 'Lin (a man)' → 'Lin (<Picture 1>; a man)'."""
    for name, label in sorted(labels.items(), key=lambda item: len(item[0]), reverse=True):
        shown = quote_name(name)
        match = re.search(rf"(?<![\w\"]){re.escape(shown)}(?![\w\"])", text)
        if match is None:
            continue
        end = match.end()
        if text.startswith(" (", end):
            text = f"{text[:end]} ({label}; {text[end + 2:]}"
        else:
            text = f"{text[:end]} ({label}){text[end:]}"
    return text


def compose_h3_prompt(
    plan: Plan,
    shot: ShotPlan,
    workflow: str,
    pictures: tuple[tuple[str, bool], ...] = (),
    video: bool = False,
    keyframe: str | None = None,
    budget: PromptBudget | None = None,
    voices: tuple[str, ...] = (),
) -> str:
    """The MiniMax-H3 prompt of a shot: what each reference is, the shot in film words, its lines and sound.

    ``pictures`` are (character id, has a reference image) in reference order; a character without
    one is given as a colour swatch; a character's second picture is its look in an earlier shot. ``video``: a previz render of the shot is ``<Video 1>``.
    ``keyframe``: "previz" (the shot starts on its first previz frame) or "previous" (it continues
    from the last frame of the previous segment), labelled ``<Picture 1>`` as fl2va labels it.
    A shot that follows reference footage (``shot.reference_video``) has that footage as ``<Video 1>``.
    ``voices``: character ids whose voice recordings are ``<Audio 1..n>`` (ref2va), in that order;
    each such speaker's lines are said to be in that voice.
    The body is the planner's prompt (framing, angle, camera move, action, the author's words) with
    each pictured character's first mention labelled; it is cut to ``budget`` (the h3 family's)
    while the reference sentences, dialogue and sound are kept.
    """
    budget = budget or catalog.family("h3").prompt
    names = {c.id: c.name or c.id for c in plan.characters}
    intro: list[str] = []
    labels: dict[str, str] = {}
    if workflow == "ref2va":
        for index, (char_id, has_image) in enumerate(pictures, start=1):
            name = quote_name(names[char_id])
            if names[char_id] in labels:  # a second picture of a character: a look carried from an earlier shot
                intro.append(f"<Picture {index}> shows {name} in an earlier shot: keep that look")
                continue
            labels[names[char_id]] = f"<Picture {index}>"
            if has_image:
                intro.append(f"<Picture {index}> shows {name}: keep that face, hair and costume")
            else:
                intro.append(f"<Picture {index}> is the colour of {name}'s costume")
        if video and shot.reference_video is not None:
            intro.append("<Video 1> is reference footage of this very shot: follow its camera move, framing, timing "
                         "and the movement of the people exactly, but show the characters pictured here and the "
                         "set the words describe, not the people and place of the footage")
        elif video:
            intro.append("<Video 1> is a rough previz of this very shot: follow its camera move, framing, timing "
                         "and the blocking of the figures exactly, but render real people and a real set, "
                         "not the grey previz shapes")
        for index, char_id in enumerate(voices, start=1):
            intro.append(f"<Audio {index}> is the voice of {quote_name(names[char_id])}")
    elif workflow == "fl2va" and keyframe == "previz":
        intro.append("<Picture 1> is the first frame: its composition is the planned framing")
    elif workflow == "fl2va" and keyframe == "previous":
        intro.append("The shot continues seamlessly from <Picture 1>, its first frame: same people, set, light "
                     "and camera move")
    voice_of = {char_id: f"<Audio {index}>" for index, char_id in enumerate(voices, start=1)} \
        if workflow == "ref2va" else {}
    tail: list[str] = []
    sound = shot.sound
    if sound is not None:
        for line in sound.dialogue:
            speaker = quote_name(names.get(line.character, line.character))
            language = f" (in {line.language})" if line.language else ""
            quote = line.line.strip().replace('"', "'")
            voice = f" in the voice of {voice_of[line.character]}" if line.character in voice_of else ""
            tail.append(f'{speaker} says{language}{voice}: "{quote}"')
        if sound.sound.strip():
            tail.append(f"Sound: {_sentence(sound.sound, list(names.values()))}.")
    head = ". ".join(intro) + "." if intro else ""
    end = " ".join(tail)
    room = budget.max_tokens - estimate_tokens(f"{head} {end}", budget)
    body = _labelled(shot.prompt, labels)
    if room > 16:
        body = fit_prompt(body, PromptBudget(budget.model, room, budget.tokens_per_word))
    return _cut_words(" ".join(p for p in (head, body, end) if p), budget)


H3_MAX_AUDIO_REFERENCES = 3  # MiniMax-H3 takes at most 3 audio references per request


def h3_voices(plan: Plan, shot: ShotPlan) -> tuple[str, ...]:
    """Character ids whose voice recordings condition a ref2va shot: its speakers with a ``voice``, in the
    order they first speak, at most three."""
    has_voice = {c.id for c in plan.characters if c.voice}
    speakers: list[str] = []
    for line in (shot.sound.dialogue if shot.sound is not None else ()):
        if line.character in has_voice and line.character not in speakers:
            speakers.append(line.character)
    return tuple(speakers[:H3_MAX_AUDIO_REFERENCES])


def h3_outline(plan: Plan, shot: ShotPlan, forced: str = "auto",
               segment_seconds: float | None = None) -> dict[str, object]:
    """What the h3 backend will ask MiniMax-H3 for a shot, from the plan alone (the console shows it before
    Render): {workflow, why, references: labels in the order the backend sends them, segments}.
    ``segment_seconds`` is the backend option of that name (None: the model's longest generation)."""
    from daotai.plan.timing import plan_segments

    workflow, why = h3_workflow(plan, shot, forced)
    references: list[str] = []
    if workflow == "ref2va":
        has_image = {c.id: bool(c.reference_images) for c in plan.characters}
        references += [f"<Picture {i}> {c} ({'reference image' if has_image[c] else 'colour swatch'})"
                       for i, c in enumerate(h3_pictures(shot), start=1)]
        footage = shot.reference_video
        references.append(f"<Video 1> footage {footage.path} {footage.start_s:g}–{footage.end_s:g} s"
                          if footage is not None else f"<Video 1> previz of {shot.shot_id}")
        references += [f"<Audio {j}> voice of {c}" for j, c in enumerate(h3_voices(plan, shot), start=1)]
    elif workflow == "fl2va":
        references.append("<Picture 1> first frame: the previous shot's last frame, else the shot's first previz "
                          "frame")
    snap = catalog.family("h3").snap
    assert snap.frame_step and snap.native_fps and snap.min_seconds and snap.max_seconds
    segments = len(plan_segments(shot.duration_s, snap.native_fps, snap.frame_step, snap.frame_offset,
                                 snap.min_seconds, segment_seconds or snap.max_seconds))
    return {"workflow": workflow, "why": why, "references": references, "segments": segments}


def h3_prompt_for(plan: Plan, shot: ShotPlan, forced: str = "auto") -> str:
    """What the h3 backend sends for a shot's first generation, from the plan alone (``daotai prompts``)."""
    workflow, _ = h3_workflow(plan, shot, forced)
    has_image = {c.id: bool(c.reference_images) for c in plan.characters}
    pictures = tuple((c, has_image[c]) for c in h3_pictures(shot)) if workflow == "ref2va" else ()
    keyframe = "previz" if workflow == "fl2va" else None
    voices = h3_voices(plan, shot) if workflow == "ref2va" else ()
    return compose_h3_prompt(plan, shot, workflow, pictures, video=workflow == "ref2va", keyframe=keyframe,
                             voices=voices)


def ltx2_prompt_for(plan: Plan, shot: ShotPlan) -> str:
    """What the ltx2 backend sends for a shot: the planner's prompt, then its lines and sound as h3 writes them
    (LTX-2 makes the sound too), fitted to Gemma 3's budget."""
    return compose_h3_prompt(plan, shot, "t2va", budget=catalog.family("ltx2").prompt)
