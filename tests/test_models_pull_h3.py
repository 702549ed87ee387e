"""`daotai models pull minimax-h3 --workflow W --accept-licence`: one workflow's components, licence gated.

A fake hub (test_models_disk.FakeHub, here honouring allow patterns as huggingface_hub does) serves a
MiniMax-H3-shaped repository; nothing is downloaded from the network.
"""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest
from typer.testing import CliRunner

from daotai.errors import OptionError
from daotai.runtime import licences, model_downloads, model_lookup, model_space
from test_models_disk import FakeHub, safetensors_bytes

H3 = "minimax-h3"
COMMIT = "c" * 40


def h3_files() -> dict[str, bytes]:
    classes = {"transformer": ("diffusers", "MiniMaxH3Transformer3DModel"),
               "transformer_ref": ("diffusers", "MiniMaxH3Transformer3DModel"),
               "text_encoder": ("transformers", "Qwen3VLForConditionalGeneration"),
               "vae": ("diffusers", "AutoencoderKLMiniMaxH3"), "audio_vae": ("diffusers", "AutoencoderKLMiniMaxH3Audio"),
               "tokenizer": ("transformers", "Qwen2TokenizerFast"), "processor": ("transformers", "Qwen3VLProcessor"),
               "scheduler": ("diffusers", "MiniMaxH3Scheduler"), "audio_scheduler": ("diffusers", "MiniMaxH3Scheduler")}
    index = {"_blocks_class_name": "MiniMaxH3Blocks", "_class_name": "MiniMaxH3ModularPipeline",
             "_diffusers_version": "0.42.1",
             **{name: [library, cls, {"pretrained_model_name_or_path": "MiniMaxAI/MiniMax-H3", "subfolder": name,
                                      "revision": None, "variant": None, "type_hint": [library, cls]}]
                for name, (library, cls) in classes.items()}}
    files = {"modular_model_index.json": json.dumps(index).encode(), "LICENSE": b"MiniMax H3 Community License"}
    for component in ("transformer", "transformer_ref", "text_encoder", "vae", "audio_vae"):
        files[f"{component}/config.json"] = json.dumps({"component": component}).encode()
        files[f"{component}/diffusion_pytorch_model.safetensors"] = safetensors_bytes(4)
    for component in ("tokenizer", "processor", "scheduler", "audio_scheduler"):
        files[f"{component}/config.json"] = json.dumps({"component": component}).encode()
    return files


class SelectiveHub(FakeHub):
    """FakeHub that downloads only the files the allow patterns name (as snapshot_download does)."""

    def snapshot_download(self, repo_id, revision=None, allow_patterns=None, ignore_patterns=None, cache_dir=None,
                          **kwargs):
        every = self.commits[revision]
        self.commits[revision] = {n: d for n, d in every.items()
                                  if allow_patterns is None or any(fnmatch(n, p) for p in allow_patterns)}
        try:
            return super().snapshot_download(repo_id, revision, allow_patterns, ignore_patterns, cache_dir, **kwargs)
        finally:
            self.commits[revision] = every


@pytest.fixture()
def hub(tmp_path, monkeypatch) -> SelectiveHub:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 10**13)
    fake = SelectiveHub(tmp_path / "hub", {COMMIT: h3_files()}, COMMIT)
    monkeypatch.setattr(model_downloads, "hub_library", lambda: fake)
    return fake


def test_the_cli_refuses_until_the_licence_is_accepted_then_pulls_one_workflow(hub):
    from daotai import cli

    refused = CliRunner().invoke(cli.app, ["models", "pull", H3, "--workflow", "t2va"])
    assert isinstance(refused.exception, OptionError) and "--accept-licence" in str(refused.exception)
    assert hub.downloads == []  # refused before anything was fetched

    result = CliRunner().invoke(cli.app, ["models", "pull", H3, "--workflow", "t2va", "--accept-licence"])
    assert result.exit_code == 0, result.output
    folder = Path(result.output.split("→")[-1].strip().replace("\n", ""))
    assert (folder / "transformer" / "diffusion_pytorch_model.safetensors").is_file()
    assert not (folder / "transformer_ref").exists()  # ref2va's partition was not pulled
    assert (folder / "text_encoder" / "config.json").is_file() and (folder / "LICENSE").is_file()
    assert model_lookup.pulled_record(model_lookup.spec_for(H3))["workflow"] == "t2va"


def test_an_unknown_workflow_is_refused_with_the_choices(hub):
    from daotai import cli

    result = CliRunner().invoke(cli.app, ["models", "pull", H3, "--workflow", "i2v", "--accept-licence"])
    assert result.exit_code != 0 and hub.downloads == []
    assert "t2va" in str(result.exception) and "ref2va" in str(result.exception)


def test_the_command_a_render_names_for_a_missing_model_is_the_one_that_pulls_it(hub):
    """`render --backend h3` without the weights names `models pull minimax-h3 --accept-licence`; run as
    given, that command pulls the model and records the licence, and the render's check then passes."""
    import shlex

    from daotai import cli
    from daotai.errors import BackendError
    from daotai.run.settings import PipelineSettings, require_models

    settings = PipelineSettings(backend="h3")
    with pytest.raises(BackendError) as missing:
        require_models(settings)
    command = str(missing.value).split("with: ")[1].split(" (")[0]
    assert command == f"daotai models pull {H3} --accept-licence"
    assert "MiniMax H3 Community License" in str(missing.value)  # what --accept-licence accepts is shown
    words = shlex.split(command)
    result = CliRunner().invoke(cli.app, words[1:])
    assert result.exit_code == 0, result.output
    require_models(settings)  # downloaded now: nothing to refuse
    assert licences.licence_acceptance(model_lookup.spec_for(H3)) is not None
    assert model_lookup.pull_command(model_lookup.spec_for(H3)) == f"daotai models pull {H3}"  # accepted once, not asked again
