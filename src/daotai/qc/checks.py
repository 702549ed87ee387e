"""The registry of a shot's checks: one row per verdict check_shot can give (name, group, cost,
what it measures, the function that measures it).

``name`` is the qc.json verdict's ``check``; ``group`` is what ``--retake-on`` accepts besides
the names (camera, motion, subject, framing; "any" is every check); ``cost`` says what the
check spends, so a caller knows what it asks for: "probe" (the file's header), "scan" (one
thumbnail decode of the picture), "tracking" (a full decode of the picture and optical flow),
"controls" (the depth and mask control files), "samples" (frames kept while rendering), "audio",
"plan" (the plan alone: nothing of the file is read).
check_shot gives only verdicts named here (a verdict under another name is a bug it raises),
each in the pass that pays its cost (:class:`Verdicts`), and daotai.run.retakes takes its check names
and groups from here.

Checks that share a decode (the camera, camera path and judder read the same decoded frames; the
camera, subject and framing the same control frames) run in one pass inside check_shot; a check
that needs no shared pass is one function here and one row below. "identity" is judged across shots:
check_shot measures each character's look in its shot, and the report compares them once every
shot is in (daotai.qc.identity), giving the shots that show a character seen elsewhere its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COSTS = ("probe", "scan", "tracking", "controls", "samples", "audio", "plan")


@dataclass(frozen=True)
class Check:
    """One row of the registry."""

    name: str  # the verdict's "check" in qc.json
    group: str | None  # the --retake-on group it belongs to (None: named only by itself or "any")
    cost: str  # one of COSTS
    measures: str  # what it finds, in a few words
    function: str  # where it is measured: module:function

    def __post_init__(self) -> None:
        if self.cost not in COSTS:
            raise ValueError(f"check {self.name}: cost {self.cost!r} must be one of {', '.join(COSTS)}")


CHECKS: tuple[Check, ...] = (
    Check("file", None, "probe", "the file opens as a video", "daotai.encode.video:probe"),
    Check("format", None, "probe", "size, frame rate and frame count against the plan", "daotai.qc.shot:_check_format"),
    Check("frames", "motion", "scan", "black, green and frozen frames where the plan moves",
          "daotai.qc.metrics:scan_video"),
    Check("camera", "camera", "tracking", "the picture's motion against the planned camera (sparse flow)",
          "daotai.qc.camera_adherence:check_camera"),
    Check("camera_path", "camera", "tracking", "the camera path recovered from the frames against the plan",
          "daotai.qc.camera_metrics:assess_frames"),
    Check("judder", "motion", "tracking", "even frame-to-frame motion (no repeated or dropped frames)",
          "daotai.qc.camera_metrics:assess_frames"),
    Check("subject", "subject", "controls", "the subject in view and not hidden", "daotai.qc.subject:SubjectCheck"),
    Check("framing", "framing", "controls", "the first frame's framing as the script asks",
          "daotai.qc.framing:framing_of_frame"),
    Check("fidelity", None, "samples", "encode PSNR of rendered frames against their decoded copies",
          "daotai.qc.fidelity:check_fidelity"),
    Check("audio", None, "audio", "the file's sound: present when planned, its length and level",
          "daotai.qc.audio:check_audio"),
    Check("identity", None, "controls", "each character looks the same in every shot that shows them",
          "daotai.qc.identity:apply_identity"),
    Check("continuity", None, "plan", "the cut in: a character's jump, pose change or side of the line "
          "that no action says", "daotai.qc.continuity:check_cut"),
)

BY_NAME: dict[str, Check] = {check.name: check for check in CHECKS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(c.name for c in CHECKS if c.group == group)
    for group in dict.fromkeys(c.group for c in CHECKS if c.group is not None)
}


def check_named(name: str) -> Check:
    """The registry row of a verdict name; KeyError naming the known ones otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"check {name!r} is not in the registry (daotai.qc.checks): {', '.join(NAMES)}") from None


class Verdicts:
    """One shot's verdicts and warnings as check_shot's passes give them, each read against the
    registry: a verdict under a name it does not list, or given in a pass that pays another cost
    than the registry's row says, is a bug and raises (a check's cost is what a caller asking for
    it relies on)."""

    def __init__(self) -> None:
        self.given: list[dict[str, Any]] = []  # one per check: {"check", "ok", "text"}
        self.warnings: list[str] = []  # what a user should know but need not act on
        self._cost: str | None = None

    def pass_of(self, cost: str) -> Verdicts:
        """These verdicts, now taken in the pass that pays ``cost`` (one of COSTS)."""
        if cost not in COSTS:
            raise ValueError(f"pass cost {cost!r} must be one of {', '.join(COSTS)}")
        self._cost = cost
        return self

    def __call__(self, check: str, problems: list[str], fine: str | None = None) -> None:
        """Give check ``check``'s verdict: failing with ``problems``, else passing with ``fine``
        (no verdict when both are empty: the check had nothing to say)."""
        row = check_named(check)
        if row.cost != self._cost:
            raise ValueError(f"check {check!r} costs {row.cost!r} in the registry (daotai.qc.checks), "
                             f"but was given in the {self._cost!r} pass")
        if problems or fine:
            self.given.append({"check": check, "ok": not problems, "text": "; ".join(problems) or fine})
