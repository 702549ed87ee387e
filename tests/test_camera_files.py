"""Camera files for other tools: pose files and camera-to-world JSON round-trip, USD cameras match the plan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daotai.deliver.camera_files import (
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


# ------------------------------------------------------------------ in a render: only when asked

TINY = {"fps": 12, "size": "160x96", "scene": {"name": "test stage", "set_pieces": []}, "characters": [{"id": "a"}],
        "shots": [{"shot_id": "s1", "duration": 0.5, "subject": "a", "camera": "pan_right"}]}
# The command line with usd-core made unimportable, as in an install without the `usd` extra.
WITHOUT_USD = "import sys; sys.modules['pxr'] = None; from daotai.cli import main; sys.argv[0] = 'daotai'; main()"


def render_cli(tmp_path: Path, *args: str, code: str = "from daotai.cli import main; main()"):
    import os
    import subprocess
    import sys

    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "film.json"
    script.write_text(json.dumps(TINY))
    return subprocess.run([sys.executable, "-c", code, "render", str(script), "-o", str(tmp_path / "out"),
                           "--no-controls", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "300"})


def test_a_render_writes_usd_cameras_only_when_asked(tmp_path):
    """The same command writes the same camera files whether or not usd-core is installed: none by default."""
    pytest.importorskip("pxr", reason="the asked-for case needs usd-core: pip install 'daotai[usd]'")
    plain = render_cli(tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    names = sorted(p.name for p in (tmp_path / "plain" / "out" / "cameras").iterdir())
    assert names == ["s1.c2w.json", "s1.pose.txt"]
    manifest = json.loads((tmp_path / "plain" / "out" / "manifest.json").read_text())
    assert manifest["settings"]["usd_cameras"] is False and manifest["skipped_outputs"] == []

    asked = render_cli(tmp_path / "asked", "--usd-cameras")
    assert asked.returncode == 0, asked.stderr
    names = sorted(p.name for p in (tmp_path / "asked" / "out" / "cameras").iterdir())
    assert names == ["s1.c2w.json", "s1.pose.txt", "s1.usda", "sequence.usda"]
    manifest = json.loads((tmp_path / "asked" / "out" / "manifest.json").read_text())
    assert manifest["settings"]["usd_cameras"] is True and "cameras/s1.usda" in manifest["files"]
    assert manifest["skipped_outputs"] == []


def test_usd_cameras_asked_for_without_usd_core_are_skipped_with_a_notice_and_a_manifest_entry(tmp_path):
    done = render_cli(tmp_path, "--usd-cameras", code=WITHOUT_USD)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "USD cameras (cameras/<shot_id>.usda, cameras/sequence.usda) will not be written: usd-core is not " \
           "installed; install it with: pip install 'daotai[usd]'" in said, said
    assert said.index("will not be written") < said.index("s1")  # said before the shot is rendered
    names = sorted(p.name for p in (tmp_path / "out" / "cameras").iterdir())
    assert names == ["s1.c2w.json", "s1.pose.txt"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["skipped_outputs"] == [{"output": "USD cameras (cameras/<shot_id>.usda, cameras/sequence.usda)",
                                            "reason": "usd-core is not installed",
                                            "install": "pip install 'daotai[usd]'"}]
    assert manifest["settings"]["usd_cameras"] is False  # what the run did; skipped_outputs says what was asked


def test_the_cameras_command_writes_usd_only_with_usd(tmp_path):
    from typer.testing import CliRunner

    from daotai.cli import app

    script = next(p for p in EXAMPLES if p.name == "minimal.json")
    plain = CliRunner().invoke(app, ["cameras", str(script), "-o", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    assert not list((tmp_path / "plain").glob("*.usda"))
    import subprocess
    import sys

    refused = subprocess.run([sys.executable, "-c", WITHOUT_USD, "cameras", str(script), "-o", str(tmp_path / "usd"),
                              "--usd"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 5 and "pip install 'daotai[usd]'" in refused.stderr, refused.stderr
    assert not (tmp_path / "usd").exists() or not list((tmp_path / "usd").iterdir())


def test_the_readme_lists_what_a_default_render_writes(tmp_path):
    """Every file of a plain render is in the README's list, and USD cameras are listed as --usd-cameras only."""
    import os
    import subprocess
    import sys

    script = tmp_path / "film.json"
    script.write_text(json.dumps({**TINY, "fps": 24}))  # a SMPTE rate: the XML and EDL are written too
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("## What a render writes", 1)[1].split("```", 2)[1]
    for name in {f.split("/")[0] + ("/" if "/" in f else "") for f in files}:
        assert name in block, (name, files)
    for name in (f for f in files if f.startswith(("cameras/", "shots/", "control/"))):
        kind = name.split("/", 1)[1].replace("s1", "", 1)  # the file's kind without the shot id: .pose.txt, _mask.mkv …
        assert kind in block, (name, block)
    assert not [f for f in files if f.endswith(".usda")]
    assert all("--usd-cameras" in line for line in block.splitlines() if ".usda" in line)
