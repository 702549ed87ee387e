"""Framing QC: does the shot frame its subject as the script asks? Measured from the masks.

Per shot, at the frame the framing names (the first; for a push-in that lands on its framing, the
last: ``ShotPlan.framing_frame``), from the character mask (value j + 1 for the shot's j-th character) and the depth
control (metres along the view axis):

* **size**: the subject's on-screen height, the whole figure's height as a share of the frame
  height. When the subject's mask touches neither the top nor the bottom edge and the view is
  near level, it is the mask's own extent (crown of the hair to the soles). When the frame cuts
  the figure (close sizes) or the camera looks steeply up or down (the figure is foreshortened),
  it is the character's height in metres over the frame height at the subject's distance: the
  median depth of the subject's mask pixels, plus half a body's depth (the mask sees the near
  surface, framing distances run to the body's axis), times ``H / fy``; so too for a subject lying
  down (the body lies across the picture, its mask's height says nothing of the size). The share must lie in
  the band of the asked framing: bands meet halfway (geometric mean) between the nominal shares
  of neighbouring sizes, the nominal share being height / the metres the framing shows
  (``daotai.plan.framing.FRAMING_RULES``; tight sizes scale with the person, wide sizes with the
  set). Two-person shot types have bands of ×/÷ ``SHOT_TYPE_TOLERANCE`` around their own nominal
  share. Table for a 1.75 m person in docs/conventions.md.
* **characters**: every character the framing names is visible (at least ``MIN_VISIBLE_PX``
  mask pixels, or a third of what its whole figure would cover where it stands, for someone small
  and far away): the subject always; both people of a two-shot or an over-the-shoulder; everyone
  present in a wide or extreme wide with several people (a master).
* **over the shoulder**: the foreground person (the other person nearest the lens) is in the
  frame, nearer than the subject, and cut by a frame edge (left, right or bottom).

The same measurement checks a neural render through the masks and depth the previz predicts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from daotai.plan.framing import ANIMAL_FRAMING_SCALE, FRAMING_RULES, REFERENCE_HEIGHT_M
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.viewpoint import VIEWPOINT_FRAMINGS

# Sizes from tightest to widest; bands meet between neighbours.
SIZES = ("extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide", "extreme_wide")
SHOT_TYPE_TOLERANCE = 1.3  # a two-person shot type's band: its nominal share ×/÷ this
BODY_HALF_DEPTH_M = 0.10  # from the body's near surface to its axis, for a 1.75 m figure
MIN_VISIBLE_PX = 20  # fewer mask pixels than this is not "visible" (a hand at the edge, a sliver)
FIGURE_AREA = 0.2  # a figure covers about this share of the square on its height (people and animals alike)
STEEP_VIEW_DEG = 35.0  # beyond this pitch the mask's extent is foreshortened: use the depth
GROUP_FRAMINGS = ("wide", "extreme_wide")


def nominal_share(framing: str, height_m: float, animal: bool = False) -> float:
    """The whole figure's height as a share of the frame height that ``framing`` asks for
    (an animal's close sizes show ``ANIMAL_FRAMING_SCALE`` times more of it, as the planner frames them)."""
    rule = FRAMING_RULES[framing]
    visible = rule.visible_m * (height_m / REFERENCE_HEIGHT_M if rule.scale_with_height else 1.0)
    if animal and rule.scale_with_height:
        visible *= ANIMAL_FRAMING_SCALE
    return height_m / visible


def band(framing: str, height_m: float, animal: bool = False) -> tuple[float, float]:
    """(low, high) share of the frame height the figure's height may take in ``framing`` (high may be inf)."""
    if framing not in SIZES:
        centre = nominal_share(framing, height_m, animal)
        return centre / SHOT_TYPE_TOLERANCE, centre * SHOT_TYPE_TOLERANCE
    i = SIZES.index(framing)
    here = nominal_share(framing, height_m, animal)
    # bands meet halfway between neighbours; where an animal's scaled close sizes overtake the
    # unscaled wide ones the boundary is the halfway point all the same, never inverted
    high = math.inf if i == 0 else math.sqrt(here * nominal_share(SIZES[i - 1], height_m, animal))
    low = 0.0 if i == len(SIZES) - 1 else math.sqrt(here * nominal_share(SIZES[i + 1], height_m, animal))
    return min(low, here), max(high, here)


def size_of(share: float, height_m: float, animal: bool = False) -> str:
    """The size whose band holds ``share`` (for saying what a wrong framing measured as)."""
    return next((f for f in SIZES if band(f, height_m, animal)[0] <= share < band(f, height_m, animal)[1]),
                "extreme_close_up" if share >= 1.0 else "extreme_wide")


def named_characters(plan: Plan, shot: ShotPlan) -> tuple[str, ...]:
    """Who the framing says is in the picture: the subject, both people of a two-person shot type,
    everyone present in a master (a wide with several people)."""
    if shot.subject is None:
        return ()
    if shot.framing in ("two_shot", "over_the_shoulder"):
        return (shot.subject, _foreground(shot))
    if shot.framing in GROUP_FRAMINGS and len(shot.characters) > 1:
        return tuple(shot.characters)
    return (shot.subject,)


def _foreground(shot: ShotPlan) -> str:
    """The other person nearest the lens at the first frame (the shoulder of an OTS, the partner of a two-shot)."""
    eye = np.array(shot.cameras[shot.framing_frame].cam_to_world).reshape(4, 4)[:3, 3]
    others = [p for p in shot.character_frames[shot.framing_frame] if p.id != shot.subject]
    return min(others, key=lambda p: (math.hypot(p.position[0] - eye[0], p.position[1] - eye[2]), p.id)).id


def measure_framing(plan: Plan, shot: ShotPlan, mask: np.ndarray, depth_m: np.ndarray) -> dict[str, Any] | None:
    """The framing entry of one shot from its framed frame's mask (H, W) uint8 and depth (H, W) metres.

    None when the shot has no subject, or no size to measure (a pov sees through the subject's eyes,
    an insert shows a detail). ``ok`` is whether size, characters and (OTS) foreground pass.
    """
    if shot.subject is None or shot.subject not in shot.characters or shot.framing in VIEWPOINT_FRAMINGS:
        return None
    height, width = mask.shape
    heights = {c.id: c.height for c in plan.characters}
    counts = {c: int(np.count_nonzero(mask == j + 1)) for j, c in enumerate(shot.characters)}
    entry: dict[str, Any] = {"framing": shot.framing, "frame": shot.framing_frame}
    problems: list[str] = []

    subject_px = mask == shot.characters.index(shot.subject) + 1  # (H, W) bool
    h_m = heights[shot.subject]
    animal = next(c.kind for c in plan.characters if c.id == shot.subject) == "animal"
    low, high = band(shot.framing, h_m, animal)
    entry["band"] = [round(low, 3), None if math.isinf(high) else round(high, 3)]
    if counts[shot.subject] < MIN_VISIBLE_PX:
        entry.update(share=None, method=None, measured_as=None, size_ok=False)
        when = "at the start" if shot.framing_frame == 0 else "where the push lands"
        problems.append(f"subject {shot.subject} not in the picture {when}, so its framing cannot be seen")
    else:
        share, method = _share(shot, subject_px, depth_m, h_m)
        measured = size_of(share, h_m, animal)
        ok = low <= share < high
        entry.update(share=round(share, 3), method=method, measured_as=measured, size_ok=ok)
        if not ok:
            top = "open" if math.isinf(high) else f"{high:.2f}"
            problems.append(f"asked {shot.framing} but subject {shot.subject} is {share:.2f} frame heights tall, "
                            f"a {measured} (band {low:.2f}–{top})")

    wanted = named_characters(plan, shot)
    missing = [c for c in wanted if counts.get(c, 0) < _enough_pixels(plan, shot, c)]
    entry["characters"] = {"named": list(wanted), "missing": missing}
    if [c for c in missing if c != shot.subject]:
        problems.append(f"{', '.join(c for c in missing if c != shot.subject)} not in the picture, "
                        f"which a {shot.framing} of {shot.subject} should show")

    if shot.framing == "over_the_shoulder":
        near = wanted[1]
        near_px = mask == shot.characters.index(near) + 1
        edges = [name for name, edge in (("left", near_px[:, 0]), ("right", near_px[:, -1]), ("bottom", near_px[-1]),
                                          ("top", near_px[0])) if edge.any()]
        closer = (counts[near] >= MIN_VISIBLE_PX and counts[shot.subject] >= MIN_VISIBLE_PX
                  and float(np.median(depth_m[near_px])) < float(np.median(depth_m[subject_px])))
        fg_ok = counts[near] >= MIN_VISIBLE_PX and bool(edges) and closer
        entry["foreground"] = {"id": near, "pixels": counts[near], "cut_by": edges, "nearer_than_subject": closer,
                               "ok": fg_ok}
        if not fg_ok:
            why = ("not in the picture" if counts[near] < MIN_VISIBLE_PX else
                   "not cut by the frame (a whole figure, not a shoulder)" if not edges else "behind the subject")
            problems.append(f"over-the-shoulder foreground {near} {why}")
    entry["ok"] = not problems
    entry["problems"] = problems
    entry["frame_size"] = [width, height]
    return entry


def _enough_pixels(plan: Plan, shot: ShotPlan, char_id: str) -> float:
    """Mask pixels that make ``char_id`` visible at the first frame: MIN_VISIBLE_PX, or a third of what
    the whole figure would cover at its distance when that is less (a small figure far off in a master)."""
    cam = np.array(shot.cameras[shot.framing_frame].cam_to_world).reshape(4, 4)
    person = next(p for p in shot.character_frames[shot.framing_frame] if p.id == char_id)
    height = next(c.height for c in plan.characters if c.id == char_id)
    centre = np.array([person.position[0], height / 2.0, person.position[1]])
    depth = max(float(-(cam[:3, :3].T @ (centre - cam[:3, 3]))[2]), 1e-3)  # along the view axis, m
    fy = float(np.array(shot.cameras[shot.framing_frame].K).reshape(3, 3)[1, 1])
    whole = FIGURE_AREA * (height * fy / depth) ** 2
    return max(1.0, min(float(MIN_VISIBLE_PX), whole / 3.0))


def _share(shot: ShotPlan, subject_px: np.ndarray, depth_m: np.ndarray, h_m: float) -> tuple[float, str]:
    """The subject's whole-figure height over the frame height, and how it was measured."""
    height = subject_px.shape[0]
    rows = np.flatnonzero(subject_px.any(axis=1))
    cam = np.array(shot.cameras[shot.framing_frame].cam_to_world).reshape(4, 4)
    pitch = math.degrees(math.asin(float(np.clip(-cam[1, 2], -1.0, 1.0))))  # view direction's elevation
    cut = rows[0] == 0 or rows[-1] == height - 1
    person = next(p for p in shot.character_frames[shot.framing_frame] if p.id == shot.subject)
    lying = person.pose == "lie" and not person.walking and person.pose_weight >= 0.5
    if not cut and abs(pitch) < STEEP_VIEW_DEG and not lying:
        return float(rows[-1] - rows[0] + 1) / height, "mask_extent"
    fy = float(np.array(shot.cameras[shot.framing_frame].K).reshape(3, 3)[1, 1])
    near = depth_m[subject_px]
    distance = float(np.median(near[np.isfinite(near)])) + BODY_HALF_DEPTH_M * h_m / REFERENCE_HEIGHT_M
    return h_m * fy / (distance * height), "mask_depth"


def check_framing(plan: Plan, shot: ShotPlan, depth_path: Path, mask_path: Path) -> dict[str, Any] | None:
    """:func:`measure_framing` on the framed frame of a shot's depth (uint16 mm) and mask control files."""
    from itertools import islice

    from daotai.encode.video import decode_gray

    at = shot.framing_frame
    return framing_of_frame(plan, shot, next(islice(decode_gray(depth_path), at, None), None),
                            next(islice(decode_gray(mask_path), at, None), None))


def framing_of_frame(plan: Plan, shot: ShotPlan, depth_mm: np.ndarray | None,
                     mask: np.ndarray | None) -> dict[str, Any] | None:
    """:func:`measure_framing` on a shot's framed depth (uint16 mm) and mask control frames (None when one is missing)."""
    if depth_mm is None or mask is None:
        return None
    depth = depth_mm.astype(np.float32) * np.float32(1e-3)
    depth[depth_mm == 65535] = np.inf
    return measure_framing(plan, shot, mask, depth)


def framing_text(entry: dict[str, Any]) -> str:
    """The framing verdict in words (passing or the first problems)."""
    if not entry["ok"]:
        return "framing: " + "; ".join(entry["problems"])
    share = entry["share"]
    return f"framing: {entry['framing']} as asked ({share:.2f} frame heights)"
