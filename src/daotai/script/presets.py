"""Render presets and sizes that override a script's size without editing the file."""

from __future__ import annotations

from fractions import Fraction

from daotai.errors import Issue, ScriptError
from daotai.script.aspect import frame_for_ratio, picture_in_frame
from daotai.script.schema import SIZE_PRESETS, Script, Size

PRESETS = ("preview", "draft", "final")


def apply_preset(script: Script, preset: str) -> Script:
    """The script with its size replaced by a named preset (preview | draft | final | 720p …), in the
    script's own shape: a 2.39:1 or 9:16 script stays 2.39:1 or 9:16 (daotai.script.aspect's rule:
    the largest frame of that shape inside the preset's size). A letterboxed script keeps its bars: the
    preset sizes its frame, and its picture is the largest of its shape inside that."""
    key = preset.strip().lower()
    if key not in SIZE_PRESETS:
        raise ScriptError([Issue("--preset", preset, f"must be one of: {', '.join(SIZE_PRESETS)}")])
    width, height = SIZE_PRESETS[key]
    size = script.size
    picture = Fraction(size.width, size.height)
    if size.letterbox is not None:  # the frame takes the preset in its own shape, the picture sits in it as before
        frame = Fraction(*size.letterbox)
        if frame != Fraction(width, height):
            width, height = frame_for_ratio(width, height, frame)
        inside = picture_in_frame(width, height, picture)
        return script.model_copy(update={"size": Size(width=inside[0], height=inside[1], letterbox=(width, height))})
    if picture != Fraction(width, height):
        width, height = frame_for_ratio(width, height, picture)
    return script.model_copy(update={"size": Size(width=width, height=height)})


def apply_size(script: Script, size: str, option: str = "--resolution") -> Script:
    """The script with its frame size replaced by any size a script accepts ('4K', '2160p', '1920x1080')."""
    from daotai.script.load import validate_script

    try:
        probe = validate_script({"size": size, "shots": [{"shot_id": "size"}]})
    except ScriptError as exc:
        raise ScriptError([Issue(option + issue.path.removeprefix("size"), issue.value, issue.rule)
                           for issue in exc.issues]) from None
    return script.model_copy(update={"size": probe.size})
