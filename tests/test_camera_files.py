"""Camera files for other tools: pose files and camera-to-world JSON round-trip, USD cameras match the plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daotai.deliver.cameras import (
    c2w_json,
    parse_matrix_string,
    pose_text,
    read_pose_file,
    shot_matrices,
    usd_camera_fov,
    write_cameras,
)
from daotai.plan import geometry

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.json"))


def plan_of(path: Path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    return plan_script(load_script(path))


@pytest.fixture(scope="module", params=[p.name for p in EXAMPLES])
def plan(request):
    return plan_of(Path(__file__).resolve().parents[1] / "examples" / request.param)


def test_pose_files_round_trip(plan, tmp_path):
    for shot in plan.shots:
        path = tmp_path / f"{shot.shot_id}.pose.txt"
        path.write_text(pose_text(plan, shot))
        poses = read_pose_file(path)
        c2w = shot_matrices(shot)
        assert len(poses.world_to_camera) == shot.frames
        # CameraCtrl's reader: c2w = inv(w2c), OpenCV axes; flipping y and z gives the plan's matrices back.
        back = geometry.cv_to_gl(np.linalg.inv(poses.world_to_camera))
        assert np.abs(back - c2w).max() < 1e-6
        assert np.abs(poses.world_to_camera - geometry.gl_to_cv_view(geometry.world_to_camera(c2w))).max() < 1e-6
        for intrinsics, camera in zip(poses.intrinsics, shot.cameras, strict=True):
            K = np.reshape(camera.K, (3, 3))
            assert np.allclose(intrinsics, [K[0, 0] / plan.width, K[1, 1] / plan.height,
                                            K[0, 2] / plan.width, K[1, 2] / plan.height], atol=1e-9)
        assert poses.timestamps[0] == 0
        assert poses.timestamps[-1] == round((shot.frames - 1) * 1e6 / plan.fps)


def test_camera_to_world_json_round_trips(plan):
    for shot in plan.shots:
        data = json.loads(json.dumps(c2w_json(plan, shot)))
        frames = [k for k in data if k.startswith("frame")]
        assert len(frames) == shot.frames
        for i, matrix in enumerate(shot_matrices(shot)):
            parsed = parse_matrix_string(data[f"frame{i}"]["cam01"])
            assert np.abs(parsed - matrix).max() < 1e-6
            assert data[f"frame{i}"]["cam01"].split("] [")[-1].rstrip("]").split()[-1] == "1"  # centre column last
        assert data["daotai"]["units"] == "metres" and len(data["daotai"]["fov_deg"]) == shot.frames


def test_pose_lines_follow_the_realestate10k_layout(tmp_path):
    plan = plan_of(EXAMPLES[0])
    shot = plan.shots[0]
    lines = pose_text(plan, shot).splitlines()
    assert lines[0].startswith("# daotai") and len(lines) == shot.frames + 1
    fields = lines[1].split()
    assert len(fields) == 19 and fields[5:7] == ["0", "0"]
    # The frame-0 camera centre seen from its own world-to-camera matrix is the origin.
    w2c = np.eye(4)
    w2c[:3] = np.array(fields[7:], dtype=float).reshape(3, 4)
    centre = np.reshape(shot.cameras[0].cam_to_world, (4, 4))[:3, 3]
    assert np.allclose(w2c[:3, :3] @ centre + w2c[:3, 3], 0.0, atol=1e-6)


def test_usd_cameras_match_the_plan_at_every_frame(tmp_path):
    pytest.importorskip("pxr", reason="USD cameras need usd-core: pip install 'daotai[usd]'")
    from pxr import Usd, UsdGeom
    plan = plan_of(next(p for p in EXAMPLES if p.name == "all_moves.json"))
    written = write_cameras(plan, tmp_path, usd=True)
    assert (tmp_path / "sequence.usda") in written
    for shot in plan.shots:
        stage = Usd.Stage.Open(str(tmp_path / f"{shot.shot_id}.usda"))
        assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y and UsdGeom.GetStageMetersPerUnit(stage) == 1.0
        assert stage.GetTimeCodesPerSecond() == plan.fps
        camera = UsdGeom.Camera(next(p for p in stage.Traverse() if p.IsA(UsdGeom.Camera)))
        for i, (matrix, frame) in enumerate(zip(shot_matrices(shot), shot.cameras, strict=True)):
            world = np.array(UsdGeom.Xformable(camera).ComputeLocalToWorldTransform(float(i))).T
            assert np.abs(world - matrix).max() < 1e-9, (shot.shot_id, i)
            lens = camera.GetCamera(float(i))
            fov = usd_camera_fov(lens.focalLength, lens.verticalAperture)
            assert fov == pytest.approx(frame.fov, abs=1e-4)  # zoom and dolly-zoom change it per frame
    sequence = Usd.Stage.Open(str(tmp_path / "sequence.usda"))
    main = UsdGeom.Xformable(sequence.GetPrimAtPath("/daotai/camera"))
    for shot in plan.shots:
        for i in (0, shot.frames - 1):
            world = np.array(main.ComputeLocalToWorldTransform(float(shot.start_frame + i))).T
            assert np.abs(world - shot_matrices(shot)[i]).max() < 1e-9


def test_the_cameras_command_writes_every_shot_without_rendering(tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    script = next(p for p in EXAMPLES if p.name == "all_moves.json")
    result = CliRunner().invoke(app, ["cameras", str(script), "-o", str(tmp_path / "cams"), "--no-usd"])
    assert result.exit_code == 0, result.output
    plan = plan_of(script)
    names = sorted(p.name for p in (tmp_path / "cams").iterdir())
    assert names == sorted([f"{s.shot_id}.pose.txt" for s in plan.shots] + [f"{s.shot_id}.c2w.json" for s in plan.shots])
    assert "cameras" in result.output and f"{2 * len(plan.shots)} files" in result.output
