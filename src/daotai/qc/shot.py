"""check_shot: every check of one shot file, run as passes in the order of what they read.

Each pass pays one cost of the check registry (daotai.qc.checks) and gives the verdicts of the
checks the registry files under it: the probe (file, format), the plan (continuity), a scan of
thumbnails (frames), the tracking (camera, camera path, judder, on one full decode of the
picture), the control frames (subject, framing; each character's look for identity), the frames
kept while rendering (fidelity) and the sound (audio). The control files are decoded once, while
the tracking reads the picture, for every check that reads them (daotai.qc.controls).

The shot's qc.json entry keeps the order the passes write it in; :func:`finish_shot` closes it
with ``ok``, ``failures``, ``verdicts``, ``summary`` and ``warnings``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from daotai.errors import EncodeError
from daotai.plan import geometry
from daotai.plan.model import Plan, ShotPlan
from daotai.qc.audio import add_audio_entry
from daotai.qc.checks import Verdicts
from daotai.qc.controls import ControlStream, control_paths
from daotai.qc.fidelity import check_fidelity, fidelity_words
from daotai.qc.labels import label_names
from daotai.qc.motion import FROZEN_MOTION_PX_PER_FRAME, freeze_is_fault, planned_motion, shot_expects_motion
from daotai.qc.scene_model import depth_models
from daotai.qc.subject import SubjectCheck, check_subject, subject_failure, subject_fine, subject_out_of_frame


def check_shot(plan: Plan, shot: ShotPlan, path: Path, samples: dict[int, np.ndarray] | None,
               camera: bool = True, controls: dict[str, Path] | None = None,
               labels: bool = True, audio: bool | None = None, sampling: Any = None,
               path_apart: bool = False) -> dict[str, Any] | PartialShot:
    """Every check of one shot file; returns its qc.json entry (``ok`` and ``failures`` included).

    Camera adherence predicts image motion from the shot's rendered depth when its depth
    control file exists (``controls`` maps "depth" / "mask" to files; by default
    ``control/<shot_id>_depth.mkv`` and ``_mask.mkv`` next to the ``shots`` folder), else from
    the geometric scene model of the plan; ``camera.depth_source`` records which
    ("control_depth" or "scene_model"). ``labels``: whether name labels were drawn over the
    characters (previz): their boxes are kept out of the camera check. Leaving it on for
    another backend only costs the few tracks above the characters. ``audio``: whether the
    file should carry sound (default: when the plan has a soundtrack); sound that is there is
    checked either way (:func:`daotai.qc.audio.check_audio`). ``sampling``: a
    :class:`daotai.qc.sampling.QcSampling` (default: the one ``DAOTAI_QC_SAMPLING`` names, else
    sparse camera tracking made dense where the verdict is close). ``path_apart``: the camera
    path is measured by another job (:func:`measure_camera_path`, the costliest check, run beside
    this one): then a :class:`PartialShot` comes back, which :func:`complete_shot` makes the same
    entry as without it.
    """
    from daotai.qc.sampling import sampling_from_env

    sampling = sampling_from_env() if sampling is None else sampling
    run = _ShotFile(plan, shot, path, {"shot_id": shot.shot_id, "file": path.name}, path_apart=path_apart)
    verdict = Verdicts()
    if not _probe_pass(run, verdict.pass_of("probe")):
        return finish_shot(run.entry, verdict.given, [])
    _plan_pass(run, verdict.pass_of("plan"))
    run.depth_path, run.mask_path = control_paths(path, shot, controls)
    faulty_runs = _scan_pass(run, verdict.pass_of("scan"))
    readers = _ControlReaders.open(run, labels)
    picture = _Picture(run, set(samples or {}), readers.looks, camera)
    _tracking_pass(run, verdict.pass_of("tracking"), picture, readers.stream, sampling, faulty_runs)
    _controls_pass(run, verdict.pass_of("controls"), readers)
    _samples_pass(run, verdict.pass_of("samples"), samples, picture.decoded)
    _audio_pass(run, verdict.pass_of("audio"), plan.soundtrack is not None if audio is None else audio)
    if run.path_left_open:
        return PartialShot(run.entry, verdict.given, verdict.warnings)
    return finish_shot(run.entry, verdict.given, verdict.warnings)


@dataclass
class _ShotFile:
    """One shot file under check: what the passes read, and the qc.json entry they fill in order."""

    plan: Plan
    shot: ShotPlan
    path: Path
    entry: dict[str, Any]
    size: tuple[int, int] = (0, 0)  # the file's frame size, from the probe
    depth_path: Path | None = None  # the shot's control files, where they exist
    mask_path: Path | None = None
    path_apart: bool = False  # the camera path is measured by another job (measure_camera_path)
    path_left_open: bool = False  # its entries, verdicts and warning are left as slots to fill


def _probe_pass(run: _ShotFile, verdict: Verdicts) -> bool:
    """The file's header: its "format" entry and the file and format verdicts; False when the file
    cannot be read (then nothing else is checked)."""
    from daotai.encode.video import probe

    try:
        info = probe(run.path)
    except EncodeError as exc:
        verdict("file", [f"cannot read the file: {exc}"])
        return False
    run.entry["format"] = {
        "width": info.width, "height": info.height, "fps": str(info.fps), "frames": info.frames,
        "duration_s": info.duration_s, "codec": info.codec, "pix_fmt": info.pix_fmt,
        "colorspace": info.colorspace, "faststart": info.faststart,
    }
    verdict("format", _check_format(run.shot, run.plan, info))
    run.size = (info.width, info.height)
    return True


def _check_format(shot: ShotPlan, plan: Plan, info) -> list[str]:
    problems = []
    if (info.width, info.height) != (plan.width, plan.height):
        problems.append(f"size {info.width}x{info.height} differs from the plan's {plan.width}x{plan.height}")
    if info.fps != Fraction(*plan.fps_fraction):
        problems.append(f"fps {info.fps} differs from the plan's {Fraction(*plan.fps_fraction)}")
    if info.frames != shot.frames:
        problems.append(f"{info.frames} frames, the plan has {shot.frames}")
    return problems


def _plan_pass(run: _ShotFile, verdict: Verdicts) -> None:
    """What the plan alone says of the shot: the cut into it (continuity)."""
    from daotai.qc.continuity import check_cut

    verdict("continuity", *check_cut(run.plan, run.shot))


def _scan_pass(run: _ShotFile, verdict: Verdicts) -> list[tuple[int, int]]:
    """Black, green and frozen frames from one thumbnail decode (a freeze is a fault only where the
    plan moves the picture): the "frames" entry and verdict; returns the faulty frozen runs (start, length)."""
    from daotai.qc.metrics import scan_video

    plan, shot = run.plan, run.shot
    scan = scan_video(run.path)
    expects_motion = shot_expects_motion(shot)
    run.entry["frames"] = {
        "black": list(scan.black_frames),
        "green": list(scan.green_frames),
        "frozen_runs": [list(r) for r in scan.frozen_runs],
        "frozen_expected": not expects_motion,
        "flicker": round(float(scan.flicker), 4),
    }
    picture: list[str] = []
    if scan.black_frames:
        picture.append(f"{len(scan.black_frames)} black frame(s), first at {scan.black_frames[0]}")
    if scan.green_frames:
        picture.append(f"{len(scan.green_frames)} green frame(s), first at {scan.green_frames[0]}")
    # a file longer than planned (the format check fails it) may freeze past the plan's last frame
    planned_runs = [(start, min(length, shot.frames - start), anchor)
                    for (start, length), anchor in zip(scan.frozen_runs, scan.frozen_anchors, strict=True)
                    if start < shot.frames]
    faulty_runs = [(start, length) for start, length, anchor in planned_runs
                   if freeze_is_fault(plan, shot, start, length, anchor, run.depth_path)]
    run.entry["frames"]["frozen_faulty"] = [list(r) for r in faulty_runs]
    if faulty_runs:
        picture.append(_frozen_text(*faulty_runs[0]))
    verdict("frames", picture)
    return faulty_runs


def _frozen_text(start: int, length: int) -> str:
    return f"picture frozen for {length} frames from frame {start} while the plan moves"


@dataclass
class _ControlReaders:
    """Who reads the shot's control frames besides the camera check (the subject, the framing of
    its framing frame, each character's look) and the one stream that feeds them all (None
    without a depth control; then the subject is judged on the plan's geometry)."""

    stream: ControlStream | None
    subject: SubjectCheck | None
    looks: Any = None  # a daotai.qc.identity.LookSampler, with both controls
    framed: list[dict[str, Any] | None] = field(default_factory=list)

    @classmethod
    def open(cls, run: _ShotFile, labels: bool) -> _ControlReaders:
        plan, shot, depth_path, mask_path = run.plan, run.shot, run.depth_path, run.mask_path
        readers = cls(None, SubjectCheck.start(plan, shot, mask_path is not None))
        listeners: list[Callable[..., None]] = []
        if readers.subject is not None and readers.subject.controls:
            listeners.append(readers.subject.add)
        if depth_path is not None and mask_path is not None:
            from daotai.qc.framing import framing_of_frame
            from daotai.qc.identity import LookSampler

            def frame_it(index: int, depth_mm: np.ndarray | None, mask: np.ndarray | None) -> None:
                if index == shot.framing_frame:
                    readers.framed.append(framing_of_frame(plan, shot, depth_mm, mask))

            listeners.append(frame_it)
            readers.looks = LookSampler(plan, shot, labels)
            listeners.append(readers.looks.take_controls)
        if depth_path is not None:
            label_texts = label_names(plan, shot) if labels else None
            readers.stream = ControlStream(shot, depth_path, mask_path, label_texts, listeners)
        return readers


class _Picture:
    """The shot's picture decoded once (for the tracking, or only for what the later passes need),
    keeping on the way what they read: the frames sampled for fidelity (``decoded``), each
    character's look, and shrunk copies for the camera path and the judder (``metric_frames``)."""

    def __init__(self, run: _ShotFile, wanted: set[int], looks: Any, camera: bool):
        self.path, self.shot, self.wanted, self.looks, self.camera = run.path, run.shot, wanted, looks, camera
        self.decoded: dict[int, np.ndarray] = {}
        self.metric_frames: list[np.ndarray] = []

    def frames(self) -> Iterator[np.ndarray]:
        from daotai.encode.video import decode_frames
        from daotai.qc.camera_metrics import shrink

        for index, frame in enumerate(decode_frames(self.path)):
            if index in self.wanted:
                self.decoded[index] = frame
            if self.looks is not None:
                self.looks.take_picture(index, frame)
            if self.camera and index < self.shot.frames:
                self.metric_frames.append(shrink(frame))
            yield frame


def _tracking_pass(run: _ShotFile, verdict: Verdicts, picture: _Picture, stream: ControlStream | None,
                   sampling: Any, faulty_runs: list[tuple[int, int]]) -> None:
    """The camera against the plan, then the recovered camera path and the judder, on one decode of
    the picture's planned frames (a longer file fails the format check and is judged up to there).
    Without a camera check the picture is still read when the fidelity samples need it."""
    shot = run.shot
    if not (picture.camera and shot.frames >= 2):
        if picture.wanted:
            for _ in picture.frames():
                pass
        return
    cams = np.array([c.cam_to_world for c in shot.cameras], dtype=np.float64).reshape(-1, 4, 4)
    adherence, densified, source, judder = _track_camera(run, picture, stream, cams, sampling)
    if stream is not None:
        stream.read_to(shot.frames - 1)
    camera_entry = _camera_entry(run, adherence, densified, source, faulty_runs, verdict.warnings)
    run.entry["camera"] = camera_entry
    verdict("camera", [f"camera: {camera_entry['summary']}"] if camera_entry["ok"] is False else [],
            f"camera: {camera_entry['summary']}")
    if run.path_apart:
        _leave_camera_path_open(run, verdict, len(picture.metric_frames))
        return
    excludes = [stream.excludes.get(i) if stream is not None and run.mask_path is not None else None
                for i in range(len(picture.metric_frames))]
    _camera_path_verdicts(run, verdict, picture.metric_frames, excludes, judder)


def _track_camera(run: _ShotFile, picture: _Picture, stream: ControlStream | None, cams: np.ndarray,
                  sampling: Any) -> tuple[Any, Any, str, Any]:
    """Camera adherence (sparse tracking made dense where the verdict is close, daotai.qc.sampling)
    on the rendered depth when there is a depth control, else on the plan's scene model: (adherence,
    why it was densified or None, the depth source, the judder of every frame step or None)."""
    from daotai.qc.camera_adherence import DEPTH_MAP_CONFIG, CameraCheckConfig
    from daotai.qc.sampling import check_camera_sampled

    plan, shot = run.plan, run.shot
    fovs = np.array([c.fov for c in shot.cameras], dtype=np.float64)
    if stream is not None:
        models, source, config = stream.depth_map, "control_depth", DEPTH_MAP_CONFIG
    else:
        models, source, config = depth_models(plan, shot), "scene_model", CameraCheckConfig()

    def dense_again() -> tuple[Iterator[np.ndarray], Any]:
        from daotai.encode.video import decode_frames

        if stream is not None:
            stream.read_to(shot.frames - 1)  # every exclude known before the depth is read again
        return itertools.islice(decode_frames(run.path), shot.frames), \
            (stream.replay() if stream is not None else models)

    steps: list[Any] = []  # the judder of every frame step, measured once (also for the judder verdict)

    def uneven() -> str | None:
        from daotai.qc.camera_metrics import shot_judder, uneven_steps

        if len(picture.metric_frames) < 2:
            return None
        steps.append(shot_judder(picture.metric_frames, run.size))
        return uneven_steps(steps[0], sampling.clear_share)

    adherence, densified = check_camera_sampled(itertools.islice(picture.frames(), shot.frames), cams,
                                                fovs, models, config, sampling, run.size, dense_again, uneven)
    return adherence, densified, source, steps[0] if steps else None


def _camera_entry(run: _ShotFile, adherence: Any, densified: Any, source: str,
                  faulty_runs: list[tuple[int, int]], warnings: list[str]) -> dict[str, Any]:
    """The shot's "camera" entry: the adherence, where its depth came from and whether it could be
    judged at all (``ok`` None, with a warning, when it could not)."""
    plan, shot = run.plan, run.shot
    camera_entry = {**adherence.to_dict(), "depth_source": source,
                    "depth_file": run.depth_path.name if run.depth_path is not None else None,
                    "mask_file": run.mask_path.name if run.mask_path is not None else None}
    camera_entry["checked"] = adherence.pairs_evaluated > 0
    if densified is not None:
        camera_entry["densified"] = densified  # why the sparse pass could not decide (daotai.qc.sampling)
    camera_froze = any(planned_motion(plan, shot, start, start + length - 1)[0] / max(length - 1, 1)
                       >= FROZEN_MOTION_PX_PER_FRAME for start, length in faulty_runs)
    if not camera_entry["checked"]:
        # Too little texture to track (a worm's-eye close-up against the sky): nothing is
        # known about the camera, which is neither a pass nor a fault.
        camera_entry["ok"] = None
        warnings.append(f"camera: {adherence.summary}")
    elif camera_froze and adherence.ok:
        # The totals can come out right around a freeze; the camera still stood still
        # where the plan moves it, so the camera verdict cannot be "as planned".
        camera_entry["ok"] = False
        camera_entry["summary"] = (f"stands still where the plan moves ({_frozen_text(*faulty_runs[0])}); "
                                   f"{adherence.summary}")
    return camera_entry


def _camera_path_verdicts(run: _ShotFile, verdict: Verdicts, frames: list[np.ndarray],
                          excludes: list[np.ndarray | None], measured: Any = None) -> None:
    """The standard camera metrics (RotErr / TransErr / CamMC of the recovered path) and the judder
    of a shot's frames (``measured``: when already known), each as its qc.json entry and verdict
    ("camera_path", "judder")."""
    if len(frames) >= 2:
        _give_path_verdicts(run.entry, verdict, _assess_path(run.shot, frames, run.size, excludes, measured))


def _assess_path(shot: ShotPlan, frames: list[np.ndarray], size: tuple[int, int],
                 excludes: list[np.ndarray | None], measured: Any = None) -> tuple[Any, str, Any]:
    """(CameraPathCheck or None, why not, Judder) of a shot's shrunk ``frames`` (at least 2) against its
    planned cameras; ``size``: (w, h) of the file's frames; ``excludes``: per frame, what moves on its own."""
    from daotai.qc.camera_metrics import assess_frames

    cams = np.array([c.cam_to_world for c in shot.cameras], dtype=np.float64).reshape(-1, 4, 4)
    intrinsics = [geometry.intrinsics_from_matrix(np.reshape(c.K, (3, 3))) for c in shot.cameras[:len(frames)]]
    return assess_frames(frames, size, cams[:len(frames)], intrinsics,
                         excludes if any(e is not None for e in excludes) else None, measured=measured)


def _give_path_verdicts(entry: dict[str, Any], verdict: Verdicts, measured: tuple[Any, str, Any]) -> None:
    """The "camera_path" and "judder" entries, verdicts and warning from :func:`_assess_path`'s result (the
    path's verdict knows whether the flow-based camera check already failed)."""
    from daotai.qc.camera_metrics import judder_verdict, path_verdict

    check, why_not, judder = measured
    entry["camera_path"], problems, fine, note = path_verdict(check, why_not,
                                                              (entry.get("camera") or {}).get("ok") is False)
    verdict("camera_path", problems, fine)
    if note:
        verdict.warnings.append(note)
    entry["judder"], problems, fine = judder_verdict(judder)
    verdict("judder", problems, fine)


# ------------------------------------------------------------------ the camera path as a job of its own
#
# Recovering the camera path is the costliest check of a shot (about a third of its time). With
# workers to spare, it runs as a job beside the shot's other checks, so the wait for the last
# shot of a render, which nothing else overlaps, is about halved. The shot's entry keeps a slot
# where the path's entries, verdicts and warning go, so the completed entry is the one check_shot
# gives in one piece, byte for byte.

_SLOT = "\0camera path: measured apart\0"  # a verdict's or warning's place, filled by complete_shot


@dataclass(frozen=True)
class PartialShot:
    """A shot's entry with the camera path's places left open (check_shot with ``path_apart``)."""

    entry: dict[str, Any]
    verdicts: list[dict[str, Any]]
    warnings: list[str]


def _leave_camera_path_open(run: _ShotFile, verdict: Verdicts, frames: int) -> None:
    if frames < 2:  # too short to recover a path: no entries, as check_shot alone gives none
        return
    run.entry["camera_path"] = run.entry["judder"] = None  # their places in the entry's order
    verdict.given.append({"check": _SLOT})
    verdict.warnings.append(_SLOT)
    run.path_left_open = True


def measure_camera_path(plan: Plan, shot: ShotPlan, path: Path, controls: dict[str, Path] | None = None,
                        labels: bool = True) -> tuple[Any, str, Any] | None:
    """The camera path and judder of a shot file, as check_shot measures them: (CameraPathCheck or
    None, why not, Judder), or None where check_shot measures none (an unreadable or too short file)."""
    from daotai.encode.read import decode_gray
    from daotai.encode.video import decode_frames, probe
    from daotai.qc.camera_metrics import shrink
    from daotai.qc.controls import moving_on_their_own

    try:
        info = probe(path)
    except EncodeError:
        return None
    if shot.frames < 2:
        return None
    frames = [shrink(frame) for frame in itertools.islice(decode_frames(path), shot.frames)]
    if len(frames) < 2:
        return None
    excludes: list[np.ndarray | None] = [None] * len(frames)
    depth_path, mask_path = control_paths(path, shot, controls)
    if depth_path is not None and mask_path is not None:  # as the shot's control stream marks them
        names = label_names(plan, shot) if labels else None
        for index, mask in enumerate(itertools.islice(decode_gray(mask_path), len(frames))):
            excludes[index] = moving_on_their_own(shot, index, mask, names)
    return _assess_path(shot, frames, (info.width, info.height), excludes)


def complete_shot(partial: dict[str, Any] | PartialShot, measured: tuple[Any, str, Any] | None) -> dict[str, Any]:
    """The shot's entry from check_shot's part and measure_camera_path's (an entry that left nothing
    open is returned as it is)."""
    if not isinstance(partial, PartialShot):
        return partial
    entry, given, warnings = dict(partial.entry), list(partial.verdicts), list(partial.warnings)
    path = Verdicts().pass_of("tracking")
    if measured is None:  # both jobs read the same file: only a file changed in between gets here
        del entry["camera_path"], entry["judder"]
    else:
        _give_path_verdicts(entry, path, measured)
    at = next(i for i, v in enumerate(given) if v["check"] == _SLOT)
    given[at:at + 1] = path.given
    at = warnings.index(_SLOT)
    warnings[at:at + 1] = path.warnings
    return finish_shot(entry, given, warnings)


def _controls_pass(run: _ShotFile, verdict: Verdicts, readers: _ControlReaders) -> None:
    """The control frames read to the end, then what their readers found: the subject (on the plan's
    geometry when there are no controls), the framing, each character's look (compared across shots
    once every shot is in, daotai.qc.identity.apply_identity)."""
    plan, shot, entry = run.plan, run.shot, run.entry
    if readers.stream is not None:
        readers.stream.read_to(shot.frames - 1)
    if readers.subject is None:
        subject = None
    elif readers.subject.controls:
        subject = readers.subject.finish()
    else:
        subject = check_subject(plan, shot)
    if subject is not None:
        entry["subject"] = subject
        fps = float(Fraction(*plan.fps_fraction))
        verdict("subject", [] if subject["ok"] else [subject_failure(subject, shot, fps)], subject_fine(subject))
        note = subject_out_of_frame(subject)
        if note is not None:
            verdict.warnings.append(note)
    framing = readers.framed[0] if readers.framed else None
    if framing is not None:
        from daotai.qc.framing import framing_text

        entry["framing"] = framing
        verdict("framing", [] if framing["ok"] else [framing_text(framing)], framing_text(framing))
    if readers.looks is not None:
        from daotai.qc.identity import finish_looks

        entry["identity"] = finish_looks(readers.looks, run.path)


def _samples_pass(run: _ShotFile, verdict: Verdicts, samples: dict[int, np.ndarray] | None,
                  decoded: dict[int, np.ndarray]) -> None:
    """Encode fidelity of the frames kept while rendering against their decoded copies (when any were kept)."""
    if not samples:
        return
    fidelity, failures, notes = check_fidelity(samples, decoded)
    run.entry["fidelity"] = fidelity
    verdict("fidelity", *fidelity_words(fidelity, failures))
    verdict.warnings += notes


def _audio_pass(run: _ShotFile, verdict: Verdicts, planned: bool) -> None:
    """The file's sound (``planned``: whether it should have any) against the picture's length."""
    picture_s = run.shot.frames / float(Fraction(*run.plan.fps_fraction))
    verdict("audio", add_audio_entry(run.entry, run.path, picture_s, planned))


def finish_shot(entry: dict[str, Any], verdicts: list[dict[str, Any]],
                warnings: list[str]) -> dict[str, Any]:
    """Close a shot entry: ok, failures (failing verdicts' texts), one summary line, warnings.

    The summary says one thing per check, failing checks first (console and CLI show it)."""
    ordered = [v for v in verdicts if not v["ok"]] + [v for v in verdicts if v["ok"]]
    entry["ok"] = all(v["ok"] for v in verdicts)
    entry["failures"] = [v["text"] for v in ordered if not v["ok"]]
    entry["verdicts"] = ordered
    entry["summary"] = "; ".join(v["text"] for v in ordered) or "checked"
    entry["warnings"] = warnings
    return entry
