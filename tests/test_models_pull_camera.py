"""`daotai models pull` for the Control-Camera checkpoints, which are not diffusers folders (no
model_index.json): only the transformer's safetensors and config are fetched, hashed against the hub.

A fake hub (test_models_disk.FakeHub, honouring allow and ignore patterns as huggingface_hub does)
serves a repository laid out as VideoX-Fun publishes them; nothing is downloaded from the network.
"""

from __future__ import annotations

import hashlib
import json
from fnmatch import fnmatch

import pytest
from typer.testing import CliRunner

from daotai.errors import BackendError
from daotai.runtime import model_checks, model_downloads, model_lookup, model_space
from test_models_disk import FakeHub, safetensors_bytes

NAME = "wan2.1-fun-1.3b-control-camera"
COMMIT = "d" * 40


def fun_files() -> dict[str, bytes]:
    """A Control-Camera repository: the transformer as safetensors, the rest as pickles and tokenizers."""
    return {
        "diffusion_pytorch_model.safetensors": safetensors_bytes(8),
        "config.json": json.dumps({"_class_name": "WanTransformer3DModel", "in_dim": 36}).encode(),
        "Wan2.1_VAE.pth": b"pickle",
        "models_t5_umt5-xxl-enc-bf16.pth": b"pickle",
        "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth": b"pickle",
        "google/umt5-xxl/spiece.model": b"tokenizer",
        "xlm-roberta-large/tokenizer.json": b"{}",
        "README.md": b"# Wan2.1-Fun-V1.1-1.3B-Control-Camera",
    }


class PatternHub(FakeHub):
    """FakeHub that writes only the files the allow patterns name and the ignore patterns spare."""

    def snapshot_download(self, repo_id, revision=None, allow_patterns=None, ignore_patterns=None, cache_dir=None,
                          **kwargs):
        every = self.commits[revision]
        self.commits[revision] = {n: d for n, d in every.items()
                                  if (allow_patterns is None or any(fnmatch(n, p) for p in allow_patterns))
                                  and not any(fnmatch(n, p) for p in ignore_patterns or ())}
        try:
            return super().snapshot_download(repo_id, revision, allow_patterns, ignore_patterns, cache_dir, **kwargs)
        finally:
            self.commits[revision] = every


@pytest.fixture()
def hub(tmp_path, monkeypatch) -> PatternHub:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 10**13)
    fake = PatternHub(tmp_path / "hub", {COMMIT: fun_files()}, COMMIT)
    monkeypatch.setattr(model_downloads, "hub_library", lambda: fake)
    return fake


def test_pull_fetches_only_the_transformer_and_its_config_hashed(hub):
    from daotai import cli

    result = CliRunner().invoke(cli.app, ["models", "pull", NAME])
    assert result.exit_code == 0, result.output
    folder = model_lookup.cached_path(model_lookup.spec_for(NAME))
    assert folder is not None
    got = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert got == sorted(["README.md", "config.json", "diffusion_pytorch_model.safetensors", model_checks.MANIFEST_NAME])
    manifest = model_checks.read_manifest(folder)
    weights = fun_files()["diffusion_pytorch_model.safetensors"]
    assert manifest["files"]["diffusion_pytorch_model.safetensors"]["sha256"] == hashlib.sha256(weights).hexdigest()
    assert manifest["source"] == {"kind": "hub", "repo_id": model_lookup.spec_for(NAME).repo_id, "commit": COMMIT}
    assert model_lookup.checkpoint_folder(NAME) == folder  # what -O checkpoint=<name> reads


def test_the_backend_finds_the_pulled_checkpoint_by_name(hub):
    from daotai.render.wan_camera import checkpoint_files

    with pytest.raises(BackendError, match=f"models pull {NAME}"):
        checkpoint_files(NAME)
    folder = model_downloads.pull(NAME)
    assert checkpoint_files(NAME) == [folder / "diffusion_pytorch_model.safetensors"]


def test_a_corrupt_download_is_refused(hub):
    hub.corrupt.add("diffusion_pytorch_model.safetensors")
    with pytest.raises(BackendError, match="does not match the hub"):
        model_downloads.pull(NAME)


def test_a_repository_without_safetensors_is_refused(hub):
    hub.commits[COMMIT] = {k: v for k, v in fun_files().items() if not k.endswith(".safetensors")}
    with pytest.raises(BackendError, match="no .safetensors"):
        model_downloads.pull(NAME)
