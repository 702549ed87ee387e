"""Read a script from JSON or YAML text into a validated :class:`Script`.

Every problem is reported at once as an :class:`~daotai.errors.Issue` with its JSON path
(``shots[2].camera.fov``), the offending value and the rule; nothing is silently fixed.
Hostile input is refused before parsing: files over a size cap, nesting beyond a depth cap,
NaN / Infinity / overflowing numbers such as ``1e309``.
"""

from __future__ import annotations

import json
import math
import types
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping

import yaml
from pydantic import ValidationError

from daotai.errors import NO_VALUE, Issue, ScriptError
from daotai.script import spellings
from daotai.script.schema import Script
from daotai.script.sound_and_footage import LANGUAGE_PATTERN, UPLOAD_PREFIX
from daotai.script.vocab import KEY_ALIASES

MAX_SCRIPT_BYTES = 2 * 1024 * 1024
# How close (difflib ratio) an unknown field name must be to a known one to be offered:
# 'camra' → 'camera' is 0.91; at 0.6 'kind' would be offered 'id' (0.67).
FIELD_NAME_CUTOFF = 0.75
MAX_DEPTH = 32


def load_script(path: str | Path) -> Script:
    """Read, parse and validate a script file (.json, .yaml or .yml)."""
    file = Path(path)
    source = str(file)
    try:
        size = file.stat().st_size
    except FileNotFoundError:
        raise ScriptError([Issue("", str(file), "does not exist")], source) from None
    except OSError as exc:
        raise ScriptError([Issue("", str(file), f"cannot be read ({exc.strerror})")], source) from None
    if not file.is_file():
        raise ScriptError([Issue("", str(file), "is not a file")], source)
    if size > MAX_SCRIPT_BYTES:
        raise ScriptError([Issue("", f"{size} bytes", f"exceeds the {MAX_SCRIPT_BYTES} byte limit for a script")], source)
    raw = file.read_bytes()
    fmt = "yaml" if file.suffix.lower() in (".yaml", ".yml") else "json"
    return parse_script(raw, fmt=fmt, source=source)


def read_script_stream(stream: BinaryIO, source: str = "<stdin>") -> Script:
    """Read, parse and validate a script from a byte stream (``daotai validate -``).

    There is no file name to tell the format, so text whose first non-blank character opens
    a JSON object or array is JSON and anything else is YAML (a superset of JSON anyway).
    """
    raw = stream.read(MAX_SCRIPT_BYTES + 1)  # one byte over the limit is enough to refuse it
    return parse_script(raw, fmt=guess_format(raw), source=source)


def guess_format(raw: str | bytes) -> str:
    """'json' when the text starts (after a BOM and blanks) with { or [, else 'yaml'."""
    head = raw[:4096].decode("utf-8", "replace") if isinstance(raw, bytes) else raw[:4096]
    return "json" if head.lstrip("\ufeff \t\r\n")[:1] in ("{", "[") else "yaml"


def parse_script(text: str | bytes, fmt: str = "json", source: str | None = None) -> Script:
    """Parse JSON or YAML text and validate it; raises ScriptError listing every issue."""
    data = parse_document(text, fmt=fmt, source=source)
    return validate_script(data, source=source)


def parse_document(text: str | bytes, fmt: str = "json", source: str | None = None) -> Any:
    """Decode text to plain data with size, depth and number checks (no schema yet)."""
    if isinstance(text, bytes):
        if len(text) > MAX_SCRIPT_BYTES:
            raise ScriptError([Issue("", f"{len(text)} bytes", f"exceeds the {MAX_SCRIPT_BYTES} byte limit")], source)
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ScriptError([Issue("", NO_VALUE, f"is not UTF-8 text (byte {exc.start})")], source) from None
    if len(text.encode("utf-8")) > MAX_SCRIPT_BYTES:
        raise ScriptError([Issue("", f"{len(text)} characters", f"exceeds the {MAX_SCRIPT_BYTES} byte limit")], source)
    depth = _max_bracket_depth(text)
    if depth > MAX_DEPTH:
        raise ScriptError([Issue("", f"depth {depth}", f"nests deeper than {MAX_DEPTH} levels")], source)
    if fmt == "json":
        data = _parse_json(text, source)
    elif fmt == "yaml":
        data = _parse_yaml(text, source)
    else:
        raise ScriptError([Issue("", fmt, "is not a known script format (json or yaml)")], source)
    issues = list(_walk_numbers_and_depth(data))
    if issues:
        raise ScriptError(issues, source)
    return data


def _parse_json(text: str, source: str | None) -> Any:
    # Non-finite literals become markers so the walk below can report them with their path.
    def parse_float(literal: str) -> float | _NonFinite:
        value = float(literal)
        return value if math.isfinite(value) else _NonFinite(literal)

    def parse_int(literal: str) -> int | _NonFinite:
        # Python ints never overflow, but a 5000-digit number is no sane script value.
        return int(literal) if len(literal) <= 40 else _NonFinite(literal[:20] + "…")

    try:
        return json.loads(text, parse_constant=_NonFinite, parse_float=parse_float, parse_int=parse_int)
    except json.JSONDecodeError as exc:
        raise ScriptError(
            [Issue("", NO_VALUE, f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")], source
        ) from None
    except RecursionError:
        raise ScriptError([Issue("", NO_VALUE, f"nests deeper than {MAX_DEPTH} levels")], source) from None


def _parse_yaml(text: str, source: str | None) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        tab_line = _tab_indented_line(text, getattr(exc, "problem_mark", None))
        if tab_line is not None:
            raise ScriptError(
                [Issue("", NO_VALUE, f"line {tab_line}: tabs are not allowed for indentation in YAML; use spaces")],
                source,
            ) from None
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ScriptError([Issue("", NO_VALUE, f"is not valid YAML: {problem}{where}")], source) from None
    except RecursionError:
        raise ScriptError([Issue("", NO_VALUE, f"nests deeper than {MAX_DEPTH} levels")], source) from None


def _tab_indented_line(text: str, mark: Any) -> int | None:
    """1-based number of the line PyYAML stopped at when a tab indents it, else of the first
    tab-indented line; None when no line is indented with a tab (the error is something else)."""
    lines = text.splitlines()

    def indented_with_tab(line: str) -> bool:
        return "\t" in line[: len(line) - len(line.lstrip(" \t"))]

    if mark is not None and 0 <= mark.line < len(lines) and indented_with_tab(lines[mark.line]):
        return mark.line + 1
    return next((n for n, line in enumerate(lines, 1) if indented_with_tab(line)), None)


class _NonFinite(str):
    """The literal text of a NaN, Infinity or overflowing number found while parsing."""


def _max_bracket_depth(text: str) -> int:
    """Deepest [ / { nesting outside strings: a cheap guard run before any parser."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _walk_numbers_and_depth(data: Any) -> Iterable[Issue]:
    """Non-finite floats and over-deep nesting anywhere in parsed data (YAML has .nan/.inf)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            yield Issue(path, NO_VALUE, f"nests deeper than {MAX_DEPTH} levels")
            continue
        if isinstance(node, _NonFinite) or (isinstance(node, float) and not math.isfinite(node)):
            literal = str(node) if isinstance(node, _NonFinite) else node
            yield Issue(path, literal, "is not a finite number (NaN, Infinity and overflowing numbers are not allowed)")
        elif isinstance(node, dict):
            for key, value in node.items():
                stack.append((value, _join(path, key), depth + 1))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                stack.append((value, f"{path}[{index}]", depth + 1))


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def validate_script(data: Any, source: str | None = None) -> Script:
    """Validate parsed data against the schema and the cross-reference rules."""
    issues: list[Issue] = []
    script: Script | None = None
    if not isinstance(data, dict):
        raise ScriptError([Issue("", _type_name(data), "must be an object with at least a 'shots' list")], source)
    try:
        script = Script.model_validate(data)
    except ValidationError as exc:
        issues.extend(_issues_from_pydantic(exc, data))
    issues.extend(cross_reference_issues(data))
    if issues:
        raise ScriptError(_dedupe(issues), source)
    assert script is not None
    return script


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(type(value), type(value).__name__)


def _dedupe(issues: list[Issue]) -> list[Issue]:
    seen: set[str] = set()
    unique = []
    for issue in issues:
        key = str(issue)
        if key not in seen:
            seen.add(key)
            unique.append(issue)
    return unique


def format_loc(loc: Iterable[Any]) -> str:
    """('shots', 2, 'camera', 'fov') → 'shots[2].camera.fov'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = _join(path, part)
    return path


# pydantic inserts the names of union members and validator functions into locations;
# they mean nothing to the author of the script.
_LOC_NOISE_PREFIXES = ("function-", "tuple[", "list[", "union[", "json-or-python", "lax-or-strict")


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        part
        for part in loc
        if not (isinstance(part, str) and (part.startswith(_LOC_NOISE_PREFIXES) or part in ("Size", "Scene")))
    )


def _written(data: Any, loc: tuple[Any, ...]) -> Any:
    """The value as the script wrote it at a location (NO_VALUE when the path leads nowhere)."""
    node = data
    for part in loc:
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return NO_VALUE
    return node


def _issues_from_pydantic(exc: ValidationError, data: Any = None) -> list[Issue]:
    errors = exc.errors(include_url=False)
    locs = [_clean_loc(tuple(error["loc"])) for error in errors]
    issues = []
    for error, loc in zip(errors, locs, strict=True):
        # A list whose items failed is also reported as "too short" (0 valid items): noise.
        if error["type"] == "too_short" and any(other[: len(loc)] == loc and other != loc for other in locs):
            continue
        rule = _range_rule(loc, error) or _spelling_rule(loc, error) or _rule_text(error)
        value = error.get("input", NO_VALUE)
        written = _written(data, loc)
        if isinstance(written, str) and not isinstance(value, str):  # '200s' read as 200.0: show what was written
            value = written
        issues.append(Issue(format_loc(loc), value, rule))
    return _prefer_specific(issues)


def _spelling_rule(loc: tuple[Any, ...], error: Mapping[str, Any]) -> str | None:
    """The rule for an unknown field (nearest names, the right place for a guessed name, one
    spelling given twice) and for a list given where one id goes."""
    if not loc or not isinstance(loc[-1], str):
        return None
    parent, key, value = loc[:-1], loc[-1], error.get("input")
    owner = model_at(Script, parent)
    if owner is None:
        return None
    if error["type"] == "string_type" and owner.__name__ == "Shot" and key == "character" and isinstance(value, list):
        return "must be one character id (the shot's subject); list the characters in the shot as 'characters'"
    if error["type"] != "extra_forbidden":
        return None
    where = format_loc(parent) or "the script"
    field = _field_named(owner, key)
    if field is not None:
        name = next(n for n, f in owner.model_fields.items() if f is field)
        if owner.__name__ == "Shot" and key == "move":
            return "is not a known field of the shot once it has a camera: write the move as camera.type"
        return f"is another spelling of '{name}', which is also given; write one of them"
    answer = spellings.guessed_key_rule(owner.__name__, key, value)
    if answer:
        return f"is not a known field of {where}; {answer}"
    names = _spellings_of(owner)
    close = spellings.nearest(key, names, cutoff=FIELD_NAME_CUTOFF)
    if close:
        return f"is not a known field of {where}{spellings.did_you_mean(close)}"
    return f"is not a known field of {where} (its fields: {', '.join(owner.model_fields)})"


def _spellings_of(model: type) -> list[str]:
    """Every name a field of ``model`` may be written with."""
    from pydantic import AliasChoices

    names = []
    for name, field in model.model_fields.items():
        names.append(name)
        if isinstance(field.validation_alias, AliasChoices):
            names.extend(c for c in field.validation_alias.choices if isinstance(c, str) and c != name)
    return names


def _range_rule(loc: tuple[Any, ...], error: Mapping[str, Any]) -> str | None:
    """'must be between 1 and 170' when the field has both bounds (pydantic names only one)."""
    if error["type"] not in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return None
    bounds = field_bounds(Script, loc)
    if bounds is None:
        return None
    low, low_open, high, high_open = bounds
    if low is None or high is None:
        return None
    text = f"must be between {_num(low)} and {_num(high)}"
    if low_open or high_open:
        ends = {(True, True): "exclusive", (True, False): f"excluding {_num(low)}", (False, True): f"excluding {_num(high)}"}
        text += f" ({ends[(low_open, high_open)]})"
    return text


def _num(value: float) -> str:
    return f"{value:g}"


def field_bounds(model: type, loc: tuple[Any, ...]) -> tuple[Any, bool, Any, bool] | None:
    """(low, low_exclusive, high, high_exclusive) of the number at a location, if it has bounds."""
    import annotated_types as at

    found = _annotation_at(model, loc)
    if found is None:
        return None
    low = high = None
    low_open = high_open = False
    for item in _metadata(*found):
        if isinstance(item, at.Gt):
            low, low_open = item.gt, True
        elif isinstance(item, at.Ge):
            low, low_open = item.ge, False
        elif isinstance(item, at.Lt):
            high, high_open = item.lt, True
        elif isinstance(item, at.Le):
            high, high_open = item.le, False
    return low, low_open, high, high_open


def _annotation_at(model: type, loc: tuple[Any, ...]) -> tuple[Any, list[Any]] | None:
    """(annotation, field-level metadata) of the value at a location (fields found by any spelling)."""
    annotation: Any = model
    metadata: list[Any] = []
    for part in loc:
        if isinstance(part, int):
            annotation, metadata = _item_of(annotation, part), []
            if annotation is None:
                return None
            continue
        owner = _inner_model(annotation, items=False)
        field = _field_named(owner, part) if owner is not None else None
        if field is None:
            return None
        annotation, metadata = field.annotation, list(field.metadata)
    return annotation, metadata


def model_at(model: type, loc: tuple[Any, ...]) -> type | None:
    """The script model (Shot, CameraSpec, …) whose object sits at a location, if one does."""
    found = _annotation_at(model, loc)
    return _inner_model(found[0], items=False) if found is not None else None


def _field_named(model: type, key: str) -> Any:
    """The field of ``model`` written as ``key`` (its own name or another accepted spelling)."""
    from pydantic import AliasChoices

    if key in model.model_fields:
        return model.model_fields[key]
    for field in model.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices) and key in alias.choices:
            return field
    return None


def _unwrap(annotation: Any) -> list[Any]:
    """The annotation without Annotated[…] and Optional[…] layers (one entry per union member)."""
    import typing

    out, stack = [], [annotation]
    while stack:
        item = stack.pop()
        origin = typing.get_origin(item)
        if origin is typing.Annotated:
            stack.append(typing.get_args(item)[0])
        elif origin in (typing.Union, types.UnionType):
            stack.extend(a for a in typing.get_args(item) if a is not type(None))
        else:
            out.append(item)
    return out


def _item_of(annotation: Any, index: int) -> Any:
    """The type of item ``index`` of a tuple or list annotation (None when there is none)."""
    import typing

    for item in _unwrap(annotation):
        origin, args = typing.get_origin(item), typing.get_args(item)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return args[0]
        if origin is tuple and index < len(args):
            return args[index]
        if origin is list and args:
            return args[0]
    return None


def _metadata(annotation: Any, field_metadata: list[Any]) -> list[Any]:
    """Every constraint on a value: the field's own and those inside its Annotated layers."""
    import typing

    from pydantic.fields import FieldInfo

    items = list(field_metadata)
    stack = [annotation]
    while stack:
        item = stack.pop()
        origin = typing.get_origin(item)
        if origin is typing.Annotated:
            stack.append(typing.get_args(item)[0])
            items.extend(getattr(item, "__metadata__", ()))
        elif origin in (typing.Union, types.UnionType):
            stack.extend(a for a in typing.get_args(item) if a is not type(None))
    flat = []
    for item in items:
        flat.extend(item.metadata if isinstance(item, FieldInfo) else [item])
    return flat


def _inner_model(annotation: Any, items: bool = True) -> Any:
    """The pydantic model inside Optional[...] / Annotated[Model, ...] (and tuple[Model, ...] when ``items``)."""
    import typing

    from pydantic import BaseModel as _Base

    stack = [annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, _Base):
            return item
        if items or typing.get_origin(item) is not tuple:
            stack.extend(a for a in typing.get_args(item) if a is not Ellipsis)
    return None


def _prefer_specific(issues: list[Issue]) -> list[Issue]:
    """For unions (e.g. Vec3 | Vec2) pydantic reports every branch; keep one line per path."""
    by_path: dict[str, Issue] = {}
    for issue in issues:
        by_path.setdefault(issue.path, issue)
    return list(by_path.values())


def _rule_text(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    msg: str = error["msg"]
    bounds = {
        "greater_than": f"must be greater than {ctx.get('gt')}",
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
    }
    if kind in bounds:
        return bounds[kind]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field (check the spelling; `daotai schema` lists every field)"
    if kind == "string_pattern_mismatch" and ctx.get("pattern") == LANGUAGE_PATTERN:
        return "must be a BCP 47 language tag such as en, zh or zh-CN"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        return "must start with a letter or digit and use only letters, digits, '_' and '-' (max 64)"
    if kind in ("too_short", "too_long"):
        return msg.replace("Tuple", "list").replace("List", "list").lower().replace("value should", "must")
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind in ("string_type",):
        return "must be a string"
    if kind in ("tuple_type", "list_type"):
        return "must be a list"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be an object"
    if kind in ("bool_type", "bool_parsing"):
        return "must be true or false"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "assertion_error":
        return msg.removeprefix("Assertion failed, ")
    return msg[0].lower() + msg[1:] if msg else kind


def cross_reference_issues(data: Mapping[str, Any]) -> list[Issue]:
    """Duplicate ids and references to unknown characters, checked on the raw data.

    Runs even when other fields are invalid, so the author sees every problem at once.
    """
    issues: list[Issue] = []
    characters = data.get("characters")
    known: set[str] = set()
    if isinstance(characters, list):
        for index, character in enumerate(characters):
            if isinstance(character, dict) and isinstance(character.get("id"), str):
                char_id = character["id"]
                if char_id in known:
                    issues.append(Issue(f"characters[{index}].id", char_id, "is a duplicate: character ids must be unique"))
                known.add(char_id)
    shots = data.get("shots")
    if not isinstance(shots, list):
        return issues
    shot_ids: set[str] = set()
    hint = f"; known characters: {', '.join(sorted(known))}" if known else "; the script defines no characters"
    for index, shot in enumerate(shots):
        if not isinstance(shot, dict):
            continue
        id_key, shot_id = _spelled_value(shot, "Shot", "shot_id")
        if isinstance(shot_id, str):
            if shot_id in shot_ids:
                issues.append(Issue(f"shots[{index}].{id_key}", shot_id, "is a duplicate: shot ids must be unique"))
            shot_ids.add(shot_id)
        subject_key, subject = _spelled_value(shot, "Shot", "subject")
        if isinstance(subject, str) and subject not in known:
            issues.append(Issue(f"shots[{index}].{subject_key}", subject, "is not a character id" + hint))
        present = shot.get("characters")
        if isinstance(present, list):
            for j, char_id in enumerate(present):
                if isinstance(char_id, str) and char_id not in known:
                    issues.append(Issue(f"shots[{index}].characters[{j}]", char_id, "is not a character id" + hint))
            if isinstance(subject, str) and subject in known and subject not in present:
                issues.append(Issue(f"shots[{index}].{subject_key}", subject, "must be one of the shot's characters"))
        for key in ("dialogue", *KEY_ALIASES["dialogue"]):
            lines = shot.get(key)
            if not isinstance(lines, list):
                continue
            for j, spoken in enumerate(lines):
                char_id = spoken.get("character") if isinstance(spoken, dict) else None
                where = f"shots[{index}].{key}[{j}].character"
                if isinstance(char_id, str) and char_id not in known:
                    issues.append(Issue(where, char_id, "is not a character id" + hint))
                elif isinstance(char_id, str) and isinstance(present, list) and char_id not in present:
                    issues.append(Issue(where, char_id, "must be one of the shot's characters"))
        blocking = shot.get("blocking")
        if isinstance(blocking, list):
            for j, move in enumerate(blocking):
                char_id = move.get("character") if isinstance(move, dict) else None
                if isinstance(char_id, str) and char_id not in known:
                    issues.append(
                        Issue(f"shots[{index}].blocking[{j}].character", char_id, "is not a character id" + hint)
                    )
    return issues


def _spelled_value(data: Mapping[str, Any], model: str, field: str) -> tuple[str, Any]:
    """(the key used, its value) of a field written under its own name or another accepted one."""
    for key in (field, *spellings.alternatives(model, field)):
        if key in data:
            return key, data[key]
    return field, None


def check_reference_files(script: Script, base_dir: Path) -> list[Issue]:
    """Reference images and a soundtrack that do not exist relative to the script's folder.

    ``upload:<id>`` soundtracks name files on the service; they are checked there, not here.
    """
    issues = []
    track = script.soundtrack
    if track is not None and not track.path.startswith(UPLOAD_PREFIX):
        path = Path(track.path)
        if not (path if path.is_absolute() else base_dir / path).is_file():
            issues.append(Issue("soundtrack.path", track.path, "does not exist (paths are relative to the script's folder)"))
    for index, character in enumerate(script.characters):
        for j, ref in enumerate(character.reference_images):
            path = Path(ref)
            if not path.is_absolute():
                path = base_dir / path
            if not path.is_file():
                issues.append(Issue(f"characters[{index}].reference_images[{j}]", ref, "does not exist"))
    for index, shot in enumerate(script.shots):
        footage = shot.reference_video
        if footage is not None and not footage.path.startswith(UPLOAD_PREFIX):
            path = Path(footage.path)
            if not (path if path.is_absolute() else base_dir / path).is_file():
                issues.append(Issue(f"shots[{index}].reference_video.path", footage.path,
                                    "does not exist (paths are relative to the script's folder)"))
    return issues
