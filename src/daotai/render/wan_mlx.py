"""`wan-mlx` backend: Wan2.1 text-to-video in MLX (Apple-native; also runs on Linux CPU).

Reads the same diffusers folders as the `wan` backend, or a folder written by
``daotai models convert <model> --to mlx`` (4/8-bit transformer). No torch at run time.
Frames are generated at Wan's native 16 fps and retimed onto the plan's grid like the
other neural backends. Noise comes from numpy's PCG64 seeded with ``shot.seed``, so a seed
reproduces across machines but is not the same noise as the torch backends draw.

The sampler is the one the folder's ``scheduler/scheduler_config.json`` names (UniPC for the
published Wan2.1 folders, flow Euler for FlowMatchEulerDiscreteScheduler). Before anything
is loaded, each shot's estimated peak memory is checked against the budget (the Mac's GPU
working set, total RAM on Linux, or ``memory_gb`` / ``$DAOTAI_MLX_MEMORY_GB``) and a plan that
would swap is refused with settings that would fit. Both decisions go into a Notice per shot,
so they land in the manifest.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import Field

from daotai.errors import BackendError
from daotai.events import Event, Glimpse, Notice, Progress
from daotai.render.base import GlimpsePace, RenderJob, RunContext
from daotai.render.neural.latent_preview import KeptPicture
from daotai.render.neural.request import effective_defaults, native_request
from daotai.render.neural.retime import plan_frames, retime_notice
from daotai.render.spec import BackendEnv, BackendSpec, NeuralOptions, Speed

SPATIAL, TEMPORAL = 8, 4  # Wan2.1 VAE compression


def _resolve(model: str) -> Path:
    """A folder as given, else a registry name through the model store."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    from daotai.runtime.model_lookup import resolve_model

    return resolve_model(model).path


MLX_TIERS = ("resident", "lean")  # lean: the text encoder is dropped after each shot's prompts are embedded


class WanMLXOptions(NeuralOptions):
    """Options of the `wan-mlx` backend (MLX has no torch device or offload hooks: no `device`/`offload`)."""

    verify_source: bool = Field(False, description="re-hash a converted folder's source weights before loading")
    memory_gb: float | None = Field(None, gt=0.0, description="memory budget in GB (default: the GPU working set)")
    speed: Speed | None = Field(None, description="exact (default) | fast (step cache: the transformer runs on "
                                "fewer steps) | off")
    adaptive: bool = Field(False, description="after a shot with critical memory pressure or heat, run the next "
                           "shots lean (the text encoder freed after embedding)")
    tier: Literal["resident", "lean"] = Field("resident", description="resident: every model stays loaded; lean: "
                                             "the text encoder is freed after each shot's prompts are embedded")


class WanMLXBackend:
    """Wan2.1 in MLX; models are loaded at the first shot and kept for the next."""

    name = "wan-mlx"
    family = "wan"  # the catalog family whose defaults (steps, guidance, shift, grid) apply

    def __init__(self, options: WanMLXOptions | None = None, *, env: BackendEnv | None = None, **fields: Any):
        from daotai.mlx import require_mlx

        options = SPEC.validate_options(options if options is not None else fields)
        require_mlx("the wan-mlx backend")
        self.options = options
        self.model = options.model or SPEC.default_model or ""
        self.verify_source = options.verify_source
        self.memory_gb = options.memory_gb
        self.parts: dict[str, Any] | None = None
        self.defaults = None
        self.setup: dict[str, Any] | None = None
        self.tier = options.tier
        self.owed_lean: str | None = None  # why --adaptive asks the next shot to run lean
        # health(runtime) -> sample; MLX has no torch runtime, so it is called with None
        self.health = (env or BackendEnv()).health_sampler or mlx_health_sample
        # the live view's picture of a shot while it denoises (daotai.render.neural.latent_preview)
        self.live_picture = KeptPicture(f"{self.name}:{self.model}")

    def _prepare(self) -> None:
        """Everything decided from configs and file headers alone: folder, defaults, sampler,
        memory footprint and budget (cheap, so a refusal comes before any weights load)."""
        from daotai.mlx.convert import read_manifest
        from daotai.mlx.memory import folder_footprint, memory_budget
        from daotai.mlx.scheduler import sampler_from_folder

        folder = _resolve(self.model)
        manifest = read_manifest(folder)
        self.defaults = effective_defaults(self.family, self.options, self.model if manifest is None else None)
        self.setup = {
            "folder": folder,
            "manifest": manifest,
            "sampler": sampler_from_folder(folder / "scheduler"),
            "footprint": folder_footprint(folder),
            "budget": memory_budget(self.memory_gb),
        }

    def _load(self, shot_id: str) -> Iterator[Event]:
        """Load transformer (converted or not), VAE decoder, text encoder and tokenizer once."""
        from daotai.mlx.convert import load_converted_transformer
        from daotai.mlx.pipeline import load_text_encoder, load_tokenizer, load_transformer, load_vae_decoder

        assert self.setup is not None
        folder, manifest = self.setup["folder"], self.setup["manifest"]
        yield Progress("load", shot_id, 0, 1, f"loading {self.model}")
        started = time.perf_counter()
        if manifest is not None:
            transformer = load_converted_transformer(folder, self.verify_source)
            what = f"{manifest['bits']}-bit group {manifest['group_size']}"
        else:
            transformer = load_transformer(folder / "transformer")
            what = "float32"
        self.parts = {
            "transformer": transformer,
            "vae": load_vae_decoder(folder / "vae"),
            "text_encoder": load_text_encoder(folder / "text_encoder"),
            "tokenizer": load_tokenizer(folder / "tokenizer"),
        }
        self._load_text_encoder = lambda: load_text_encoder(folder / "text_encoder")
        yield Progress("load", shot_id, 1, 1, f"loaded in {time.perf_counter() - started:.1f} s")
        yield Notice("info", f"{self.name}: {folder.name}, transformer {what}, text encoder and VAE float32", shot_id)

    def _embed(self, prompts: list[str]):
        """Prompts -> (B, max_len, d_model) embeddings with padding rows zeroed."""
        from daotai.mlx.text_encoder import wan_prompt_embeds

        assert self.parts is not None and self.defaults is not None
        if self.parts["text_encoder"] is None:  # freed by the lean tier after the last shot
            self.parts["text_encoder"] = self._load_text_encoder()
        ids, mask = self.parts["tokenizer"].encode(prompts, self.defaults.max_sequence_length)
        return wan_prompt_embeds(self.parts["text_encoder"], ids, mask)

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/denoise/decode progress, then exactly ``job.shot.frames`` frames."""
        import mlx.core as mx

        from daotai.mlx.memory import check_plan, fmt_bytes
        from daotai.mlx.pipeline import SampleSettings, decode_to_uint8, denoise, initial_latents

        plan, shot = job.plan, job.shot
        if self.setup is None:
            self._prepare()
        assert self.setup is not None and self.defaults is not None
        d = self.defaults
        request = native_request(plan, shot, d)
        budget = self.setup["budget"]
        extra = self._extra_latent_frames(job)  # conditioning frames in front of the video's latents
        # refuse before loading (first shot) or before sampling (later shots) when it would swap
        need = check_plan(self.setup["footprint"], request.width, request.height, request.frames, budget,
                          d.native_fps, self.name, TEMPORAL * extra)
        if self.parts is None:
            yield from self._load(shot.shot_id)
        assert self.parts is not None
        if self.owed_lean is not None:
            yield Notice("warning", f"memory tier {self.tier} -> lean for this and later shots: {self.owed_lean}",
                         shot.shot_id)
            self.tier, self.owed_lean = "lean", None
        compute = self._computed_steps(d.steps)
        if compute is not None:
            yield Notice("info", f"{self.name} speed fast: the transformer runs on {sum(compute)} of {d.steps} steps "
                                 "(step cache)", shot.shot_id)
        sampler, shift = self.setup["sampler"], d.shift or 3.0
        # like the torch wan backend, daotai's per-model shift (or --shift) wins over the folder's
        differs = sampler.folder_shift is not None and abs(sampler.folder_shift - shift) > 1e-9
        note = f" (the folder's scheduler says {sampler.folder_shift:g})" if differs else ""
        yield Notice("info", f"{self.name}: sampler {sampler.describe()}; {d.steps} steps, shift {shift:g}{note}; "
                     f"estimated peak {fmt_bytes(need)} of {fmt_bytes(budget.bytes)} ({budget.source})", shot.shot_id)
        ctx.check()
        model = yield from self._shot_model(job, ctx, request)
        cond = self._embed([request.prompt])
        uncond = self._embed([request.negative_prompt]) if d.guidance > 1.0 else None
        if self.tier == "lean":  # the embeddings are made: free the text encoder until the next shot
            self.parts["text_encoder"] = None
            mx.clear_cache()
        shape = (1, 16, extra + (request.frames - 1) // TEMPORAL + 1, request.height // SPATIAL,
                 request.width // SPATIAL)
        latents = initial_latents(request.seed, shape)
        settings = SampleSettings(steps=d.steps, guidance=d.guidance, shift=shift, sampler=sampler, compute=compute)
        last, pace = time.perf_counter(), GlimpsePace(ctx)
        samples: list[tuple[str, dict]] = []
        if ctx.glimpse_every_s is not None:
            self.live_picture.recall()
        for i, stepped, estimate in denoise(model, latents, cond, uncond, settings):
            latents = stepped
            if i + 1 == (d.steps + 1) // 2:  # halfway through denoising the machine is at full load
                samples.append(("mid-denoise", self._sample_health()))
            now = time.perf_counter()
            yield Progress("denoise", shot.shot_id, i + 1, d.steps, f"step {i + 1}/{d.steps} {now - last:.2f} s")
            last = now
            if pace.due():
                shown = self.live_picture.picture(estimate[:, :, extra:], shot.frames)  # MLX computes it here
                if shown is not None:
                    pace.shown()
                    yield Glimpse(shot.shot_id, shown[0], shown[1], i + 1, d.steps)
            ctx.check()  # cancellation between steps
        yield Progress("decode", shot.shot_id, 0, 1, "decoding")
        native = decode_to_uint8(self.parts["vae"], latents[:, :, extra:])  # (F, H, W, 3) uint8
        if ctx.glimpse_every_s is not None:
            self.live_picture.learn(latents[:, :, extra:], native)
        mx.clear_cache()
        yield Progress("decode", shot.shot_id, 1, 1)
        samples.append(("after decode", self._sample_health()))
        yield from self._judge_health(shot.shot_id, samples)
        if len(native) != request.frames:
            raise BackendError(f"{shot.shot_id}: decoded {len(native)} frames, expected {request.frames}")
        notice = retime_notice(request, plan, shot)
        if notice is not None:
            yield notice
        yield from plan_frames(native, request, plan, shot)
        yield Progress("render", shot.shot_id, shot.frames, shot.frames)

    def _extra_latent_frames(self, job: RenderJob) -> int:
        """Latent frames the model is given in front of the video's (none here; VACE's reference images)."""
        return 0

    def _shot_model(self, job: RenderJob, ctx: RunContext, request) -> Iterator[Event]:
        """Yield events of preparing the shot's conditioning; return the callable the sampler steps with
        (latents, timestep, text) -> velocity. Here: the text-to-video transformer itself."""
        yield from ()
        assert self.parts is not None
        return self.parts["transformer"]

    @property
    def spec(self) -> BackendSpec:
        """This backend's registry row (a subclass answers with its own)."""
        return SPEC

    def _computed_steps(self, steps: int) -> tuple[bool, ...] | None:
        """Which steps run the transformer in this speed mode (None: every step)."""
        from daotai.render.speed import computed_steps, levers_for

        # The step cache is the device-agnostic lever. The generic cadence, not Wan's own: Wan's (one
        # step in four after a tenth, the guidance pass on every other) was measured on CUDA with its
        # guidance reuse, which this sampler, skipping whole steps only, does not do; Wan's interval
        # without that reuse has not been measured on an MLX render.
        config = levers_for(self.options.speed, "mps", self.spec.fast_choices_family)
        if not config.cache:
            return None
        return tuple(computed_steps(steps, config))

    def _sample_health(self) -> dict:
        """One health sample; {} when it fails (telemetry never fails a render)."""
        try:
            return dict(self.health(None) or {})
        except Exception:  # noqa: BLE001  (an injected or platform sampler may raise anything)
            return {}

    def _judge_health(self, shot_id: str, samples: list[tuple[str, dict]]) -> Iterator[Event]:
        """The shot's tier and health samples as notices; with --adaptive a critical one makes the next shot lean."""
        from daotai.runtime.health import assess, combine, format_sample

        yield Notice("info", f"memory tier {self.tier}", shot_id)
        for when, sample in samples:
            if sample:
                yield Notice("info", f"health {when}: {format_sample(sample)}", shot_id)
        status = combine(assess(sample) for _, sample in samples)
        if status.level == "ok":
            return
        if status.critical and self.options.adaptive and self.tier != "lean":
            self.owed_lean = f"health critical after {shot_id}"
            advice = "--adaptive: the next shot runs at memory tier lean"
        elif status.critical and not self.options.adaptive:
            advice = "run with --adaptive to free the text encoder between shots"
        else:
            advice = ""
        yield Notice("warning", status.describe() + (f"; {advice}" if advice else ""), shot_id)

    def close(self) -> None:
        """Drop the models."""
        self.parts = None
        self.setup = None


def mlx_health_sample(_runtime: Any = None) -> dict[str, Any]:
    """MLX's peak memory and, on a Mac, the system's memory pressure and thermal state."""
    from daotai.runtime.health import macos_sample

    sample: dict[str, Any] = {}
    try:
        import mlx.core as mx

        peak = mx.get_peak_memory() if hasattr(mx, "get_peak_memory") else mx.metal.get_peak_memory()
        sample["peak_allocated_gib"] = round(peak / 1024**3, 2)
    except Exception:  # noqa: BLE001  (an MLX build without the counter: the other fields still help)
        pass
    sample.update(macos_sample())
    return sample


SPEC = BackendSpec(
    name="wan-mlx",
    factory="daotai.render.wan_mlx:WanMLXBackend",
    options=WanMLXOptions,
    summary="Wan2.1 text-to-video in MLX (Apple Silicon GPU; the CPU elsewhere)",
    family="wan",
    general_fast_choices=True,  # the general cadence (see WanMLXBackend._computed_steps)
    device_class="apple",
    default_model="wan2.1-t2v-1.3b",
)
