"""contact_sheet.png: a storyboard grid, one frame per shot with its id, framing, move, duration."""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from daotai.deliver.files import atomic_write_bytes
from daotai.plan.model import Plan

THUMB_WIDTH = 360
COLUMNS_MAX = 4
CAPTION_LINES = 2
BACKGROUND = (24, 24, 28)
TEXT = (235, 235, 235)
DIM = (160, 160, 170)


def _font(size: int):
    from daotai.render.previz.labels import find_label_font

    path = find_label_font()
    if path:
        try:
            return ImageFont.truetype(path, size)
        except OSError:
            pass
    return ImageFont.load_default(size=size)


def _move_words(shot) -> str:
    move = shot.move
    if move.type == "static":
        return "static"
    bits = [move.type.replace("_", " ")]
    x, y, z = move.motion
    if z:
        bits.append("in" if z < 0 else "out")
    if move.rotate[0]:
        bits.append("right" if move.rotate[0] > 0 else "left")
    if move.rotate[1]:
        bits.append("up" if move.rotate[1] > 0 else "down")
    if move.orbit:
        bits.append(f"{move.orbit:+g}°")
    if move.fov_end != move.fov:
        bits.append(f"fov {move.fov:g}→{move.fov_end:g}")
    return " ".join(bits)


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
        draw.text((x, y + thumb_h + 4), f"{i + 1}. {shot.shot_id}  ·  {shot.duration_s:g} s", fill=TEXT, font=small)
        line2 = f"{shot.framing.replace('_', ' ')}, {shot.angle.replace('_', ' ')}, {_move_words(shot)}"
        draw.text((x, y + thumb_h + 22), line2, fill=DIM, font=small)
    return sheet


def write_contact_sheet(plan: Plan, middles: dict[str, np.ndarray | None], path) -> None:
    """Write the sheet as PNG atomically."""
    buffer = io.BytesIO()
    render_contact_sheet(plan, middles).save(buffer, format="PNG", optimize=False)
    atomic_write_bytes(path, buffer.getvalue())
