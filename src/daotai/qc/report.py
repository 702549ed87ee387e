"""qc.json: does each delivered file match the plan, survive encoding, and move as planned?

Per shot: size / fps / frame count / colour tags against the plan; black, green and frozen
frames (a freeze is a fault where the plan moves the picture); camera adherence (motion
measured from the pixels vs the planned camera); the subject in view (from the mask control,
else the plan's geometry); encode fidelity (PSNR of decoded frames against the rendered ones:
mean ≥ 38.5 dB and no frame starved; a spread over 1.2 dB is a warning); sound.
For the sequence: frame count and duration against the plan (transitions included).

Each shot entry carries ``verdicts`` (one per check: check, ok, text), ``failures`` (the
failing verdicts' texts), ``warnings`` and ``summary``: one line, failing checks first, that
the CLI and the console show; the numbers for engineers stay under each check's own key.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from daotai.errors import EncodeError, QualityError
from daotai.files import atomic_write_text
from daotai.plan import geometry
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.qc.checks import check_named
from daotai.qc.fades import unexplained_black
from daotai.qc.labels import _label_boxes, label_names
from daotai.render.base import Progress

PSNR_MEAN_MIN_DB = 38.5
PSNR_STD_MAX_DB = 1.2
# Encode fidelity fails on what a user can act on: a mean below PSNR_MEAN_MIN_DB, or one frame
# more than three allowed spreads below it (a frame the encoder starved). The spread itself is
# a warning: across a shot it follows the picture's detail far more than the encoder (a push-in
# that ends on a plain shirt, a crash zoom from a busy wide frame to a face), and no setting
# evens it out. Frames whose rendered luma varies less than FLAT_LUMA_STD code values (a wall or
# a shirt filling the frame, a fade's black) are left out: there PSNR measures nothing but the
# encoder's noise floor and runs to 50 dB or infinity.
PSNR_FRAME_MIN_DB = PSNR_MEAN_MIN_DB - 3 * PSNR_STD_MAX_DB
FLAT_LUMA_STD = 10.0
FIDELITY_ADVICE = "re-render with --codec prores (near-lossless) or --codec hevc"
FIGURE_RADIUS_M = 0.32  # proxy body plus swinging arms, for a 1.75 m figure
# The figure's torso as an elliptic cylinder, in figure heights: previz's chest section is
# 0.097 wide and 0.066 deep each side of the axis (render/previz/meshes.py CHEST_RINGS).
BODY_HALF_WIDTH = 0.10
BODY_HALF_DEPTH = 0.07
# A figure as an occluder of the people behind it (_figure_solids), shares of its height: half its span
# across the shoulders and hanging arms, the top of the shoulders, the head's half width with hair.
# Measured: an over-the-shoulder of two seated people leaves the subject 0.92 visible by this model,
# 0.90 by the rendered mask; a person who steps in front of the subject hides it in 29 of 36 frames.
FIGURE_HALF_SPAN = 0.135
FIGURE_SHOULDER_TOP = 0.83
FIGURE_HEAD_HALF_WIDTH = 0.06


@dataclass
class QcReport:
    ok: bool
    shots: list[dict[str, Any]]
    sequence: dict[str, Any] | None
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, Any] | None = None  # the folder's files against manifest.json (daotai qc)
    identity: dict[str, Any] | None = None  # each character's look across shots (daotai.qc.identity)

    def to_dict(self) -> dict[str, Any]:
        data = {"ok": self.ok, "failures": self.failures, "warnings": self.warnings,
                "shots": self.shots, "sequence": self.sequence}
        if self.files is not None:
            data["files"] = self.files
        if self.identity is not None:
            data["identity"] = self.identity
        return data

    def summary_text(self) -> str:
        """A few plain lines for the terminal: per shot its verdict, what failed first."""
        lines = [f"qc {'passed' if self.ok else 'FAILED'}: {len(self.shots)} shots"]
        for shot in self.shots:
            text = shot.get("summary") or "; ".join(shot.get("failures") or []) or "checked"
            lines.append(f"  {shot['shot_id']}: {'ok' if shot['ok'] else 'FAIL'}: {text}")
            lines.extend(f"    note: {w}" for w in shot.get("warnings") or [])
        if self.sequence is not None and not self.sequence.get("ok", True):
            lines.append(f"  sequence: FAIL: {'; '.join(self.sequence['failures'])}")
        if self.files is not None and not self.files.get("ok", True):
            lines.extend(f"  files: {problem}" for problem in self.files["problems"])
        if self.sequence is None:
            lines.append("  sequence: missing")
        return "\n".join(lines)


# A frozen run is a fault only if the plan moves the picture at least this much per frame
# inside it: consecutive-frame differences cannot tell an eased start (sub-pixel steps)
# from a freeze, the plan can.
FROZEN_MOTION_PX_PER_FRAME = 1.0
MOTION_GRID = 24  # points across the frame where the planned motion is measured (x 24 * H / W down)


def planned_motion(plan: Plan, shot: ShotPlan, first: int, last: int) -> tuple[float, float]:
    """How far (px) the plan moves the picture between two frames: (camera, walkers).

    camera: the 75th percentile of the planned displacement over a grid of the frame, with the
    plan's scene (ground, set pieces, people; the sky at infinity), so a truck over an empty sky
    moves nothing and a pan moves everything. walkers: the largest on-screen displacement of a
    walking character in view at either frame (someone walking out of shot moves no pixel)."""
    if last <= first:
        return 0.0, 0.0
    a, b = shot.cameras[first], shot.cameras[last]
    cam_a = np.array(a.cam_to_world, dtype=np.float64).reshape(4, 4)
    cam_b = np.array(b.cam_to_world, dtype=np.float64).reshape(4, 4)
    _, flow = _camera_flow(plan, shot, first, last)
    moved = np.linalg.norm(flow, axis=1)
    moved = np.where(np.isfinite(moved), moved, plan.width)  # behind the camera: it left the frame
    camera = float(np.percentile(moved, 75))
    heights = {c.id: c.height for c in plan.characters}
    walkers = 0.0
    ends = {p.id: p for p in shot.character_frames[last]}
    for person in shot.character_frames[first]:
        other = ends.get(person.id)
        if other is None or not (person.walking or other.walking):
            continue
        y = 0.5 * heights[person.id]  # the body's middle
        ua = _on_screen(plan, cam_a, a.fov, (person.position[0], y, person.position[1]))
        ub = _on_screen(plan, cam_b, b.fov, (other.position[0], y, other.position[1]))
        if ua is not None and ub is not None:
            walkers = max(walkers, float(np.hypot(*(ub - ua))))
        elif ua is not None or ub is not None:
            walkers = max(walkers, FROZEN_MOTION_PX_PER_FRAME * (last - first))  # walks into or out of view
    return camera, walkers


def _on_screen(plan: Plan, cam: np.ndarray, fov: float, point: tuple[float, float, float],
               margin: float = 0.25) -> np.ndarray | None:
    """Pixel (2,) of a world point when it is in front of the camera and within the frame grown by
    ``margin`` of its size on each side (a body's middle just outside still shows its half)."""
    uv, depth = geometry.project(np.array([point]), cam, geometry.intrinsics_from_fov(fov, plan.width, plan.height))
    u, v = uv[0]
    if not (depth[0] > 0 and np.isfinite(u) and np.isfinite(v)):
        return None
    inside = (-margin * plan.width <= u <= (1 + margin) * plan.width
              and -margin * plan.height <= v <= (1 + margin) * plan.height)
    return uv[0] if inside else None


def _camera_flow(plan: Plan, shot: ShotPlan, first: int, last: int,
                 columns: int = MOTION_GRID, depth: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The plan's camera motion between two frames over a grid of the frame ``columns`` across:
    (grid (N, 2) px, flow (N, 2) px, non-finite where a point goes behind the camera); on the
    frame's rendered ``depth`` (a camera.DepthMap) when given, else on the plan's scene model."""
    from daotai.qc.camera_planned import expected_flow

    a, b = shot.cameras[first], shot.cameras[last]
    cam_a = np.array(a.cam_to_world, dtype=np.float64).reshape(4, 4)
    cam_b = np.array(b.cam_to_world, dtype=np.float64).reshape(4, 4)
    rows = max(2, round(columns * plan.height / plan.width))
    us = (np.arange(columns) + 0.5) * plan.width / columns
    vs = (np.arange(rows) + 0.5) * plan.height / rows
    grid = np.stack(np.meshgrid(us, vs), -1).reshape(-1, 2)  # (N, 2) px
    model = depth if depth is not None else _depth_models(plan, shot, frames=(first,))[0]
    flow = expected_flow(cam_a, a.fov, cam_b, b.fov, grid, plan.width, plan.height, model)
    return grid, flow


# A camera move over flat parts of the picture (sky, a plain wall: the background of a long-lens
# dolly zoom, whose subject keeps its size) changes no pixel, so a picture standing still there
# matches the plan. A freeze is a fault of the camera only when the plan's move, applied to the
# run's first frame, changes it by this much (mean |a - b| per sample, twice the drift a still
# run may have, metrics.FROZEN_MAX_DRIFT).
FROZEN_VISIBLE_CHANGE = 2.0


def freeze_is_fault(plan: Plan, shot: ShotPlan, start: int, length: int,
                    anchor: np.ndarray | None = None, depth_path: Path | None = None) -> bool:
    """Whether a still run of the picture contradicts the plan: a walker in view moves, or the
    camera moves the picture at least FROZEN_MOTION_PX_PER_FRAME and (given the run's first
    frame's thumbnail ``anchor``) visibly (FROZEN_VISIBLE_CHANGE), judged on the shot's depth
    control (``depth_path``) where there is one: the scene model's bodies are only cylinders."""
    from daotai.qc.metrics import warped_change

    last = start + length - 1
    steps = max(length - 1, 1)
    camera, walkers = planned_motion(plan, shot, start, last)
    if walkers / steps >= FROZEN_MOTION_PX_PER_FRAME:
        return True
    if camera / steps < FROZEN_MOTION_PX_PER_FRAME:
        return False
    if anchor is None:
        return True
    # every other thumbnail pixel: a coarser grid smears the sky's flow over a figure's outline
    depth = _depth_frame(depth_path, start) if depth_path is not None else None
    grid, flow = _camera_flow(plan, shot, start, last, columns=max(MOTION_GRID, anchor.shape[1] // 2),
                              depth=depth)
    return warped_change(anchor, grid, flow, (plan.width, plan.height)) >= FROZEN_VISIBLE_CHANGE


def _depth_frame(path: Path, index: int):
    """Frame ``index`` of a depth control file as a camera.DepthMap (None past its end)."""
    from daotai.qc.camera_scene import DepthMap

    for i, depth_mm in enumerate(_decode_gray(path)):
        if i == index:
            return DepthMap.from_millimetres(depth_mm)
    return None


def planned_motion_px(plan: Plan, shot: ShotPlan, first: int, last: int) -> float:
    """How far (px) the plan moves the picture between two frames (see planned_motion)."""
    return max(planned_motion(plan, shot, first, last))


def shot_expects_motion(shot: ShotPlan) -> bool:
    """True when the camera moves or someone walks: a frozen picture would then be a fault."""
    move = shot.move
    camera_moves = any(move.motion) or any(move.rotate) or move.orbit or move.fov_end != move.fov or move.shake
    walking = any(c.walking for frame in shot.character_frames for c in frame)
    return bool(camera_moves or walking)


def _body(position: tuple[float, float], facing: float, height: float):
    """The torso as a Solid: an elliptic cylinder turned the way the character faces."""
    from daotai.qc.camera_scene import Solid

    size = (2 * BODY_HALF_WIDTH * height, height, 2 * BODY_HALF_DEPTH * height)
    return Solid.placed("cylinder", (position[0], 0.0, position[1]), size, facing)


def _figure_solids(position: tuple[float, float], facing: float, height: float, drop: float = 0.0):
    """A figure as what hides the people behind it: its shoulders and hanging arms (an elliptic cylinder
    turned the way it faces, up to the shoulders) and its head above them, ``drop`` metres lower when
    seated. Shares of the height from the previz rig (daotai.render.previz.meshes: shoulder joints at
    0.104 out and 0.805 up, the arm's own half-thickness beyond; the head with its hair 0.06 round)."""
    from daotai.qc.camera_scene import Solid

    x, z = position
    shoulders = FIGURE_SHOULDER_TOP * height - drop
    torso = (2 * FIGURE_HALF_SPAN * height, shoulders, 2 * BODY_HALF_DEPTH * height)
    head = (2 * FIGURE_HEAD_HALF_WIDTH * height, (1.0 - FIGURE_SHOULDER_TOP) * height,
            2 * FIGURE_HEAD_HALF_WIDTH * height)
    return (Solid.placed("cylinder", (x, 0.0, z), torso, facing),
            Solid.placed("cylinder", (x, shoulders, z), head, facing))


def _depth_models(plan: Plan, shot: ShotPlan, frames: tuple[int, ...] | None = None):
    """The geometric scene model of every frame (or of ``frames``): ground, set pieces, people."""
    from daotai.qc.camera_scene import Cylinder, DepthModel, Solid

    heights = {c.id: c.height for c in plan.characters}
    pieces = tuple(Solid.placed(p.kind, p.position, p.size, p.yaw) for p in plan.scene.set_pieces)
    models = []
    chosen = shot.character_frames if frames is None else [shot.character_frames[i] for i in frames]
    for frame in chosen:
        cylinders = tuple(
            Cylinder(
                center_x=c.position[0],
                center_z=c.position[1],
                radius=FIGURE_RADIUS_M * heights[c.id] / 1.75,
                height=heights[c.id],
                body=_body(c.position, c.facing, heights[c.id]),
            )
            for c in frame
        )
        models.append(DepthModel(occluders=pieces + cylinders))
    return models


class _ControlStream:
    """A shot's depth (uint16 mm) and mask control frames, decoded once, in order, for every check
    that reads them: the camera check asks for frames through :meth:`depth_map` (never backwards);
    the subject and framing checks and the camera path's excludes see each frame as it passes
    (``listeners``: ``f(index, depth_mm or None, mask or None)``); :meth:`read_to` reads on.

    Pixels of walking characters (mask value j + 1 for the shot's j-th character) and, for
    previz, the name labels above every character are marked as moving on their own
    (``excludes``: frame index -> (H, W) bool, for frames with a mask).
    """

    def __init__(self, shot: ShotPlan, depth_path: Path, mask_path: Path | None,
                 label_names: list[str] | None, listeners: list[Callable[..., None]]):
        self._shot = shot
        self._depth_path = depth_path
        self._depth = iter(_decode_gray(depth_path))
        self._mask = iter(_decode_gray(mask_path)) if mask_path is not None else None
        self._labels = label_names
        self._listeners = listeners
        self.index = -1
        self._current: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        self.excludes: dict[int, np.ndarray] = {}

    def read_to(self, index: int) -> None:
        """Decode up to frame ``index`` (both files, each as far as it goes)."""
        while self.index < index:
            depth_mm = next(self._depth, None)  # (H, W) uint16 mm
            mask = next(self._mask, None) if self._mask is not None else None  # (H, W) uint8
            if depth_mm is None and mask is None:
                return
            self.index += 1
            self._current = (depth_mm, mask)
            if mask is not None and self.index < self._shot.frames:
                self.excludes[self.index] = moving_on_their_own(self._shot, self.index, mask, self._labels)
            for listener in self._listeners:
                listener(self.index, depth_mm, mask)

    def depth_map(self, index: int):
        """Frame ``index`` as a camera.DepthMap; QualityError when the controls end before it."""
        from daotai.qc.camera_scene import DepthMap

        if index < self.index:
            raise QualityError(f"{self._shot.shot_id}: depth frame {index} asked for after "
                               f"frame {self.index}; control frames are read in order")
        self.read_to(index)
        depth_mm, mask = self._current
        if self.index < index or depth_mm is None or (self._mask is not None and mask is None):
            raise QualityError(f"{self._shot.shot_id}: the depth control has fewer frames "
                               f"than the {index + 1} the video needs")
        return DepthMap.from_millimetres(depth_mm, self.excludes.get(index))

    def replay(self) -> Callable[[int], Any]:
        """A fresh in-order ``index -> camera.DepthMap`` over the depth file, with the excludes this
        stream found (call it once the stream was read to the end: the dense camera pass's models)."""
        from daotai.qc.camera_scene import DepthMap

        frames = iter(enumerate(_decode_gray(self._depth_path)))

        def depth_map(index: int):
            for i, depth_mm in frames:  # (H, W) uint16 mm
                if i == index:
                    return DepthMap.from_millimetres(depth_mm, self.excludes.get(index))
            raise QualityError(f"{self._shot.shot_id}: the depth control has fewer frames "
                               f"than the {index + 1} the video needs")
        return depth_map


def moving_on_their_own(shot: ShotPlan, index: int, mask: np.ndarray, labels: list[str] | None) -> np.ndarray:
    """(H, W) bool of one frame: walking characters (from the mask control) and, for previz, name labels."""
    people = shot.character_frames[index]
    walkers = [j + 1 for j, person in enumerate(people) if person.walking]
    exclude = np.isin(mask, walkers) if walkers else np.zeros(mask.shape, dtype=bool)
    if labels:
        exclude |= _label_boxes(mask, labels)
    return exclude


def _control_paths(path: Path, shot: ShotPlan,
                   controls: dict[str, Path] | None) -> tuple[Path | None, Path | None]:
    """The shot's depth and mask control files where they exist (mask only with depth)."""
    if controls is None:
        layout = RenderLayout(path.parent.parent)  # the render folder that holds shots/
        controls = {"depth": layout.depth(shot.shot_id), "mask": layout.mask(shot.shot_id)}
    depth, mask = controls.get("depth"), controls.get("mask")
    if depth is None or not Path(depth).is_file():
        return None, None
    return Path(depth), (Path(mask) if mask is not None and Path(mask).is_file() else None)


# The subject is "hidden" in a frame where less than this share of what the camera would see
# of it is visible (the rest covered by someone or something in front), and the check fails
# when that is so for more than SUBJECT_HIDDEN_MAX_SHARE of the shot's frames: long enough
# to be a staging problem, not a passer-by crossing the lens.
SUBJECT_VISIBLE_MIN_SHARE = 0.2
SUBJECT_HIDDEN_MAX_SHARE = 0.25
SUBJECT_CHECK_FRAMES = 48  # frames sampled per shot (evenly), first and last included


def _set_pieces(plan: Plan) -> list[tuple[str, object]]:
    """The scene's set pieces as occluders ("scenery", Solid): the same in every frame."""
    from daotai.qc.camera_scene import Solid

    return [("scenery", Solid.placed(p.kind, p.position, p.size, p.yaw)) for p in plan.scene.set_pieces]


def _occluders(plan: Plan, shot: ShotPlan, frame: int,
               scenery: list[tuple[str, object]] | None = None) -> tuple[object, list[tuple[str, object]]]:
    """The subject's cylinder and every other occluder (id, Cylinder | Solid) at one frame
    (``scenery``: the set pieces from :func:`_set_pieces`, made once per shot).

    Other people hide the subject with their figure (:func:`_figure_solids`), not with the cylinder
    their swinging arms may sweep: an over-the-shoulder lens stands within that cylinder's reach of
    the near shoulder and would find the whole frame hidden. Seated people are as tall as they sit."""
    from daotai.plan.blocking import head_drop_share, seated_drop_m
    from daotai.qc.camera_scene import Cylinder

    heights = {c.id: c.height for c in plan.characters}
    subject = None
    others: list[tuple[str, object]] = []
    for person in shot.character_frames[frame]:
        height = heights[person.id]
        drop = seated_drop_m(person.pose, person.walking, person.pose_weight, height) or height * head_drop_share(
            person.pose, person.walking, person.pose_weight, person.rest_height / height)
        if person.id == shot.subject:
            subject = Cylinder(person.position[0], person.position[1], FIGURE_RADIUS_M * height / 1.75, height - drop)
        else:
            others += [(person.id, solid) for solid in _figure_solids(person.position, person.facing, height, drop)]
    others += _set_pieces(plan) if scenery is None else scenery
    return subject, others


def check_subject(plan: Plan, shot: ShotPlan, depth_path: Path | None = None,
                  mask_path: Path | None = None) -> dict[str, Any] | None:
    """Is the shot's subject visible? From the mask and depth controls when given, else from the
    plan's geometry (characters as cylinders, set pieces as solids). None: no subject to check."""
    check = SubjectCheck.start(plan, shot, depth_path is not None and mask_path is not None)
    if check is None:
        return None
    layers = zip(_decode_gray(depth_path), _decode_gray(mask_path), strict=False) if check.controls else \
        ((None, None) for _ in range(shot.frames))
    for index, (depth_mm, mask) in enumerate(layers):
        if not check.add(index, depth_mm, mask):
            break
    return check.finish()


class SubjectCheck:
    """The subject check fed one frame at a time, so it shares a decode of the control files
    with the camera check (:class:`_ControlStream`); :func:`check_subject` reads them itself."""

    def __init__(self, plan: Plan, shot: ShotPlan, controls: bool):
        self.plan, self.shot, self.controls = plan, shot, controls
        self.wanted = sorted({int(round(i)) for i in np.linspace(0, shot.frames - 1,
                                                                 min(shot.frames, SUBJECT_CHECK_FRAMES))})
        self._pending = iter(self.wanted)
        self._target: int | None = next(self._pending)
        self._value = shot.characters.index(shot.subject) + 1
        self._scenery = _set_pieces(plan)
        self.shares: list[float | None] = []
        self.blockers: list[str] = []
        self.hidden: list[int] = []

    @classmethod
    def start(cls, plan: Plan, shot: ShotPlan, controls: bool) -> "SubjectCheck | None":
        """The check for a shot; None when it has no subject to check (a pov's subject is behind the lens)."""
        if shot.subject is None or shot.subject not in shot.characters or shot.frames < 1 or shot.framing == "pov":
            return None
        return cls(plan, shot, controls)

    def add(self, index: int, depth_mm: np.ndarray | None, mask: np.ndarray | None) -> bool:
        """Take frame ``index`` (in order; its controls when the check reads them); False once
        every sampled frame was seen."""
        from daotai.qc.visibility import subject_visibility

        if self._target is None:
            return False
        if index != self._target:
            return True
        plan, shot = self.plan, self.shot
        camera = shot.cameras[index]
        cam = np.array(camera.cam_to_world, dtype=np.float64).reshape(4, 4)
        subject, others = _occluders(plan, shot, index, self._scenery)
        depth = None
        if depth_mm is not None:
            depth = np.maximum(depth_mm, 1).astype(np.float32) * np.float32(1e-3)
            depth[depth_mm == 65535] = np.inf
        seen = subject_visibility(cam, camera.fov, plan.width, plan.height, subject, others,
                                  mask=(mask, self._value, shot.characters) if self.controls else None,
                                  depth_m=depth)
        self.shares.append(seen.share)
        if seen.share is not None and seen.share < SUBJECT_VISIBLE_MIN_SHARE:
            self.hidden.append(index)
            if cam[1, 3] <= 0.0:  # the lens is under the floor: the ground hides everything
                self.blockers.append("ground")
            elif seen.blocker:
                self.blockers.append(seen.blocker)
        self._target = next(self._pending, None)
        return self._target is not None

    def finish(self) -> dict[str, Any]:
        """The shot's "subject" entry."""
        shares, hidden, blockers = self.shares, self.hidden, self.blockers
        in_frame = [v for v in shares if v is not None]
        entry: dict[str, Any] = {
            "id": self.shot.subject,
            "source": "mask" if self.controls else "scene_model",
            "frames_checked": len(shares),
            "frames_out_of_frame": len(shares) - len(in_frame),
            "frames_hidden": len(hidden),
            "hidden_frames": hidden,
            "visible_share_min": round(min(in_frame), 3) if in_frame else None,
            "blocked_by": min(set(blockers), key=lambda name: (-blockers.count(name), name)) if blockers else None,
            "rule": (f"hidden (under {SUBJECT_VISIBLE_MIN_SHARE:.0%} visible) in at most "
                     f"{SUBJECT_HIDDEN_MAX_SHARE:.0%} of the frames"),
        }
        entry["ok"] = not shares or len(hidden) <= SUBJECT_HIDDEN_MAX_SHARE * len(shares)
        return entry


def _decode_gray(path: Path | None):
    from daotai.encode.video import decode_gray

    return decode_gray(path)


def subject_failure(entry: dict[str, Any], shot: ShotPlan, fps: float) -> str:
    """The subject check's failure in words."""
    share = entry["frames_hidden"] / max(entry["frames_checked"], 1)
    first, last = entry["hidden_frames"][0], entry["hidden_frames"][-1]
    blocker = entry["blocked_by"]
    behind = {None: "", "scenery": " behind the set", "ground": " by the ground"}.get(blocker, f" behind {blocker}")
    fix = ("the camera goes below the ground; keep it above" if blocker == "ground"
           else "restage the people or move the camera")
    return (f"subject {entry['id']} hidden{behind} for {share:.0%} of the shot "
            f"(from {first / fps:.1f} s to {(last + 1) / fps:.1f} s): {fix}")


def _check_format(shot: ShotPlan, plan: Plan, info) -> list[str]:
    problems = []
    if (info.width, info.height) != (plan.width, plan.height):
        problems.append(f"size {info.width}x{info.height} differs from the plan's {plan.width}x{plan.height}")
    if info.fps != Fraction(*plan.fps_fraction):
        problems.append(f"fps {info.fps} differs from the plan's {Fraction(*plan.fps_fraction)}")
    if info.frames != shot.frames:
        problems.append(f"{info.frames} frames, the plan has {shot.frames}")
    return problems


def check_shot(plan: Plan, shot: ShotPlan, path: Path, samples: dict[int, np.ndarray] | None,
               camera: bool = True, controls: dict[str, Path] | None = None,
               labels: bool = True, audio: bool | None = None, sampling: Any = None) -> dict[str, Any]:
    """Every check of one shot file; returns its qc.json entry (``ok`` and ``failures`` included).

    Camera adherence predicts image motion from the shot's rendered depth when its depth
    control file exists (``controls`` maps "depth" / "mask" to files; by default
    ``control/<shot_id>_depth.mkv`` and ``_mask.mkv`` next to the ``shots`` folder), else from
    the geometric scene model of the plan; ``camera.depth_source`` records which
    ("control_depth" or "scene_model"). ``labels``: whether name labels were drawn over the
    characters (previz): their boxes are kept out of the camera check. Leaving it on for
    another backend only costs the few tracks above the characters. ``audio``: whether the
    file should carry sound (default: when the plan has a soundtrack); sound that is there is
    checked either way (:func:`daotai.qc.audio.check_audio`). ``sampling``: a
    :class:`daotai.qc.sampling.QcSampling` (default: the one ``DAOTAI_QC_SAMPLING`` names, else
    sparse camera tracking made dense where the verdict is close).
    """
    from daotai.encode.video import decode_frames, probe
    from daotai.qc.camera import DEPTH_MAP_CONFIG, CameraCheckConfig
    from daotai.qc.metrics import scan_video
    from daotai.qc.sampling import check_camera_sampled, sampling_from_env

    sampling = sampling_from_env() if sampling is None else sampling

    entry: dict[str, Any] = {"shot_id": shot.shot_id, "file": path.name}
    verdicts: list[dict[str, Any]] = []  # one per check: {"check", "ok", "text"}
    warnings: list[str] = []  # what a user should know but need not act on

    def verdict(check: str, problems: list[str], fine: str | None = None) -> None:
        check_named(check)  # every verdict is a registered check (daotai.qc.checks)
        if problems or fine:
            verdicts.append({"check": check, "ok": not problems, "text": "; ".join(problems) or fine})

    try:
        info = probe(path)
    except EncodeError as exc:
        verdict("file", [f"cannot read the file: {exc}"])
        return _finish_shot(entry, verdicts, [])
    entry["format"] = {
        "width": info.width, "height": info.height, "fps": str(info.fps), "frames": info.frames,
        "duration_s": info.duration_s, "codec": info.codec, "pix_fmt": info.pix_fmt,
        "colorspace": info.colorspace, "faststart": info.faststart,
    }
    verdict("format", _check_format(shot, plan, info))
    from daotai.qc.continuity import check_cut

    verdict("continuity", *check_cut(plan, shot))

    scan = scan_video(path)
    expects_motion = shot_expects_motion(shot)
    entry["frames"] = {
        "black": list(scan.black_frames),
        "green": list(scan.green_frames),
        "frozen_runs": [list(r) for r in scan.frozen_runs],
        "frozen_expected": not expects_motion,
        "flicker": round(float(scan.flicker), 4),
    }
    picture: list[str] = []
    if scan.black_frames:
        picture.append(f"{len(scan.black_frames)} black frame(s), first at {scan.black_frames[0]}")
    if scan.green_frames:
        picture.append(f"{len(scan.green_frames)} green frame(s), first at {scan.green_frames[0]}")
    # a file longer than planned (the format check fails it) may freeze past the plan's last frame
    planned_runs = [(start, min(length, shot.frames - start), anchor)
                    for (start, length), anchor in zip(scan.frozen_runs, scan.frozen_anchors, strict=True)
                    if start < shot.frames]
    depth_path, mask_path = _control_paths(path, shot, controls)
    faulty_runs = [(start, length) for start, length, anchor in planned_runs
                   if freeze_is_fault(plan, shot, start, length, anchor, depth_path)]
    entry["frames"]["frozen_faulty"] = [list(r) for r in faulty_runs]
    frozen = None
    if faulty_runs:
        start, length = faulty_runs[0]
        frozen = f"picture frozen for {length} frames from frame {start} while the plan moves"
        picture.append(frozen)
    verdict("frames", picture)

    decoded_samples: dict[int, np.ndarray] = {}
    wanted = set(samples or {})
    cams = np.array([c.cam_to_world for c in shot.cameras], dtype=np.float64).reshape(-1, 4, 4)
    fovs = np.array([c.fov for c in shot.cameras], dtype=np.float64)
    # shrunk copies for the recovered camera path and the judder (daotai.qc.camera_metrics)
    metric_frames: list[np.ndarray] = []
    label_texts = label_names(plan, shot) if labels else None
    # The control files are decoded once, for the camera check, the subject, the framing and the
    # camera path's excludes together (each used to decode them on its own).
    subject_check = SubjectCheck.start(plan, shot, mask_path is not None)
    framed: list[dict[str, Any] | None] = []
    listeners: list[Callable[..., None]] = []
    if subject_check is not None and subject_check.controls:
        listeners.append(subject_check.add)
    if depth_path is not None and mask_path is not None:
        from daotai.qc.framing import framing_of_frame

        listeners.append(lambda index, depth_mm, mask: framed.append(framing_of_frame(plan, shot, depth_mm, mask))
                         if index == shot.framing_frame else None)
    looks = None
    if depth_path is not None and mask_path is not None:
        from daotai.qc.identity import LookSampler

        looks = LookSampler(plan, shot, labels)
        listeners.append(looks.take_controls)
    controls = _ControlStream(shot, depth_path, mask_path, label_texts, listeners) if depth_path is not None else None

    def frames_with_capture() -> Iterator[np.ndarray]:
        from daotai.qc.camera_metrics import shrink

        for index, frame in enumerate(decode_frames(path)):
            if index in wanted:
                decoded_samples[index] = frame
            if looks is not None:
                looks.take_picture(index, frame)
            if camera and index < shot.frames:
                metric_frames.append(shrink(frame))
            yield frame
    if camera and shot.frames >= 2:
        if controls is not None:
            models, source, config = controls.depth_map, "control_depth", DEPTH_MAP_CONFIG
        else:
            models, source, config = _depth_models(plan, shot), "scene_model", CameraCheckConfig()
        def dense_again() -> tuple[Iterator[np.ndarray], Any]:
            if controls is not None:
                controls.read_to(shot.frames - 1)  # every exclude known before the depth is read again
            return itertools.islice(decode_frames(path), shot.frames), \
                (controls.replay() if controls is not None else models)

        # only the planned frames: a longer file fails the format check and is judged up to there
        steps: list[Any] = []  # the judder of every frame step, measured once (also for the judder verdict)

        def uneven() -> str | None:
            from daotai.qc.camera_metrics import shot_judder, uneven_steps

            if len(metric_frames) < 2:
                return None
            steps.append(shot_judder(metric_frames, (info.width, info.height)))
            return uneven_steps(steps[0], sampling.clear_share)

        adherence, densified = check_camera_sampled(itertools.islice(frames_with_capture(), shot.frames), cams,
                                                    fovs, models, config, sampling, (info.width, info.height),
                                                    dense_again, uneven)
        if controls is not None:
            controls.read_to(shot.frames - 1)
        camera_entry = {**adherence.to_dict(), "depth_source": source,
                        "depth_file": depth_path.name if depth_path is not None else None,
                        "mask_file": mask_path.name if mask_path is not None else None}
        camera_entry["checked"] = adherence.pairs_evaluated > 0
        if densified is not None:
            camera_entry["densified"] = densified  # why the sparse pass could not decide (daotai.qc.sampling)
        camera_froze = any(planned_motion(plan, shot, start, start + length - 1)[0] / max(length - 1, 1)
                           >= FROZEN_MOTION_PX_PER_FRAME for start, length in faulty_runs)
        if not camera_entry["checked"]:
            # Too little texture to track (a worm's-eye close-up against the sky): nothing is
            # known about the camera, which is neither a pass nor a fault.
            camera_entry["ok"] = None
            warnings.append(f"camera: {adherence.summary}")
        elif camera_froze and adherence.ok:
            # The totals can come out right around a freeze; the camera still stood still
            # where the plan moves it, so the camera verdict cannot be "as planned".
            camera_entry["ok"] = False
            camera_entry["summary"] = f"stands still where the plan moves ({frozen}); {adherence.summary}"
        entry["camera"] = camera_entry
        verdict("camera", [f"camera: {camera_entry['summary']}"] if camera_entry["ok"] is False else [],
                f"camera: {camera_entry['summary']}")
        excludes = [controls.excludes.get(i) if controls is not None and mask_path is not None else None
                    for i in range(len(metric_frames))]
        _camera_path_verdicts(entry, verdict, warnings, shot, (info.width, info.height), cams,
                              metric_frames, excludes, steps[0] if steps else None)
    elif wanted:
        for _ in frames_with_capture():
            pass
    if controls is not None:
        controls.read_to(shot.frames - 1)

    if subject_check is None:
        subject = None
    elif subject_check.controls:
        subject = subject_check.finish()
    else:
        subject = check_subject(plan, shot)
    if subject is not None:
        entry["subject"] = subject
        fps = float(Fraction(*plan.fps_fraction))
        verdict("subject", [] if subject["ok"] else [subject_failure(subject, shot, fps)],
                _subject_fine(subject))
        out = subject["frames_out_of_frame"]
        if 0 < out < subject["frames_checked"] and out > SUBJECT_HIDDEN_MAX_SHARE * subject["frames_checked"]:
            warnings.append(f"subject {subject['id']} is out of frame for {out / subject['frames_checked']:.0%} "
                            "of the shot; if that is not meant, change the move or the framing")

    framing = framed[0] if framed else None
    if framing is not None:
        from daotai.qc.framing import framing_text

        entry["framing"] = framing
        verdict("framing", [] if framing["ok"] else [framing_text(framing)], framing_text(framing))

    if looks is not None:  # compared across shots once every shot is in (daotai.qc.identity.apply_identity)
        from daotai.qc.identity import finish_looks

        entry["identity"] = finish_looks(looks, path)

    if samples:
        fidelity, problems, notes = _fidelity(samples, decoded_samples)
        entry["fidelity"] = fidelity
        mean = fidelity["psnr_mean_db"]
        flat = len(fidelity["frames_flat_excluded"])
        # near-flat frames (a plain wall, a fade's black) say nothing about the encode: say they were left out
        left_out = f" ({flat} near-flat frame{'s' if flat > 1 else ''} left out)" if flat else ""
        verdict("fidelity", [problem + left_out for problem in problems],
                (f"encode PSNR {mean:.1f} dB" if mean is not None else "encode lossless") + left_out)
        warnings += notes
    verdict("audio", _audio_checks(entry, path, shot.frames / float(Fraction(*plan.fps_fraction)),
                                   plan.soundtrack is not None if audio is None else audio))
    return _finish_shot(entry, verdicts, warnings)


def _camera_path_verdicts(entry: dict[str, Any], verdict: Callable[..., None], warnings: list[str], shot: ShotPlan,
                          size: tuple[int, int], cams: np.ndarray, frames: list[np.ndarray],
                          excludes: list[np.ndarray | None], measured: Any = None) -> None:
    """The standard camera metrics (RotErr / TransErr / CamMC of the recovered path) and the judder
    of a shot's frames (``measured``: when already known), each as its qc.json entry and verdict
    ("camera_path", "judder")."""
    from daotai.qc.camera_metrics import assess_frames, judder_verdict, path_verdict

    if len(frames) < 2:
        return
    intrinsics = [geometry.intrinsics_from_matrix(np.reshape(c.K, (3, 3))) for c in shot.cameras[:len(frames)]]
    check, why_not, measured = assess_frames(frames, size, cams[:len(frames)], intrinsics,
                                             excludes if any(e is not None for e in excludes) else None,
                                             measured=measured)
    entry["camera_path"], problems, fine, note = path_verdict(check, why_not,
                                                              (entry.get("camera") or {}).get("ok") is False)
    verdict("camera_path", problems, fine)
    if note:
        warnings.append(note)
    entry["judder"], problems, fine = judder_verdict(measured)
    verdict("judder", problems, fine)


def _subject_fine(subject: dict[str, Any]) -> str:
    """The subject check's passing verdict in words."""
    if subject["frames_out_of_frame"] == subject["frames_checked"]:
        return f"subject {subject['id']} out of frame (as planned)"
    return f"subject {subject['id']} in view"


def _finish_shot(entry: dict[str, Any], verdicts: list[dict[str, Any]],
                 warnings: list[str]) -> dict[str, Any]:
    """Close a shot entry: ok, failures (failing verdicts' texts), one summary line, warnings.

    The summary says one thing per check, failing checks first (console and CLI show it)."""
    ordered = [v for v in verdicts if not v["ok"]] + [v for v in verdicts if v["ok"]]
    entry["ok"] = all(v["ok"] for v in verdicts)
    entry["failures"] = [v["text"] for v in ordered if not v["ok"]]
    entry["verdicts"] = ordered
    entry["summary"] = "; ".join(v["text"] for v in ordered) or "checked"
    entry["warnings"] = warnings
    return entry


def _fidelity(samples: dict[int, np.ndarray],
              decoded: dict[int, np.ndarray]) -> tuple[dict[str, Any], list[str], list[str]]:
    """The "fidelity" entry of rendered frames against their decoded copies, its failures and
    warnings (see PSNR_FRAME_MIN_DB and FLAT_LUMA_STD for what is judged and why)."""
    from daotai.qc.metrics import frame_stats, psnr

    compared = [i for i in sorted(samples) if i in decoded]
    flat = [i for i in compared if frame_stats(samples[i]).std_luma < FLAT_LUMA_STD]
    values = {i: psnr(samples[i], decoded[i]) for i in compared if i not in flat}
    finite = {i: v for i, v in values.items() if math.isfinite(v)}  # inf: decoded exactly
    mean = float(np.mean(list(finite.values()))) if finite else math.inf
    std = float(np.std(list(finite.values()))) if len(finite) > 1 else 0.0
    worst = min(finite, key=finite.__getitem__) if finite else None
    entry = {
        "frames_compared": len(compared),
        "frames_flat_excluded": flat,
        "psnr_mean_db": round(mean, 3) if math.isfinite(mean) else None,
        "psnr_std_db": round(std, 3),
        "psnr_min_db": round(finite[worst], 3) if worst is not None else None,
        "psnr_min_frame": worst,
        "rule": (f"mean >= {PSNR_MEAN_MIN_DB} dB and every frame >= {PSNR_FRAME_MIN_DB:.1f} dB; "
                 f"std <= {PSNR_STD_MAX_DB} dB is a warning; frames with luma std under "
                 f"{FLAT_LUMA_STD:g} are left out"),
    }
    failures: list[str] = []
    warnings: list[str] = []
    if len(compared) != len(samples):
        failures.append(f"only {len(compared)} of {len(samples)} sampled frames could be decoded")
    elif math.isfinite(mean) and mean < PSNR_MEAN_MIN_DB:
        failures.append(f"encode fidelity: PSNR {mean:.1f} dB on average, under {PSNR_MEAN_MIN_DB} dB: "
                        f"the encode loses visible detail; {FIDELITY_ADVICE}")
    elif worst is not None and finite[worst] < PSNR_FRAME_MIN_DB:
        failures.append(f"encode fidelity: frame {worst} at {finite[worst]:.1f} dB, under "
                        f"{PSNR_FRAME_MIN_DB:.1f} dB: the encoder starved it; {FIDELITY_ADVICE}")
    elif std > PSNR_STD_MAX_DB:
        warnings.append(f"encode fidelity varies {std:.1f} dB across the shot (over {PSNR_STD_MAX_DB} dB), "
                        f"every frame at {finite[worst]:.1f} dB or better: the picture's detail changes "
                        f"along the shot; nothing to fix unless frame {worst} looks soft")
    return entry, failures, warnings


def _audio_checks(entry: dict[str, Any], path: Path, picture_s: float, planned: bool) -> list[str]:
    """Add the file's "audio" entry (only when it has sound or should have) and return its failures."""
    from daotai.qc.audio import check_audio

    sound, failures = check_audio(path, picture_s, planned)
    if sound is not None:
        entry["audio"] = sound
    return failures


def _picture_box(plan: Plan) -> tuple[float, float, float, float] | None:
    """(left, top, right, bottom) of the picture inside a letterboxed sequence, as shares of the frame's
    width and height; None when it fills the frame."""
    from daotai.script.aspect import bars

    if plan.letterbox is None:
        return None
    (width, height), (left, top) = plan.letterbox, bars(plan.letterbox, (plan.width, plan.height))
    return left / width, top / height, (left + plan.width) / width, (top + plan.height) / height


def check_sequence(plan: Plan, path: Path, audio: bool | None = None) -> dict[str, Any]:
    """The assembled sequence against the plan's total frames and duration (and its sound: ``audio``
    says whether it should have any, by default when the plan has a soundtrack)."""
    from daotai.encode.video import probe
    from daotai.qc.metrics import scan_video

    try:
        info = probe(path)
    except EncodeError as exc:
        return {"file": path.name, "ok": False, "failures": [f"cannot read the file: {exc}"]}
    failures = []
    if info.frames != plan.total_frames:
        failures.append(f"{info.frames} frames, the plan has {plan.total_frames}")
    expected = plan.total_frames / float(Fraction(*plan.fps_fraction))
    if abs(info.duration_s - expected) > 0.5 / plan.fps:
        failures.append(f"duration {info.duration_s:.3f} s, the plan has {expected:.3f} s")
    width, height = plan.delivery_size  # a letterboxed sequence: the frame round the picture
    if (info.width, info.height) != (width, height):
        failures.append(f"size {info.width}x{info.height} differs from the plan's {width}x{height}")
    # Black and green frames are judged on the picture, not on the bars round it: bars are black by design
    scan = scan_video(path, picture=_picture_box(plan) if (info.width, info.height) == (width, height) else None)
    # Fades the plan asks for (transitions and the film's fade_out) pass through black on purpose;
    # a black frame outside them is a fault.
    stray = unexplained_black(scan.black_frames, plan)
    if stray:
        failures.append(f"{len(stray)} black frame(s) outside the planned fades, first at frame {stray[0]}")
    if scan.green_frames:
        failures.append(f"{len(scan.green_frames)} green frame(s)")
    entry: dict[str, Any] = {
        "file": path.name,
        "frames": info.frames,
        "duration_s": info.duration_s,
        "planned_frames": plan.total_frames,
        "black_frames": len(scan.black_frames),
    }
    failures += _audio_checks(entry, path, expected, plan.soundtrack is not None if audio is None else audio)
    return {**entry, "ok": not failures, "failures": failures}


def check_render(plan: Plan, out_dir: Path, records, camera: bool = True,
                 layout: RenderLayout | None = None,
                 known: Mapping[str, dict[str, Any]] | None = None,
                 checks: Any = None) -> Iterator[Progress]:
    """Check a finished render (samples kept while rendering); writes qc.json; returns the report.

    ``layout``: the run's file names (its container); by default read from the folder.
    ``known``: shot id → the qc.json entry of a shot whose files are unchanged since it was
    checked (an incremental render's reused shots); taken as it is, not checked again.
    ``checks``: a :class:`daotai.qc.parallel.ShotChecks` the run handed shots to as they
    finished (the rest are handed in here); None: one is made here for this call.
    """
    from daotai.qc.parallel import ShotChecks

    layout = layout or RenderLayout.find(out_dir)
    known = known or {}
    todo = [(shot, record) for shot, record in zip(plan.shots, records, strict=False) if shot.shot_id not in known]
    own = checks is None
    if own:
        checks = ShotChecks(plan, workers=None if len(todo) > 1 else 0)
    try:
        for shot, record in todo:
            if not checks.has(f"shot:{shot.shot_id}"):
                hand_in_shot(checks, plan, shot, record, out_dir, camera)
        # the sequence has sound when there is a soundtrack or a shot's own sound is not muted
        mixed = plan.soundtrack is not None or any(
            (getattr(r, "audio", None) or {}).get("source") == "backend" and not (s.sound is not None and s.sound.mute)
            for s, r in zip(plan.shots, records, strict=True))
        if layout.sequence.is_file():
            hand_in_sequence(checks, layout.sequence, audio=mixed)
        shots = []
        for i, shot in enumerate(plan.shots[:len(records)]):
            if shot.shot_id in known:
                shots.append(known[shot.shot_id])
                continue
            yield Progress("qc", shot.shot_id, i, len(plan.shots), f"checking shot {i + 1} of {len(plan.shots)}")
            shots.append(checks.result(f"shot:{shot.shot_id}"))
        yield Progress("qc", None, len(plan.shots), len(plan.shots), "checking the sequence")
        sequence = checks.result("sequence") if layout.sequence.is_file() else None
    except BaseException:
        if own:
            checks.close(cancel=True)
        raise
    if own:
        checks.close()
    return _finish(layout, shots, sequence)


def hand_in_shot(checks: Any, plan: Plan, shot: ShotPlan, record: Any, out_dir: Path, camera: bool) -> None:
    """Hand one rendered shot (its record: files relative to ``out_dir``, fidelity samples, sound)
    to a :class:`daotai.qc.parallel.ShotChecks` (key ``shot:<id>``), checked as :func:`check_render` checks it."""
    controls = {k: out_dir / record.files[k] for k in ("depth", "mask") if k in record.files}
    sound = getattr(record, "audio", None) or {}
    hand_in_file(checks, shot.shot_id, out_dir / record.files["shot"], record.samples, camera, controls=controls,
                 audio=plan.soundtrack is not None or bool(sound))


def hand_in_file(checks: Any, shot_id: str, path: Path, samples: dict[int, np.ndarray] | None, camera: bool = True,
                 controls: dict[str, Path] | None = None, labels: bool = True, audio: bool | None = None) -> None:
    """Hand a shot file to a ShotChecks for :func:`check_shot` (key ``shot:<id>``)."""
    checks.submit(f"shot:{shot_id}", _shot_entry,
                  (shot_id, str(path), samples, camera,
                   {k: str(v) for k, v in controls.items()} if controls is not None else None, labels, audio))


def hand_in_sequence(checks: Any, path: Path, audio: bool | None = None) -> None:
    """Hand the assembled sequence to a ShotChecks for :func:`check_sequence` (key ``sequence``)."""
    checks.submit("sequence", _sequence_entry, (str(path), audio))


def _shot_entry(plan: Plan, shot_id: str, path: str, samples: dict[int, np.ndarray] | None, camera: bool,
                controls: dict[str, str] | None, labels: bool, audio: bool | None) -> dict[str, Any]:
    return check_shot(plan, plan.shot(shot_id), Path(path), samples, camera,
                      controls={k: Path(v) for k, v in controls.items()} if controls is not None else None,
                      labels=labels, audio=audio)


def _sequence_entry(plan: Plan, path: str, audio: bool | None) -> dict[str, Any]:
    return check_sequence(plan, Path(path), audio=audio)


def _finish(layout: RenderLayout, shots: list[dict[str, Any]], sequence: dict[str, Any] | None,
            files: dict[str, Any] | None = None) -> QcReport:
    from daotai.qc.identity import apply_identity

    identity = apply_identity(shots, _finish_shot)  # a look that changed fails the shot it changed in
    failures = [f"{s['shot_id']}: {f}" for s in shots for f in s["failures"]]
    if sequence is None:
        failures.append("sequence: missing")
    else:
        failures += [f"sequence: {f}" for f in sequence["failures"]]
    if files is not None:
        failures += [f"files: {problem}" for problem in files["problems"]]
    warnings = [f"{s['shot_id']}: {w}" for s in shots for w in s.get("warnings") or []]
    report = QcReport(ok=not failures, shots=shots, sequence=sequence, failures=failures,
                      warnings=warnings, files=files, identity=identity)
    atomic_write_text(layout.qc, json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return report


def finish_report(layout: RenderLayout, shots: list[dict[str, Any]], sequence: dict[str, Any] | None,
                  files: dict[str, Any] | None = None) -> QcReport:
    """Gather shot and sequence results (and, for ``daotai qc``, the folder's files against its
    manifest) into a report and write qc.json (atomically)."""
    return _finish(layout, shots, sequence, files)
