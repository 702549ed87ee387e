"""The Shot Camera node's library half: a shot's exact per-frame cameras and the rays they cast.

The cameras are the plan's own (``cam_to_world`` with OpenGL camera axes, vertical ``fov``,
pixel ``K``; docs/conventions.md); everything else is derived through :mod:`daotai.plan.geometry`.

Camera-conditioned Wan models (Wan-Fun "Control Camera", ComfyUI's ``WAN_CAMERA_EMBEDDING``
type) take the CameraCtrl convention, which :func:`wan_camera_embedding` follows:

- poses with OpenCV camera axes (x right, y down, +z forward), relative to the first frame's
  camera (the first pose is the identity);
- per pixel, the Plücker coordinates (o × d, d) of the ray through the pixel centre, d unit;
- the frames of a 4k+1 clip grouped by the video VAE's 4x temporal compression: the first
  frame's rays repeated three times in front, then every group of four frames stacked on the
  channel axis, giving (1, 24, k + 1, H, W) with channel 4c + j = Plücker channel c of the
  group's j-th frame.

A clip at another size shows the plan's picture scaled to cover it and centre-cropped (as
ComfyUI resizes start images, ``crop="center"``); a clip at another frame rate samples, for
each of its frames, the plan's camera at the same time (as the neural backends sample their
controls, :func:`daotai.render.neural.retime.plan_to_native_indexes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daotai.errors import Issue, OptionError
from daotai.plan import geometry
from daotai.plan.model import Plan, ShotPlan

WAN_TEMPORAL_STRIDE = 4  # the Wan video VAE packs 4 frames into one latent frame (after the first)
WAN_SIZE_MULTIPLE = 16  # Wan latents are 1/8 of the picture and patchified by 2


@dataclass(frozen=True)
class ShotCameras:
    """One shot's cameras, one per plan frame, exactly as the plan holds them."""

    shot_id: str
    width: int  # the plan's frame size, pixels
    height: int
    fps: float
    cam_to_world: np.ndarray  # (F, 4, 4) float64, OpenGL camera axes (x right, y up, -z forward)
    fov: np.ndarray  # (F,) float64 vertical field of view, degrees
    K: np.ndarray  # (F, 3, 3) float64 pixel intrinsics (OpenCV image axes)

    def __repr__(self) -> str:  # short in ComfyUI's error reports (not every frame's matrices)
        return f"ShotCameras({self.shot_id}: {len(self.fov)} frames, {self.width}x{self.height} at {self.fps:g} fps)"

    @property
    def frames(self) -> int:
        return int(self.cam_to_world.shape[0])

    def world_to_camera(self) -> np.ndarray:
        """The view matrices (F, 4, 4): the exact inverse of each pose."""
        return geometry.world_to_camera(self.cam_to_world)

    def cam_to_world_cv(self) -> np.ndarray:
        """The poses (F, 4, 4) with OpenCV camera axes (y down, +z forward)."""
        return geometry.gl_to_cv(self.cam_to_world)

    def relative_cv(self) -> np.ndarray:
        """The poses (F, 4, 4), OpenCV axes, in the first frame's camera coordinates (first = identity)."""
        cv = self.cam_to_world_cv()
        return np.linalg.inv(cv[0]) @ cv

    def to_dict(self) -> dict:
        """The trajectory as plain JSON data: per frame the GL pose, its view matrix, the OpenCV pose, K and fov."""
        view, cv = self.world_to_camera(), self.cam_to_world_cv()
        return {
            "shot_id": self.shot_id,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "axes": "cam_to_world: camera-local x right, y up, -z forward (OpenGL); cam_to_world_opencv: "
                    "x right, y down, +z forward; matrices row-major; K in pixels, origin at the image's top-left corner",
            "frames": [
                {"cam_to_world": self.cam_to_world[i].tolist(), "world_to_camera": view[i].tolist(),
                 "cam_to_world_opencv": cv[i].tolist(), "K": self.K[i].tolist(), "fov": float(self.fov[i])}
                for i in range(self.frames)
            ],
        }


def shot_cameras(plan: Plan, shot: ShotPlan) -> ShotCameras:
    """The plan's cameras of ``shot`` as arrays."""
    return ShotCameras(
        shot_id=shot.shot_id,
        width=plan.width,
        height=plan.height,
        fps=plan.fps,
        cam_to_world=np.array([c.cam_to_world for c in shot.cameras], dtype=np.float64).reshape(-1, 4, 4),
        fov=np.array([c.fov for c in shot.cameras], dtype=np.float64),
        K=np.array([c.K for c in shot.cameras], dtype=np.float64).reshape(-1, 3, 3),
    )


def cover_intrinsics(K: np.ndarray, width: int, height: int, to_width: int, to_height: int) -> geometry.Intrinsics:
    """Pixel (fx, fy, cx, cy) of a picture ``width`` x ``height`` scaled to cover ``to_width`` x ``to_height``, centre-cropped."""
    fx, fy, _, _ = geometry.intrinsics_from_matrix(K)
    scale = max(to_width / width, to_height / height)
    return fx * scale, fy * scale, to_width / 2.0, to_height / 2.0


def wan_length(cams: ShotCameras, fps: float | None = None) -> int:
    """The 4k+1 frame count that spans the shot at ``fps`` (default: the plan's), rounded up."""
    from daotai.plan.timing import snap_frames

    rate = cams.fps if not fps else float(fps)
    frames = cams.frames if rate == cams.fps else max(1, round(cams.frames / cams.fps * rate))
    return snap_frames(frames, WAN_TEMPORAL_STRIDE, 1)


def clip_indexes(cams: ShotCameras, length: int, fps: float | None = None) -> list[int]:
    """For each of ``length`` frames at ``fps`` (default: the plan's), the plan frame at the same time."""
    from daotai.render.neural.retime import plan_to_native_indexes

    return plan_to_native_indexes(cams.frames, cams.fps, length, cams.fps if not fps else float(fps))


def _check_clip(width: int, height: int, length: int) -> None:
    issues = [Issue(name, value, f"must be a multiple of {WAN_SIZE_MULTIPLE}, at least {WAN_SIZE_MULTIPLE}")
              for name, value in (("width", width), ("height", height))
              if value < WAN_SIZE_MULTIPLE or value % WAN_SIZE_MULTIPLE]
    if length < 1 or (length - 1) % WAN_TEMPORAL_STRIDE:
        issues.append(Issue("length", length, f"must be {WAN_TEMPORAL_STRIDE}k+1 (1, 5, 9, … 81, …)"))
    if issues:
        raise OptionError(issues)


def plucker_rays(cams: ShotCameras, width: int, height: int, length: int | None = None,
                 fps: float | None = None) -> np.ndarray:
    """Plücker rays (L, H, W, 6) float32 of a ``width`` x ``height`` clip, relative to the first camera (OpenCV axes).

    ``length`` frames (default: one per plan frame) at ``fps`` (default: the plan's); channels
    are the moment o × d (metres) then the unit direction d.
    """
    length = cams.frames if length is None else int(length)
    indexes = clip_indexes(cams, length, fps)
    relative = geometry.cv_to_gl(cams.relative_cv())  # (F, 4, 4): GL camera axes, first camera's OpenCV frame
    rays = np.empty((length, height, width, 6), dtype=np.float32)
    for out, index in enumerate(indexes):
        intrinsics = cover_intrinsics(cams.K[index], cams.width, cams.height, width, height)
        rays[out] = geometry.plucker(relative[index], intrinsics, width, height)  # (H, W, 6)
    return rays


def pack_wan_embedding(rays: np.ndarray) -> np.ndarray:
    """Plücker rays (L, H, W, 6), L = 4k+1, as the Wan camera embedding (1, 24, k + 1, H, W) float32."""
    length, height, width, channels = rays.shape
    if (length - 1) % WAN_TEMPORAL_STRIDE or channels != 6:
        raise ValueError(f"rays of shape {rays.shape} must be (4k+1, H, W, 6)")
    planes = np.moveaxis(np.asarray(rays, dtype=np.float32), -1, 0)  # (6, L, H, W)
    padded = np.concatenate([np.repeat(planes[:, :1], WAN_TEMPORAL_STRIDE - 1, axis=1), planes], axis=1)  # (6, L+3, H, W)
    groups = padded.shape[1] // WAN_TEMPORAL_STRIDE
    grouped = padded.reshape(6, groups, WAN_TEMPORAL_STRIDE, height, width)  # (6, G, 4, H, W)
    return grouped.transpose(0, 2, 1, 3, 4).reshape(1, 6 * WAN_TEMPORAL_STRIDE, groups, height, width)


def wan_camera_embedding(cams: ShotCameras, width: int, height: int, length: int | None = None,
                         fps: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The Wan camera embedding (1, 24, (L + 3) / 4, H, W) of the shot and the rays (L, H, W, 6) it packs.

    ``length`` (4k+1; default: :func:`wan_length`) frames at ``fps`` (default: the plan's).
    """
    length = wan_length(cams, fps) if not length else int(length)
    _check_clip(width, height, length)
    rays = plucker_rays(cams, width, height, length, fps)
    return pack_wan_embedding(rays), rays


def wan_size(plan: Plan, shot: ShotPlan) -> tuple[int, int]:
    """The size the plan records for the Wan family (its snap rule), else the plan's size rounded to 16."""
    for snap in shot.snapping:
        if snap.backend == "wan":
            return snap.width, snap.height
    from daotai.plan.timing import round_size

    return round_size(plan.width, plan.height, WAN_SIZE_MULTIPLE)
