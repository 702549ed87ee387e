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
:class:`~daotai.render.base.Audio` event cut to the shot's duration. Every decision (workflow and
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
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping

import numpy as np
from pydantic import Field, field_validator

from daotai import catalog
from daotai.errors import BackendError
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.prompt import H3_MAX_PICTURES, compose_h3_prompt, h3_pictures, h3_voices, h3_workflow
from daotai.plan.timing import Segment, frames_for, plan_segments
from daotai.render.base import Audio, Event, Frame, Notice, Progress, RenderJob, RunContext
from daotai.render.carry_looks import LookBook, best_looks, sample_indexes
from daotai.render.footage import describe_footage, shot_footage
from daotai.render.neural.references import CharacterPicture, character_picture
from daotai.render.neural.request import NativeRequest
from daotai.render.neural.retime import (
    INTERPOLATION_METHOD,
    interpolator_available,
    resize_rgb,
    retime_frames,
    to_uint8,
)
from daotai.render.neural.runner import DiffusersShotRunner
from daotai.render.neural.stepping import first_line, retry_a_tier_lower, run_steps
from daotai.render.spec import BackendEnv, BackendSpec, DiffusersOptions

FAMILY = "h3"
# Memory planning: an image reference is encoded at a 2048-pixel short edge, ~4096 tokens for a
# square picture, about what 12 frames of a 1344x768 video make (1008 tokens a latent frame, 3
# frames a latent in the footprint's count).
FRAMES_PER_PICTURE = 12
AUDIO_CROSSFADE_FRAMES = 1  # the frame two segments share: their sounds overlap (and are crossfaded) over it
MIN_REFERENCE_FRAMES = 22  # 17*1+5: the shortest video reference MiniMax-H3's VAE encodes without padding
VOICE_SECONDS = 20.0  # a voice recording is cut to its first seconds: enough to carry a voice, bounded in tokens


class H3Options(DiffusersOptions):
    """Options of the `h3` backend."""

    workflow: Literal["auto", "t2va", "fl2va", "ref2va"] = Field(
        "auto", description="auto: ref2va for camera moves or characters with looks, else t2va; or force one")
    accept_licence: bool = Field(False, description="accept the model's licence (shown when refused); recorded once")
    # MiniMax-H3's schedule holds `steps` sigma points ending at 0: steps - 1 forwards, so at least 2.
    steps: int | None = Field(None, ge=2, le=1000, description="sigma points (steps - 1 transformer forwards; None: 50)")
    # MiniMax-H3 is guidance-distilled and reads its prompt whole: these inherited options do not apply.
    guidance: None = Field(None, description="not used: MiniMax-H3 is guidance-distilled (one forward per step)")
    max_sequence_length: None = Field(None, description="not used: MiniMax-H3's prompt budget is the h3 family's")
    speed: Literal["off", "exact", "fast"] | None = Field(
        None, description="exact (default): attention kernel and compiled blocks | fast: also FP8 linears and a "
                          "step cache (approximate) | off: diffusers' own kernels")
    weights: Literal["bf16", "int8"] | None = Field(
        None, description="int8: the transformer's block weights stored as int8 rows (half the memory, "
                          "approximate, no faster) for cards that cannot hold bf16")
    lora: str | None = Field(None, description="a LoRA .safetensors file (or a folder holding one), fused into "
                                               "the weights when the partition loads")
    @field_validator("lora")
    @classmethod
    def _lora_is_a_safetensors_file(cls, value: str | None) -> str | None:
        """Refuse a missing or pickled LoRA when the options are read, not after the model has loaded."""
        if value is not None:
            path = Path(value).expanduser()
            if not (path.is_dir() or (path.is_file() and path.suffix == ".safetensors")):
                raise ValueError("must be an existing .safetensors file (pickled weights are never loaded) or a "
                                 "folder holding one")
        return value

    segment_seconds: float | None = Field(
        None, description="longest generation a long shot is split into (None: the model's longest, 15 s); shorter "
                          "segments need less memory per generation and make more joins")

    @field_validator("segment_seconds")
    @classmethod
    def _segment_within_the_models_range(cls, value: float | None) -> float | None:
        """A segment is one generation: it must lie within the lengths MiniMax-H3 generates."""
        snap = catalog.family(FAMILY).snap
        if value is not None and not (snap.min_seconds or 0.0) <= value <= (snap.max_seconds or 0.0):
            raise ValueError(f"must lie within MiniMax-H3's {snap.min_seconds:g}-{snap.max_seconds:g} s generations")
        return value

    carry_looks: bool = Field(
        False, description="carry each character's best-seen frame of the finished shots (large, frontal, sharp; "
                           "chosen from the plan's character masks) into later shots as an extra picture reference")
    lora_scale: float = Field(1.0, ge=-4.0, le=4.0, description="strength the LoRA is fused at")
    lora_partition: Literal["transformer", "transformer_ref", "both"] = Field(
        "transformer", description="which partition the LoRA is for: transformer (t2va, fl2va), "
                                   "transformer_ref (ref2va) or both")
    turbo: str | None = Field(None, description="a step-distilled LoRA (a .safetensors file, a folder holding one, "
                                                "or a catalog name such as h3-turbo-4step-768p) run with the steps, "
                                                "shift and alpha it was distilled for (steps/shift override them)")
    turbo_alpha: float | None = Field(None, ge=-4.0, le=4.0, description="strength the turbo LoRA is fused at "
                                                                         "(None: its own alpha)")

    @field_validator("turbo")
    @classmethod
    def _turbo_is_a_file_or_a_known_name(cls, value: str | None) -> str | None:
        """Refuse an unknown turbo name or a missing / pickled file when the options are read."""
        if value is None or catalog.turbo_row(value) is not None:
            return value
        path = Path(value).expanduser()
        if not (path.is_dir() or (path.is_file() and path.suffix == ".safetensors")):
            raise ValueError("must be an existing .safetensors file (pickled weights are never loaded), a folder "
                             f"holding one, or a catalog turbo ({', '.join(catalog.turbos())})")
        return value

    def shots_depend_on_earlier(self) -> bool:
        """Carried looks come from the shots rendered before."""
        return self.carry_looks


@dataclass(frozen=True)
class Generation:
    """What one pipeline call is asked for, and what the manifest should say about it."""

    workflow: str
    prompt: str
    frames: int
    width: int
    height: int
    seed: int
    inputs: dict  # references / image for the pipeline
    order: str  # the references in order, as recorded


@dataclass(frozen=True)
class Result:
    """One generation's output: (F, H, W, 3) uint8 frames at 24 fps and (C, N) float32 sound."""

    frames: np.ndarray
    audio: np.ndarray
    rate: int


# ------------------------------------------------------------------ small pure helpers


def canvas_for(width: int, height: int, short_edge: int, max_pixels: int, multiple: int) -> tuple[int, int]:
    """The model's canvas (width, height) for the script's size: its aspect ratio at the model's short edge."""
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import resolve_canvas_size

    try:
        canvas_h, canvas_w = resolve_canvas_size(width, height, multiple, short_edge, max_pixels)
    except ValueError as exc:
        raise BackendError(f"size: {width}x{height} cannot be generated by MiniMax-H3 ({exc})") from None
    return canvas_w, canvas_h


def decode_voice(path: Path, rate: int, max_seconds: float) -> np.ndarray:
    """An audio file's first ``max_seconds`` as (channels, N) float32 at ``rate`` (mono stays mono, more than two
    channels become stereo), resampled by FFmpeg so the pipeline needs no torchaudio."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.audio:
            raise ValueError("no audio stream")
        stream = container.streams.audio[0]
        layout = "mono" if stream.channels == 1 else "stereo"
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        parts: list[np.ndarray] = []
        limit = int(max_seconds * rate)
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                parts.append(out.to_ndarray())  # (channels, n) float32, planar
            if sum(p.shape[1] for p in parts) >= limit:
                break
        else:
            parts += [out.to_ndarray() for out in resampler.resample(None)]
    channels = 1 if layout == "mono" else 2
    samples = np.concatenate(parts, axis=1) if parts else np.zeros((channels, 0), np.float32)
    return np.ascontiguousarray(samples[:, :limit], dtype=np.float32)


def join_audio(parts: list[tuple[int, np.ndarray]], rate: int, total: int, fade: int) -> np.ndarray:
    """Segments' sounds on one timeline: (start sample, (C, n) samples) each; ``fade`` samples crossfaded at joins."""
    channels = parts[0][1].shape[0]
    out = np.zeros((channels, total), np.float32)
    for index, (start, samples) in enumerate(parts):
        end = min(total, start + samples.shape[1])
        if end <= start:
            continue
        piece = samples[:, : end - start].astype(np.float32)
        if index > 0 and fade > 0:
            n = min(fade, end - start)
            ramp = np.linspace(0.0, 1.0, n, endpoint=False, dtype=np.float32)
            out[:, start:start + n] *= 1.0 - ramp
            piece = piece.copy()
            piece[:, :n] *= ramp
            out[:, start:start + n] += piece[:, :n]
            out[:, start + n:end] = piece[:, n:]
        else:
            out[:, start:end] = piece
    return out


def join_segments(results: list[Result], segments: list[Segment], fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Segments' frames and sound joined: each later segment's first frame (the shared one) is dropped."""
    frames = []
    rate = results[0].rate
    parts = []
    for result, segment in zip(results, segments, strict=True):
        skip = 0 if segment.index == 0 else 1
        frames.append(result.frames[skip:skip + segment.keep])
        start_frame = segment.start - skip  # where the segment's own frame 0 sits on the shot's timeline
        parts.append((int(round(start_frame / fps * rate)), result.audio))
    joined = np.concatenate(frames)
    total = int(round(len(joined) / fps * rate))
    fade = int(round(AUDIO_CROSSFADE_FRAMES / fps * rate))
    return joined, join_audio(parts, rate, total, fade)


def may_carry_looks(plan: Plan, shot: ShotPlan) -> bool:
    """Whether an earlier shot of the plan shows one of this shot's characters (a look may be carried in)."""
    earlier = set()
    for other in plan.shots:
        if other.shot_id == shot.shot_id:
            return bool(earlier & set(shot.characters))
        earlier |= set(other.characters)
    return False


# ------------------------------------------------------------------ the runner


class H3Runner(DiffusersShotRunner):
    """MiniMax-H3's modular pipeline loaded per workflow, placed by the memory planner, kept warm between shots.

    Reuses the diffusers runner's device resolution, defaults, health samples and ``--adaptive``
    step-downs; loading, placement and the pipeline call are MiniMax-H3's own.
    """

    def __init__(self, options: H3Options, default_model: str, health: Callable[[Any], dict] | None = None):
        super().__init__(FAMILY, options, default_model, health, speed_levers=False)
        self.resolved: Any = None
        self.loaded_workflows: set[str] = set()
        self.planned_workflows: set[str] = set()
        self.release_conditioner = False
        self.hooks: list[Any] = []  # accelerate offload hooks (model tier) and the conditioner's release hook
        self.placed: set[int] = set()  # ids of modules already group- or sequentially offloaded
        self.reference_frames = 0  # frame-equivalents the plan's largest ref2va request packs beside its own frames
        self.adapted: set[int] = set()  # ids of transformer partitions whose LoRA / int8 / speed levers are applied
        self.adaptations: list[str] = []  # what was done to the weights (notices → manifest)
        self.turbo: Any = None  # daotai.render.neural.turbo.Turbo once resolved (prepare)
        self.turbo_alpha = 1.0  # strength the turbo LoRA is fused at
        # Makes the pipeline's blocks (None: diffusers' own for the folder); a re-render swaps in its own
        # timestep step (daotai.render.h3_partial).
        self.blocks: Callable[[], Any] | None = None

    def prepare(self) -> Any:
        """The device and defaults; with a turbo LoRA, the steps and shift it was distilled for (user options
        override them, with a notice)."""
        defaults = super().prepare()
        options = self.options
        if options.turbo is None:
            return defaults
        from daotai.render.neural.turbo import resolve_turbo, turbo_defaults

        if self.turbo is None:
            self.turbo = resolve_turbo(options.turbo, options.steps, options.shift)
        self.defaults, self.turbo_alpha, notes = turbo_defaults(defaults, self.turbo, options.steps, options.shift,
                                                                 options.turbo_alpha)
        self.adaptations += notes
        return self.defaults

    # -------------------------------------------------------------- loading

    def components_for(self, workflows: set[str]) -> tuple[str, ...]:
        """Every component the workflows load (in the catalog's order)."""
        table = catalog.family(FAMILY).workflows
        names: list[str] = []
        for workflow in sorted(workflows):
            names += [c for c in table[workflow] if c not in names]
        return tuple(names)

    def check(self, workflows: set[str]) -> None:
        """Refuse before loading when the folder lacks what the plan's workflows need, or is damaged."""
        from daotai.runtime.models import check_model_folder, resolve_model

        if self.resolved is None:
            self.resolved = resolve_model(self.model)
        need = self.components_for(workflows)
        pull = f"daotai models pull {self.resolved.spec.name}" if self.resolved.spec is not None else None
        hint = "copy the model's whole folder again"
        if pull:
            hint = f"pull them: {pull}" + (f" --workflow {sorted(workflows)[0]}" if len(workflows) == 1 else "")
        check_model_folder(self.resolved.path, FAMILY, need,
                           missing_hint=f"the shots need the {', '.join(sorted(workflows))} workflow(s); {hint}")

    def canvas_settings(self) -> tuple[int, int]:
        """(short edge, max pixels) from the model folder's settings, else the family's canvas."""
        from daotai.runtime.models import config_of, read_model_index

        canvas = catalog.family(FAMILY).canvas
        assert canvas is not None
        settings = config_of(read_model_index(self.resolved.path)) if self.resolved is not None else {}
        short_edge = int(settings.get("canvas_short_edge", canvas.short_edge))
        if self.turbo is not None and self.turbo.sampling.short_edge is not None:
            short_edge = self.turbo.sampling.short_edge  # a turbo runs at the canvas it was distilled at
        return short_edge, int(settings.get("canvas_max_pixels", canvas.max_pixels))

    def canvas(self, plan: Plan) -> tuple[int, int]:
        """The canvas this model generates the plan's shots at."""
        return self.canvas_of(plan.width, plan.height)

    def canvas_of(self, width: int, height: int) -> tuple[int, int]:
        """The canvas this model generates a picture of ``width`` x ``height`` at (its aspect ratio)."""
        short_edge, max_pixels = self.canvas_settings()
        multiple = self.pipe.canvas_multiple if self.pipe is not None and getattr(self.pipe, "vae", None) is not None \
            else catalog.family(FAMILY).snap.size_multiple
        return canvas_for(width, height, short_edge, max_pixels, multiple)

    def ensure(self, plan: Plan, planned: set[str], workflows: set[str], shot_id: str, frames: int) -> Iterator[Event]:
        """Check the folder for every ``planned`` workflow before anything loads, then load what ``workflows`` add.

        ``frames``: the longest generation of the plan, which the memory tier is chosen for.
        """
        if self.pipe is None:
            self.prepare()
            yield from self.start((plan.width, plan.height), set(planned) | set(workflows), frames,
                                  self._reference_frames(plan, frames), shot_id)
        yield from self.load_missing(workflows, shot_id)

    def start(self, size: tuple[int, int], workflows: set[str], frames: int, reference_frames: int,
              shot_id: str) -> Iterator[Event]:
        """Check the folder for ``workflows``, choose the memory tier for the longest generation and make the
        (empty) pipeline; call ``prepare`` first. ``size``: the delivery size the canvas keeps the aspect of;
        ``reference_frames``: what the largest ref2va request packs beside its ``frames``."""
        self.reference_frames = reference_frames
        self.planned_workflows = set(workflows)
        if self.turbo is not None:
            from daotai.render.neural.turbo import check_turbo_covers

            check_turbo_covers(self.turbo, self.planned_workflows, FAMILY)
        self.check(self.planned_workflows)  # refuse a damaged or incomplete folder before loading anything
        width, height = self.canvas_of(*size)
        request = NativeRequest(width, height, frames, 24.0, "", "", 0)
        yield from self.load_for(request, shot_id)

    def load_missing(self, workflows: set[str], shot_id: str) -> Iterator[Event]:
        """Load the components of ``workflows`` that are not loaded yet."""
        missing = workflows - self.loaded_workflows
        if missing:
            yield from self._load_workflows(missing, shot_id)

    def _reference_frames(self, plan: Plan, frames: int) -> int:
        """What the plan's largest ref2va request adds to the packed sequence, in frames (video + pictures);
        with carried looks a shot may hold a second picture of each character."""
        carry = self.options.carry_looks and self.options.workflow == "auto"
        pictures = [min(H3_MAX_PICTURES, len(h3_pictures(s)) * (2 if carry and may_carry_looks(plan, s) else 1))
                    for s in plan.shots
                    if h3_workflow(plan, s, self.options.workflow)[0] == "ref2va" or (carry and may_carry_looks(plan, s))]
        return frames + FRAMES_PER_PICTURE * max(pictures) if pictures else 0

    def load_for(self, request: NativeRequest, shot_id: str | None) -> Iterator[Event]:
        """Choose a memory tier for ``request``, make the (empty) pipeline; components load per workflow."""
        from daotai.runtime.models import modular_pipeline

        yield Progress("load", shot_id, 0, 1, f"loading {self.model}")
        self.tier = self._tier_for(request)
        self.pipe = modular_pipeline(self.resolved, FAMILY, self.components_for(self.planned_workflows),
                                     self.blocks() if self.blocks is not None else None)
        self.pipe.set_progress_bar_config(disable=True)
        yield Progress("load", shot_id, 1, 1, "pipeline ready")

    def _tier_for(self, request: NativeRequest) -> str:
        """Memory tier: the user's, cpu's, or the planner's (everything resident, then the conditioner released)."""
        from daotai.runtime.memory import GIB, choose_settings, plan_placement

        self.release_conditioner = False
        if self.offload is not None:
            self.tier_reason = "as asked (offload option)"
            return self.offload
        if self.runtime.kind == "cpu":
            self.tier_reason = "cpu: weights already live in host memory"
            return "none"
        row = catalog.model_row(self.model)
        footprint = row.footprint if row is not None else catalog.footprint("minimax-h3")
        assert footprint is not None
        if self.options.weights == "int8":
            # int8 rows hold the block linears (nearly all of a partition) in half the bf16 bytes.
            footprint = replace(footprint, transformer_b=footprint.transformer_b / 2)
        # A ref2va request packs its video and picture references beside the generated frames: count them.
        frames = request.frames + self.reference_frames
        budget = self.runtime.memory_bytes
        if self.runtime.kind == "mps":
            return self._unified_tier(footprint, request, frames, budget)
        resident = choose_settings(replace(footprint, releasable_text_encoder=False), request.width, request.height,
                                   frames, budget)
        if resident is not None and resident.offload == "none":
            self.tier_reason = f"memory planner: everything resident, ~{resident.peak_bytes / GIB:.1f} GiB peak estimated"
            return "none"
        choice = plan_placement(replace(footprint, releasable_text_encoder=True), request.width, request.height,
                                frames, budget)
        self.release_conditioner = choice.tier == "none"
        released = "; conditioner released after encoding" if self.release_conditioner else ""
        self.tier_reason = f"memory planner: ~{choice.estimate.peak_bytes / GIB:.1f} GiB peak estimated{released}"
        return choice.tier

    def _unified_tier(self, footprint: Any, request: NativeRequest, frames: int, budget: float) -> str:
        """Apple Silicon: host and GPU share one memory pool, so offloading or releasing the conditioner frees
        nothing; every component counts. Refuse before loading when the whole workflow does not fit."""
        from daotai.runtime.memory import GIB, estimate

        whole = replace(footprint, releasable_text_encoder=False)
        planned = estimate(whole, request.width, request.height, frames, 2.0)
        # A LoRA is fused while every weight is already resident (before the first prompt is encoded): its factors
        # and one layer's B @ A product sit in the same pool then, on top of the encode phase.
        fusing = dict(planned.phases)["encode"] + self._lora_fusing_bytes(whole)
        need = max(planned.peak_bytes, fusing)
        if need <= budget:
            lora = f"; LoRA fusing ~{fusing / GIB:.1f} GiB" if fusing > dict(planned.phases)["encode"] else ""
            self.tier_reason = (f"memory planner: ~{need / GIB:.1f} GiB of unified memory estimated (one pool: "
                                f"every component counted{lora})")
            return "none"
        hint = ""
        if self.options.weights != "int8":
            halved = estimate(replace(whole, transformer_b=whole.transformer_b / 2), request.width, request.height,
                              frames, 2.0).peak_bytes
            hint = f"; with -O weights=int8 it needs ~{halved / GIB:.0f} GiB"
        raise BackendError(f"minimax-h3 at {request.width}x{request.height}, {request.frames} frames needs ~"
                           f"{need / GIB:.0f} GiB of unified memory and this Mac's GPU may use "
                           f"{budget / GIB:.0f} GiB (offloading frees nothing on one memory pool){hint}; "
                           "or render shorter shots")

    def _lora_fusing_bytes(self, footprint: Any) -> int:
        """Bytes a LoRA (``lora`` and / or ``turbo``) adds while it is fused: its factors (the file's size) and
        the largest layer's B @ A product in bf16 (hidden x ffn); 0 without one. Fusing happens on the host
        before placement, so only a single memory pool (Apple Silicon) sees it."""
        from daotai.render.neural.lora import lora_path

        files = [lora_path(self.options.lora)] if self.options.lora else []
        if self.turbo is not None:
            files.append(self.turbo.lora.path)
        if not files:
            return 0
        largest_product = footprint.hidden * (footprint.ffn or 4 * footprint.hidden) * 2
        return sum(path.stat().st_size for path in files) + largest_product

    def _load_workflows(self, workflows: set[str], shot_id: str) -> Iterator[Event]:
        """Load the components ``workflows`` add (off the device), then place the whole pipeline again."""
        from daotai.runtime.models import load_components

        for workflow in sorted(workflows):
            if workflow not in self.planned_workflows:  # forced later (a long shot's continuation): check it too
                self.check({workflow})
                self.planned_workflows.add(workflow)
        started = time.perf_counter()
        names = self.components_for(workflows)
        yield Progress("load", shot_id, 0, 1, f"loading {', '.join(sorted(workflows))} components")
        if self.runtime.kind != "cpu":
            # The two transformer partitions are 61.7 GiB each: keep only the ones the shot needs.
            keep = set(self.components_for(self.loaded_workflows | workflows if self.tier == "sequential" else workflows))
            drop = [n for n in ("transformer", "transformer_ref") if n not in keep and getattr(self.pipe, n, None) is not None]
            if drop:
                self._unhook()
                self.placed -= {id(getattr(self.pipe, n)) for n in drop}
                self.pipe.unload_components(drop)
                self.loaded_workflows = {w for w in self.loaded_workflows
                                         if not set(self.components_for({w})) & set(drop)}
                yield Notice("info", f"h3: unloaded {', '.join(drop)} to make room for the {', '.join(sorted(workflows))} "
                                     "workflow (shots grouped by workflow load fewer partitions)", shot_id)
        load_components(self.pipe, self.resolved, FAMILY, self.runtime, names)
        self._apply_shift()
        self.loaded_workflows |= workflows
        fresh = self._fresh_partitions()
        self._adapt_weights(fresh)  # on the host, before placement moves anything
        self._place(self.tier or "none")
        self._speed_up(fresh)
        yield Progress("load", shot_id, 1, 1, f"loaded in {time.perf_counter() - started:.1f} s")
        yield Notice("info", f"h3: {self.resolved.path.name} ({', '.join(sorted(self.loaded_workflows))}) on "
                             f"{self.runtime.device} ({self.runtime.transformer_dtype}), memory tier {self.tier}", shot_id)

    # -------------------------------------------------------------- weights and speed

    def forwards(self) -> int:
        """Transformer forwards per generation: the schedule's ``steps`` sigma points end at 0."""
        assert self.defaults is not None
        return max(1, self.defaults.steps - 1)

    def _apply_shift(self) -> None:
        """Give the (freshly loaded) video scheduler the asked flow shift (``-O shift=`` or a turbo's); None keeps
        the folder's (12)."""
        assert self.defaults is not None
        scheduler = getattr(self.pipe, "scheduler", None)
        if self.defaults.shift is not None and scheduler is not None:
            scheduler.set_shift(self.defaults.shift)

    def _fresh_partitions(self) -> list[tuple[str, Any]]:
        """The transformer partitions loaded since the last adaptation: [(name, module)]."""
        fresh = []
        for name in ("transformer", "transformer_ref"):
            module = getattr(self.pipe, name, None)
            if module is not None and id(module) not in self.adapted:
                fresh.append((name, module))
        return fresh

    def _adapt_weights(self, fresh: list[tuple[str, Any]]) -> None:
        """Fuse the LoRA into the partitions it is for, then round block weights to int8 when asked."""
        from daotai.render.neural.lora import fuse_lora, h3_lora_state, resolve_lora

        options = self.options
        lora = resolve_lora(options.lora) if options.lora else None
        for name, module in fresh:
            if self.turbo is not None:
                from daotai.render.neural.turbo import partitions_for

                if name in partitions_for(self.turbo):
                    turbo_lora = self.turbo.lora
                    state, prefix = h3_lora_state(turbo_lora, name)
                    changed = fuse_lora(module, state, prefix, self.turbo_alpha, turbo_lora.path.name)
                    self.adaptations.append(f"{name}: turbo {self.turbo.label} fused at alpha "
                                            f"{self.turbo_alpha:g}: {changed} layers")
            if lora is not None and options.lora_partition in (name, "both"):
                state, prefix = h3_lora_state(lora, name)
                changed = fuse_lora(module, state, prefix, options.lora_scale, lora.path.name)
                self.adaptations.append(f"{lora.describe(options.lora_scale, name)}: {changed} layers")
            if options.weights == "int8":
                from daotai.render.int8 import quantize_repeated_blocks_int8

                self.adaptations.append(f"{name}: {quantize_repeated_blocks_int8(module)} block linears as int8 rows")

    def _speed_up(self, fresh: list[tuple[str, Any]]) -> None:
        """Apply the speed mode's levers to newly loaded partitions (kernel levers only when nothing is offloaded)."""
        from daotai.render.speed import (
            apply_transformer_levers,
            cache_only,
            levers_for,
            resolve_levers,
            scope_to_forward,
        )

        if self.speed_config is None:
            config = levers_for(self.speed, self.runtime.kind)
            # Wan's attention rewrites and GELU epilogue do not apply to MiniMax-H3's SwiGLU blocks, and its VAE
            # keeps the dtype the catalog gives it.
            config = replace(config, lean_attention=False, cross_attention=None, gelu_epilogue=False,
                             vae_bf16=False, vae_channels_last=False)
            if self.options.weights == "int8":
                config = replace(config, fp8=False)  # int8 rows are already rounded once; FP8 would round them again
            if self.turbo is not None and config.cache is not None:
                # A distilled schedule has no step to spare: at 4 forwards the interval cache would reuse one of 4.
                config = replace(config, cache=None)
                self.adaptations.append(f"turbo {self.turbo.label}: the step cache is off (every forward of a "
                                        "distilled schedule is computed)")
            config = resolve_levers(config, self.runtime.device)
            if self.tier != "none":
                config = cache_only(config)
            self.speed_config = config
        assert self.defaults is not None
        for name, module in fresh:
            self.adapted.add(id(module))
            # MiniMax-H3's transformer is called with the share of denoising done: its timesteps rise.
            done = apply_transformer_levers(module, self.speed_config, self.forwards(), timesteps_descending=False)
            # The kernel choice applies to the transformer alone: the pipeline call also decodes video, whose
            # VAE attention then runs as in the stock pipeline.
            scope_to_forward(module, self.speed_config)
            if done:
                self.adaptations.append(f"{name}: {', '.join(done)}")

    # -------------------------------------------------------------- placement

    def _unhook(self) -> None:
        """Remove the offload hooks this runner installed (before re-placing the pipeline)."""
        for hook in self.hooks:
            remove = getattr(hook, "remove", None)
            if remove is not None:
                remove()
        self.hooks = []

    def _place(self, tier: str) -> None:
        """Move or hook MiniMax-H3's components for a memory tier (cpu: everything stays in host memory)."""
        import torch

        from daotai.runtime.memory import TIERS

        pipe, device = self.pipe, self.runtime.device
        self._unhook()
        modules = {name: module for name, module in pipe.components.items() if isinstance(module, torch.nn.Module)}
        if self.runtime.kind == "cpu" or tier == "none":
            if self.release_conditioner and self.runtime.kind != "cpu" and "text_encoder" in modules:
                for name, module in modules.items():
                    if name != "text_encoder":
                        module.to(device)
                self._release_after_encoding(modules)  # the conditioner stays in host memory until it encodes
            else:
                pipe.to(device)
        elif tier == "model":
            from accelerate import cpu_offload_with_hook

            previous = None
            for name in ("text_encoder", "transformer", "transformer_ref", "vae", "audio_vae"):
                if name in modules:
                    _, previous = cpu_offload_with_hook(modules[name], device, prev_module_hook=previous)
                    self.hooks.append(previous)
        elif tier == "group":
            from diffusers.hooks import apply_group_offloading

            streams = self.runtime.kind == "cuda"
            for name, module in modules.items():
                if id(module) in self.placed:
                    continue
                self.placed.add(id(module))
                if name.startswith("transformer"):
                    apply_group_offloading(module, onload_device=torch.device(device), offload_type="block_level",
                                           num_blocks_per_group=1, use_stream=streams)
                elif name == "text_encoder":
                    apply_group_offloading(module, onload_device=torch.device(device), offload_type="leaf_level",
                                           use_stream=streams)
                else:
                    module.to(device)
        elif tier == "sequential":
            from accelerate import cpu_offload

            for module in modules.values():
                if id(module) not in self.placed:
                    self.placed.add(id(module))
                    cpu_offload(module, execution_device=device)
        else:
            raise BackendError(f"offload: {tier!r} must be one of {', '.join(TIERS)}")
        self.tier = tier

    def _release_after_encoding(self, modules: dict[str, Any]) -> None:
        """Keep the conditioner off the device except while it encodes (tier none on a card too small for all)."""
        from accelerate import cpu_offload_with_hook

        _, hook = cpu_offload_with_hook(modules["text_encoder"], self.runtime.device)
        self.hooks.append(hook)

        def release(module: Any, args: Any) -> None:
            hook.offload()  # the first transformer forward of a request: encoding is done

        for name in ("transformer", "transformer_ref"):
            if name in modules:
                handle = modules[name].register_forward_pre_hook(release)
                self.hooks.append(handle)

    def step_down(self) -> str | None:
        """Reload the pipeline one memory tier lower (hooks of some tiers cannot be removed in place)."""
        from daotai.runtime.memory import TIERS

        index = TIERS.index(self.tier or "none")
        if index + 1 >= len(TIERS):
            return None
        lower = TIERS[index + 1]
        workflows = set(self.loaded_workflows)
        self._drop_pipeline()
        self.offload, self.release_conditioner = lower, False
        from daotai.runtime.models import load_components, modular_pipeline

        self.pipe = modular_pipeline(self.resolved, FAMILY, self.components_for(workflows),
                                     self.blocks() if self.blocks is not None else None)
        self.pipe.set_progress_bar_config(disable=True)
        load_components(self.pipe, self.resolved, FAMILY, self.runtime, self.components_for(workflows))
        self._apply_shift()
        self.loaded_workflows = workflows
        fresh = self._fresh_partitions()
        self._adapt_weights(fresh)
        self._place(lower)
        self._speed_up(fresh)
        return lower

    def _drop_pipeline(self) -> None:
        """Forget the pipeline and free the device's cache."""
        self._unhook()
        self.pipe = None
        self.loaded_workflows = set()
        self.placed = set()
        self.adapted = set()
        self.speed_config = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def close(self) -> None:
        """Drop the pipeline and free accelerator memory."""
        self._drop_pipeline()

    # -------------------------------------------------------------- one generation

    def generate_h3(self, shot: Any, generation: Generation, ctx: RunContext,
                    forwards: int | None = None) -> Iterator[Event | tuple]:
        """Run one generation (retrying once a tier lower on out-of-memory); ends with ("result", Result).

        ``shot``: the ShotPlan (or anything with its ``shot_id``) progress and messages are labelled with;
        ``forwards``: the transformer forwards the call runs (None: the whole schedule's; a re-render runs
        only its last ones)."""
        from daotai.render.speed import SpeedConfig, compile_tag_context
        from daotai.runtime.device import generator_for

        assert self.defaults is not None
        steps = self.defaults.steps
        forwards = forwards if forwards is not None else self.forwards()

        def call(callback: Callable) -> Any:
            transformer = self.pipe.transformer_ref if generation.workflow == "ref2va" else self.pipe.transformer
            proxy = _StepProxy()
            counter = {"step": 0}

            def after_forward(module: Any, args: Any, output: Any) -> None:
                callback(proxy, counter["step"], None, {})
                counter["step"] += 1
                if proxy._interrupt:
                    raise _Stopped("stopped between denoising steps")

            handle = transformer.register_forward_hook(after_forward)
            try:
                # The kernel order is scoped to the transformer's forward (scope_to_forward); the compile-cache
                # tag of that choice covers the whole call.
                with compile_tag_context(self.speed_config or SpeedConfig()):
                        out = self.pipe(prompt=generation.prompt, num_frames=generation.frames,
                                    height=generation.height, width=generation.width, num_inference_steps=steps,
                                    generator=generator_for(generation.seed), output_type="pt",
                                    output=["videos", "audio", "sampling_rate"], **generation.inputs)
            finally:
                handle.remove()
                for hook in self.hooks:  # model tier: leave nothing on the device between shots
                    offload = getattr(hook, "offload", None)
                    if offload is not None:
                        offload()
            return out

        def attempt() -> Iterator[Event | tuple]:
            for item in run_steps(call, shot.shot_id, forwards, ctx):
                if isinstance(item, tuple):
                    out = item[1]
                    frames = to_uint8(out["videos"])  # (F, H, W, 3) uint8
                    audio = out["audio"].float().cpu().numpy()[0]  # (C, N) float32
                    yield ("result", Result(frames, audio, int(out["sampling_rate"])))
                else:
                    yield item

        yield from retry_a_tier_lower(
            self, attempt,
            failed=lambda exc: f"{shot.shot_id}: h3 {generation.workflow} generation failed: {type(exc).__name__}: "
                               f"{first_line(exc)}",
            exhausted=f"{shot.shot_id}: out of memory at {generation.width}x{generation.height}, {generation.frames} "
                      "frames even with the lowest memory tier",
            retrying=lambda lower: Notice("warning", f"out of memory; retrying once with memory tier {lower}",
                                          shot.shot_id),
        )


class _Stopped(Exception):
    """Raised from the step hook to leave the pipeline between steps (the run is being cancelled)."""


class _StepProxy:
    """What the step callback sets ``_interrupt`` on (a modular pipeline has no interrupt flag)."""

    _interrupt = False


# ------------------------------------------------------------------ the backend


def check_licence(model: str, accepted: bool, option: str, how: str) -> str | None:
    """Refuse (OptionError at ``option``, saying ``how`` to accept) unless MiniMax-H3's licence was accepted, now
    or before; the acceptance as a manifest line (None for a model that needs none)."""
    from daotai.runtime.models import require_licence

    row = catalog.model_row(model)
    if row is None:
        # A local folder of MiniMax-H3 weights is under the released model's licence too.
        row = catalog.model_row(SPEC.default_model or "")
    if row is None:
        return None
    folder = Path(model).expanduser()
    outcome = require_licence(row, accepted, option=option, how=how, folder=folder if folder.is_dir() else None)
    if outcome is None:
        return None
    record, now = outcome
    when = "accepted now" if now else f"accepted {record.get('accepted_at', '')} ({record.get('how', '')})"
    return f"licence: {row.licence} {when}; summary shown: {'; '.join(row.licence_summary)}"


def lora_files(options: Mapping[str, Any]) -> tuple[Path, ...]:
    """The LoRA files the options fuse into the weights (``lora``, ``turbo``), for the shot cache's key.

    A file that cannot be found is left out: the backend refuses it, with its own message, when it starts."""
    from daotai.errors import DaotaiError
    from daotai.render.neural.lora import lora_path
    from daotai.render.neural.turbo import turbo_file

    found = []
    for name, locate in (("lora", lora_path), ("turbo", turbo_file)):
        value = options.get(name)
        if value:
            try:
                found.append(locate(str(value)))
            except DaotaiError:
                continue
    return tuple(found)



class H3Backend:
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
        self._previz: Any = None
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

    # -------------------------------------------------------------- conditioning

    def _previz_frames(self, job: RenderJob, ctx: RunContext, native: int) -> list[np.ndarray]:
        """The shot's previz RGB (no labels) at 24 fps for its first ``native`` frames: (H, W, 3) uint8 each."""
        from daotai.render.neural.retime import plan_to_native_indexes
        from daotai.render.previz.backend import PrevizBackend

        shot = job.shot
        wanted = plan_to_native_indexes(shot.frames, job.plan.fps, native, 24.0)
        given = self._given_previz.get(shot.shot_id)
        if given is not None:
            return [given[i] for i in wanted]
        if self._previz is None:
            self._previz = PrevizBackend(labels=False)
        needed = set(wanted)
        frames: dict[int, np.ndarray] = {}
        for event in self._previz.render(RenderJob(job.plan, shot, controls=False), ctx):
            if isinstance(event, Frame) and event.index in needed:
                frames[event.index] = event.rgb
        return [frames[i] for i in wanted]

    def _voice(self, plan: Plan, character_id: str) -> Any:
        """A character's voice recording as a MiniMax-H3 audio reference (its first VOICE_SECONDS)."""
        from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3AudioReference

        character = next(c for c in plan.characters if c.id == character_id)
        assert character.voice is not None
        path = Path(character.voice).expanduser()
        if not path.is_absolute() and self.reference_root is not None:
            path = self.reference_root / path
        where = f"characters.{character_id}.voice"
        if not path.is_file():
            raise BackendError(f"{where}: {character.voice!r} is not a file (relative paths are read beside the "
                               "script)")
        rate = int(getattr(self.runner.pipe.audio_vae.config, "sampling_rate", 32000))
        try:
            samples = decode_voice(path, rate, VOICE_SECONDS)
        except Exception as exc:  # noqa: BLE001 - PyAV raises many kinds for a file it cannot decode
            raise BackendError(f"{where}: {character.voice!r} could not be read as audio ({type(exc).__name__})"
                               ) from None
        if samples.shape[-1] == 0:
            raise BackendError(f"{where}: {character.voice!r} holds no sound")
        import torch

        return MiniMaxH3AudioReference(audio=torch.from_numpy(samples), sample_rate=rate)

    def _references(self, job: RenderJob, ctx: RunContext, frames: int, canvas: tuple[int, int]
                    ) -> tuple[list[Any], str, list[CharacterPicture]]:
        """ref2va references in order: each character's picture (subject first), the looks carried from earlier
        shots (carry_looks, within the picture limit), the previz video, then the voices of the shot's speakers
        who have one."""
        from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3ImageReference, MiniMaxH3VideoReference
        from PIL import Image

        plan, shot = job.plan, job.shot
        pictures = [character_picture(plan, c, self.reference_root) for c in h3_pictures(shot)]
        carried = self.looks.for_shot(shot.shot_id, h3_pictures(shot), H3_MAX_PICTURES - len(pictures)) \
            if self.looks is not None else []
        pictures += [CharacterPicture(look.character, Image.fromarray(look.image), f"carried look: {look.describe()}")
                     for look in carried]
        references: list[Any] = [MiniMaxH3ImageReference(image=p.image) for p in pictures]
        native = min(frames, frames_for(shot.duration_s, 24.0))
        if shot.reference_video is not None:  # the user's footage carries the camera and the movement
            shown = list(shot_footage(plan, shot, self.reference_root, native, 24.0, *canvas))
            video_label = f"<Video 1> {describe_footage(shot, native, 24.0)}"
        else:
            shown = [resize_rgb(f, *canvas) for f in self._previz_frames(job, ctx, native)]
            video_label = f"<Video 1> previz of {shot.shot_id} ({native} frames at 24 fps)"
        # The reference encoder takes 17n+5 frames (n >= 1) and the conditioner reads pairs at 2 fps:
        # a shot shorter than that holds its last previz frame (the extra generated time is trimmed).
        shown += [shown[-1]] * max(0, min(frames, MIN_REFERENCE_FRAMES) - len(shown))
        previz = np.stack(shown)  # (F, H, W, 3) uint8 at 24 fps
        references.append(MiniMaxH3VideoReference(frames=previz, fps=24.0))
        order = [f"<Picture {i}> {p.character} ({p.source})" for i, p in enumerate(pictures, start=1)]
        order.append(video_label if len(previz) == native else f"{video_label}, held to {len(previz)} frames")
        for index, character_id in enumerate(h3_voices(plan, shot), start=1):
            voice = self._voice(plan, character_id)
            references.append(voice)
            seconds = voice.audio.shape[-1] / (voice.sample_rate or 1)
            order.append(f"<Audio {index}> voice of {character_id} ({seconds:.1f} s at {voice.sample_rate} Hz)")
        return references, ", ".join(order), pictures

    def _first_frame(self, job: RenderJob, ctx: RunContext, canvas: tuple[int, int]) -> tuple[np.ndarray, str]:
        """A forced fl2va shot's first frame: the previous shot's last one when it was rendered here, else previz."""
        plan, shot = job.plan, job.shot
        ids = [s.shot_id for s in plan.shots]  # the plan may hold a selection of the script's shots
        position = ids.index(shot.shot_id)
        previous = ids[position - 1] if position > 0 else None
        if self._last_frame is not None and previous is not None and self._last_frame[0] == previous:
            return self._last_frame[1], "previous"
        return resize_rgb(self._previz_frames(job, ctx, 1)[0], *canvas), "previz"

    def _generation(self, job: RenderJob, ctx: RunContext, workflow: str, segment: Segment,
                    canvas: tuple[int, int], keyframe: np.ndarray | None, keyframe_kind: str | None) -> Generation:
        """The pipeline inputs and prompt of one segment."""
        from PIL import Image

        plan, shot = job.plan, job.shot
        inputs: dict[str, Any] = {}
        order = "none (prompt only)"
        pictures: tuple[tuple[str, bool], ...] = ()
        if workflow == "ref2va":
            references, order, found = self._references(job, ctx, segment.frames, canvas)
            inputs["references"] = references
            pictures = tuple((p.character, not p.swatch) for p in found)
        elif workflow == "fl2va":
            assert keyframe is not None
            inputs["image"] = Image.fromarray(keyframe)
            source = "the previous segment's last frame" if keyframe_kind == "previous" and segment.index > 0 else \
                "the previous shot's last frame" if keyframe_kind == "previous" else "the shot's first previz frame"
            order = f"<Picture 1> first frame: {source}"
        prompt = compose_h3_prompt(plan, shot, workflow, pictures, video=workflow == "ref2va",
                                   keyframe=keyframe_kind if workflow == "fl2va" else None,
                                   voices=h3_voices(plan, shot) if workflow == "ref2va" else ())
        return Generation(workflow, prompt, segment.frames, canvas[0], canvas[1], shot.seed + segment.index, inputs, order)

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
            yield Notice("info", f"h3: {text}", shot.shot_id)
        runner.adaptations = []
        if runner.turbo is not None:  # every shot's manifest entry names the LoRA its schedule came from
            yield Notice("info", f"h3: {runner.turbo.describe()}", shot.shot_id)
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
                keyframe, keyframe_kind = self._shared_frame(results[-1], segments[segment.index - 1]), "previous"
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
        from daotai.render.previz.backend import PrevizBackend

        assert self.looks is not None
        shot = job.shot
        if shot.reference_video is not None:
            yield Notice("info", "h3: carry_looks: no looks kept from a shot that follows footage (the plan's masks "
                                 "do not say where its people are)", shot.shot_id)
            return
        if self._previz is None:
            self._previz = PrevizBackend(labels=False)
        masks = {e.index: e.mask for e in self._previz.render(RenderJob(job.plan, shot, controls=True), ctx)
                 if isinstance(e, Frame) and e.index in delivered}  # (H, W) uint8 each
        kept = self.looks.add(best_looks(shot, delivered, masks).values())
        if kept:
            yield Notice("info", "h3: carry_looks: kept " + "; ".join(look.describe() for look in kept),
                         shot.shot_id)

    def _shared_frame(self, result: Result, segment: Segment) -> np.ndarray:
        """The last frame a segment supplies: where the next segment starts."""
        skip = 0 if segment.index == 0 else 1
        return result.frames[skip + segment.keep - 1].copy()

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
        samples = int(round(shot.frames / plan.fps * rate))
        sound = sound[:, :samples]
        if sound.shape[1] < samples:  # the generation always covers the shot; guard against rounding
            sound = np.pad(sound, ((0, 0), (0, samples - sound.shape[1])))
        layout = "stereo" if sound.shape[0] == 2 else "mono"
        yield Audio(shot.shot_id, np.ascontiguousarray(np.clip(sound.T, -1.0, 1.0), dtype=np.float32), rate, layout)
        parts = []
        if abs(plan.fps - 24.0) > 1e-6:
            how = (f"motion interpolation ({INTERPOLATION_METHOD})" if interpolator_available() else
                   ("repeating" if plan.fps > 24.0 else "dropping") + " frames (no interpolator: OpenCV is missing)")
            parts.append(f"retimed from {len(native)} frames at 24 fps to {shot.frames} at {plan.fps:g} fps by {how}")
        if canvas != (plan.width, plan.height):
            parts.append(f"generated at {canvas[0]}x{canvas[1]}, resized to {plan.width}x{plan.height}")
        parts.append(f"sound: {sound.shape[0]} channels at {rate} Hz, {samples} samples")
        yield Notice("info", "h3: " + "; ".join(parts), shot.shot_id)
        yield Progress("render", shot.shot_id, 0, shot.frames, "retiming")
        for index, rgb in enumerate(retime_frames(native, 24.0, shot.frames, plan.fps)):
            yield Frame(shot_id=shot.shot_id, index=index, rgb=resize_rgb(rgb, plan.width, plan.height))
        yield Progress("render", shot.shot_id, shot.frames, shot.frames)

    def close(self) -> None:
        """Release the pipeline and the previz GL context."""
        self.runner.close()
        if self._previz is not None:
            self._previz.close()
            self._previz = None


SPEC = BackendSpec(
    name="h3",
    factory="daotai.render.h3:H3Backend",
    options=H3Options,
    summary="MiniMax-H3 (diffusers modular): video and stereo sound, guided by the previz and the characters' looks",
    family=FAMILY,
    device_class="accelerator",
    footage=True,
    sound=True,
    default_model="minimax-h3",
    # A forced fl2va starts each shot on the last frame of the shot this backend rendered before it
    continues_across_shots=lambda options: str(options.get("workflow", "auto")) == "fl2va",
    option_files=lora_files,
)
