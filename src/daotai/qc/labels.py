"""Where previz may have drawn the characters' name labels, for the checks that must look past them.

Its own module so that every check that reads the masks (the shot report, identity) can ask
without importing one another.
"""

from __future__ import annotations

import math

import numpy as np

from daotai.plan.model import Plan, ShotPlan

__all__ = ["LABEL_EM_PER_CHAR", "LABEL_EXTRA_EM", "LABEL_HEIGHT_EM", "_label_boxes", "label_names"]

# previz draws each visible character's name in a box just above the head: a screen-space
# overlay, snapped to whole pixels, that follows no surface of the depth map. Its box is at
# most about LABEL_HEIGHT_EM font sizes tall and LABEL_EM_PER_CHAR per character wide (plus
# LABEL_EXTRA_EM for the dot and padding); the font size is at most max(11, H / 22) px.
LABEL_HEIGHT_EM = 2.6
LABEL_EM_PER_CHAR = 1.0
LABEL_EXTRA_EM = 2.0


def _label_boxes(mask: np.ndarray, names: list[str]) -> np.ndarray:
    """(H, W) bool: where previz may have drawn name labels above (or, near the top edge, beside) the
    characters of ``mask``."""
    height, width = mask.shape
    size = max(11.0, height / 22.0)  # px, the largest label font
    box_h = math.ceil(LABEL_HEIGHT_EM * size)
    out = np.zeros(mask.shape, dtype=bool)
    for value, name in enumerate(names, start=1):
        rows = np.flatnonzero((mask == value).any(axis=1))
        if rows.size == 0:
            continue
        top = int(rows[0])
        centre = float(np.flatnonzero(mask[top] == value).mean())
        half = math.ceil(0.5 * size * (LABEL_EXTRA_EM + LABEL_EM_PER_CHAR * len(name)))
        # The renderer keeps the whole box inside the frame, so a box cut by an image edge
        # is shifted inward: clamp the same way.
        y0 = min(max(top - box_h, 0), max(height - box_h, 0))
        x0 = min(max(round(centre) - half, 0), max(width - 2 * half, 0))
        out[y0 : max(top, y0 + box_h), x0 : x0 + 2 * half] = True
        if top < box_h:  # no room above the head: previz puts the label beside it (right, else left)
            rows_beside = slice(max(0, top - box_h), min(height, top + 3 * box_h))
            cols = np.flatnonzero((mask[rows_beside] == value).any(axis=0))
            out[rows_beside, int(cols.max()) + 1 : int(cols.max()) + 1 + 2 * half + box_h] = True
            out[rows_beside, max(0, int(cols.min()) - 2 * half - box_h) : int(cols.min())] = True
    return out


def label_names(plan: Plan, shot: ShotPlan) -> list[str]:
    """Per mask value - 1, the longest text previz may draw as the character's label."""
    characters = {c.id: c for c in plan.characters}
    people = shot.character_frames[0] if shot.character_frames else ()
    return [max(characters[p.id].name, p.id, key=len) for p in people]
