"""Stub of ComfyUI 0.3.64's ``comfy_api.latest`` (see tests/comfy_stub/README.md).

``io`` (node schemas and types), ``ComfyExtension`` (what ``comfy_entrypoint`` returns),
``ComfyAPISync().execution.set_progress`` (the progress bar; here it records the calls in
``PROGRESS``), ``Input.Video``, ``InputImpl.VideoFromFile`` / ``VideoFromComponents`` and
``Types.VideoComponents``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from . import _io as io
from ._video import VideoCodec, VideoComponents, VideoContainer, VideoFromComponents, VideoFromFile, VideoInput

PROGRESS: list[tuple[float, float]] = []  # every set_progress(value, max_value) call, in order


class ComfyExtension(ABC):
    """A node pack: ComfyUI awaits ``on_load`` and then ``get_node_list``."""

    async def on_load(self) -> None:  # noqa: B027 - optional hook with nothing to do by default, as in ComfyUI
        """Set up anything the pack needs once."""

    @abstractmethod
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        """The pack's node classes."""


class _Execution:
    def set_progress(self, value: float, max_value: float, node_id: str | None = None, preview_image=None,
                     ignore_size_limit: bool = False) -> None:
        """Move the running node's progress bar (recorded in PROGRESS)."""
        PROGRESS.append((value, max_value))


class ComfyAPISync:
    """The synchronous API object nodes create to report progress."""

    def __init__(self) -> None:
        self.execution = _Execution()


ComfyAPI = ComfyAPISync


class Input:
    Video = VideoInput


class InputImpl:
    VideoFromFile = VideoFromFile
    VideoFromComponents = VideoFromComponents


class Types:
    VideoCodec = VideoCodec
    VideoContainer = VideoContainer
    VideoComponents = VideoComponents


comfy_io = io

__all__ = ["ComfyAPI", "ComfyAPISync", "ComfyExtension", "Input", "InputImpl", "Types", "comfy_io", "io"]
