"""The subject check: is the shot's subject in view, or hidden behind someone or something?

From the mask and depth controls where the render made them, else from the plan's geometry
(people as proxy figures, set pieces as solids). It is fed one frame at a time so that it shares
the control decode with the camera check (daotai.qc.controls), and it says its verdict in words
here, next to the thresholds the words quote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from daotai.plan.model import Plan, ShotPlan
from daotai.qc.scene_model import FIGURE_RADIUS_M, figure_solids

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

    Other people hide the subject with their figure (:func:`daotai.qc.scene_model.figure_solids`), not with the cylinder
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
            others += [(person.id, solid) for solid in figure_solids(person.position, person.facing, height, drop)]
    others += _set_pieces(plan) if scenery is None else scenery
    return subject, others


def check_subject(plan: Plan, shot: ShotPlan, depth_path: Path | None = None,
                  mask_path: Path | None = None) -> dict[str, Any] | None:
    """Is the shot's subject visible? From the mask and depth controls when given, else from the
    plan's geometry (characters as cylinders, set pieces as solids). None: no subject to check."""
    check = SubjectCheck.start(plan, shot, depth_path is not None and mask_path is not None)
    if check is None:
        return None
    if check.controls:
        from daotai.encode.video import decode_gray

        layers = zip(decode_gray(depth_path), decode_gray(mask_path), strict=False)
    else:
        layers = ((None, None) for _ in range(shot.frames))
    for index, (depth_mm, mask) in enumerate(layers):
        if not check.add(index, depth_mm, mask):
            break
    return check.finish()


class SubjectCheck:
    """The subject check fed one frame at a time, so it shares a decode of the control files
    with the camera check (:class:`daotai.qc.controls.ControlStream`); :func:`check_subject` reads them itself."""

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


def subject_fine(subject: dict[str, Any]) -> str:
    """The subject check's passing verdict in words."""
    if subject["frames_out_of_frame"] == subject["frames_checked"]:
        return f"subject {subject['id']} out of frame (as planned)"
    return f"subject {subject['id']} in view"


def subject_out_of_frame(subject: dict[str, Any]) -> str | None:
    """A warning when the subject leaves the frame for much of the shot but not all of it (a shot
    that never shows its subject plans it so)."""
    out = subject["frames_out_of_frame"]
    if 0 < out < subject["frames_checked"] and out > SUBJECT_HIDDEN_MAX_SHARE * subject["frames_checked"]:
        return (f"subject {subject['id']} is out of frame for {out / subject['frames_checked']:.0%} "
                "of the shot; if that is not meant, change the move or the framing")
    return None
