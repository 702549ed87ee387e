"""A model's effective defaults and the native request a planned shot becomes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from daotai import catalog
from daotai.catalog import PromptBudget
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.prompt import fit_prompt
from daotai.plan.timing import frames_for, round_size, snap_frames
from daotai.render.spec import NeuralOptions


@dataclass(frozen=True)
class ModelDefaults:
    """A family's row with a model's overrides and the user's options applied: what a shot runs with."""

    family: str
    steps: int
    guidance: float
    shift: float | None  # flow-matching timestep shift (None: keep the scheduler's)
    negative_prompt: str
    native_fps: float
    frame_step: int  # frames must be frame_step*k + 1
    size_multiple: int  # width and height must be multiples of this
    max_sequence_length: int  # text tokens the encoder sees
    snap_rule: str  # name of the plan's ``snapping`` entry for this family
    prompt: PromptBudget


def family_defaults(family: str, model: str | None = None) -> ModelDefaults:
    """The catalog's defaults for a family, with a known model's overrides applied."""
    fam = catalog.with_overrides(catalog.family(family), catalog.model_row(model) if model else None)
    snap = fam.snap
    if snap.frame_step is None or snap.native_fps is None:
        raise ValueError(f"family {family!r}: a neural family needs a frame step and a native frame rate")
    return ModelDefaults(fam.name, fam.steps, fam.guidance, fam.shift, fam.negative_prompt, snap.native_fps,
                         snap.frame_step, snap.size_multiple, fam.max_sequence_length, snap.name, fam.prompt)


def effective_defaults(family: str, options: NeuralOptions, model: str | None = None) -> ModelDefaults:
    """The family's defaults, then the model's row, then the user's (already validated) options."""
    base = family_defaults(family, model)
    return replace(
        base,
        steps=options.steps or base.steps,
        guidance=base.guidance if options.guidance is None else options.guidance,
        shift=base.shift if options.shift is None else options.shift,
        max_sequence_length=options.max_sequence_length or base.max_sequence_length,
    )


@dataclass(frozen=True)
class NativeRequest:
    """What the model is asked for, at its own frame rate and sizes."""

    width: int
    height: int
    frames: int  # of the form frame_step*k + 1
    fps: float
    prompt: str
    negative_prompt: str
    seed: int


def native_request(plan: Plan, shot: ShotPlan, defaults: ModelDefaults) -> NativeRequest:
    """Size from the plan's snapping info; frames = the shot's duration at the native rate, snapped."""
    snap = next((s for s in shot.snapping if s.backend == defaults.snap_rule), None)
    if snap is not None and snap.width % defaults.size_multiple == 0 and snap.height % defaults.size_multiple == 0:
        width, height = snap.width, snap.height
    else:
        width, height = round_size(plan.width, plan.height, defaults.size_multiple)
    frames = snap_frames(frames_for(shot.duration_s, defaults.native_fps), defaults.frame_step)
    negative = ", ".join(p for p in (shot.negative_prompt, defaults.negative_prompt) if p)
    # The planner keeps the full prompt; each model family gets it fitted to its text budget
    # (first sentence and camera sentence kept, see daotai.plan.prompt.fit_prompt).
    prompt = fit_prompt(shot.prompt, defaults.prompt)
    return NativeRequest(width, height, frames, defaults.native_fps, prompt, negative, shot.seed)
