"""contact_sheet.png: a storyboard grid, one frame per shot with its id, framing, move, duration.

Shots with dialogue carry a speech tag in the thumbnail's corner (the first line, shortened), so
a storyboard read without sound still shows who speaks where.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from daotai.files import atomic_write_bytes
from daotai.plan.model import Plan
from daotai.script.vocab import CAMERA_MOVES

THUMB_WIDTH = 360
COLUMNS_MAX = 4
CAPTION_LINES = 2
BACKGROUND = (24, 24, 28)
TEXT = (235, 235, 235)
DIM = (160, 160, 170)
SPEECH_BG = (250, 226, 120)  # the dialogue tag: a yellow note, dark text
SPEECH_TEXT = (30, 30, 30)
SPEECH_CHARS = 34  # characters of the first line shown in the tag


def _font(size: int):
    from daotai.render.previz.labels import find_label_font

    path = find_label_font()
    if path:
        try:
            return ImageFont.truetype(path, size)
        except OSError:
            pass
    return ImageFont.load_default(size=size)


def _amount(move, field: str, axis: int | None) -> float:
    """The size of a resolved move along one part of the camera (``fov_end``: the lens change)."""
    if field in ("motion", "rotate"):
        return float(getattr(move, field)[axis])
    if field == "fov_end":
        return float(move.fov_end - move.fov)
    return float(getattr(move, field))


def move_words(shot) -> str:
    """'dolly in', 'pan left', 'crane up', 'orbit +30°', 'zoom in 60→36' … from the resolved move and
    its row's label (daotai.script.vocab.CAMERA_MOVES)."""
    move = shot.move
    row = CAMERA_MOVES.get(move.type)
    if row is None or not row.label:
        return move.type.replace("_", " ")
    amount = _amount(move, row.amount.field, row.amount.axis) if row.amount is not None else 0.0
    way = row.way(amount) if row.signs or row.ways else ""
    return row.label.format(way=way, amount=amount, fov=move.fov, fov_end=move.fov_end, shake=move.shake)


def render_contact_sheet(plan: Plan, middles: dict[str, np.ndarray | None]) -> Image.Image:
    """The sheet as a PIL image: thumbnails in shot order with two caption lines each."""
    shots = list(plan.shots)
    columns = min(COLUMNS_MAX, max(1, len(shots)))
    rows = math.ceil(len(shots) / columns)
    thumb_h = int(round(THUMB_WIDTH * plan.height / plan.width))
    pad = 12
    caption_h = 44
    title_h = 40
    sheet = Image.new(
        "RGB",
        (columns * (THUMB_WIDTH + pad) + pad, title_h + rows * (thumb_h + caption_h + pad) + pad),
        BACKGROUND,
    )
    draw = ImageDraw.Draw(sheet)
    big, small = _font(20), _font(14)
    draw.text((pad, 10), f"{plan.title} — {len(shots)} shots, {plan.total_duration_s:g} s", fill=TEXT, font=big)
    for i, shot in enumerate(shots):
        col, row = i % columns, i // columns
        x = pad + col * (THUMB_WIDTH + pad)
        y = title_h + row * (thumb_h + caption_h + pad)
        frame = middles.get(shot.shot_id)
        if frame is not None:
            thumb = Image.fromarray(frame).resize((THUMB_WIDTH, thumb_h), Image.Resampling.LANCZOS)
            sheet.paste(thumb, (x, y))
        else:
            draw.rectangle([x, y, x + THUMB_WIDTH, y + thumb_h], outline=DIM)
        if shot.sound is not None and shot.sound.dialogue:
            _speech_tag(draw, shot, x, y, small)
        draw.text((x, y + thumb_h + 4), f"{i + 1}. {shot.shot_id}  ·  {shot.duration_s:g} s", fill=TEXT, font=small)
        line2 = f"{shot.framing.replace('_', ' ')}, {shot.angle.replace('_', ' ')}, {move_words(shot)}"
        draw.text((x, y + thumb_h + 22), line2, fill=DIM, font=small)
    return sheet


def speech_tag_text(shot) -> str:
    """'hero: "Hello there…" (+1)': the first line of a shot's dialogue and how many follow."""
    lines = shot.sound.dialogue
    first = lines[0]
    words = first.line if len(first.line) <= SPEECH_CHARS else first.line[: SPEECH_CHARS - 1] + "…"
    more = f" (+{len(lines) - 1})" if len(lines) > 1 else ""
    return f"{first.character}: “{words}”{more}"


def _speech_tag(draw: ImageDraw.ImageDraw, shot, x: int, y: int, font) -> None:
    text = speech_tag_text(shot)
    left, top, right, bottom = draw.textbbox((x + 6, y + 6), text, font=font)
    draw.rectangle([left - 4, top - 3, min(right + 4, x + THUMB_WIDTH - 2), bottom + 3], fill=SPEECH_BG)
    draw.text((x + 6, y + 6), text, fill=SPEECH_TEXT, font=font)


def write_contact_sheet(plan: Plan, middles: dict[str, np.ndarray | None], path) -> None:
    """Write the sheet as PNG atomically."""
    buffer = io.BytesIO()
    render_contact_sheet(plan, middles).save(buffer, format="PNG", optimize=False)
    atomic_write_bytes(path, buffer.getvalue())
