"""`ltx2` backend: LTX-2 — picture and sound in one pass, written from the script and steered by the previz.

The model runs through diffusers' ``LTX2ConditionPipeline`` (a folder saved as ``LTX2Pipeline`` or
``LTX2ImageToVideoPipeline`` is loaded as it: the components are the same), so every shot can be
conditioned on frames:

- ``condition=none`` (default): text to video and sound, the prompt alone;
- ``condition=first_frame``: the shot's first previz frame (exact framing and blocking) at frame 0;
- ``condition=keyframes``: previz frames at the first, middle and last latent frame, so the framing at
  the end of a camera move is given too;
- ``condition=video``: the whole previz of the shot at the model's rate, as one video condition.

``condition_strength`` (0-1) says how strongly the frames hold; below 1 they guide the composition while
the model repaints the grey previz shapes.

The prompt is the planner's (framing, angle, camera move in words, action) with the shot's dialogue
and sound events written after it as the ``h3`` backend writes them (``ltx2_prompt_for``), fitted to
Gemma 3's budget. The generated sound is cut to the shot's duration and yielded as one
:class:`~daotai.events.Audio` event, which the pipeline carries into the shot's file and the mix.

Timing: LTX-2 makes 8k+1 frames at 24 fps and at most 20 s a generation. Shots are generated at the
snapped length and trimmed; longer ones as equal segments, each after the first starting on the previous
segment's last frame (a frame-0 condition), their sounds crossfaded over the shared frame. The size is
the plan's rounded to multiples of 32 (a notice says so) and resized back; frames are retimed onto the
plan's grid.

Options beyond the condition: ``upsample`` generates at half the size and doubles it with LTX-2's latent
upsampler (``latent_upsampler/`` in the model folder, as the release keeps it) before decoding, so a frame
costs a quarter of the tokens; ``schedule=distilled`` samples a folder of LTX-2's distilled weights with
their 8 fixed sigmas and no guidance passes; ``speed`` takes the shared levers (exact: attention kernel
and compiled blocks on CUDA; fast: also the step cache and, on CUDA, FP8 block linears and the VAE in
bf16), without the Wan-only attention and GELU rewrites.

The weights are under the LTX-2 Community License: it must be accepted once (``-O accept_licence=true``,
recorded under the user's config folder) before the model is pulled or run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import numpy as np
from pydantic import Field, field_validator

from daotai import catalog
from daotai.errors import BackendError, OptionError
from daotai.events import Event, Notice, Progress
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.prompt import ltx2_prompt_for
from daotai.plan.timing import Segment, frames_for, plan_segments, round_size
from daotai.render.av_segments import Result, deliver, join_segments, shared_frame
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.latent_preview import as_video_latents
from daotai.render.neural.request import NativeRequest
from daotai.render.neural.retime import (
    plan_to_native_indexes,
    resize_rgb,
    to_uint8,
)
from daotai.render.neural.runner import DiffusersShotRunner
from daotai.render.neural.stepping import first_line, retry_a_tier_lower, run_steps, step_callback_kwargs
from daotai.render.previz.guide import PrevizGuide
from daotai.render.spec import BackendEnv, BackendSpec, DiffusersOptions, options_with

FAMILY = "ltx2"
# Steps of the distilled schedule: the length of diffusers' DISTILLED_SIGMA_VALUES (checked where it is used).
DISTILLED_STEPS = 8
# Components kept on the device under group offload (small next to the transformer: ~1 B together).
GROUP_RESIDENT = ("connectors", "audio_vae", "vocoder")
Condition = Literal["none", "first_frame", "keyframes", "video"]


class LTX2Options(DiffusersOptions):
    """Options of the `ltx2` backend."""

    condition: Condition = Field(
        "none", description="previz frames the generation is conditioned on: none | first_frame | keyframes (first, "
                            "middle, last) | video (the whole previz)")
    condition_strength: float = Field(1.0, ge=0.0, le=1.0, description="how strongly the previz frames hold (1: "
                                                                       "kept as given)")
    schedule: Literal["default", "distilled"] = Field(
        "default", description="distilled: the few-step schedule of LTX-2's distilled weights (8 fixed sigmas, no "
                               "guidance passes) for a folder holding them; default: the model's steps and guidance")
    upsample: bool = Field(False, description="generate at half the size, then double it with LTX-2's latent "
                                              "upsampler (the model folder's latent_upsampler/) before decoding")
    accept_licence: bool = Field(False, description="accept the model's licence (shown when refused); recorded once")
    segment_seconds: float | None = Field(
        None, description="longest generation a long shot is split into (None: the model's longest, 20 s)")

    @field_validator("segment_seconds")
    @classmethod
    def _segment_within_the_models_range(cls, value: float | None) -> float | None:
        """A segment is one generation: it must lie within the lengths LTX-2 makes."""
        longest = catalog.family(FAMILY).snap.max_seconds or 0.0
        if value is not None and not 1.0 <= value <= longest:
            raise ValueError(f"must lie within 1-{longest:g} s (LTX-2's longest generation)")
        return value


# ------------------------------------------------------------------ small pure helpers


def generation_size(width: int, height: int, multiple: int) -> tuple[int, int]:
    """The size LTX-2 generates a plan's frames at: each side rounded to the nearest ``multiple``."""
    if width < multiple or height < multiple:
        raise BackendError(f"size: {width}x{height} is smaller than LTX-2's {multiple}-pixel grid; give the script a "
                           f"size of at least {multiple}x{multiple} (e.g. --preset preview)")
    return round_size(width, height, multiple)


def upsampled_sizes(width: int, height: int, multiple: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(first pass, upsampled) sizes for the latent upsampler: half the plan's size on the model's grid, then 2x."""
    if width < 2 * multiple or height < 2 * multiple:
        raise BackendError(f"size: {width}x{height} is too small for upsample=true (half of it must reach LTX-2's "
                           f"{multiple}-pixel grid); give the script a size of at least {2 * multiple}x{2 * multiple} "
                           "or drop -O upsample=true")
    half = generation_size(max(1, (width + 1) // 2), max(1, (height + 1) // 2), multiple)
    return half, (2 * half[0], 2 * half[1])


def check_upsampler_folder(folder: Path, hint: str) -> None:
    """The latent upsampler's folder: a config and safetensors weights only, every header readable."""
    from daotai.runtime.model_checks import PICKLE_SUFFIXES, read_safetensors_header

    if not (folder / "config.json").is_file():
        raise BackendError(f"upsample: {folder} holds no latent upsampler (config.json); {hint}")
    files = [p for p in folder.rglob("*") if p.is_file()]
    pickles = [p for p in files if p.suffix.lower() in PICKLE_SUFFIXES]
    if pickles:
        raise BackendError(f"{pickles[0]}: pickle weights are refused (they can run code when loaded)")
    weights = [p for p in files if p.suffix == ".safetensors"]
    if not weights:
        raise BackendError(f"upsample: {folder} has no .safetensors weights; {hint}")
    for path in weights:
        read_safetensors_header(path)


def keyframe_latents(frames: int, temporal: int) -> list[int]:
    """Latent indexes of the first, middle and last latent frame of a generation of ``frames`` (8k+1) frames."""
    latents = (frames - 1) // temporal + 1
    return sorted({0, latents // 2, latents - 1})


def latent_to_frame(latent: int, frames: int, temporal: int) -> int:
    """The generated frame a latent index stands for: 0 for the first latent, else the last frame it covers."""
    return min(frames - 1, latent * temporal)


def sampling_kwargs(schedule: str, steps: int, guidance: float) -> dict[str, Any]:
    """The pipeline's sampling arguments for a schedule: the model's steps and guidance, or the distilled weights'
    fixed sigmas with every guidance pass off (CFG 1, no spatio-temporal or modality guidance, for both streams)."""
    if schedule != "distilled":
        return {"num_inference_steps": steps, "guidance_scale": guidance}
    from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES

    if len(DISTILLED_SIGMA_VALUES) != DISTILLED_STEPS:
        raise BackendError(f"schedule: diffusers' distilled schedule has {len(DISTILLED_SIGMA_VALUES)} sigmas, "
                           f"daotai expects {DISTILLED_STEPS}; use the diffusers version daotai pins")
    off = {"guidance_scale": 1.0, "stg_scale": 0.0, "modality_scale": 1.0, "guidance_rescale": 0.0}
    return {"sigmas": list(DISTILLED_SIGMA_VALUES), "num_inference_steps": DISTILLED_STEPS, **off,
            **{f"audio_{name}": value for name, value in off.items()}}


def as_condition_pipeline(pipe: Any) -> Any:
    """The same component objects as an ``LTX2ConditionPipeline``, each in the dtype it was loaded in.

    Not ``from_pipe``: it casts every component to one dtype (float32 when none is given), which put
    the text encoder and connectors in float32 beside a bfloat16 transformer on CUDA, and the
    condition pipeline feeds the transformer latents cast to the prompt embeddings' dtype.
    """
    import inspect

    from diffusers import LTX2ConditionPipeline

    if isinstance(pipe, LTX2ConditionPipeline):
        return pipe
    parameters = dict(inspect.signature(LTX2ConditionPipeline.__init__).parameters)
    parameters.pop("self")
    given = {name: pipe.components[name] for name in parameters if pipe.components.get(name) is not None}
    missing = [name for name, p in parameters.items() if p.default is inspect.Parameter.empty and name not in given]
    if missing:
        raise BackendError(f"the loaded {type(pipe).__name__} lacks {', '.join(missing)}, which "
                           "LTX2ConditionPipeline needs; pull the model again")
    return LTX2ConditionPipeline(**given)


def _load_condition_pipeline(model: str, family: str, runtime: Any) -> tuple[Any, Any]:
    """daotai's checked loader, then the same components as an ``LTX2ConditionPipeline``."""
    from daotai.runtime.model_loading import load_pipeline

    pipe, resolved = load_pipeline(model, family, runtime)
    return as_condition_pipeline(pipe), resolved


# ------------------------------------------------------------------ the runner


class LTX2Runner(DiffusersShotRunner):
    """The condition pipeline loaded once, placed by the memory planner; one call per segment returns sound too."""

    def __init__(self, options: LTX2Options, default_model: str, health: Callable[[Any], dict] | None = None):
        super().__init__(FAMILY, options, default_model, health, build=_load_condition_pipeline)
        self._upsampler: Any = None  # LTX2LatentUpsamplePipeline over the loaded VAE, once -O upsample=true needs it

    def _apply_speed(self) -> None:
        """The shared levers that fit LTX-2: SDPA kernel, compiled blocks, step cache, VAE and FP8 levers; not the
        Wan attention and GELU rewrites (LTX-2's blocks are not Wan's)."""
        from dataclasses import replace

        from daotai.render.speed import apply_levers, cache_only, levers_for, resolve_levers

        config = levers_for(self.speed, self.runtime.kind, FAMILY)
        config = replace(config, lean_attention=False, cross_attention=None, gelu_epilogue=False)
        config = resolve_levers(config, self.runtime.device)
        if self.tier != "none":
            config = cache_only(config)
        assert self.defaults is not None
        apply_levers(self.pipe, config, self.defaults.steps)
        self.speed_config = config

    def _place(self, tier: str) -> None:
        """The shared placement, plus LTX-2's small components for group offload: the shared tier streams the
        transformer and text encoder and moves the VAE, and would leave the connectors, audio VAE and vocoder in
        host memory while they are handed device tensors."""
        super()._place(tier)
        if tier == "group" and self.runtime.kind != "cpu":
            for name in GROUP_RESIDENT:
                module = getattr(self.pipe, name, None)
                if module is not None:
                    module.to(self.runtime.device)

    def upsampler(self) -> Any:
        """LTX-2's latent upsampler over the loaded VAE, from the model folder's ``latent_upsampler/`` (loaded once)."""
        if self._upsampler is None:
            from diffusers import LTX2LatentUpsamplePipeline
            from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

            folder = self.resolved.path / "latent_upsampler"
            spec = self.resolved.spec
            hint = (f"pull the model again: daotai models pull {spec.name}" if spec is not None else
                    "copy the release's latent_upsampler folder into the model folder, or drop -O upsample=true")
            check_upsampler_folder(folder, hint)
            model = LTX2LatentUpsamplerModel.from_pretrained(str(folder), torch_dtype=self.runtime.dtype("vae"),
                                                             use_safetensors=True, local_files_only=True)
            pipe = LTX2LatentUpsamplePipeline(vae=self.pipe.vae, latent_upsampler=model.to(self.runtime.device))
            pipe.set_progress_bar_config(disable=True)
            self._upsampler = pipe
        return self._upsampler

    def upsample(self, frames: np.ndarray, size: tuple[int, int], seed: int) -> np.ndarray:
        """(F, h, w, 3) uint8 frames of the first pass at ``size`` → (F, 2h, 2w, 3) through the latent upsampler."""
        from PIL import Image

        from daotai.runtime.device import generator_for

        out = self.upsampler()([Image.fromarray(f) for f in frames], width=size[0], height=size[1],
                               generator=generator_for(seed), output_type="pt")
        return to_uint8(out.frames)

    def _video_latents(self, latents: Any, request: NativeRequest) -> Any:
        """LTX-2's packed video tokens as (B, C, T', H', W'); keyframe conditions append their tokens after the
        shot's own, so the leading ones are read."""
        return as_video_latents(self.pipe, latents, request.frames, request.height, request.width, leading=True)

    def close(self) -> None:
        """Drop the pipelines (the upsampler shares the VAE) and free accelerator memory."""
        self._upsampler = None
        super().close()

    def generate_av(self, shot: ShotPlan, request: NativeRequest, conditions: list[Any],
                    ctx: RunContext) -> Iterator[Event | tuple]:
        """Run one generation (retrying once a tier lower on out-of-memory); ends with ("result", Result)."""
        from daotai.render.speed import SpeedConfig, denoise_context
        from daotai.runtime.device import generator_for

        defaults = self.defaults
        assert defaults is not None
        live = self.live_view(ctx)

        def call(callback: Callable) -> Any:
            with denoise_context(self.speed_config or SpeedConfig()):
                return self.pipe(
                    conditions=conditions or None, prompt=request.prompt, negative_prompt=request.negative_prompt,
                    height=request.height, width=request.width, num_frames=request.frames, frame_rate=request.fps,
                    **sampling_kwargs(self.options.schedule, defaults.steps, defaults.guidance),
                    generator=generator_for(request.seed), max_sequence_length=defaults.max_sequence_length,
                    output_type="pt",
                    **step_callback_kwargs(self._remembering_latents(callback, request) if live else callback),
                )

        def attempt() -> Iterator[Event | tuple]:
            for item in run_steps(call, shot.shot_id, defaults.steps, ctx,
                                  picture=self.step_picture(request, shot.frames) if live else None):
                if isinstance(item, tuple):
                    out = item[1]
                    frames = to_uint8(out.frames)  # (F, H, W, 3) uint8
                    self.learn_picture(frames)
                    audio = out.audio[0].float().cpu().numpy()  # (C, N) float32
                    yield ("result", Result(frames, audio, int(self.pipe.vocoder.config.output_sampling_rate)))
                else:
                    yield item

        yield from retry_a_tier_lower(
            self, attempt,
            failed=lambda exc: f"{shot.shot_id}: ltx2 generation failed: {type(exc).__name__}: {first_line(exc)}",
            exhausted=f"{shot.shot_id}: out of memory at {request.width}x{request.height}, {request.frames} frames "
                      "even with the lowest memory tier; try --preset preview or -O segment_seconds=5",
            retrying=lambda lower: Notice("warning", f"out of memory; retrying once with memory tier {lower}",
                                          shot.shot_id),
        )


# ------------------------------------------------------------------ the backend


class LTX2Backend:
    """LTX-2 video and sound per shot, optionally conditioned on the previz; the pipeline is reused across shots."""

    name = "ltx2"

    def __init__(self, options: LTX2Options | None = None, *, env: BackendEnv | None = None, **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        if options.schedule == "distilled":
            if options.steps not in (None, DISTILLED_STEPS):
                raise OptionError.at("options.steps", options.steps,
                                     f"must be {DISTILLED_STEPS} (or unset) with schedule=distilled: its sigmas are fixed")
            if options.guidance not in (None, 1.0):
                raise OptionError.at("options.guidance", options.guidance,
                                     "must be unset with schedule=distilled: the distilled weights run without guidance")
            options = options_with(options, steps=DISTILLED_STEPS)
        env = env or BackendEnv()
        self.options = options
        self.runner = LTX2Runner(options, SPEC.default_model or "", env.health_sampler)
        self.licence = self._check_licence()
        self._previz = PrevizGuide()

    def _check_licence(self) -> str | None:
        """Refuse before any work unless the model's licence was accepted; the acceptance as a manifest line."""
        from daotai.runtime.licences import require_licence

        # A local folder of LTX-2 weights is under the released model's licence too.
        row = catalog.model_row(self.runner.model) or catalog.model_row(SPEC.default_model or "")
        if row is None:
            return None
        folder = Path(self.runner.model).expanduser()
        outcome = require_licence(row, self.options.accept_licence, option="options.accept_licence",
                                  how="-O accept_licence=true", folder=folder if folder.is_dir() else None)
        if outcome is None:
            return None
        record, now = outcome
        when = "accepted now" if now else f"accepted {record.get('accepted_at', '')} ({record.get('how', '')})"
        return f"licence: {row.licence} {when}"

    # -------------------------------------------------------------- planning

    def _segments(self, shot: ShotPlan) -> list[Segment]:
        """The generations that make the shot under LTX-2's 8k+1 frame rule and 20 s limit."""
        snap = catalog.family(FAMILY).snap
        assert snap.frame_step and snap.native_fps and snap.max_seconds
        longest = self.options.segment_seconds or snap.max_seconds
        shortest = min(longest, (snap.frame_step + snap.frame_offset) / snap.native_fps)
        return plan_segments(shot.duration_s, snap.native_fps, snap.frame_step, snap.frame_offset, shortest, longest)

    def _ensure(self, plan: Plan, shot_id: str) -> Iterator[Event]:
        """Load once, with the memory tier chosen for the plan's longest generation."""
        runner = self.runner
        if runner.pipe is not None:
            return
        defaults = runner.prepare()
        width, height = self._sizes(plan)[0]
        longest = max(self._segments(s)[0].frames for s in plan.shots)
        yield from runner.load_for(NativeRequest(width, height, longest, defaults.native_fps, "", "", 0), shot_id)

    def _sizes(self, plan: Plan) -> tuple[tuple[int, int], tuple[int, int]]:
        """(generated, delivered before resizing to the plan) sizes: equal unless the upsampler doubles them."""
        multiple = catalog.family(FAMILY).snap.size_multiple
        if self.options.upsample:
            return upsampled_sizes(plan.width, plan.height, multiple)
        size = generation_size(plan.width, plan.height, multiple)
        return size, size

    # -------------------------------------------------------------- conditioning

    def _previz_frames(self, job: RenderJob, ctx: RunContext, native: int) -> list[np.ndarray]:
        """The shot's previz RGB (no labels) for its first ``native`` frames at 24 fps: (H, W, 3) uint8 each."""
        wanted = plan_to_native_indexes(job.shot.frames, job.plan.fps, native, 24.0)
        return self._previz.rgb_frames(job, ctx, wanted)

    def _previz_conditions(self, job: RenderJob, ctx: RunContext, segment: Segment, size: tuple[int, int]
                           ) -> tuple[list[Any], str]:
        """The first segment's previz conditions for the ``condition`` option, and what they are (for the notice)."""
        from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition

        mode, strength = self.options.condition, self.options.condition_strength
        if mode == "none":
            return [], "none (prompt only)"
        temporal = int(self.runner.pipe.vae_temporal_compression_ratio)
        native = min(segment.frames, frames_for(job.shot.duration_s, 24.0))
        previz = [resize_rgb(f, *size) for f in self._previz_frames(job, ctx, native)]
        if mode == "first_frame":
            return [LTX2VideoCondition(frames=previz[0], index=0, strength=strength)], \
                f"previz frame 0 at latent 0, strength {strength:g}"
        if mode == "keyframes":
            chosen = []
            for latent in keyframe_latents(segment.frames, temporal):
                frame = min(len(previz) - 1, latent_to_frame(latent, segment.frames, temporal))
                chosen.append((latent, frame))
            conditions = [LTX2VideoCondition(frames=previz[f], index=k, strength=strength) for k, f in chosen]
            return conditions, "previz frames " + ", ".join(f"{f} at latent {k}" for k, f in chosen) + \
                f", strength {strength:g}"
        video = np.stack(previz)  # (F, H, W, 3) uint8 at 24 fps
        return [LTX2VideoCondition(frames=video, index=0, strength=strength)], \
            f"previz video of {len(video)} frames from latent 0, strength {strength:g}"

    # -------------------------------------------------------------- one shot

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/denoise progress, notices, one Audio and exactly ``job.shot.frames`` frames."""
        from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition
        from PIL import Image

        plan, shot = job.plan, job.shot
        runner = self.runner
        if self.licence:
            yield Notice("info", f"ltx2: {self.licence}", shot.shot_id)
        yield from self._ensure(plan, shot.shot_id)
        yield from runner.pay_owed_step(shot.shot_id)
        defaults = runner.defaults
        assert defaults is not None
        if runner.speed_config is not None:
            yield Notice("info", runner.speed_config.describe(), shot.shot_id)
        size, final = self._sizes(plan)
        segments = self._segments(shot)
        prompt = ltx2_prompt_for(plan, shot)
        negative = ", ".join(p for p in (shot.negative_prompt, defaults.negative_prompt) if p)
        native_total = frames_for(shot.duration_s, defaults.native_fps)
        if len(segments) == 1 and segments[0].frames != native_total:
            yield Notice("info", f"ltx2: generated {segments[0].frames} frames (LTX-2 makes 8k+1) and trimmed to "
                                 f"{native_total} ({shot.duration_s:g} s at 24 fps)", shot.shot_id)
        elif len(segments) > 1:
            yield Notice("info", f"ltx2: {shot.duration_s:g} s is longer than one generation: {len(segments)} "
                                 f"segments of {segments[0].frames} frames, each after the first starting on the "
                                 "previous segment's last frame (the previz conditions the first only)", shot.shot_id)
        yield Notice("info", f"ltx2: prompt: {prompt}", shot.shot_id)
        if runner.runtime.kind == "cuda":
            import torch

            torch.cuda.reset_peak_memory_stats()
        tier_before = runner.tier
        samples: list[tuple[str, dict]] = []
        results: list[Result] = []
        for segment in segments:
            ctx.check()
            label = f"segment {segment.index + 1}/{len(segments)}: " if len(segments) > 1 else ""
            if segment.index == 0:
                conditions, what = self._previz_conditions(job, ctx, segment, size)
            else:
                last = shared_frame(results[-1].frames, segments[segment.index - 1])
                conditions = [LTX2VideoCondition(frames=Image.fromarray(last), index=0, strength=1.0)]
                what = "the previous segment's last frame at latent 0"
            yield Notice("info", f"ltx2: {label}conditioned on {what}", shot.shot_id)
            request = NativeRequest(size[0], size[1], segment.frames, defaults.native_fps, prompt, negative,
                                    shot.seed + segment.index)
            result = None
            for item in runner.generate_av(shot, request, conditions, ctx):
                if isinstance(item, tuple):
                    result = item[1]
                else:
                    if isinstance(item, Progress) and item.stage == "denoise" and item.done == (item.total + 1) // 2:
                        samples.append(("mid-denoise", runner.sample_health()))
                    yield item
            assert result is not None
            if self.options.upsample:
                yield Progress("render", shot.shot_id, 0, 1, f"{label}latent upsampler: {size[0]}x{size[1]} -> "
                                                             f"{final[0]}x{final[1]}")
                result = Result(runner.upsample(result.frames, size, request.seed), result.audio, result.rate)
            results.append(result)
        samples.append(("after decode", runner.sample_health()))
        yield from runner.judge_health(shot.shot_id, samples, tier_before)
        native, sound = join_segments(results, segments, defaults.native_fps)  # (F, h, w, 3) uint8; (C, N) float32
        yield from self._deliver(plan, shot, native, sound, results[0].rate, size, final)

    def _deliver(self, plan: Plan, shot: ShotPlan, native: np.ndarray, sound: np.ndarray, rate: int,
                 size: tuple[int, int], final: tuple[int, int]) -> Iterator[Event]:
        """The shot's sound (cut to its duration) and its frames on the plan's grid at the delivery size."""
        notes = []
        if final != size:
            notes.append(f"generated at {size[0]}x{size[1]} and doubled to {final[0]}x{final[1]} by the latent "
                         "upsampler")
        if final != (plan.width, plan.height):
            grid = "" if final != size else " (LTX-2 needs sides that are multiples of 32)"
            notes.append(f"{'made' if final != size else 'generated'} at {final[0]}x{final[1]}{grid}, resized to "
                         f"{plan.width}x{plan.height}")
        yield from deliver("ltx2", plan, shot, native, sound, rate, notes)

    def close(self) -> None:
        """Release the pipeline and the previz GL context."""
        self.runner.close()
        self._previz.close()


SPEC = BackendSpec(
    name="ltx2",
    factory="daotai.render.ltx2:LTX2Backend",
    options=LTX2Options,
    summary="LTX-2 (diffusers): video and stereo sound in one pass, optionally conditioned on previz frames",
    family=FAMILY,
    device_class="accelerator",
    sound=True,
    default_model="ltx-2",
)
