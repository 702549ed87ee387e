"""H3 re-render of a finished clip (``daotai enhance --method h3 --strength S``).

A clip — a phone rehearsal, a rough cut, an old take — is re-shot by MiniMax-H3 keeping its
composition and motion in proportion to how little is re-rendered:

1. its frames are sampled onto MiniMax-H3's 24 fps, resized to the model's canvas for the clip's
   aspect ratio and held on the last frame up to the 17n+5 frames (at least 5 s) one generation
   takes; the video VAE encodes them to latents x0 (1, 24, F', h', w') with the recipe the
   pipeline uses for its own conditioning (``encode_vae_condition``);
2. the flow-matching schedule of ``steps`` sigma points has N = steps - 1 forwards; the last
   k = int(N x strength) of them run. The latents are noised to the sigma where they start,
   x = (1 - sigma) x0 + sigma noise (strength 1: sigma = 1, pure noise, a whole generation);
3. the H3 blocks run as in the ``h3`` backend, with ``latents`` = x and the timestep plans cut to
   their last k entries (:mod:`daotai.render.h3_partial`); the decoders make video and sound;
4. the frames are cut to the clip's duration, retimed onto its frame rate and resized to its size:
   the output has the clip's format, so the other enhance steps and the sound copy still apply.

Sound: the clip's own sound is kept when it has one; otherwise the generated sound (denoised over
a whole schedule of k forwards beside the video's tail) is the output's.

Characters and prompt come as in the ``h3`` backend: with ``script`` and ``shot``, the shot's
characters are picture references (ref2va: each one's first reference image, subject first, a swatch
of its colour for one without) when any of them has a reference image, and the prompt is that
shot's MiniMax-H3 prompt (no ``<Video 1>``: the clip itself is the start). Without a script the
prompt is ``prompt`` (or a generic one) and the workflow t2va.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from daotai import catalog
from daotai.errors import EncodeError
from daotai.events import Progress
from daotai.render.base import RunContext

__all__ = ["DEFAULT_PROMPT", "DEFAULT_STRENGTH", "H3RerenderConfig", "H3Rerender", "denoise_count", "forwards_of",
           "noised", "start_sigma"]

FAMILY = "h3"
DEFAULT_MODEL = "minimax-h3"
DEFAULT_STRENGTH = 0.3  # as the diffusion re-render: keeps composition and motion, re-renders surface and light
# Without a prompt (and no script) the model is steered toward a clean picture of what is there.
DEFAULT_PROMPT = "the same scene, sharp, detailed, natural light, high quality video"
NATIVE_FPS = 24.0  # MiniMax-H3 generates at a fixed 24 fps


def forwards_of(steps: int) -> int:
    """Transformer forwards of a schedule of ``steps`` sigma points (its terminal 0 takes none)."""
    return max(1, steps - 1)


def denoise_count(forwards: int, strength: float) -> int:
    """Forwards a re-render runs: the last int(forwards x strength) of the schedule."""
    return min(int(forwards * strength), forwards)


def start_sigma(sigmas: Any, forwards: int, count: int) -> float:
    """The sigma the last ``count`` of ``forwards`` steps start from (``sigmas``: the schedule, terminal 0 last)."""
    return float(sigmas[forwards - count])


def noised(x0: Any, noise: Any, sigma: float) -> Any:
    """Flow matching's forward process: x = (1 - sigma) x0 + sigma noise (same shape as x0)."""
    return (1.0 - sigma) * x0 + sigma * noise


@dataclass(frozen=True)
class H3RerenderConfig:
    """Re-render step: MiniMax-H3 re-renders the clip at ``strength`` (0 < strength <= 1) of its schedule."""

    strength: float = DEFAULT_STRENGTH
    method: str = "h3"  # recorded in the manifest beside the strength and seed
    steps: int | None = None  # sigma points of the schedule (None: the model's, 50); int((steps - 1) x strength) run
    model: str | None = None  # registry name or a MiniMax-H3 diffusers folder (None: minimax-h3)
    prompt: str | None = None  # what the clip shows (without a script)
    seed: int | None = None  # noise seed (None: 0)
    device: str | None = None  # auto | cuda | cuda:N | mps | cpu
    script: str | None = None  # a daotai script: its characters and the shot's prompt
    shot: str | None = None  # the script's shot the clip is
    accept_licence: bool = False  # the model's licence (recorded once, as the h3 backend records it)

    def __post_init__(self) -> None:
        s = self.strength
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or not 0.0 < s <= 1.0:
            raise EncodeError(f"rerender.strength: {s!r} must be a number in (0, 1] (1 = a whole new generation)")
        if self.method != "h3":
            raise EncodeError(f"rerender.method: {self.method!r} must be 'h3'")
        n = self.steps
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 1000):
            raise EncodeError(f"rerender.steps: {n!r} must be an integer between 2 and 1000 (sigma points)")
        if self.model is None:
            object.__setattr__(self, "model", DEFAULT_MODEL)
        if self.seed is None:
            object.__setattr__(self, "seed", 0)
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise EncodeError(f"rerender.seed: {seed!r} must be an integer in [0, 2**64)")
        if n is not None and denoise_count(forwards_of(n), s) == 0:
            raise EncodeError(
                f"rerender.steps: {n} sigma points ({forwards_of(n)} forwards) at strength {s:g} run no step "
                f"(int(forwards x strength) = 0); use at least {math.ceil(1 / s) + 1} steps or a higher strength")
        if (self.script is None) != (self.shot is None):
            given = "script" if self.script is not None else "shot"
            raise EncodeError(f"rerender.{given}: --script and --shot go together (the shot of the script the clip is)")
        if self.script is not None and self.prompt is not None:
            raise EncodeError("rerender.prompt: the prompt comes from the script's shot; give --prompt or "
                              "--script with --shot, not both")


@dataclass(frozen=True)
class ClipLabel:
    """What the runner reads of a shot while it generates: the id its progress is labelled with."""

    shot_id: str


@dataclass
class H3Rerender:
    """One re-render run: feed it the clip's frames, read what it decided (``record``) and its sound after."""

    config: H3RerenderConfig
    width: int  # the clip's size and rate: the output keeps them
    height: int
    fps: Fraction
    count: int  # frames of the clip
    record: dict[str, Any] = field(default_factory=dict)  # the manifest's account of the run
    audio: np.ndarray | None = None  # (C, N) float32: the generated sound, cut to the clip's duration
    rate: int = 0
    licence: str | None = None  # the licence acceptance line (check)
    _native: np.ndarray | None = field(default=None, repr=False)  # the generated frames at 24 fps (generate)
    _shot: tuple[Any, Any] = field(default=(None, None), repr=False)  # (plan, shot) of the script (check)

    def check(self) -> None:
        """Refuse a clip one generation cannot hold, a script or shot that cannot be read, or an unaccepted licence,
        before anything is written or loaded."""
        from daotai.render.h3_options import check_licence

        snap = catalog.family(FAMILY).snap
        seconds = self.count / self.fps
        if seconds > (snap.max_seconds or 0.0):
            raise EncodeError(f"rerender: the clip is {float(seconds):.2f} s; MiniMax-H3 re-renders at most "
                              f"{snap.max_seconds:g} s in one generation: cut the clip and re-render each part")
        assert self.config.model is not None
        self._shot = self._script_shot()
        self.licence = check_licence(self.config.model, self.config.accept_licence, "rerender.accept_licence",
                                     "--accept-licence")

    def generate(self, source: Iterable[np.ndarray], ctx: RunContext | None = None,
                 label: str = "rerender") -> Iterator[Progress]:
        """Re-render the clip's frames (``source``: (H, W, 3) uint8 each), yielding progress (loading, encoding,
        denoising); then ``frames`` gives the result and ``record``/``audio`` say what was done. Call ``check``
        first."""
        from daotai.render.h3_options import H3Options
        from daotai.render.h3_partial import PARTIAL_INPUT, partial_blocks
        from daotai.render.h3_runner import FRAMES_PER_PICTURE, Generation, H3Runner
        from daotai.render.neural.retime import resize_rgb, retime_indexes

        ctx = ctx or RunContext()
        config = self.config
        clip = np.stack(list(source))  # (F, H, W, 3) uint8 at the clip's rate
        if len(clip) != self.count:
            raise EncodeError(f"rerender: the decoder gave {len(clip)} frames, the clip has {self.count}")
        plan, shot = self._shot
        options = H3Options(model=config.model, device=config.device, steps=config.steps,
                            accept_licence=config.accept_licence)
        runner = H3Runner(options, DEFAULT_MODEL)
        runner.blocks = partial_blocks
        try:
            defaults = runner.prepare()
            native = _native_frames(self.count, self.fps)
            generated = _generated_frames(native)
            pictures = self._pictures(plan, shot)
            workflow = "ref2va" if pictures else "t2va"
            yield from _progress(runner.start((self.width, self.height), {workflow}, generated,
                                              FRAMES_PER_PICTURE * len(pictures), label))
            yield from _progress(runner.load_missing({workflow}, label))
            canvas = runner.canvas_of(self.width, self.height)
            ctx.check()
            picks = retime_indexes(self.count, float(self.fps), native, NATIVE_FPS)  # clip frame per 24 fps frame
            shown = [resize_rgb(clip[i], *canvas) for i in picks]
            shown += [shown[-1]] * (generated - len(shown))  # held on the last frame up to 17n+5
            yield Progress("encode", label, 0, 1, "encoding the clip")
            x0 = _encode(runner.pipe, np.stack(shown))  # (1, C, F', h', w') float32
            yield Progress("encode", label, 1, 1)
            sigmas = _sigmas(runner.pipe, defaults.steps)
            forwards = len(sigmas) - 1
            count = denoise_count(forwards, config.strength)
            if count == 0:
                raise EncodeError(f"rerender.steps: {defaults.steps} sigma points ({forwards} forwards) at strength "
                                  f"{config.strength:g} run no step; use more steps or a higher strength")
            sigma = start_sigma(sigmas, forwards, count)
            import torch

            from daotai.runtime.device import generator_for

            noise = torch.randn(x0.shape, generator=generator_for(config.seed), dtype=torch.float32)
            inputs: dict[str, Any] = {"latents": noised(x0, noise, sigma), PARTIAL_INPUT: count}
            prompt, order = self._prompt(plan, shot, workflow, pictures)
            if pictures:
                from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3ImageReference

                inputs["references"] = [MiniMaxH3ImageReference(image=p.image) for p in pictures]
            generation = Generation(workflow, prompt, generated, canvas[0], canvas[1], config.seed, inputs, order)
            result = None
            for item in runner.generate_h3(ClipLabel(label), generation, ctx, forwards=count):
                if isinstance(item, tuple):
                    result = item[1]
                elif isinstance(item, Progress):
                    yield item
            assert result is not None
        finally:
            runner.close()
        seconds = self.count / self.fps
        samples = int(round(float(seconds) * result.rate))
        sound = result.audio[:, :samples]
        self.audio = np.pad(sound, ((0, 0), (0, samples - sound.shape[1]))) if sound.shape[1] < samples else sound
        self.rate = result.rate
        self._native = result.frames[:native]  # (F24, h, w, 3) uint8 at the canvas, the clip's duration
        self.record = {
            "model": str(runner.model), "workflow": workflow, "prompt": prompt, "references": order,
            "canvas": list(canvas), "generated_frames": generated, "schedule_forwards": forwards,
            "denoised_forwards": count, "start_sigma": round(sigma, 6),
            "shot": shot.shot_id if shot is not None else None, **({"licence": self.licence} if self.licence else {}),
        }

    def frames(self) -> Iterator[np.ndarray]:
        """The re-rendered clip: its frame count at its rate and size, (H, W, 3) uint8 each, made lazily."""
        from daotai.render.neural.retime import resize_rgb, retime_frames

        if self._native is None:
            raise EncodeError("rerender: frames asked for before the clip was generated")
        for frame in retime_frames(self._native, NATIVE_FPS, self.count, float(self.fps)):
            yield resize_rgb(frame, self.width, self.height)

    # -------------------------------------------------------------- script, pictures, prompt

    def _script_shot(self) -> tuple[Any, Any]:
        """(plan, shot) of the config's script, or (None, None) without one."""
        config = self.config
        if config.script is None:
            return None, None
        from daotai.plan.planner import plan_script
        from daotai.script.load import load_script

        plan = plan_script(load_script(Path(config.script)))
        shot = next((s for s in plan.shots if s.shot_id == config.shot), None)
        if shot is None:
            raise EncodeError(f"rerender.shot: {config.shot!r} is not a shot of {config.script!r} "
                              f"({', '.join(s.shot_id for s in plan.shots)})")
        return plan, shot

    def _pictures(self, plan: Any, shot: Any) -> list[Any]:
        """The shot's characters as pictures (subject first) when one of them has a reference image, else none."""
        if shot is None:
            return []
        from daotai.plan.prompt import h3_pictures
        from daotai.render.neural.references import character_picture

        looks = {c.id for c in plan.characters if c.reference_images}
        if not looks & set(h3_pictures(shot)):
            return []
        root = Path(self.config.script or ".").expanduser().resolve().parent  # reference paths are read beside it
        return [character_picture(plan, c, root) for c in h3_pictures(shot)]

    def _prompt(self, plan: Any, shot: Any, workflow: str, pictures: list[Any]) -> tuple[str, str]:
        """The prompt and the references in order (as recorded)."""
        if shot is None:
            return self.config.prompt or DEFAULT_PROMPT, "none (prompt only)"
        from daotai.plan.prompt import compose_h3_prompt

        prompt = compose_h3_prompt(plan, shot, workflow, tuple((p.character, not p.swatch) for p in pictures))
        order = ", ".join(f"<Picture {i}> {p.character} ({p.source})" for i, p in enumerate(pictures, start=1))
        return prompt, order or "none (prompt only)"


# ------------------------------------------------------------------ helpers


def _native_frames(frames: int, fps: Fraction) -> int:
    """The clip's length in frames at 24 fps."""
    from daotai.plan.timing import frames_for

    return frames_for(float(frames / fps), NATIVE_FPS)


def _generated_frames(native: int) -> int:
    """Frames one generation makes for ``native`` frames: at least the model's shortest, snapped to 17n+5."""
    from daotai.plan.timing import snap_frames

    snap = catalog.family(FAMILY).snap
    assert snap.frame_step and snap.min_seconds
    shortest = math.ceil(snap.min_seconds * NATIVE_FPS)
    return snap_frames(max(native, shortest), snap.frame_step, snap.frame_offset)


def _encode(pipe: Any, frames: np.ndarray) -> Any:
    """(F, h, w, 3) uint8 at the canvas → normalised latents (1, C, F', h', w') float32 on the CPU."""
    import torch
    from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition

    vae = pipe.vae
    device = next(vae.parameters()).device  # where the VAE's weights are (an offload tier keeps them on the host)
    pixels = torch.from_numpy(np.ascontiguousarray(frames)).to(device).permute(3, 0, 1, 2)[None]  # (1, 3, F, h, w)
    with torch.no_grad():
        return encode_vae_condition(vae, pixels, pipe.pixel_mean, pipe.pixel_std, pipe.keyframe_encode_seed)


def _sigmas(pipe: Any, steps: int) -> Any:
    """The video schedule's sigmas for ``steps`` sigma points (terminal 0 last), as the pipeline will build it."""
    pipe.scheduler.set_timesteps(steps)
    return pipe.scheduler.sigmas.cpu()


def _progress(events: Iterator[Any]) -> Iterator[Progress]:
    """Only the Progress events of a loading stream (its notices are the backend's manifest lines)."""
    for event in events:
        if isinstance(event, Progress):
            yield event

