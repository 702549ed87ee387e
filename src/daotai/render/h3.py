"""`h3` backend: MiniMax-H3 — video and stereo sound in one pass, driven by the script, the previz and the characters.

MiniMax-H3 runs through diffusers' modular pipeline (``MiniMaxH3ModularPipeline``) with three
workflows, chosen per shot (:func:`daotai.plan.prompt.h3_workflow`, ``-O workflow=`` forces one):

- ``ref2va`` when the camera moves or a character in the shot has reference images: each
  character's first reference image (or a swatch of its previz colour) is a picture reference,
  subject first, and the previz render of the shot (exact camera and blocking, sampled at 24 fps)
  is the video reference that carries the camera move. The prompt names each character by its
  ``<Picture i>`` label and the previz as ``<Video 1>``;
- ``fl2va`` to continue: every segment after the first of a long shot starts on the previous
  segment's last frame; forced for a whole shot, it starts on the last frame of the shot this
  backend rendered just before (else on the shot's first previz frame);
- ``t2va`` otherwise (static camera, no looks): the prompt alone.

Timing: the model generates at a fixed 24 fps, 17n+5 frames, 5–15 s per generation. Shorter shots
are generated at 5 s and trimmed; longer ones as equal segments, each starting on the previous
one's last frame (that frame is shown once), their sound crossfaded over the shared frame. The
frames are resized from the model's canvas (the script's aspect ratio at a 768 short edge) to the
delivery size and retimed onto the plan's frame grid (motion-interpolated where the rates differ);
the sound is yielded once per shot as an
:class:`~daotai.events.Audio` event cut to the shot's duration. Every decision (workflow and
why, reference order, segments, trims, memory tier, licence acceptance) is a Notice, so the
manifest records it.

Loading: only the components of the workflows the plan needs (the two 61.7 GiB transformer
partitions ``transformer``/``transformer_ref`` are loaded per workflow), through daotai's checked
loader (safetensors only, hashed, diffusers' own blocks). The model's licence must be accepted
(``-O accept_licence=true`` once, recorded under the user's config folder).

Options beyond the workflow: ``speed`` (exact: cuDNN attention and compiled blocks; fast: also FP8
block linears and a fixed-schedule step cache), ``weights=int8`` (block weights as int8 rows: half
the memory, for smaller cards), ``lora`` (a safetensors LoRA fused into the partition it is for).
A speaking character's ``voice`` recording is an audio reference of the ref2va shots it speaks in.

This module is the backend (one shot from the plan to frames and sound); beside it: its options and
licence check (:mod:`~daotai.render.h3_options`), what each generation is conditioned on and its prompt
(:mod:`~daotai.render.h3_references`), the pipeline loaded and placed (:mod:`~daotai.render.h3_runner`)
and a long shot's segments joined (:mod:`~daotai.render.av_segments`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai import catalog
from daotai.events import Event, Frame, Notice, Progress
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.prompt import h3_outline, h3_workflow
from daotai.plan.timing import Segment, frames_for, plan_segments
from daotai.render.av_segments import Result, deliver, join_segments, shared_frame
from daotai.render.base import RenderJob, RunContext
from daotai.render.carry_looks import LookBook, best_looks, sample_indexes
from daotai.render.h3_options import DEFAULT_MODEL, FAMILY, H3Options, check_licence, lora_files
from daotai.render.h3_references import H3Conditioning
from daotai.render.h3_runner import H3Runner, may_carry_looks
from daotai.render.previz.guide import PrevizGuide
from daotai.render.spec import BackendEnv, BackendSpec


class H3Backend(H3Conditioning):
    """MiniMax-H3 video and stereo sound per shot; the pipeline is reused across shots."""

    name = "h3"

    def __init__(self, options: H3Options | None = None, *, env: BackendEnv | None = None, **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        env = env or BackendEnv()
        self._start(options, H3Runner(options, SPEC.default_model or "", env.health_sampler), env)

    def _start(self, options: Any, runner: Any, env: BackendEnv) -> None:
        """Everything a backend of the h3 family holds between shots (the MLX port shares it: one place)."""
        self.options = options
        self.runner = runner
        self.reference_root = env.reference_root or Path.cwd()
        self.licence = self._check_licence()
        self._previz = PrevizGuide()
        self._last_frame: tuple[str, np.ndarray] | None = None  # (shot id, (H, W, 3) uint8 at the canvas) of the last shot
        self._given_previz: dict[str, np.ndarray] = {}  # shot id → (F, H, W, 3) uint8 previz rendered elsewhere
        self.looks = LookBook() if options.carry_looks else None  # the best look of each character so far

    def use_previz(self, shot_id: str, rgb: np.ndarray) -> None:
        """Take a shot's previz frames (F, H, W, 3) uint8 on the plan's grid, rendered elsewhere (a ComfyUI graph's
        Previz Render), instead of rendering them here; the caller checks they are the shot's."""
        self._given_previz[shot_id] = rgb

    def _check_licence(self) -> str | None:
        """Refuse before any work unless the model's licence was accepted; the acceptance as a manifest line."""
        return check_licence(self.runner.model, self.options.accept_licence, "options.accept_licence",
                             "-O accept_licence=true")

    # -------------------------------------------------------------- one shot

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/denoise progress, notices, one Audio and exactly ``job.shot.frames`` frames."""
        plan, shot = job.plan, job.shot
        runner = self.runner
        snap = catalog.family(FAMILY).snap
        if self.licence:
            yield Notice("info", self.licence, shot.shot_id)
        workflow, reason = h3_workflow(plan, shot, self.options.workflow)
        if workflow == "t2va" and self.options.workflow == "auto" and self.looks is not None and \
                self.looks.for_shot(shot.shot_id, shot.characters, 1):
            workflow, reason = "ref2va", "looks carried from earlier shots (carry_looks)"
        segments = self._segments(shot)
        needed = {workflow} | ({"fl2va"} if len(segments) > 1 else set())
        # Memory is planned once, for the longest generation of the plan.
        longest = max(self._segments(s)[0].frames for s in plan.shots)
        yield from runner.ensure(plan, self._plan_workflows(plan), needed, shot.shot_id, longest)
        yield from runner.pay_owed_step(shot.shot_id)
        for text in runner.adaptations:  # LoRA, int8 and speed levers applied while loading (manifest)
            yield Notice("info", f"{self.name}: {text}", shot.shot_id)
        runner.adaptations = []
        if runner.turbo is not None:  # every shot's manifest entry names the LoRA its schedule came from
            yield Notice("info", f"{self.name}: {runner.turbo.describe()}", shot.shot_id)
        if runner.speed_config is not None:
            yield Notice("info", runner.speed_config.describe(), shot.shot_id)
        canvas = runner.canvas(plan)
        yield Notice("info", f"h3: workflow {workflow} ({reason})", shot.shot_id)
        native_total = frames_for(shot.duration_s, 24.0)
        if len(segments) == 1 and segments[0].frames > native_total:
            yield Notice("info", f"h3: generated {segments[0].frames} frames ({segments[0].frames / 24:.2f} s, the "
                                 f"model's minimum {snap.min_seconds:g} s or its 17n+5 frame rule) and trimmed to "
                                 f"{native_total} ({shot.duration_s:g} s)", shot.shot_id)
        elif len(segments) > 1:
            longest_s = self.options.segment_seconds or snap.max_seconds
            yield Notice("info", f"h3: {shot.duration_s:g} s is longer than one generation ({longest_s:g} s): "
                                 f"{len(segments)} segments of {segments[0].frames} frames, each after the first "
                                 "continuing from the previous segment's last frame (fl2va; the previz video and "
                                 "pictures condition the first segment only)", shot.shot_id)
        if runner.runtime.kind == "cuda":
            import torch

            torch.cuda.reset_peak_memory_stats()
        tier_before = runner.tier
        samples: list[tuple[str, dict]] = []
        results: list[Result] = []
        keyframe, keyframe_kind = None, None
        if workflow == "fl2va":
            keyframe, keyframe_kind = self._first_frame(job, ctx, canvas)
        for segment in segments:
            ctx.check()
            step_workflow = workflow if segment.index == 0 else "fl2va"
            if segment.index > 0:
                keyframe, keyframe_kind = shared_frame(results[-1].frames, segments[segment.index - 1]), "previous"
            generation = self._generation(job, ctx, step_workflow, segment, canvas, keyframe, keyframe_kind)
            label = f"segment {segment.index + 1}/{len(segments)} " if len(segments) > 1 else ""
            yield Notice("info", f"h3: {label}{step_workflow} references: {generation.order}", shot.shot_id)
            yield Notice("info", f"h3: {label}prompt: {generation.prompt}", shot.shot_id)
            result = None
            for item in runner.generate_h3(shot, generation, ctx):
                if isinstance(item, tuple):
                    result = item[1]
                else:
                    if isinstance(item, Progress) and item.stage == "denoise" and item.done == (item.total + 1) // 2:
                        samples.append(("mid-denoise", runner.sample_health()))
                    yield item
            assert result is not None
            results.append(result)
        samples.append(("after decode", runner.sample_health()))
        yield from runner.judge_health(shot.shot_id, samples, tier_before)
        native, sound = join_segments(results, segments, 24.0)  # (F, h, w, 3) uint8 at 24 fps; (C, N) float32
        rate = results[0].rate
        self._last_frame = (shot.shot_id, native[-1].copy())
        if self.looks is None:
            yield from self._deliver(plan, shot, native, sound, rate, canvas)
            return
        wanted = set(sample_indexes(shot.frames))
        delivered: dict[int, np.ndarray] = {}
        for event in self._deliver(plan, shot, native, sound, rate, canvas):
            if isinstance(event, Frame) and event.index in wanted:
                delivered[event.index] = event.rgb
            yield event
        yield from self._keep_looks(job, ctx, delivered)

    def _keep_looks(self, job: RenderJob, ctx: RunContext, delivered: dict[int, np.ndarray]) -> Iterator[Event]:
        """Score the characters of a finished shot's sampled frames by the plan's masks; keep the best looks."""
        assert self.looks is not None
        shot = job.shot
        if shot.reference_video is not None:
            yield Notice("info", "h3: carry_looks: no looks kept from a shot that follows footage (the plan's masks "
                                 "do not say where its people are)", shot.shot_id)
            return
        masks = {e.index: e.mask for e in self._previz.render(RenderJob(job.plan, shot, controls=True), ctx)
                 if isinstance(e, Frame) and e.index in delivered}  # (H, W) uint8 each
        kept = self.looks.add(best_looks(shot, delivered, masks).values())
        if kept:
            yield Notice("info", "h3: carry_looks: kept " + "; ".join(look.describe() for look in kept),
                         shot.shot_id)

    def _segments(self, shot: ShotPlan) -> list[Segment]:
        """The generations that make the shot under MiniMax-H3's frame and duration rules (and ``segment_seconds``)."""
        snap = catalog.family(FAMILY).snap
        assert snap.frame_step and snap.native_fps and snap.min_seconds and snap.max_seconds
        return plan_segments(shot.duration_s, snap.native_fps, snap.frame_step, snap.frame_offset,
                             snap.min_seconds, self.options.segment_seconds or snap.max_seconds)

    def _plan_workflows(self, plan: Plan) -> set[str]:
        """Every workflow the plan's shots will use (checked against the folder before anything loads)."""
        found = set()
        for shot in plan.shots:
            found.add(h3_workflow(plan, shot, self.options.workflow)[0])
            if self.looks is not None and self.options.workflow == "auto" and may_carry_looks(plan, shot):
                found.add("ref2va")
            if len(self._segments(shot)) > 1:
                found.add("fl2va")
        return found

    def _deliver(self, plan: Plan, shot: ShotPlan, native: np.ndarray, sound: np.ndarray, rate: int,
                 canvas: tuple[int, int]) -> Iterator[Event]:
        """The shot's sound (cut to its duration) and its frames on the plan's grid at the delivery size."""
        notes = []
        if canvas != (plan.width, plan.height):
            notes.append(f"generated at {canvas[0]}x{canvas[1]}, resized to {plan.width}x{plan.height}")
        yield from deliver("h3", plan, shot, native, sound, rate, notes)

    def close(self) -> None:
        """Release the pipeline and the previz GL context."""
        self.runner.close()
        self._previz.close()


SPEC = BackendSpec(
    name="h3",
    factory="daotai.render.h3:H3Backend",
    options=H3Options,
    summary="MiniMax-H3 (diffusers modular): video and stereo sound, guided by the previz and the characters' looks",
    family=FAMILY,
    device_class="accelerator",
    footage=True,
    sound=True,
    default_model=DEFAULT_MODEL,
    # A forced fl2va starts each shot on the last frame of the shot this backend rendered before it
    continues_across_shots=lambda options: str(options.get("workflow", "auto")) == "fl2va",
    option_files=lora_files,
    shot_outline=lambda plan, shot, options: h3_outline(
        plan, shot, str(options.get("workflow") or "auto"),
        float(options["segment_seconds"]) if options.get("segment_seconds") else None),
)
