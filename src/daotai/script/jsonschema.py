"""JSON Schema of the script, for editors, standard validators and language models.

Two forms, both stating every bound (``minimum`` / ``maximum`` / ``exclusive…``, lengths,
``multipleOf`` for even frame sizes, patterns):

- **canonical** (``daotai schema``): the script as ``daotai validate --normalised`` writes it —
  canonical names and values only (aliases are listed in the descriptions). Language models
  are asked to write this form, and constrained decoders get a schema without lookaheads,
  ``if``/``then`` or ``not``.
- **accepted** (``daotai schema --accepted``): every spelling ``daotai validate`` accepts —
  aliases of film words, other names of fields (``color``, ``resolution``…), durations, sizes
  and colours as text, cameras as move names or phrases — as patterns built from the same
  tables the validator reads (:mod:`daotai.script.spellings`, :mod:`daotai.script.vocab`).

What JSON Schema cannot say (ids that must be unique or refer to a character, a camera whose
type contradicts its fields, a blocking move that outlasts its shot, the numbers inside text
such as ``"1m30s"``) is listed in ``tests/test_schema_agreement.py``, which runs good and bad
scripts through both validators.
"""

from __future__ import annotations

import re
import sys
import typing
from functools import lru_cache
from itertools import combinations
from typing import Any, Iterable

from pydantic import AliasChoices, BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

from daotai.script import aspect, spellings, vocab
from daotai.script import fields as script_fields
from daotai.script import schema as script_schema
from daotai.script.camera_spec import CameraSpec
from daotai.script.schema import SIZE_PRESETS, Script
from daotai.script.sound_and_footage import SOUNDTRACK_SUFFIXES

SCHEMA_ID = "https://daotai.invalid/schema/script-v1.json"
ACCEPTED_SCHEMA_ID = "https://daotai.invalid/schema/script-v1-accepted.json"


def script_json_schema(accepted: bool = False) -> dict[str, Any]:
    """The schema of the canonical form, or (``accepted``) of every spelling validate accepts."""
    schema = Script.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = ACCEPTED_SCHEMA_ID if accepted else SCHEMA_ID
    schema["description"] = (
        "daotai director's script v1. Units: metres, degrees, seconds. World y up, ground y=0. "
        "Camera-local axes x right, y up, -z forward (OpenGL): motion [0,0,-1] is a 1 m push-in. "
        "rotate = [pan, tilt, roll] degrees (+pan view right, +tilt up, +roll clockwise seen from "
        "behind the camera). Shorthand accepted: \"scene\": \"office\", \"size\": \"1080p\", "
        "\"camera\": \"push_in\", colours as '#RRGGBB', Chinese and abbreviated film terms."
    )
    defs = schema.get("$defs", {})
    for name, table in _ALIAS_TABLES.items():
        if name in defs:
            aliases = sorted(alias for alias, canonical in table.items() if alias != canonical)
            defs[name]["description"] = "Aliases accepted: " + ", ".join(aliases)
    if "CameraType" in defs:
        aliases = sorted(a for a, (canonical, _) in vocab.CAMERA_ALIASES.items() if a != canonical)
        defs["CameraType"]["description"] = "Aliases accepted: " + ", ".join(aliases)
    path = defs.get("Soundtrack", {}).get("properties", {}).get("path")
    if path is not None:
        path["pattern"] = soundtrack_path_pattern()
    soundtrack = schema.get("properties", {}).get("soundtrack")
    if soundtrack is not None and "anyOf" in soundtrack and path is not None:
        shorthand = {k: v for k, v in path.items() if k not in ("title", "default")}
        soundtrack["anyOf"].insert(0, {**shorthand, "description": "shorthand for {\"path\": …}"})
    if accepted:
        _accept_spellings(schema, defs)
        _add_other_names(schema, defs, every=True)
    else:
        _add_other_names(schema, defs, every=False)
    return schema


_ALIAS_TABLES = {
    "Framing": vocab.FRAMING_ALIASES,
    "Angle": vocab.ANGLE_ALIASES,
    "Easing": vocab.EASING_ALIASES,
    "TimeOfDay": vocab.TIME_OF_DAY_ALIASES,
    "SetKit": vocab.SET_KIT_ALIASES,
    "TransitionKind": vocab.TRANSITION_ALIASES,
    "Direction": vocab.DIRECTION_ALIASES,
    "SetPieceKind": vocab.SET_PIECE_ALIASES,
    "CameraSide": vocab.CAMERA_SIDE_ALIASES,
    "Sensor": vocab.SENSOR_ALIASES,
    "Pose": vocab.POSE_ALIASES,
    "PropType": vocab.PROP_ALIASES,
}


# ------------------------------------------------------------------ models and their fields


def _models(root: type[BaseModel] = Script) -> list[type[BaseModel]]:
    """Every model reachable from ``root`` through its fields, root first."""
    found: list[type[BaseModel]] = []
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            if item in found:
                continue
            found.append(item)
            stack.extend(field.annotation for field in item.model_fields.values())
        else:
            stack.extend(a for a in typing.get_args(item) if a is not Ellipsis)
    return found


def _node(schema: dict[str, Any], defs: dict[str, Any], model: type[BaseModel]) -> dict[str, Any] | None:
    return schema if model is Script else defs.get(model.__name__)


def _add_other_names(schema: dict[str, Any], defs: dict[str, Any], every: bool) -> None:
    """List each field's other names beside it (same schema); ``every``: all of them, each pair
    refused together; else only the sound fields' Chinese names (vocab.KEY_ALIASES)."""
    chinese = {alias for aliases in vocab.KEY_ALIASES.values() for alias in aliases}
    for model in _models():
        node = _node(schema, defs, model)
        if node is None:
            continue
        properties = node.setdefault("properties", {})
        for name, field in model.model_fields.items():
            alias = field.validation_alias
            if not isinstance(alias, AliasChoices) or name not in properties:
                continue
            others = [c for c in alias.choices if isinstance(c, str) and c != name and (every or c in chinese)]
            for other in others:
                properties[other] = {**properties[name], "description": f"another name of '{name}' (write one of them)"}
            if every and others:
                rules = node.setdefault("allOf", [])
                rules.extend({"not": {"required": [a, b]}} for a, b in combinations([name, *others], 2))
                if name in node.get("required", ()):
                    node["required"] = [r for r in node["required"] if r != name]
                    rules.append({"anyOf": [{"required": [n]} for n in (name, *others)]})


def _before_validators(annotation: Any, metadata: Iterable[Any] = ()) -> tuple[set[Any], set[Any]]:
    """(functions reading the value itself, functions reading each item of a tuple value)."""
    own: set[Any] = {m.func for m in metadata if isinstance(m, BeforeValidator)}
    items: set[Any] = set()
    stack = [annotation]
    while stack:
        item = stack.pop()
        origin = typing.get_origin(item)
        if origin is typing.Annotated:
            stack.append(typing.get_args(item)[0])
            for meta in getattr(item, "__metadata__", ()):
                own.update(m.func for m in ([meta] if not isinstance(meta, FieldInfo) else meta.metadata)
                           if isinstance(m, BeforeValidator))
        elif origin in (typing.Union, _UnionType):
            stack.extend(a for a in typing.get_args(item) if a is not type(None))
        elif origin is tuple:
            args = typing.get_args(item)
            if len(args) == 2 and args[1] is Ellipsis:
                items |= _before_validators(args[0])[0]
    return own, items


_UnionType = type(int | None)


def _with_branches(prop: dict[str, Any], extra: list[dict[str, Any]]) -> dict[str, Any]:
    """``prop`` that also accepts the ``extra`` schemas (its default, title and description kept)."""
    meta = {k: prop[k] for k in ("default", "description", "title") if k in prop}
    core = {k: v for k, v in prop.items() if k not in meta}
    branches = core["anyOf"] if list(core) == ["anyOf"] else [core]
    return {"anyOf": [*branches, *extra], **meta}


def _accept_spellings(schema: dict[str, Any], defs: dict[str, Any]) -> None:
    """Widen the canonical schema to every spelling the validator reads."""
    for name, table in _ALIAS_TABLES.items():
        if name in defs:
            defs[name] = {"type": "string", "pattern": folded_pattern(table),
                          "description": defs[name].get("description", "")}
    defs["CameraType"] = {
        "type": "string",
        "description": "a camera move name (" + vocab.canonical_names(vocab.CameraType) + ", or an alias) or a "
                       "short phrase read by words: " + spellings.PHRASE_EXAMPLES,
    }
    size = defs["Size"]["properties"]
    bare = {k: v for k, v in defs["Scene"]["properties"]["name"].items() if k not in ("default", "title")}
    readers: dict[Any, list[dict[str, Any]]] = {
        spellings.read_seconds: [{"type": "string", "pattern": seconds_pattern(),
                                  "description": "seconds as text: " + spellings.SECONDS_EXAMPLES}],
        script_fields._parse_colour: [
            {"type": "string", "pattern": hex_colour_pattern()},
            {"type": "string", "pattern": colour_name_pattern(), "description": "a colour name: brown, dark blue, 深蓝"},
        ],
        script_schema._parse_size: [
            {"type": "string", "pattern": size_name_pattern()},
            {"type": "string", "pattern": size_text_pattern(), "description": "WIDTHxHEIGHT"},
            {"type": "string", "pattern": size_ratio_pattern(),
             "description": "an aspect ratio, alone or after a size: '2.39:1', '1080p 2.39:1', '9:16' (cropped; "
                            "'1080p 2.39:1 letterbox' delivers the sequence in the named frame between black bars)"},
            {"type": "array", "minItems": 2, "maxItems": 2, "prefixItems": [
                {k: v for k, v in size[axis].items() if k != "title"} for axis in ("width", "height")]},
        ],
        script_schema._parse_scene: [{**bare, "description": "the scene's name"}],
        script_schema._parse_transition: [{"$ref": "#/$defs/TransitionKind"}],
    }
    for model in _models():
        node = _node(schema, defs, model)
        if node is None:
            continue
        properties = node.get("properties", {})
        for name, field in model.model_fields.items():
            if name not in properties:
                continue
            own, items = _before_validators(field.annotation, field.metadata)
            extra = [branch for func in own for branch in readers.get(func, ())]
            if _inner_model(field.annotation) is CameraSpec:
                extra.append({"$ref": "#/$defs/CameraType"})
            if extra:
                properties[name] = _with_branches(properties[name], extra)
            item_extra = [branch for func in items for branch in readers.get(func, ())]
            if item_extra and "items" in properties[name]:
                properties[name]["items"] = _with_branches(properties[name]["items"], item_extra)


def _inner_model(annotation: Any) -> Any:
    """The model a field holds directly (through Optional / Annotated), else None."""
    stack = [annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item
        if typing.get_origin(item) in (typing.Annotated, typing.Union, _UnionType):
            stack.extend(typing.get_args(item)[:1] if typing.get_origin(item) is typing.Annotated
                         else typing.get_args(item))
    return None


# ------------------------------------------------------------------ patterns
#
# Patterns are written for both dialects a schema meets: ECMA-262 (what JSON Schema
# specifies, and what editors run) and Python's re (the jsonschema package): no lookaheads,
# no inline flags, no \d or \s (their meaning differs), explicit \uXXXX classes instead.


@lru_cache(maxsize=1)
def _whitespace() -> str:
    """A class of what Python's str.strip() removes (every str.isspace() character)."""
    chars = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    return "[" + "".join(f"\\u{ord(c):04x}" for c in chars) + "]"


@lru_cache(maxsize=1)
def _upper_forms() -> dict[str, str]:
    """Lower-case character → the other characters str.lower() turns into it ('k' → 'K' and 'K')."""
    forms: dict[str, str] = {}
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        lower = char.lower()
        if len(lower) == 1 and lower != char:
            forms[lower] = forms.get(lower, "") + char
    return forms


def _char(char: str) -> str:
    """One character of a folded word, matching every character that lower-cases to it."""
    forms = char + _upper_forms().get(char, "")
    if len(forms) == 1:
        return re.escape(char) if char.isascii() else char
    return "[" + "".join(c if c.isalnum() and c.isascii() else f"\\u{ord(c):04x}" for c in forms) + "]"


_APOSTROPHES = "['\u2019]*"  # normalise_word drops ' and ’ anywhere
_SEPARATORS = "[ ._\\-'\u2019]*[ ._\\-][ ._\\-'\u2019]*"  # a run that normalise_word folds to one "_"


def _folded(key: str) -> str:
    """A pattern (no anchors) for the strings normalise_word folds to ``key`` once stripped."""
    return "".join(_SEPARATORS if char == "_" else _char(char) + _APOSTROPHES for char in key)


def _whole(fragment: str) -> str:
    """Anchor a fragment the way str.strip() reads a value: any whitespace around it."""
    space = _whitespace()
    return f"^{space}*(?:{fragment}){space}*$"


def _alternatives(keys: Iterable[str]) -> str:
    return "(?:" + "|".join(_folded(k) for k in sorted(set(keys), key=lambda k: (-len(k), k))) + ")"


def folded_pattern(keys: Iterable[str]) -> str:
    """The strings vocab.normalise_word folds to one of ``keys`` (case, spaces, hyphens, dots, apostrophes)."""
    return _whole(_APOSTROPHES + _alternatives(keys))


def _case_blind(template: str) -> str:
    """A regular expression whose ASCII letters match as str.lower() would fold them."""
    plain = re.sub(r"\(\?P<\w+>", "(?:", template)
    return "".join(_char(c) if c.isascii() and c.isalpha() else c for c in plain)


def seconds_pattern() -> str:
    """Durations as text (spellings.SECONDS_TEMPLATE): '3s', '2.5 s', '1m30s', '1:30'."""
    return _whole(_case_blind(spellings.SECONDS_TEMPLATE))


def size_name_pattern() -> str:
    """Frame sizes by name: the presets and spellings.SIZE_NAMES ('4K', 'UHD', '2160p')."""
    return folded_pattern([*(vocab.normalise_word(k) for k in SIZE_PRESETS), *spellings.SIZE_NAMES])


def size_text_pattern() -> str:
    """'WIDTHxHEIGHT' (the numbers' range and evenness are the validator's)."""
    return _whole(_case_blind(spellings.SIZE_TEXT.pattern))


def size_ratio_pattern() -> str:
    """A size cropped to an aspect ratio: '2.39:1', '1080p 2.39:1', '1920x1080 9:16', '720p scope', or
    letterboxed in it: '1080p 2.39:1 letterbox' (daotai.script.aspect; the ratio's range is the validator's)."""
    names = _APOSTROPHES + _alternatives([*(vocab.normalise_word(k) for k in SIZE_PRESETS), *spellings.SIZE_NAMES])
    size = f"(?:{names}|{_case_blind(spellings.SIZE_TEXT.pattern)})"
    ratio = f"(?:{aspect.RATIO_TEXT.pattern}|{_case_blind('|'.join(aspect.RATIO_NAMES))})"
    fit = f"(?:[ ,]*(?:{_case_blind('|'.join(aspect.FIT_WORDS))}))?"
    return _whole(f"(?:{size}[ ,@]*)?{ratio}{fit}")


def hex_colour_pattern() -> str:
    """'#RRGGBB' (the # optional)."""
    return _whole("#?[0-9a-fA-F]{6}")


def colour_name_pattern() -> str:
    """Colour names: a colour word, or a modifier and a colour word ('dark blue', '深蓝')."""
    en, zh, en_mod, zh_mod = spellings.colour_words()
    words = "|".join([_alternatives(en), _alternatives(en_mod) + _SEPARATORS + _alternatives(en),
                      _alternatives(zh), _alternatives(zh_mod) + _alternatives(zh)])
    return _whole(_APOSTROPHES + "(?:" + words + ")")


def soundtrack_path_pattern() -> str:
    """'upload:<id>' or a file name ending in a sound suffix, without leading whitespace."""
    suffixes = "|".join(_case_blind(re.escape(s[1:])) for s in SOUNDTRACK_SUFFIXES)
    upload_id = script_fields.ID_PATTERN.removeprefix("^").removesuffix("$")
    return f"^(?:upload:{upload_id}|(?:[^{_whitespace()[1:-1]}][\\s\\S]*)?\\.(?:{suffixes}))$"
