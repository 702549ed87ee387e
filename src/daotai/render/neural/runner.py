"""A diffusers pipeline loaded, placed by the memory planner and kept warm; the per-shot flow.

Neural backends make no control channels: the pipeline runs them with controls off.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from daotai import catalog
from daotai.errors import BackendError
from daotai.events import Event, Notice, Progress
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.latent_preview import KeptPicture, LatentPreview, as_video_latents
from daotai.render.neural.request import ModelDefaults, NativeRequest, effective_defaults, native_request
from daotai.render.neural.retime import plan_frames, retime_notice, to_uint8
from daotai.render.neural.stepping import first_line, retry_a_tier_lower, run_steps, step_callback_kwargs
from daotai.render.spec import DiffusersOptions


def set_shift(pipe: Any, shift: float | None) -> None:
    """Set the flow-matching shift on the pipeline's scheduler when it has one."""
    if shift is None:
        return
    config = dict(pipe.scheduler.config)
    key = "shift" if "shift" in config else "flow_shift" if "flow_shift" in config else None
    if key is None or config.get(key) == shift:
        return
    pipe.scheduler = type(pipe.scheduler).from_config(config, **{key: shift})


BuildPipeline = Callable[[str, str, Any], tuple[Any, Any]]  # (model, family, runtime) -> (pipe, resolved)


def _load_checked(model: str, family: str, runtime: Any) -> tuple[Any, Any]:
    """The default build hook: daotai's safetensors-only, hashed loader."""
    from daotai.runtime.model_loading import load_pipeline

    return load_pipeline(model, family, runtime)


class DiffusersShotRunner:
    """A loaded pipeline for one family, kept warm between shots, placed by the memory planner."""

    def __init__(self, family: str, options: DiffusersOptions, default_model: str,
                 health: Callable[[Any], dict] | None = None, build: BuildPipeline | None = None,
                 speed_levers: bool = True):
        from daotai.render.speed import parse_speed

        # ``build(model, family, runtime) -> (pipe, resolved)`` makes the pipeline; the default
        # loads it through daotai's checked loader. A caller that needs another pipeline class
        # over the same weights (the diffusion re-render) passes its own.
        self.build = build or _load_checked
        self.speed_levers = speed_levers  # False: no speed levers applied (callers with their own loop)
        self.family = family
        self.speed = parse_speed(options.speed)
        self.speed_config: Any = None
        self.model = options.model or default_model
        self.device = options.device
        self.options = options
        self.offload = options.offload  # None: the memory planner decides
        self.adaptive = options.adaptive
        self.pipe: Any = None
        self.group: Any = None  # the ranks holding the pipeline when one shot is split over gpus > 1 processes
        self.runtime: Any = None
        self.resolved: Any = None
        self.tier: str | None = None
        self.tier_reason = ""  # why the pipeline sits at self.tier (recorded per shot)
        self.defaults: ModelDefaults | None = None
        # Health: ``health(runtime) -> sample`` (default: daotai.runtime.device.health_sample);
        # with ``adaptive`` a critical shot makes the next one run a memory tier lower.
        self.health = health
        self.owed_step: str | None = None  # reason for a step down owed to the next shot
        # The live view's picture while a shot denoises: a map fitted on the shots this model has
        # finished (render.neural.latent_preview), and the latest latents of the shot in progress.
        self.live_picture = KeptPicture(f"{family}:{self.model}")  # kept under the family and the model as asked for
        self.clean_estimate: Any = None  # while a shot denoises: its latest estimate of the clean latents
        self.estimated = False  # whether the current step gave its estimate yet
        self.latest_latents: tuple[Any, Any] | None = None  # (latents, what reads them: _video_latents' 2nd argument)

    def ensure_loaded(self, plan: Plan, shot: ShotPlan) -> Iterator[Event]:
        """Load once (first shot), then reuse; yields load progress and the placement notice."""
        if self.group is not None and self.group.broken:
            self.group = None  # a rank failed on an earlier shot (the group stopped them all): start a new one
        if self.pipe is not None or self.group is not None:
            return
        self.prepare()
        assert self.defaults is not None
        yield from self.load_for(native_request(plan, shot, self.defaults), shot.shot_id)

    def prepare(self) -> ModelDefaults:
        """Resolve the device and the model's effective defaults (cheap; nothing is loaded)."""
        from daotai.runtime.device import resolve_runtime

        if getattr(self.options, "gpus", 1) > 1 and (self.build is not _load_checked or type(self) is not DiffusersShotRunner):
            # A rank rebuilds the pipeline from family, options and model alone: a custom build hook
            # (camera adapters) or a runner with its own loading (MiniMax-H3) cannot be rebuilt there.
            raise BackendError(f"gpus: {self.options.gpus} is not available for the {self.family} family yet; "
                               "use gpus=1")
        if self.runtime is None:
            self.runtime = resolve_runtime(self.device)
        self.defaults = effective_defaults(self.family, self.options, self.model)
        return self.defaults

    def load_for(self, request: NativeRequest, shot_id: str | None) -> Iterator[Event]:
        """Choose a memory tier for ``request`` (refusing before loading when none fits), build and place."""
        if self.defaults is None:
            self.prepare()
        assert self.defaults is not None
        yield Progress("load", shot_id, 0, 1, f"loading {self.model}")
        started = time.perf_counter()
        if self.options.gpus > 1:
            yield from self._load_group(request, shot_id, started)
            return
        tier = self._choose_tier(request)
        self.pipe, self.resolved = self.build(self.model, self.family, self.runtime)
        self.pipe.set_progress_bar_config(disable=True)
        set_shift(self.pipe, self.defaults.shift)
        self._place(tier)
        if self.speed_levers:
            self._apply_speed()
        yield Progress("load", shot_id, 1, 1, f"loaded in {time.perf_counter() - started:.1f} s")
        yield Notice("info", f"{self.family}: {self.resolved.path.name} on {self.runtime.device} "
                             f"({self.runtime.transformer_dtype}), memory tier {self.tier}", shot_id)

    def _load_group(self, request: NativeRequest, shot_id: str | None, started: float) -> Iterator[Event]:
        """Spawn ``gpus`` ranks that each load the pipeline and split the transformer's sequence between them."""
        from daotai.render.neural.parallel import RankGroup, RankSetup, check_world, free_port
        from daotai.render.speed import levers_for

        gpus, kind = self.options.gpus, self.runtime.kind
        if self.offload not in (None, "none"):
            raise BackendError(f"gpus: {gpus} keeps the whole model on each device; offload={self.offload!r} "
                               "cannot be combined with it")
        first = int(self.runtime.device.split(":", 1)[1]) if ":" in self.runtime.device else 0
        check_world(gpus, kind, first)
        if kind == "cuda":
            self._check_group_fits(request, gpus)
        setup = RankSetup(world=gpus, port=free_port(), family=self.family, options=self.options.model_dump(),
                          options_type=type(self.options), default_model=self.model, device_kind=kind,
                          first_device=first, sdpa=levers_for(self.speed, kind).sdpa, load=load_on_rank)
        group = RankGroup(setup)
        group.start()
        self.group, self.resolved = group, group.resolved
        self.tier = "none"
        self.tier_reason = f"split over {gpus} processes (context parallel)"
        yield Progress("load", shot_id, 1, 1, f"loaded on {gpus} processes in {time.perf_counter() - started:.1f} s")
        where = f"{kind}:{first}..{first + gpus - 1}" if kind == "cuda" else f"{gpus} CPU processes"
        yield Notice("info", f"{self.family}: {self.resolved.path.name} split over {where} "
                             f"({self.runtime.transformer_dtype}), memory tier none", shot_id)
        if self.speed != "off":
            yield Notice("info", "speed levers other than the SDPA kernel are off while a shot is split over "
                                 "processes", shot_id)

    def _check_group_fits(self, request: NativeRequest, gpus: int) -> None:
        """Refuse before spawning when the planner says the model and 1/gpus of the activations miss each GPU."""
        from daotai.runtime.memory import estimate, footprint_from_folder, gpus_that_fit
        from daotai.runtime.model_lookup import resolve_model

        row = catalog.model_row(self.model)
        footprint = row.footprint if row is not None else footprint_from_folder(resolve_model(self.model).path, self.family)
        peak = min(estimate(footprint, request.width, request.height, request.frames, 2.0, "none", tiling,
                            gpus).peak_bytes for tiling in (False, True))
        if peak <= self.runtime.memory_bytes:
            return
        fits = gpus_that_fit(footprint, request.width, request.height, request.frames, self.runtime.memory_bytes,
                             bytes_per_param=2.0)
        advice = f"gpus={fits} would fit" if fits else "no split fits: run with gpus=1 and offloading"
        raise BackendError(f"gpus: {gpus} needs ~{peak / 1024**3:.1f} GiB per GPU at {request.width}x"
                           f"{request.height}, {request.frames} frames, more than the "
                           f"{self.runtime.memory_bytes / 1024**3:.1f} GiB each has; {advice}")

    @property
    def pipeline_class(self) -> str:
        """The loaded pipeline's class name, also when the pipeline lives in the ranks of a split shot."""
        return self.group.pipeline_class if self.group is not None else type(self.pipe).__name__

    def _apply_speed(self) -> None:
        """Select and apply the speed levers for this device (kernel levers only when nothing is offloaded)."""
        from daotai.render.speed import apply_levers, cache_only, levers_for, resolve_levers

        config = resolve_levers(levers_for(self.speed, self.runtime.kind, self.family), self.runtime.device)
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
        from daotai.runtime.model_lookup import resolve_model

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
            import torch
            from diffusers.hooks import apply_group_offloading

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
        if index + 1 >= len(TIERS) or self.group is not None:  # split shots keep the whole model on each device
            return None
        try:
            import torch

            if self.pipe is not None and hasattr(self.pipe, "remove_all_hooks"):
                self.pipe.remove_all_hooks()
            self.pipe.to("cpu")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001  (best effort: hooks of some tiers cannot be removed cleanly)
            pass
        self._place(TIERS[index + 1])
        return self.tier

    def generate(self, shot: ShotPlan, request: NativeRequest, extra: dict[str, Any],
                 ctx: RunContext) -> Iterator[Event | tuple]:
        """Run the pipeline for one request (retrying once a tier lower on out-of-memory)."""
        from daotai.runtime.device import generator_for

        defaults = self.defaults
        assert defaults is not None

        live = self.live_view(ctx)

        def call(callback: Callable) -> Any:
            from daotai.render.speed import SpeedConfig, denoise_context

            handles = self._watch_clean_estimate() if live else []
            try:
                with denoise_context(self.speed_config or SpeedConfig()):
                    return call_pipe(self._remembering_latents(callback, request) if live else callback)
            finally:
                for handle in handles:
                    handle.remove()
                self.clean_estimate = None

        def call_pipe(callback: Callable) -> Any:
            if self.group is not None:
                return self.group.run(dict(
                    prompt=request.prompt, negative_prompt=request.negative_prompt, height=request.height,
                    width=request.width, num_frames=request.frames, num_inference_steps=defaults.steps,
                    guidance_scale=defaults.guidance, max_sequence_length=defaults.max_sequence_length, **extra,
                ), request.seed, callback)  # (F, H, W, 3) uint8 from rank 0
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
            lambda: run_steps(call, shot.shot_id, defaults.steps, ctx,
                              picture=self.step_picture(request, shot.frames) if live else None),
            failed=lambda exc: f"{shot.shot_id}: {self.family} pipeline failed: {type(exc).__name__}: "
                               f"{first_line(exc)}",
            exhausted=f"{shot.shot_id}: out of memory at {request.width}x{request.height}, {request.frames} frames "
                      "even with the lowest memory tier; try --preset preview or shorter shots",
            retrying=lambda lower: Notice("warning", f"out of memory; retrying once with memory tier {lower}",
                                          shot.shot_id),
        )

    def live_view(self, ctx: RunContext) -> bool:
        """Whether this shot shows its picture while it denoises (the run asks for glimpses, and the shot is not
        split over ranks, whose latents stay there); if so, the model's kept map is recalled first."""
        live = ctx.glimpse_every_s is not None and self.group is None
        if live:
            self.recall_picture()
        return live

    def step_picture(self, request: NativeRequest, frames: int) -> Callable[[Any], Any]:
        """The picture of a step: its clean estimate where a hook kept one, else its latents, through the map."""
        return lambda latents: self.latent_preview.picture(self._video_latents(
            latents if self.clean_estimate is None else self.clean_estimate, request), frames)

    def _video_latents(self, latents: Any, request: NativeRequest) -> Any:
        """A step's latents as (B, C, T', H', W') for the live picture (render.neural.latent_preview)."""
        return as_video_latents(self.pipe, latents, request.frames, request.height, request.width)

    def _remembering_latents(self, callback: Callable, request: NativeRequest) -> Callable:
        """The step callback, keeping each step's latents: the last ones fit the live picture's map."""
        def on_step_end(pipe: Any, step: int, timestep: Any, tensors: dict) -> dict:
            self.latest_latents = (tensors.get("latents"), request)
            try:
                return callback(pipe, step, timestep, tensors)
            finally:
                self.estimated = False  # the next step's first transformer call gives the next estimate

        return on_step_end

    def _watch_clean_estimate(self) -> list:
        """Forward hooks on the pipeline's transformer(s) keeping each step's estimate of the clean latents,
        ``x0 = x_t - sigma * v`` (diffusers' flow matching: the velocity points from the data to the noise,
        and the timestep is sigma times the scheduler's training steps), so the live picture shows the shot
        forming from the first steps instead of the noisy sample. Only the first call of a step counts
        (guidance runs the prompt's branch first); only video-grid (5-D) states are read, the first
        channels where conditioning is stacked beside them; packed ones (LTX-Video) show the sample."""
        self.clean_estimate, self.estimated = None, False
        scale = float(getattr(getattr(self.pipe, "scheduler", None), "config", {}).get("num_train_timesteps", 1000))

        def watch(module: Any, args: Any, kwargs: dict, output: Any) -> None:
            if self.estimated:
                return
            try:
                sample = kwargs.get("hidden_states", args[0] if args else None)
                times = kwargs.get("timestep")
                velocity = output[0] if isinstance(output, (tuple, list)) else getattr(output, "sample", None)
                if sample is None or times is None or velocity is None or sample.ndim != 5 or velocity.ndim != 5:
                    return
                sigma = times.float().max() / scale  # a per-token timestep holds 0 on a conditioning frame
                self.clean_estimate = sample[:1, :velocity.shape[1]].float() - sigma * velocity[:1].float()
                self.estimated = True
            except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
                self.clean_estimate = None

        transformers = [getattr(self.pipe, name, None) for name in ("transformer", "transformer_2")]
        return [module.register_forward_hook(watch, with_kwargs=True) for module in transformers
                if module is not None and hasattr(module, "register_forward_hook")]

    @property
    def latent_preview(self) -> LatentPreview:
        """The fitted map of the live picture (None weights before the first fit or recall)."""
        return self.live_picture.preview

    def learn_picture(self, frames: Any) -> None:
        """Fit the live picture's map on the shot just decoded (its last latents and its frames), and keep it."""
        latest, self.latest_latents = self.latest_latents, None
        if latest is None or latest[0] is None:
            return
        try:
            latents = self._video_latents(*latest)
        except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
            return
        self.live_picture.learn(latents, frames)

    def recall_picture(self) -> None:
        """Before a loaded model's first shot: the map kept from an earlier load, if there is one."""
        self.live_picture.recall()

    def sample_health(self) -> dict:
        """One health sample from the configured sampler; {} if it fails (telemetry never fails a render)."""
        from daotai.runtime.device import health_sample

        try:
            return dict((self.health or health_sample)(self.runtime) or {})
        except Exception:  # noqa: BLE001  (telemetry never fails a render; an injected sampler may raise anything)
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
        """Drop the pipeline (stopping the ranks of a split shot) and free accelerator memory."""
        self.pipe = None
        if self.group is not None:
            group, self.group = self.group, None
            group.close()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def load_on_rank(setup: Any, device: Any) -> tuple[Any, Any]:
    """A rank's pipeline (see daotai.render.neural.parallel): the runner's own build, whole on ``device``."""
    options = setup.options_type.model_validate({**setup.options, "gpus": 1, "device": str(device), "offload": "none"})
    # Step caches decide per rank from each rank's own shard and could disagree (a deadlock), and
    # compiled regions would trace around the split hooks: the ranks run without speed levers.
    runner = DiffusersShotRunner(setup.family, options, setup.default_model, speed_levers=False)
    defaults = runner.prepare()
    pipe, resolved = runner.build(runner.model, runner.family, runner.runtime)
    pipe.set_progress_bar_config(disable=True)
    set_shift(pipe, defaults.shift)
    pipe.to(device)
    return pipe, resolved


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
            native = item[1] if runner.group is not None else to_uint8(item[1])  # a group sends uint8 already
        else:
            # Halfway through denoising the device is at full load: throttling and heat show now.
            if isinstance(item, Progress) and item.stage == "denoise" and item.done == (item.total + 1) // 2:
                samples.append(("mid-denoise", runner.sample_health()))
            yield item
    assert native is not None
    runner.learn_picture(native)
    samples.append(("after decode", runner.sample_health()))  # includes the VAE's peak
    yield from runner.judge_health(shot.shot_id, samples, tier_before)
    notice = retime_notice(request, plan, shot)
    if notice is not None:
        yield notice
    yield Progress("render", shot.shot_id, 0, shot.frames, "retiming")
    for frame in plan_frames(native, request, plan, shot):
        yield frame
    yield Progress("render", shot.shot_id, shot.frames, shot.frames)
