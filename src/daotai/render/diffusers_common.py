"""What the diffusers backends (wan, wan-vace, ltx) share: defaults, requests, retiming, stepping.

A backend turns one planned shot into a *native request* (size and frame count the model
accepts, at the model's native frame rate), runs the pipeline in a worker thread so step
progress can flow out as events while it denoises, and maps the generated frames back onto
the plan's frame grid (resize to the plan's size, repeat/drop frames to the plan's fps).

Neural backends make no control channels: the pipeline runs them with controls off.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import numpy as np

from daotai import catalog
from daotai.catalog import PromptBudget
from daotai.errors import BackendError, Cancelled
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.timing import frames_for, round_size, snap_frames
from daotai.plan.prompt import fit_prompt
from daotai.render.base import Event, Frame, Notice, Progress, RenderJob, RunContext
from daotai.render.spec import DiffusersOptions, NeuralOptions

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


def retime_indexes(native_frames: int, native_fps: float, plan_frames: int, plan_fps: float) -> list[int]:
    """For each plan frame, the native frame shown at the same time (repeats or drops frames)."""
    ratio = native_fps / plan_fps
    return [min(native_frames - 1, int(np.floor(i * ratio + 0.5))) for i in range(plan_frames)]


def plan_to_native_indexes(plan_frames: int, plan_fps: float, native_frames: int, native_fps: float) -> list[int]:
    """For each native frame, the plan frame at the same time (used to sample control signals)."""
    return retime_indexes(plan_frames, plan_fps, native_frames, native_fps)


def retime_notice(request: NativeRequest, plan: Plan, shot: ShotPlan) -> Notice | None:
    """A Notice describing the retiming and resizing, or None when the output maps 1:1."""
    parts = []
    if abs(request.fps - plan.fps) > 1e-6 or request.frames != shot.frames:
        how = "repeating" if plan.fps > request.fps else "dropping" if plan.fps < request.fps else "trimming"
        parts.append(
            f"generated {request.frames} frames at {request.fps:g} fps, retimed to {shot.frames} at "
            f"{plan.fps:g} fps by {how} frames (no interpolator installed)"
        )
    if (request.width, request.height) != (plan.width, plan.height):
        parts.append(f"generated at {request.width}x{request.height}, resized to {plan.width}x{plan.height}")
    return Notice("info", "; ".join(parts), shot.shot_id) if parts else None


UINT8_CHUNK_FRAMES = 8  # frames converted to bytes per pass on the device


def to_uint8(frames: Any) -> np.ndarray:
    """Pipeline output → (F, H, W, 3) uint8.

    Accepts numpy (1, F, H, W, 3) / (F, H, W, 3) floats in [0, 1], or a torch tensor as
    ``output_type="pt"`` returns it, (1, F, 3, H, W) / (F, 3, H, W) on the device: that one is
    scaled and rounded where it lies, so only 1 byte a sample crosses to the host instead of 4
    (81 frames at 832x480: 97 MB, not 388 MB) and the host does no float work.
    """
    if hasattr(frames, "permute"):  # torch tensor (channels first)
        import torch

        tensor = frames[0] if frames.ndim == 5 else frames
        if tensor.ndim != 4 or tensor.shape[1] != 3:
            raise BackendError(f"pipeline returned frames of shape {tuple(tensor.shape)}; expected (F, 3, H, W)")
        frames_n, _, height, width = tensor.shape
        with torch.no_grad():
            out = torch.empty(frames_n, height, width, 3, dtype=torch.uint8, device=tensor.device)
            # A few frames at a time: the float temporaries stay small (8 frames at 832x480: 38 MB
            # instead of 2 x 388 MB for 81), so converting never raises the shot's memory peak.
            for start in range(0, frames_n, UINT8_CHUNK_FRAMES):
                chunk = tensor[start:start + UINT8_CHUNK_FRAMES].float() * 255.0
                out[start:start + UINT8_CHUNK_FRAMES] = (chunk.add_(0.5).clamp_(0.0, 255.0)  # truncation = rounding
                                                         .to(torch.uint8).permute(0, 2, 3, 1))
            return out.cpu().numpy()  # (F, H, W, 3) uint8
    array = np.asarray(frames, dtype=np.float32)
    if array.ndim == 5:
        array = array[0]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise BackendError(f"pipeline returned frames of shape {array.shape}; expected (F, H, W, 3)")
    return np.clip(array * 255.0 + 0.5, 0, 255).astype(np.uint8)  # (F, H, W, 3) uint8


def resize_rgb(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    """(h, w, 3) uint8 → (height, width, 3) uint8, area filter when shrinking."""
    if frame.shape[1] == width and frame.shape[0] == height:
        return frame
    import cv2

    shrinking = width * height < frame.shape[0] * frame.shape[1]
    interpolation = cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC
    return np.ascontiguousarray(cv2.resize(frame, (width, height), interpolation=interpolation))


def plan_frames(native: np.ndarray, request: NativeRequest, plan: Plan, shot: ShotPlan) -> Iterator[Frame]:
    """Frames on the plan's grid from native (F, h, w, 3) uint8 output: retimed and resized."""
    for index, source in enumerate(retime_indexes(len(native), request.fps, shot.frames, plan.fps)):
        yield Frame(shot_id=shot.shot_id, index=index, rgb=resize_rgb(native[source], plan.width, plan.height))


# ------------------------------------------------------------------ stepping in a worker


_FINISHED = object()


def run_steps(call: Callable[[Callable], Any], shot_id: str, total: int, ctx: RunContext) -> Iterator[Event | tuple]:
    """Run ``call(callback)`` in a thread; yield Progress per step, then ("result", value).

    ``callback`` is a diffusers ``callback_on_step_end``: it reports the step and sets
    ``pipe._interrupt`` when the run is cancelled, so the loop stops between steps.
    """
    events: queue.Queue = queue.Queue()
    started = time.perf_counter()
    state = {"cancelled": False, "last": started}

    def on_step_end(pipe: Any, step: int, timestep: Any, tensors: dict) -> dict:
        now = time.perf_counter()
        events.put(Progress("denoise", shot_id, step + 1, total, f"step {step + 1}/{total} {now - state['last']:.2f} s"))
        state["last"] = now
        if ctx.cancel.is_set() or state.get("abandoned"):
            state["cancelled"] = True
            pipe._interrupt = True
        return tensors

    def worker() -> None:
        try:
            events.put(("result", call(on_step_end)))
        except BaseException as exc:  # re-raised in the consumer's thread
            events.put(("error", exc))
        events.put(_FINISHED)

    thread = threading.Thread(target=worker, name=f"daotai-denoise-{shot_id}", daemon=True)
    thread.start()
    outcome: tuple | None = None
    finished = False
    try:
        while True:
            item = events.get()
            if item is _FINISHED:
                finished = True
                break
            if isinstance(item, tuple):
                outcome = item
            else:
                yield item
    finally:
        if not finished:  # the consumer went away (closed generator): stop the loop at the next step
            state["abandoned"] = True
    thread.join()
    if state["cancelled"] or ctx.cancel.is_set():
        raise Cancelled(f"{shot_id}: stopped between denoising steps")
    if outcome is None:
        raise BackendError(f"{shot_id}: the pipeline ended without a result")
    if outcome[0] == "error":
        raise outcome[1]
    yield outcome


def step_callback_kwargs(callback: Callable) -> dict[str, Any]:
    """Pipeline keyword arguments that install the step callback."""
    return {"callback_on_step_end": callback, "callback_on_step_end_tensor_inputs": ["latents"]}


def set_shift(pipe: Any, shift: float | None) -> None:
    """Set the flow-matching shift on the pipeline's scheduler when it has one."""
    if shift is None:
        return
    config = dict(pipe.scheduler.config)
    key = "shift" if "shift" in config else "flow_shift" if "flow_shift" in config else None
    if key is None or config.get(key) == shift:
        return
    pipe.scheduler = type(pipe.scheduler).from_config(config, **{key: shift})


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ('' when it has none)."""
    return str(exc).splitlines()[0] if str(exc) else ""


def retry_a_tier_lower(runner: Any, attempt: Callable[[], Iterator[Any]], *, failed: Callable[[BaseException], str],
                       exhausted: str, retrying: Callable[[str], Any],
                       passthrough: tuple[type[BaseException], ...] = (Cancelled,)) -> Iterator[Any]:
    """Run ``attempt()`` (a generator), and once more a memory tier lower if it ran out of memory.

    Other failures become BackendError(``failed(exc)``); ``passthrough`` errors propagate as they
    are; after the retry, or with no lower tier left, BackendError(``exhausted``). ``retrying(tier)``
    is yielded before the second attempt.
    """
    for round_ in (0, 1):
        try:
            yield from attempt()
            return
        except passthrough:
            raise
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise BackendError(failed(exc)) from exc
            lower = runner.step_down() if round_ == 0 else None
            if lower is None:
                raise BackendError(exhausted) from None
            yield retrying(lower)


def is_out_of_memory(exc: BaseException) -> bool:
    """True for a CUDA/MPS out-of-memory error."""
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(exc).lower()


# ------------------------------------------------------------------ loading and placing


class DiffusersShotRunner:
    """A loaded pipeline for one family, kept warm between shots, placed by the memory planner."""

    def __init__(self, family: str, options: DiffusersOptions, default_model: str,
                 health: Callable[[Any], dict] | None = None):
        from daotai.render.speed import parse_speed

        self.family = family
        self.speed = parse_speed(options.speed)
        self.speed_config: Any = None
        self.model = options.model or default_model
        self.device = options.device
        self.options = options
        self.offload = options.offload  # None: the memory planner decides
        self.adaptive = options.adaptive
        self.pipe: Any = None
        self.runtime: Any = None
        self.resolved: Any = None
        self.tier: str | None = None
        self.tier_reason = ""  # why the pipeline sits at self.tier (recorded per shot)
        self.defaults: ModelDefaults | None = None
        # Health: ``health(runtime) -> sample`` (default: daotai.runtime.device.health_sample);
        # with ``adaptive`` a critical shot makes the next one run a memory tier lower.
        self.health = health
        self.owed_step: str | None = None  # reason for a step down owed to the next shot

    def ensure_loaded(self, plan: Plan, shot: ShotPlan) -> Iterator[Event]:
        """Load once (first shot), then reuse; yields load progress and the placement notice."""
        if self.pipe is not None:
            return
        from daotai.runtime.device import resolve_runtime
        from daotai.runtime.models import load_pipeline

        yield Progress("load", shot.shot_id, 0, 1, f"loading {self.model}")
        started = time.perf_counter()
        self.runtime = resolve_runtime(self.device)
        self.defaults = effective_defaults(self.family, self.options, self.model)
        request = native_request(plan, shot, self.defaults)
        tier = self._choose_tier(request)
        self.pipe, self.resolved = load_pipeline(self.model, self.family, self.runtime)
        self.pipe.set_progress_bar_config(disable=True)
        set_shift(self.pipe, self.defaults.shift)
        self._place(tier)
        self._apply_speed()
        yield Progress("load", shot.shot_id, 1, 1, f"loaded in {time.perf_counter() - started:.1f} s")
        yield Notice("info", f"{self.family}: {self.resolved.path.name} on {self.runtime.device} "
                             f"({self.runtime.transformer_dtype}), memory tier {self.tier}", shot.shot_id)

    def _apply_speed(self) -> None:
        """Select and apply the speed levers for this device (kernel levers only when nothing is offloaded)."""
        from daotai.render.speed import apply_levers, cache_only, levers_for, resolve_levers

        config = resolve_levers(levers_for(self.speed, self.runtime.kind), self.runtime.device)
        if self.tier != "none":
            # Offload hooks move weights during the forward; compiled graphs and layout changes
            # would fight them, so only the device-agnostic step cache is kept.
            config = cache_only(config)
        assert self.defaults is not None
        apply_levers(self.pipe, config, self.defaults.steps)
        self.speed_config = config

    def _choose_tier(self, request: NativeRequest) -> str:
        """Offload tier from the planner (or the user's choice); refuses before loading when nothing fits."""
        from daotai.runtime.memory import plan_placement

        if self.offload is not None:
            self.tier_reason = "as asked (offload option)"
            return self.offload
        if self.runtime.kind == "cpu":
            self.tier_reason = "cpu: weights already live in host memory"
            return "none"  # weights already live in the memory the CPU computes from
        from daotai.runtime.memory import footprint_from_folder
        from daotai.runtime.models import resolve_model

        row = catalog.model_row(self.model)
        # Catalog models use their documented footprint; local folders are measured from their headers.
        footprint = row.footprint if row is not None else footprint_from_folder(resolve_model(self.model).path, self.family)
        choice = plan_placement(footprint, request.width, request.height, request.frames,
                                self.runtime.memory_bytes, bytes_per_param=2.0)
        self.tier_reason = f"memory planner: ~{choice.estimate.peak_bytes / 1024**3:.1f} GiB peak estimated"
        return choice.tier

    def _place(self, tier: str) -> None:
        """Move or hook the pipeline for an offload tier."""
        from daotai.runtime.memory import TIERS

        pipe, device = self.pipe, self.runtime.device
        self.tier = tier
        if self.runtime.kind == "cpu" or tier == "none":
            pipe.to(device)
        elif tier == "model":
            pipe.enable_model_cpu_offload(device=device)
        elif tier == "group":
            from diffusers.hooks import apply_group_offloading

            import torch

            streams = self.runtime.kind == "cuda"  # overlap weight copies with compute
            for name in ("transformer", "transformer_2"):
                module = getattr(pipe, name, None)
                if module is not None:
                    apply_group_offloading(module, onload_device=torch.device(device), offload_type="block_level",
                                           num_blocks_per_group=1, use_stream=streams)
            # The text encoder's blocks sit below the top level (encoder.block): stream it leaf by leaf.
            apply_group_offloading(pipe.text_encoder, onload_device=torch.device(device), offload_type="leaf_level",
                                   use_stream=streams)
            pipe.vae.to(device)
        elif tier == "sequential":
            pipe.enable_sequential_cpu_offload(device=device)
        else:
            raise BackendError(f"offload: {tier!r} must be one of {', '.join(TIERS)}")
        if tier != "none" and hasattr(pipe.vae, "enable_tiling"):
            pipe.vae.enable_tiling()

    def step_down(self) -> str | None:
        """Re-place the pipeline one memory tier lower; None when already at the lowest."""
        from daotai.runtime.memory import TIERS

        index = TIERS.index(self.tier or "none")
        if index + 1 >= len(TIERS):
            return None
        try:
            import torch

            if self.pipe is not None and hasattr(self.pipe, "remove_all_hooks"):
                self.pipe.remove_all_hooks()
            self.pipe.to("cpu")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:  # best effort: hooks of some tiers cannot be removed cleanly
            pass
        self._place(TIERS[index + 1])
        return self.tier

    def generate(self, shot: ShotPlan, request: NativeRequest, extra: dict[str, Any],
                 ctx: RunContext) -> Iterator[Event | tuple]:
        """Run the pipeline for one request (retrying once a tier lower on out-of-memory)."""
        from daotai.runtime.device import generator_for

        defaults = self.defaults
        assert defaults is not None

        def call(callback: Callable) -> Any:
            from daotai.render.speed import SpeedConfig, denoise_context

            with denoise_context(self.speed_config or SpeedConfig()):
                return call_pipe(callback)

        def call_pipe(callback: Callable) -> Any:
            result = self.pipe(
                prompt=request.prompt,
                negative_prompt=request.negative_prompt,
                height=request.height,
                width=request.width,
                num_frames=request.frames,
                num_inference_steps=defaults.steps,
                guidance_scale=defaults.guidance,
                generator=generator_for(request.seed),
                max_sequence_length=defaults.max_sequence_length,
                output_type="pt",  # frames stay on the device until to_uint8 has made them bytes
                **extra,
                **step_callback_kwargs(callback),
            )
            return result.frames

        yield from retry_a_tier_lower(
            self,
            lambda: run_steps(call, shot.shot_id, defaults.steps, ctx),
            failed=lambda exc: f"{shot.shot_id}: {self.family} pipeline failed: {type(exc).__name__}: "
                               f"{first_line(exc)}",
            exhausted=f"{shot.shot_id}: out of memory at {request.width}x{request.height}, {request.frames} frames "
                      "even with the lowest memory tier; try --preset preview or shorter shots",
            retrying=lambda lower: Notice("warning", f"out of memory; retrying once with memory tier {lower}",
                                          shot.shot_id),
        )

    def sample_health(self) -> dict:
        """One health sample from the configured sampler; {} if it fails (telemetry never fails a render)."""
        from daotai.runtime.device import health_sample

        try:
            return dict((self.health or health_sample)(self.runtime) or {})
        except Exception:
            return {}

    def pay_owed_step(self, shot_id: str) -> Iterator[Event]:
        """Before a shot: the step down a critical health verdict on the previous shot asked for."""
        if self.owed_step is None:
            return
        reason, self.owed_step = self.owed_step, None
        before = self.tier
        if self.step_down() is None:
            return
        self.tier_reason = f"stepped down from {before} by --adaptive: {reason}"
        yield Notice("warning", f"memory tier {before} -> {self.tier} for this and later shots: {reason}", shot_id)

    def judge_health(self, shot_id: str, samples: list[tuple[str, dict]], tier_before: str | None) -> Iterator[Event]:
        """After a shot: its tier and health samples as notices (the manifest keeps them); warn unless ok."""
        from daotai.runtime.health import assess, combine, format_sample
        from daotai.runtime.memory import tier_after_health

        if self.tier != tier_before:
            self.tier_reason = f"stepped down from {tier_before} after running out of memory"
        yield Notice("info", f"memory tier {self.tier} ({self.tier_reason})", shot_id)
        for when, sample in samples:
            if sample:
                yield Notice("info", f"health {when}: {format_sample(sample)}", shot_id)
        status = combine(assess(sample) for _, sample in samples)
        if status.level == "ok":
            return
        assert self.tier is not None
        following = tier_after_health(self.tier, status.level, self.adaptive)
        if following != self.tier:
            self.owed_step = f"health critical after {shot_id}"
            advice = f"--adaptive: the next shot runs at memory tier {following}"
        elif status.critical and self.adaptive:
            advice = "already at the lowest memory tier"
        elif status.critical:
            advice = "run with --adaptive to step down a memory tier between shots"
        else:
            advice = ""
        yield Notice("warning", status.describe() + (f"; {advice}" if advice else ""), shot_id)

    def close(self) -> None:
        """Drop the pipeline and free accelerator memory."""
        self.pipe = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def render_shot(runner: DiffusersShotRunner, job: RenderJob, ctx: RunContext,
                extra_for: Callable[[NativeRequest], Iterator[Event | dict]] | None = None) -> Iterator[Event]:
    """The whole per-shot flow every diffusers backend shares: load, request, generate, map back."""
    plan, shot = job.plan, job.shot
    yield from runner.ensure_loaded(plan, shot)
    yield from runner.pay_owed_step(shot.shot_id)
    assert runner.defaults is not None
    if runner.speed_config is not None:
        yield Notice("info", runner.speed_config.describe(), shot.shot_id)  # recorded in the manifest
    request = native_request(plan, shot, runner.defaults)
    extra: dict[str, Any] = {}
    if extra_for is not None:
        for item in extra_for(request):
            if isinstance(item, dict):
                extra.update(item)
            else:
                yield item
    ctx.check()
    if runner.runtime.kind == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats()  # so the health sample reports this shot's peak
    native = None
    tier_before = runner.tier
    samples: list[tuple[str, dict]] = []
    for item in runner.generate(shot, request, extra, ctx):
        if isinstance(item, tuple):
            native = to_uint8(item[1])
        else:
            # Halfway through denoising the device is at full load: throttling and heat show now.
            if isinstance(item, Progress) and item.stage == "denoise" and item.done == (item.total + 1) // 2:
                samples.append(("mid-denoise", runner.sample_health()))
            yield item
    assert native is not None
    samples.append(("after decode", runner.sample_health()))  # includes the VAE's peak
    yield from runner.judge_health(shot.shot_id, samples, tier_before)
    notice = retime_notice(request, plan, shot)
    if notice is not None:
        yield notice
    yield Progress("render", shot.shot_id, 0, shot.frames, "retiming")
    for frame in plan_frames(native, request, plan, shot):
        yield frame
    yield Progress("render", shot.shot_id, shot.frames, shot.frames)
