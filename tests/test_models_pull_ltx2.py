"""`daotai models pull ltx-2 --accept-licence`: the diffusers folders of Lightricks/LTX-2, not the single-file
checkpoints kept beside them, after the licence is accepted.

A fake hub (test_models_pull_h3.SelectiveHub, honouring allow patterns as huggingface_hub does) serves an
LTX-2-shaped repository; nothing is downloaded from the network.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from daotai.errors import BackendError, OptionError
from daotai.runtime import model_checks, model_downloads, model_lookup, model_space
from test_models_disk import safetensors_bytes
from test_models_pull_h3 import SelectiveHub

LTX2 = "ltx-2"
COMMIT = "d" * 40
CHECKPOINT = "ltx-2-19b-dev.safetensors"  # a single-file checkpoint at the top of the repository


def ltx2_files(connectors_library: str = "ltx2") -> dict[str, bytes]:
    classes = {"transformer": ("diffusers", "LTX2VideoTransformer3DModel"),
               "text_encoder": ("transformers", "Gemma3ForConditionalGeneration"),
               "vae": ("diffusers", "AutoencoderKLLTX2Video"), "audio_vae": ("diffusers", "AutoencoderKLLTX2Audio"),
               "connectors": (connectors_library, "LTX2TextConnectors"), "vocoder": ("ltx2", "LTX2Vocoder"),
               "tokenizer": ("transformers", "GemmaTokenizerFast"),
               "scheduler": ("diffusers", "FlowMatchEulerDiscreteScheduler")}
    index = {"_class_name": "LTX2Pipeline", "_diffusers_version": "0.42.1", "processor": [None, None],
             **{name: list(pair) for name, pair in classes.items()}}
    files = {"model_index.json": json.dumps(index).encode(), "LICENSE": b"LTX-2 Community License Agreement",
             CHECKPOINT: safetensors_bytes(8)}
    for component in ("transformer", "text_encoder", "vae", "audio_vae", "connectors", "vocoder"):
        files[f"{component}/config.json"] = json.dumps({"component": component}).encode()
        files[f"{component}/diffusion_pytorch_model.safetensors"] = safetensors_bytes(4)
    for component in ("tokenizer", "scheduler"):
        files[f"{component}/config.json"] = json.dumps({"component": component}).encode()
    return files


@pytest.fixture()
def hub(tmp_path, monkeypatch) -> SelectiveHub:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 10**13)
    fake = SelectiveHub(tmp_path / "hub", {COMMIT: ltx2_files()}, COMMIT)
    monkeypatch.setattr(model_downloads, "hub_library", lambda: fake)
    return fake


def test_the_pull_waits_for_the_licence_then_fetches_the_folders_not_the_single_files(hub):
    from daotai import cli

    refused = CliRunner().invoke(cli.app, ["models", "pull", LTX2])
    assert isinstance(refused.exception, OptionError) and "--accept-licence" in str(refused.exception)
    assert "LTX-2 Community License Agreement" in str(refused.exception) and hub.downloads == []

    result = CliRunner().invoke(cli.app, ["models", "pull", LTX2, "--accept-licence"])
    assert result.exit_code == 0, result.output
    folder = model_lookup.cached_path(model_lookup.spec_for(LTX2))
    assert folder is not None and (folder / "model_index.json").is_file() and (folder / "LICENSE").is_file()
    assert (folder / "connectors" / "diffusion_pytorch_model.safetensors").is_file()
    assert (folder / "vocoder" / "config.json").is_file() and (folder / "tokenizer" / "config.json").is_file()
    assert not (folder / CHECKPOINT).exists()  # tens of GB the folder loader never reads
    assert CHECKPOINT not in model_checks.read_manifest(folder)["files"]


def test_the_download_size_leaves_the_single_files_out(hub):
    spec = model_lookup.spec_for(LTX2)
    snapshot = model_downloads.hub_snapshot(spec)
    folders = sum(size for name, size in snapshot.sizes.items() if "/" in name)
    allow = [model_checks.INDEX_NAME, model_checks.MODULAR_INDEX_NAME, "README.md", "LICENSE*", "LICENCE*", "*/*"]
    tops = sum(len(data) for name, data in ltx2_files().items() if name in (model_checks.INDEX_NAME, "LICENSE"))
    assert model_downloads.download_bytes(spec, snapshot, allow, []) == folders + tops


def test_only_diffusers_own_pipeline_packages_pass_as_component_libraries(tmp_path):
    for name, data in ltx2_files().items():
        (tmp_path / "good" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "good" / name).write_bytes(data)
    assert model_checks.check_model_folder(tmp_path / "good", "ltx2")["connectors"] == ["ltx2", "LTX2TextConnectors"]
    for library in ("evil_pkg", "wan", "os.path"):  # not a package, one without the class, not a name
        bad = tmp_path / library
        for name, data in ltx2_files(library).items():
            (bad / name).parent.mkdir(parents=True, exist_ok=True)
            (bad / name).write_bytes(data)
        with pytest.raises(BackendError, match=f"component 'connectors' comes from '{library}'"):
            model_checks.check_model_folder(bad, "ltx2")
