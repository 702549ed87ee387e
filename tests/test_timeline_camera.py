"""Each timeline clip carries its shot's camera: the move, the lens, a key-framed trajectory that
gives back every planned frame, and the camera files; all of it survives opentimelineio's reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import opentimelineio as otio
import pytest

from daotai.deliver.timeline import (
    KEY_ANGLE_DEG,
    KEY_POSITION_M,
    build_timeline,
    camera_at,
    camera_metadata,
    focal_length_mm,
    write_timeline,
)
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import load_script, validate_script

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def all_moves():
    return plan_script(load_script(EXAMPLES / "all_moves.json"))


def rotation_error_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1) / 2
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def assert_matches_plan(camera: dict, shot) -> None:
    for i, frame in enumerate(shot.cameras):
        matrix, fov = camera_at(camera, i)
        planned = np.reshape(frame.cam_to_world, (4, 4))
        assert np.linalg.norm(matrix[:3, 3] - planned[:3, 3]) <= KEY_POSITION_M * 1.01, (shot.shot_id, i)
        assert rotation_error_deg(matrix, planned) <= KEY_ANGLE_DEG * 1.5, (shot.shot_id, i)
        assert abs(fov - frame.fov) <= KEY_ANGLE_DEG * 1.01, (shot.shot_id, i)


def test_key_frames_give_back_every_planned_frame(all_moves):
    counts = {}
    for shot in all_moves.shots:
        camera = camera_metadata(shot)
        assert_matches_plan(camera, shot)
        counts[shot.shot_id] = len(camera["trajectory"]["frames"])
    print("key frames per shot:", counts)
    assert counts["static"] == 2 and counts["handheld"] > counts["pan"]
    assert all(n <= shot.frames for n, shot in zip(counts.values(), all_moves.shots, strict=True))


def test_the_lens_and_the_move_are_there(all_moves):
    zoom = all_moves.shot("zoom")
    camera = camera_metadata(zoom, {"pose": "cameras/zoom.pose.txt"})
    assert camera["type"] == zoom.move.type and camera["fov"] == zoom.move.fov
    assert camera["fov_deg"] == pytest.approx([zoom.cameras[0].fov, zoom.cameras[-1].fov], abs=1e-4)
    assert camera["focal_length_mm"][1] > camera["focal_length_mm"][0]  # zooming in: a longer lens
    assert focal_length_mm(2 * np.degrees(np.arctan(0.5))) == pytest.approx(24.0)  # fov of a 24 mm lens on 24 mm
    assert camera["files"] == {"pose": "cameras/zoom.pose.txt"}


def test_camera_metadata_round_trips_through_otio(all_moves, tmp_path):
    files = {s.shot_id: {"pose": f"cameras/{s.shot_id}.pose.txt"} for s in all_moves.shots}
    timeline = build_timeline(all_moves, {s.shot_id: f"shots/{s.shot_id}.mp4" for s in all_moves.shots},
                              camera_files=files)
    path = tmp_path / "timeline.otio"
    write_timeline(all_moves, {s.shot_id: f"shots/{s.shot_id}.mp4" for s in all_moves.shots}, path,
                   camera_files=files)
    back = otio.adapters.read_from_file(str(path))
    written = {c.name: c.metadata["daotai"]["camera"] for c in timeline.find_clips()}
    for clip, shot in zip(back.find_clips(), all_moves.shots, strict=True):
        camera = clip.metadata["daotai"]["camera"]
        assert otio.core.serialize_json_to_string(camera) == otio.core.serialize_json_to_string(written[clip.name])
        assert camera["files"] == files[shot.shot_id]
        assert_matches_plan(dict(camera), shot)


def test_a_render_names_its_camera_files_in_the_timeline(tmp_path):
    script = validate_script({
        "fps": 24, "size": "192x108", "scene": {"name": "stage", "set_pieces": []},
        "characters": [{"id": "red", "colour": [0.9, 0.1, 0.1], "position": [0.0, 0.0]}],
        "shots": [{"shot_id": "orbit", "duration": 0.5, "subject": "red", "framing": "full",
                   "camera": {"type": "orbit", "orbit": 30}}],
    })
    plan = plan_script(script)
    events = list(run(plan, tmp_path, PipelineSettings(controls=False, camera_qc=False)))
    assert isinstance(events[-1], Finished)
    clip = otio.adapters.read_from_file(str(tmp_path / "timeline.otio")).find_clips()[0]
    files = clip.metadata["daotai"]["camera"]["files"]
    assert {"pose", "c2w"} <= set(files) and files["pose"] == "cameras/orbit.pose.txt"
    assert all((tmp_path / rel).is_file() for rel in files.values())
    assert_matches_plan(dict(clip.metadata["daotai"]["camera"]), plan.shot("orbit"))
