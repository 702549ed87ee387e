"""`h3-mlx` backend: MiniMax-H3 with its transformer, sampler and decoders in MLX (Apple Silicon; Linux CPU too).

The script path is the `h3` backend's own (:class:`~daotai.render.h3.H3Backend`, reused whole): the
same workflow choice per shot, previz video and character pictures as references, voices, the
prompt with its dialogue and sound, 17n+5 segments continued from the previous segment's last
frame, the sound delivered as the shot's :class:`~daotai.events.Audio` and every decision a
Notice. Only the generation itself differs:

1. **Conditioning in torch, on the CPU (or MPS on a Mac).** The Qwen3-VL conditioner and the VAE
   encoders (keyframes, picture and video references, voices) run through diffusers' own
   MiniMax-H3 blocks up to, not including, the denoising loop: presentation, encoding, the
   packed layout and the noise. Why torch: the conditioner reads Qwen3-VL's vision tower with its
   interleaved multimodal RoPE and deepstack features for 50 decoder layers; no MLX port of it
   matched transformers' outputs here, and a second implementation of the encoders would only
   add a place for the two backends to disagree. The cost is memory: the conditioner is 33.3 B
   parameters at 16 bits (66.6 GB), so it is released before denoising whenever it and the
   transformer do not fit together (the planner decides, before anything loads), and the Mac
   table counts it at 16 bits.
2. **Denoising and decoding in MLX**: :func:`daotai.mlx.h3_generate.generate_packed` over the
   partition the workflow reads (``transformer`` for t2va/fl2va, ``transformer_ref`` for
   ref2va; only one is kept loaded), at float32 on the CPU, bfloat16 on a Mac, or 4/8-bit from a
   folder written by ``daotai models convert minimax-h3 --to mlx``.

Noise: the preparation blocks draw it from torch's CPU generator seeded with the shot's seed
(plus the segment index), as the `h3` backend's pipeline does, so on a CPU the two backends start
from the same noise and their outputs agree to float32 rounding (tests/test_h3_mlx_backend.py).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import numpy as np
from pydantic import Field, field_validator

from daotai import catalog
from daotai.errors import BackendError
from daotai.events import Event, Glimpse, Notice, Progress
from daotai.plan.model import Plan
from daotai.plan.prompt import h3_pictures, h3_workflow
from daotai.render.av_segments import Result
from daotai.render.base import GlimpsePace, RunContext
from daotai.render.h3 import H3Backend
from daotai.render.h3_options import FAMILY, TURBO_ALPHA_HELP, TURBO_HELP, checked_turbo, lora_files
from daotai.render.h3_runner import Generation, canvas_for
from daotai.render.neural.latent_preview import KeptPicture, frame_for
from daotai.render.spec import BackendEnv, BackendSpec, NeuralOptions

# What the conditioning stage loads: everything but the transformer partitions.
CONDITIONING_COMPONENTS = ("text_encoder", "tokenizer", "processor", "vae", "audio_vae", "scheduler",
                           "audio_scheduler")
PARTITION = {"t2va": "transformer", "fl2va": "transformer", "ref2va": "transformer_ref"}
# The preparation state the MLX loop reads, by the names diffusers' blocks give it.
PREPARED = ("prompt_embeds", "latents", "audio_latents", "position_ids", "token_tags", "video_indices",
            "audio_indices", "text_indices", "num_condition_video_rows", "num_condition_audio_rows",
            "num_latent_frames", "latent_height", "latent_width")


class H3MLXOptions(NeuralOptions):
    """Options of the `h3-mlx` backend (no torch device, offload or speed levers: MLX places nothing)."""

    workflow: Literal["auto", "t2va", "fl2va", "ref2va"] = Field(
        "auto", description="auto: ref2va for camera moves or characters with looks, else t2va; or force one")
    accept_licence: bool = Field(False, description="accept the model's licence (shown when refused); recorded once")
    steps: int | None = Field(None, ge=2, le=1000, description="sigma points (steps - 1 transformer forwards; None: 50)")
    guidance: None = Field(None, description="not used: MiniMax-H3 is guidance-distilled (one forward per step)")
    max_sequence_length: None = Field(None, description="not used: MiniMax-H3's prompt budget is the h3 family's")
    shift: float | None = Field(None, gt=0.0, le=50.0, description="the video schedule's flow shift (None: the "
                                                                     "folder's 12, or a turbo's own)")
    segment_seconds: float | None = Field(
        None, description="longest generation a long shot is split into (None: the model's longest, 15 s)")
    memory_gb: float | None = Field(None, gt=0.0, description="memory budget in GB (default: the GPU working set)")
    conditioner_device: Literal["auto", "cpu", "mps"] = Field(
        "auto", description="where the torch conditioner and VAE encoders run (auto: mps on a Mac, else cpu)")
    verify_source: bool = Field(False, description="re-hash a converted folder's source weights before loading")
    carry_looks: bool = Field(
        False, description="carry each character's best-seen frame of the finished shots into later shots as an "
                           "extra picture reference (as the h3 backend's carry_looks)")
    turbo: str | None = Field(None, description=TURBO_HELP + "; fused into the MLX weights (quantised ones are "
                                                             "quantised again) when the partition loads")
    turbo_alpha: float | None = Field(None, ge=-4.0, le=4.0, description=TURBO_ALPHA_HELP)

    @field_validator("turbo")
    @classmethod
    def _turbo_is_a_file_or_a_known_name(cls, value: str | None) -> str | None:
        """Refuse an unknown turbo name or a missing / pickled file when the options are read."""
        return checked_turbo(value)

    def shots_depend_on_earlier(self) -> bool:
        """Carried looks come from the shots rendered before."""
        return self.carry_looks

    @field_validator("segment_seconds")
    @classmethod
    def _segment_within_the_models_range(cls, value: float | None) -> float | None:
        """A segment is one generation: it must lie within the lengths MiniMax-H3 generates."""
        snap = catalog.family(FAMILY).snap
        if value is not None and not (snap.min_seconds or 0.0) <= value <= (snap.max_seconds or 0.0):
            raise ValueError(f"must lie within MiniMax-H3's {snap.min_seconds:g}-{snap.max_seconds:g} s generations")
        return value


@dataclass(frozen=True)
class _Runtime:
    """What the shared script path asks of a runtime: its kind (never "cuda" here)."""

    kind: str = "mlx"


@dataclass(frozen=True)
class H3Source:
    """Where a MiniMax-H3 request's parts come from: the diffusers folder, and a converted one if any."""

    folder: Path  # the diffusers MiniMax-H3 folder (conditioner, VAEs, schedulers, index)
    converted: Path | None  # the folder written by `daotai models convert minimax-h3 --to mlx`
    manifest: dict | None

    @property
    def bits(self) -> int:
        """The transformer's bit width: the conversion's, else 16 (the checkpoint's bfloat16)."""
        return int(self.manifest["bits"]) if self.manifest is not None else 16


def conditioning_blocks(workflow: str) -> Any:
    """diffusers' MiniMax-H3 blocks of ``workflow`` up to the denoising loop (presentation, encoders, layout, noise)."""
    from diffusers.modular_pipelines import SequentialPipelineBlocks
    from diffusers.modular_pipelines.minimax_h3 import modular_blocks_minimax_h3 as blocks

    core = {"t2va": blocks.MiniMaxH3CoreDenoiseStep, "fl2va": blocks.MiniMaxH3FL2VACoreDenoiseStep,
            "ref2va": blocks.MiniMaxH3Ref2VACoreDenoiseStep}[workflow]
    chosen: dict[str, Any] = {"before_encode": blocks.MiniMaxH3AutoBeforeEncodeStep,
                              "text_encoder": blocks.MiniMaxH3AutoTextEncoderStep,
                              "vae_encoder": blocks.MiniMaxH3AutoVaeEncoderStep}
    for name, block in zip(core.block_names, core.block_classes, strict=True):
        if name == "set_timesteps":  # the schedules and the loop are MLX's
            break
        chosen[name] = block
    return SequentialPipelineBlocks.from_blocks_dict(chosen)


def packed_request(state: dict[str, Any], channels: int) -> Any:
    """The preparation blocks' outputs as the MLX loop's :class:`~daotai.mlx.h3_generate.PackedRequest`."""
    from daotai.mlx.h3_generate import PackedRequest
    from daotai.mlx.h3_layout import PackedRows

    def array(name: str) -> np.ndarray:
        return state[name].detach().cpu().float().numpy() if state[name].is_floating_point() else \
            state[name].detach().cpu().numpy()

    rows = PackedRows(state["position_ids"].detach().cpu().double().numpy(), array("token_tags").astype(np.int64),
                      array("video_indices").astype(np.int64), array("audio_indices").astype(np.int64),
                      array("text_indices").astype(np.int64), int(state["num_condition_video_rows"]),
                      int(state["num_condition_audio_rows"]))
    geometry = (channels, int(state["num_latent_frames"]), int(state["latent_height"]), int(state["latent_width"]))
    return PackedRequest(rows, array("latents"), array("audio_latents"), array("prompt_embeds"), geometry)


class H3MLXRunner:
    """The conditioning pipeline (torch) and the MLX transformer partitions and decoders, kept between shots.

    Offers what :class:`~daotai.render.h3.H3Backend` asks of its runner: ``ensure``, ``canvas``,
    ``generate_h3``, the health hooks and ``close``.
    """

    def __init__(self, options: H3MLXOptions, default_model: str, health: Callable[[Any], dict] | None = None):
        from daotai.render.wan_mlx import mlx_health_sample

        self.options = options
        self.model = options.model or default_model
        self.runtime = _Runtime()
        self.health = health or mlx_health_sample
        self.adaptations: list[str] = []  # a turbo fused while a partition loads (quantisation is the conversion's)
        self.turbo: Any = None  # daotai.render.neural.turbo.Turbo once resolved (ensure); the backend reads it
        self.turbo_alpha = 1.0  # strength the turbo LoRA is fused at
        self.speed_config = None
        # "resident": conditioner and partition stay loaded; "release": one at a time (the conditioner freed before
        # each denoise, the partition before the conditioner loads again), as the planner's phases count them
        self.tier: str | None = None
        self.tier_reason = ""
        self.source: H3Source | None = None
        self.defaults: Any = None
        self.pipe: Any = None  # the torch conditioning pipeline (None while released)
        self.canvas_multiple: int | None = None
        self.shifts: tuple[float, float] | None = None  # (video, audio) from the folder's schedulers
        self.partitions: dict[str, Any] = {}  # partition name -> H3Transformer (one at a time)
        self.decoders: tuple[Any, Any] | None = None  # MLX (video, audio) decoders
        self.resolved: Any = None
        self.conditioner_runtime: Any = None  # the torch runtime the conditioner runs on
        self._prepared: dict[str, Any] = {}  # workflow -> diffusers' blocks up to the loop, on the loaded components
        # the live view's picture of a shot while it denoises: a map from latents to colour, fitted on the
        # shots this model decodes and kept in the user's cache folder (daotai.render.neural.latent_preview)
        self.live_picture = KeptPicture(f"h3-mlx:{self.model}")

    # -------------------------------------------------------------- before loading

    def _resolve(self) -> H3Source:
        """The model folder (a registry name through the store, a diffusers folder, or a converted one)."""
        from daotai.mlx.h3_convert import h3_source
        from daotai.runtime.model_lookup import resolve_model

        path = Path(self.model).expanduser()
        if path.is_dir():
            folder, converted, manifest = h3_source(path, self.options.verify_source)
        else:
            folder, converted, manifest = resolve_model(self.model).path, None, None
        self.resolved = resolve_model(str(folder))
        return H3Source(folder, converted, manifest)

    def check(self, workflows: set[str]) -> None:
        """Refuse before loading when a folder lacks what the plan's workflows need."""
        from daotai.runtime.model_checks import check_model_folder

        assert self.source is not None
        spec = self.resolved.spec if self.resolved is not None else None
        pull = f"pull them: daotai models pull {spec.name}" if spec is not None else "copy the model's whole folder again"
        partitions = {PARTITION[w] for w in workflows}
        need = CONDITIONING_COMPONENTS + (() if self.source.converted is not None else tuple(sorted(partitions)))
        check_model_folder(self.source.folder, FAMILY, need,
                           missing_hint=f"the shots need the {', '.join(sorted(workflows))} workflow(s); {pull}")
        if self.source.converted is not None:
            have = set(self.source.manifest.get("partitions", ()))
            missing = sorted(partitions - have)
            if missing:
                bits = self.source.bits
                raise BackendError(
                    f"{self.source.converted}: converted without {', '.join(missing)}, which the "
                    f"{', '.join(sorted(workflows))} workflow(s) need; convert again with both partitions: daotai "
                    f"models convert {self.source.folder} --to mlx --bits {bits} -o <new folder>")

    def canvas(self, plan: Plan) -> tuple[int, int]:
        """The canvas the model generates the plan's shots at (the folder's canvas settings, the VAE's multiple)."""
        from daotai.runtime.model_checks import config_of, read_model_index

        canvas = catalog.family(FAMILY).canvas
        assert canvas is not None and self.source is not None
        settings = config_of(read_model_index(self.source.folder))
        short_edge = int(settings.get("canvas_short_edge", canvas.short_edge))
        if self.turbo is not None and self.turbo.sampling.short_edge is not None:
            short_edge = self.turbo.sampling.short_edge  # a turbo runs at the canvas it was distilled at
        max_pixels = int(settings.get("canvas_max_pixels", canvas.max_pixels))
        multiple = self.canvas_multiple or catalog.family(FAMILY).snap.size_multiple
        return canvas_for(plan.width, plan.height, short_edge, max_pixels, multiple)

    def _check_memory(self, plan: Plan, planned: set[str], frames: int, shot_id: str) -> Iterator[Event]:
        """Refuse before loading when the plan's largest generation would not fit; decide whether the
        conditioner stays loaded beside the transformer or is released before each denoise."""
        from daotai.mlx.h3_check import TORCH_CONDITIONER_BITS
        from daotai.mlx.h3_memory import PIXELS_PER_TOKEN_EDGE, check_h3_budget, folder_h3_sizes
        from daotai.mlx.memory import fmt_bytes, memory_budget

        assert self.source is not None
        canvas = self.canvas(plan)
        # the planner counts whole 32-pixel tokens: a folder with a finer canvas multiple is planned rounded up
        width, height = (-(-side // PIXELS_PER_TOKEN_EDGE) * PIXELS_PER_TOKEN_EDGE for side in canvas)
        sizes = folder_h3_sizes(self.source.folder, self.source.converted)
        group = int(self.source.manifest["group_size"]) if self.source.manifest is not None else 64
        workflow = "ref2va" if "ref2va" in planned else "fl2va" if "fl2va" in planned else "t2va"
        pictures = max((len(h3_pictures(s)) for s in plan.shots
                        if h3_workflow(plan, s, self.options.workflow)[0] == "ref2va"), default=0)
        budget = memory_budget(self.options.memory_gb)
        estimate = check_h3_budget(self.source.bits, width, height, budget.bytes, budget.source, frames, workflow,
                                   pictures, conditioner_bits=TORCH_CONDITIONER_BITS, sizes=sizes, group_size=group)
        phases = dict(estimate.phases)
        together = phases["encode"] + estimate.transformer_bytes
        if together <= budget.bytes:
            self.tier = "resident"
            self.tier_reason = f"conditioner and transformer together ~{fmt_bytes(together)}"
        else:
            self.tier = "release"
            self.tier_reason = (f"conditioner and transformer together ~{fmt_bytes(together)} exceed the budget: the "
                                "conditioner is freed before each denoise and loaded again for the next generation")
        yield Notice("info", f"h3-mlx: estimated peak {fmt_bytes(estimate.peak_bytes)} of {fmt_bytes(budget.bytes)} "
                             f"({budget.source}) for {workflow} at {width}x{height}, {frames} frames, transformer "
                             f"{self.source.bits}-bit, conditioner {TORCH_CONDITIONER_BITS}-bit; {self.tier_reason}", shot_id)

    # -------------------------------------------------------------- loading

    def ensure(self, plan: Plan, planned: set[str], workflows: set[str], shot_id: str, frames: int) -> Iterator[Event]:
        """Check the folders and the memory for every planned workflow before anything loads, then load
        what ``workflows`` need (``frames``: the plan's longest generation)."""
        from daotai.mlx import require_mlx
        from daotai.render.neural.request import effective_defaults

        require_mlx("the h3-mlx backend")
        if self.source is None:
            self.source = self._resolve()
            self.defaults = self._with_turbo(effective_defaults(
                FAMILY, self.options, self.model if self.source.converted is None else None), set(planned) | set(workflows))
            self.check(set(planned) | set(workflows))
            yield from self._check_memory(plan, set(planned) | set(workflows), frames, shot_id)
        if self.pipe is None:
            self._free_partitions_to_encode()
            yield from self.load_conditioner(shot_id)
        if self.decoders is None:
            yield from self._load_decoders(shot_id)
        if self.tier == "resident":  # else each generation loads its partition once the conditioner is freed
            for workflow in sorted(workflows):
                yield from self._load_partition(PARTITION[workflow], shot_id)

    def _with_turbo(self, defaults: Any, workflows: set[str]) -> Any:
        """With ``-O turbo=``: the steps and shift it was distilled for (a user's ``steps`` overrides them, said in
        a notice); refuses a plan whose workflows run a partition the turbo is not for."""
        if self.options.turbo is None:
            return defaults
        from daotai.render.neural.turbo import check_turbo_covers, resolve_turbo, turbo_defaults

        self.turbo = resolve_turbo(self.options.turbo, self.options.steps, self.options.shift)
        check_turbo_covers(self.turbo, workflows, FAMILY)
        chosen, self.turbo_alpha, notes = turbo_defaults(defaults, self.turbo, self.options.steps, self.options.shift,
                                                         self.options.turbo_alpha)
        self.adaptations += notes
        return chosen

    def _fuse_turbo(self, name: str, model: Any) -> None:
        """Fold the turbo LoRA into a freshly loaded partition it is for."""
        from daotai.render.neural.lora import h3_lora_state
        from daotai.render.neural.lora_mlx import fuse_lora_mlx
        from daotai.render.neural.turbo import partitions_for

        if self.turbo is None or name not in partitions_for(self.turbo):
            return
        state, prefix = h3_lora_state(self.turbo.lora, name)
        changed = fuse_lora_mlx(model, state, prefix, self.turbo_alpha, self.turbo.lora.path.name)
        self.adaptations.append(f"{name}: turbo {self.turbo.label} fused at alpha {self.turbo_alpha:g}: {changed} "
                                "layers")

    def load_conditioner(self, shot_id: str | None = None) -> Iterator[Event]:
        """Load the torch conditioning components (conditioner, tokenizer, processor, VAEs, schedulers)."""
        from daotai.runtime.device import resolve_runtime
        from daotai.runtime.model_loading import load_components, modular_pipeline

        assert self.source is not None
        started = time.perf_counter()
        yield Progress("load", shot_id, 0, 1, "loading the conditioner (torch)")
        device = self.options.conditioner_device
        if device == "auto":
            from daotai.mlx.memory import is_apple_silicon

            device = "mps" if is_apple_silicon() else "cpu"
        runtime = resolve_runtime(device)
        pipe = modular_pipeline(self.resolved, FAMILY, CONDITIONING_COMPONENTS)
        load_components(pipe, self.resolved, FAMILY, runtime, CONDITIONING_COMPONENTS)
        pipe.to(runtime.device)
        pipe.set_progress_bar_config(disable=True)
        self.pipe = pipe
        self.conditioner_runtime = runtime
        self.canvas_multiple = int(pipe.canvas_multiple)
        self.shifts = (float(pipe.scheduler.config.shift), float(pipe.audio_scheduler.config.shift))
        self._prepared: dict[str, Any] = {}
        yield Progress("load", shot_id, 1, 1, f"conditioner loaded in {time.perf_counter() - started:.1f} s")
        if shot_id is not None:
            yield Notice("info", f"h3-mlx: conditioner and VAE encoders on {runtime.device} (torch "
                                 f"{runtime.dtype('text_encoder')}); memory tier {self.tier}: {self.tier_reason}",
                         shot_id)

    def ensure_conditioner(self) -> None:
        """Load the conditioner again if it was released (its audio VAE's rate is read for voices); at tier
        release the transformer partition goes first, as the planner's encode phase counts it absent."""
        if self.pipe is None:
            self._free_partitions_to_encode()
            for _ in self.load_conditioner():
                pass

    def _free_partitions_to_encode(self) -> None:
        """At tier release, drop the transformer partition before the conditioner loads again."""
        if self.tier == "release" and self.partitions:
            import mlx.core as mx

            self.partitions = {}
            gc.collect()
            mx.clear_cache()

    def release_conditioner(self) -> None:
        """Free the torch conditioning pipeline (before denoising, when the plan says both do not fit)."""
        self.pipe = None
        self._prepared = {}
        gc.collect()

    def _load_decoders(self, shot_id: str) -> Iterator[Event]:
        """The MLX video and audio decoders (float32: the audio one degrades audibly in bfloat16)."""
        from daotai.mlx.h3_audio_vae import load_h3_audio_decoder
        from daotai.mlx.h3_video_vae import load_h3_video_clip_decoder

        assert self.source is not None
        self.decoders = (load_h3_video_clip_decoder(self.source.folder / "vae"),
                         load_h3_audio_decoder(self.source.folder / "audio_vae"))
        yield from ()

    def _load_partition(self, name: str, shot_id: str) -> Iterator[Event]:
        """Load one transformer partition in MLX, dropping the other first (the planner never counts both)."""
        import mlx.core as mx

        from daotai.mlx.h3_convert import load_converted_partition
        from daotai.mlx.h3_transformer import load_h3_transformer

        assert self.source is not None
        if name in self.partitions:
            return
        if self.partitions:
            dropped = ", ".join(sorted(self.partitions))
            self.partitions = {}
            gc.collect()
            mx.clear_cache()
            yield Notice("info", f"h3-mlx: unloaded {dropped} to make room for {name} (shots grouped by workflow "
                                 "load fewer partitions)", shot_id)
        started = time.perf_counter()
        yield Progress("load", shot_id, 0, 1, f"loading {name} (MLX)")
        if self.source.converted is not None:
            model = load_converted_partition(self.source.converted, name, self.source.manifest)
            what = f"{self.source.bits}-bit group {self.source.manifest['group_size']}"
        else:
            # bfloat16 as published on a Mac's GPU; float32 on a CPU, which has no fast bfloat16 matmul
            dtype = mx.float32 if mx.default_device() == mx.cpu else mx.bfloat16
            model = load_h3_transformer(self.source.folder / name, dtype)
            what = "float32" if dtype == mx.float32 else "bfloat16"
        self._fuse_turbo(name, model)
        self.partitions[name] = model
        yield Progress("load", shot_id, 1, 1, f"loaded in {time.perf_counter() - started:.1f} s")
        yield Notice("info", f"h3-mlx: {name} from {(self.source.converted or self.source.folder).name} in MLX "
                             f"({what}), video and audio decoders float32", shot_id)

    # -------------------------------------------------------------- one generation

    def forwards(self) -> int:
        """Transformer passes per generation: the schedule's ``steps`` sigma points end at 0."""
        return max(1, self.defaults.steps - 1)

    def _prepare(self, generation: Generation) -> Any:
        """Run diffusers' blocks up to the denoising loop for one generation: the packed request."""
        from daotai.runtime.device import generator_for
        from daotai.runtime.model_checks import config_of, read_model_index

        self.ensure_conditioner()
        blocks = self._prepared.get(generation.workflow)
        if blocks is None:
            import diffusers

            assert self.source is not None
            index = read_model_index(self.source.folder)
            settings = {"_class_name": index["_class_name"], **config_of(index)}
            blocks = diffusers.MiniMaxH3ModularPipeline(blocks=conditioning_blocks(generation.workflow),
                                                        modular_config_dict=settings)
            wanted = {spec.name for spec in blocks.blocks.expected_components}  # only what this workflow reads
            blocks.update_components(**{n: getattr(self.pipe, n) for n in CONDITIONING_COMPONENTS if n in wanted})
            blocks.set_progress_bar_config(disable=True)
            self._prepared[generation.workflow] = blocks
        state = blocks(prompt=generation.prompt, num_frames=generation.frames, height=generation.height,
                       width=generation.width, generator=generator_for(generation.seed), output=list(PREPARED),
                       **generation.inputs)
        return packed_request(state, int(self.pipe.vae_latent_channels))

    def generate_h3(self, shot: Any, generation: Generation, ctx: RunContext) -> Iterator[Event | tuple]:
        """Condition (torch), denoise and decode (MLX) one generation; ends with ("result", Result)."""
        import mlx.core as mx

        from daotai.mlx.h3_generate import generate_packed

        assert self.decoders is not None and self.shifts is not None
        yield Progress("encode", shot.shot_id, 0, 1, f"conditioning ({generation.workflow})")
        request = self._prepare(generation)
        yield Progress("encode", shot.shot_id, 1, 1)
        if self.tier == "release":
            self.release_conditioner()
        partition = PARTITION[generation.workflow]
        if partition not in self.partitions:
            yield from self._load_partition(partition, shot.shot_id)
        transformer = self.partitions[partition]
        video_decoder, audio_decoder = self.decoders
        video_shift = self.defaults.shift if self.defaults.shift is not None else self.shifts[0]  # a turbo's
        steps = generate_packed(transformer, video_decoder, audio_decoder, request, self.defaults.steps,
                                video_shift, self.shifts[1])
        live = ctx.glimpse_every_s is not None
        if live:
            self.live_picture.recall()
        patch = tuple(transformer.cfg.patch_size)
        last, pace, estimate = time.perf_counter(), GlimpsePace(ctx), None
        while True:
            ctx.check()  # cancellation between steps
            try:
                i, passes, latest = next(steps)
            except StopIteration as done:
                out = done.value
                break
            estimate = latest if live else None  # unread, MLX never computes it
            now = time.perf_counter()
            yield Progress("denoise", shot.shot_id, i + 1, passes, f"step {i + 1}/{passes} {now - last:.2f} s")
            last = now
            if pace.due():
                glimpse = self._glimpse(estimate, request.latent_shape, patch, shot, i + 1, passes)
                if glimpse is not None:
                    pace.shown()
                    yield glimpse
            if i + 1 == passes:
                yield Progress("decode", shot.shot_id, 0, 1, "decoding")
        mx.clear_cache()
        yield Progress("decode", shot.shot_id, 1, 1)
        frames = np.clip(np.round(out.frames * 255.0), 0, 255).astype(np.uint8)  # (F, H, W, 3) uint8
        if estimate is not None:  # after the last step: the final rows, against the frames they decoded to
            try:
                final = rows_as_latents(estimate, request.latent_shape, patch)
            except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
                final = None
            self.live_picture.learn(final, frames)
        yield ("result", Result(frames, out.audio.astype(np.float32), int(out.sample_rate)))

    # -------------------------------------------------------------- live picture

    def _glimpse(self, estimate: Any, shape: tuple[int, int, int, int], patch: tuple[int, ...], shot: Any,
                 step: int, steps: int) -> Glimpse | None:
        """The middle latent frame of the clean estimate through the map, or None (no map yet, or it does not fit)."""
        middle = shape[1] // 2
        try:  # only the middle frame's rows leave MLX: a few hundred kilobytes, not the whole clip
            latents = rows_as_latents(estimate, shape, patch, frame=middle)
        except Exception:  # noqa: BLE001  (a live picture is a courtesy: it never fails a render)
            return None
        shown = self.live_picture.picture(latents, 1) if latents is not None else None
        if shown is None:
            return None
        return Glimpse(shot.shot_id, frame_for(middle, shape[1], getattr(shot, "frames", 1)), shown[1], step, steps)

    # -------------------------------------------------------------- health

    def pay_owed_step(self, shot_id: str) -> Iterator[Event]:
        """Nothing is owed: MLX has no lower placement tier to step to (see ``judge_health``)."""
        yield from ()

    def sample_health(self) -> dict:
        """One health sample; {} when it fails (telemetry never fails a render)."""
        try:
            return dict(self.health(None) or {})
        except Exception:  # noqa: BLE001  (an injected or platform sampler may raise anything)
            return {}

    def judge_health(self, shot_id: str, samples: list[tuple[str, dict]], tier_before: str | None) -> Iterator[Event]:
        """The shot's tier and health samples as notices; a critical one moves later shots to releasing the
        conditioner before each denoise (the one lever a single memory pool has)."""
        from daotai.runtime.health import assess, combine, format_sample

        yield Notice("info", f"memory tier {self.tier}", shot_id)
        for when, sample in samples:
            if sample:
                yield Notice("info", f"health {when}: {format_sample(sample)}", shot_id)
        status = combine(assess(sample) for _, sample in samples)
        if status.level == "ok":
            return
        advice = ""
        if status.critical and self.tier == "resident":
            self.tier = "release"
            advice = "; the next generations free the conditioner before denoising"
        yield Notice("warning", status.describe() + advice, shot_id)

    def close(self) -> None:
        """Drop every model."""
        self.pipe = None
        self.partitions = {}
        self.decoders = None
        gc.collect()


def rows_as_latents(rows: Any, shape: tuple[int, int, int, int], patch: tuple[int, ...],
                    frame: int | None = None) -> np.ndarray | None:
    """A generation's target video rows (n, C * pt * ph * pw), MLX, as latents (1, C, T', H', W') float32 on
    the host; ``frame``: only that latent frame's rows (T' = 1). None when the rows are not that grid's."""
    import mlx.core as mx

    from daotai.mlx.h3_layout import unpatchify_video

    channels, frames, height, width = shape
    pt, ph, pw = patch
    if pt != 1 or height % ph or width % pw:
        return None
    per_frame = (height // ph) * (width // pw)
    if rows.ndim != 2 or rows.shape[0] != frames * per_frame:
        return None
    if frame is not None:
        rows, frames = rows[frame * per_frame:(frame + 1) * per_frame], 1
    return unpatchify_video(np.array(rows.astype(mx.float32))[None], channels, frames, height, width, patch)


class H3MLXBackend(H3Backend):
    """MiniMax-H3 through MLX: the `h3` backend's script path with :class:`H3MLXRunner` generating."""

    name = "h3-mlx"

    def __init__(self, options: H3MLXOptions | None = None, *, env: BackendEnv | None = None, **fields: Any):
        from daotai.mlx import require_mlx

        options = SPEC.validate_options(options if options is not None else fields)
        require_mlx("the h3-mlx backend")
        env = env or BackendEnv()
        self._start(options, H3MLXRunner(options, SPEC.default_model or "", env.health_sampler), env)

    def _voice(self, plan: Plan, character_id: str) -> Any:
        """A voice reference at the audio VAE's rate (the conditioner is loaded again if it was released)."""
        self.runner.ensure_conditioner()
        return super()._voice(plan, character_id)


SPEC = BackendSpec(
    name="h3-mlx",
    factory="daotai.render.h3_mlx:H3MLXBackend",
    options=H3MLXOptions,
    summary="MiniMax-H3 with its transformer and decoders in MLX (4/8-bit on Apple Silicon; the CPU elsewhere): "
            "video and stereo sound, guided by the previz and the characters' looks",
    family=FAMILY,
    device_class="apple",
    sound=True,
    default_model="minimax-h3",
    option_files=lora_files,
)
