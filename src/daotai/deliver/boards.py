"""Storyboard pages: the boards the web console prints, written by the library (``daotai render
--boards pdf|png``, ``daotai boards RUN_DIR``).

A page is A4 landscape at 150 dpi (PAGE_SIZE pixels), laid out as the console lays it out: the
title and "page n of m" over a rule, then a grid of panels (2 columns up to 4 shots a page, 3 up
to 9, else 4), each the shot's middle frame in the plan's aspect ratio over its caption: number,
shot id, framing, move and duration; the action; each line of dialogue (``Mia: “Where were
you?”``, in blue where the console sets it in italics); the transition into the shot.

PNG pages are the drawn pages. The PDF holds each page as a JPEG (DCT) image at 150 dpi with the
captions also laid over it as invisible text (text render mode 3, as scanned documents carry
their OCR), so a PDF reader finds, selects and copies the words, Chinese included: the text uses
a font that draws nothing (it is never drawn), encoded as Unicode code points (Identity-H) with
a ToUnicode map back to them. Pure Pillow and bytes: no PDF library is needed.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from daotai.deliver.contact_sheet import _font, move_words
from daotai.files import atomic_write_bytes
from daotai.plan.layout import RenderLayout, board_page_id
from daotai.plan.model import Plan, ShotPlan

PAGE_SIZE = (1754, 1240)  # A4 landscape at 150 dpi, pixels (the console's PNG pages)
DPI = 150
MARGIN = 60
GAP = 28
PER_PAGE = 6  # the console's default
PER_PAGE_CHOICES = (4, 6, 8, 9, 12)  # what the console offers
JPEG_QUALITY = 90
INK = (17, 17, 17)
DIM = (85, 85, 85)
DIALOGUE = (29, 59, 138)  # the console sets dialogue in italics; one font here, so a colour tells it apart
FRAME_BG = (34, 34, 34)
FORMATS = ("pdf", "png")


@dataclass(frozen=True)
class PlacedText:
    """A line of text drawn on a page: left edge and baseline in pixels from the top left, size in pixels."""

    x: float
    baseline: float
    size: int
    text: str


@dataclass(frozen=True)
class BoardPage:
    image: Image.Image  # (1240, 1754) RGB
    texts: tuple[PlacedText, ...]


def columns_for(per_page: int) -> int:
    """Panel columns of a page: 2 up to 4 shots, 3 up to 9, else 4 (the console's rule)."""
    return 2 if per_page <= 4 else 3 if per_page <= 9 else 4


def caption_lines(shot: ShotPlan, names: Mapping[str, str]) -> list[tuple[str, str]]:
    """(style, text) lines of a panel's caption: "head", "action", "dialogue", "transition"."""
    lines = [("head", f"{shot.index + 1}. {shot.shot_id} · {shot.framing.replace('_', ' ')} · {move_words(shot)} · "
                      f"{shot.duration_s:.3g} s")]
    if shot.action:
        lines.append(("action", shot.action))
    for line in shot.sound.dialogue if shot.sound is not None else ():
        lines.append(("dialogue", f"{names.get(line.character, line.character)}: “{line.line}”"))
    if shot.transition.type != "cut":
        lines.append(("transition", f"in: {shot.transition.type.replace('_', ' ')} {shot.transition.duration_s:.3g} s"))
    return lines


def wrap(text: str, font, width: float) -> list[str]:
    """``text`` broken into lines no wider than ``width`` pixels: at spaces, or between CJK characters."""
    tokens, word = [], ""
    for ch in text:
        if "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef":  # each CJK character may end a line
            tokens += [word, ch] if word else [ch]
            word = ""
        elif ch.isspace():
            tokens.append(word + ch)
            word = ""
        else:
            word += ch
    if word:
        tokens.append(word)
    lines, line = [], ""
    for token in tokens:
        if line and font.getlength(line + token.rstrip()) > width:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines


def board_pages(plan: Plan, middles: Mapping[str, np.ndarray | None], per_page: int = PER_PAGE) -> list[BoardPage]:
    """The plan's shots on pages of ``per_page`` panels; ``middles``: shot id → (H, W, 3) uint8 frame or None."""
    if per_page not in PER_PAGE_CHOICES:
        raise ValueError(f"per_page: {per_page!r} must be one of {', '.join(map(str, PER_PAGE_CHOICES))}")
    width, height = PAGE_SIZE
    shots = list(plan.shots)
    chunks = [shots[k:k + per_page] for k in range(0, len(shots), per_page)] or [[]]
    columns = columns_for(per_page)
    rows = math.ceil(per_page / columns)
    cell_w = (width - 2 * MARGIN - GAP * (columns - 1)) / columns
    cell_h = (height - 2 * MARGIN - 60 - GAP * (rows - 1)) / rows
    names = {c.id: c.name or c.id for c in plan.characters}
    title_font, page_font = _font(30), _font(24)
    size = 17 if columns >= 4 else 20
    font = _font(size)
    pages = []
    for p, chunk in enumerate(chunks):
        page = Image.new("RGB", PAGE_SIZE, (255, 255, 255))
        draw = ImageDraw.Draw(page)
        texts = [PlacedText(MARGIN, MARGIN + 24, 30, plan.title)]
        draw.text((MARGIN, MARGIN + 24), plan.title, font=title_font, fill=INK, anchor="ls", stroke_width=1,
                  stroke_fill=INK)
        page_text = f"page {p + 1} of {len(chunks)}"
        right = width - MARGIN - page_font.getlength(page_text)
        draw.text((right, MARGIN + 24), page_text, font=page_font, fill=INK, anchor="ls")
        texts.append(PlacedText(right, MARGIN + 24, 24, page_text))
        draw.rectangle([MARGIN, MARGIN + 38, width - MARGIN, MARGIN + 40], fill=INK)
        for k, shot in enumerate(chunk):
            x = MARGIN + (k % columns) * (cell_w + GAP)
            y = MARGIN + 60 + (k // columns) * (cell_h + GAP)
            frame_h = min(cell_w * plan.height / plan.width, cell_h * 0.62)
            frame_w = frame_h * plan.width / plan.height
            draw.rectangle([round(x), round(y), round(x + cell_w), round(y + frame_h)], fill=FRAME_BG)
            frame = middles.get(shot.shot_id)
            if frame is not None:
                thumb = Image.fromarray(frame).resize((round(frame_w), round(frame_h)), Image.Resampling.LANCZOS)
                page.paste(thumb, (round(x + (cell_w - frame_w) / 2), round(y)))
            ty = y + frame_h + 26
            for style, text in caption_lines(shot, names):
                colour = DIALOGUE if style == "dialogue" else DIM if style == "transition" else INK
                for piece in wrap(text, font, cell_w):
                    if ty > y + cell_h:
                        break
                    bold = 1 if style == "head" else 0
                    draw.text((x, ty), piece, font=font, fill=colour, anchor="ls", stroke_width=bold, stroke_fill=colour)
                    texts.append(PlacedText(x, ty, size, piece))
                    ty += size * 1.3
        pages.append(BoardPage(page, tuple(texts)))
    return pages


# ------------------------------------------------------------------ PDF

def _cmap() -> bytes:
    """The ToUnicode CMap: every 2-byte code is the UTF-16 code unit of itself (surrogates excluded)."""
    ranges = [f"<{hi:02X}00> <{hi:02X}FF> <{hi:02X}00>" for hi in range(256) if not 0xD8 <= hi <= 0xDF]
    blocks = [ranges[i:i + 100] for i in range(0, len(ranges), 100)]  # at most 100 entries a block
    body = "\n".join(f"{len(b)} beginbfrange\n" + "\n".join(b) + "\nendbfrange" for b in blocks)
    return ("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
            "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
            "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
            "1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n"
            f"{body}\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n").encode("ascii")


def _hex_utf16(text: str) -> str:
    """``text`` as 2-byte codes (characters beyond the BMP become U+FFFD) in a PDF hex string."""
    return "<" + "".join(f"{ord(ch) if ord(ch) <= 0xFFFF and not 0xD800 <= ord(ch) <= 0xDFFF else 0xFFFD:04X}"
                         for ch in text) + ">"


def _stream(head: str, data: bytes) -> bytes:
    return f"<< {head} /Length {len(data)} >>\nstream\n".encode("ascii") + data + b"\nendstream"


def to_pdf(pages: Sequence[BoardPage], title: str = "") -> bytes:
    """A PDF of the pages: each a JPEG at DPI with its captions as invisible, searchable text."""
    scale = 72 / DPI  # points a pixel
    width_pt, height_pt = PAGE_SIZE[0] * scale, PAGE_SIZE[1] * scale
    objects: list[bytes] = []  # object n is objects[n - 1]

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in once the page tree exists
    tree = add(b"")
    descriptor = add(b"<< /Type /FontDescriptor /FontName /GlyphLess /Flags 5 /FontBBox [0 -200 1000 800] "
                     b"/ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>")
    cid_font = add(f"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /GlyphLess /CIDSystemInfo << /Registry (Adobe) "
                   f"/Ordering (Identity) /Supplement 0 >> /FontDescriptor {descriptor} 0 R /DW 600 "
                   f"/CIDToGIDMap /Identity >>".encode("ascii"))
    to_unicode = add(_stream("", _cmap()))
    font = add(f"<< /Type /Font /Subtype /Type0 /BaseFont /GlyphLess /Encoding /Identity-H "
               f"/DescendantFonts [{cid_font} 0 R] /ToUnicode {to_unicode} 0 R >>".encode("ascii"))
    kids = []
    for page in pages:
        buffer = io.BytesIO()
        page.image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
        w, h = page.image.size
        image = add(_stream(f"/Type /XObject /Subtype /Image /Width {w} /Height {h} /ColorSpace /DeviceRGB "
                            "/BitsPerComponent 8 /Filter /DCTDecode", buffer.getvalue()))
        ops = [f"q {width_pt:.2f} 0 0 {height_pt:.2f} 0 0 cm /Im0 Do Q", "BT 3 Tr"]
        for text in page.texts:
            size = text.size * scale
            ops.append(f"1 0 0 1 {text.x * scale:.2f} {height_pt - text.baseline * scale:.2f} Tm /F1 {size:.2f} Tf "
                       f"{_hex_utf16(text.text)} Tj")
        ops.append("ET")
        contents = add(_stream("", "\n".join(ops).encode("ascii")))
        kids.append(add(f"<< /Type /Page /Parent {tree} 0 R /MediaBox [0 0 {width_pt:.2f} {height_pt:.2f}] "
                        f"/Resources << /XObject << /Im0 {image} 0 R >> /Font << /F1 {font} 0 R >> >> "
                        f"/Contents {contents} 0 R >>".encode("ascii")))
    objects[tree - 1] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>".encode()
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {tree} 0 R >>".encode("ascii")
    info = add(f"<< /Title {_hex_utf16_bom(title)} /Producer (daotai) >>".encode("ascii"))
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode("ascii") + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode("ascii")
    out += b"".join(f"{offset:010d} 00000 n \n".encode("ascii") for offset in offsets)
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R /Info {info} 0 R >>\n"
            f"startxref\n{xref}\n%%EOF\n").encode("ascii")
    return bytes(out)


def _hex_utf16_bom(text: str) -> str:
    """A PDF text string (document metadata) in UTF-16BE with its byte order mark."""
    return "<FEFF" + text.encode("utf-16-be").hex().upper() + ">"


# ------------------------------------------------------------------ files

def middle_frames(plan: Plan, layout: RenderLayout) -> dict[str, np.ndarray | None]:
    """Each shot's middle frame read from its file in a render folder (None where the file is missing)."""
    from daotai.encode.read import decode_frames

    found: dict[str, np.ndarray | None] = {}
    for shot in plan.shots:
        path = layout.shot(shot.shot_id)
        found[shot.shot_id] = None
        if path.is_file():
            for index, frame in enumerate(decode_frames(path)):  # (H, W, 3) uint8
                if index == shot.frames // 2:
                    found[shot.shot_id] = frame
                    break
    return found


def write_boards(plan: Plan, middles: Mapping[str, np.ndarray | None], layout: RenderLayout, fmt: str,
                 per_page: int = PER_PAGE) -> list[Path]:
    """boards.pdf, or boards/page_01.png …, in the render folder; returns the paths written."""
    if fmt not in FORMATS:
        raise ValueError(f"boards: {fmt!r} must be one of {', '.join(FORMATS)}")
    pages = board_pages(plan, middles, per_page)
    if fmt == "pdf":
        atomic_write_bytes(layout.path("boards"), to_pdf(pages, plan.title))
        return [layout.path("boards")]
    written = []
    for number, page in enumerate(pages, start=1):
        path = layout.path("board_page", board_page_id(number))
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        page.image.save(buffer, format="PNG", dpi=(DPI, DPI))
        atomic_write_bytes(path, buffer.getvalue())
        written.append(path)
    for stale in sorted(layout.path("board_page", board_page_id(1)).parent.glob("page_*.png")):
        if stale not in written:  # pages of an earlier, longer set would read as part of this one
            stale.unlink()
    return written


__all__ = ["FORMATS", "PAGE_SIZE", "PER_PAGE", "BoardPage", "board_pages", "caption_lines", "middle_frames",
           "to_pdf", "write_boards"]
