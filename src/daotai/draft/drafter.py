"""Idea → valid script: ask a language model, validate, send the exact issues back, repeat.

The answer is checked by the same validator as ``daotai validate`` plus the drafter's own
rules (shot count and total length when asked; English in the words that reach the model
prompt, except character names and quoted dialogue). ``draft_events`` is a generator of
progress events; its last event is :class:`Drafted`, or it raises ScriptError carrying the
last round's issues. Nothing is written here: the caller writes the validated text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from daotai.draft.llm import ChatClient, Sampling
from daotai.errors import NO_VALUE, Issue, ScriptError
from daotai.script import vocab
from daotai.script.jsonschema import script_json_schema
from daotai.script.load import parse_document, validate_script
from daotai.script.schema import Script

CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
QUOTED = re.compile(r'"[^"]*"|“[^”]*”|「[^」]*」')
DURATION_TOLERANCE = 0.15  # a drafted sequence may be this much shorter or longer than asked


@dataclass(frozen=True)
class DraftOptions:
    """What the writer asked for besides the idea."""

    shots: int | None = None  # exact number of shots, or None to let the model choose
    duration_s: float | None = None  # total length in seconds, or None
    style: str = ""  # e.g. "film noir, 35 mm, muted colours"
    rounds: int = 3  # answers the model may give in total (1 first try + repairs)
    sampling: Sampling = Sampling()  # this draft's model, temperature and top_p (None each: the config's)


@dataclass(frozen=True)
class RoundStarted:
    """The model is being asked (round 1 is the first try, later rounds are repairs)."""

    round: int
    rounds: int


@dataclass(frozen=True)
class Token:
    """A piece of the model's answer as it streams in."""

    round: int
    text: str


@dataclass(frozen=True)
class RoundFailed:
    """An answer did not validate; these issues go back to the model."""

    round: int
    issues: tuple[Issue, ...]


@dataclass(frozen=True)
class Drafted:
    """A valid script and the JSON text to write."""

    script: Script
    text: str
    rounds: int


DraftEvent = RoundStarted | Token | RoundFailed | Drafted


def camera_vocabulary() -> str:
    """The canonical words of the schema's enums, one line each, for the system prompt."""
    lines = [
        "camera.type: " + ", ".join(c.value for c in vocab.CameraType),
        "camera.direction: " + ", ".join(d.value for d in vocab.Direction)
        + " (pan/truck/orbit: left|right; tilt/pedestal/crane: up|down; dolly/zoom: in|out)",
        "framing: " + ", ".join(f.value for f in vocab.Framing),
        "angle: " + ", ".join(a.value for a in vocab.Angle),
        "scene.time_of_day: " + ", ".join(t.value for t in vocab.TimeOfDay),
        "scene.set: " + ", ".join(k.value for k in vocab.SetKit),
        "transition.type: " + ", ".join(t.value for t in vocab.TransitionKind),
    ]
    return "\n".join(lines)


def system_prompt(options: DraftOptions) -> str:
    """Instructions for the model: the JSON Schema, the vocabulary and the language rules."""
    schema = json.dumps(script_json_schema(), ensure_ascii=False, separators=(",", ":"))
    asked = []
    if options.shots:
        asked.append(f"exactly {options.shots} shots")
    if options.duration_s:
        asked.append(f"about {options.duration_s:g} seconds in total (sum of shot durations)")
    if options.style:
        asked.append(f"visual style: {options.style} (put it in scene.description and shot prompts)")
    return (
        "You are a film director's assistant. Turn the user's idea into a shot list for daotai: "
        "ONE JSON object that validates against the JSON Schema below. Answer with the JSON object "
        "only: no prose, no markdown fences, no comments.\n\n"
        "Rules:\n"
        "- Write scene.name, scene.description, characters[].appearance, shots[].action, shots[].prompt "
        "and shots[].negative_prompt in ENGLISH, concrete and visual (clothes, hair, age, light, colours), "
        "even when the idea is in another language.\n"
        "- Keep character names (characters[].name) and any dialogue in the idea's own language; put "
        "dialogue in double quotes inside shots[].action. ids (character id, shot_id) are short ASCII "
        "like \"xiaoyu\" or \"s01\".\n"
        "- Describe each character's look once, in characters[].appearance; refer to them by name in actions.\n"
        "- Use the canonical English words below for camera, framing, angle and time of day.\n"
        "- Every shot needs shot_id and duration (seconds, 1 to 10 is typical); subject is a character id.\n"
        + (f"- The writer asked for: {'; '.join(asked)}.\n" if asked else "")
        + "\nVocabulary:\n"
        + camera_vocabulary()
        + "\n\nJSON Schema:\n"
        + schema
    )


def user_prompt(idea: str) -> str:
    """The first user message: the idea, verbatim."""
    return f"Idea:\n{idea.strip()}\n\nReturn the script as one JSON object."


def repair_prompt(issues: tuple[Issue, ...]) -> str:
    """The message that sends a failed answer's exact issue lines back for repair."""
    lines = "\n".join(str(issue) for issue in issues)
    return (
        "That answer is not a valid daotai script. The validator reported:\n"
        f"{lines}\n"
        "Fix every problem and return the whole corrected script as one JSON object, nothing else."
    )


def extract_json(text: str) -> Any:
    """The first JSON object in an answer (fences and chatter around it are ignored)."""
    stripped = re.sub(r"^\s*```[a-zA-Z]*\s*|\s*```\s*$", "", text.strip())
    try:
        return parse_document(stripped, fmt="json", source="answer")
    except ScriptError as exc:
        first_error = exc
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", stripped):
        try:
            _, end = decoder.raw_decode(stripped, match.start())
        except json.JSONDecodeError:
            continue
        # Re-parse the found span with daotai's guarded parser (size, depth, number checks).
        return parse_document(stripped[match.start() : end], fmt="json", source="answer")
    raise first_error


def english_issues(data: Any) -> list[Issue]:
    """Words that reach the model prompt must be English apart from names and quoted dialogue."""
    if not isinstance(data, dict):
        return []
    names = [c.get("name") or "" for c in data.get("characters") or [] if isinstance(c, dict)]
    names = [n for n in names if isinstance(n, str) and n]
    issues: list[Issue] = []

    def check(path: str, value: Any) -> None:
        if not isinstance(value, str):
            return
        bare = QUOTED.sub("", value)
        for name in sorted(names, key=len, reverse=True):
            bare = bare.replace(name, "")
        if CJK.search(bare):
            issues.append(
                Issue(path, value, "must be written in English (only character names and quoted dialogue "
                      "may stay in the idea's language)")
            )

    scene = data.get("scene")
    if isinstance(scene, dict):
        check("scene.name", scene.get("name"))
        check("scene.description", scene.get("description"))
    elif isinstance(scene, str):
        check("scene", scene)
    for i, character in enumerate(data.get("characters") or []):
        if isinstance(character, dict):
            check(f"characters[{i}].appearance", character.get("appearance"))
    for i, shot in enumerate(data.get("shots") or []):
        if isinstance(shot, dict):
            for key in ("action", "prompt", "negative_prompt"):
                check(f"shots[{i}].{key}", shot.get(key))
    return issues


def request_issues(script: Script, options: DraftOptions) -> list[Issue]:
    """What the writer asked for (shot count, total length) that a valid script still misses."""
    issues: list[Issue] = []
    if options.shots and len(script.shots) != options.shots:
        issues.append(Issue("shots", f"{len(script.shots)} shots", f"must be exactly {options.shots} shots as asked"))
    if options.duration_s:
        total = sum(s.duration for s in script.shots)
        if abs(total - options.duration_s) > DURATION_TOLERANCE * options.duration_s:
            issues.append(
                Issue(
                    "shots[].duration",
                    f"{total:g} s in total",
                    f"must add up to about {options.duration_s:g} s as asked (±{DURATION_TOLERANCE:.0%})",
                )
            )
    return issues


def check_answer(text: str, options: DraftOptions) -> tuple[Script | None, Any, tuple[Issue, ...]]:
    """Validate one answer: (script, data, ()) when good, else (None, data, issues)."""
    try:
        data = extract_json(text)
    except ScriptError as exc:
        return None, None, exc.issues or (Issue("", NO_VALUE, "is not a JSON object"),)
    if not isinstance(data, dict):
        return None, data, (Issue("", data, "must be a JSON object (the script), not a list or a value"),)
    try:
        script = validate_script(data)
    except ScriptError as exc:
        return None, data, tuple(exc.issues) + tuple(english_issues(data))
    issues = english_issues(data) + request_issues(script, options)
    return (None, data, tuple(issues)) if issues else (script, data, ())


def script_text(data: Any) -> str:
    """The JSON text written to disk: the model's own (validated) document, pretty-printed."""
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def draft_events(idea: str, client: ChatClient, options: DraftOptions = DraftOptions()) -> Iterator[DraftEvent]:
    """Ask, validate and repair up to ``options.rounds`` times; ends with Drafted or raises ScriptError."""
    if not idea.strip():
        raise ScriptError([Issue("idea", idea, "must not be empty: describe the film in a sentence or two")])
    if options.rounds < 1:
        raise ScriptError([Issue("rounds", options.rounds, "must be at least 1")])
    schema = script_json_schema()
    messages = [
        {"role": "system", "content": system_prompt(options)},
        {"role": "user", "content": user_prompt(idea)},
    ]
    issues: tuple[Issue, ...] = ()
    for round_no in range(1, options.rounds + 1):
        yield RoundStarted(round_no, options.rounds)
        pieces: list[str] = []
        for piece in client.chat(messages, schema, options.sampling):
            pieces.append(piece)
            yield Token(round_no, piece)
        answer = "".join(pieces)
        script, data, issues = check_answer(answer, options)
        if script is not None:
            text = script_text(data)
            # The exact text that will be written must validate too (belt and braces).
            final = validate_script(json.loads(text))
            yield Drafted(final, text, round_no)
            return
        yield RoundFailed(round_no, issues)
        messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": repair_prompt(issues)}]
    raise ScriptError(issues, f"drafted script still invalid after {options.rounds} round{'s' if options.rounds != 1 else ''}")


def draft_script(idea: str, client: ChatClient, options: DraftOptions = DraftOptions()) -> Drafted:
    """Run :func:`draft_events` to the end and return the Drafted result."""
    result: Drafted | None = None
    for event in draft_events(idea, client, options):
        if isinstance(event, Drafted):
            result = event
    assert result is not None  # draft_events either yields Drafted or raises
    return result
