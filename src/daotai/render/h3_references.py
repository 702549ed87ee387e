"""What each MiniMax-H3 generation of a shot is conditioned on: the characters' pictures (and looks carried
from earlier shots), the previz or the user's footage as its video, the speakers' voices, a first frame, and
the prompt that names them in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from daotai.errors import BackendError
from daotai.plan.model import Plan
from daotai.plan.prompt import H3_MAX_PICTURES, compose_h3_prompt, h3_pictures, h3_voices
from daotai.plan.timing import Segment, frames_for
from daotai.render.base import RenderJob, RunContext
from daotai.render.carry_looks import LookBook
from daotai.render.footage import describe_footage, shot_footage
from daotai.render.h3_runner import Generation
from daotai.render.neural.references import CharacterPicture, character_picture
from daotai.render.neural.retime import resize_rgb
from daotai.render.previz.guide import PrevizGuide

MIN_REFERENCE_FRAMES = 22  # 17*1+5: the shortest video reference MiniMax-H3's VAE encodes without padding
VOICE_SECONDS = 20.0  # a voice recording is cut to its first seconds: enough to carry a voice, bounded in tokens


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


class H3Conditioning:
    """The references, first frames and prompts of the `h3` backends' generations (mixed into them: the MLX
    port overrides how a voice is read). Reads the state a backend holds between shots, set by its ``_start``."""

    options: Any
    runner: Any
    reference_root: Path
    looks: LookBook | None
    _previz: PrevizGuide  # the label-free previz, made on first use
    _last_frame: tuple[str, np.ndarray] | None  # (shot id, (H, W, 3) uint8 at the canvas) of the last shot
    _given_previz: dict[str, np.ndarray]  # shot id → (F, H, W, 3) uint8 previz rendered elsewhere

    def _previz_frames(self, job: RenderJob, ctx: RunContext, native: int) -> list[np.ndarray]:
        """The shot's previz RGB (no labels) at 24 fps for its first ``native`` frames: (H, W, 3) uint8 each."""
        from daotai.render.neural.retime import plan_to_native_indexes

        shot = job.shot
        wanted = plan_to_native_indexes(shot.frames, job.plan.fps, native, 24.0)
        given = self._given_previz.get(shot.shot_id)
        if given is not None:
            return [given[i] for i in wanted]
        return self._previz.rgb_frames(job, ctx, wanted)

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
