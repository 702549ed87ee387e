"""Sound and footage a script refers to: the soundtrack, spoken lines, a shot's level, reference videos.

These are the parts of a script that name files (an audio file, a video file, or an upload on
the service); the file rules and suffixes are kept together here.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from daotai.script.fields import (
    ID_PATTERN,
    Finite,
    Identifier,
    Model,
    Seconds,
    bounded_seconds,
    end_after_start,
    spelled,
)

# Sound: files a soundtrack may be (decoded by FFmpeg through PyAV), and the gain range in dB.
SOUNDTRACK_SUFFIXES = (".wav", ".flac", ".mp3", ".aac", ".m4a", ".ogg", ".opus")
UPLOAD_PREFIX = "upload:"
# User footage a shot may follow (decoded by FFmpeg through PyAV; checked when a render starts).
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm")
# A reference video's stretch is laid over the shot's duration: played at most this much faster or slower.
MAX_FOOTAGE_SPEED = 2.0
MIN_GAIN_DB, MAX_GAIN_DB = -60.0, 24.0
MAX_SOUNDTRACK_OFFSET_S = 3600.0
LANGUAGE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$"


def _check_soundtrack_path(value: str) -> str:
    text = value.strip()
    if text != value or not text:
        raise ValueError("must be a file name without leading or trailing spaces")
    if text.startswith(UPLOAD_PREFIX):
        if not re.fullmatch(ID_PATTERN, text[len(UPLOAD_PREFIX):]):
            raise ValueError("must be 'upload:<id>' with the id POST /v1/uploads returned")
        return value
    suffix = ("." + text.rsplit(".", 1)[-1].lower()) if "." in text.rsplit("/", 1)[-1] else ""
    if suffix not in SOUNDTRACK_SUFFIXES:
        raise ValueError(
            f"must be an audio file ({', '.join(SOUNDTRACK_SUFFIXES)}) or 'upload:<id>'; "
            f"{suffix or 'no suffix'} is not one"
        )
    return value


class Soundtrack(Model):
    """Music (or any sound bed) under the whole sequence.

    ``path``: an audio file relative to the script's folder (WAV, FLAC, MP3, AAC/M4A, Ogg,
    Opus) or ``upload:<id>`` for a file uploaded to the service. ``offset``: where the file's
    first sample plays on the sequence's timeline, in seconds; a negative offset skips that
    much of the file. The soundtrack is cut at the end of the picture.
    """

    path: Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_check_soundtrack_path)]
    offset: Seconds = Field(
        default=0.0, ge=-MAX_SOUNDTRACK_OFFSET_S, le=MAX_SOUNDTRACK_OFFSET_S,
        description="seconds on the sequence's timeline where the file starts; negative skips into the file",
    )
    gain_db: Finite = Field(default=0.0, ge=MIN_GAIN_DB, le=MAX_GAIN_DB, description="level change in dB")


def parse_soundtrack(value: Any) -> Any:
    if isinstance(value, str):
        return {"path": value}
    return value


def _check_video_path(value: str) -> str:
    text = value.strip()
    if text != value or not text:
        raise ValueError("must be a file name without leading or trailing spaces")
    if text.startswith(UPLOAD_PREFIX):
        if not re.fullmatch(ID_PATTERN, text[len(UPLOAD_PREFIX):]):
            raise ValueError("must be 'upload:<id>' with the id POST /v1/uploads returned")
        return value
    suffix = ("." + text.rsplit(".", 1)[-1].lower()) if "." in text.rsplit("/", 1)[-1] else ""
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(
            f"must be a video file ({', '.join(VIDEO_SUFFIXES)}) or 'upload:<id>'; {suffix or 'no suffix'} is not one"
        )
    return value


class ReferenceVideo(Model):
    """User footage (a phone rehearsal, a rough cut, an old take) as the shot's motion and camera reference.

    ``path``: a video file relative to the script's folder, or ``upload:<id>`` on the service.
    ``start`` and ``end`` (also written ``in`` and ``out``): the stretch of the file, in seconds
    from its start; ``end`` defaults to ``start`` plus the shot's duration. A stretch of another
    length is laid over the shot's duration (played faster or slower, at most 2x either way).
    Backends that follow footage (``h3``, ``wan-vace``) use it instead of the previz render;
    that the file decodes and lasts to ``end`` is checked when a render starts.
    """

    path: Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_check_video_path)]
    start: Seconds = Field(default=0.0, ge=0, le=24 * 3600.0, validation_alias=spelled("ReferenceVideo", "start"),
                           description="seconds into the file where the shot's reference begins (alias: in)")
    end: bounded_seconds(gt=0, le=24 * 3600.0) | None = Field(
        default=None, validation_alias=spelled("ReferenceVideo", "end"),
        description="seconds into the file where it ends (alias: out); default: start + the shot's duration")

    @model_validator(mode="after")
    def _order(self) -> "ReferenceVideo":
        end_after_start(self.start, self.end)
        return self

    def stretch(self, shot_seconds: float) -> tuple[float, float]:
        """(start, end) seconds of the file the shot follows."""
        return self.start, self.end if self.end is not None else self.start + shot_seconds


def parse_reference_video(value: Any) -> Any:
    if isinstance(value, str):
        return {"path": value}
    return value


class DialogueLine(Model):
    """A line spoken in the shot (voiced by backends that make sound; previz shows none)."""

    character: Identifier = Field(description="character id of the speaker")
    line: str = Field(min_length=1, max_length=2000)
    language: Annotated[str, Field(pattern=LANGUAGE_PATTERN)] | None = Field(
        default=None, description="BCP 47 language tag such as en, zh, zh-CN; default: the script's language"
    )


class ShotAudio(Model):
    """How the shot's own sound enters the sequence mix (the shot file keeps what the backend made)."""

    mute: Annotated[bool, Field(strict=True)] = False
    gain_db: Finite = Field(default=0.0, ge=MIN_GAIN_DB, le=MAX_GAIN_DB, description="level change in dB")
