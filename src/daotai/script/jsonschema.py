"""JSON Schema of the script, for editors and language models."""

from __future__ import annotations

from typing import Any

from daotai.script import vocab
from daotai.script.schema import Script

SCHEMA_ID = "https://daotai.invalid/schema/script-v1.json"


def script_json_schema() -> dict[str, Any]:
    """The schema of the canonical (long) form; aliases are listed in the descriptions."""
    schema = Script.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["description"] = (
        "daotai director's script v1. Units: metres, degrees, seconds. World y up, ground y=0. "
        "Camera-local axes x right, y up, -z forward (OpenGL): motion [0,0,-1] is a 1 m push-in. "
        "rotate = [pan, tilt, roll] degrees (+pan view right, +tilt up, +roll clockwise seen from "
        "behind the camera). Shorthand accepted: \"scene\": \"office\", \"size\": \"1080p\", "
        "\"camera\": \"push_in\", colours as '#RRGGBB', Chinese and abbreviated film terms."
    )
    defs = schema.get("$defs", {})
    alias_notes = {
        "Framing": vocab.FRAMING_ALIASES,
        "Angle": vocab.ANGLE_ALIASES,
        "Easing": vocab.EASING_ALIASES,
        "TimeOfDay": vocab.TIME_OF_DAY_ALIASES,
        "TransitionKind": vocab.TRANSITION_ALIASES,
        "Direction": vocab.DIRECTION_ALIASES,
    }
    for name, table in alias_notes.items():
        if name in defs:
            aliases = sorted(alias for alias, canonical in table.items() if alias != canonical)
            defs[name]["description"] = "Aliases accepted: " + ", ".join(aliases)
    _add_key_aliases(schema, defs)
    if "CameraType" in defs:
        aliases = sorted(a for a, (canonical, _) in vocab.CAMERA_ALIASES.items() if a != canonical)
        defs["CameraType"]["description"] = "Aliases accepted: " + ", ".join(aliases)
    return schema


# Where each aliased field lives: a $defs name, or None for the script itself.
_ALIASED_FIELDS = {"dialogue": "Shot", "sound": "Shot", "soundtrack": None}


def _add_key_aliases(schema: dict[str, Any], defs: dict[str, Any]) -> None:
    """List each aliased key beside its field (same schema), so editors accept either spelling."""
    for canonical, where in _ALIASED_FIELDS.items():
        node = schema if where is None else defs.get(where)
        properties = (node or {}).get("properties", {})
        for alias in vocab.KEY_ALIASES[canonical]:
            if canonical in properties:
                properties[alias] = {**properties[canonical], "description": f"alias of '{canonical}' (write one of them)"}
    soundtrack = schema.get("properties", {}).get("soundtrack")
    if soundtrack is not None and "anyOf" in soundtrack:
        soundtrack["anyOf"].insert(0, {"type": "string", "description": "shorthand for {\"path\": …}"})
