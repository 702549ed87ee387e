"""Character looks as pictures a model can be conditioned on: the script's reference image, or a swatch.

A character's first ``reference_images`` entry (relative paths resolve against the script's
folder) is read with an allow-list of formats and a pixel cap; a character without one is a flat
swatch of its previz colour, so every character in a shot has exactly one picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daotai.errors import BackendError
from daotai.plan.model import Plan

REFERENCE_FORMATS = ["PNG", "JPEG", "WEBP"]
MAX_REFERENCE_PIXELS = 64_000_000
SWATCH_SIDE = 256  # pixels of a colour swatch (square)


@dataclass(frozen=True)
class CharacterPicture:
    """One character's picture: the image, and where it came from."""

    character: str
    image: Any  # PIL.Image.Image, RGB
    source: str  # the reference image's path, or "colour swatch #rrggbb"

    @property
    def swatch(self) -> bool:
        """Whether the picture is a colour swatch (the character has no reference image)."""
        return self.source.startswith("colour swatch")


def load_reference_image(path: Path) -> Any:
    """An RGB PIL image from an allowed format, refusing decompression bombs; BackendError names the file."""
    from PIL import Image

    try:
        with Image.open(path, formats=REFERENCE_FORMATS) as image:
            if image.width * image.height > MAX_REFERENCE_PIXELS:
                raise BackendError(f"{path}: {image.width}x{image.height} is too large for a reference image")
            return image.convert("RGB")
    except (OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise BackendError(f"{path}: cannot be read as a reference image ({exc})") from None


def character_picture(plan: Plan, character_id: str, root: Path) -> CharacterPicture:
    """The character's first reference image (relative to ``root``), else a swatch of its colour."""
    from PIL import Image

    character = next((c for c in plan.characters if c.id == character_id), None)
    if character is None:
        raise BackendError(f"characters: {character_id!r} is not a character of the plan")
    if character.reference_images:
        path = Path(character.reference_images[0])
        path = path if path.is_absolute() else root / path
        try:
            image = load_reference_image(path)
        except BackendError as exc:
            raise BackendError(f"characters.{character_id}.reference_images: {exc}") from None
        return CharacterPicture(character_id, image, str(path))
    rgb = tuple(int(round(255 * c)) for c in character.colour)
    swatch = Image.new("RGB", (SWATCH_SIDE, SWATCH_SIDE), rgb)
    return CharacterPicture(character_id, swatch, "colour swatch #{:02x}{:02x}{:02x}".format(*rgb))
