"""Restoration of a finished clip: colour match, deflicker, H3 re-render, frame interpolation, upscale
(and of a still image: colour match, denoise, upscale; see ``enhance_image``).

Steps are frozen configs (``MatchColourConfig``, ``DeflickerConfig``, ``H3RerenderConfig``,
``InterpolateConfig``, ``UpscaleConfig``) and always run in that order, whatever order they were
given in: colour statistics are taken on the untouched input, the re-render (which keeps the
clip's size and rate) sees the cleaned clip, flow is cheapest and most reliable at the
small size, and upscaling last means every other step works on fewer pixels. Frames stream
from the decoder through the steps into an atomic ``VideoWriter``: memory stays at a few
frames, and an interrupted run leaves nothing at the output path.

Every run also writes ``<output stem>.enhance.json`` (a manifest: input and output format
and hash, the steps with their settings, timings) unless asked not to.

In a render (``PipelineSettings.enhance``), the shots as planned stay untouched — QC
compares them with the plan — and the enhanced copies are delivered beside them as
``shots/<id>_enhanced.mp4`` together with ``sequence_enhanced.mp4`` assembled from them
and ``enhance.json`` describing what was applied (see ``enhance_render``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Union

import numpy as np

from daotai.encode.read import decode_frames, probe
from daotai.encode.video import EncodeSettings, VideoWriter
from daotai.errors import NO_VALUE, EncodeError, OptionError
from daotai.events import Output, Progress
from daotai.plan.layout import ENHANCED, RenderLayout
from daotai.post.colour import (
    DeflickerConfig,
    MatchColourConfig,
    deflicker_frames,
    fit_transfer,
    lab_stats,
    match_colour_frames,
)
from daotai.post.h3_rerender import H3Rerender, H3RerenderConfig
from daotai.post.interpolate import InterpolateConfig, interpolate_frames, output_fps, output_frame_count
from daotai.post.upscale import UpscaleConfig, upscale_frames
from daotai.render.base import RunContext

__all__ = [
    "DenoiseConfig",
    "EnhanceResult",
    "Step",
    "apply_to_shot",
    "enhance",
    "enhance_image",
    "enhance_iter",
    "enhance_render",
    "enhanced_name",
    "image_steps",
    "is_image",
    "parse_steps",
    "plan_output",
]

Step = Union[MatchColourConfig, DeflickerConfig, H3RerenderConfig, InterpolateConfig, UpscaleConfig]
ORDER = (MatchColourConfig, DeflickerConfig, H3RerenderConfig, InterpolateConfig, UpscaleConfig)
STEP_NAMES = {MatchColourConfig: "match_colour", DeflickerConfig: "deflicker", H3RerenderConfig: "rerender",
              InterpolateConfig: "interpolate", UpscaleConfig: "upscale"}
ENHANCED_SUFFIX = ENHANCED  # <stem>_enhanced<suffix>: the render layout's name for an enhanced copy
STATS_SIDE = 160  # thumbnail side for colour statistics (decoded with skipping, cheap)
STATS_FRAMES = 48  # frames sampled for a shot's colour statistics


@dataclass(frozen=True)
class EnhanceResult:
    """What an enhance run wrote."""

    path: Path
    width: int
    height: int
    fps: Fraction
    frames: int
    manifest: dict[str, Any]
    manifest_path: Path | None


# --------------------------------------------------------------------------- step lists


def ordered(steps: Sequence[Step]) -> tuple[Step, ...]:
    """Steps in the fixed processing order; at most one of each kind."""
    seen: dict[type, Step] = {}
    for step in steps:
        kind = type(step)
        if kind not in STEP_NAMES:
            raise TypeError(f"enhance.steps: {step!r} is not an enhancement step")
        if kind in seen:
            raise EncodeError(f"enhance.steps: {STEP_NAMES[kind]} given twice; give each step once")
        seen[kind] = step
    return tuple(seen[kind] for kind in ORDER if kind in seen)


def _option_step(build: Callable[..., Step], *args: Any, **kwargs: Any) -> Step:
    """A step config built from user options; the config's own checks become OptionError.

    The configs name the broken field (``upscale.method: 'magic' must be one of …``) and raise
    EncodeError; coming from a flag, the same problem is an option error (exit 2).
    """
    try:
        return build(*args, **kwargs)
    except EncodeError as exc:
        path, _, rule = str(exc).partition(": ")
        raise OptionError.at(path, NO_VALUE, rule) if rule else OptionError.at("enhance", NO_VALUE, path) from None


def parse_interpolate(value: str, method: str = "dis") -> InterpolateConfig:
    """'x2' | 'x4' | a frame rate ('60', '59.94', '60000/1001') → InterpolateConfig; OptionError otherwise."""
    text = value.strip().lower()
    if text in ("x2", "x4", "2x", "4x"):
        return _option_step(InterpolateConfig, factor=int(text.strip("x")), method=method)
    try:
        fps = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise OptionError.at("interpolate", value, "must be x2, x4 or a frame rate such as 60") from None
    return _option_step(InterpolateConfig, fps=fps, method=method)


def parse_upscale(value: str, method: str = "classical", model: str | None = None,
                  sha256: str | None = None, **diffusion: Any) -> UpscaleConfig:
    """'2' | '4' | 'x2' | 'x4' → UpscaleConfig (``diffusion``: strength, steps, prompt, seed, device); OptionError otherwise."""
    text = value.strip().lower().strip("x")
    if text not in ("2", "4"):
        raise OptionError.at("upscale", value, "must be 2 or 4")
    return _option_step(UpscaleConfig, factor=int(text), method=method, model=model, sha256=sha256, **diffusion)


def _number(key: str, text: str, kind: type) -> Any:
    """An --enhance option's value as int or float, or OptionError naming it."""
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise OptionError.at("--enhance", NO_VALUE, f"{key}={text!r} must be {what}") from None


ENHANCE_KEYS = ("deflicker", "interpolate", "interpolate_method", "match", "match_colour", "method", "model", "steps",
                "strength", "upscale", "upscale_method")


def parse_h3(**fields: Any) -> H3RerenderConfig:
    """The H3 re-render step from user options (strength, steps, model, prompt, seed, device, script, shot,
    accept_licence; None: the default); OptionError names a bad value."""
    given = {k: v for k, v in fields.items() if v is not None}
    return _option_step(H3RerenderConfig, **given)


def parse_steps(spec: str) -> tuple[Step, ...]:
    """'upscale=2,interpolate=60,deflicker,match=ref.mp4' → ordered step configs; OptionError otherwise.

    Keys: ``upscale=2|4``, ``upscale_method=classical|lanczos|diffusion`` (or ``method=``),
    ``strength=<0..1>``, ``steps=<n>``, ``model=<name or folder>`` (diffusion re-render),
    ``interpolate=x2|x4|<fps>``, ``interpolate_method=dis|blend``, ``deflicker`` or
    ``deflicker=<window>``, ``match=<clip or shot id>``.
    """
    def refuse(value: object, rule: str, valid: tuple[str, ...] = ()) -> OptionError:
        return OptionError.at("--enhance", value, rule, valid)

    options: dict[str, str] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        key, _, value = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if key in options:
            raise refuse(key, f"given twice in {spec!r}")
        options[key] = value.strip()
    for key in options:
        if key not in ENHANCE_KEYS:
            raise refuse(NO_VALUE, f"unknown step {key!r} in {spec!r}", ENHANCE_KEYS)
    if "method" in options:  # the short form names the upscale method (interpolation has its own key)
        if "upscale_method" in options:
            raise refuse(NO_VALUE, f"give method or upscale_method, not both, in {spec!r}")
        options["upscale_method"] = options.pop("method")
    steps: list[Step] = []
    if "match" in options or "match_colour" in options:
        reference = options.get("match") or options.get("match_colour") or ""
        if not reference:
            raise refuse(NO_VALUE, "match needs a reference, e.g. match=ref.mp4 or match=<shot id>")
        steps.append(_option_step(MatchColourConfig, reference=reference))
    if "deflicker" in options:
        window = options["deflicker"]
        if window and not window.isdigit():
            raise refuse(NO_VALUE, f"deflicker={window!r} must be an odd window in frames, e.g. 9")
        steps.append(_option_step(DeflickerConfig, window=int(window)) if window else DeflickerConfig())
    if "interpolate" in options:
        steps.append(parse_interpolate(options["interpolate"], options.get("interpolate_method", "dis")))
    elif "interpolate_method" in options:
        raise refuse(NO_VALUE, f"interpolate_method belongs to interpolate; add interpolate=x2 in {spec!r}")
    kinds = {"strength": float, "steps": int}
    diffusion = {k: _number(k, options[k], kind) for k, kind in kinds.items() if k in options}
    if "upscale" in options:
        steps.append(parse_upscale(options["upscale"], options.get("upscale_method", "classical"),
                                   options.get("model"), **diffusion))
    elif diffusion or "model" in options or "upscale_method" in options:
        raise refuse(NO_VALUE, f"method, strength, steps and model belong to upscale; add upscale=2 in {spec!r}")
    if not steps:
        raise refuse(spec, "names no step (upscale, interpolate, deflicker, match)")
    return ordered(steps)


def step_record(step: Step) -> dict[str, Any]:
    """A JSON-ready description of one step for the manifest."""
    record = {"step": STEP_NAMES[type(step)], **asdict(step)}
    return {k: (str(v) if isinstance(v, Fraction) else v) for k, v in record.items()}


def plan_output(steps: Sequence[Step], width: int, height: int, fps: Fraction, frames: int) -> tuple[int, int, Fraction, int]:
    """(width, height, fps, frames) a step list turns an input of that format into."""
    for step in ordered(steps):
        if isinstance(step, InterpolateConfig):
            new_fps = output_fps(step, fps)
            frames, fps = output_frame_count(frames, fps, new_fps), new_fps
        elif isinstance(step, UpscaleConfig):
            width, height = width * step.factor, height * step.factor
    return width, height, fps, frames


def enhanced_name(path: str | Path) -> Path:
    """shots/a.mp4 → shots/a_enhanced.mp4."""
    path = Path(path)
    return path.with_name(f"{path.stem}{ENHANCED_SUFFIX}{path.suffix}")


def manifest_path_for(out_path: Path) -> Path:
    """Where the manifest of an enhanced file goes: <stem>.enhance.json beside it."""
    return out_path.with_name(f"{out_path.stem}.enhance.json")


# --------------------------------------------------------------------------- the run


def _sampled(frames: Iterator[np.ndarray], count: int, keep: int = STATS_FRAMES) -> list[np.ndarray]:
    """At most `keep` evenly spread frames of a stream of `count` (statistics need no more)."""
    stride = max(1, -(-count // keep))
    return [frame for i, frame in enumerate(frames) if i % stride == 0]


def _chain(frames: Iterator[np.ndarray], steps: Sequence[Step], src: Path, info, stats: dict,
           ctx: RunContext | None = None) -> Iterator[np.ndarray]:
    """Wire the lazily evaluated step generators onto the decoded frames.

    The upscale step (always last) may interleave Progress events with its frames
    (diffusion re-render: loading and denoising steps); the writer loop passes them on.
    The H3 re-render is not chained: it needs the whole clip at once (``enhance_iter`` runs it).
    """
    count, fps = info.frames, info.fps
    for step in steps:
        if isinstance(step, MatchColourConfig):
            reference = Path(step.reference)
            target = lab_stats(decode_frames(reference, max_side=STATS_SIDE))
            thumbs = _sampled(decode_frames(src, max_side=STATS_SIDE), info.frames)
            transfer = fit_transfer(thumbs, target)
            stats["match_colour"] = {"source": asdict(lab_stats(thumbs)), "reference": asdict(target),
                                     "transfer": asdict(transfer)}
            frames = match_colour_frames(frames, transfer, step.strength)
        elif isinstance(step, DeflickerConfig):
            frames = deflicker_frames(frames, step)
        elif isinstance(step, H3RerenderConfig):
            raise TypeError("enhance: the H3 re-render runs on the whole clip, not in the frame chain")
        elif isinstance(step, InterpolateConfig):
            frames = interpolate_frames(frames, count, fps, step)
            new_fps = output_fps(step, fps)
            count, fps = output_frame_count(count, fps, new_fps), new_fps
        elif isinstance(step, UpscaleConfig):
            frames = upscale_frames(frames, step, ctx, count)
    return frames


def _check_paths(src: Path, dst: Path, steps: Sequence[Step]) -> None:
    """Refuse runs that would read what they write, or name a missing reference."""
    if src.resolve() == dst.resolve():
        raise EncodeError(f"output: {str(dst)!r} is the input; choose another file name")
    for step in steps:
        if isinstance(step, MatchColourConfig) and not Path(step.reference).is_file():
            raise EncodeError(f"match_colour.reference: {step.reference!r} does not exist or is not a file")


def _info_record(path: Path, width: int, height: int, fps: Fraction, frames: int) -> dict[str, Any]:
    """Format of one side of the run for the manifest."""
    return {"path": path.name, "width": width, "height": height, "fps": str(fps), "frames": frames,
            "duration_s": round(float(frames / fps), 6)}


def enhance_iter(
    src: str | Path,
    dst: str | Path,
    steps: Sequence[Step],
    settings: EncodeSettings | None = None,
    ctx: RunContext | None = None,
    shot_id: str | None = None,
    write_manifest: bool = True,
) -> Iterator[Progress | Output]:
    """Enhance src into dst, yielding Progress('enhance', …) per frame; returns EnhanceResult."""
    from daotai import __version__
    from daotai.files import atomic_write_text, sha256_file

    src, dst = Path(src), Path(dst)
    steps = ordered(steps)
    if not steps:
        raise EncodeError("enhance.steps: empty; give at least one of upscale, interpolate, deflicker, match colour")
    _check_paths(src, dst, steps)
    ctx = ctx or RunContext()
    info = probe(src)
    width, height, fps, total = plan_output(steps, info.width, info.height, info.fps, info.frames)
    label = "+".join(STEP_NAMES[type(s)] for s in steps)
    rerender = next((H3Rerender(s, info.width, info.height, info.fps, info.frames) for s in steps
                     if isinstance(s, H3RerenderConfig)), None)
    if rerender is not None:
        rerender.check()  # a clip too long for one generation, an unaccepted licence: refused before any work
    started = time.perf_counter()
    stats: dict[str, Any] = {}
    yield Progress("enhance", shot_id, 0, total, label)
    frames: Iterator[Any] = decode_frames(src)
    if rerender is not None:
        # The model takes the whole clip at once: it runs to the end here (its progress passes on), before the
        # output is opened; the steps after it then work on its frames, made lazily at the clip's size.
        split = steps.index(rerender.config)
        for event in rerender.generate(_chain(frames, steps[:split], src, info, stats, ctx), ctx):
            yield replace(event, shot_id=shot_id)
        frames, later = rerender.frames(), steps[split + 1:]
        stats["rerender"] = rerender.record
    else:
        later = steps
    frames = _chain(frames, later, src, info, stats, ctx)
    from contextlib import nullcontext

    from daotai.encode.audio import copy_audio, mux_audio, probe_audio
    from daotai.files import atomic_path

    # Sound is copied from the input unchanged (same packets, same start) once the picture is
    # written: interpolation and upscaling keep the clip's duration, so it stays in sync. A clip
    # without sound that MiniMax-H3 re-rendered gets the sound it generated.
    sound = probe_audio(src)
    generated = rerender is not None and sound is None and rerender.audio is not None
    try:
        with (atomic_path(dst) if sound is not None or generated else nullcontext(dst)) as picture, \
                VideoWriter(picture, width, height, fps, settings) as writer:
            for frame in frames:
                ctx.check()
                if isinstance(frame, Progress):  # a step's own progress (model loading, denoising)
                    yield replace(frame, shot_id=shot_id)
                    continue
                writer.write(frame)
                yield Progress("enhance", shot_id, writer.frames_written, total, label)
            if writer.frames_written != total:  # guards the frame-count arithmetic above
                raise EncodeError(f"{str(dst)!r}: wrote {writer.frames_written} frames, planned {total}")
            writer.close()
            if sound is not None:
                copy_audio(src, picture)
            elif generated:
                assert rerender is not None and rerender.audio is not None
                mux_audio(picture, np.clip(rerender.audio.T, -1.0, 1.0), rerender.rate)
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            close()  # stops the decoder and every step generator now, not at garbage collection
    seconds = time.perf_counter() - started
    manifest = {
        "daotai": __version__,
        "input": {**_info_record(src, info.width, info.height, info.fps, info.frames), "sha256": sha256_file(src)},
        **({"audio": {"copied_from_input": True, "codec": sound.codec, "rate": sound.rate,
                      "channels": sound.channels, "duration_s": sound.duration_s}} if sound is not None else {}),
        **({"audio": {"generated_by": "rerender (h3)", "rate": rerender.rate, "channels": rerender.audio.shape[0],
                      "duration_s": round(rerender.audio.shape[1] / rerender.rate, 6)}}
           if generated and rerender is not None and rerender.audio is not None else {}),
        "output": {**_info_record(dst, width, height, fps, total), "sha256": sha256_file(dst)},
        "steps": [step_record(s) for s in steps],
        "encode": asdict(settings or EncodeSettings()),
        "seconds": round(seconds, 3),
        "output_fps_rate": round(total / seconds, 2) if seconds > 0 else None,
        **({"statistics": stats} if stats else {}),
    }
    manifest_file = None
    if write_manifest:
        manifest_file = manifest_path_for(dst)
        atomic_write_text(manifest_file, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    yield Output("enhanced", str(dst), shot_id)
    return EnhanceResult(dst, width, height, fps, total, manifest, manifest_file)


def enhance(
    src: str | Path,
    dst: str | Path,
    steps: Sequence[Step],
    settings: EncodeSettings | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    ctx: RunContext | None = None,
    write_manifest: bool = True,
) -> EnhanceResult:
    """Enhance src into dst and return what was written (progress through on_progress)."""
    events = enhance_iter(src, dst, steps, settings, ctx, write_manifest=write_manifest)
    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            return stop.value
        if on_progress is not None and isinstance(event, Progress):
            on_progress(event.done, event.total)


def apply_to_shot(
    path: str | Path,
    steps: Sequence[Step],
    settings: EncodeSettings | None = None,
    ctx: RunContext | None = None,
    shot_id: str | None = None,
) -> Iterator[Progress | Output]:
    """Enhance one shot file into <stem>_enhanced<suffix> beside it; returns EnhanceResult."""
    return (yield from enhance_iter(path, enhanced_name(path), steps, settings, ctx, shot_id, write_manifest=False))


# --------------------------------------------------------------------------- in a render


def _resolve_references(steps: Sequence[Step], out_dir: Path, shot_files: dict[str, str]) -> tuple[Step, ...]:
    """match=<shot id> means that shot's (unenhanced) file in this render."""
    resolved = []
    for step in steps:
        if isinstance(step, MatchColourConfig) and step.reference in shot_files:
            step = replace(step, reference=str(out_dir / shot_files[step.reference]))
        resolved.append(step)
    return tuple(resolved)


def _for_shot(steps: Sequence[Step], shot) -> tuple[Step, ...]:
    """A diffusion re-render in a render is prompted and seeded like the shot (unless told otherwise)."""
    return tuple(
        replace(s, prompt=s.prompt or shot.prompt, seed=shot.seed if s.seed is None else s.seed)
        if isinstance(s, UpscaleConfig) and s.method == "diffusion" else s
        for s in steps
    )


def enhance_render(
    plan, out_dir: Path, shot_files: dict[str, str], steps: Sequence[Step],
    settings: EncodeSettings | None = None, ctx: RunContext | None = None,
) -> Iterator[Progress | Output]:
    """Enhanced copies of every shot of a render, their sequence and enhance.json.

    ``shot_files`` maps shot id → shot file relative to out_dir. Returns the enhance.json
    record (a dict).
    """
    from daotai.files import atomic_write_text
    from daotai.post.assemble import ClipSpec, Transition, assemble, closing_fade_seconds

    out_dir = Path(out_dir)
    ctx = ctx or RunContext()
    steps = _resolve_references(ordered(steps), out_dir, shot_files)
    shots_record = {}
    clips = []
    result = None
    for shot in plan.shots:
        source = out_dir / shot_files[shot.shot_id]
        result = yield from apply_to_shot(source, _for_shot(steps, shot), settings, ctx, shot.shot_id)
        shots_record[shot.shot_id] = {
            "source": shot_files[shot.shot_id],
            "enhanced": result.path.relative_to(out_dir).as_posix(),
            "width": result.width, "height": result.height, "fps": str(result.fps), "frames": result.frames,
            "seconds": result.manifest["seconds"],
        }
        # in seconds (at the plan's rate), so a transition spans the same time at an interpolated rate
        transition = Transition.planned(shot.transition.type, shot.transition.frames, Fraction(*plan.fps_fraction))
        clips.append(ClipSpec(path=result.path, transition_in=transition))
    ctx.check()
    assert result is not None  # a plan has at least one shot
    layout = RenderLayout(out_dir, result.path.suffix, enhanced=True)
    sequence = layout.path("sequence_enhanced")

    def check(done: int, total: int) -> None:
        """Let a cancel stop the assembly between frames."""
        ctx.check()

    yield Progress("assemble", None, 0, 1, "enhanced")
    # the film's closing fade, in seconds so it spans the same time at an interpolated frame rate
    closing = closing_fade_seconds(plan.fade_out.frames, Fraction(*plan.fps_fraction)) if plan.fade_out is not None else 0.0
    assembled = assemble(clips, sequence, result.fps, settings, on_progress=check, fade_out_s=closing)
    yield Progress("assemble", None, 1, 1, "enhanced")
    yield Output("sequence_enhanced", str(sequence))
    record = {
        "steps": [step_record(s) for s in steps],
        "note": "shots/<id>.mp4 and sequence.mp4 are the render as planned (checked by qc.json); "
                "the *_enhanced files are restored copies with the format below",
        "shots": shots_record,
        "sequence": {"path": sequence.name, "width": assembled.width, "height": assembled.height,
                     "fps": str(assembled.fps), "frames": assembled.frames},
    }
    atomic_write_text(layout.path("enhance_manifest"), json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    yield Output("enhance_manifest", str(layout.path("enhance_manifest")))
    return record


# --------------------------------------------------------------------------- still images
#
# A still (a storyboard frame, a character reference, a poster) takes the steps that make sense
# for one picture: colour match to a reference (an image or a clip), denoise, upscale — in that
# order, for the reasons the video order has. Deflicker and interpolation need time; the
# diffusion upscale is a video-to-video re-render: each is refused for a still.

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp")
DENOISE_TEMPLATE = 7  # OpenCV non-local means: patch side in pixels (its documented default)
DENOISE_SEARCH = 21  # … and search window side (its documented default)


@dataclass(frozen=True)
class DenoiseConfig:
    """Still-image denoise step: OpenCV non-local means; ``strength`` is its filter strength h (1..30)."""

    strength: float = 5.0

    def __post_init__(self) -> None:
        s = self.strength
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 1.0 <= s <= 30.0:
            raise EncodeError(f"denoise.strength: {s!r} must be a number in [1, 30]")


ImageStep = Union[MatchColourConfig, DenoiseConfig, UpscaleConfig]
IMAGE_ORDER = (MatchColourConfig, DenoiseConfig, UpscaleConfig)
IMAGE_STEP_NAMES = {MatchColourConfig: "match_colour", DenoiseConfig: "denoise", UpscaleConfig: "upscale"}


def is_image(path: str | Path) -> bool:
    """Whether a file name is a still image daotai enhances (by its suffix)."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def image_steps(steps: Sequence[Any]) -> tuple[ImageStep, ...]:
    """Steps for a still in their fixed order; video-only steps are refused (EncodeError names them)."""
    seen: dict[type, Any] = {}
    for step in steps:
        kind = type(step)
        if kind in (DeflickerConfig, InterpolateConfig):
            raise EncodeError(f"enhance.steps: {STEP_NAMES[kind]} works on video (it needs frames over time); "
                              "a still image takes match colour, denoise and upscale")
        if kind not in IMAGE_STEP_NAMES:
            raise TypeError(f"enhance.steps: {step!r} is not an image enhancement step")
        if kind in seen:
            raise EncodeError(f"enhance.steps: {IMAGE_STEP_NAMES[kind]} given twice; give each step once")
        if kind is UpscaleConfig and step.method == "diffusion":
            raise EncodeError("upscale.method: 'diffusion' re-renders video; for a still use classical, lanczos "
                              "or spandrel")
        seen[kind] = step
    if not seen:
        raise EncodeError("enhance.steps: empty; give at least one of match colour, denoise, upscale")
    return tuple(seen[kind] for kind in IMAGE_ORDER if kind in seen)


def _read_image(path: Path) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    """(RGB (H, W, 3) uint8, alpha (H, W) uint8 or None, the info worth keeping: ICC profile)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.load()
            alpha = np.asarray(image.getchannel("A")) if "A" in image.getbands() else None  # (H, W) uint8
            rgb = np.asarray(image.convert("RGB"))  # (H, W, 3) uint8
            keep = {k: image.info[k] for k in ("icc_profile",) if image.info.get(k)}
    except FileNotFoundError:
        raise EncodeError(f"input: {str(path)!r} does not exist") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise EncodeError(f"input: {str(path)!r} is not an image Pillow can read ({exc})") from None
    return np.ascontiguousarray(rgb), alpha, keep


def _reference_frames(path: Path) -> list[np.ndarray]:
    """A colour reference as frames: an image is one, a clip gives its decoded thumbnails."""
    if is_image(path):
        return [_read_image(path)[0]]
    return list(decode_frames(path, max_side=STATS_SIDE))


def _denoise(frame: np.ndarray, step: DenoiseConfig) -> np.ndarray:
    """Non-local means on colour; OpenCV reads BGR, so the channels are swapped around it."""
    import cv2

    bgr = np.ascontiguousarray(frame[..., ::-1])
    h = float(step.strength)
    clean = cv2.fastNlMeansDenoisingColored(bgr, None, h, h, DENOISE_TEMPLATE, DENOISE_SEARCH)
    return np.ascontiguousarray(clean[..., ::-1])


def _encode_image(rgb: np.ndarray, alpha: np.ndarray | None, suffix: str, keep: dict[str, Any]) -> bytes:
    """The picture in the format its suffix names (JPEG at quality 95; alpha kept where the format has it)."""
    from io import BytesIO

    from PIL import Image

    image = Image.fromarray(rgb, "RGB")
    fmt = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".webp": "WEBP", ".tif": "TIFF", ".tiff": "TIFF",
           ".bmp": "BMP"}[suffix]
    if alpha is not None and fmt in ("PNG", "WEBP", "TIFF"):
        image.putalpha(Image.fromarray(alpha, "L"))
    options: dict[str, Any] = dict(keep)
    if fmt == "JPEG":
        options.update(quality=95, subsampling=0)
    elif fmt == "WEBP":
        options.update(quality=95)
    buffer = BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def enhance_image(src: str | Path, dst: str | Path, steps: Sequence[Any], write_manifest: bool = True) -> EnhanceResult:
    """Enhance a still image into ``dst`` (match colour → denoise → upscale); writes it atomically.

    Alpha is kept (resized with the picture) where the output format has it; the ICC profile is
    carried over. Like a clip, the run writes ``<output stem>.enhance.json`` unless asked not to.
    """
    import cv2

    from daotai import __version__
    from daotai.files import atomic_write_bytes, atomic_write_text, sha256_file

    src, dst = Path(src), Path(dst)
    steps = image_steps(steps)
    if not is_image(dst):
        raise EncodeError(f"output: {str(dst)!r} must be an image file ({', '.join(IMAGE_SUFFIXES)}) for an image input")
    _check_paths(src, dst, steps)
    started = time.perf_counter()
    frame, alpha, keep = _read_image(src)  # (H, W, 3) uint8, (H, W) uint8 | None
    height, width = frame.shape[:2]
    stats: dict[str, Any] = {}
    for step in steps:
        if isinstance(step, MatchColourConfig):
            target = lab_stats(_reference_frames(Path(step.reference)))
            transfer = fit_transfer([frame], target)
            stats["match_colour"] = {"source": asdict(lab_stats([frame])), "reference": asdict(target),
                                     "transfer": asdict(transfer)}
            frame = next(match_colour_frames([frame], transfer, step.strength))
        elif isinstance(step, DenoiseConfig):
            frame = _denoise(frame, step)
        else:
            frame = list(upscale_frames(iter([frame]), step, None, 1))[0]  # run to the end: frees a model
            if alpha is not None:
                alpha = cv2.resize(alpha, (frame.shape[1], frame.shape[0]), interpolation=cv2.INTER_CUBIC)
    atomic_write_bytes(dst, _encode_image(frame, alpha, dst.suffix.lower(), keep))
    out_height, out_width = frame.shape[:2]
    records = [{"step": IMAGE_STEP_NAMES[type(s)], **asdict(s)} for s in steps]
    manifest = {
        "daotai": __version__,
        "input": {"path": src.name, "width": width, "height": height, "alpha": alpha is not None,
                  "sha256": sha256_file(src)},
        "output": {"path": dst.name, "width": out_width, "height": out_height, "sha256": sha256_file(dst)},
        "steps": records,
        "seconds": round(time.perf_counter() - started, 3),
        **({"statistics": stats} if stats else {}),
    }
    manifest_file = None
    if write_manifest:
        manifest_file = manifest_path_for(dst)
        atomic_write_text(manifest_file, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return EnhanceResult(dst, out_width, out_height, Fraction(0), 1, manifest, manifest_file)
