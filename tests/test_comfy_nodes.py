"""daotai's ComfyUI nodes through the in-repo stub of ``comfy_api.latest`` (tests/comfy_stub, ComfyUI 0.3.64).

The pack is loaded the way ComfyUI's custom_nodes scanner loads it (``comfyui/__init__.py``,
its ``comfy_entrypoint``), every schema is checked, and every node runs on small CPU inputs;
the previz and assemble nodes are compared with what ``daotai render`` wrote for the same script.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="ComfyUI's IMAGE and MASK values are torch tensors: pip install 'daotai[neural]'")

REPO = Path(__file__).resolve().parents[1]
STUB = Path(__file__).resolve().parent / "comfy_stub"
NODE_IDS = ["DaotaiDirectorScript", "DaotaiShotCamera", "DaotaiPrevizRender", "DaotaiShotPrompt",
            "DaotaiCameraCheck", "DaotaiAssembleSequence", "DaotaiH3Look", "DaotaiH3Render"]

SCRIPT = {
    "fps": 12, "size": "320x180", "scene": "office",
    "characters": [{"id": "red", "colour": [0.9, 0.1, 0.1], "position": [-0.6, 0.0]}],
    "shots": [
        {"shot_id": "pan", "duration": 1.0, "subject": "red", "framing": "wide",
         "camera": {"type": "pan", "rotate": [20, 0, 0]}},
        {"shot_id": "push", "duration": 1.0, "subject": "red", "framing": "full",
         "camera": {"type": "dolly", "motion": [0, 0, -0.6]}, "transition": {"type": "crossfade", "duration": 0.25}},
    ],
}


@pytest.fixture(scope="module")
def comfy():
    """The pack loaded through the stub (removed again afterwards)."""
    sys.path.insert(0, str(STUB))
    try:
        import comfy_stub_harness
    finally:
        sys.path.remove(str(STUB))
    try:
        with comfy_stub_harness.stub_pack(REPO / "comfyui") as pack:
            yield pack
    finally:
        sys.modules.pop("comfy_stub_harness", None)


@pytest.fixture(scope="module")
def script(comfy):
    value, ids, summary = comfy.run(comfy.nodes["DaotaiDirectorScript"], script_text=json.dumps(SCRIPT))
    assert ids == "pan,push" and "2 shots" in summary
    return value


@pytest.fixture(scope="module")
def cli_render(tmp_path_factory):
    """`daotai render` of the same script: shots, controls, sequence."""
    from typer.testing import CliRunner

    from daotai.cli import app

    folder = tmp_path_factory.mktemp("cli")
    path = folder / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    result = CliRunner().invoke(app, ["render", str(path), "-o", str(folder / "out")])
    assert result.exit_code == 0, result.output
    return folder / "out"


# ------------------------------------------------------------------ the pack


def test_the_pack_loads_with_valid_schemas(comfy):
    assert list(comfy.nodes) == NODE_IDS
    for node_id, cls in comfy.nodes.items():
        schema = cls.GET_SCHEMA()
        assert schema.node_id == node_id and schema.category == "daotai" and schema.description
        assert comfy.schema_problems(schema) == []


def test_the_stub_catches_broken_schemas(comfy):
    io = comfy.api.io

    class Clash(io.ComfyNode):
        @classmethod
        def define_schema(cls):
            return io.Schema(node_id="Clash", display_name="Clash", inputs=[
                io.Int.Input("width", default=0, min=1, max=8),
                io.Combo.Input("mode", options=["a", "b"], default="c")],
                outputs=[io.Int.Output("width")])

        @classmethod
        def execute(cls, width, mode):
            return io.NodeOutput(width)

    with pytest.raises(ValueError, match="unique between inputs and outputs"):
        Clash.GET_SCHEMA()
    problems = comfy.schema_problems(Clash.define_schema())
    assert any("default 0 lies outside [1, 8]" in p for p in problems)
    assert any("'c' is not one of the options" in p for p in problems)


# ------------------------------------------------------------------ Director Script


def test_script_node_refuses_a_bad_script_with_its_json_path(comfy):
    node = comfy.nodes["DaotaiDirectorScript"]
    bad = json.dumps({"shots": [{"shot_id": "a", "camera": {"fov": 190}}]})
    with pytest.raises(comfy.PromptError, match=r"shots\[0\]\.camera\.fov: 190 must be"):
        comfy.run(node, script_text=bad)
    with pytest.raises(comfy.PromptError, match="preset: Value not valid"):
        comfy.run(node, script_text=json.dumps(SCRIPT), preset="huge")


def test_a_bad_script_is_reported_once_and_errors_carry_no_dump(comfy, script):
    bad = json.dumps({"shots": [{"shot_id": "a", "camera": {"fov": 190}}]})
    with pytest.raises(comfy.PromptError) as refused:
        comfy.run(comfy.nodes["DaotaiDirectorScript"], script_text=bad, script_file="", preset="preview")
    assert str(refused.value).count("shots[0].camera.fov: 190") == 1
    # ComfyUI's error report holds str() of the failed node's inputs: a line each, not the plan
    _, _, _, _, _, trajectory, _ = comfy.run(comfy.nodes["DaotaiShotCamera"], script=script, shot_id="pan")
    assert str(script) == f"DirectorScript({script.summary()})" and len(str(script)) < 200
    assert len(str(trajectory)) < 200 and "12 frames" in str(trajectory)


def test_script_node_reads_a_file_and_notices_edits(comfy, tmp_path):
    node = comfy.nodes["DaotaiDirectorScript"]
    path = tmp_path / "script.yaml"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    value, ids, _ = comfy.run(node, script_file=str(path), preset="preview")
    assert ids == "pan,push" and value.plan.width == 640 and value.source == path
    before = node.fingerprint_inputs(script_file=str(path))
    path.write_text(json.dumps(SCRIPT) + "\n", encoding="utf-8")
    import os

    os.utime(path, ns=(1, 1))
    assert node.fingerprint_inputs(script_file=str(path)) != before


# ------------------------------------------------------------------ Shot Camera


def test_camera_node_matrices_equal_the_plans(comfy, script):
    shot = script.shot("push")
    embedding, width, height, length, plucker, trajectory, text = comfy.run(
        comfy.nodes["DaotaiShotCamera"], script=script, shot_id="push", width=64, height=32, fps=16.0)
    assert (width, height, length) == (64, 32, 17)
    assert tuple(embedding.shape) == (1, 24, 5, 32, 64) and tuple(plucker.shape) == (17, 32, 64, 6)
    frames = json.loads(text)["frames"]
    assert len(frames) == shot.frames
    for frame, planned, matrix in zip(frames, shot.cameras, trajectory.cam_to_world, strict=True):
        assert np.array(frame["cam_to_world"]).ravel().tolist() == list(planned.cam_to_world)
        assert matrix.ravel().tolist() == list(planned.cam_to_world)
        assert np.array(frame["K"]).ravel().tolist() == list(planned.K)


def test_camera_node_defaults_follow_the_plan_for_wan(comfy, script):
    _, width, height, length, *_ = comfy.run(comfy.nodes["DaotaiShotCamera"], script=script)
    assert (width % 16, height % 16, length) == (0, 0, 13)
    with pytest.raises(Exception, match="width: 100 must be a multiple of 16"):
        comfy.run(comfy.nodes["DaotaiShotCamera"], script=script, width=100, height=64)


# ------------------------------------------------------------------ Previz Render


def test_previz_node_frames_equal_daotai_renders(comfy, script, cli_render):
    from daotai.encode.read import decode_frames, decode_gray
    from daotai.qc.metrics import psnr

    comfy.progress.clear()
    images, depth, mask, video, fps = comfy.run(comfy.nodes["DaotaiPrevizRender"], script=script, shot_id="pan")
    assert tuple(images.shape) == (12, 180, 320, 3) and tuple(depth.shape) == (12, 180, 320, 3)
    assert tuple(mask.shape) == (12, 180, 320) and fps == 12.0
    assert comfy.progress[-1] == (12, 12)  # the progress bar (comfy.utils.ProgressBar) reached the end
    ours = np.rint(images.numpy() * 255).astype(np.uint8)
    decoded = list(decode_frames(cli_render / "shots" / "pan.mp4"))
    assert len(decoded) == 12
    assert min(psnr(a, b) for a, b in zip(ours, decoded, strict=True)) > 38.0  # within encode tolerance
    masks = list(decode_gray(cli_render / "control" / "pan_mask.mkv"))  # lossless
    assert np.array_equal(mask.numpy() > 0.5, np.stack(masks) > 0)
    components = video.get_components()
    assert float(components.frame_rate) == 12.0 and torch.equal(components.images, images)


def test_previz_node_shows_its_frames_under_the_node_as_they_are_drawn(comfy, script):
    import io

    from PIL import Image

    from daotai.qc.metrics import psnr

    comfy.previews.clear()
    images, *_ = comfy.run(comfy.nodes["DaotaiPrevizRender"], script=script, shot_id="push")
    assert comfy.previews, "no picture went with the progress bar"
    first = comfy.previews[0]
    assert first.size == (320, 180) and first.data[:2] == b"\xff\xd8"  # the frame's own size, as a JPEG
    drawn = np.rint(images[0].numpy() * 255).astype(np.uint8)
    assert psnr(np.asarray(Image.open(io.BytesIO(first.data))), drawn) > 30.0  # the first frame, as JPEG keeps it


def test_previz_node_stops_on_the_stop_button(comfy, script):
    comfy.mm.interrupt_current_processing(True)
    try:
        with pytest.raises(comfy.mm.InterruptProcessingException):
            comfy.run(comfy.nodes["DaotaiPrevizRender"], script=script)
    finally:
        comfy.mm.interrupt_current_processing(False)


# ------------------------------------------------------------------ Shot Prompt


def test_prompt_node_gives_the_planned_prompt(comfy, script):
    from daotai.plan.prompt import budget_for, fit_prompt

    prompt, negative = comfy.run(comfy.nodes["DaotaiShotPrompt"], script=script, shot_id="push", model="wan")
    shot = script.shot("push")
    assert prompt == fit_prompt(shot.prompt, budget_for("wan")) and negative == shot.negative_prompt


# ------------------------------------------------------------------ Camera Check


def test_check_node_passes_the_pan_and_flags_it_reversed(comfy, script):
    images, _, _, video, _ = comfy.run(comfy.nodes["DaotaiPrevizRender"], script=script, shot_id="pan")
    check = comfy.nodes["DaotaiCameraCheck"]
    passed, error, report, metrics = comfy.run(check, script=script, shot_id="pan", video=video)
    assert passed and 0.0 <= error < 1.0 and "follows the plan" in report
    passed, error, report, metrics = comfy.run(check, script=script, shot_id="pan", images=images.flip(0))
    assert not passed and error > 1.0
    assert "WRONG direction" in report
    horizontal = next(c for c in json.loads(metrics)["components"] if c["name"] == "horizontal")
    assert horizontal["direction_ok"] is False and horizontal["expected_total"] > 0 > horizontal["measured_total"]
    with pytest.raises(Exception, match="video: is not connected"):
        comfy.run(check, script=script)


# ------------------------------------------------------------------ Assemble Sequence


def test_assemble_node_sequence_equals_the_clis(comfy, script, cli_render, tmp_path):
    files = comfy.api.InputImpl
    node = comfy.nodes["DaotaiAssembleSequence"]
    sequence, path, timeline = comfy.run(
        node, script=script, folder=str(tmp_path / "a"),
        shot_1=files.VideoFromFile(str(cli_render / "shots" / "pan.mp4")),
        shot_2=files.VideoFromFile(str(cli_render / "shots" / "push.mp4")))
    assert Path(path).read_bytes() == (cli_render / "sequence.mp4").read_bytes()
    assert Path(timeline).name == "timeline.otio" and Path(timeline).is_file()
    assert sequence.get_stream_source() == path
    _, path, _ = comfy.run(node, script=script, folder=str(tmp_path / "b"), shots_folder=str(cli_render))
    assert Path(path).read_bytes() == (cli_render / "sequence.mp4").read_bytes()


def test_assemble_node_takes_frames_and_a_choice_of_shots(comfy, script, tmp_path):
    from daotai.encode.read import probe

    _, _, _, video, _ = comfy.run(comfy.nodes["DaotaiPrevizRender"], script=script, shot_id="push")
    _, path, _ = comfy.run(comfy.nodes["DaotaiAssembleSequence"], script=script, shot_ids="push",
                           folder=str(tmp_path), shot_1=video)
    assert probe(path).frames == 12
    with pytest.raises(Exception, match="has no video"):
        comfy.run(comfy.nodes["DaotaiAssembleSequence"], script=script, folder=str(tmp_path / "c"), shot_1=video)
