"""Do the tests catch what they claim? A mutation run over the core.

Each mutation is one small, realistic mistake (a sign flipped, a limit loosened, an alias
dropped, a check removed) written as an exact piece of a source file and its replacement.
For each one the source tree is copied to a temporary folder (``git archive HEAD src``, or the
working tree's src/ with ``--source worktree``), the mistake is made in the copy, and only the
tests named for it run against the copy (``PYTHONPATH=<copy>/src``; the tests themselves come
from this checkout). A mutation is *killed* when a test fails, *survived* when all pass. The
working tree is never written: other people may be editing it.

    python bench/mutation.py                      # every mutation, table + score
    python bench/mutation.py --list               # names, files and test selections
    python bench/mutation.py --only plan.seed_hash --only script.alias_tui_jin
    python bench/mutation.py --json mutation.json --jobs 2
    python bench/mutation.py --baseline           # the selections on the unmutated copy (must all pass)

A mutation whose old text is no longer found exactly once in its file is reported as
``stale`` (the code moved on: update the record), never silently skipped. When the core
changes, run it again; every survivor needs a test that kills it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "-rfE", "--no-header")
DEFAULT_TIMEOUT_S = 300


@dataclass(frozen=True)
class Mutation:
    """One mistake: in ``file`` (relative to the repo) replace ``old`` (found exactly once) by ``new``;
    ``tests`` are pytest node ids or files that should fail on it."""

    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


def _m(name: str, file: str, old: str, new: str, tests: tuple[str, ...] | str, why: str) -> Mutation:
    return Mutation(name, f"src/daotai/{file}", old, new, (tests,) if isinstance(tests, str) else tests, why)


PLANNER = "plan/planner.py"
# Test selections: the tests that own each behaviour, as node ids where the file is slow.
MOVES = ("tests/test_planner.py::test_default_moves_go_the_way_their_names_say",
         "tests/test_planner.py::test_push_in_moves_toward_subject_and_pull_out_away",
         "tests/test_planner.py::test_zoom_in_default_narrows_fov",
         "tests/test_planner.py::test_default_dolly_stays_clear_of_subject")
SEEDS = ("tests/test_planner.py::test_seeds_are_the_same_in_every_process",
         "tests/test_planner.py::test_seeds_are_deterministic_distinct_and_overridable")
T_TIMING = "tests/test_plan_timing.py"
T_CAMERA = "tests/test_plan_camera.py"
WORDS = ("tests/test_script_spellings.py::test_camera_words_name_their_move_and_its_direction",
         "tests/test_script_spellings.py::test_the_editor_schema_lists_the_chinese_camera_words_the_reader_takes",
         "tests/test_script_spellings.py::test_camera_phrases")
FOV_END = ("tests/test_script_spellings.py::test_validate_refuses_a_zoom_end_the_planner_cannot_make",
           "tests/test_script_spellings.py::test_the_widest_zoom_end_validate_passes_plans")
BAD_SCRIPTS = "tests/test_script.py::test_bad_scripts_name_path_value_and_rule"
FIDELITY = "tests/test_qc_false_alarms.py::test_fidelity_spread_is_a_warning_and_bad_frames_fail"
HIDDEN = "tests/test_qc_false_alarms.py::test_a_subject_hidden_for_more_than_a_quarter_of_the_shot_fails"
T_QC_METRICS = "tests/test_qc_metrics.py"
IN_BETWEEN = "tests/test_post_restore.py::test_in_betweens_lean_toward_the_nearer_frame"
T_ASSEMBLE = "tests/test_assemble.py"
HANDLES = "tests/test_timeline_export.py::test_dissolves_use_exactly_the_handles_their_clips_were_trimmed_by"
SERVER_GUARD = "tests/test_server_api.py::test_request_guard_content_type_origin_host_size"

MUTATIONS: tuple[Mutation, ...] = (
    # ------------------------------------------------------------------ plan/
    _m("plan.seed_hash", PLANNER,
       'digest = hashlib.sha256("\\x1f".join(str(p) for p in parts).encode("utf-8")).digest()\n'
       '    return int.from_bytes(digest[:4], "big")',
       'return hash(tuple(str(p) for p in parts)) & 0xFFFFFFFF',
       SEEDS, "shot seeds from Python's per-process hash(): plans differ between runs"),
    _m("plan.crane_tilt_sign", PLANNER,
       "rotate = (0.0, -sign * abs(rotate[1]), 0.0)  # a crane keeps",
       "rotate = (0.0, sign * abs(rotate[1]), 0.0)  # a crane keeps",
       MOVES, "a crane up tilts up (away from the subject) instead of down"),
    _m("plan.crane_default_tilt", PLANNER,
       '"crane": {"motion": (0.0, 1.5, 0.0), "rotate": (0.0, -10.0, 0.0)}',
       '"crane": {"motion": (0.0, 1.5, 0.0), "rotate": (0.0, 10.0, 0.0)}',
       MOVES, "a default crane tilts away from the subject"),
    _m("plan.dolly_direction", PLANNER,
       "motion = (0.0, 0.0, -sign * motion[2])", "motion = (0.0, 0.0, sign * motion[2])",
       MOVES, "push in and pull out swapped"),
    _m("plan.pan_direction", PLANNER,
       "rotate = tuple(sign * abs(v) if i == axis else v for i, v in enumerate(rotate))",
       "rotate = tuple(abs(v) if i == axis else v for i, v in enumerate(rotate))",
       MOVES, "pan/tilt/roll direction ignored"),
    _m("plan.zoom_direction", PLANNER,
       "ratio = ZOOM_IN_RATIO if sign < 0 or spec.direction is None else 1.0 / ZOOM_IN_RATIO",
       "ratio = 1.0 / ZOOM_IN_RATIO if sign < 0 or spec.direction is None else ZOOM_IN_RATIO",
       MOVES, "zoom in widens the lens"),
    _m("plan.truck_direction", PLANNER,
       "motion = (sign * abs(motion[0]), 0.0, 0.0)", "motion = (abs(motion[0]), 0.0, 0.0)",
       MOVES, "truck left goes right"),
    _m("plan.frames_half_even", "plan/timing.py",
       "return max(1, math.floor(exact + 0.5))", "return max(1, round(exact))",
       T_TIMING, "frame counts rounded half to even (2.5 -> 2)"),
    _m("plan.snap_floor", "plan/timing.py",
       "k = max(1, -(-(frames - offset) // step))", "k = max(1, (frames - offset) // step)",
       T_TIMING, "snapping rounds a frame count down below the request"),
    _m("plan.round_size_floor", "plan/timing.py",
       "return max(1, (2 * value + multiple) // (2 * multiple)) * multiple",
       "return max(1, value // multiple) * multiple",
       T_TIMING, "sizes rounded down instead of to the nearest multiple"),
    _m("plan.segment_count", "plan/timing.py",
       "while longest + (count - 1) * (longest - 1) < wanted:",
       "while longest + (count - 1) * longest < wanted:",
       T_TIMING, "segments counted as if joins shared no frame: a segment longer than the model makes"),
    _m("plan.rot_x_sign", "plan/camera.py",
       "return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])",
       "return np.array([[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]])",
       (T_CAMERA,), "tilt rotation matrix transposed (tilts the wrong way)"),
    _m("plan.dolly_third", PLANNER,
       "motion = (0.0, 0.0, -round(subject_distance / 3.0, 3))",
       "motion = (0.0, 0.0, -round(subject_distance / 1.0, 3))",
       MOVES, "a default push-in runs the lens into the subject"),
    _m("plan.focal_full_angle", "plan/geometry.py",
       "return (size_px / 2.0) / math.tan(math.radians(fov_deg) / 2.0)",
       "return (size_px / 2.0) / math.tan(math.radians(fov_deg))",
       "tests/test_geometry.py", "focal length from the whole field of view instead of half"),
    # ---------------------------------------------------------------- script/
    _m("script.zuo_yao_right", "script/vocab.py",
       '"左摇": ("pan", {"direction": "left"})', '"左摇": ("pan", {"direction": "right"})',
       WORDS, "左摇 (pan left) read as pan right"),
    _m("script.alias_tui_jin", "script/vocab.py",
       '"推进": ("dolly", {"direction": "in"}),', "",
       WORDS, "the alias 推进 (push in) forgotten: it still reads as 推 + 进, but editors no longer offer it"),
    _m("script.fov_end_max", "script/schema.py",
       "fov_end: bounded(gt=1, lt=170) | None = None", "fov_end: bounded(gt=1, lt=179) | None = None",
       FOV_END, "fov_end 175 passes validate, then fails in the planner"),
    _m("script.crane_signs", "script/vocab.py",
       '"crane": {"up": 1, "down": -1},', '"crane": {"up": -1, "down": 1},',
       MOVES, "crane up goes down"),
    _m("script.direction_contradiction", "script/schema.py",
       "if explicit is not None and explicit != 0 and (explicit > 0) != (signs[direction] > 0):",
       "if False and explicit is not None and (explicit > 0) != (signs[direction] > 0):",
       BAD_SCRIPTS, "a direction contradicting an explicit amount is accepted"),
    _m("script.cut_with_duration", "script/schema.py",
       "if self.type == TransitionKind.cut and self.duration:",
       "if self.type == TransitionKind.cut and self.duration and False:",
       BAD_SCRIPTS, "a cut with a duration is accepted"),
    _m("script.blocking_order", "script/schema.py",
       "if self.end is not None and self.end <= self.start:",
       "if self.end is not None and self.end < self.start:",
       ("tests/test_script.py::test_a_walk_must_end_after_it_starts", BAD_SCRIPTS), "a walk that ends when it starts is accepted"),
    _m("script.odd_size", "script/schema.py",
       "    if value % 2:\n        raise ValueError(\"must be even",
       "    if value % 2 and value < 0:\n        raise ValueError(\"must be even",
       BAD_SCRIPTS, "odd frame sizes accepted (H.264 4:2:0 refuses them)"),
    _m("script.size_limit", "script/load.py",
       "MAX_SCRIPT_BYTES = 2 * 1024 * 1024", "MAX_SCRIPT_BYTES = 2 * 1024 * 1024 * 1024",
       "tests/test_script.py::test_a_script_over_two_mebibytes_is_refused_unread",
       "a huge script is read whole (only the pinned test: others build inputs from the limit itself)"),
    # -------------------------------------------------------------------- qc/
    _m("qc.psnr_gate_zero", "qc/report.py",
       "PSNR_MEAN_MIN_DB = 38.5", "PSNR_MEAN_MIN_DB = 0.0",
       FIDELITY, "the encode-fidelity gate never fails"),
    _m("qc.psnr_spread_unbounded", "qc/report.py",
       "PSNR_STD_MAX_DB = 1.2", "PSNR_STD_MAX_DB = 1e9",
       FIDELITY, "a starved frame and a wide spread pass"),
    _m("qc.flat_frames_counted", "qc/report.py",
       "FLAT_LUMA_STD = 10.0", "FLAT_LUMA_STD = 0.0",
       FIDELITY, "near-flat frames count toward encode PSNR"),
    _m("qc.hidden_share", "qc/report.py",
       "SUBJECT_HIDDEN_MAX_SHARE = 0.25", "SUBJECT_HIDDEN_MAX_SHARE = 1.0",
       HIDDEN, "a subject hidden for the whole shot passes"),
    _m("qc.black_frames", "qc/metrics.py",
       "BLACK_MAX_MEAN = 16.0  #", "BLACK_MAX_MEAN = -1.0  #",
       (T_QC_METRICS,), "black frames are never found"),
    _m("qc.green_frames", "qc/metrics.py",
       "GREEN_MIN_FRACTION = 0.6  #", "GREEN_MIN_FRACTION = 1.01  #",
       (T_QC_METRICS,), "broken green frames are never found"),
    _m("qc.frozen_runs", "qc/metrics.py",
       "FROZEN_MIN_LENGTH = 12  #", "FROZEN_MIN_LENGTH = 10**6  #",
       (T_QC_METRICS,), "frozen pictures are never found"),
    _m("qc.audio_clipping", "qc/audio.py",
       "CLIP_MIN_RUN = 3  #", "CLIP_MIN_RUN = 10**9  #",
       ("tests/test_audio_qc.py",), "clipped sound passes"),
    _m("qc.audio_length", "qc/audio.py",
       "if abs(duration - picture_s) > tolerance:", "if abs(duration - picture_s) > tolerance + 10.0:",
       ("tests/test_audio_qc.py",), "sound seconds longer or shorter than the picture passes"),
    _m("qc.framing_invisible", "qc/framing.py",
       "if counts[shot.subject] < MIN_VISIBLE_PX:", "if counts[shot.subject] < 0:",
       ("tests/test_framing_qc.py::test_a_subject_missing_from_the_first_frame_is_not_measured",
        "tests/test_framing_qc.py"), "a subject absent from the first frame is measured as if there"),
    _m("qc.psnr_peak", "qc/metrics.py",
       "return 10.0 * math.log10(255.0**2 / mse)", "return 10.0 * math.log10(255.0 / mse)",
       ("tests/test_qc_metrics.py::test_psnr_values_and_errors", FIDELITY), "PSNR against the peak, not its square"),
    # ------------------------------------------------------------------ post/
    _m("post.interp_weights_reversed", "render/motion.py",
       "w0 = (1 - t) * warp(pair.v0, ft0, grids.small, cv2.BORDER_CONSTANT)  # (h, w) float32\n"
       "    w1 = t * warp(pair.v1, ft1, grids.small, cv2.BORDER_CONSTANT)",
       "w0 = t * warp(pair.v0, ft0, grids.small, cv2.BORDER_CONSTANT)  # (h, w) float32\n"
       "    w1 = (1 - t) * warp(pair.v1, ft1, grids.small, cv2.BORDER_CONSTANT)",
       IN_BETWEEN, "flow interpolation weights the far frame most"),
    _m("post.interp_fallback_reversed", "render/motion.py",
       "w0[plain], w1[plain] = 1 - t, t", "w0[plain], w1[plain] = t, 1 - t",
       IN_BETWEEN, "occluded pixels blend toward the far frame"),
    _m("post.blend_reversed", "render/motion.py",
       "out = a.astype(np.float32) * (1 - t) + b.astype(np.float32) * t + 0.5",
       "out = a.astype(np.float32) * t + b.astype(np.float32) * (1 - t) + 0.5",
       IN_BETWEEN, "the plain cross-dissolve runs backwards"),
    _m("post.interp_frame_count", "post/interpolate.py",
       "return max(1, math.floor(Fraction(frames_in) * fps_out / fps_in + Fraction(1, 2)))",
       "return max(1, math.floor(Fraction(frames_in) * fps_out / fps_in))",
       "tests/test_post_restore.py::test_interpolated_clips_keep_their_duration", "interpolated clips lose their last frame"),
    _m("post.crossfade_weight", "post/assemble.py",
       "frame = _mix(tail[j], frame, (j + 1) / (join.overlap_in + 1))",
       "frame = _mix(tail[j], frame, j / (join.overlap_in + 1))",
       (T_ASSEMBLE,), "the crossfade starts on the old shot alone"),
    _m("post.fade_first_frame", "post/assemble.py",
       "gain *= index / join.fade_in  # first frame black",
       "gain *= (index + 1) / join.fade_in  # first frame black",
       (T_ASSEMBLE,), "a fade-in's first frame is not black"),
    _m("post.fade_frames", "post/assemble.py",
       "return _half_up(exact / 2)", "return _half_up(exact)",
       (T_ASSEMBLE,), "a fade spends its whole duration on each side"),
    _m("post.crossfade_too_long", "post/assemble.py",
       "            for side, count in ((i - 1, frame_counts[i - 1]), (i, frame_counts[i])):\n"
       "                if n > count:",
       "            for side, count in ((i - 1, frame_counts[i - 1]), (i, frame_counts[i])):\n"
       "                if n > count + 1:",
       "tests/test_assemble.py::test_a_crossfade_one_frame_longer_than_a_clip_is_refused_naming_the_clip",
       "a crossfade one frame longer than its shot is accepted (a later check refuses it less clearly)"),
    _m("post.fade_rounding", "post/assemble.py",
       "out *= weight\n    out += 128", "out *= weight\n    out += 0",
       ("tests/test_assemble.py::test_faded_and_blended_frames_are_rounded_not_truncated", T_ASSEMBLE),
       "faded frames truncated instead of rounded (a dark cast)"),
    _m("post.colour_offset", "post/colour.py",
       "offset = np.asarray(target.mean) - np.asarray(source.mean) * gain",
       "offset = np.asarray(target.mean) - np.asarray(source.mean)",
       ("tests/test_post_restore.py::test_the_colour_transfer_maps_source_statistics_exactly_onto_the_target",
        "tests/test_post_restore.py::test_match_colour_moves_lab_statistics_to_reference"),
       "colour matching forgets that the gain moves the mean too"),
    # --------------------------------------------------------------- deliver/
    _m("deliver.dissolve_offsets_swapped", "deliver/timeline.py",
       "                    in_offset=otio.opentime.RationalTime(k // 2, rate),\n"
       "                    out_offset=otio.opentime.RationalTime(k - k // 2, rate),",
       "                    in_offset=otio.opentime.RationalTime(k - k // 2, rate),\n"
       "                    out_offset=otio.opentime.RationalTime(k // 2, rate),",
       HANDLES, "the picture dissolve's handles swapped (odd lengths)"),
    _m("deliver.audio_dissolve_offsets_swapped", "deliver/timeline.py",
       "in_offset=otio.opentime.RationalTime(k // 2, rate), out_offset=otio.opentime.RationalTime(k - k // 2, rate),",
       "in_offset=otio.opentime.RationalTime(k - k // 2, rate), out_offset=otio.opentime.RationalTime(k // 2, rate),",
       HANDLES, "the sound crossfade's handles swapped (odd lengths)"),
    _m("deliver.trims_swapped", "deliver/timeline.py",
       "incoming, outgoing = k // 2, k - k // 2", "incoming, outgoing = k - k // 2, k // 2",
       HANDLES, "clips trimmed by the other side's handle (odd lengths)"),
    _m("deliver.manifest_skips_nested", "deliver/manifest.py",
       "hashes[path.relative_to(out_dir).as_posix()] = sha256_file(path)",
       "hashes[path.name] = sha256_file(path)",
       "tests/test_folder_hygiene.py::test_the_manifest_names_every_file_by_its_path_in_the_folder",
       "the manifest names nested files by their base name only"),
    _m("deliver.usd_focal_width", "deliver/cameras.py",
       "focal = fy * VERTICAL_APERTURE_MM / height", "focal = fy * VERTICAL_APERTURE_MM / width",
       "tests/test_camera_files.py::test_usd_cameras_match_the_plan_at_every_frame",
       "USD focal length from the frame's width (wrong lens in DCC tools)"),
    # ----------------------------------------------------------------- server
    _m("server.served_file_outside_out", "server/state.py",
       "        if not resolved.is_relative_to(root):\n            return None\n",
       "",
       "tests/test_server_api.py::test_a_file_reached_through_a_symlinked_folder_is_not_served",
       "a file reached through a symlinked folder is served from outside out/"),
    _m("server.host_check", "server/security.py",
       "if not self.config.host_allowed(hostname):", "if not hostname:",
       SERVER_GUARD, "any Host header accepted (DNS rebinding)"),
    _m("server.token_check", "server/security.py",
       'if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):',
       'if not given.startswith("Bearer "):',
       "tests/test_server_api.py::test_token_required_beyond_loopback", "any bearer token accepted"),
    _m("server.bind_without_token", "server/security.py",
       "if host not in LOCAL_HOSTS and not token:", "if host not in LOCAL_HOSTS and token is None and False:",
       "tests/test_server_api.py::test_serving_beyond_loopback_needs_a_token", "the server listens beyond loopback without a token"),
    _m("server.origin_check", "server/security.py",
       "if origin is not None and _netloc(origin) != host:", "if origin is not None and _netloc(origin) is None:",
       SERVER_GUARD, "cross-origin writes are accepted"),
    _m("server.body_limit", "server/security.py",
       "if len(body) > self.config.max_body_bytes:", "if len(body) > 64 * self.config.max_body_bytes:",
       "tests/test_server_api.py::test_a_body_without_content_length_is_cut_off_at_the_cap",
       "a body without Content-Length is read past the cap"),
)


@dataclass(frozen=True)
class Outcome:
    """What one mutation did to its tests."""

    name: str
    status: str  # killed | survived | stale | timeout; baseline: passed | failed | broken | timeout
    killed_by: str | None
    seconds: float
    tests: tuple[str, ...]
    detail: str = ""


def source_tree(dest: Path, source: str) -> Path:
    """A copy of src/ under dest (from HEAD, or the working tree); returns dest."""
    if source == "worktree":
        shutil.copytree(REPO / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return dest
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", source, "src"],
                             check=True, capture_output=True).stdout
    tar_path = dest / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")
    tar_path.unlink()
    return dest


def apply(tree: Path, mutation: Mutation) -> str | None:
    """Make the mistake in the copy under ``tree``; the reason it cannot be made, or None."""
    path = tree / mutation.file
    if not path.is_file():
        return f"{mutation.file} is not in the tree"
    text = path.read_text(encoding="utf-8")
    found = text.count(mutation.old)
    if found != 1:
        return f"old text found {found} times in {mutation.file} (must be exactly once)"
    path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
    return None


def _first_failure(output: str) -> str | None:
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return match.group(1) if match else None


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[str, str | None, str]:
    """Run ``tests`` against the copy: (passed | failed | timeout, first failing test, output tail)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests]
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", None, ""
    output = done.stdout + done.stderr
    if done.returncode == 0:
        return "passed", None, ""
    if done.returncode in (4, 5):  # usage error or nothing collected: the selection is wrong, not the code
        return "broken", f"pytest exit {done.returncode}", output[-2000:]
    return "failed", _first_failure(output) or f"pytest exit {done.returncode}", output[-2000:]


def run_one(mutation: Mutation, source: str, timeout_s: float, baseline: bool) -> Outcome:
    """Copy the tree, make the mistake (unless baseline), run its tests, and clean up."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="daotai-mutant-") as tmp:
        missing = [t for t in mutation.tests if not (REPO / t.split("::")[0]).is_file()]
        if missing:
            return Outcome(mutation.name, "stale", None, 0.0, mutation.tests, f"no test file {', '.join(missing)}")
        tree = source_tree(Path(tmp), source)
        if not baseline:
            problem = apply(tree, mutation)
            if problem is not None:
                return Outcome(mutation.name, "stale", None, 0.0, mutation.tests, problem)
        result, failing, tail = run_tests(tree, mutation.tests, timeout_s)
    seconds = round(time.monotonic() - start, 1)
    if baseline:
        return Outcome(mutation.name, result, failing, seconds, mutation.tests, tail)
    if result == "broken":
        return Outcome(mutation.name, "stale", None, seconds, mutation.tests, f"selection broken: {failing}")
    status = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[result]
    return Outcome(mutation.name, status, failing, seconds, mutation.tests)


def select(names: list[str] | None) -> list[Mutation]:
    """The mutations named (exact names or prefixes such as ``plan.``), or all."""
    if not names:
        return list(MUTATIONS)
    chosen = [m for m in MUTATIONS if any(m.name == n or (n.endswith(".") and m.name.startswith(n)) for n in names)]
    unknown = [n for n in names if not any(m.name == n or (n.endswith(".") and m.name.startswith(n)) for m in MUTATIONS)]
    if unknown:
        raise SystemExit(f"--only: unknown mutation {', '.join(unknown)}; see --list")
    return chosen


def run_all(mutations: list[Mutation], source: str, jobs: int, timeout_s: float,
            baseline: bool) -> Iterator[Outcome]:
    """Outcomes in the order given, ``jobs`` mutations at a time."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, m, source, timeout_s, baseline) for m in mutations]
        for future in futures:
            yield future.result()


def score(outcomes: list[Outcome]) -> dict[str, float | int]:
    """Killed share of the mutations that could be made (timeouts count as killed)."""
    made = [o for o in outcomes if o.status in ("killed", "survived", "timeout")]
    killed = [o for o in made if o.status in ("killed", "timeout")]
    return {"mutations": len(outcomes), "made": len(made), "killed": len(killed),
            "survived": len(made) - len(killed), "stale": len(outcomes) - len(made),
            "score": round(len(killed) / len(made), 3) if made else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="run only this mutation (repeatable; a prefix ending in '.' picks an area)")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests, run nothing")
    parser.add_argument("--json", type=Path, help="write the outcomes and the score here")
    parser.add_argument("--jobs", type=int, default=1, help="mutations run at once (default 1)")
    parser.add_argument("--source", default="HEAD",
                        help="tree to mutate: a git revision (default HEAD) or 'worktree' for the checkout's src/")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per mutation's tests")
    parser.add_argument("--baseline", action="store_true", help="run each selection on the unmutated tree")
    args = parser.parse_args(argv)

    mutations = select(args.only)
    if args.list:
        for m in mutations:
            print(f"{m.name:38} {m.file:34} {' '.join(m.tests)}\n{'':38} {m.why}")
        return 0
    started = time.monotonic()
    outcomes: list[Outcome] = []
    print(f"{'mutation':38} {'result':9} {'s':>6}  killed by", flush=True)
    for outcome in run_all(mutations, args.source, args.jobs, args.timeout, args.baseline):
        outcomes.append(outcome)
        shown = outcome.killed_by or outcome.detail.splitlines()[0] if (outcome.killed_by or outcome.detail) else ""
        print(f"{outcome.name:38} {outcome.status:9} {outcome.seconds:6.1f}  {shown}", flush=True)
    wall = round(time.monotonic() - started, 1)
    if args.baseline:
        bad = [o for o in outcomes if o.status != "passed"]
        print(f"\nbaseline: {len(outcomes) - len(bad)}/{len(outcomes)} selections pass unmutated in {wall} s")
        for o in bad:
            print(f"  {o.name}: {o.status} {o.killed_by}\n{o.detail}")
        return 1 if bad else 0
    summary = {**score(outcomes), "wall_s": wall, "source": args.source}
    print(f"\nscore: {summary['killed']}/{summary['made']} killed ({summary['score']:.0%}), "
          f"{summary['survived']} survived, {summary['stale']} stale, {wall} s")
    for o in outcomes:
        if o.status in ("survived", "stale"):
            why = next(m.why for m in mutations if m.name == o.name)
            print(f"  {o.status}: {o.name}: {why}{' (' + o.detail + ')' if o.detail else ''}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "outcomes": [asdict(o) for o in outcomes]},
                                        indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0 if summary["survived"] == 0 and summary["stale"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
