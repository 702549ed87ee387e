"""Retakes: render a shot again with other seeds until it passes the chosen quality checks.

A neural model follows the plan's camera (or keeps the subject in view) on some seeds and not on
others. With ``--takes N`` each shot is rendered up to N times: after every take its file is
checked (:func:`daotai.qc.shot.check_shot`), and the first take that passes every check named
by ``--retake-on`` is kept. When none passes, the best take is kept (fewest failing chosen
checks, then the smallest camera error) and a notice says so.

- Seeds: take 1 uses the plan's seed; take k > 1 uses :func:`take_seed` (the plan's seed moved
  by a fixed odd step per take, so the same command draws the same takes).
- ``--take-budget``: wall-clock seconds the run may spend on takes after each shot's first (the
  first take of every shot is always rendered). A budget in seconds, not in takes, because a
  take's cost varies tenfold between a 2 s close-up and a 10 s wide at 720p; when the budget is
  spent, the remaining shots keep their first take and a notice names them.
- ``--retake-on``: the checks that trigger a retake, by the qc.json verdict names, or these
  groups: ``camera`` (the flow-based camera check and the recovered camera path), ``motion``
  (judder, frozen or black frames), ``subject``, ``framing``, ``any`` (every check).
- Every take is recorded on the shot's manifest entry (take, seed, verdict, failing checks,
  seconds, kept); the kept take's files are the deliverables. ``--keep-takes`` keeps the other
  takes' files under ``takes/<shot_id>/take<k>/`` (else they are deleted).
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator

from daotai.errors import OptionError
from daotai.events import Event, Notice, Progress
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan, ShotPlan
from daotai.qc.checks import GROUPS, NAMES

SEED_STEP = 0x9E3779B1  # odd, so the takes of one shot never repeat a seed within 2**32 of them
SEED_MODULUS = 2**32
# the checks and their groups, as the QC registry lists them (daotai.qc.checks)
RETAKE_GROUPS: dict[str, tuple[str, ...]] = GROUPS
CHECK_NAMES: tuple[str, ...] = NAMES
MAX_TAKES = 16


@dataclass(frozen=True)
class TakePolicy:
    """How many takes a shot may get, for which failing checks, within how much time."""

    takes: int = 1  # 1: no retakes, the shot is rendered once and not checked until the run's QC
    budget_s: float | None = None  # wall seconds for takes after the first, over the whole run; None: no limit
    retake_on: tuple[str, ...] = ("camera",)  # check names or groups (RETAKE_GROUPS, "any")
    keep_takes: bool = False  # keep the takes not chosen under takes/<shot_id>/

    def __post_init__(self) -> None:
        if not 1 <= self.takes <= MAX_TAKES:
            raise OptionError.at("--takes", self.takes, f"must be from 1 to {MAX_TAKES}")
        if self.budget_s is not None and not (math.isfinite(self.budget_s) and self.budget_s > 0):
            raise OptionError.at("--take-budget", self.budget_s, "must be a positive number of seconds")
        known = {*RETAKE_GROUPS, *CHECK_NAMES, "any"}
        for name in self.retake_on:
            if name not in known:
                raise OptionError.at("--retake-on", name, f"must be one of: {', '.join(sorted(known))}")
        if not self.retake_on:
            raise OptionError.at("--retake-on", "", "names at least one check")

    @property
    def checks(self) -> frozenset[str] | None:
        """The qc.json verdict names that trigger a retake; None: every check."""
        if "any" in self.retake_on:
            return None
        return frozenset(c for name in self.retake_on for c in RETAKE_GROUPS.get(name, (name,)))


def parse_budget(text: str | None) -> float | None:
    """``--take-budget``: seconds as ``90``, ``90s``, ``5m`` or ``1.5h``; None or "" for no limit."""
    if text is None or str(text).strip() == "":
        return None
    raw = str(text).strip().lower()
    unit = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(raw[-1])
    try:
        value = float(raw[:-1] if unit else raw) * (unit or 1.0)
    except ValueError:
        raise OptionError.at("--take-budget", text, "must be seconds, e.g. 600, 600s, 10m or 1.5h") from None
    if not (math.isfinite(value) and value > 0):
        raise OptionError.at("--take-budget", text, "must be a positive duration")
    return value


def take_seed(seed: int, take: int) -> int:
    """The seed of take ``take`` (1-based) of a shot whose plan seed is ``seed``."""
    return (seed + (take - 1) * SEED_STEP) % SEED_MODULUS


@dataclass
class TakeBudget:
    """Seconds spent on takes after the first, against the run's budget."""

    limit_s: float | None
    spent_s: float = 0.0
    skipped: list[str] = field(default_factory=list)  # shots that wanted another take when it ran out

    @property
    def left(self) -> bool:
        return self.limit_s is None or self.spent_s < self.limit_s


def failing_checks(entry: dict[str, Any], checks: frozenset[str] | None) -> list[dict[str, Any]]:
    """The failing verdicts of a qc.json shot entry that are among ``checks`` (None: all)."""
    return [v for v in entry.get("verdicts", []) if not v["ok"] and (checks is None or v["check"] in checks)]


def _camera_error(entry: dict[str, Any]) -> float:
    """A take's camera error for ranking failed takes: RotErr per frame plus 10 x TransErr (m) per frame."""
    path = entry.get("camera_path") or {}
    if not path.get("checked"):
        return math.inf
    return float(path["RotErr_per_frame_deg"]) + 10.0 * float(path["TransErr_per_frame_m"])


def _move_files(root: Path, files: dict[str, str], folder: Path) -> dict[str, str]:
    """Move a take's files (relative to ``root``) into ``folder``; returns their new relative paths."""
    folder.mkdir(parents=True, exist_ok=True)
    moved = {}
    for kind, rel in files.items():
        source = root / rel
        if source.is_file():
            target = folder / Path(rel).name
            source.replace(target)
            moved[kind] = target.relative_to(root).as_posix()
    return moved


def _restore_files(root: Path, moved: dict[str, str], files: dict[str, str]) -> None:
    """Move a take's files back to the deliverable paths."""
    for kind, rel in moved.items():
        (root / rel).replace(root / files[kind])


RenderTake = Callable[[ShotPlan], Generator[Event, None, Any]]
JudgeTake = Callable[[ShotPlan, Any], dict[str, Any]]


def render_with_takes(render_take: RenderTake, judge: JudgeTake, plan: Plan, shot: ShotPlan, out_dir: Path,
                      policy: TakePolicy, budget: TakeBudget) -> Generator[Event, None, Any]:
    """Render ``shot`` up to ``policy.takes`` times; return the kept take's record (its ``takes`` filled).

    ``render_take(shot)`` renders one take into the shot's deliverable files and returns its record
    (with ``files`` relative to ``out_dir`` and ``takes``); ``judge(shot, record)`` returns its qc.json entry.
    """
    if policy.takes <= 1:
        return (yield from render_take(shot))
    out_dir = Path(out_dir)
    layout = RenderLayout(out_dir)
    holding = layout.shot_takes_dir(shot.shot_id)
    if holding.exists():
        shutil.rmtree(holding)  # takes of an earlier render of this shot
    takes: list[dict[str, Any]] = []
    kept: tuple[Any, dict[str, str] | None, int] | None = None  # (record, moved files or None, take index)
    best_rank: tuple[float, float] | None = None
    for number in range(1, policy.takes + 1):
        if number > 1 and not budget.left:
            budget.skipped.append(shot.shot_id)
            yield Notice("warning", f"take budget spent ({budget.spent_s:.0f} of {budget.limit_s:.0f} s): "
                                    f"no take {number} of {shot.shot_id}", shot.shot_id)
            break
        take = shot if number == 1 else shot.model_copy(update={"seed": take_seed(shot.seed, number)})
        if number > 1:
            yield Progress("render", shot.shot_id, 0, shot.frames, f"take {number} of {policy.takes}, seed {take.seed}")
        started = time.perf_counter()
        record = yield from render_take(take)
        entry = judge(take, record)
        failing = failing_checks(entry, policy.checks)
        seconds = time.perf_counter() - started
        if number > 1:
            budget.spent_s += seconds
        takes.append({"take": number, "seed": take.seed, "passed": not failing, "qc_ok": bool(entry.get("ok")),
                      "failing": [v["text"] for v in failing], "camera_error": _finite(_camera_error(entry)),
                      "seconds": round(seconds, 3), "kept": False})
        rank = (len(failing), _camera_error(entry))
        if not failing:
            if kept is not None and kept[1] is not None:
                _discard(out_dir, kept, policy, holding)
            kept = (record, None, number)
            break
        # move this take aside: the next take writes the deliverable paths
        moved = _move_files(out_dir, record.files, layout.take_dir(shot.shot_id, number))
        if best_rank is None or rank < best_rank:
            if kept is not None:
                _discard(out_dir, kept, policy, holding)
            kept, best_rank = (record, moved, number), rank
        elif not policy.keep_takes:
            _remove(out_dir, moved)
    assert kept is not None
    record, moved, number = kept
    if moved is not None:  # no take passed: the best goes back to the deliverable paths
        _restore_files(out_dir, moved, record.files)
        yield Notice("warning", f"{shot.shot_id}: none of {len(takes)} take(s) passed "
                                f"{', '.join(policy.retake_on)}; kept take {number} (seed {takes[number - 1]['seed']}), "
                                f"the closest: {'; '.join(takes[number - 1]['failing'])}", shot.shot_id)
    elif number > 1:
        yield Notice("info", f"{shot.shot_id}: take {number} (seed {takes[number - 1]['seed']}) passed "
                             f"{', '.join(policy.retake_on)} after {number - 1} failed take(s)", shot.shot_id)
    takes[number - 1]["kept"] = True
    if policy.keep_takes:
        for row in takes:
            folder = layout.take_dir(shot.shot_id, row["take"])
            if folder.is_dir() and not row["kept"]:
                row["files"] = sorted(p.relative_to(out_dir).as_posix() for p in folder.iterdir())
    elif holding.exists():
        shutil.rmtree(holding)
        if not any(layout.takes_dir.iterdir()):
            layout.takes_dir.rmdir()
    record.takes = takes
    return record


def _finite(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None


def _remove(root: Path, moved: dict[str, str]) -> None:
    for rel in moved.values():
        (root / rel).unlink(missing_ok=True)


def _discard(root: Path, kept: tuple[Any, dict[str, str] | None, int], policy: TakePolicy, holding: Path) -> None:
    """A take that was the best so far and no longer is: its files stay under takes/ only when asked."""
    _, moved, _ = kept
    if moved is not None and not policy.keep_takes:
        _remove(root, moved)


def judge_with_qc(plan: Plan, out_dir: Path, camera: bool = True) -> JudgeTake:
    """A take's qc.json entry from :func:`daotai.qc.shot.check_shot` (the run's own QC, per take)."""
    from daotai.qc.shot import check_shot

    def judge(shot: ShotPlan, record: Any) -> dict[str, Any]:
        controls = {k: Path(out_dir) / record.files[k] for k in ("depth", "mask") if k in record.files}
        return check_shot(plan, shot, Path(out_dir) / record.files["shot"], record.samples, camera,
                          controls=controls, audio=False)

    return judge
