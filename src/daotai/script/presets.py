"""Render presets that override a script's size without editing the file."""

from __future__ import annotations

from daotai.errors import Issue, ScriptError
from daotai.script.schema import SIZE_PRESETS, Script, Size

PRESETS = ("preview", "draft", "final")


def apply_preset(script: Script, preset: str) -> Script:
    """The script with its size replaced by a named preset (preview | draft | final | 720p …)."""
    key = preset.strip().lower()
    if key not in SIZE_PRESETS:
        raise ScriptError([Issue("--preset", preset, f"must be one of: {', '.join(SIZE_PRESETS)}")])
    width, height = SIZE_PRESETS[key]
    return script.model_copy(update={"size": Size(width=width, height=height)})
