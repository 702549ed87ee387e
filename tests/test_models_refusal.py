"""The model loader refuses unsafe or broken folders with an actionable message (real files)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from daotai.errors import BackendError  # noqa: E402
from daotai.runtime.model_checks import (  # noqa: E402
    MANIFEST_NAME,
    check_manifest,
    check_model_folder,
    read_safetensors_header,
    write_folder_manifest,
)
from daotai.runtime.model_lookup import resolve_model  # noqa: E402


@pytest.fixture()
def model(tiny_wan, tmp_path) -> Path:
    """A fresh copy of the session's tiny Wan folder (conftest): tests here change its files."""
    return Path(shutil.copytree(tiny_wan, tmp_path / "wan"))


def transformer_file(folder: Path) -> Path:
    return next((folder / "transformer").glob("*.safetensors"))


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real command line in a subprocess."""
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_a_clean_folder_passes_every_check(model):
    index = check_model_folder(model, "wan")
    assert index["_class_name"] == "WanPipeline"


def test_truncated_safetensors_is_refused(model):
    path = transformer_file(model)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(BackendError, match="truncated") as info:
        check_model_folder(model, "wan")
    assert str(path) in str(info.value) and "pull the model again" in str(info.value)


def test_file_cut_inside_its_header_is_refused(model):
    path = transformer_file(model)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(BackendError, match="corrupt safetensors header"):
        check_model_folder(model, "wan")


def test_bit_flip_in_tensor_data_fails_the_manifest(model):
    write_folder_manifest(model)
    path = transformer_file(model)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01  # inside the tensor data: the header stays valid
    path.write_bytes(bytes(data))
    read_safetensors_header(path)  # structurally still fine ...
    with pytest.raises(BackendError, match="sha256 does not match"):  # ... the hash is not
        check_model_folder(model, "wan")


def test_verify_rehashes_even_when_size_and_mtime_are_unchanged(model):
    write_folder_manifest(model)
    path = transformer_file(model)
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x80
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert check_manifest(model, full=False) == 0  # the quick check trusts unchanged files
    with pytest.raises(BackendError, match="sha256 does not match"):
        check_manifest(model, full=True)


def test_pickle_weights_are_refused_without_being_unpickled(model, tmp_path):
    import pickle

    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    transformer_file(model).unlink()
    (model / "transformer" / "diffusion_pytorch_model.bin").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(BackendError, match="pickle weights are refused"):
        check_model_folder(model, "wan")
    assert not marker.exists()


def test_missing_component_is_named(model):
    shutil.rmtree(model / "vae")
    with pytest.raises(BackendError, match="component 'vae'.*missing"):
        check_model_folder(model, "wan")


def test_component_without_weights_is_refused(model):
    for path in (model / "vae").glob("*.safetensors"):
        path.unlink()
    with pytest.raises(BackendError, match="'vae'.*no .safetensors weights"):
        check_model_folder(model, "wan")


def test_components_that_would_need_remote_code_are_refused(model):
    index = json.loads((model / "model_index.json").read_text())
    index["transformer"] = ["my_package.models", "EvilTransformer"]
    (model / "model_index.json").write_text(json.dumps(index))
    with pytest.raises(BackendError, match="remote code"):
        check_model_folder(model, "wan")


def test_gguf_files_get_a_what_to_do_message(model):
    (model / "transformer" / "wan-q4.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(BackendError, match="GGUF.*diffusers \\(safetensors\\) release"):
        check_model_folder(model, "wan")


def _write_safetensors(path: Path, header: dict, payload: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + payload)


def test_packed_fp4_tensors_are_refused(model):
    path = transformer_file(model)
    path.unlink()
    _write_safetensors(model / "transformer" / "diffusion_pytorch_model.safetensors",
                       {"w": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}}, b"\0\0")
    with pytest.raises(BackendError, match="dtype 'F4'"):
        check_model_folder(model, "wan")


def test_overlapping_offsets_are_refused(tmp_path):
    path = tmp_path / "x.safetensors"
    _write_safetensors(path, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12)
    with pytest.raises(BackendError, match="overlapping or gapped"):
        read_safetensors_header(path)


def test_a_folder_of_another_family_is_refused(model):
    with pytest.raises(BackendError, match="WanPipeline model; the 'ltx' backend needs"):
        check_model_folder(model, "ltx")


def test_not_downloaded_registry_model_names_the_pull_command(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackendError, match="run: daotai models pull wan2.1-t2v-1.3b"):
        resolve_model("wan2.1-t2v-1.3b")


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(BackendError, match="wan2.1-t2v-1.3b"):
        resolve_model("sora-9")


def test_cli_verify_record_then_detect_corruption(model):
    ok = cli("models", "verify", str(model), "--record")
    assert ok.returncode == 0, ok.stderr
    assert (model / MANIFEST_NAME).is_file()
    assert cli("models", "verify", str(model)).returncode == 0
    path = transformer_file(model)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    path.write_bytes(bytes(data))
    bad = cli("models", "verify", str(model))
    assert bad.returncode == BackendError.exit_code
    assert "sha256 does not match" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_offline_pull_and_render_fail_with_one_line(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    pulled = cli("models", "pull", "wan2.1-t2v-1.3b", env=env)
    assert pulled.returncode == BackendError.exit_code
    assert "could not download" in pulled.stderr and "Traceback" not in pulled.stderr
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"size": [64, 64], "shots": [{"shot_id": "a", "duration": 0.5}]}))
    rendered = cli("render", str(script), "--backend", "wan", "--device", "cpu", "-o", str(tmp_path / "out"), env=env)
    assert rendered.returncode == BackendError.exit_code
    assert "daotai models pull wan2.1-t2v-1.3b" in rendered.stderr and "Traceback" not in rendered.stderr
