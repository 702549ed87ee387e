"""The Director Script node's library half: a script from text or a file, validated and planned once.

Every problem is raised as the library raises it (:class:`~daotai.errors.ScriptError` with one
issue per broken rule and its JSON path, :class:`~daotai.errors.PlanError`); the node layer
only shows the message. The planned :class:`~daotai.plan.model.Plan` travels with the script,
so every node downstream works from the same exact cameras, seeds and prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from daotai.errors import NO_VALUE, DaotaiError, Issue, OptionError, ScriptError
from daotai.plan.model import Plan, ShotPlan
from daotai.script.schema import Script

AS_WRITTEN = "as written"  # the preset choice that keeps the script's own size


@dataclass(frozen=True)
class DirectorScript:
    """A validated script, its plan, and the file it came from (None for text)."""

    script: Script
    plan: Plan
    source: Path | None = None

    @property
    def shot_ids(self) -> tuple[str, ...]:
        """The plan's shot ids, in order."""
        return tuple(s.shot_id for s in self.plan.shots)

    def shot(self, shot_id: str = "") -> ShotPlan:
        """The shot called ``shot_id`` ("" or blank: the first shot); OptionError naming the valid ids."""
        wanted = (shot_id or "").strip()
        if not wanted:
            return self.plan.shots[0]
        for shot in self.plan.shots:
            if shot.shot_id == wanted:
                return shot
        raise OptionError.at("shot_id", wanted, "is not a shot of the script", valid=self.shot_ids)

    def __repr__(self) -> str:
        # ComfyUI puts str() of a failed node's inputs into its error report: the summary, not the
        # whole script and plan (tens of KB of per-frame cameras)
        return f"DirectorScript({self.summary()})"

    def summary(self) -> str:
        """One line: shots, frames, seconds, size and fps."""
        plan = self.plan
        count = len(plan.shots)
        return (f"{plan.title or 'untitled'}: {count} shot{'s' if count != 1 else ''} "
                f"({', '.join(self.shot_ids)}), {plan.total_frames} frames, {plan.total_duration_s:g} s, "
                f"{plan.width}x{plan.height} at {plan.fps:g} fps")


def _format_of(text: str) -> str:
    """json when the text starts like a JSON object, else yaml."""
    return "json" if text.lstrip("\ufeff \t\r\n").startswith(("{", "[")) else "yaml"


def read_script(text: str = "", path: str | Path = "", preset: str = AS_WRITTEN) -> tuple[Script, Path | None]:
    """Parse and validate a script from ``text`` or from the file at ``path`` (exactly one of them).

    Reference images and a soundtrack must exist, relative to the script's folder (for text,
    the current folder). ``preset`` (preview | draft | final | 720p …) replaces the size.
    """
    from daotai.script.load import check_reference_files, load_script, parse_script
    from daotai.script.presets import apply_preset

    text = text or ""
    file = str(path or "").strip()
    if file and text.strip():
        raise ScriptError([Issue("script_file", file, "and script_text are both given; leave one of them empty")])
    if file:
        source: Path | None = Path(file).expanduser()
        script = load_script(source)
        base = source.resolve().parent
    elif text.strip():
        source = None
        script = parse_script(text, fmt=_format_of(text), source="script_text")
        base = Path.cwd()
    else:
        raise ScriptError([Issue("script_text", NO_VALUE, "is empty; write a script or name a script_file")])
    missing = check_reference_files(script, base)
    if missing:
        raise ScriptError(missing, str(source) if source is not None else "script_text")
    if preset and preset != AS_WRITTEN:
        script = apply_preset(script, preset)
    return script, source


def load_director_script(text: str = "", path: str | Path = "", preset: str = AS_WRITTEN) -> DirectorScript:
    """Read, validate and plan a script (see :func:`read_script`)."""
    from daotai.plan.planner import plan_script

    script, source = read_script(text, path, preset)
    return DirectorScript(script=script, plan=plan_script(script), source=source)


def script_problem(text: str = "", path: str | Path = "", preset: str = AS_WRITTEN) -> str | None:
    """The error message :func:`load_director_script` would raise (every issue with its JSON path), or None."""
    try:
        load_director_script(text, path, preset)
    except DaotaiError as exc:
        return str(exc)
    return None
