"""Where a render's files go: the one place output names are made and read back.

A render folder (``daotai render -o OUT``, a server job's ``out/``, a cluster worker's temp
folder) looks like this; ``<c>`` is the run's container (``.mp4`` for H.264/HEVC, ``.mov``
for ProRes)::

    shots/<shot_id><c>                   kind "shot"            public name "shot.<shot_id>"
    control/<shot_id>_depth.mkv          kind "depth"           "depth.<shot_id>"
    control/<shot_id>_depth_preview.mp4  kind "depth_preview"   "depth_preview.<shot_id>"
    control/<shot_id>_mask.mkv           kind "mask"            "mask.<shot_id>"
    control/index.json                   kind "control_index"   "control_index"
    shots/<shot_id>.srt, .vtt            kinds "shot_srt", "shot_vtt"  "shot_srt.<shot_id>" … (shots with dialogue)
    sequence<c>                          kind "sequence"        "video"
    sequence.srt, sequence.vtt           kinds (and names) "srt", "vtt": the dialogue's subtitles (only with dialogue)
    boards.pdf                           kind "boards"          storyboard pages (``--boards pdf``)
    boards/page_<nn>.png                 kind "board_page"      "board_page.<nn>" (``--boards png``; nn from 01)
    plan.json, manifest.json, qc.json, contact_sheet.png, timeline.otio
                                         kinds (and names) "plan", "manifest", "qc", "contact_sheet", "timeline"
    timeline.xml, timeline.edl           "timeline_xml", "timeline_edl": FCP 7 XML and CMX 3600 EDL of the
                                         timeline (when their OTIO adapters are installed)
    timeline.a<n>.edl                    kind "timeline_audio_edl"  "timeline_audio_edl.<n>" (audio track n, from 1)
    cameras/<shot_id>.pose.txt           kind "camera_pose"     "camera_pose.<shot_id>" (CameraCtrl pose file)
    cameras/<shot_id>.c2w.json           kind "camera_json"     "camera_json.<shot_id>" (camera-to-world JSON)
    cameras/<shot_id>.usda               kind "camera_usd"      "camera_usd.<shot_id>" (``--usd-cameras``)
    cameras/sequence.usda                kind "sequence_camera_usd"  every shot's camera on the sequence's frames
    shots/<shot_id>_enhanced<c>          kind "shot_enhanced"   "shot_enhanced.<shot_id>" (``--enhance``)
    sequence_enhanced<c>                 kind "sequence_enhanced"  "video_enhanced" (``--enhance``)
    enhance.json                         kind "enhance_manifest"   "enhance" (what ``--enhance`` did)
    thumbnail.jpg, spritesheet.jpg       "thumbnail", "spritesheet" (the server's previews of the sequence)
    takes/<shot_id>/take<n>/…            takes that were not kept (``--keep-takes``): the render's own files,
                                         listed in its manifest, but no deliverable (:meth:`RenderLayout.take_dir`)

:meth:`RenderLayout.classify` is the inverse: a relative path back to (kind, shot id). It
is unambiguous for every shot id the script allows (letters, digits, ``_`` and ``-``, no
dot): the extension tells a depth preview (``.mp4``) from depth and mask (``.mkv``), and
``_depth.mkv`` / ``_mask.mkv`` cannot both end one name, so a shot called ``a_depth`` or
``x_depth_preview`` reads back as itself. Enhanced copies are the one exception: ``shots/a_enhanced.mp4``
is shot ``a``'s enhanced copy in a render with ``--enhance`` and shot ``a_enhanced`` in one
without, so a layout is told which (``enhanced``; :meth:`RenderLayout.find` reads it from the
folder's enhance.json). Pure path arithmetic: no file is touched except
by :meth:`RenderLayout.find`, :meth:`RenderLayout.present_deliverables` (reads the folder) and
:meth:`RenderLayout.make_folders`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePath

from daotai.script.fields import ID_PATTERN

SHOTS_DIR = "shots"
CONTROL_DIR = "control"
# Suffixes of the colour videos (shots and sequence): EncodeSettings.container of each codec
# (tests/test_layout.py checks the two agree).
CONTAINERS = (".mp4", ".mov")

SHOT_KINDS = ("shot", "depth", "depth_preview", "mask")  # one file per shot each
# A shot's subtitles, beside its video in shots/ (written only for shots with dialogue).
SUBTITLE_ENDINGS = {"shot_srt": ".srt", "shot_vtt": ".vtt"}
BOARDS_DIR = "boards"
CAMERAS_DIR = "cameras"  # every shot's camera for other tools (daotai.deliver.camera_files)
# A shot's camera files in cameras/: the ending after the shot id (daotai.deliver.camera_files writes them).
CAMERA_ENDINGS = {"camera_pose": ".pose.txt", "camera_json": ".c2w.json", "camera_usd": ".usda"}
# The timeline's editorial exchange files beside timeline.otio (daotai.deliver.timeline), by the
# suffix its adapters write; an EDL holds one track, so each audio track gets timeline.a<n>.edl.
TIMELINE_STEM = "timeline"  # timeline.otio and the editorial files beside it
EDITORIAL_FILES = {"timeline_xml": ".xml", "timeline_edl": ".edl"}
_AUDIO_EDL = re.compile(rf"^{TIMELINE_STEM}\.a([1-9][0-9]{{0,2}})\.edl$")
SEQUENCE_CAMERA = "sequence.usda"  # in cameras/: every shot's camera on the sequence's frames
ENHANCED = "_enhanced"  # the ending of an enhanced copy's stem (daotai.post.enhance)
TAKES_DIR = "takes"  # takes/<shot_id>/take<n>/: takes not kept, with --keep-takes (daotai.run.retakes)
_TAKE = re.compile(r"^take([1-9][0-9]{0,2})$")
# Kinds with one file per item: a shot's (its id), a board page's (its number, two digits or
# more) or an audio track's EDL (its number, from 1).
NUMBERED_KINDS = ("board_page", "timeline_audio_edl")  # items named by a number, not a shot id
ITEM_KINDS = (*SHOT_KINDS, *SUBTITLE_ENDINGS, *CAMERA_ENDINGS, "shot_enhanced", *NUMBERED_KINDS)
_BOARD_PAGE = re.compile(r"^page_([0-9]{2,4})\.png$")
CONTROL_KINDS = ("depth", "depth_preview", "mask")  # written only when controls are on
# Files of the whole render, relative to its folder ("sequence" takes the run's container).
RUN_FILES = {
    "plan": "plan.json",
    "control_index": f"{CONTROL_DIR}/index.json",
    "qc": "qc.json",
    "contact_sheet": "contact_sheet.png",
    "timeline": f"{TIMELINE_STEM}.otio",
    "manifest": "manifest.json",
    "thumbnail": "thumbnail.jpg",
    "spritesheet": "spritesheet.jpg",
    "srt": "sequence.srt",
    "vtt": "sequence.vtt",
    "boards": "boards.pdf",
    "timeline_xml": TIMELINE_STEM + EDITORIAL_FILES["timeline_xml"],
    "timeline_edl": TIMELINE_STEM + EDITORIAL_FILES["timeline_edl"],
    "sequence_camera_usd": f"{CAMERAS_DIR}/{SEQUENCE_CAMERA}",
    "enhance_manifest": "enhance.json",
}
CONTAINER_FILES = {"sequence": "sequence", "sequence_enhanced": "sequence" + ENHANCED}  # stem; the run's container
RUN_KINDS = (*CONTAINER_FILES, *RUN_FILES)
# Control files: the ending after the shot id (the extension is fixed, whatever the container).
CONTROL_ENDINGS = {"depth": "_depth.mkv", "depth_preview": "_depth_preview.mp4", "mask": "_mask.mkv"}
# kinds published under another name; the rest keep their kind
PUBLIC_NAMES = {"sequence": "video", "sequence_enhanced": "video_enhanced", "enhance_manifest": "enhance"}
# Written into a render's staging folder when the render starts and removed once its manifest is
# written, before the folder is swapped in (daotai.run.pipeline); a render folder that holds it was
# left by an older daotai that rendered in place, and may mix files of two runs (hidden, so no
# manifest or listing takes it for a deliverable).
IN_PROGRESS = ".daotai-render-in-progress.json"
# Hidden files that are no one's work: the desktop's folder caches.
DESKTOP_FILES = (".DS_Store", "Thumbs.db", "desktop.ini")
_DAOTAI_HIDDEN = re.compile(r"^\..+\.[0-9a-f]{8}\.partial(\.[^.]*)?$")  # daotai.files.temp_path

_SHOT_ID = re.compile(ID_PATTERN)


def valid_shot_id(shot_id: object) -> bool:
    """Whether ``shot_id`` is an id the script schema accepts (and so a safe file-name stem)."""
    return isinstance(shot_id, str) and _SHOT_ID.fullmatch(shot_id) is not None


def board_page_id(number: int) -> str:
    """The id of board page ``number`` (from 1) in its file name and public name: ``01``, ``02`` …"""
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 9999:
        raise ValueError(f"page: {number!r} must be a whole number from 1 to 9999")
    return f"{number:02d}"


def camera_file_name(kind: str, shot_id: str) -> str:
    """The name of a shot's camera file in a cameras folder: ``s01.pose.txt``, ``s01.c2w.json``, ``s01.usda``."""
    if kind not in CAMERA_ENDINGS:
        raise ValueError(f"kind: {kind!r} is not a camera file kind ({', '.join(CAMERA_ENDINGS)})")
    if not valid_shot_id(shot_id):
        raise ValueError(f"shot_id: {shot_id!r} is not a valid shot id (pattern {ID_PATTERN})")
    return f"{shot_id}{CAMERA_ENDINGS[kind]}"


def audio_edl_name(stem: str, track: int) -> str:
    """The name of audio track ``track``'s EDL beside a timeline called ``stem``: ``timeline.a1.edl``."""
    if isinstance(track, bool) or not isinstance(track, int) or not 1 <= track <= 999:
        raise ValueError(f"track: {track!r} must be a whole number from 1 to 999")
    return f"{stem}.a{track}.edl"


def public_name(kind: str, shot_id: str | None = None) -> str:
    """The name a front end shows and serves a deliverable by: ``video``, ``qc``, ``shot.s01`` …"""
    if kind == "board_page":
        if not (isinstance(shot_id, str) and _BOARD_PAGE.match(f"page_{shot_id}.png")):
            raise ValueError(f"page: {shot_id!r} is not a board page id (two to four digits)")
        return f"{kind}.{shot_id}"
    if kind == "timeline_audio_edl":
        if not (isinstance(shot_id, str) and _AUDIO_EDL.match(f"{TIMELINE_STEM}.a{shot_id}.edl")):
            raise ValueError(f"track: {shot_id!r} is not an audio track number (1 to 999)")
        return f"{kind}.{shot_id}"
    if kind in ITEM_KINDS:
        if not valid_shot_id(shot_id):
            raise ValueError(f"shot_id: {shot_id!r} is not a valid shot id (pattern {ID_PATTERN})")
        return f"{kind}.{shot_id}"
    if kind not in RUN_KINDS:
        raise ValueError(f"kind: {kind!r} is not a deliverable kind ({', '.join((*ITEM_KINDS, *RUN_KINDS))})")
    if shot_id is not None:
        raise ValueError(f"shot_id: {kind!r} belongs to the whole render, not to shot {shot_id!r}")
    return PUBLIC_NAMES.get(kind, kind)


def parse_public_name(name: str) -> tuple[str, str | None]:
    """The inverse of :func:`public_name`: ``shot.s01`` → ("shot", "s01"), ``video`` → ("sequence", None)."""
    kind, dot, shot_id = name.partition(".")
    if dot:
        if kind == "board_page":
            if _BOARD_PAGE.match(f"page_{shot_id}.png"):
                return kind, shot_id
        elif kind == "timeline_audio_edl":
            if _AUDIO_EDL.match(f"{TIMELINE_STEM}.a{shot_id}.edl"):
                return kind, shot_id
        elif kind in ITEM_KINDS and valid_shot_id(shot_id):
            return kind, shot_id
        raise ValueError(f"{name!r} is not the public name of a deliverable")
    kinds = {PUBLIC_NAMES.get(k, k): k for k in RUN_KINDS}
    if name not in kinds:
        raise ValueError(f"{name!r} is not the public name of a deliverable")
    return kinds[name], None


@dataclass(frozen=True)
class RenderLayout:
    """The paths of one render folder's deliverables (absolute under ``root``, or relative posix)."""

    root: Path
    container: str = ".mp4"  # suffix of the shot and sequence videos
    # The render has enhanced copies (--enhance): shots/<id>_enhanced<c> is shot <id>'s copy, not a shot
    enhanced: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))
        if self.container not in CONTAINERS:
            raise ValueError(f"container: {self.container!r} must be one of {', '.join(CONTAINERS)}")

    @classmethod
    def find(cls, root: str | Path) -> "RenderLayout":
        """The layout of an existing render folder: the container of its sequence (else its shots)."""
        folder = Path(root)
        enhanced = (folder / RUN_FILES["enhance_manifest"]).is_file()
        for container in CONTAINERS:
            if (folder / f"sequence{container}").is_file():
                return cls(folder, container, enhanced)
        for container in CONTAINERS:
            if (folder / SHOTS_DIR).is_dir() and any((folder / SHOTS_DIR).glob(f"*{container}")):
                return cls(folder, container, enhanced)
        return cls(folder, enhanced=enhanced)

    # ------------------------------------------------------------ relative names

    def relative(self, kind: str, shot_id: str | None = None) -> str:
        """The posix path of one deliverable relative to the render folder."""
        public_name(kind, shot_id)  # validates kind and shot id
        if kind == "shot":
            return f"{SHOTS_DIR}/{shot_id}{self.container}"
        if kind in CONTROL_ENDINGS:
            return f"{CONTROL_DIR}/{shot_id}{CONTROL_ENDINGS[kind]}"
        if kind in SUBTITLE_ENDINGS:
            return f"{SHOTS_DIR}/{shot_id}{SUBTITLE_ENDINGS[kind]}"
        if kind == "board_page":
            return f"{BOARDS_DIR}/page_{shot_id}.png"
        if kind in CAMERA_ENDINGS:
            return f"{CAMERAS_DIR}/{camera_file_name(kind, shot_id)}"
        if kind == "shot_enhanced":
            return f"{SHOTS_DIR}/{shot_id}{ENHANCED}{self.container}"
        if kind == "timeline_audio_edl":
            return audio_edl_name(TIMELINE_STEM, int(shot_id))
        if kind in CONTAINER_FILES:
            return f"{CONTAINER_FILES[kind]}{self.container}"
        return RUN_FILES[kind]

    def path(self, kind: str, shot_id: str | None = None) -> Path:
        """The absolute (root-based) path of one deliverable."""
        return self.root / self.relative(kind, shot_id)

    def shot_files(self, shot_id: str, controls: bool) -> dict[str, str]:
        """A shot's files, kind → relative path: the video, plus depth / depth preview / mask with controls."""
        kinds = SHOT_KINDS if controls else ("shot",)
        return {kind: self.relative(kind, shot_id) for kind in kinds}

    def deliverables(self, shot_ids: list[str] | tuple[str, ...], controls: bool = True) -> dict[str, str]:
        """Public name → relative path of every file a render of these shots always delivers (server
        previews, and what options or installed adapters add — USD cameras, editorial timelines,
        subtitles, boards, enhanced copies — excluded)."""
        found = {public_name(kind, sid): rel
                 for sid in shot_ids for kind, rel in self.shot_files(sid, controls).items()}
        for sid in shot_ids:
            for kind in ("camera_pose", "camera_json"):
                found[public_name(kind, sid)] = self.relative(kind, sid)
        for kind in ("sequence", "plan", "control_index", "qc", "contact_sheet", "timeline", "manifest"):
            if kind != "control_index" or controls:
                found[public_name(kind)] = self.relative(kind)
        return found

    def classify(self, relative_path: str | PurePath) -> tuple[str, str | None]:
        """(kind, shot id or None) of a path relative to the render folder; ValueError if it is no deliverable."""
        rel = relative_path.as_posix() if isinstance(relative_path, PurePath) else str(relative_path)
        for kind in RUN_KINDS:
            if rel == self.relative(kind):
                return kind, None
        if (track := _AUDIO_EDL.match(rel)) is not None:
            return "timeline_audio_edl", track.group(1)
        folder, _, name = rel.partition("/")
        if "/" not in name:
            if folder == SHOTS_DIR and name.endswith(self.container):
                shot_id = name[: -len(self.container)]
                if self.enhanced and shot_id.endswith(ENHANCED) and valid_shot_id(shot_id[: -len(ENHANCED)]):
                    return "shot_enhanced", shot_id[: -len(ENHANCED)]
                if valid_shot_id(shot_id):
                    return "shot", shot_id
            elif folder == SHOTS_DIR:
                for kind, ending in SUBTITLE_ENDINGS.items():
                    shot_id = name[: -len(ending)]
                    if name.endswith(ending) and valid_shot_id(shot_id):
                        return kind, shot_id
            elif folder == BOARDS_DIR and (page := _BOARD_PAGE.match(name)):
                return "board_page", page.group(1)
            elif folder == CAMERAS_DIR:
                for kind, ending in CAMERA_ENDINGS.items():
                    shot_id = name[: -len(ending)]
                    if name.endswith(ending) and valid_shot_id(shot_id):
                        return kind, shot_id
            elif folder == CONTROL_DIR:
                for kind, ending in CONTROL_ENDINGS.items():
                    shot_id = name[: -len(ending)]
                    if name.endswith(ending) and valid_shot_id(shot_id):
                        return kind, shot_id
        raise ValueError(f"{rel!r} is not a deliverable of a render folder")

    def classify_any(self, relative_path: str | PurePath) -> tuple[str, str | None]:
        """:meth:`classify` under either container (a ProRes render's ``.mov`` files are
        deliverables of an H.264 render's folder too); ValueError if it is no deliverable."""
        for container in (self.container, *(c for c in CONTAINERS if c != self.container)):
            try:
                return RenderLayout(self.root, container, self.enhanced).classify(relative_path)
            except ValueError:
                continue
        raise ValueError(f"{relative_path!s} is not a deliverable of a render folder")

    def name_of(self, relative_path: str | PurePath) -> str:
        """The public name of a deliverable from its relative path; ValueError if it is none."""
        return public_name(*self.classify(relative_path))

    # ------------------------------------------------------------ absolute paths

    def shot(self, shot_id: str) -> Path:
        return self.path("shot", shot_id)

    def depth(self, shot_id: str) -> Path:
        return self.path("depth", shot_id)

    def depth_preview(self, shot_id: str) -> Path:
        return self.path("depth_preview", shot_id)

    def mask(self, shot_id: str) -> Path:
        return self.path("mask", shot_id)

    @property
    def shots_dir(self) -> Path:
        return self.root / SHOTS_DIR

    @property
    def control_dir(self) -> Path:
        return self.root / CONTROL_DIR

    @property
    def cameras_dir(self) -> Path:
        return self.root / CAMERAS_DIR

    @property
    def sequence(self) -> Path:
        return self.path("sequence")

    @property
    def control_index(self) -> Path:
        return self.path("control_index")

    @property
    def plan(self) -> Path:
        return self.path("plan")

    @property
    def manifest(self) -> Path:
        return self.path("manifest")

    @property
    def qc(self) -> Path:
        return self.path("qc")

    @property
    def contact_sheet(self) -> Path:
        return self.path("contact_sheet")

    @property
    def timeline(self) -> Path:
        return self.path("timeline")

    @property
    def thumbnail(self) -> Path:
        return self.path("thumbnail")

    @property
    def spritesheet(self) -> Path:
        return self.path("spritesheet")

    @property
    def takes_dir(self) -> Path:
        return self.root / TAKES_DIR

    def shot_takes_dir(self, shot_id: str) -> Path:
        """Where a shot's takes are held while it is retaken: takes/<shot_id>/."""
        if not valid_shot_id(shot_id):
            raise ValueError(f"shot_id: {shot_id!r} is not a valid shot id (pattern {ID_PATTERN})")
        return self.takes_dir / shot_id

    def take_dir(self, shot_id: str, number: int) -> Path:
        """Where a take of a shot that was not kept lies (``--keep-takes``): takes/<shot_id>/take<n>/."""
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 999:
            raise ValueError(f"take: {number!r} must be a whole number from 1 to 999")
        return self.shot_takes_dir(shot_id) / f"take{number}"

    def is_take_file(self, relative_path: str | PurePath) -> bool:
        """Whether a relative path is a kept-aside take's file: takes/<shot_id>/take<n>/<name>."""
        rel = relative_path.as_posix() if isinstance(relative_path, PurePath) else str(relative_path)
        parts = rel.split("/")
        return (len(parts) == 4 and parts[0] == TAKES_DIR and valid_shot_id(parts[1])
                and _TAKE.match(parts[2]) is not None and parts[3] not in ("", ".", ".."))

    @property
    def in_progress(self) -> Path:
        """The marker of a render that started here and has not written its manifest yet."""
        return self.root / IN_PROGRESS

    def present_deliverables(self) -> dict[str, tuple[str, str | None]]:
        """Relative path → (kind, shot id) of every file in the folder that a render writes
        (:meth:`classify_any`); other files (a user's notes, another tool's output) are not
        listed. Reads the folder (its top level, shots/, control/ and boards/), touches nothing."""
        found: dict[str, tuple[str, str | None]] = {}
        for folder in (self.root, self.shots_dir, self.control_dir, self.root / BOARDS_DIR, self.cameras_dir):
            if not folder.is_dir():
                continue
            for path in sorted(folder.iterdir()):
                if not path.is_file() or path.is_symlink():
                    continue
                rel = path.relative_to(self.root).as_posix()
                try:
                    found[rel] = self.classify_any(rel)
                except ValueError:
                    continue
        return found

    def foreign_files(self, listed: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """Relative paths of the files in the folder (at any depth) that no render wrote: not a
        deliverable (:meth:`classify_any`), not a take kept aside (:meth:`is_take_file`), not in
        ``listed`` (the manifest's file list) and not daotai's own hidden
        files (temp files, the in-progress marker) or a desktop's folder cache. A user's notes,
        another tool's output, a script kept in the folder are foreign."""
        found = []
        for path in sorted(self.root.rglob("*")) if self.root.is_dir() else []:
            if path.is_dir() and not path.is_symlink():
                continue
            rel = path.relative_to(self.root).as_posix()
            name = path.name
            if rel in listed or name in DESKTOP_FILES or name == IN_PROGRESS or _DAOTAI_HIDDEN.match(name):
                continue
            if self.is_take_file(rel) and not path.is_symlink():
                continue
            try:
                if not path.is_symlink():
                    self.classify_any(rel)
                    continue
            except ValueError:
                pass
            found.append(rel)
        return found

    def make_folders(self, controls: bool) -> None:
        """Create the render folder's sub-folders (shots/, and control/ with controls)."""
        for folder in (self.shots_dir, self.control_dir) if controls else (self.shots_dir,):
            folder.mkdir(parents=True, exist_ok=True)


__all__ = [
    "BOARDS_DIR", "CAMERAS_DIR", "CAMERA_ENDINGS", "CONTAINERS", "CONTROL_KINDS", "DESKTOP_FILES",
    "EDITORIAL_FILES", "ENHANCED", "IN_PROGRESS", "ITEM_KINDS", "NUMBERED_KINDS", "RUN_KINDS", "SHOT_KINDS", "SUBTITLE_ENDINGS",
    "SEQUENCE_CAMERA", "TAKES_DIR", "RenderLayout", "audio_edl_name", "board_page_id", "camera_file_name",
    "public_name", "valid_shot_id",
]
