"""Models do not fill the disk by surprise: pulls, updates and conversions check free space
before writing anything and say how much is missing; `models list` shows each pulled model's
size on disk and upstream commit; `models update` fetches a newer commit only when asked.

The hub is a fake (tests never touch the network): ``model_info`` answers with file sizes,
sha256 and a commit; ``snapshot_download`` writes the files into the cache's own layout and
records each call. The nearly full filesystem is a real 4 MiB tmpfs when the tests run as root
and the mount works, and an injected free-space probe otherwise (both cases run when they can).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from daotai import catalog
from daotai.errors import BackendError
from daotai.runtime import model_checks, model_downloads, model_lookup, model_space

NAME = "wan2.1-t2v-1.3b"
GIB = 1 << 30


def safetensors_bytes(values: int = 4) -> bytes:
    """A valid little safetensors file: one F32 tensor of ``values`` values."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [values], "data_offsets": [0, 4 * values]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * (4 * values)


def model_files(variant: int = 0) -> dict[str, bytes]:
    """A diffusers folder that passes every safety check (a scheduler and a tiny transformer)."""
    index = {"_class_name": "WanPipeline", "_diffusers_version": "0.35.0",
             "scheduler": ["diffusers", "UniPCMultistepScheduler"],
             "transformer": ["diffusers", "WanTransformer3DModel"]}
    return {
        "model_index.json": json.dumps(index).encode(),
        "scheduler/scheduler_config.json": b'{"_class_name": "UniPCMultistepScheduler"}',
        "transformer/config.json": json.dumps({"_class_name": "WanTransformer3DModel", "v": variant}).encode(),
        "transformer/diffusion_pytorch_model.safetensors": safetensors_bytes(4 + variant),
    }


class FakeHub:
    """The parts of huggingface_hub that daotai.runtime.model_downloads uses, over the cache's real layout."""

    def __init__(self, cache: Path, commits: dict[str, dict[str, bytes]], head: str,
                 claimed_sizes: dict[str, int] | None = None):
        self.cache, self.commits, self.head = cache, commits, head
        self.claimed_sizes = claimed_sizes or {}  # sizes the metadata claims (bigger than the bytes here)
        self.corrupt: set[str] = set()  # files written wrong (a download the sha256 check must catch)
        self.downloads: list[str] = []
        self.constants = SimpleNamespace(HF_HUB_CACHE=str(cache))

    def HfApi(self):  # noqa: N802  (the hub's own name)
        hub = self

        class Api:
            def model_info(self, repo_id, revision=None, files_metadata=False):
                commit = hub.head if revision in (None, "main") else revision
                siblings = [
                    SimpleNamespace(rfilename=name, size=hub.claimed_sizes.get(name, len(data)), blob_id=None,
                                    lfs=SimpleNamespace(sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
                    for name, data in hub.commits[commit].items()
                ]
                return SimpleNamespace(sha=commit, siblings=siblings)

        return Api()

    def snapshot_download(self, repo_id, revision=None, allow_patterns=None, ignore_patterns=None, cache_dir=None,
                          **kwargs):
        self.downloads.append(revision)
        storage = Path(cache_dir or self.cache) / ("models--" + repo_id.replace("/", "--"))
        folder = storage / "snapshots" / revision
        for name, data in self.commits[revision].items():
            blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data[:-1] + b"\1" if name in self.corrupt else data)
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            target.symlink_to(os.path.relpath(blob, target.parent))
        return str(folder)

    def scan_cache_dir(self, cache_dir=None):
        hub = self

        class Strategy:
            def __init__(self, commits):
                self.commits = commits
                self.expected_freed_size = sum(model_space.folder_bytes(hub._snapshot(c)) for c in commits)

            def execute(self):
                import shutil

                for commit in self.commits:
                    shutil.rmtree(hub._snapshot(commit))

        revisions = [SimpleNamespace(commit_hash=c) for c in self.commits if self._snapshot(c).is_dir()]
        repo = SimpleNamespace(repo_id=catalog.model_row(NAME).repo_id, revisions=revisions)
        return SimpleNamespace(repos=[repo], delete_revisions=lambda *commits: Strategy(list(commits)))

    def _snapshot(self, commit: str) -> Path:
        return self.cache / ("models--" + catalog.model_row(NAME).repo_id.replace("/", "--")) / "snapshots" / commit


A, B = "a" * 40, "b" * 40


@pytest.fixture()
def env(tmp_path, monkeypatch):
    """An empty hub cache and config folder of the test's own."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


def use(monkeypatch, hub: FakeHub) -> FakeHub:
    monkeypatch.setattr(model_downloads, "hub_library", lambda: hub)
    return hub


def plenty(monkeypatch) -> None:
    """Free space that is never the limit (the success paths do not depend on this machine's disk)."""
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 10**13)


# ------------------------------------------------------------------ the nearly full filesystem


@pytest.fixture()
def small_tmpfs(tmp_path):
    """A 4 MiB tmpfs (root only); skipped where it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the injected probe case covers this machine")
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"tmpfs does not mount here ({mounted.stderr.decode().strip()}); the injected probe case runs")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def _pull_into_full_disk(cache: Path, monkeypatch) -> tuple[BackendError, FakeHub, int]:
    monkeypatch.setenv("HF_HUB_CACHE", str(cache / "hub"))
    big = "transformer/diffusion_pytorch_model.safetensors"
    hub = use(monkeypatch, FakeHub(cache / "hub", {A: model_files()}, A, claimed_sizes={big: 50_000_000}))
    with pytest.raises(BackendError) as info:
        model_downloads.pull(NAME)
    needed = 50_000_000 + sum(len(v) for k, v in model_files().items() if k != big)
    return info.value, hub, needed


def test_a_pull_into_a_nearly_full_tmpfs_fails_before_downloading(small_tmpfs, env, monkeypatch):
    free = model_space.free_bytes(small_tmpfs / "hub")
    assert free <= 4 * 1024 * 1024
    error, hub, needed = _pull_into_full_disk(small_tmpfs, monkeypatch)
    shortfall = needed + model_space.space_margin(needed) - free
    message = str(error)
    assert message.startswith(f"models pull {NAME}: needs ") and f"{model_space._gb(shortfall)} missing" in message
    assert str(small_tmpfs / "hub") in message
    assert hub.downloads == [] and not (small_tmpfs / "hub").exists()  # nothing written
    assert model_lookup.pulled_record(catalog.model_row(NAME)) is None


def test_a_pull_with_too_little_space_fails_before_downloading_injected_probe(env, monkeypatch):
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 300 * 1024 * 1024)
    error, hub, needed = _pull_into_full_disk(env, monkeypatch)
    shortfall = needed + model_space.space_margin(needed) - 300 * 1024 * 1024
    assert f"{model_space._gb(shortfall)} missing" in str(error) and hub.downloads == []


def test_the_cli_says_the_shortfall_in_one_line(env, monkeypatch):
    from daotai import cli

    monkeypatch.setattr(model_space, "free_bytes", lambda path: 10 * 1024 * 1024)
    _, hub, _ = (None, use(monkeypatch, FakeHub(env / "hub", {A: model_files()}, A)), None)
    result = CliRunner().invoke(cli.app, ["models", "pull", NAME])
    assert isinstance(result.exception, BackendError) and "missing" in str(result.exception)
    assert hub.downloads == []


def test_space_needed_counts_only_what_the_cache_lacks(env, monkeypatch):
    spec = catalog.model_row(NAME)
    files = model_files()
    snapshot = model_downloads.HubSnapshot(A, {k: hashlib.sha256(v).hexdigest() for k, v in files.items()},
                                  {k: len(v) for k, v in files.items()},
                                  {k: hashlib.sha256(v).hexdigest() for k, v in files.items()})
    total = sum(len(v) for v in files.values())
    assert model_downloads.download_bytes(spec, snapshot, None, []) == total
    blobs = model_lookup.hub_cache_dir() / ("models--" + spec.repo_id.replace("/", "--")) / "blobs"
    blobs.mkdir(parents=True)
    done = "model_index.json"
    (blobs / snapshot.blobs[done]).write_bytes(files[done])  # already downloaded: costs nothing
    half = "transformer/diffusion_pytorch_model.safetensors"
    (blobs / f"{snapshot.blobs[half]}.incomplete").write_bytes(files[half][:10])  # resumes: costs the rest
    assert model_downloads.download_bytes(spec, snapshot, None, []) == total - len(files[done]) - 10
    assert model_downloads.download_bytes(spec, snapshot, ["scheduler/*"], []) == len(files["scheduler/scheduler_config.json"])
    assert model_downloads.download_bytes(spec, snapshot, None, ["*.safetensors", "*.json"]) == 0
    # no sizes from the hub: the catalog's size stands in
    assert model_downloads.download_bytes(spec, model_downloads.HubSnapshot(A), None, []) == int(spec.size_gb * 1e9)


def test_the_margin_is_a_share_with_a_floor():
    assert model_space.space_margin(1000) == model_space.SPACE_MARGIN_MIN_BYTES == GIB
    assert model_space.space_margin(100 * 10**9) == 5 * 10**9


# ------------------------------------------------------------------ list, update


def test_a_pull_records_its_commit_and_list_shows_size_and_commit(env, monkeypatch):
    from daotai import cli

    plenty(monkeypatch)
    hub = use(monkeypatch, FakeHub(env / "hub", {A: model_files()}, A))
    folder = model_downloads.pull(NAME)
    assert hub.downloads == [A] and folder.name == A
    spec = catalog.model_row(NAME)
    assert model_lookup.cached_path(spec) == folder  # found by the recorded commit (the hub wrote no refs/main)
    pulled = model_lookup.pulled_model(spec)
    assert pulled.commit == A and pulled.bytes == model_space.folder_bytes(folder)  # the files and their manifest
    assert pulled.bytes > sum(len(v) for v in model_files().values())
    result = CliRunner().invoke(cli.app, ["models", "list"])
    line = next(line for line in result.stdout.splitlines() if line.startswith(NAME))
    assert f"GB on disk, commit {A[:12]}" in line and "downloaded" in line
    others = [line for line in result.stdout.splitlines() if line and not line.startswith(NAME)]
    assert others and all("not downloaded" in line for line in others)


def test_update_fetches_a_newer_commit_only_when_asked(env, monkeypatch):
    plenty(monkeypatch)
    hub = use(monkeypatch, FakeHub(env / "hub", {A: model_files(0), B: model_files(1)}, A))
    spec = catalog.model_row(NAME)
    model_downloads.pull(NAME)
    hub.head = B  # upstream moves on
    assert model_lookup.cached_path(spec).name == A  # nothing changes until asked
    assert model_lookup.pulled_model(spec).commit == A and hub.downloads == [A]
    result = model_downloads.update(NAME)
    assert (result.before, result.after) == (A, B) and hub.downloads == [A, B]
    assert model_lookup.cached_path(spec).name == B
    record = model_lookup.pulled_record(spec)
    assert record["commit"] == B and record["previous"] == A and record["how"] == "update"
    assert model_checks.read_manifest(result.path)["source"]["commit"] == B  # verified and recorded
    again = model_downloads.update(NAME)
    assert again.before == again.after == B and hub.downloads == [A, B]  # up to date: nothing fetched


def test_an_update_that_fails_verification_keeps_the_previous_commit(env, monkeypatch):
    plenty(monkeypatch)
    hub = use(monkeypatch, FakeHub(env / "hub", {A: model_files(0), B: model_files(1)}, A))
    spec = catalog.model_row(NAME)
    model_downloads.pull(NAME)
    hub.head = B
    hub.corrupt.add("transformer/diffusion_pytorch_model.safetensors")
    with pytest.raises(BackendError, match="does not match the hub's"):
        model_downloads.update(NAME)
    assert model_lookup.pulled_record(spec)["commit"] == A and model_lookup.cached_path(spec).name == A


def test_update_prune_frees_the_previous_snapshot(env, monkeypatch):
    from daotai import cli

    plenty(monkeypatch)
    hub = use(monkeypatch, FakeHub(env / "hub", {A: model_files(0), B: model_files(1)}, A))
    model_downloads.pull(NAME)
    hub.head = B
    result = CliRunner().invoke(cli.app, ["models", "update", NAME, "--prune"])
    assert result.exit_code == 0, result.output
    assert f"commit {A[:12]} → {B[:12]}" in result.stdout and "freed" in result.stdout
    assert not hub._snapshot(A).exists() and hub._snapshot(B).is_dir()


def test_update_checks_space_before_downloading(env, monkeypatch):
    plenty(monkeypatch)
    hub = use(monkeypatch, FakeHub(env / "hub", {A: model_files(0), B: model_files(1)}, A))
    model_downloads.pull(NAME)
    hub.head = B
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 1024)
    with pytest.raises(BackendError, match=f"models update {NAME}: needs .* missing"):
        model_downloads.update(NAME)
    assert hub.downloads == [A]


def test_update_refuses_what_it_cannot_do(env, monkeypatch):
    use(monkeypatch, FakeHub(env / "hub", {A: model_files()}, A))
    with pytest.raises(BackendError, match=f"not downloaded; run: daotai models pull {NAME}"):
        model_downloads.update(NAME)
    pinned = catalog.model_row(NAME).__class__(**{**catalog.model_row(NAME).__dict__, "revision": A})
    monkeypatch.setattr(model_downloads, "spec_for", lambda name: pinned)
    with pytest.raises(BackendError, match=f"pins it to commit {A[:12]}"):
        model_downloads.update(NAME)


# ------------------------------------------------------------------ convert


def test_convert_space_is_estimated_and_checked_first(tmp_path, monkeypatch):
    source = tmp_path / "wan"
    (source / "transformer").mkdir(parents=True)
    header = json.dumps({"blocks.0.w": {"dtype": "BF16", "shape": [128, 256], "data_offsets": [0, 65536]},
                         "norm.w": {"dtype": "F32", "shape": [256], "data_offsets": [65536, 66560]}}).encode()
    (source / "transformer" / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + b"\0" * 66560)
    (source / "vae").mkdir()
    (source / "vae" / "w.safetensors").write_bytes(b"\0" * 1000)
    estimate = model_space.convert_bytes(source, 4, 64, ["vae", "model_index.json"])
    assert estimate == int(128 * 256 * (4 + 32 / 64) / 8) + 1024 + 1000
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 5000)
    with pytest.raises(BackendError, match="models convert wan: needs .* missing"):
        model_space.check_free_space(tmp_path / "out", estimate, "models convert wan")


def test_the_convert_command_refuses_before_converting(tmp_path, monkeypatch):
    pytest.importorskip("mlx.core")
    from daotai import cli
    from daotai.mlx import convert as mlx_convert

    source = tmp_path / "wan"
    (source / "transformer").mkdir(parents=True)
    (source / "transformer" / "model.safetensors").write_bytes(safetensors_bytes(64))
    monkeypatch.setattr(model_space, "free_bytes", lambda path: 1024)
    monkeypatch.setattr(mlx_convert, "convert", lambda *a, **k: pytest.fail("converted without the space"))
    result = CliRunner().invoke(cli.app, ["models", "convert", str(source), "-o", str(tmp_path / "out")])
    assert isinstance(result.exception, BackendError) and "missing" in str(result.exception)
    assert not (tmp_path / "out").exists()


def test_the_default_hub_cache_folder_is_found_without_hf_environment(monkeypatch):
    """With neither HF_HUB_CACHE nor HF_HOME set, the hub's own default is used (models list, /v1/models)."""
    from daotai.runtime.model_lookup import hub_cache_dir

    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    assert hub_cache_dir().name == "hub"
