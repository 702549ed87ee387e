"""What a running job shows before it is done: the frame being rendered and the shots finished so far.

A render fills a staging folder that is swapped in only at the end, and a job's deliverables are
served once it has completed. A director should not wait that long to see frames, so while a job
runs its folder holds ``live/``: ``preview.jpg``, a small copy of the frame being rendered
(rewritten as glimpses arrive, daotai.events.Glimpse), and ``shot.<id>.mp4`` for each shot whose
file is encoded (a hard link to the file in the staging folder, so nothing is copied and the
render's own file is never touched). The folder goes when the job ends; the finished job's
deliverables take over.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from daotai.events import Glimpse, Output

LIVE_FOLDER = "live"
GLIMPSE_EVERY_S = 0.5  # a new preview frame at most twice a second (and at each shot's first frame)
PREVIEW = "preview"
LIVE_NAME = r"^(preview|shot\.[A-Za-z0-9_-]{1,64})$"  # what GET /v1/jobs/<id>/live/<name> takes
_LIVE_NAME = re.compile(LIVE_NAME)
_SUFFIX = {"preview": ".jpg", "shot": ".mp4"}


class LiveView:
    """The ``live/`` folder of one job attempt: made empty on creation, removed by :meth:`close`."""

    def __init__(self, folder: Path):
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self.glimpses = 0

    def glimpse(self, event: Glimpse) -> dict[str, Any] | None:
        """Write the glimpse as the preview; the event data that tells the console to fetch it again,
        or None when it could not be written (a full disk: the render matters, a live view does not)."""
        import io

        from PIL import Image

        from daotai.files import atomic_write_bytes

        buffer = io.BytesIO()
        Image.fromarray(event.rgb).save(buffer, format="JPEG", quality=80)
        try:
            atomic_write_bytes(self.folder / f"{PREVIEW}.jpg", buffer.getvalue())
        except OSError:
            return None
        self.glimpses += 1
        shown: dict[str, Any] = {"shot_id": event.shot_id, "index": event.index, "n": self.glimpses}
        if event.step is not None:  # a neural shot still denoising: its latents seen through a learned map
            shown.update(step=event.step, steps=event.steps)
        return shown

    def clip(self, event: Output) -> str | None:
        """Link a shot's encoded file into the folder; its live name (``shot.<id>``), or None when
        the event is not a shot file that exists now (other kinds, a render with no staging folder)
        or it could not be linked nor copied (a full disk)."""
        if event.kind != "shot" or event.shot_id is None or not _LIVE_NAME.match(f"shot.{event.shot_id}"):
            return None
        source = Path(event.written or event.path)
        if not source.is_file():
            return None
        from daotai.files import atomic_path, link_or_copy

        name = f"shot.{event.shot_id}"
        try:
            with atomic_path(self.folder / f"{name}.mp4") as temp:  # a retake's file replaces the earlier take's whole
                link_or_copy(source, temp)
        except OSError:
            return None
        return name

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def live_file(folder: Path, name: str) -> Path | None:
    """The file of a live name (``preview`` or ``shot.<id>``) in a job's live folder; None when the
    name is not one or the file is not (yet, or any more) there."""
    if not _LIVE_NAME.match(name):
        return None
    path = folder / f"{name}{_SUFFIX[name.split('.', 1)[0]]}"
    return path if path.is_file() and not path.is_symlink() else None


def open_live_file(folder: Path, name: str) -> tuple[BinaryIO, int] | None:
    """A live name's file opened now, with its size read from that open file; None when it is not there.
    A live file is answered from the file as opened when the request came: the picture is replaced
    twice a second and the folder goes when the job ends, so a length read from the path and bytes
    read from it later could belong to different files (a browser then sees a length mismatch)."""
    path = live_file(folder, name)
    if path is None:
        return None
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by read_through
    except OSError:
        return None
    return handle, os.fstat(handle.fileno()).st_size


def read_through(handle: BinaryIO, block: int = 1 << 16) -> Iterator[bytes]:
    """An open file's bytes in blocks, closing it at the end (or when the reader stops)."""
    with handle:
        while data := handle.read(block):
            yield data
