"""`wan-camera` backend: Wan driven by the plan's exact camera through a Control-Camera adapter.

The Wan-Fun Control-Camera checkpoints (alibaba-pai, Apache-2.0) condition Wan on a camera
path given as Plücker rays: for every generated frame and pixel, the ray's moment ``o x d``
and unit direction ``d`` (6 channels), expressed in the first frame's camera with OpenCV axes
(x right, y down, +z forward), as CameraCtrl/RealEstate10K poses are. The rays of every
``stride`` consecutive frames (the VAE's temporal stride; the first frame repeated ``stride``
times, so 4k+1 frames make k+1 groups) are stacked into ``6 * stride`` channels per latent
frame; the adapter unshuffles each latent frame's pixels onto the latent grid (PixelUnshuffle
by the VAE's spatial stride), projects them to the transformer's width with a convolution the
size of the patch, refines them with residual blocks, and its output is added to the output of
the transformer's patch embedding.

Here the rays come from the plan (``daotai.plan.geometry``: the same cameras previz renders
and QC checks), sampled at the model's native frame times with the rule the frames are retimed
back with. The adapter is this module's own torch implementation of that architecture; its
weights are read from the published checkpoint's names (``control_adapter.*``) by
:func:`map_published_adapter`. The adapter is hooked onto diffusers' ``WanTransformer3DModel``
(a forward hook on ``patch_embedding``), so the pipeline stays diffusers' own ``WanPipeline`` or
``WanImageToVideoPipeline``, loaded through daotai's checked loader.

The published checkpoints come in VideoX-Fun's layout (the transformer in the original Wan
naming with its ``control_adapter.*`` tensors, as safetensors; the VAE and encoders as pickles,
which daotai refuses). ``-O checkpoint=<that folder>`` takes the transformer from it (renamed by
diffusers' own Wan conversion, geometry read from the tensors) into a diffusers Wan folder of the
same base (``-O model=``: VAE, text and image encoders, scheduler). The safetensors headers are
checked and the files' sha256 recorded in the shot's notice.

Where the adapter's weights are found, in this order: the ``adapter`` option (a safetensors
file: only its ``control_adapter.*`` tensors are read), the ``checkpoint``,
``camera_adapter/*.safetensors`` in the model folder (``camera_adapter_2/`` for a second,
low-noise transformer), or ``control_adapter.*`` tensors kept in the folder's ``transformer/``
weights.

Input layouts. Fun checkpoints take the noisy latents and, beside them, the latents of a start
image (frame 0 encoded, zeros after): ``in_channels`` twice the VAE's. Through a
``WanPipeline`` those start latents are made here from the shot's first previz frame (or are
zeros with ``first_frame=none``); through a ``WanImageToVideoPipeline`` the previz frame is the
pipeline's ``image`` and its conditioning (mask + latents) is reduced to that layout. A
transformer with image cross-attention that gets no image features is given zero features, as
the Fun pipelines do without a CLIP image.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np
from pydantic import Field

from daotai.errors import BackendError
from daotai.events import Event, Frame, Notice, Progress
from daotai.plan import geometry
from daotai.plan.model import ShotPlan
from daotai.render.base import RenderJob, RunContext
from daotai.render.neural.request import NativeRequest
from daotai.render.neural.retime import plan_to_native_indexes, resize_rgb
from daotai.render.neural.runner import DiffusersShotRunner, render_shot
from daotai.render.spec import BackendEnv, BackendSpec, DiffusersOptions

PLUCKER_CHANNELS = 6  # (moment o x d, unit direction d)
CLIP_TOKENS = 257  # image tokens of the CLIP ViT-H/14 encoder the Fun I2V checkpoints were trained with
MASK_CHANNELS = 4  # diffusers' Wan image-to-video conditioning: 4 mask channels, then the image latents
PUBLISHED_PREFIX = "control_adapter."
# Prefixes repackaged checkpoints put before the model's own names (ComfyUI, single-file exports).
CHECKPOINT_PREFIXES = ("model.diffusion_model.", "diffusion_model.", "model.", "transformer.")
ADAPTER_FOLDERS = {"transformer": "camera_adapter", "transformer_2": "camera_adapter_2"}


class WanCameraOptions(DiffusersOptions):
    """Options of the `wan-camera` backend."""

    adapter_scale: float = Field(1.0, ge=0.0, le=4.0, description="weight of the camera adapter's output (0: no camera)")
    adapter: str | None = Field(
        None, description="safetensors file holding the camera adapter (control_adapter.*), e.g. the published "
                          "Control-Camera checkpoint; None: the model folder's own camera_adapter/ or transformer/")
    checkpoint: str | None = Field(
        None, description="the published Control-Camera checkpoint (VideoX-Fun layout: a folder with "
                          "diffusion_pytorch_model*.safetensors, or one such file): its transformer replaces the "
                          "model folder's and its control_adapter.* tensors are the adapter")
    first_frame: Literal["auto", "previz", "none"] = Field(
        "auto", description="auto/previz: the shot's first previz frame starts the video (image-to-video input or "
                            "start latents); none: no start image")
    translation_scale: float = Field(
        1.0, gt=0.0, le=100.0, description="adapter units per plan metre (the adapter was trained on "
                                           "RealEstate10K poses, whose scale is arbitrary)")


# ---------------------------------------------------------------- rays (numpy)


def relative_cv_poses(cam_to_world: np.ndarray) -> np.ndarray:
    """Poses (F, 4, 4) with OpenGL camera axes -> cam_to_world in frame 0's OpenCV camera (frame 0 = identity)."""
    cv = geometry.gl_to_cv(np.asarray(cam_to_world, dtype=np.float64))  # (F, 4, 4)
    return np.linalg.inv(cv[0]) @ cv  # (F, 4, 4)


def plucker_frame(cam_to_world_cv: np.ndarray, intrinsics: geometry.Intrinsics, width: int, height: int,
                  translation_scale: float = 1.0) -> np.ndarray:
    """Plücker rays (6, H, W) float32 of one camera with OpenCV axes: channels (o x d, d) in its reference frame."""
    pose = np.array(cam_to_world_cv, dtype=np.float64)
    pose[:3, 3] *= translation_scale
    rays = geometry.plucker(geometry.cv_to_gl(pose), intrinsics, width, height)  # (H, W, 6)
    return np.ascontiguousarray(rays.transpose(2, 0, 1), dtype=np.float32)


def group_indexes(frames: int, stride: int) -> list[list[int]]:
    """For each latent frame, the ``stride`` video frames packed into it (frame 0 repeated for the first)."""
    if frames < 1 or (frames - 1) % stride:
        raise BackendError(f"camera rays: {frames} frames is not {stride}k+1")
    return [[0] * stride] + [list(range(stride * (j - 1) + 1, stride * j + 1)) for j in range(1, (frames - 1) // stride + 1)]


def pack_group(rays: np.ndarray) -> np.ndarray:
    """Rays of one group (stride, 6, H, W) -> (6 * stride, H, W): channel c * stride + t is ray channel c of frame t."""
    stride, channels, height, width = rays.shape
    return np.ascontiguousarray(rays.transpose(1, 0, 2, 3).reshape(channels * stride, height, width))


def pack_rays(rays: np.ndarray, stride: int) -> np.ndarray:
    """Per-frame rays (F, 6, H, W), F = stride*k + 1 -> the adapter's input (6 * stride, k + 1, H, W)."""
    groups = [pack_group(rays[indexes]) for indexes in group_indexes(len(rays), stride)]
    return np.stack(groups, axis=1)  # (6 * stride, k + 1, H, W)


@dataclass(frozen=True)
class CameraRays:
    """A shot's camera at the native frames, packed one latent frame at a time (a full video of rays is large)."""

    poses: np.ndarray  # (F, 4, 4) cam_to_world, OpenCV axes, relative to frame 0
    intrinsics: tuple[geometry.Intrinsics, ...]  # per frame, pixels of the native size
    width: int
    height: int
    stride: int  # the VAE's temporal stride
    translation_scale: float = 1.0

    @property
    def latent_frames(self) -> int:
        return len(group_indexes(len(self.poses), self.stride))

    def frame(self, index: int) -> np.ndarray:
        """Rays (6, H, W) float32 of native frame ``index`` (as :func:`plucker_frame`, camera rays reused)."""
        pose = geometry.cv_to_gl(self.poses[index])  # the same camera with OpenGL axes, as geometry takes it
        cam = _camera_directions(self.intrinsics[index], self.width, self.height)  # (3, H*W) float32, OpenGL axes
        out = np.empty((PLUCKER_CHANNELS, cam.shape[1]), dtype=np.float32)
        d = out[3:]
        np.matmul(pose[:3, :3].astype(np.float32), cam, out=d)  # unit directions in frame 0's camera
        o = (pose[:3, 3] * self.translation_scale).astype(np.float32)
        # o x d, written out (np.cross is several times slower on this shape)
        np.subtract(o[1] * d[2], o[2] * d[1], out=out[0])
        np.subtract(o[2] * d[0], o[0] * d[2], out=out[1])
        np.subtract(o[0] * d[1], o[1] * d[0], out=out[2])
        return out.reshape(PLUCKER_CHANNELS, self.height, self.width)

    def packed(self, latent_index: int) -> np.ndarray:
        """The adapter's input for one latent frame: (6 * stride, H, W) float32 (channel c * stride + t)."""
        out = np.empty((PLUCKER_CHANNELS * self.stride, self.height, self.width), dtype=np.float32)
        made: dict[int, np.ndarray] = {}
        for t, i in enumerate(group_indexes(len(self.poses), self.stride)[latent_index]):
            if i not in made:
                made[i] = self.frame(i)
            out[t::self.stride] = made[i]
        return out


@functools.lru_cache(maxsize=4)
def _camera_directions(intrinsics: geometry.Intrinsics, width: int, height: int) -> np.ndarray:
    """Unit camera-space directions (3, H*W) float32 through every pixel centre (OpenGL axes)."""
    rays = geometry.camera_rays(geometry.pixel_centres(width, height), intrinsics).reshape(-1, 3)
    return np.ascontiguousarray(rays.T, dtype=np.float32)


def shot_rays(shot: ShotPlan, plan_fps: float, plan_size: tuple[int, int], request: NativeRequest, stride: int,
              translation_scale: float = 1.0) -> CameraRays:
    """The plan's cameras at the native frame times (the retiming rule), intrinsics rescaled to the native size."""
    wanted = plan_to_native_indexes(shot.frames, plan_fps, request.frames, request.fps)
    poses = np.stack([np.reshape(shot.cameras[i].cam_to_world, (4, 4)) for i in wanted])  # (F, 4, 4) OpenGL axes
    intrinsics = []
    for i in wanted:
        normal = geometry.normalized_intrinsics(geometry.intrinsics_from_matrix(np.reshape(shot.cameras[i].K, (3, 3))),
                                                *plan_size)
        intrinsics.append(geometry.pixel_intrinsics(normal, request.width, request.height))
    return CameraRays(relative_cv_poses(poses), tuple(intrinsics), request.width, request.height, stride,
                      translation_scale)


# ---------------------------------------------------------------- published weights


def strip_checkpoint_prefix(key: str) -> str:
    """A checkpoint key without the prefixes repackaged checkpoints add."""
    for prefix in CHECKPOINT_PREFIXES:
        if key.startswith(prefix) and PUBLISHED_PREFIX in key[len(prefix):len(prefix) + len(PUBLISHED_PREFIX)]:
            return key[len(prefix):]
    return key


def published_adapter_name(key: str) -> str | None:
    """Our adapter's parameter name for a published ``control_adapter.*`` key, None for other keys.

    ``control_adapter.conv.{weight,bias}`` -> ``proj.*``;
    ``control_adapter.residual_blocks.{i}.conv{1,2}.{weight,bias}`` -> ``blocks.{i}.conv{1,2}.*``.
    """
    key = strip_checkpoint_prefix(key)
    if not key.startswith(PUBLISHED_PREFIX):
        return None
    name = key[len(PUBLISHED_PREFIX):]
    parts = name.split(".")
    if len(parts) == 2 and parts[0] == "conv" and parts[1] in ("weight", "bias"):
        return f"proj.{parts[1]}"
    if (len(parts) == 4 and parts[0] == "residual_blocks" and parts[1].isdigit() and parts[2] in ("conv1", "conv2")
            and parts[3] in ("weight", "bias")):
        return f"blocks.{parts[1]}.{parts[2]}.{parts[3]}"
    raise BackendError(f"camera adapter: checkpoint key {key!r} is not part of the Control-Camera adapter "
                       "(expected control_adapter.conv.* or control_adapter.residual_blocks.N.conv1/conv2.*)")


def map_published_adapter(state: Mapping[str, Any]) -> dict[str, Any]:
    """The ``control_adapter.*`` tensors of a checkpoint renamed onto :class:`CameraAdapter`; other keys dropped."""
    mapped: dict[str, Any] = {}
    for key, tensor in state.items():
        name = published_adapter_name(key)
        if name is not None:
            if name in mapped:
                raise BackendError(f"camera adapter: {name} appears twice in the checkpoint ({key!r})")
            mapped[name] = tensor
    if "proj.weight" not in mapped:
        raise BackendError("camera adapter: the checkpoint has no control_adapter.conv.weight; it is not a "
                           "Control-Camera checkpoint")
    return mapped


@dataclass(frozen=True)
class AdapterShape:
    """The adapter's geometry, read from its weights."""

    in_channels: int  # 6 x the VAE's temporal stride
    downscale: int  # PixelUnshuffle factor (the VAE's spatial stride)
    dim: int  # transformer width
    patch: tuple[int, int]  # spatial patch of the transformer
    blocks: int  # residual blocks


def adapter_shape(mapped: Mapping[str, Any], in_channels: int) -> AdapterShape:
    """Geometry of mapped adapter weights for ``in_channels`` input channels (6 x the temporal stride)."""
    dim, unshuffled, ph, pw = (int(s) for s in mapped["proj.weight"].shape)
    downscale = int(round((unshuffled / in_channels) ** 0.5))
    if downscale * downscale * in_channels != unshuffled:
        raise BackendError(f"camera adapter: its projection reads {unshuffled} channels, which is not "
                           f"{in_channels} ray channels x a square unshuffle factor; the adapter does not fit this VAE")
    blocks = len({k.split(".")[1] for k in mapped if k.startswith("blocks.")})
    return AdapterShape(in_channels, downscale, dim, (ph, pw), blocks)


# ---------------------------------------------------------------- the adapter (torch)


def _torch():
    from daotai.runtime.device import require_torch

    return require_torch()


def make_adapter(shape: AdapterShape, zero: bool = False) -> Any:
    """A :class:`CameraAdapter` module of ``shape`` (random, or zero-initialised: its output is exactly 0)."""
    torch = _torch()
    nn = torch.nn

    class Residual(nn.Module):
        """conv3x3 -> ReLU -> conv3x3, plus the input."""

        def __init__(self, dim: int):
            super().__init__()
            self.conv1 = nn.Conv2d(dim, dim, 3, padding=1)
            self.conv2 = nn.Conv2d(dim, dim, 3, padding=1)

        def forward(self, x):
            return x + self.conv2(torch.relu(self.conv1(x)))

    class CameraAdapter(nn.Module):
        """Packed rays (B, C, F, H, W) -> features (B, dim, F, H / (d * ph), W / (d * pw)) on the patch grid."""

        def __init__(self, shape: AdapterShape):
            super().__init__()
            self.shape = shape
            self.unshuffle = nn.PixelUnshuffle(shape.downscale)
            self.proj = nn.Conv2d(shape.in_channels * shape.downscale ** 2, shape.dim, shape.patch, stride=shape.patch)
            self.blocks = nn.ModuleList(Residual(shape.dim) for _ in range(shape.blocks))

        def forward(self, rays):
            batch, channels, frames, height, width = rays.shape
            x = rays.permute(0, 2, 1, 3, 4).reshape(batch * frames, channels, height, width)  # frames as batch
            x = self.proj(self.unshuffle(x))  # (B*F, dim, h, w)
            for block in self.blocks:
                x = block(x)
            return x.reshape(batch, frames, *x.shape[1:]).permute(0, 2, 1, 3, 4)  # (B, dim, F, h, w)

    adapter = CameraAdapter(shape)
    if zero:  # projection and each block's last convolution zero: every stage maps 0 to 0
        with torch.no_grad():
            for conv in (adapter.proj, *(block.conv2 for block in adapter.blocks)):
                conv.weight.zero_()
                conv.bias.zero_()
    return adapter.eval()


class CameraControl:
    """A camera adapter hooked onto one Wan transformer: its output added to the patch embedding's.

    Per shot, :meth:`set_shot` gives the rays (and the start latents of a Fun layout); the adapter
    runs once per shot (its input does not depend on the step) when the patch embedding first
    runs, on that module's device, one latent frame at a time, and the features are reused by
    every step and guidance pass.
    """

    def __init__(self, transformer: Any, adapter: Any, latent_channels: int, source: str = ""):
        self.transformer = transformer
        self.adapter = adapter
        self.latent_channels = latent_channels
        self.source = source  # where the weights came from (for the notice)
        self.rays: CameraRays | None = None
        self.scale = 1.0
        self.start_latents: Any = None  # (1, z, F_latent, h, w) on the host, or None (zeros)
        self._features: dict[tuple, Any] = {}
        transformer.add_module("camera_adapter", adapter)  # moved and offloaded with the transformer
        embed = transformer.patch_embedding
        self.handles = [
            embed.register_forward_pre_hook(self._fit_inputs),
            embed.register_forward_hook(self._add_camera),
            transformer.register_forward_pre_hook(self._image_context, with_kwargs=True),
        ]

    @property
    def input_channels(self) -> int:
        return int(self.transformer.patch_embedding.in_channels)

    @property
    def takes_start_latents(self) -> bool:
        """Whether the transformer reads start-image latents beside the noisy ones (the Fun layout)."""
        return self.input_channels == 2 * self.latent_channels

    def set_shot(self, rays: CameraRays | None, scale: float, start_latents: Any = None) -> None:
        """The camera (and start latents) of the next generation."""
        self.rays, self.scale, self.start_latents = rays, scale, start_latents
        self._features.clear()

    def features(self, device: Any, dtype: Any, grid: Sequence[int]) -> Any:
        """Adapter output (1, dim, F_latent, h, w) for the current rays, computed once per device and dtype."""
        torch = _torch()
        key = (str(device), dtype)
        if key not in self._features:
            assert self.rays is not None
            weight = self.adapter.proj.weight
            parts = []
            with torch.no_grad():
                for j in range(self.rays.latent_frames):
                    packed = torch.from_numpy(self.rays.packed(j))[None, :, None]  # (1, 6*stride, 1, H, W)
                    parts.append(self.adapter(packed.to(weight.device, weight.dtype)).to(device, dtype))
            features = torch.cat(parts, dim=2)  # (1, dim, F_latent, h, w)
            if tuple(features.shape[2:]) != tuple(grid):
                raise BackendError(f"camera adapter: features on a {tuple(features.shape[2:])} grid, the transformer's "
                                   f"patches are {tuple(grid)}; the adapter does not fit this model's VAE or patch size")
            self._features[key] = features
        return self._features[key]

    def _add_camera(self, module: Any, args: tuple, output: Any) -> Any:
        if self.rays is None or self.scale == 0.0:
            return output
        features = self.features(output.device, output.dtype, output.shape[2:])
        return output + self.scale * features.expand(output.shape[0], -1, -1, -1, -1)

    def _fit_inputs(self, module: Any, args: tuple) -> tuple | None:
        """Bring the pipeline's latents to the transformer's input layout (see the module docstring)."""
        torch = _torch()
        x = args[0]  # (B, C, F, h, w)
        need, have, z = self.input_channels, x.shape[1], self.latent_channels
        if have == need:
            return None
        if need == 2 * z and have == z:
            start = torch.zeros_like(x)
            if self.start_latents is not None:
                start[:, :, :1] = self.start_latents[:, :, :1].to(x.device, x.dtype)
            return (torch.cat([x, start], dim=1), *args[1:])
        if need == 2 * z and have == 2 * z + MASK_CHANNELS:
            start = torch.zeros_like(x[:, :z])
            start[:, :, :1] = x[:, z + MASK_CHANNELS:, :1]  # the image's own latent frame
            return (torch.cat([x[:, :z], start], dim=1), *args[1:])
        raise BackendError(f"wan-camera: the transformer takes {need} input channels; the pipeline gives {have} "
                           f"(latents {z}); this checkpoint's input layout is not one daotai knows")

    def _image_context(self, module: Any, args: tuple, kwargs: dict) -> tuple | None:
        """Zero image features for a transformer with image cross-attention that was given none."""
        embedder = getattr(module.condition_embedder, "image_embedder", None)
        if embedder is None or kwargs.get("encoder_hidden_states_image") is not None:
            return None
        torch = _torch()
        text = kwargs.get("encoder_hidden_states", args[2] if len(args) > 2 else None)
        dim = int(module.config.image_dim)
        kwargs = dict(kwargs, encoder_hidden_states_image=torch.zeros(
            text.shape[0], CLIP_TOKENS, dim, device=text.device, dtype=text.dtype))
        return args, kwargs

    def remove(self) -> None:
        """Take the hooks off the transformer."""
        for handle in self.handles:
            handle.remove()
        self.handles = []


# ---------------------------------------------------------------- loading


def read_adapter_tensors(path: Path) -> dict[str, Any]:
    """The ``control_adapter.*`` tensors of one safetensors file (its header checked first; nothing else read)."""
    from safetensors import safe_open

    from daotai.runtime.model_checks import read_safetensors_header

    if path.suffix != ".safetensors":
        raise BackendError(f"adapter: {path} is not a .safetensors file; pickle checkpoints are refused "
                           "(they can run code when loaded)")
    header = read_safetensors_header(path)
    keys = [k for k in header if k != "__metadata__" and published_adapter_name(k) is not None]
    with safe_open(str(path), framework="pt") as handle:
        return {k: handle.get_tensor(k) for k in keys}


def find_adapter(folder: Path, component: str, explicit: Sequence[Path] = ()) -> tuple[dict[str, Any], Path]:
    """The published-named adapter tensors for ``component`` and the file they came from.

    ``explicit``: files to read it from (the ``adapter`` option, or the shards of the ``checkpoint``).
    """
    if explicit and component == "transformer":
        for path in explicit:
            if not path.is_file():
                raise BackendError(f"adapter: {path} does not exist")
            state = read_adapter_tensors(path)
            if state:
                return state, path
        raise BackendError(f"adapter: {', '.join(map(str, explicit))} holds no control_adapter.* tensors; it is not a "
                           "Control-Camera checkpoint")
    looked = []
    for sub in (folder / ADAPTER_FOLDERS.get(component, f"camera_adapter_{component}"), folder / component):
        looked.append(str(sub))
        for path in sorted(sub.glob("*.safetensors")) if sub.is_dir() else ():
            state = read_adapter_tensors(path)
            if state:
                return state, path
    raise BackendError(f"wan-camera: no camera adapter weights (control_adapter.*) for {component} in "
                       f"{' or '.join(looked)}; pass -O checkpoint=<a Control-Camera checkpoint folder, e.g. "
                       "alibaba-pai/Wan2.1-Fun-V1.1-1.3B-Control-Camera> (or -O adapter=<.safetensors> for the "
                       "adapter alone)")


def checkpoint_files(location: str) -> list[Path]:
    """The safetensors shards of a published checkpoint (a folder, one file, or the catalog name of one
    pulled with ``daotai models pull``); pickles are refused."""
    from daotai.runtime.model_lookup import checkpoint_folder

    path = Path(location).expanduser()
    pulled = checkpoint_folder(location) if not path.exists() else None
    path = pulled if pulled is not None else path
    if path.is_dir():
        files = sorted(path.glob("diffusion_pytorch_model*.safetensors")) or sorted(path.glob("*.safetensors"))
        if not files:
            raise BackendError(f"checkpoint: {path} has no .safetensors files (pickle checkpoints are refused: "
                               "they can run code when loaded)")
        return files
    if not path.is_file():
        raise BackendError(f"checkpoint: {path} does not exist")
    if path.suffix != ".safetensors":
        raise BackendError(f"checkpoint: {path} is not a .safetensors file; pickle checkpoints are refused "
                           "(they can run code when loaded)")
    return [path]


def transformer_from_checkpoint(files: Sequence[Path], base_config: Mapping[str, Any], dtype: Any) -> Any:
    """A diffusers ``WanTransformer3DModel`` from a published (original Wan naming) checkpoint.

    Keys are renamed by diffusers' own Wan conversion; the geometry (input channels, layers, widths,
    image cross-attention) is read from the tensors, the rest of the config from the model folder's
    transformer. Every tensor must fit (strict load).
    """
    from diffusers import WanTransformer3DModel
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
    from safetensors import safe_open

    from daotai.runtime.model_checks import read_safetensors_header

    state: dict[str, Any] = {}
    for path in files:
        header = read_safetensors_header(path)
        with safe_open(str(path), framework="pt") as handle:
            for key in header:
                if key != "__metadata__" and published_adapter_name(key) is None:
                    state[key] = handle.get_tensor(key)
    state = convert_wan_transformer_to_diffusers(state)
    if "patch_embedding.weight" not in state:
        raise BackendError(f"checkpoint: {files[0]} has no patch_embedding weight; it is not a Wan transformer")
    width, in_channels = (int(v) for v in state["patch_embedding.weight"].shape[:2])
    heads = int(base_config["num_attention_heads"])
    if width % heads:
        raise BackendError(f"checkpoint: width {width} does not split into the model folder's {heads} heads; "
                           "use the diffusers folder of the checkpoint's own base model")
    config = {k: v for k, v in base_config.items() if not k.startswith("_")}
    config.update(
        in_channels=in_channels, attention_head_dim=width // heads,
        num_layers=len({k.split(".")[1] for k in state if k.startswith("blocks.")}),
        ffn_dim=int(state["blocks.0.ffn.net.0.proj.weight"].shape[0]),
        text_dim=int(state["condition_embedder.text_embedder.linear_1.weight"].shape[1]),
        out_channels=int(state["proj_out.weight"].shape[0]) // int(np.prod(base_config["patch_size"])),
    )
    image = "condition_embedder.image_embedder.norm1.weight" in state
    config.update(image_dim=int(state["condition_embedder.image_embedder.norm1.weight"].shape[0]) if image else None,
                  added_kv_proj_dim=width if image else None)
    transformer = WanTransformer3DModel.from_config(config)
    try:
        transformer.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise BackendError(f"checkpoint: {files[0]} does not fit a Wan transformer ({str(exc).splitlines()[0]})") from None
    # As from_pretrained(dtype=...) does: the modules diffusers keeps in float32 (norms, time embedding,
    # modulation tables) stay there; everything else takes the device rule's dtype.
    keep = set(getattr(transformer, "_keep_in_fp32_modules", None) or ())
    float32 = _torch().float32
    for name, tensor in [*transformer.named_parameters(), *transformer.named_buffers()]:
        if tensor.is_floating_point():
            tensor.data = tensor.data.to(float32 if keep & set(name.split(".")) else dtype)
    return transformer.eval()


def attach_adapters(pipe: Any, folder: Path, explicit: Sequence[Path], dtype: Any) -> list[CameraControl]:
    """Load and hook a camera adapter on every Wan transformer of ``pipe``."""
    torch = _torch()
    stride = int(getattr(pipe, "vae_scale_factor_temporal", 4))
    spatial = int(getattr(pipe, "vae_scale_factor_spatial", 8))
    latent_channels = int(pipe.vae.config.z_dim)
    controls = []
    for component in ("transformer", "transformer_2"):
        transformer = getattr(pipe, component, None)
        if transformer is None:
            continue
        state, path = find_adapter(folder, component, explicit)
        mapped = map_published_adapter(state)
        shape = adapter_shape(mapped, PLUCKER_CHANNELS * stride)
        patch = tuple(int(p) for p in transformer.config.patch_size[1:])
        width = int(transformer.config.num_attention_heads * transformer.config.attention_head_dim)
        if shape.downscale != spatial or shape.patch != patch or shape.dim != width:
            raise BackendError(
                f"{path}: a camera adapter for width {shape.dim}, unshuffle {shape.downscale}, patch {shape.patch}; "
                f"{component} has width {width}, VAE stride {spatial}, patch {patch}: it belongs to another model")
        adapter = make_adapter(shape)
        try:
            adapter.load_state_dict({k: v.to(torch.float32) for k, v in mapped.items()}, strict=True)
        except RuntimeError as exc:
            raise BackendError(f"{path}: camera adapter weights do not fit ({str(exc).splitlines()[0]})") from None
        control = CameraControl(transformer, adapter.to(dtype), latent_channels, str(path))
        if control.takes_start_latents and "ImageToVideo" not in type(pipe).__name__:
            # diffusers' WanPipeline sizes its latents by the transformer's in_channels; the Fun layout's
            # second half is the start latents this module's input hook supplies, not noise.
            transformer.register_to_config(in_channels=latent_channels)
        controls.append(control)
    return controls


# ---------------------------------------------------------------- the backend


class WanCameraBackend:
    """Camera-conditioned video with a Wan Control-Camera model; the pipeline is reused across shots."""

    name = "wan-camera"

    def __init__(self, options: WanCameraOptions | None = None, *, env: BackendEnv | None = None, **fields: Any):
        options = SPEC.validate_options(options if options is not None else fields)
        env = env or BackendEnv()
        self.options = options
        self.controls: list[CameraControl] = []
        self.loaded: list[str] = []  # files read from outside the model folder, with their hashes
        self.runner = DiffusersShotRunner(SPEC.family or "", options, SPEC.default_model or "", env.health_sampler,
                                          build=self._build)
        self._previz: Any = None

    def _build(self, model: str, family: str, runtime: Any) -> tuple[Any, Any]:
        """daotai's checked loader, then the camera adapters hooked onto the transformers."""
        from daotai.files import sha256_file
        from daotai.runtime.model_loading import load_pipeline

        dtype = runtime.dtype("transformer")
        pipe, resolved = load_pipeline(model, family, runtime)
        explicit = [Path(self.options.adapter).expanduser()] if self.options.adapter else []
        self.loaded = []
        if self.options.checkpoint:
            if getattr(pipe, "transformer_2", None) is not None:
                raise BackendError("checkpoint: a two-expert model (transformer and transformer_2) takes its camera "
                                   "weights from the model folder, not from one checkpoint")
            files = checkpoint_files(self.options.checkpoint)
            pipe.register_modules(transformer=transformer_from_checkpoint(files, pipe.transformer.config, dtype))
            explicit = explicit or files
            self.loaded = [f"{p.name} sha256 {sha256_file(p)[:12]}" for p in files]  # not in the folder's manifest
        elif explicit:
            self.loaded = [f"{p.name} sha256 {sha256_file(p)[:12]}" for p in explicit if p.is_file()]
        self.controls = attach_adapters(pipe, resolved.path, explicit, dtype)
        return pipe, resolved

    @property
    def image_to_video(self) -> bool:
        """Whether the loaded pipeline takes a start image (diffusers' Wan image-to-video pipeline)."""
        return "ImageToVideo" in type(self.runner.pipe).__name__

    def _extra(self, job: RenderJob, ctx: RunContext):
        """This shot's rays into the adapters, and its start image when the model takes one."""

        def extra(request: NativeRequest) -> Iterator[Event | dict]:
            pipe = self.runner.pipe
            stride = int(getattr(pipe, "vae_scale_factor_temporal", 4))
            yield Progress("control", job.shot.shot_id, 0, 1, "camera rays")
            rays = shot_rays(job.shot, job.plan.fps, (job.plan.width, job.plan.height), request, stride,
                             self.options.translation_scale)
            wants_image = self.image_to_video or any(c.takes_start_latents for c in self.controls)
            use_previz = self.options.first_frame == "previz" or (self.options.first_frame == "auto" and wants_image)
            if self.image_to_video and not use_previz:
                raise BackendError(f"first_frame: 'none' but {self.runner.model} is an image-to-video model; "
                                   "use first_frame=previz (or auto)")
            start, image = None, None
            if use_previz:
                image = self._first_previz_frame(job, ctx, request)
                if not self.image_to_video and self.controls and self.controls[0].takes_start_latents:
                    start = encode_start_latents(pipe, image, rays.latent_frames)
            for control in self.controls:
                control.set_shot(rays, self.options.adapter_scale, start)
            yield Progress("control", job.shot.shot_id, 1, 1, "camera rays ready")
            sources = ", ".join(sorted({c.source for c in self.controls} | set(self.loaded)))
            first = ("previz frame as the image" if self.image_to_video else
                     "previz frame as start latents" if start is not None else "no start image")
            yield Notice("info", f"camera adapter ({sources}) at scale {self.options.adapter_scale:g}: Plücker rays of "
                                 f"{request.frames} frames relative to frame 0 (OpenCV axes, translation x"
                                 f"{self.options.translation_scale:g}); {first}", job.shot.shot_id)
            if self.image_to_video:
                yield {"image": image}

        return extra

    def _first_previz_frame(self, job: RenderJob, ctx: RunContext, request: NativeRequest) -> Any:
        """The shot's first previz frame as a PIL image at the native size."""
        from PIL import Image

        from daotai.render.previz.backend import PrevizBackend

        if self._previz is None:
            self._previz = PrevizBackend(labels=False)
        for event in self._previz.render(RenderJob(job.plan, job.shot, controls=False), ctx):
            if isinstance(event, Frame):
                return Image.fromarray(resize_rgb(event.rgb, request.width, request.height))
        raise BackendError(f"{job.shot.shot_id}: previz produced no frame for the start image")

    def render(self, job: RenderJob, ctx: RunContext) -> Iterator[Event]:
        """Yield load/control/denoise progress, then exactly ``job.shot.frames`` frames."""
        yield from render_shot(self.runner, job, ctx, self._extra(job, ctx))

    def close(self) -> None:
        """Release the pipeline, the hooks and the previz GL context."""
        for control in self.controls:
            control.remove()
        self.controls = []
        self.runner.close()
        if self._previz is not None:
            self._previz.close()
            self._previz = None


def encode_start_latents(pipe: Any, image: Any, latent_frames: int) -> Any:
    """A start image as the Fun layout's start latents: (1, z, F_latent, h, w), frame 0 encoded, zeros after."""
    torch = _torch()
    vae = pipe.vae
    device = getattr(pipe, "_execution_device", None) or next(vae.parameters()).device
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 127.5 - 1.0)  # (H, W, 3) in [-1, 1]
    pixels = pixels.permute(2, 0, 1)[None, :, None].to(device, vae.dtype)  # (1, 3, 1, H, W)
    with torch.no_grad():
        latent = vae.encode(pixels).latent_dist.mode().float()  # (1, z, 1, h, w)
    mean = torch.tensor(vae.config.latents_mean, dtype=torch.float32, device=latent.device).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, dtype=torch.float32, device=latent.device).view(1, -1, 1, 1, 1)
    latent = ((latent - mean) / std).cpu()
    start = torch.zeros(1, latent.shape[1], latent_frames, *latent.shape[3:])
    start[:, :, :1] = latent
    return start


SPEC = BackendSpec(
    name="wan-camera",
    factory="daotai.render.wan_camera:WanCameraBackend",
    options=WanCameraOptions,
    summary="Wan Control-Camera (diffusers): the plan's exact camera as Plücker rays through a camera adapter",
    family="wan-camera",
    device_class="accelerator",
    # The diffusers release of the 1.3B Control-Camera checkpoint's base (its VAE, text encoder, scheduler);
    # the camera transformer and adapter come from -O checkpoint= (see the module docstring).
    default_model="wan2.1-t2v-1.3b",
)
