"""The H3 nodes' library half: one shot through daotai's ``h3`` backend (MiniMax-H3), kept in memory.

The shot is rendered by the backend ``daotai render --backend h3`` builds (the same options,
the same checked loader: a local folder or the Hugging Face cache, safetensors only), so the
workflow choice, the previz video reference, the pictures, voices, segments and retiming are
the backend's own. What ComfyUI adds are looks: a character's reference picture and voice given
as values of the graph (an IMAGE, an AUDIO) instead of files named in the script. They are
written to a scratch folder for the render and put into a copy of the plan, where the backend
reads them as it reads the script's own ``reference_images`` and ``voice``.

Plain functions over numpy (no ComfyUI import); :mod:`daotai.comfy.nodes` converts the values.
"""

from __future__ import annotations

import tempfile
import wave
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Generator, Mapping, Sequence

import numpy as np

from daotai.errors import NO_VALUE, BackendError, Issue, OptionError
from daotai.events import Audio, Event, Frame, Notice
from daotai.plan.model import Plan, ShotPlan
from daotai.render.base import RunContext

# What a voice recording is cut to by the backend anyway (render.h3_references.VOICE_SECONDS is 20 s): a longer
# AUDIO is refused here rather than written out whole.
MAX_VOICE_SECONDS = 600.0


@dataclass(frozen=True)
class CharacterLook:
    """A character's reference picture and / or voice, given in the graph rather than in the script."""

    character: str
    image: np.ndarray | None = None  # (H, W, 3) uint8
    voice: np.ndarray | None = None  # (C, N) float32 in [-1, 1]
    voice_rate: int = 0  # samples per second of ``voice``

    def describe(self) -> str:
        """One line for the node's report: what this look gives."""
        parts = []
        if self.image is not None:
            parts.append(f"picture {self.image.shape[1]}x{self.image.shape[0]}")
        if self.voice is not None:
            parts.append(f"voice {self.voice.shape[1] / self.voice_rate:.1f} s at {self.voice_rate} Hz")
        return f"{self.character}: {', '.join(parts)}"


@dataclass(frozen=True)
class H3Shot:
    """A shot MiniMax-H3 generated: frames on the plan's grid and the shot's sound."""

    shot_id: str
    fps: Fraction
    rgb: np.ndarray  # (F, H, W, 3) uint8, F = the shot's frames at the plan's size
    sound: np.ndarray  # (N, C) float32 in [-1, 1], N = duration × rate
    rate: int  # sound samples per second
    notices: tuple[str, ...]  # what the backend decided (workflow, references, segments, memory tier …)

    def report(self) -> str:
        """For the node's panel: the shot in one line, then each decision."""
        frames, height, width = self.rgb.shape[:3]
        head = (f"{self.shot_id}: {frames} frames {width}x{height} at {float(self.fps):g} fps, sound "
                f"{self.sound.shape[1]} channels at {self.rate} Hz")
        return "\n".join([head, *self.notices])


def make_look(character: str, image: np.ndarray | None = None, voice: np.ndarray | None = None,
              voice_rate: int = 0) -> CharacterLook:
    """A checked look: a character id and at least one of a picture (H, W, 3) uint8 or a voice (C, N) float."""
    issues = []
    name = (character or "").strip()
    if not name:
        issues.append(Issue("character", NO_VALUE, "is empty; name the character id the look is for"))
    if image is None and voice is None:
        issues.append(Issue("image", NO_VALUE, "is not connected, nor is voice; connect a picture, a voice or both"))
    if image is not None and (image.ndim != 3 or image.shape[-1] != 3 or image.dtype != np.uint8 or not image.size):
        issues.append(Issue("image.shape", tuple(image.shape), "must be one picture (height, width, 3)"))
    if voice is not None:
        if voice.ndim != 2 or voice.shape[0] not in (1, 2) or voice.shape[1] == 0:
            issues.append(Issue("voice.waveform.shape", tuple(voice.shape), "must be (1 or 2 channels, samples > 0)"))
        elif voice_rate <= 0:
            issues.append(Issue("voice.sample_rate", voice_rate, "must be > 0"))
        elif voice.shape[1] / voice_rate > MAX_VOICE_SECONDS:
            issues.append(Issue("voice.duration_s", round(voice.shape[1] / voice_rate, 1),
                                f"must be at most {MAX_VOICE_SECONDS:g} s (the model hears its first 20 s)"))
        elif not np.isfinite(voice).all():
            issues.append(Issue("voice.waveform", "NaN or infinite samples", "must hold finite numbers in [-1, 1]"))
    if issues:
        raise OptionError(issues)
    return CharacterLook(name, image, None if voice is None else np.asarray(voice, np.float32), int(voice_rate))


def _write_wav(path: Path, samples: np.ndarray, rate: int) -> None:
    """(C, N) float32 → a 16-bit PCM WAV file (what the backend decodes and resamples with FFmpeg)."""
    pcm = np.rint(np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")  # (C, N) int16
    with wave.open(str(path), "wb") as out:
        out.setnchannels(pcm.shape[0])
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.ascontiguousarray(pcm.T).tobytes())  # interleaved (N, C)


def plan_with_looks(plan: Plan, looks: Sequence[CharacterLook], folder: Path) -> Plan:
    """A copy of ``plan`` whose characters take the looks' pictures and voices (written into ``folder``).

    A look replaces the script's own first reference image / voice of its character (a picture
    of the graph is what the user chose for this render); the script's other reference images stay.
    """
    from PIL import Image

    known = tuple(c.id for c in plan.characters)
    issues = []
    seen: set[str] = set()
    for index, look in enumerate(looks):
        if look.character not in known:
            issues.append(Issue(f"looks[{index}].character", look.character, "is not a character of the script"))
        elif look.character in seen:
            issues.append(Issue(f"looks[{index}].character", look.character, "has a look already; chain one look "
                                "per character (a look may carry a picture and a voice)"))
        seen.add(look.character)
    if issues:
        raise OptionError(issues, valid=known)
    if not looks:
        return plan
    by_id = {look.character: look for look in looks}
    characters = []
    for character in plan.characters:
        look = by_id.get(character.id)
        if look is None:
            characters.append(character)
            continue
        update: dict[str, Any] = {}
        if look.image is not None:
            picture = folder / f"{character.id}_look.png"
            Image.fromarray(look.image).save(picture)
            update["reference_images"] = [str(picture), *character.reference_images[1:]]
        if look.voice is not None:
            voice = folder / f"{character.id}_voice.wav"
            _write_wav(voice, look.voice, look.voice_rate)
            update["voice"] = str(voice)
        characters.append(character.model_copy(update=update))
    return plan.model_copy(update={"characters": characters})


def as_node_inputs(error: OptionError) -> OptionError:
    """An options error as the node's inputs name it: ``options.steps`` is the node's ``steps``, and the licence
    is accepted with the node's ``accept_licence`` switch rather than ``-O accept_licence=true``."""
    issues = []
    for issue in error.issues:
        path = issue.path.removeprefix("options.")
        rule = issue.rule.replace("-O accept_licence=true", "the accept_licence switch of H3 Render")
        issues.append(Issue(path, issue.value, rule))
    return OptionError(issues, valid=error.valid)


def h3_options(values: Mapping[str, Any]) -> Any:
    """The ``h3`` backend's options from the node's values (None and "default" mean: the backend decides)."""
    from daotai.render.registry import spec_for

    chosen = {k: v for k, v in values.items() if v is not None and v != "default"}
    return spec_for("h3").validate_options(chosen)


def check_previz(plan: Plan, shot: ShotPlan, rgb: np.ndarray) -> np.ndarray:
    """The shot's previz frames (F, H, W, 3) uint8 as given, or an error naming ``previz`` and what it must be."""
    if rgb.ndim != 4 or rgb.shape[-1] != 3 or rgb.dtype != np.uint8:
        raise OptionError.at("previz.shape", tuple(rgb.shape), "must be (frames, height, width, 3) of uint8")
    if len(rgb) != shot.frames:
        raise OptionError.at("previz.frames", len(rgb), f"must be the {shot.frames} frames of shot {shot.shot_id} "
                             "(connect the Previz Render of the same shot)")
    if rgb.shape[1:3] != (plan.height, plan.width):
        raise OptionError.at("previz.size", f"{rgb.shape[2]}x{rgb.shape[1]}",
                             f"must be the plan's size, {plan.width}x{plan.height}")
    return rgb


def render_h3(plan: Plan, shot: ShotPlan, options: Mapping[str, Any], looks: Sequence[CharacterLook] = (),
              reference_root: Path | None = None, ctx: RunContext | None = None,
              previz: np.ndarray | None = None) -> Generator[Event, None, H3Shot]:
    """Render ``shot`` with the ``h3`` backend (``options``: as ``-O`` takes them); yields its progress.

    ``looks`` give characters pictures and voices from the graph; the script's own files resolve
    against ``reference_root`` (None: the current folder), as ``daotai render`` resolves them.
    ``previz``: the shot's previz frames (F, H, W, 3) uint8 rendered already (else the backend renders
    them, without labels) — the video reference a ref2va shot's camera move comes from.
    """
    from daotai.render.base import RenderJob
    from daotai.render.registry import create_backend
    from daotai.render.spec import BackendEnv

    ctx = ctx or RunContext()
    try:
        checked = h3_options(options)
    except OptionError as exc:
        raise as_node_inputs(exc) from None
    if previz is not None:
        previz = check_previz(plan, shot, previz)
    root = reference_root or Path.cwd()
    rgb: np.ndarray | None = None
    sound: Audio | None = None
    notices: list[str] = []
    seen = 0
    with tempfile.TemporaryDirectory(prefix="daotai-h3-looks-") as scratch:
        looked = plan_with_looks(plan, looks, Path(scratch))
        try:
            backend = create_backend("h3", checked, BackendEnv(reference_root=root))  # refuses an unaccepted licence
        except OptionError as exc:
            raise as_node_inputs(exc) from None
        if previz is not None:
            backend.use_previz(shot.shot_id, previz)
        try:
            for event in backend.render(RenderJob(plan=looked, shot=shot, controls=False), ctx):
                if isinstance(event, Frame):
                    if event.index != seen:
                        raise BackendError(f"{shot.shot_id}: h3 sent frame {event.index} out of order")
                    if rgb is None:
                        rgb = np.empty((shot.frames, *event.rgb.shape), np.uint8)  # (F, H, W, 3) uint8
                    rgb[seen] = event.rgb
                    seen += 1
                elif isinstance(event, Audio):
                    sound = event
                else:
                    if isinstance(event, Notice):
                        notices.append(event.text)
                    yield event
        except BackendError as exc:
            text = str(exc)
            if not text.startswith(("--model: ", "turbo: ")):
                raise
            # the node's inputs are called model and workflow
            raise BackendError(text.removeprefix("--").replace("force -O workflow=", "set the workflow input")) from None
        finally:
            backend.close()
    if rgb is None or seen != shot.frames:
        raise BackendError(f"{shot.shot_id}: h3 produced {seen} frames, the plan has {shot.frames}")
    if sound is None:
        raise BackendError(f"{shot.shot_id}: h3 produced no sound")
    return H3Shot(shot_id=shot.shot_id, fps=Fraction(*plan.fps_fraction), rgb=rgb, sound=sound.samples,
                  rate=sound.rate, notices=tuple(notices))


def write_shot_file(plan: Plan, result: H3Shot, folder: Path, codec: str = "h264") -> Path:
    """``<folder>/shots/<id>.mp4`` with the shot's frames and sound, encoded as ``daotai render --backend h3`` would."""
    from daotai.encode.audio import mux_audio
    from daotai.encode.video import VideoWriter
    from daotai.plan.layout import RenderLayout
    from daotai.run.settings import PipelineSettings, encode_settings_for

    enc = encode_settings_for(PipelineSettings(backend="h3", codec=codec), plan.width, plan.height)
    layout = RenderLayout(Path(folder), enc.container)
    layout.make_folders(False)
    target = layout.shot(result.shot_id)
    with VideoWriter(target, plan.width, plan.height, result.fps, enc) as writer:
        for frame in result.rgb:
            writer.write(frame)
    mux_audio(target, result.sound, result.rate)
    return target
