"""daotai's ComfyUI nodes, written against ComfyUI's V3 node schema (``comfy_api.latest``).

Thin on purpose: each node converts ComfyUI's values (IMAGE/MASK tensors, VIDEO objects) to
numpy, calls one function of :mod:`daotai.comfy`, and converts back. ComfyUI loads this module
through ``comfyui/__init__.py`` (its ``comfy_entrypoint``); it imports ``comfy_api`` and
``torch``, which ComfyUI provides, and nothing else in daotai imports it.

Nodes (category "daotai"):

- Director Script: a script from text or a file → the validated, planned script (errors name
  every broken rule's JSON path, before the graph runs).
- Shot Camera: one shot's exact cameras → a ``WAN_CAMERA_EMBEDDING`` (drop-in for ComfyUI's
  preset ``WanCameraEmbedding`` node: same first four outputs), the Plücker rays, the trajectory.
- Previz Render: one shot's animatic → frames, depth and character masks as IMAGE / MASK
  batches (what ``WanVaceToVideo`` takes as ``control_video`` / ``control_masks``) and a VIDEO.
- Shot Prompt: the prompt and negative prompt the planner composed, fitted to a model family.
- Camera Check: a generated VIDEO or IMAGE batch against the shot's planned camera → pass/fail,
  the flow error, a report and the metrics as JSON.
- Assemble Sequence: shot videos → the sequence with the script's transitions and sound, plus
  the timeline (.otio, .xml, .edl), in a folder laid out as ``daotai render`` lays out its own.
- H3 Character Look: a character's reference picture (IMAGE) and / or voice (AUDIO), chained
  one character after another into the looks H3 Render takes.
- H3 Render: one shot through daotai's ``h3`` backend (MiniMax-H3) → its frames (IMAGE), its
  stereo sound (AUDIO), and a VIDEO of both written where ``daotai render`` writes shots.

Progress goes to ComfyUI's progress bar; ComfyUI's stop button cancels the work at the next frame.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np
from comfy_api.latest import ComfyExtension, io

from daotai.comfy.driver import drive
from daotai.comfy.script import AS_WRITTEN, DirectorScript
from daotai.errors import NO_VALUE, Cancelled, Issue, OptionError
from daotai.events import Glimpse
from daotai.render.base import RunContext

CATEGORY = "daotai"
MAX_SHOT_INPUTS = 8  # VIDEO sockets on Assemble Sequence; more shots come from its shots_folder
MAX_SIZE = 16384  # ComfyUI's MAX_RESOLUTION

Script = io.Custom("DAOTAI_SCRIPT")  # a daotai.comfy.script.DirectorScript
Trajectory = io.Custom("DAOTAI_CAMERA")  # a daotai.comfy.camera_node.ShotCameras
Plucker = io.Custom("DAOTAI_PLUCKER")  # torch (L, H, W, 6) float32 Plücker rays
Looks = io.Custom("DAOTAI_H3_LOOKS")  # tuple of daotai.comfy.h3.CharacterLook, one per character

EXAMPLE_SCRIPT = """{"scene": "office",
 "characters": [{"id": "lin", "name": "Lin", "appearance": "wearing glasses, blue shirt"}],
 "shots": [{"shot_id": "s01", "duration": 2, "subject": "lin", "framing": "MS",
            "camera": {"type": "dolly", "motion": [0, 0, -0.5]}}]}"""


# ------------------------------------------------------------------ ComfyUI values <-> numpy


def _torch():
    import torch

    return torch


def _images(rgb: np.ndarray):
    """(F, H, W, 3) uint8 → IMAGE: (F, H, W, 3) float32 in [0, 1]."""
    return _torch().from_numpy(np.ascontiguousarray(rgb)).float().div_(255.0)


def _mask(mask: np.ndarray):
    """(F, H, W) bool → MASK: (F, H, W) float32, 1 = inside."""
    return _torch().from_numpy(np.ascontiguousarray(mask, dtype=np.float32))


def _rgb(images: Any) -> np.ndarray:
    """IMAGE (F, H, W, C) floats in [0, 1] → (F, H, W, 3) uint8, rounded."""
    array = images.detach().cpu().float().numpy() if hasattr(images, "detach") else np.asarray(images, np.float32)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] < 3:
        raise OptionError.at("images", f"shape {tuple(array.shape)}", "must be (frames, height, width, 3)")
    return np.rint(np.clip(array[..., :3], 0.0, 1.0) * 255.0).astype(np.uint8)


def _audio(samples: np.ndarray, rate: int) -> dict:
    """(N, C) float32 → AUDIO: {"waveform": (1, C, N) float32, "sample_rate": rate}, as ComfyUI's audio nodes pass it."""
    waveform = _torch().from_numpy(np.ascontiguousarray(samples.T, dtype=np.float32))[None]
    return {"waveform": waveform, "sample_rate": int(rate)}


def _waveform(audio: Any, where: str) -> tuple[np.ndarray, int]:
    """AUDIO → ((C, N) float32 of its first batch item, sample rate); a clear error for anything else."""
    waveform = audio.get("waveform") if isinstance(audio, dict) else None
    rate = audio.get("sample_rate") if isinstance(audio, dict) else None
    if waveform is None or rate is None:
        raise OptionError.at(where, type(audio).__name__, 'must be AUDIO: {"waveform": (batch, channels, samples), '
                                                          '"sample_rate": Hz}')
    array = waveform.detach().cpu().float().numpy() if hasattr(waveform, "detach") else np.asarray(waveform, np.float32)
    if array.ndim != 3 or array.shape[0] < 1:
        raise OptionError.at(f"{where}.waveform.shape", tuple(array.shape), "must be (batch, channels, samples)")
    return array[0], int(rate)


def _latest():
    import comfy_api.latest as latest

    return latest


def _made_video(make: Any, *args: Any) -> Any:
    """A VIDEO built by the runtime's own class; a clear error where that class is only a placeholder."""
    try:
        return make(*args)
    except TypeError as exc:
        raise TypeError(f"this ComfyUI runtime's {make.__name__} does not take ComfyUI's arguments ({exc}); daotai's "
                        "VIDEO outputs need ComfyUI's comfy_api.latest video types (ComfyUI 0.3.64 or newer)") from exc


def _video_from_frames(rgb: np.ndarray, fps: Fraction):
    """A VIDEO (``VideoFromComponents``) of (F, H, W, 3) uint8 frames at ``fps``."""
    latest = _latest()
    try:
        make, components = latest.InputImpl.VideoFromComponents, latest.Types.VideoComponents
    except AttributeError:  # reimplementations that keep them only in the private modules
        from comfy_api.latest._input_impl import VideoFromComponents as make
        from comfy_api.latest._util import VideoComponents as components
    return _made_video(make, components(images=_images(rgb), frame_rate=Fraction(fps)))


def _video_from_file(path: Path):
    """A VIDEO (``VideoFromFile``) of a file."""
    latest = _latest()
    try:
        make = latest.InputImpl.VideoFromFile
    except AttributeError:
        from comfy_api.latest._input_impl import VideoFromFile as make
    return _made_video(make, str(path))


def _video_file(video: Any) -> Path | None:
    """The file behind a VIDEO, when it is one (``VideoFromFile`` of a path)."""
    try:
        source = video.get_stream_source()
    except Exception:  # noqa: BLE001 - any VIDEO implementation: no file is an answer, not an error
        return None
    return Path(source) if isinstance(source, (str, Path)) and Path(source).is_file() else None


def _video_frames(video: Any) -> tuple[np.ndarray, Fraction | None]:
    """(F, H, W, 3) uint8 frames of a VIDEO and its frame rate (decoded by daotai when it is a file)."""
    path = _video_file(video)
    if path is not None:
        from daotai.encode.read import decode_frames, probe

        return np.stack(list(decode_frames(path))), probe(path).fps
    components = video.get_components()
    rate = getattr(components, "frame_rate", None)
    return _rgb(components.images), Fraction(rate).limit_denominator(1_000_000) if rate else None


# ------------------------------------------------------------------ progress and cancellation


# seconds between two pictures under the running node: ComfyUI sends every update that carries a
# picture at once (its bar's own throttle skips them), so the pace is set here
PREVIEW_EVERY_S = 0.5


class _NodeBar:
    """ComfyUI's progress bar for the running node (``comfy.utils.ProgressBar``), with a picture.

    The bar reports through the hook ComfyUI's server installs, which finds the running node
    itself and raises ``InterruptProcessingException`` when the user pressed stop. (ComfyUI
    0.3.64's ``ComfyAPISync()`` has no ``execution`` to report through: its sync wrapper never
    sets it.) A picture rides on the bar's update as ComfyUI's own samplers send their latent
    previews: ``("JPEG", PIL image, largest side)``, shown under the node.
    """

    def __init__(self, progress_bar: type) -> None:
        self._make = progress_bar
        self._bars: dict[int, Any] = {}
        self._last: tuple[Any, int, int] | None = None  # the bar last moved, its value and total

    def progress(self, done: int, total: int) -> None:
        bar = self._bars.get(total)
        if bar is None:
            bar = self._bars[total] = self._make(total)
        bar.update_absolute(done, total)
        self._last = (bar, done, total)

    def picture(self, glimpse: Glimpse) -> None:
        """Show ``glimpse`` under the node, at the bar's present value (none before the bar first moves)."""
        if self._last is None:
            return
        from PIL import Image

        bar, done, total = self._last
        image = Image.fromarray(glimpse.rgb)  # (h, w, 3) uint8, at most GLIMPSE_WIDTH wide
        bar.update_absolute(done, total, ("JPEG", image, max(image.size)))


def _node_bar() -> _NodeBar | None:
    """The running node's bar, or None outside ComfyUI."""
    try:
        from comfy.utils import ProgressBar
    except ImportError:
        return None
    return _NodeBar(ProgressBar)


def _interrupted() -> bool:
    """Whether the user pressed ComfyUI's stop button."""
    try:
        from comfy.model_management import processing_interrupted
    except ImportError:
        return False
    return bool(processing_interrupted())


def _run(start: Callable[[RunContext], Any]) -> Any:
    """Drive the library generator ``start(ctx)`` with ComfyUI's progress bar and stop button."""
    bar = _node_bar()
    # pictures only where a bar can carry them: outside ComfyUI nobody would see them
    ctx = RunContext(glimpse_every_s=PREVIEW_EVERY_S if bar is not None else None)
    try:
        return drive(start(ctx), ctx, bar and bar.progress, _interrupted, bar and bar.picture)
    except Cancelled:
        try:
            from comfy.model_management import InterruptProcessingException
        except ImportError:
            raise
        raise InterruptProcessingException() from None


SHOT_ID_TOOLTIP = "the shot's id in the script; empty: the first shot"


def _shot_id_input() -> Any:
    return io.String.Input("shot_id", default="", tooltip=SHOT_ID_TOOLTIP)


# ------------------------------------------------------------------ nodes


class DirectorScriptNode(io.ComfyNode):
    """A daotai script (JSON or YAML, as text or a file) validated and planned."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        from daotai.script.presets import PRESETS

        return io.Schema(
            node_id="DaotaiDirectorScript",
            display_name="Director Script (daotai)",
            category=CATEGORY,
            description="Read a daotai shot list (scene, characters, shots with framing and camera moves), check "
                        "every rule and plan exact per-frame cameras. Problems are listed with their JSON path.",
            inputs=[
                io.String.Input("script_text", multiline=True, default=EXAMPLE_SCRIPT,
                                tooltip="the script as JSON or YAML; leave empty to read script_file"),
                io.String.Input("script_file", default="",
                                tooltip="path of a .json / .yaml script (relative references resolve against its "
                                        "folder); used when script_text is empty"),
                io.Combo.Input("preset", options=[AS_WRITTEN, *PRESETS], default=AS_WRITTEN,
                               tooltip="replace the script's frame size: preview 640x360, draft 1280x720, "
                                       "final 1920x1080"),
            ],
            outputs=[
                Script.Output("script", display_name="script"),
                io.String.Output("shot_ids", display_name="shot_ids", tooltip="the shot ids, comma-separated"),
                io.String.Output("summary", display_name="summary"),
            ],
        )

    @classmethod
    def validate_inputs(cls, script_text: str = "") -> bool | str:
        # ComfyUI repeats the answer once for every input this method names, so it names one: a script
        # written in the node is checked before the graph runs; a script_file (which wins over the text,
        # and may change before the run) is checked when the node runs. The preset is one of its options.
        from daotai.comfy.script import script_problem

        if not (script_text or "").strip():
            return True
        return script_problem(script_text) or True

    @classmethod
    def fingerprint_inputs(cls, script_text: str = "", script_file: str = "", preset: str = AS_WRITTEN) -> Any:
        path = Path((script_file or "").strip()).expanduser()
        stamp = path.stat().st_mtime_ns if str(path) not in ("", ".") and path.is_file() else None
        return (script_text, script_file, preset, stamp)

    @classmethod
    def execute(cls, script_text: str = "", script_file: str = "", preset: str = AS_WRITTEN) -> io.NodeOutput:
        from daotai.comfy.script import load_director_script

        text = "" if (script_file or "").strip() else script_text
        script = load_director_script(text, script_file, preset)
        return io.NodeOutput(script, ",".join(script.shot_ids), script.summary())


class ShotCameraNode(io.ComfyNode):
    """One shot's exact cameras: Wan camera embedding, Plücker rays and the trajectory."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="DaotaiShotCamera",
            display_name="Shot Camera (daotai)",
            category=CATEGORY,
            description="The shot's planned camera, frame by frame: a WAN_CAMERA_EMBEDDING for Wan-Fun camera "
                        "control (replaces the preset camera node), its Plücker rays and the trajectory.",
            inputs=[
                Script.Input("script"),
                _shot_id_input(),
                io.Int.Input("width", default=0, min=0, max=MAX_SIZE, step=16,
                             tooltip="clip width, a multiple of 16; 0: the plan's size for Wan"),
                io.Int.Input("height", default=0, min=0, max=MAX_SIZE, step=16,
                             tooltip="clip height, a multiple of 16; 0: the plan's size for Wan"),
                io.Int.Input("length", default=0, min=0, max=MAX_SIZE, step=1,
                             tooltip="clip frames, 4k+1; 0: the shot's duration rounded up to 4k+1 frames"),
                io.Float.Input("fps", default=0.0, min=0.0, max=240.0, step=0.001,
                               tooltip="clip frame rate; 0: the plan's (Wan 2.1 generates 16 fps)"),
            ],
            outputs=[
                io.WanCameraEmbedding.Output("camera_embedding", display_name="camera_embedding"),
                io.Int.Output("clip_width", display_name="width"),
                io.Int.Output("clip_height", display_name="height"),
                io.Int.Output("clip_length", display_name="length"),
                Plucker.Output("plucker", display_name="plucker",
                               tooltip="(frames, height, width, 6): ray moment then direction, first camera's frame"),
                Trajectory.Output("trajectory", display_name="trajectory"),
                io.String.Output("trajectory_json", display_name="trajectory_json",
                                 tooltip="per plan frame: cam_to_world (OpenGL axes), world_to_camera, "
                                         "cam_to_world_opencv, K, fov"),
            ],
        )

    @classmethod
    def execute(cls, script: DirectorScript, shot_id: str = "", width: int = 0, height: int = 0, length: int = 0,
                fps: float = 0.0) -> io.NodeOutput:
        from daotai.comfy.camera_node import shot_cameras, wan_camera_embedding, wan_size

        shot = script.shot(shot_id)
        cams = shot_cameras(script.plan, shot)
        default_w, default_h = wan_size(script.plan, shot)
        width, height = int(width) or default_w, int(height) or default_h
        embedding, rays = wan_camera_embedding(cams, width, height, int(length) or None, float(fps) or None)
        torch = _torch()
        return io.NodeOutput(torch.from_numpy(embedding), width, height, int(rays.shape[0]),
                             torch.from_numpy(rays), cams, json.dumps(cams.to_dict()))


class PrevizRenderNode(io.ComfyNode):
    """The shot's previz: frames, depth and character masks."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="DaotaiPrevizRender",
            display_name="Previz Render (daotai)",
            category=CATEGORY,
            description="Render the shot as an animatic on the CPU (no weights) through its exact cameras: frames, "
                        "depth (near = white) and character masks, frame-aligned; the controls Wan VACE takes.",
            inputs=[
                Script.Input("script"),
                _shot_id_input(),
                io.Boolean.Input("labels", default=True, tooltip="draw each character's name above it"),
                io.Int.Input("supersample", default=1, min=1, max=4, tooltip="render at N× the size and shrink"),
                io.String.Input("character", default="",
                                tooltip="the character id the mask shows; empty: every character"),
            ],
            outputs=[
                io.Image.Output("images", display_name="images"),
                io.Image.Output("depth", display_name="depth", tooltip="log-scaled depth, nearest white, sky black"),
                io.Mask.Output("mask", display_name="mask"),
                io.Video.Output("video", display_name="video"),
                io.Float.Output("fps", display_name="fps"),
            ],
        )

    @classmethod
    def execute(cls, script: DirectorScript, shot_id: str = "", labels: bool = True, supersample: int = 1,
                character: str = "") -> io.NodeOutput:
        from daotai.comfy.previz import render_previz

        shot = script.shot(shot_id)
        options = {"labels": bool(labels), "supersample": int(supersample)}
        previz = _run(lambda ctx: render_previz(script.plan, shot, options, ctx))
        depth = previz.depth_preview()  # (F, H, W) uint8
        return io.NodeOutput(_images(previz.rgb), _images(np.repeat(depth[..., None], 3, axis=-1)),
                             _mask(previz.character_mask(character)), _video_from_frames(previz.rgb, previz.fps),
                             float(previz.fps))


class ShotPromptNode(io.ComfyNode):
    """The prompt the planner composed for the shot, fitted to a model family's budget."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        from daotai import catalog

        families = list(catalog.prompt_budgets())
        return io.Schema(
            node_id="DaotaiShotPrompt",
            display_name="Shot Prompt (daotai)",
            category=CATEGORY,
            description="The English prompt and negative prompt daotai composes for the shot (framing, angle, "
                        "characters, the camera move in words), cut to the model family's prompt budget.",
            inputs=[
                Script.Input("script"),
                _shot_id_input(),
                io.Combo.Input("model", options=families, default="wan" if "wan" in families else families[0],
                               tooltip="the model family whose prompt budget applies"),
            ],
            outputs=[
                io.String.Output("prompt", display_name="prompt"),
                io.String.Output("negative_prompt", display_name="negative_prompt"),
            ],
        )

    @classmethod
    def execute(cls, script: DirectorScript, shot_id: str = "", model: str = "wan") -> io.NodeOutput:
        from daotai.plan.prompt import budget_for, fit_prompt

        shot = script.shot(shot_id)
        return io.NodeOutput(fit_prompt(shot.prompt, budget_for(model)), shot.negative_prompt)


class CameraCheckNode(io.ComfyNode):
    """Does a generated clip's camera move the way the shot's plan says?"""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="DaotaiCameraCheck",
            display_name="Camera Check (daotai)",
            category=CATEGORY,
            description="Track the motion in a clip and compare it with the motion the shot's planned camera "
                        "implies for the shot's previz depth: pass/fail, the mean flow error, and each move (pan, "
                        "tilt, roll, zoom/dolly) planned against measured.",
            is_output_node=True,
            inputs=[
                Script.Input("script"),
                _shot_id_input(),
                io.Video.Input("video", optional=True, tooltip="the clip to check (or connect images)"),
                io.Image.Input("images", optional=True, tooltip="the clip's frames, when there is no VIDEO"),
                io.Float.Input("fps", default=0.0, min=0.0, max=240.0, step=0.001,
                               tooltip="the clip's frame rate; 0: the VIDEO's own, or the plan's for images"),
                io.Int.Input("stride", default=1, min=1, max=8, tooltip="compare every N-th frame pair"),
            ],
            outputs=[
                io.Boolean.Output("passed", display_name="passed"),
                io.Float.Output("error_px", display_name="error_px", tooltip="mean flow error, pixels per frame"),
                io.String.Output("report", display_name="report"),
                io.String.Output("metrics_json", display_name="metrics_json"),
            ],
        )

    @classmethod
    def execute(cls, script: DirectorScript, shot_id: str = "", video: Any = None, images: Any = None,
                fps: float = 0.0, stride: int = 1) -> io.NodeOutput:
        from daotai.comfy.check import check_clip, previz_depth

        shot = script.shot(shot_id)
        if video is not None:
            frames, rate = _video_frames(video)
        elif images is not None:
            frames, rate = _rgb(images), None
        else:
            raise OptionError([Issue("video", NO_VALUE, "is not connected; connect a VIDEO or an IMAGE batch")])
        depth = _run(lambda ctx: previz_depth(script.plan, shot, ctx))
        result = check_clip(script.plan, shot, frames, float(fps) or rate, stride=int(stride), depth=depth)
        error = result.adherence.error_mean_px
        report = result.report()
        return io.NodeOutput(bool(result.ok), float(error) if np.isfinite(error) else -1.0, report,
                             result.to_json(), ui={"text": [report]})


def _output_folder(folder: str) -> Path:
    """A relative folder lies in ComfyUI's output directory (the current folder outside ComfyUI)."""
    path = Path((folder or "").strip() or "daotai").expanduser()
    if path.is_absolute():
        return path
    try:
        import folder_paths
    except ImportError:
        return Path.cwd() / path
    return Path(folder_paths.get_output_directory()) / path


class AssembleSequenceNode(io.ComfyNode):
    """Shot videos joined with the script's transitions and sound, plus the editorial timeline."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        from daotai.render.registry import backend_names

        shot_inputs = [io.Video.Input(f"shot_{i}", optional=True,
                                      tooltip=f"the video of the {i}. shot in shot_ids")
                       for i in range(1, MAX_SHOT_INPUTS + 1)]
        return io.Schema(
            node_id="DaotaiAssembleSequence",
            display_name="Assemble Sequence (daotai)",
            category=CATEGORY,
            description="Join the shots' videos in script order with the script's cuts, crossfades, wipes and fades (and "
                        "its soundtrack), and write the timeline as OTIO, FCP XML and EDL beside the sequence.",
            is_output_node=True,
            inputs=[
                Script.Input("script"),
                io.String.Input("shot_ids", default="", tooltip="comma-separated shots to join; empty: all"),
                io.String.Input("folder", default="daotai/sequence",
                                tooltip="where to write (relative: in ComfyUI's output folder)"),
                io.String.Input("shots_folder", default="",
                                tooltip="a `daotai render` folder whose shots/<id>.mp4 fill unconnected shots"),
                io.Combo.Input("codec", options=["h264", "hevc", "prores"], default="h264"),
                io.Combo.Input("backend", options=backend_names(), default="previz",
                               tooltip="the backend whose encode settings the sequence uses (as --backend)"),
                *shot_inputs,
            ],
            outputs=[
                io.Video.Output("sequence", display_name="sequence"),
                io.String.Output("sequence_path", display_name="sequence_path"),
                io.String.Output("timeline_path", display_name="timeline_path"),
            ],
        )

    @classmethod
    def execute(cls, script: DirectorScript, shot_ids: str = "", folder: str = "daotai/sequence",
                shots_folder: str = "", codec: str = "h264", backend: str = "previz",
                **shot_videos: Any) -> io.NodeOutput:
        from daotai.comfy.sequence import assemble_shots, chosen_shots, shots_in_folder

        unknown = sorted(k for k in shot_videos if not (k.startswith("shot_") and k[5:].isdigit()))
        if unknown:
            raise TypeError(f"unexpected inputs: {', '.join(unknown)}")
        plan = chosen_shots(script.plan, shot_ids)
        sources: dict[str, Any] = shots_in_folder(plan, shots_folder) if (shots_folder or "").strip() else {}
        fps = Fraction(*plan.fps_fraction)
        for index, shot in enumerate(plan.shots, start=1):
            video = shot_videos.get(f"shot_{index}")
            if video is None:
                continue
            path = _video_file(video)
            if path is not None:
                sources[shot.shot_id] = path
                continue
            frames, rate = _video_frames(video)
            if rate is not None and rate != fps:
                raise OptionError.at(f"shot_{index}", f"{rate} fps", f"must run at the plan's {fps} fps")
            sources[shot.shot_id] = frames
        target = _output_folder(folder)
        result = _run(lambda ctx: assemble_shots(plan, sources, target, codec=codec, backend=backend,
                                                 source=script.source, ctx=ctx))
        return io.NodeOutput(_video_from_file(result.sequence), str(result.sequence), str(result.timeline[0]),
                             ui={"text": [result.summary()]})


class H3LookNode(io.ComfyNode):
    """A character's reference picture and voice for H3 Render, chained one character after another."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="DaotaiH3Look",
            display_name="H3 Character Look (daotai)",
            category=CATEGORY,
            description="Give a character of the script a reference picture and / or a voice recording for "
                        "MiniMax-H3, in place of the files the script names. Chain one node per character.",
            inputs=[
                io.String.Input("character", default="", tooltip="the character's id in the script"),
                io.Image.Input("image", optional=True,
                               tooltip="the character's reference picture (the first of a batch): its look"),
                io.Audio.Input("voice", optional=True,
                               tooltip="the character's voice recording (its first 20 s are heard) for the lines "
                                       "it speaks"),
                Looks.Input("looks", optional=True, tooltip="looks of other characters, chained"),
            ],
            outputs=[Looks.Output("looks_out", display_name="looks")],
        )

    @classmethod
    def execute(cls, character: str = "", image: Any = None, voice: Any = None, looks: Any = None) -> io.NodeOutput:
        from daotai.comfy.h3 import make_look

        picture = _rgb(image)[0] if image is not None else None
        samples, rate = _waveform(voice, "voice") if voice is not None else (None, 0)
        look = make_look(character, picture, samples, rate)
        return io.NodeOutput((*tuple(looks or ()), look))


H3_DEVICES = ["auto", "cuda", "mps", "cpu"]


def _h3_choices(field: str) -> list[str]:
    """The values the ``h3`` backend's option ``field`` accepts (its Literal), in its own order."""
    from typing import Literal, get_args, get_origin

    from daotai.render.h3_options import H3Options

    annotation = H3Options.model_fields[field].annotation
    literals = [a for a in (annotation, *get_args(annotation)) if get_origin(a) is Literal]
    return [str(v) for v in get_args(literals[0])]


class H3RenderNode(io.ComfyNode):
    """One shot through daotai's h3 backend: MiniMax-H3 video and stereo sound from the script and its previz."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="DaotaiH3Render",
            display_name="H3 Render (daotai)",
            category=CATEGORY,
            description="Generate the shot with MiniMax-H3 as `daotai render --backend h3` does: the workflow "
                        "(ref2va: the shot's previz carries the exact camera and blocking, the characters' pictures "
                        "their looks, their voices the lines), segments for long shots, the sound in the same pass. "
                        "Weights from a local folder or the Hugging Face cache (safetensors only).",
            is_output_node=True,  # it writes shots/<id>.mp4, a deliverable even with nothing connected after it
            inputs=[
                Script.Input("script"),
                _shot_id_input(),
                io.String.Input("model", default="minimax-h3",
                                tooltip="a registry name (found in the Hugging Face cache: `daotai models pull "
                                        "minimax-h3`) or a local model folder"),
                io.Combo.Input("workflow", options=_h3_choices("workflow"), default="auto",
                               tooltip="auto: ref2va when the camera moves or a character has a look, else t2va"),
                io.Combo.Input("speed", options=["default", *_h3_choices("speed")], default="default",
                               tooltip="default: the backend's (exact) | exact: attention kernel and compiled "
                                       "blocks | fast: also FP8 linears and a step cache (approximate) | off: "
                                       "diffusers' own kernels"),
                io.Float.Input("segment_seconds", default=0.0, min=0.0, max=15.0, step=0.5,
                               tooltip="longest generation a long shot is split into, 5-15 s; 0: the model's 15 s"),
                io.Int.Input("steps", default=0, min=0, max=1000, tooltip="sigma points; 0: the model's default"),
                io.Combo.Input("device", options=H3_DEVICES, default="auto"),
                io.Boolean.Input("accept_licence", default=False,
                                 tooltip="accept MiniMax-H3's licence (shown when refused); recorded once"),
                io.String.Input("folder", default="daotai/h3",
                                tooltip="where shots/<id>.mp4 is written (relative: in ComfyUI's output folder)"),
                io.String.Input("turbo", default="",
                                tooltip="a step-distilled LoRA run with the steps, shift and alpha it was distilled "
                                        "for: a catalog name (h3-turbo-4step-768p, h3-turbo-8step-544p ...) or a "
                                        ".safetensors file; empty: none (steps above, if set, override its own)"),
                Looks.Input("looks", optional=True, tooltip="characters' pictures and voices from H3 Character Look"),
                io.Image.Input("previz", optional=True,
                               tooltip="the shot's previz frames from Previz Render (labels off), the video reference "
                                       "of a ref2va shot; unconnected: rendered here"),
            ],
            outputs=[
                io.Image.Output("images", display_name="images"),
                io.Audio.Output("audio", display_name="audio", tooltip="the shot's stereo sound, its duration long"),
                io.Video.Output("video", display_name="video", tooltip="shots/<id>.mp4: the frames with the sound"),
                io.Float.Output("fps", display_name="fps"),
                io.String.Output("report", display_name="report",
                                 tooltip="what the backend decided: workflow and why, references, segments, memory"),
            ],
        )

    @classmethod
    def execute(cls, script: DirectorScript, shot_id: str = "", model: str = "minimax-h3", workflow: str = "auto",
                speed: str = "default", segment_seconds: float = 0.0, steps: int = 0, device: str = "auto",
                accept_licence: bool = False, folder: str = "daotai/h3", turbo: str = "", looks: Any = None,
                previz: Any = None) -> io.NodeOutput:
        from daotai.comfy.h3 import render_h3, write_shot_file

        shot = script.shot(shot_id)
        options = {"model": (model or "").strip() or None, "workflow": workflow, "speed": speed,
                   "segment_seconds": float(segment_seconds) or None, "steps": int(steps) or None,
                   "device": None if device == "auto" else device, "accept_licence": bool(accept_licence),
                   "turbo": (turbo or "").strip() or None}
        root = script.source.resolve().parent if script.source is not None else None
        frames = _rgb(previz) if previz is not None else None
        result = _run(lambda ctx: render_h3(script.plan, shot, options, tuple(looks or ()), root, ctx, frames))
        path = write_shot_file(script.plan, result, _output_folder(folder))
        report = result.report()
        return io.NodeOutput(_images(result.rgb), _audio(result.sound, result.rate), _video_from_file(path),
                             float(result.fps), report, ui={"text": [report]})


NODES: list[type[io.ComfyNode]] = [
    DirectorScriptNode,
    ShotCameraNode,
    PrevizRenderNode,
    ShotPromptNode,
    CameraCheckNode,
    AssembleSequenceNode,
    H3LookNode,
    H3RenderNode,
]


class DaotaiExtension(ComfyExtension):
    """daotai's node pack."""

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return list(NODES)


async def comfy_entrypoint() -> DaotaiExtension:
    """What ComfyUI's custom-node loader calls."""
    return DaotaiExtension()
