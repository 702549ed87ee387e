"""`wan-vace-mlx` backend: Wan-VACE in MLX, guided by the shot's previz depth and the characters' looks.

The Mac's camera-controlled route: what `wan-vace` does with diffusers, on the MLX stack of
`wan-mlx` (no torch at run time). Its inputs are made by the same code as `wan-vace`'s
(:class:`daotai.render.wan_vace.VACEControls`): the previz depth preview at the model's native
frame times and size is the control video, and each character in the shot gives one reference
image (its first script reference, else a swatch of its previz colour). They are encoded by the
MLX VAE encoder as diffusers' WanVACEPipeline encodes them (:mod:`daotai.mlx.vace`) and drive the
control blocks on every step. No mask: the model generates every pixel.

Everything else is `wan-mlx`'s: the model folder (diffusers Wan-VACE, or converted to 4/8-bit with
``daotai models convert <model> --to mlx``), seeded PCG64 noise (with one extra latent frame per
reference image, dropped before decoding), the folder's sampler, the step cache of ``--speed fast``,
health samples and ``--adaptive``, and the memory plan, which counts the reference frames and the
control branch and refuses before anything loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
from pydantic import Field

from daotai.errors import BackendError
from daotai.events import Event, Progress
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.request import NativeRequest
from daotai.render.spec import BackendEnv, BackendSpec
from daotai.render.wan_mlx import WanMLXBackend, WanMLXOptions
from daotai.render.wan_vace import VACEControls


class WanVACEMLXOptions(WanMLXOptions):
    """Options of the `wan-vace-mlx` backend: wan-mlx's plus the weight of the control."""

    conditioning_scale: float = Field(1.0, ge=0.0, le=4.0, description="weight of the previz depth control")


class WanVACEMLXBackend(WanMLXBackend):
    """Depth- and reference-conditioned Wan-VACE in MLX; models load at the first shot and stay."""

    name = "wan-vace-mlx"
    family = "wan-vace"

    def __init__(self, options: WanVACEMLXOptions | None = None, *, env: BackendEnv | None = None,
                 **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        env = env or BackendEnv()
        super().__init__(options, env=env)
        self.model = options.model or SPEC.default_model or ""
        self.controls = VACEControls(env.reference_root or Path.cwd())

    @property
    def spec(self) -> BackendSpec:
        return SPEC

    def _prepare(self) -> None:
        """wan-mlx's preparation, refusing a folder whose transformer has no VACE layers before loading."""
        from daotai.mlx.weights import read_config

        super()._prepare()
        assert self.setup is not None
        folder = self.setup["folder"]
        layers = read_config(folder / "transformer").get("vace_layers")
        if not layers:
            raise BackendError(f"wan-vace-mlx: {folder} is not a Wan-VACE model (its transformer config names no "
                               "vace_layers); use --backend wan-mlx for text-to-video folders")
        self.setup["vace_layers"] = len(layers)

    def _load(self, shot_id: str) -> Iterator[Event]:
        """wan-mlx's models plus the VAE encoder, which turns the control video and references into latents."""
        from daotai.mlx.pipeline import load_vae_encoder

        yield from super()._load(shot_id)
        assert self.parts is not None and self.setup is not None
        self.parts["vae_encoder"] = load_vae_encoder(self.setup["folder"] / "vae")

    def _extra_latent_frames(self, job: RenderJob) -> int:
        """One latent frame per reference image, i.e. per character in the shot."""
        return len(job.shot.characters)

    def _shot_model(self, job: RenderJob, ctx: RunContext, request: NativeRequest) -> Iterator[Event]:
        """Render the previz depth, gather the references, encode them; return the transformer bound to them."""
        from daotai.mlx.vace import ControlledModel, control_latents, frames_to_video, reference_canvas

        assert self.parts is not None and self.setup is not None
        video, references = yield from self.controls.prepare(job, ctx, request)
        if len(references) != self._extra_latent_frames(job):
            raise BackendError(f"{job.shot.shot_id}: {len(references)} reference images for "
                               f"{len(job.shot.characters)} characters")
        ctx.check()
        yield Progress("control", job.shot.shot_id, 0, 1, "encoding the control video and references")
        frames = [np.asarray(image.convert("RGB")) for image in video]  # each (H, W, 3) uint8
        canvases = [reference_canvas(image, request.height, request.width) for image in references]
        control = control_latents(self.parts["vae_encoder"], frames_to_video(frames), canvases)
        yield Progress("control", job.shot.shot_id, 1, 1, f"control latents {tuple(control.shape)}")
        scale = (float(self.options.conditioning_scale),) * self.setup["vace_layers"]
        return ControlledModel(self.parts["transformer"], control, scale)

    def close(self) -> None:
        """Drop the models and the previz GL context."""
        super().close()
        self.controls.close()


SPEC = BackendSpec(
    name="wan-vace-mlx",
    factory="daotai.render.wan_vace_mlx:WanVACEMLXBackend",
    options=WanVACEMLXOptions,
    summary="Wan-VACE in MLX (Apple Silicon GPU; the CPU elsewhere) guided by the previz depth and the "
            "characters' reference images",
    family="wan-vace",
    general_fast_choices=True,  # the general cadence, as wan-mlx's (WanMLXBackend._computed_steps says why)
    device_class="apple",
    footage=True,
    default_model="wan2.1-vace-1.3b",
)
