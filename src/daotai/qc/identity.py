"""Identity QC: does each character look the same in every shot that shows them? Measured from the masks.

Per shot, a character's *look* is the colour and texture of the parts of their body the mask shows,
sampled on ``LOOK_FRAMES`` frames spread over the shot. Each mask pixel (value j + 1 for the shot's
j-th character) is lifted to the world with the depth control and the frame's camera, and where it
lies on the body says which part it is: the chest's band of heights is the top, the legs' band the
bottom (``PARTS``, in units of the character's height); on the head, the crown and the back are
hair, the front below the hairline is the face, seen only while the lens is within
``FACE_VIEW_MAX_DEG`` of where the head faces. Positions on the body, not image rows, so a close-up
that cuts the figure, a wide that shows it whole and a view from behind measure the same parts. An
animal has one part, its body. Sitting frames are left out (a seated body's heights drop).

A part's colour is the median of its pixels in CIE Lab (L in 0..100) over the mask eroded by a pixel
(the soft silhouette edge and the encoder's half-size chroma blend into the background there), its
texture the mean absolute Laplacian of luma inside the same pixels. Texture is reported, not judged:
for one garment it follows the size on screen (previz's hair read 1.2 in one close-up and 14.5 in
another). Colours of a part in two shots differ by :func:`look_distance`: the Lab distance once one
is lit as the other (within ``SHADE_MAX``), as the same cloth is darker on its shadowed side.

Across shots (:func:`apply_identity`, once every shot's entry is in): a character shown in two shots
whose look differs by more than ``LOOK_DISTANCE_MAX`` in any part seen in both changed between them.
The shot that differs from the most other shots is flagged (two shots: the later one; the first
appearance sets the look), naming the character, the part, the shot it was compared with and the
distance. qc.json keeps each shot's looks under the shot's ``identity`` and the per-character scores
(the largest distance between any two shots; None when shown in one shot) under the report's
``identity``. The check is judged across a whole run, so a per-take retake does not act on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai.plan import geometry
from daotai.plan.model import Plan, ShotPlan


@dataclass(frozen=True)
class BodyPart:
    """A band of a standing figure's height, in units of the character's height."""

    name: str
    low: float
    high: float


# Heights from the previz mannequin (render/previz/meshes.py): the chest runs from the shoulders
# (0.805) to the waist (the hips' garment reaches 0.605); hands hang to ~0.40 and a coat's hem to
# ~0.38, so the legs' band starts below both and ends above the shoes (ankles at 0.04).
PARTS: tuple[BodyPart, ...] = (
    BodyPart("top", 0.64, 0.79),
    BodyPart("bottom", 0.10, 0.36),
)
# The head (above the neck) is split by where a pixel lies on it, seen from the head's centre in the
# head's own axes (the ellipsoid's half-sizes as units): its face is the front below the hairline
# (eyes at 0.934, lips at 0.893; the hair's cap comes down to ~0.95 in front), its hair the crown
# and the back (the cap covers both). The sides (ears, temples) are neither.
HEAD_FROM = 0.86
HEAD_CENTRE = 0.928  # height of the head's centre
HEAD_HALF = (0.048, 0.068, 0.058)  # the head's half-sizes (x, y, z), in body heights
FACE_BAND = (0.875, 0.945)
FACE_FRONT = 0.5  # the direction's forward share (cosine) at least this: the face
HAIR_UP = 0.55  # the direction's upward share (cosine) at least this: the crown's hair
HAIR_BACK = -0.1  # the direction's forward share at most this: the back of the head's hair
# The face only while the lens is within this of where the head faces: without it, in bench/qc.py
# --quick a bird's-eye extreme close-up and a bird's-eye medium read the band as scalp and brow
# (L* 68 and 20 against 32–38 for the face seen from the front).
FACE_VIEW_MAX_DEG = 50.0
ANIMAL_PARTS: tuple[BodyPart, ...] = (BodyPart("body", 0.05, 2.0),)
LOOK_FRAMES = 5  # frames sampled per shot, first and last included
MIN_PART_PX = 12  # fewer eroded pixels than this in a frame: the part is not seen there
# The same cloth seen from the lit side and from its shadow differs by a factor of light (linear RGB
# times about 2 between the front and the back of a figure in previz's key light); a change of
# light within SHADE_MAX either way is not a change of look. A garment that only turns lighter or
# darker within it (dark red for red) goes unseen; white for black, or any change of hue, does not.
SHADE_MAX = 3.0
# Measured on previz renders: the same character across every framing, angle, lens and move of
# bench/qc.py --quick (13 shots, 480x270) stays under 3.4, and under 2.2 across 27 shots at 320x180
# (close-up to extreme wide, low, high, dutch, from behind, day and night). A garment changed from one
# named colour to another is 21 (red to orange), 31 (blue jeans to black trousers), 36 (red to pink),
# 63–65 (red to blue or green); dark red for red is 4.4, and goes unseen (a change of light).
LOOK_DISTANCE_MAX = 15.0


def _srgb_to_linear(srgb: np.ndarray) -> np.ndarray:
    """sRGB-encoded values 0..1 -> linear light (the IEC 61966-2-1 curve)."""
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    """Linear light 0..1 -> sRGB-encoded values (the IEC 61966-2-1 curve)."""
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)


def _lab_to_linear(lab: Any) -> np.ndarray:
    import cv2

    srgb = cv2.cvtColor(np.asarray(lab, dtype=np.float32).reshape(1, 1, 3), cv2.COLOR_Lab2RGB).reshape(3)
    return _srgb_to_linear(np.clip(srgb.astype(np.float64), 0.0, 1.0))


def _linear_to_lab(linear: np.ndarray) -> np.ndarray:
    import cv2

    srgb = _linear_to_srgb(linear).astype(np.float32).reshape(1, 1, 3)
    return cv2.cvtColor(srgb, cv2.COLOR_RGB2Lab).reshape(3).astype(np.float64)


def shade_between(lab_a: Any, lab_b: Any) -> float:
    """The light factor that best turns colour ``lab_a`` into ``lab_b`` (least squares in linear RGB),
    held within 1/SHADE_MAX..SHADE_MAX."""
    a, b = _lab_to_linear(lab_a), _lab_to_linear(lab_b)
    scale = float(a @ b / (a @ a)) if float(a @ a) > 1e-9 else SHADE_MAX
    return min(max(scale, 1.0 / SHADE_MAX), SHADE_MAX)


def look_distance(lab_a: Any, lab_b: Any) -> float:
    """CIE76 distance between two Lab colours once ``lab_a`` is lit as ``lab_b`` is (:func:`shade_between`):
    the same cloth in the key light and in its own shadow is near 0; another hue, or white against
    black, is not. Symmetric: the smaller of the two directions."""
    def one_way(x: Any, y: Any) -> float:
        lit = _linear_to_lab(_lab_to_linear(x) * shade_between(x, y))
        return float(np.linalg.norm(lit - _linear_to_lab(_lab_to_linear(y))))  # both through the same round trip

    return min(one_way(lab_a, lab_b), one_way(lab_b, lab_a))


def sampled_frames(frames: int, count: int = LOOK_FRAMES) -> tuple[int, ...]:
    """``count`` frame indices spread evenly over ``frames`` frames, first and last included."""
    return tuple(sorted({int(round(i)) for i in np.linspace(0, frames - 1, min(frames, count))})) if frames else ()


def _head_parts(world: np.ndarray, height: np.ndarray, position: tuple[float, float], facing_deg: float,
                body_m: float, eye: np.ndarray) -> dict[str, np.ndarray]:
    """(N,) bool "hair" and "face" of world points (N, 3) m at ``height`` (N,) body heights, on the head of
    a figure standing at ``position`` [x, z] whose head faces ``facing_deg`` (about +y, 0 toward +z),
    seen from a lens at ``eye`` (3,) m: no face unless the lens is within FACE_VIEW_MAX_DEG of the
    face's way (from high above or from the side the band shows brow, scalp and cheek, not a face)."""
    yaw = math.radians(facing_deg)
    forward = np.array([math.sin(yaw), math.cos(yaw)])  # (x, z) the head faces
    to_lens = eye - np.array([position[0], HEAD_CENTRE * body_m, position[1]])  # (3,) m
    facing_lens = float(np.array([forward[0], 0.0, forward[1]]) @ to_lens) >= (
        math.cos(math.radians(FACE_VIEW_MAX_DEG)) * float(np.linalg.norm(to_lens)))
    right = np.array([math.cos(yaw), -math.sin(yaw)])
    offset_xz = (world[:, [0, 2]] - np.asarray(position, dtype=np.float64)) / body_m  # (N, 2) body heights
    local = np.stack([offset_xz @ right / HEAD_HALF[0], (height - HEAD_CENTRE) / HEAD_HALF[1],
                      offset_xz @ forward / HEAD_HALF[2]], axis=1)  # (N, 3) in head half-sizes
    length = np.maximum(np.linalg.norm(local, axis=1), 1e-9)
    front, up = local[:, 2] / length, local[:, 1] / length  # (N,) cosines to the face's way and to +y
    head = height >= HEAD_FROM
    return {
        "hair": head & ((up >= HAIR_UP) | (front <= HAIR_BACK)),
        "face": head & (height >= FACE_BAND[0]) & (height < FACE_BAND[1]) & (front >= FACE_FRONT) & facing_lens,
    }


def body_parts(plan: Plan, shot: ShotPlan, index: int, mask: np.ndarray, depth_mm: np.ndarray,
               hidden: np.ndarray | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Per character in frame ``index`` (standing, walking or running), per part it shows: (H, W) bool
    pixels of the mask (H, W) uint8, eroded by one pixel and outside ``hidden`` (H, W) bool (previz's
    name labels), whose world height falls in the part's band."""
    import cv2

    characters = {c.id: c for c in plan.characters}
    camera = shot.cameras[index]
    cam = np.array(camera.cam_to_world, dtype=np.float64).reshape(4, 4)
    intrinsics = geometry.intrinsics_from_matrix(np.array(camera.K, dtype=np.float64).reshape(3, 3))
    kernel = np.ones((3, 3), np.uint8)
    out: dict[str, dict[str, np.ndarray]] = {}
    for j, person in enumerate(shot.character_frames[index]):
        if person.pose in ("sit", "kneel", "lean", "lie") and person.pose_weight > 0.0 and not person.walking:
            continue  # a seated (kneeling, leaning, lying) body's heights are not a standing one's
        inside = cv2.erode((mask == j + 1).astype(np.uint8), kernel).astype(bool) & (depth_mm != 65535)
        if hidden is not None:
            inside &= ~hidden
        rows, cols = np.nonzero(inside)
        if rows.size < MIN_PART_PX:
            continue
        uv = np.stack([cols + 0.5, rows + 0.5], axis=1)  # (N, 2) pixel centres
        world = geometry.unproject(uv, depth_mm[rows, cols].astype(np.float64) * 1e-3, cam, intrinsics)  # (N, 3) m
        character = characters[person.id]
        height = world[:, 1] / character.height  # (N,) in body heights
        parts = ANIMAL_PARTS if character.kind == "animal" else PARTS
        bands = {part.name: (height >= part.low) & (height < part.high) for part in parts}
        if character.kind != "animal":
            bands.update(_head_parts(world, height, person.position, person.facing + person.head_turn,
                                     character.height, cam[:3, 3]))
        found: dict[str, np.ndarray] = {}
        for name, keep in bands.items():
            if np.count_nonzero(keep) >= MIN_PART_PX:
                pixels = np.zeros(mask.shape, dtype=bool)
                pixels[rows[keep], cols[keep]] = True
                found[name] = pixels
        if found:
            out[person.id] = found
    return out


def part_stats(rgb: np.ndarray, pixels: np.ndarray, laplacian: np.ndarray) -> tuple[np.ndarray, float, int]:
    """(median Lab (3,), texture, pixel count) of the (H, W) bool ``pixels`` of an (H, W, 3) uint8 RGB frame;
    texture: mean absolute Laplacian of its luma (``laplacian`` (H, W) float32) there."""
    import cv2

    colours = rgb[pixels].astype(np.float32).reshape(-1, 1, 3) / np.float32(255.0)  # (N, 1, 3) 0..1
    lab = cv2.cvtColor(colours, cv2.COLOR_RGB2Lab).reshape(-1, 3)  # L 0..100, a and b about -128..127
    return np.median(lab, axis=0), float(np.mean(np.abs(laplacian[pixels]))), int(lab.shape[0])


class LookSampler:
    """A shot's looks, fed frames (those not in ``wanted`` are skipped) whole through :meth:`add`, or
    picture and controls apart from the decodes other checks make (:meth:`take_picture`,
    :meth:`take_controls`); :meth:`finish` gives the shot's ``identity`` entry."""

    def __init__(self, plan: Plan, shot: ShotPlan, labels: bool = True):
        from daotai.qc.labels import label_names

        self.plan, self.shot = plan, shot
        self._labels = label_names(plan, shot) if labels else None
        self.wanted = sampled_frames(shot.frames)
        # character -> part -> per sampled frame (Lab (3,), texture, pixels)
        self._seen: dict[str, dict[str, list[tuple[np.ndarray, float, int]]]] = {}
        self._pictures: dict[int, np.ndarray | None] = {}  # sampled frames waiting for their controls, and back
        self._controls: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def take_picture(self, index: int, rgb: np.ndarray) -> None:
        """Frame ``index`` of the picture, (H, W, 3) uint8 (measured once its controls are in)."""
        if index in self.wanted and index not in self._pictures:
            self._pictures[index] = rgb
            self._pair(index)

    def take_controls(self, index: int, depth_mm: np.ndarray | None, mask: np.ndarray | None) -> None:
        """Frame ``index`` of the depth (H, W) uint16 mm and mask (H, W) uint8 controls."""
        if index in self.wanted and depth_mm is not None and mask is not None and index not in self._controls:
            self._controls[index] = (depth_mm, mask)
            self._pair(index)

    def _pair(self, index: int) -> None:
        if index in self._pictures and index in self._controls and self._pictures[index] is not None:
            depth_mm, mask = self._controls[index]
            self.add(index, self._pictures[index], mask, depth_mm)
            self._pictures[index] = None  # measured: keep no frame

    def missing_pictures(self) -> list[int]:
        """Sampled frames whose controls came but whose picture did not (no other check decoded it)."""
        return [i for i in self._controls if i not in self._pictures]

    def add(self, index: int, rgb: np.ndarray | None, mask: np.ndarray | None, depth_mm: np.ndarray | None) -> None:
        """Take frame ``index``: its RGB (H, W, 3) uint8, mask (H, W) uint8 and depth (H, W) uint16 mm."""
        import cv2

        from daotai.qc.labels import _label_boxes  # the boxes previz draws its labels in

        if index not in self.wanted or rgb is None or mask is None or depth_mm is None:
            return
        if rgb.shape[:2] != mask.shape or mask.shape != depth_mm.shape:
            return  # a file of the wrong size fails the format check; nothing to compare here
        luma = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        laplacian = np.abs(cv2.Laplacian(luma, cv2.CV_32F, ksize=1))  # (H, W) float32
        hidden = _label_boxes(mask, self._labels) if self._labels else None
        for char_id, parts in body_parts(self.plan, self.shot, index, mask, depth_mm, hidden).items():
            for name, pixels in parts.items():
                self._seen.setdefault(char_id, {}).setdefault(name, []).append(part_stats(rgb, pixels, laplacian))

    def finish(self) -> dict[str, Any]:
        """The shot's ``identity`` entry: per character, per part seen, its colour, texture and pixels."""
        characters: dict[str, Any] = {}
        for char_id in self.shot.characters:
            parts = self._seen.get(char_id)
            if not parts:
                continue
            characters[char_id] = {
                name: {
                    "lab": [round(float(v), 2) for v in np.median(np.stack([s[0] for s in samples]), axis=0)],
                    "texture": round(float(np.median([s[1] for s in samples])), 3),
                    "pixels": int(sum(s[2] for s in samples)),
                    "frames": len(samples),
                }
                for name, samples in parts.items()
            }
        return {"frames": list(self.wanted), "characters": characters}


def finish_looks(sampler: LookSampler, video: Path) -> dict[str, Any]:
    """The sampler's entry once the pictures no other check decoded are read from ``video``."""
    from daotai.encode.video import decode_frames

    missing = sampler.missing_pictures()
    if missing:
        for index, rgb in enumerate(decode_frames(video)):
            if index > max(missing):
                break
            sampler.take_picture(index, rgb)
    return sampler.finish()


def shot_looks(plan: Plan, shot: ShotPlan, video: Path, depth: Path, mask: Path, labels: bool = True) -> dict[str, Any]:
    """The ``identity`` entry of a shot from its video and its depth (uint16 mm) and mask control files
    (``labels``: previz drew name labels over the picture, left out of the looks)."""
    from daotai.encode.video import decode_frames, decode_gray

    sampler = LookSampler(plan, shot, labels)
    last = max(sampler.wanted, default=-1)
    layers: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]] = zip(
        decode_frames(video), decode_gray(mask), decode_gray(depth), strict=False)
    for index, (rgb, mask_frame, depth_mm) in enumerate(layers):
        if index > last:
            break
        sampler.add(index, rgb, mask_frame, depth_mm)
    return sampler.finish()


def compare_looks(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's ``identity`` section from shot entries in plan order (each with its ``identity``):
    per character the shots compared, every pair's worst part and distance, the score (the largest
    distance), the shots flagged (``changed_in``: shot -> the shot it was compared with)."""
    looks = [(e["shot_id"], e["identity"]["characters"]) for e in entries if e.get("identity")]
    order = list(dict.fromkeys(c for _, chars in looks for c in chars))
    characters: dict[str, Any] = {}
    for char_id in order:
        shots = [(shot_id, chars[char_id]) for shot_id, chars in looks if char_id in chars]
        pairs = []
        for i, (a, look_a) in enumerate(shots):
            for b, look_b in shots[i + 1:]:
                common = [p for p in look_a if p in look_b]
                if not common:
                    continue
                distances = {p: look_distance(look_a[p]["lab"], look_b[p]["lab"]) for p in common}
                worst = max(distances, key=distances.__getitem__)
                pairs.append({"shots": [a, b], "part": worst, "distance": round(distances[worst], 2)})
        differ = [p for p in pairs if p["distance"] > LOOK_DISTANCE_MAX]
        characters[char_id] = {
            "shots": [s for s, _ in shots],
            "score": max((p["distance"] for p in pairs), default=None),  # None: shown in one shot only
            "pairs": pairs,
            "changed_in": _blame([s for s, _ in shots], differ),
            "ok": not differ,
        }
    return {
        "rule": (f"a character's hair, face, top and bottom colours differ by at most {LOOK_DISTANCE_MAX:g} (CIE76, "
                 f"after a change of light up to x{SHADE_MAX:g}) between any two shots that show them"),
        "threshold": LOOK_DISTANCE_MAX,
        "characters": characters,
    }


def _blame(shots: list[str], differ: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Shots whose look differs from the most other shots, each with the pair that shows it worst;
    when every shot differs as often (two shots), all but the first (the first appearance sets the look)."""
    if not differ:
        return {}
    counts = {s: sum(s in p["shots"] for p in differ) for s in shots}
    most = max(counts.values())
    blamed = [s for s in shots if counts[s] == most]
    if len(blamed) == len(shots):
        blamed = blamed[1:]
    out = {}
    for shot_id in blamed:
        pair = max((p for p in differ if shot_id in p["shots"]), key=lambda p: p["distance"])
        other = pair["shots"][0] if pair["shots"][1] == shot_id else pair["shots"][1]
        out[shot_id] = {"compared_with": other, "part": pair["part"], "distance": pair["distance"]}
    return out


def apply_identity(entries: list[dict[str, Any]], finish_shot: Any) -> dict[str, Any] | None:
    """Compare the looks of every character across ``entries`` (shot entries in plan order) and give
    each shot that shows a character seen elsewhere an ``identity`` verdict (failing where the
    character's look changed there), re-finishing it with ``finish_shot(entry, verdicts, warnings)``.
    Returns the report's ``identity`` section (None when no shot carries looks). Running it again on
    the same entries gives the same result (an earlier identity verdict is replaced)."""
    from daotai.qc.checks import check_named

    if not any(e.get("identity") for e in entries):
        return None
    check_named("identity")  # its verdicts are a registered check
    section = compare_looks(entries)
    compared = {c: set(v["shots"]) for c, v in section["characters"].items() if len(v["shots"]) > 1}
    for entry in entries:
        shot_id = entry["shot_id"]
        here = [c for c, shots in compared.items() if shot_id in shots]
        verdicts = [v for v in entry.get("verdicts") or [] if v["check"] != "identity"]
        if here:
            changed = [(c, section["characters"][c]["changed_in"][shot_id]) for c in here
                       if shot_id in section["characters"][c]["changed_in"]]
            if changed:
                text = "; ".join(f"identity: {c}'s {why['part']} looks different here than in {why['compared_with']} "
                                 f"(distance {why['distance']:.0f} > {LOOK_DISTANCE_MAX:g}): the same character "
                                 "should look the same in every shot" for c, why in changed)
            else:
                text = f"identity: {', '.join(here)} look{'s' if len(here) == 1 else ''} as in the other shots"
            verdicts.append({"check": "identity", "ok": not changed, "text": text})
        if verdicts != (entry.get("verdicts") or []):
            finish_shot(entry, verdicts, entry.get("warnings") or [])
    return section
