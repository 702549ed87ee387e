"""Stub of ComfyUI 0.3.64's VIDEO values: ``VideoInput`` and its two implementations.

``VideoFromFile`` keeps a path (``get_stream_source`` returns it) and decodes on demand;
``VideoFromComponents`` holds frames as an IMAGE tensor with a frame rate. Decoding and
encoding go through PyAV, as in ComfyUI; torch is imported only when frames are made.
"""

from __future__ import annotations

import io as _bytes_io
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any


class VideoContainer(str, Enum):
    AUTO = "auto"
    MP4 = "mp4"


class VideoCodec(str, Enum):
    AUTO = "auto"
    H264 = "h264"


@dataclass
class VideoComponents:
    """A video's parts: frames (IMAGE, (F, H, W, 3) float in [0, 1]), frame rate, optional audio and metadata."""

    images: Any
    frame_rate: Fraction
    audio: Any = None
    metadata: dict | None = None


class VideoInput(ABC):
    """What a VIDEO socket carries."""

    @abstractmethod
    def get_components(self) -> VideoComponents:
        """Frames, frame rate and audio."""

    @abstractmethod
    def save_to(self, path: Any, format: VideoContainer = VideoContainer.AUTO, codec: VideoCodec = VideoCodec.AUTO,
                metadata: dict | None = None) -> None:
        """Write the video to a path or a binary stream."""

    def get_stream_source(self) -> Any:
        """Something PyAV can open: a path when the video is a file, else an in-memory MP4."""
        buffer = _bytes_io.BytesIO()
        self.save_to(buffer)
        buffer.seek(0)
        return buffer

    def get_dimensions(self) -> tuple[int, int]:
        images = self.get_components().images
        return int(images.shape[2]), int(images.shape[1])

    def get_duration(self) -> float:
        components = self.get_components()
        return float(components.images.shape[0] / components.frame_rate)


class VideoFromFile(VideoInput):
    """A video file on disk (or a BytesIO of one)."""

    def __init__(self, file: Any):
        self._file = file

    def get_stream_source(self) -> Any:
        if isinstance(self._file, _bytes_io.BytesIO):
            self._file.seek(0)
        return self._file

    def get_components(self) -> VideoComponents:
        import av
        import numpy as np
        import torch

        with av.open(self.get_stream_source(), mode="r") as container:
            stream = container.streams.video[0]
            frames = [torch.from_numpy(frame.to_ndarray(format="rgb24")).float() / 255.0
                      for frame in container.decode(stream)]
            rate = Fraction(stream.average_rate) if stream.average_rate else Fraction(1)
        images = torch.stack(frames) if frames else torch.from_numpy(np.zeros((0, 0, 0, 3), np.float32))
        return VideoComponents(images=images, frame_rate=rate)

    def save_to(self, path: Any, format: VideoContainer = VideoContainer.AUTO, codec: VideoCodec = VideoCodec.AUTO,
                metadata: dict | None = None) -> None:
        source = self.get_stream_source()
        data = source.read() if hasattr(source, "read") else open(source, "rb").read()
        if hasattr(path, "write"):
            path.write(data)
        else:
            with open(path, "wb") as out:
                out.write(data)


class VideoFromComponents(VideoInput):
    """A video held as frames in memory."""

    def __init__(self, components: VideoComponents):
        self._components = components

    def get_components(self) -> VideoComponents:
        c = self._components
        return VideoComponents(images=c.images, frame_rate=c.frame_rate, audio=c.audio)

    def save_to(self, path: Any, format: VideoContainer = VideoContainer.AUTO, codec: VideoCodec = VideoCodec.AUTO,
                metadata: dict | None = None) -> None:
        import av

        images = self._components.images
        with av.open(path, mode="w", format="mp4") as out:
            stream = out.add_stream("h264", rate=Fraction(self._components.frame_rate).limit_denominator(1000))
            stream.width, stream.height, stream.pix_fmt = int(images.shape[2]), int(images.shape[1]), "yuv420p"
            for image in images:
                rgb = (image * 255).clamp(0, 255).byte().cpu().numpy()
                for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")):
                    out.mux(packet)
            for packet in stream.encode(None):
                out.mux(packet)
