"""What a backend is, declared once beside its class: :class:`BackendSpec` and typed options.

Each backend module defines ``SPEC = BackendSpec(...)`` next to its class. The spec answers
every question a front end or the pipeline asks about a backend — does it make control
channels, what device class does it need (so the cluster knows whether to ask Ray for a GPU),
which model does it load by default, how are its frames best encoded, which options does it
take — so no code compares backend names to decide a capability.

Options are frozen pydantic models with ``extra="forbid"``: an unknown or ill-typed option
is an :class:`~daotai.errors.OptionError` naming the backend's valid options, and the nearest
ones to an unknown name (exit 2, HTTP 422), never silently dropped. Values may arrive as strings (``-O steps=8`` on the command
line); pydantic converts them to the declared types.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from daotai.errors import OptionError
from daotai.script.spellings import did_you_mean, nearest

DeviceClass = Literal["cpu", "accelerator", "apple"]
Offload = Literal["none", "model", "group", "sequential"]
Speed = Literal["off", "exact", "fast"]


class BackendOptions(BaseModel):
    """Options every backend accepts (none); backends extend it with their own fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    def shots_depend_on_earlier(self) -> bool:
        """Whether a shot's pixels depend on the shots rendered before it in the same run (then no shot
        is reused from the shot cache, whose keys describe one shot alone)."""
        return False


class NeuralOptions(BackendOptions):
    """Options of every backend that runs a model."""

    model: str | None = Field(None, description="registry name or local model folder (None: the backend's default)")
    steps: int | None = Field(None, ge=1, le=1000, description="denoising steps (None: the model's default)")
    guidance: float | None = Field(None, ge=0.0, le=50.0, description="classifier-free guidance scale")
    shift: float | None = Field(None, gt=0.0, le=50.0, description="flow-matching timestep shift")
    max_sequence_length: int | None = Field(None, ge=1, le=4096, description="text tokens the encoder reads")


class DiffusersOptions(NeuralOptions):
    """Options of the backends that run a diffusers pipeline through torch."""

    device: str | None = Field(None, description="auto | cuda | cuda:N | mps | cpu")
    speed: Speed | None = Field(None, description="exact (default) | fast (approximate step caching) | off")
    adaptive: bool = Field(False, description="step a memory tier down after a shot with critical device health")
    offload: Offload | None = Field(None, description="memory tier (None: the memory planner decides)")
    gpus: int = Field(1, ge=1, le=64, description="processes one shot is split across on this host (context "
                                                  "parallel: a GPU each, or CPU processes with --device cpu)")


@dataclass(frozen=True)
class EncodeDefaults:
    """How a backend's frames are best encoded when the user does not say (H.264 / HEVC)."""

    crf: int | None = None  # None: the codec's default
    tune: str | None = None
    large_preset: str = "veryfast"  # x264/x265 preset at 720p and above


@dataclass(frozen=True)
class BackendEnv:
    """What a backend gets from the run rather than from options."""

    reference_root: Path | None = None  # the script's folder: relative reference images resolve here
    health_sampler: Callable[[Any], dict] | None = None  # replaces the accelerator health sampler


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name, how to build it, what it needs and what it can do."""

    name: str
    factory: str  # "module:attribute", imported only when the backend is built
    options: type[BackendOptions]
    summary: str
    family: str | None = None  # catalog family of the models it runs (None: no model)
    # Fast mode applies the general choices (render.speed.fast_choices(None)) rather than its family's
    # tuned ones: a port that cannot apply the family's cadence. The shot cache key reads the same
    # (fast_choices_family), so a fast shot's key holds the choices its frames were made with.
    general_fast_choices: bool = False
    controls: bool = False  # yields depth and character masks with every frame
    sound: bool = False  # yields the shot's sound (one Audio event) with its frames
    footage: bool = False  # follows a shot's reference_video (daotai.render.footage) instead of the previz
    # Draws the same pixels again from the same plan and options (so `daotai qc` may re-render
    # samples instead of trusting the files under test); such a backend has ``render_frames``.
    reproducible: bool = False
    device_class: DeviceClass = "accelerator"  # cpu: runs anywhere; accelerator: wants a GPU; apple: MLX (Mac GPU or CPU)
    default_model: str | None = None
    encode: EncodeDefaults = EncodeDefaults()
    # Whether, with these options, a shot's frames depend on the shot rendered before it (it
    # starts on that shot's last frame): such shots are cached as a chain (daotai.run.reuse.shot_keys).
    continues_across_shots: Callable[[Mapping[str, Any]], bool] = lambda options: False
    # The files, beside the model, whose bytes decide the frames with these options (a LoRA fused into
    # the weights): their sha256 joins each shot's cache key (daotai.run.cache.key_fields).
    option_files: Callable[[Mapping[str, Any]], tuple[Path, ...]] = lambda options: ()
    # What a render plan (the server's render-plan answer, the console) shows of one shot besides its
    # reuse, for this backend with these options: ``(plan, shot, options) -> dict`` merged into the
    # shot's entry (H3: its workflow and what it is conditioned on, in order); None: nothing more.
    shot_outline: Callable[[Any, Any, Mapping[str, Any]], dict] | None = None

    @property
    def fast_choices_family(self) -> str | None:
        """The family whose fast-mode choices this backend applies (None: the general ones)."""
        return None if self.general_fast_choices else self.family

    def option_names(self) -> tuple[str, ...]:
        """The option names this backend accepts, sorted."""
        return tuple(sorted(self.options.model_fields))

    def validate_options(self, values: Mapping[str, Any] | BackendOptions | None = None, *,
                         prefix: str = "options") -> BackendOptions:
        """Check options (a mapping or an options object) against this backend's type."""
        if isinstance(values, self.options):
            return values
        if isinstance(values, BackendOptions):
            values = values.model_dump(exclude_unset=True)
        try:
            return self.options.model_validate(dict(values or {}))
        except ValidationError as exc:
            raise options_error(exc, self, prefix) from None

    def build(self, options: Mapping[str, Any] | BackendOptions | None = None, env: BackendEnv | None = None):
        """Import the backend's module and build it with validated options."""
        checked = self.validate_options(options)
        module_name, _, attribute = self.factory.partition(":")
        factory = getattr(importlib.import_module(module_name), attribute)
        return factory(checked, env=env or BackendEnv())


def options_error(exc: ValidationError, spec: BackendSpec, prefix: str = "options") -> OptionError:
    """A pydantic validation error as an OptionError naming the backend's valid options, and for an
    unknown option the nearest valid names (``stepz`` → did you mean 'steps'?)."""
    names = spec.option_names()

    def unknown(option: str) -> str:
        return f"is not an option of the {spec.name} backend{did_you_mean(nearest(option, names))}"

    return OptionError.from_pydantic(exc, prefix, names, unknown_rule=unknown)


def options_with(options: BackendOptions, **changes: Any) -> BackendOptions:
    """A copy of ``options`` with fields changed (validated again)."""
    return type(options).model_validate({**options.model_dump(exclude_unset=True), **changes})
