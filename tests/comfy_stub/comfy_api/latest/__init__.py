"""Stub of ComfyUI 0.3.64's ``comfy_api.latest`` (see tests/comfy_stub/README.md).

``io`` (node schemas and types), ``ComfyExtension`` (what ``comfy_entrypoint`` returns),
``ComfyAPI`` / ``ComfyAPISync``, ``Input.Video``, ``InputImpl.VideoFromFile`` /
``VideoFromComponents`` and ``Types.VideoComponents``.

``ComfyAPISync()`` has no public attribute, as in the release: there ``ComfyAPI_latest``
declares ``execution: Execution`` under ``from __future__ import annotations``, so the sync
wrapper finds a string, not a class, and never sets ``execution`` on its instances. A node's
progress bar is ``comfy.utils.ProgressBar`` (the stub's ``comfy/utils.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from . import _io as io
from ._video import VideoCodec, VideoComponents, VideoContainer, VideoFromComponents, VideoFromFile, VideoInput


class ComfyExtension(ABC):
    """A node pack: ComfyUI awaits ``on_load`` and then ``get_node_list``."""

    async def on_load(self) -> None:  # noqa: B027 - optional hook with nothing to do by default, as in ComfyUI
        """Set up anything the pack needs once."""

    @abstractmethod
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        """The pack's node classes."""


class ComfyAPI:
    """The versioned API class (its ``Execution`` is reachable only through a running server)."""

    VERSION = "latest"
    STABLE = False


class ComfyAPISync:
    """The synchronous wrapper of ComfyAPI: in 0.3.64 its instances carry nothing public."""


class Input:
    Video = VideoInput


class InputImpl:
    VideoFromFile = VideoFromFile
    VideoFromComponents = VideoFromComponents


class Types:
    VideoCodec = VideoCodec
    VideoContainer = VideoContainer
    VideoComponents = VideoComponents


__all__ = ["ComfyAPI", "ComfyAPISync", "ComfyExtension", "Input", "InputImpl", "Types", "io"]
