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


MOVE_FILL = "plan/moves.py"  # a move named by type and direction, filled in
SHOT_CAMERA = "plan/shot_camera.py"
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
T_WORDS = "tests/test_camera_words.py"
T_STAGE = "tests/test_staging_geometry.py"
T_SOUND = "tests/test_sound_placement.py"
T_KEY = "tests/test_shot_key.py"
T_TIMELINE_SOUND = "tests/test_timeline_soundtrack.py"
T_THRESHOLDS = "tests/test_qc_thresholds.py"
T_SPELLED = "tests/test_spelling_properties.py"
T_HEADROOM = "tests/test_framing_headroom.py"

MUTATIONS: tuple[Mutation, ...] = (
    # ------------------------------------------------------------------ plan/
    _m("plan.seed_hash", "plan/stable.py",
       'digest = hashlib.sha256("\\x1f".join(str(p) for p in parts).encode("utf-8")).digest()\n'
       '    return int.from_bytes(digest[:4], "big")',
       'return hash(tuple(str(p) for p in parts)) & 0xFFFFFFFF',
       SEEDS, "shot seeds from Python's per-process hash(): plans differ between runs"),
    _m("plan.crane_tilt_sign", MOVE_FILL,
       "rotate = (0.0, -sign * abs(rotate[1]), 0.0)  # a crane keeps",
       "rotate = (0.0, sign * abs(rotate[1]), 0.0)  # a crane keeps",
       MOVES, "a crane up tilts up (away from the subject) instead of down"),
    _m("plan.crane_default_tilt", MOVE_FILL,
       '"rotate": (0.0, -tilt if motion[1] >= 0 else tilt, 0.0)}',
       '"rotate": (0.0, tilt if motion[1] >= 0 else -tilt, 0.0)}',
       MOVES, "a default crane tilts away from the subject"),
    _m("plan.dolly_direction", "script/vocab.py",
       '_move("dolly", amount=MoveAmount("motion", 2, "distance"), signs=_IO,',
       '_move("dolly", amount=MoveAmount("motion", 2, "distance"), signs={"in": 1, "out": -1},',
       MOVES, "push in and pull out swapped"),
    _m("plan.pan_direction", MOVE_FILL,
       "rotate = _signed(rotate, amount.axis, sign)",
       "rotate = _signed(rotate, amount.axis, abs(sign))",
       MOVES, "pan/tilt/roll direction ignored"),
    _m("plan.zoom_direction", MOVE_FILL,
       "ratio = ZOOM_IN_RATIO if sign < 0 or spec.direction is None else 1.0 / ZOOM_IN_RATIO",
       "ratio = 1.0 / ZOOM_IN_RATIO if sign < 0 or spec.direction is None else ZOOM_IN_RATIO",
       MOVES, "zoom in widens the lens"),
    _m("plan.truck_direction", "script/vocab.py",
       '_move("truck", defaults={"motion": (1.0, 0.0, 0.0)}, amount=MoveAmount("motion", 0, "distance"), signs=_LR,',
       '_move("truck", defaults={"motion": (1.0, 0.0, 0.0)}, amount=MoveAmount("motion", 0, "distance"), '
       'signs={"left": 1, "right": -1},',
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
    _m("plan.rot_x_sign", "plan/camera_grammar.py",
       "return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])",
       "return np.array([[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]])",
       (T_CAMERA,), "tilt rotation matrix transposed (tilts the wrong way)"),
    _m("plan.dolly_third", MOVE_FILL,
       "motion = (0.0, 0.0, -round(subject_distance / 3.0, 3))",
       "motion = (0.0, 0.0, -round(subject_distance / 1.0, 3))",
       MOVES, "a default push-in runs the lens into the subject"),
    _m("plan.focal_full_angle", "plan/geometry.py",
       "return (size_px / 2.0) / math.tan(math.radians(fov_deg) / 2.0)",
       "return (size_px / 2.0) / math.tan(math.radians(fov_deg))",
       "tests/test_geometry.py", "focal length from the whole field of view instead of half"),
    _m("plan.roll_axis", "script/vocab.py",
       'amount=MoveAmount("rotate", 2, "angle")', 'amount=MoveAmount("rotate", 1, "angle")',
       T_WORDS, "a roll's direction is given to the tilt component (axes swapped)"),
    _m("plan.orbit_direction", MOVE_FILL,
       "orbit = sign * abs(orbit)", "orbit = abs(orbit)",
       T_WORDS, "orbit left goes right"),
    _m("plan.pedestal_direction", MOVE_FILL,
       "motion = _signed(motion, amount.axis, sign)", "motion = _signed(motion, amount.axis, abs(sign))",
       T_WORDS, "pedestal and crane down go up (a direction no longer signs a move's motion)"),
    _m("plan.orbit_sense", "plan/camera_grammar.py",
       "orbit = axis_rotations(1, move.orbit * e)  # (n, 3, 3)", "orbit = axis_rotations(1, -move.orbit * e)  # (n, 3, 3)",
       (T_WORDS, T_CAMERA), "a positive orbit carries the camera to its left"),
    _m("plan.roll_sense", "plan/camera_grammar.py",
       "@ axis_rotations(2, -roll * e)", "@ axis_rotations(2, roll * e)",
       (T_WORDS, T_CAMERA), "a positive roll turns the body counter-clockwise"),
    # framing that respects the face
    _m("plan.push_lands", SHOT_CAMERA,
       "placement = landed if landed is not None else placement", "landed = None",
       T_HEADROOM, "a push-in starts on the named framing and runs past the head"),
    _m("plan.ecu_eye_line", "plan/framing.py",
       '"extreme_close_up": FramingRule(0.22, 0.913)', '"extreme_close_up": FramingRule(0.22, 0.93)',
       T_HEADROOM, "an extreme close-up centres the eyes instead of keeping them at the upper third"),
    _m("plan.lead_room_side", "plan/headroom.py",
       "return right * sideways * LEAD_ROOM_SHARE * width", "return -right * sideways * LEAD_ROOM_SHARE * width",
       T_HEADROOM, "lead room behind the subject: they face the near frame edge"),
    _m("plan.seated_height", SHOT_CAMERA,
       "if drop > 0.0:  # seated people", "if drop < 0.0:  # seated people",
       T_HEADROOM, "a seated subject framed at standing height"),
    _m("render.label_over_face", "render/previz/labels.py",
       "if not any(_overlaps(box, face) for face in faces):", "if True:",
       T_HEADROOM, "a name label clamped into the frame over the face"),
    # staging off the face-to-face case
    _m("stage.ots_side", "plan/staging.py",
       "toward = (line * along + side * lateral) / reach", "toward = (line * along - side * lateral) / reach",
       T_STAGE, "the over-the-shoulder camera crosses the line (behind the far-side shoulder)"),
    _m("stage.ots_in_front", "plan/staging.py",
       "along, lateral = gap + OTS_BACK_M * scale_near, OTS_LATERAL_M * scale_near",
       "along, lateral = gap - OTS_BACK_M * scale_near, OTS_LATERAL_M * scale_near",
       T_STAGE, "the over-the-shoulder camera stands in front of the near person"),
    _m("stage.ots_eye_line_of_subject", "plan/staging.py",
       "lift = max(0.0, OTS_EYE_LINE * near.height - aim[1])", "lift = max(0.0, OTS_EYE_LINE * subject.height - aim[1])",
       T_STAGE, "the lens is lifted to the subject's eye line instead of the near person's"),
    _m("stage.ots_back_distance", "plan/staging.py",
       "OTS_BACK_M = 0.55", "OTS_BACK_M = 0.75",
       T_STAGE, "the over-the-shoulder camera stands further back than the rule"),
    _m("stage.normal_away_from_audience", "plan/staging.py",
       "if float(normal @ np.array(AUDIENCE)) < -1e-9:", "if float(normal @ np.array(AUDIENCE)) > 1e-9:",
       T_STAGE, "cameras keep to the far side of the line of action"),
    _m("stage.single_wrong_side", "plan/staging.py",
       "toward = _unit(math.cos(a) * line + math.sin(a) * side)", "toward = _unit(math.cos(a) * line - math.sin(a) * side)",
       T_STAGE, "a dialogue single stands off the line on the far side"),
    _m("stage.single_angle", "plan/staging.py",
       "DIALOGUE_SINGLE_DEG = 35.0", "DIALOGUE_SINGLE_DEG = 25.0",
       T_STAGE, "a dialogue single stands nearer the line than the rule"),
    _m("stage.group_axis", "plan/staging.py",
       "line = np.array([normal[1], -normal[0]])  # across the frame", "line = np.array([normal[0], -normal[1]])  # across the frame",
       T_STAGE, "a two-shot is centred along the wrong axis (not square to the pair)"),
    _m("stage.partner_cone", "plan/staging.py",
       "PARTNER_CONE_DEG = 50.0", "PARTNER_CONE_DEG = 60.0",
       T_STAGE, "someone well off the subject's facing counts as who they talk to"),
    _m("stage.side_toward_right", "plan/staging.py",
       "yaw = math.radians(subject.facing + place.side_deg)", "yaw = math.radians(subject.facing - place.side_deg)",
       T_STAGE, "an explicit side is read from the subject's other hand"),
    # ---------------------------------------------------------------- script/
    _m("script.zuo_yao_right", "script/vocab.py",
       '"左摇": {"direction": "left"}', '"左摇": {"direction": "right"}',
       WORDS, "左摇 (pan left) read as pan right"),
    _m("script.alias_tui_jin", "script/vocab.py",
       '"推进": {"direction": "in"}, ', "",
       WORDS, "the alias 推进 (push in) forgotten: it still reads as 推 + 进, but editors no longer offer it"),
    _m("script.fov_end_max", "script/camera_spec.py",
       "fov_end: bounded(gt=1, lt=170) | None = None", "fov_end: bounded(gt=1, lt=179) | None = None",
       FOV_END, "fov_end 175 passes validate, then fails in the planner"),
    _m("script.crane_signs", "script/vocab.py",
       '_move("crane", defaults={"motion": (0.0, 1.5, 0.0)}, amount=MoveAmount("motion", 1, "distance"), signs=_UD,',
       '_move("crane", defaults={"motion": (0.0, 1.5, 0.0)}, amount=MoveAmount("motion", 1, "distance"), '
       'signs={"up": -1, "down": 1},',
       MOVES, "crane up goes down"),
    _m("script.direction_contradiction", "script/camera_spec.py",
       "if explicit is not None and explicit != 0 and (explicit > 0) != (signs[direction] > 0):",
       "if False and explicit is not None and (explicit > 0) != (signs[direction] > 0):",
       BAD_SCRIPTS, "a direction contradicting an explicit amount is accepted"),
    _m("script.cut_with_duration", "script/schema.py",
       "if self.type == TransitionKind.cut and self.duration:",
       "if self.type == TransitionKind.cut and self.duration and False:",
       BAD_SCRIPTS, "a cut with a duration is accepted"),
    _m("script.blocking_order", "script/fields.py",
       "    if end is not None and end <= start:",
       "    if end is not None and end < start:",
       ("tests/test_script.py::test_a_walk_must_end_after_it_starts", BAD_SCRIPTS), "a walk that ends when it starts is accepted"),
    _m("script.odd_size", "script/schema.py",
       "    if value % 2:\n        raise ValueError(\"must be even",
       "    if value % 2 and value < 0:\n        raise ValueError(\"must be even",
       BAD_SCRIPTS, "odd frame sizes accepted (H.264 4:2:0 refuses them)"),
    _m("script.size_limit", "script/load.py",
       "MAX_SCRIPT_BYTES = 2 * 1024 * 1024", "MAX_SCRIPT_BYTES = 2 * 1024 * 1024 * 1024",
       "tests/test_script.py::test_a_script_over_two_mebibytes_is_refused_unread",
       "a huge script is read whole (only the pinned test: others build inputs from the limit itself)"),
    _m("script.roll_signs", "script/vocab.py",
       '_move("roll", defaults={"rotate": (0.0, 0.0, 15.0)}, amount=MoveAmount("rotate", 2, "angle"), signs=_LR,',
       '_move("roll", defaults={"rotate": (0.0, 0.0, 15.0)}, amount=MoveAmount("rotate", 2, "angle"), '
       'signs={"left": 1, "right": -1},',
       T_WORDS, "roll left and right swapped"),
    _m("script.orbit_signs", "script/vocab.py",
       '_move("orbit", defaults={"orbit": 45.0}, amount=MoveAmount("orbit", None, "angle"), signs=_LR,',
       '_move("orbit", defaults={"orbit": 45.0}, amount=MoveAmount("orbit", None, "angle"), '
       'signs={"left": 1, "right": -1},',
       T_WORDS, "orbit left and right swapped"),
    _m("script.pedestal_signs", "script/vocab.py",
       '_move("pedestal", defaults={"motion": (0.0, 0.5, 0.0)}, amount=MoveAmount("motion", 1, "distance"), signs=_UD,',
       '_move("pedestal", defaults={"motion": (0.0, 0.5, 0.0)}, amount=MoveAmount("motion", 1, "distance"), '
       'signs={"up": -1, "down": 1},',
       T_WORDS, "pedestal up goes down"),
    _m("script.tilt_signs", "script/vocab.py",
       '_move("tilt", defaults={"rotate": (0.0, 15.0, 0.0)}, amount=MoveAmount("rotate", 1, "angle"), signs=_UD,',
       '_move("tilt", defaults={"rotate": (0.0, 15.0, 0.0)}, amount=MoveAmount("rotate", 1, "angle"), '
       'signs={"up": -1, "down": 1},',
       T_WORDS, "tilt up looks down"),
    _m("script.dolly_zoom_signs", "script/vocab.py",
       '_move("dolly_zoom", amount=MoveAmount("motion", 2, "distance"), signs=_IO,',
       '_move("dolly_zoom", amount=MoveAmount("motion", 2, "distance"), signs={"in": 1, "out": -1},',
       T_WORDS, "a dolly zoom in pulls back"),
    _m("script.xia_yao_up", "script/vocab.py",
       '"下摇": {"direction": "down"}', '"下摇": {"direction": "up"}',
       T_WORDS, "下摇 (tilt down) read as tilt up"),
    _m("script.la_jin_out", "script/vocab.py",
       '"拉近": {"direction": "in"}', '"拉近": {"direction": "out"}',
       T_WORDS, "拉近 (zoom in) read as zoom out"),
    _m("script.back_forgotten", "script/vocab.py",
       '"out": ["back", "backward", "出", "拉"]', '"out": ["backward", "出", "拉"]',
       T_WORDS, "'back' no longer a direction: 'dolly back 1 m' is refused"),
    _m("script.phrase_truck_axis", "script/vocab.py",
       'amount=MoveAmount("motion", 0, "distance")', 'amount=MoveAmount("motion", 2, "distance")',
       T_WORDS, "a truck's amount moves the camera along z"),
    _m("script.phrase_pedestal_axis", "script/vocab.py",
       '"motion": (0.0, 0.5, 0.0)}, amount=MoveAmount("motion", 1, "distance")',
       '"motion": (0.0, 0.5, 0.0)}, amount=MoveAmount("motion", 2, "distance")',
       T_WORDS, "a pedestal's amount moves the camera along z"),
    _m("script.centimetre", "script/spellings.py",
       '"cm": 0.01,', '"cm": 0.1,',
       T_WORDS, "centimetres read as decimetres"),
    _m("script.prompt_tail_up", "script/prompt_reader.py",
       "(?:left|right|up|down|in|out|forward|backward)", "(?:left|right|down|in|out|forward|backward)",
       T_WORDS, "'up' after a move in a prompt is dropped (tilt up read as a plain tilt)"),
    _m("script.prompt_short_moves", "script/prompt_reader.py",
       '_SHORT_WORDS = frozenset({"low", "high", "day", "fog", "sea", "pan", "jib", "arc"})',
       '_SHORT_WORDS = frozenset({"low", "high", "day", "fog", "sea"})',
       T_WORDS, "'jib', 'arc' and 'pan' in a prompt taken for abbreviations: read only in capitals"),
    _m("script.colour_channels", "script/fields.py",
       "for i in (0, 2, 4))", "for i in (0, 4, 2))",
       T_SPELLED, "#RRGGBB read as red, blue, green"),
    # -------------------------------------------------------------------- qc/
    _m("qc.psnr_gate_zero", "qc/fidelity.py",
       "PSNR_MEAN_MIN_DB = 38.5", "PSNR_MEAN_MIN_DB = 0.0",
       FIDELITY, "the encode-fidelity gate never fails"),
    _m("qc.psnr_spread_unbounded", "qc/fidelity.py",
       "PSNR_STD_MAX_DB = 1.2", "PSNR_STD_MAX_DB = 1e9",
       FIDELITY, "a starved frame and a wide spread pass"),
    _m("qc.flat_frames_counted", "qc/fidelity.py",
       "FLAT_LUMA_STD = 10.0", "FLAT_LUMA_STD = 0.0",
       FIDELITY, "near-flat frames count toward encode PSNR"),
    _m("qc.hidden_share", "qc/subject.py",
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
       "if abs(samples - Fraction(picture_s) * rate) > grain:", "if abs(samples - Fraction(picture_s) * rate) > grain + 10 * rate:",
       ("tests/test_audio_qc.py",), "sound seconds longer or shorter than the picture passes"),
    _m("qc.framing_invisible", "qc/framing.py",
       "if counts[shot.subject] < MIN_VISIBLE_PX:", "if counts[shot.subject] < 0:",
       ("tests/test_framing_qc.py::test_a_subject_missing_from_the_first_frame_is_not_measured",
        "tests/test_framing_qc.py"), "a subject absent from the first frame is measured as if there"),
    _m("qc.psnr_peak", "qc/metrics.py",
       "return 10.0 * math.log10(255.0**2 / mse)", "return 10.0 * math.log10(255.0 / mse)",
       ("tests/test_qc_metrics.py::test_psnr_values_and_errors", FIDELITY), "PSNR against the peak, not its square"),
    _m("qc.audio_short_passes", "qc/audio.py",
       "if abs(samples - Fraction(picture_s) * rate) > grain:", "if samples - Fraction(picture_s) * rate > grain:",
       T_THRESHOLDS, "sound shorter than the picture passes (only longer fails)"),
    _m("qc.audio_early_start_passes", "qc/audio.py",
       "if abs(first_s) > START_TOLERANCE_S or", "if first_s > START_TOLERANCE_S or",
       T_THRESHOLDS, "sound starting before the picture passes"),
    _m("qc.aac_grain_for_pcm", "qc/audio.py",
       'grain = AAC_FRAME if codec == "aac" else 1', "grain = AAC_FRAME",
       T_THRESHOLDS, "PCM sound may be off by an AAC frame"),
    _m("qc.clip_run_off_by_one", "qc/audio.py",
       "if run[1] >= CLIP_MIN_RUN]", "if run[1] > CLIP_MIN_RUN]",
       T_THRESHOLDS, "three full-scale samples in a row are not clipping"),
    _m("qc.clip_positive_only", "qc/audio.py",
       "full = np.abs(samples).max(axis=1) >= CLIP_LEVEL", "full = samples.max(axis=1) >= CLIP_LEVEL",
       T_THRESHOLDS, "clipping at negative full scale is not found"),
    _m("qc.silence_level", "qc/audio.py",
       "quiet = peaks < 10 ** (SILENCE_DBFS / 20)", "quiet = peaks < 10 ** (SILENCE_DBFS / 10)",
       T_THRESHOLDS, "silence measured as power, not amplitude (-120 dBFS)"),
    _m("qc.silence_min_length", "qc/audio.py",
       "SILENCE_MIN_S = 1.0", "SILENCE_MIN_S = 0.9",
       T_THRESHOLDS, "pauses shorter than a second are reported as silence"),
    _m("qc.timing_bound_loose", "qc/camera_path_check.py",
       "TIMING_BOUND = 0.2", "TIMING_BOUND = 0.25",
       T_THRESHOLDS, "a camera 22% ahead of its plan passes"),
    _m("qc.timing_ahead_only", "qc/camera_path_check.py",
       "if abs(gap[worst]) > TIMING_BOUND:", "if gap[worst] > TIMING_BOUND:",
       T_THRESHOLDS, "a camera running behind its plan passes"),
    _m("qc.rot_bound_loose", "qc/camera_path_check.py",
       "ROT_BOUND_DEG = 5.0", "ROT_BOUND_DEG = 5.5",
       T_THRESHOLDS, "5.2 degrees off the plan a frame passes"),
    _m("qc.trans_bound_share", "qc/camera_path_check.py",
       "TRANS_BOUND_SHARE = 0.25", "TRANS_BOUND_SHARE = 0.3",
       T_THRESHOLDS, "a camera drifting more than the allowed share of its path passes"),
    _m("qc.move_turn_threshold", "qc/camera_path_check.py",
       "MOVE_TURN_DEG = 5.0", "MOVE_TURN_DEG = 6.0",
       T_THRESHOLDS, "a 5.5 degree turn the wrong way is not checked for direction"),
    _m("qc.black_bright_share", "qc/metrics.py",
       "BLACK_MAX_BRIGHT_FRACTION = 0.01", "BLACK_MAX_BRIGHT_FRACTION = 0.02",
       T_THRESHOLDS, "a dark frame with lights in 1.5% of it counts as black"),
    _m("qc.green_ratio", "qc/metrics.py",
       "GREEN_MAX_RATIO = 1 / 3", "GREEN_MAX_RATIO = 1 / 2",
       T_THRESHOLDS, "greenish pictures with red at 40% of green count as broken green"),
    _m("qc.green_level", "qc/metrics.py",
       "GREEN_MIN_G = 48", "GREEN_MIN_G = 40",
       T_THRESHOLDS, "dark green-black frames count as broken green"),
    _m("qc.frozen_off_by_one", "qc/metrics.py",
       "if end - self._start >= self.min_length:", "if end - self._start > self.min_length:",
       T_THRESHOLDS, "a frozen run of exactly the minimum length is not found"),
    _m("qc.hidden_share_loose", "qc/subject.py",
       "SUBJECT_HIDDEN_MAX_SHARE = 0.25", "SUBJECT_HIDDEN_MAX_SHARE = 0.35",
       T_THRESHOLDS, "a subject hidden for 30% of the shot passes"),
    _m("qc.psnr_mean_loose", "qc/fidelity.py",
       "PSNR_MEAN_MIN_DB = 38.5", "PSNR_MEAN_MIN_DB = 38.4",
       T_THRESHOLDS, "an encode averaging 38.44 dB passes"),
    _m("qc.psnr_frame_floor", "qc/fidelity.py",
       "PSNR_FRAME_MIN_DB = PSNR_MEAN_MIN_DB - 3 * PSNR_STD_MAX_DB",
       "PSNR_FRAME_MIN_DB = PSNR_MEAN_MIN_DB - 4 * PSNR_STD_MAX_DB",
       T_THRESHOLDS, "a starved frame 3.7 dB under the floor passes"),
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
       "frame = _overlap_frame(join.overlap_kind, under, frame, (index + 1) / (join.overlap_in + 1))",
       "frame = _overlap_frame(join.overlap_kind, under, frame, index / (join.overlap_in + 1))",
       (T_ASSEMBLE,), "the crossfade starts on the old shot alone"),
    _m("post.fade_first_frame", "post/assemble.py",
       "gain *= index / join.fade_in  # first frame black",
       "gain *= (index + 1) / join.fade_in  # first frame black",
       (T_ASSEMBLE,), "a fade-in's first frame is not black"),
    _m("post.fade_frames", "plan/timing.py",
       "span = exact * rate if overlaps else exact * rate / 2", "span = exact * rate",
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
    _m("post.sample_at_truncated", "post/assemble.py",
       "return math.floor(Fraction(frame) * rate / fps + Fraction(1, 2))", "return math.floor(Fraction(frame) * rate / fps)",
       T_SOUND, "frame starts truncated to the sample (a frame of 29.97 starts 0.6 sample early)"),
    _m("post.sample_at_nominal_rate", "post/assemble.py",
       "return math.floor(Fraction(frame) * rate / fps + Fraction(1, 2))",
       "return math.floor(Fraction(frame) * rate / round(fps) + Fraction(1, 2))",
       T_SOUND, "29.97 fps sound placed as 30 fps: it drifts a frame every 33 s"),
    _m("post.envelope_nominal_rate", "post/assemble.py",
       "frames = np.arange(length, dtype=np.float64) * float(fps) / rate  # (length,) frame time of each sample\n"
       "    env = np.ones(length, dtype=np.float64)",
       "frames = np.arange(length, dtype=np.float64) * round(fps) / rate  # (length,) frame time of each sample\n"
       "    env = np.ones(length, dtype=np.float64)",
       T_SOUND, "a clip's fades timed at 30 fps on a 29.97 picture"),
    _m("post.limiter_ceiling_power", "post/assemble.py",
       "ceiling = amplitude(ceiling_dbfs)", "ceiling = 10.0 ** (ceiling_dbfs / 10.0)",
       T_SOUND, "the limiter's ceiling read as power: it limits 1 dB lower than asked"),
    _m("post.limiter_release", "post/assemble.py",
       "LIMIT_RELEASE_DB_PER_S = 20.0", "LIMIT_RELEASE_DB_PER_S = 60.0",
       T_SOUND, "the limiter recovers three times too fast (pumping)"),
    _m("post.limiter_no_lookahead", "post/assemble.py",
       "    gain[:-1] = np.minimum(gain[:-1], need[1:])\n", "",
       T_SOUND, "the limiter does not look ahead: a peak's first samples clip"),
    _m("post.clip_gain_dropped", "post/assemble.py",
       "mix[begin:end] += part * (env * np.float32(gains[i]))[:, None]", "mix[begin:end] += part * env[:, None]",
       T_SOUND, "a clip's gain is ignored in the mix"),
    _m("post.soundtrack_gain_sign", "post/assemble.py",
       "*= np.float32(amplitude(gain_db))", "*= np.float32(amplitude(-gain_db))",
       T_SOUND, "a soundtrack at -12 dB plays 12 dB louder"),
    _m("post.amplitude_power", "post/assemble.py",
       "return 10.0 ** (db / 20.0)", "return 10.0 ** (db / 10.0)",
       T_SOUND, "levels in dB converted as power ratios"),
    _m("post.soundtrack_offset_truncated", "post/assemble.py",
       "return math.floor(Fraction(repr(float(seconds))) * rate + Fraction(1, 2))",
       "return int(float(seconds) * rate)",
       T_SOUND, "a soundtrack offset truncated to the sample instead of rounded"),
    # ------------------------------------------------------------- shot cache
    _m("cache.scene_name_only", "run/cache.py",
       '"scene": plan.scene.model_dump(mode="json"),', '"scene": {"name": plan.scene.name},',
       T_KEY, "the key misses the set, its props and the time of day"),
    _m("cache.references_by_name", "run/cache.py",
       'return file_sha256(file, memo) if file.is_file() else f"missing:{path}"',
       'return str(file) if file.is_file() else f"missing:{path}"',
       T_KEY, "reference files keyed by name: one edited in place is not rendered again"),
    _m("cache.soundtrack_by_name", "run/cache.py",
       '"file": referenced(soundtrack.path) if not soundtrack.path.startswith("upload:") else soundtrack.path,',
       '"file": soundtrack.path,',
       T_KEY, "the soundtrack keyed by name: a file edited in place is not heard"),
    _m("cache.ends_picture_dropped", "run/cache.py",
       ',\n                 "ends_picture": shot.start_frame + shot.frames == plan.total_frames}', "}",
       T_KEY, "a shot that came to end the film keeps the soundtrack slice it had in the middle"),
    _m("cache.voice_dropped", "run/cache.py",
       'for ref in (*c.reference_images, *((c.voice,) if getattr(c, "voice", None) else ()))}',
       "for ref in c.reference_images}",
       T_KEY, "a character's voice file is not in the key"),
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
    _m("deliver.usd_focal_width", "deliver/camera_files.py",
       "focal = fy * VERTICAL_APERTURE_MM / height", "focal = fy * VERTICAL_APERTURE_MM / width",
       "tests/test_camera_files.py::test_usd_cameras_match_the_plan_at_every_frame",
       "USD focal length from the frame's width (wrong lens in DCC tools)"),
    _m("deliver.soundtrack_skip_sign", "deliver/timeline.py",
       "skip = max(0, round(-sound.soundtrack_offset_s * rate))", "skip = max(0, round(sound.soundtrack_offset_s * rate))",
       T_TIMELINE_SOUND, "a soundtrack starting early is not skipped into (and a late one is)"),
    _m("deliver.soundtrack_length_ignores_skip", "deliver/timeline.py",
       "length = min(available_frames - skip, total - begin)", "length = min(available_frames, total - begin)",
       T_TIMELINE_SOUND, "a skipped-into soundtrack's clip runs past the end of its file"),
    _m("deliver.soundtrack_length_ignores_offset", "deliver/timeline.py",
       "length = min(available_frames - skip, total - begin)", "length = min(available_frames - skip, total)",
       T_TIMELINE_SOUND, "a late soundtrack runs past the end of the picture"),
    _m("deliver.soundtrack_fade_anywhere", "deliver/timeline.py",
       "if plan.fade_out is not None and begin + length == total:", "if plan.fade_out is not None:",
       T_TIMELINE_SOUND, "a soundtrack that ended before the picture gets the closing fade"),
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
