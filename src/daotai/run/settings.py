"""What a run is asked for, and how it resolves: PipelineSettings, the backend's validated
options (run-wide defaults under the user's), the encode settings and output layout they imply,
the models they need and what the backend gets from the run.

Apart from the run itself so that front ends (cli, server, comfy, maccheck) and the modules
beside the pipeline (recheck, estimate, the shot keys) build and resolve settings without
importing the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from daotai.errors import BackendError, PlanError
from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan
from daotai.run.retakes import TakePolicy

if TYPE_CHECKING:
    from daotai.encode.hardware import HardwareEncoder


@dataclass(frozen=True)
class PipelineSettings:
    """What to render and how to encode it."""

    backend: str = "previz"
    codec: str = "h264"
    crf: int | None = None
    preset: str | None = None  # the encoder's (x264) preset; None: chosen per backend and frame size
    # The user's --preset (preview | draft | final …), which chose the frame size; recorded in the
    # manifest beside the x264 preset so a render says how it was asked for. None: the script's size.
    size_preset: str | None = None
    controls: bool = True
    shots: tuple[str, ...] = ()
    strict: bool = False
    camera_qc: bool = True
    # --encoder auto | software | hardware (daotai.encode.hardware). run() decides hardware_encoder
    # (None: the software encoder) after the fidelity gate, and notes why hardware, when wanted, is
    # not used (daotai.run.encoder_choice); the manifest records all three.
    encoder: str = "software"
    hardware_encoder: HardwareEncoder | None = None
    encoder_notes: tuple[str, ...] = ()
    # The backend's options (its Options type says which; checked before any work): model,
    # device, steps, speed, adaptive, offload, … for neural backends.
    options: Mapping[str, Any] = field(default_factory=dict)
    # Run-wide defaults from a front end (e.g. the server's --speed): applied only to backends
    # that have the field, and overridden by ``options``.
    option_defaults: Mapping[str, Any] = field(default_factory=dict)
    enhance: str = ""  # e.g. "upscale=2,interpolate=60": restored copies beside the planned shots
    cluster: str | None = None  # None: render here; else a Ray address (local | auto | ray://host:port)
    # A folder of finished shots by key (daotai.run.cache): an unchanged shot is reused, not
    # rendered again. None: no cache (the library's default; the CLI and the server set one).
    cache: str | None = None
    cache_bytes: int = 20 * 1024**3  # the cache's cap; least recently used shots go first
    # Takes per shot, the checks that call for another one and the time they may take (daotai.run.retakes)
    retakes: TakePolicy = field(default_factory=TakePolicy)
    # Render into a folder that is not a render of this script (check_output_folder): the folder
    # is replaced whole; one that held files daotai did not write is kept aside, never deleted.
    force: bool = False
    # USD cameras (cameras/<shot>.usda, sequence.usda) beside the pose files and JSON: only when
    # asked, so what a render writes never depends on which extras happen to be installed.
    usd_cameras: bool = False
    # Processes that check shots while the next ones render (daotai.qc.parallel); None: one per
    # core, up to the shots; 0: every shot is checked in this process after assembly.
    qc_workers: int | None = None
    # Storyboard pages written with the render (daotai.deliver.boards): "pdf" (boards.pdf) or "png"
    # (boards/page_01.png …); None: none (the contact sheet is always written).
    boards: str | None = None
    # Outputs asked for but not written because an optional package is missing: run() fills it
    # (with a notice before any work) and the manifest lists it as "skipped_outputs".
    skipped_outputs: tuple[dict[str, str], ...] = ()


def load_plan_or_script(path: Path, preset: str | None, loader: Callable[..., Any]) -> Plan:
    """A plan file written by `daotai plan`, or a script planned now."""
    from daotai.plan.planner import plan_from_json, plan_script

    if path.suffix.lower() == ".json" and path.is_file() and path.stat().st_size < 256 * 1024 * 1024:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
        if '"plan_version"' in head:
            if preset:
                raise PlanError(f"--preset: {preset!r} cannot resize an existing plan; plan the script again with --preset")
            try:
                return plan_from_json(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise PlanError(f"{path}: is not a valid daotai plan ({str(exc).splitlines()[0]})") from None
    return plan_script(loader(path, preset))


def encode_settings_for(settings: PipelineSettings, width: int = 0, height: int = 0):
    """The run's encode settings: the user's codec choices over the backend's defaults."""
    from daotai.encode.policy import encode_settings
    from daotai.render.registry import spec_for

    enc = encode_settings(settings.codec, settings.crf, settings.preset, spec_for(settings.backend).encode,
                          width, height)
    return replace(enc, hardware=settings.hardware_encoder) if settings.hardware_encoder is not None else enc


def layout_for(out_dir: Path, settings: PipelineSettings) -> RenderLayout:
    """The run's output layout: file names under ``out_dir``, videos in the codec's container
    (with ``enhance``, shots/<id>_enhanced<c> are the shots' enhanced copies)."""
    return RenderLayout(Path(out_dir), encode_settings_for(settings).container, enhanced=bool(settings.enhance))


def resolved_options(settings: PipelineSettings):
    """The backend's validated options: run-wide defaults where the backend has the field, then the user's."""
    from daotai.render.registry import spec_for

    spec = spec_for(settings.backend)
    fields = spec.options.model_fields
    merged = {k: v for k, v in settings.option_defaults.items() if k in fields and v is not None}
    merged.update(settings.options)
    return spec.validate_options(merged)


def require_models(settings: PipelineSettings, options=None) -> None:
    """Refuse, before any estimate or work, a render whose backend would load a catalog model (or a
    Control-Camera checkpoint) that is not downloaded here; the error names the command that pulls it.
    A cluster's workers load their own copies, so a cluster run is not checked here."""
    from daotai.render.registry import spec_for
    from daotai.runtime.model_lookup import require_pulled

    spec = spec_for(settings.backend)
    if spec.family is None or settings.cluster:
        return
    options = options if options is not None else resolved_options(settings)
    given = getattr(options, "model", None)
    needed = [(str(given or spec.default_model or ""), f"backend {spec.name}" + ("" if given else " (its default model)")),
              (str(getattr(options, "checkpoint", None) or ""), f"backend {spec.name}, -O checkpoint")]
    missing = []
    for name, needed_by in needed:
        try:
            if name:
                require_pulled(name, needed_by)
        except BackendError as exc:
            missing.append(str(exc))
    if missing:  # both at once when the model and the checkpoint are missing
        raise BackendError("\n  ".join(missing))


def backend_env(source: Path | None = None, health: Callable[[Any], dict] | None = None):
    """What the backend gets from the run: the script's folder (relative references) and a health sampler."""
    from daotai.render.spec import BackendEnv

    return BackendEnv(reference_root=Path(source).resolve().parent if source is not None else None,
                      health_sampler=health)
