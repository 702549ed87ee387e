"""Reference-image uploads against live loopback servers: store, dedupe, hostile files, scripts naming them."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from builders import png_bytes, png_claiming  # noqa: E402
from daotai.server.app import create_app  # noqa: E402
from daotai.server.store import JobStore  # noqa: E402
from daotai.server.testing import ServerProcess, thread_server  # noqa: E402

SCRIPT = {
    "size": "160x96",
    "fps": 24,
    "characters": [{"id": "hero", "appearance": "red coat"}, {"id": "friend", "appearance": "green hat"}],
    "shots": [{"shot_id": "a", "duration": 1, "subject": "hero", "camera": {"type": "dolly", "motion": [0, 0, -0.3]}}],
}
REFERENCE_RGB = (30, 160, 90)


def image_bytes(fmt: str, size: tuple[int, int] = (12, 20), rgb: tuple[int, int, int] = REFERENCE_RGB) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, rgb).save(buffer, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    return buffer.getvalue()


def upload(url: str, data: bytes, name: str = "ref.png", kind: str = "image/png", **kw) -> httpx.Response:
    return httpx.post(f"{url}/v1/uploads", files={"file": (name, data, kind)}, timeout=30, **kw)


def with_refs(*refs_per_character: list[str]) -> dict:
    script = json.loads(json.dumps(SCRIPT))
    for character, refs in zip(script["characters"], refs_per_character, strict=False):
        if refs:
            character["reference_images"] = refs
    return script


@pytest.fixture()
def idle(tmp_path):
    """A live server in a thread whose dispatcher is off: jobs stay queued."""
    app = create_app(tmp_path / "data", start_dispatcher=False)
    with thread_server(app) as url:
        yield url, app.state.store


# ------------------------------------------------------------------ the upload endpoint


def test_upload_is_content_addressed_and_served_back_byte_for_byte(idle):
    from PIL import Image

    url, store = idle
    png = image_bytes("PNG")
    first = upload(url, png)
    assert first.status_code == 201, first.text
    body = first.json()
    sha = hashlib.sha256(png).hexdigest()
    assert body == {"id": "img_" + sha[:32], "object": "daotai.upload", "sha256": sha, "width": 12, "height": 20,
                    "content_type": "image/png", "bytes": len(png), "created_at": body["created_at"],
                    "reference": f"upload:img_{sha[:32]}", "url": f"/v1/uploads/img_{sha[:32]}/content"}
    # The same bytes again, under another name and a wrong declared type: the same upload.
    again = upload(url, png, name="other.jpg", kind="image/jpeg")
    assert again.status_code == 200 and again.json() == body
    served = httpx.get(url + body["url"])
    assert served.status_code == 200 and served.content == png
    assert served.headers["content-type"] == "image/png" and served.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{url}/v1/uploads/{body['id']}").json() == body
    assert sorted(p.name for p in (store.data_dir / "uploads").iterdir()) == [f"{sha}.png"]
    # The type is read from the bytes: JPEG and WebP are kept as they are.
    for fmt, kind in (("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
        data = image_bytes(fmt, size=(33, 17))
        reply = upload(url, data, name="x.png", kind="image/png")
        assert reply.status_code == 201, (fmt, reply.text)
        assert (reply.json()["content_type"], reply.json()["width"], reply.json()["height"]) == (kind, 33, 17)
        content = httpx.get(url + reply.json()["url"])
        assert content.content == data and content.headers["content-type"] == kind
    # Phone cameras write MPO (a JPEG with more pictures after it): still a JPEG to the client.
    buffer = io.BytesIO()
    Image.new("RGB", (20, 10)).save(buffer, format="MPO", save_all=True, append_images=[Image.new("RGB", (20, 10))])
    phone = upload(url, buffer.getvalue(), name="IMG_0001.JPG", kind="image/jpeg")
    assert phone.status_code == 201 and phone.json()["content_type"] == "image/jpeg", phone.text
    assert list((store.data_dir / "staging").iterdir()) == []


def test_hostile_uploads_are_4xx_with_clear_json_and_nothing_is_kept(idle, tmp_path):
    url, store = idle
    good = png_bytes(16, 16)
    cases = {
        "zero": (b"", 400, "empty_file"),
        "truncated": (good[: len(good) // 2], 400, "invalid_image"),
        "bomb": (png_claiming(60000, 60000), 413, "image_too_large"),
        "just_over_the_pixel_cap": (png_claiming(8000, 5001), 413, "image_too_large"),
        "gif": (b"GIF89a" + b"\0" * 100, 400, "unsupported_image_type"),
        "script": (b"#!/bin/sh\nrm -rf /\n", 400, "unsupported_image_type"),
        "webp_lie": (b"RIFF\0\0\0\0AVI " + b"\0" * 64, 400, "unsupported_image_type"),
        "png_magic_then_garbage": (b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 50, 400, "invalid_image"),
        "over_the_byte_cap": (b"\x89PNG\r\n\x1a\n" + b"\0" * (11 << 20), 413, "file_too_large"),
    }
    for name, (data, status, code) in cases.items():
        reply = upload(url, data, name="../../evil.png")
        assert reply.status_code == status, (name, reply.status_code, reply.text)
        error = reply.json()["error"]
        assert error["code"] == code and error["param"] == "file" and error["message"].startswith("file: "), name
    # Bodies past the request cap are cut off before they are parsed.
    assert upload(url, b"\x89PNG\r\n\x1a\n" + b"\0" * (17 << 20)).status_code == 413
    # Wrong shapes of request.
    assert httpx.post(f"{url}/v1/uploads", json={"file": "x"}).status_code == 415
    assert httpx.post(f"{url}/v1/uploads", data={"note": "no file"},
                      files={"other": ("a.png", good, "image/png")}).json()["error"]["code"] == "missing_file"
    two = httpx.post(f"{url}/v1/uploads",
                     files=[("file", ("a.png", good, "image/png")), ("file", ("b.png", good, "image/png"))])
    assert two.status_code == 400
    broken = httpx.post(f"{url}/v1/uploads", content=b"--x\r\nbroken",
                        headers={"content-type": "multipart/form-data; boundary=x"})
    assert broken.status_code == 400 and broken.json()["error"]["message"].startswith(("body: ", "file: "))
    # The same Host / Origin / Sec-Fetch-Site rules as every other write.
    assert upload(url, good, headers={"sec-fetch-site": "cross-site"}).status_code == 403
    assert upload(url, good, headers={"origin": "http://evil.example"}).status_code == 403
    assert upload(url, good, headers={"host": "evil.example"}).status_code == 403
    assert httpx.get(f"{url}/health").status_code == 200
    assert not (store.data_dir / "uploads").exists() or list((store.data_dir / "uploads").iterdir()) == []
    assert list((store.data_dir / "staging").iterdir()) == []
    # Ids are looked up in the store only: paths, other shapes and unknown ids are 404s.
    canary = tmp_path / "canary.txt"
    canary.write_text("CANARY-SECRET")
    for bad in ("img_" + "0" * 32, "../../canary.txt", str(canary), "..%2F..%2Fjobs.sqlite3", "img_../../x",
                "%2e%2e", "IMG_" + "a" * 32, "img_" + "g" * 32):
        for reply in (httpx.get(f"{url}/v1/uploads/{bad}/content"), httpx.get(f"{url}/v1/uploads/{bad}")):
            assert 400 <= reply.status_code < 500 and b"CANARY" not in reply.content, (bad, reply.status_code)


def test_uploads_need_the_token_like_everything_else(tmp_path):
    app = create_app(tmp_path, token="s3cret", start_dispatcher=False)
    with thread_server(app) as url:
        assert upload(url, png_bytes()).status_code == 401
        ok = upload(url, png_bytes(), headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 201
        assert httpx.get(url + ok.json()["url"]).status_code == 401


def test_openapi_documents_uploads_and_the_reference_form(idle):
    url, _ = idle
    paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    assert {"/v1/uploads", "/v1/uploads/{upload_id}", "/v1/uploads/{upload_id}/content"} <= set(paths)
    assert set(paths["/v1/uploads"]["post"]["requestBody"]["content"]) == {"multipart/form-data"}
    assert "upload:<id>" in paths["/v1/jobs"]["post"]["description"]


# ------------------------------------------------------------------ scripts that name uploads


def test_jobs_take_upload_names_and_refuse_paths_and_unknown_ids(idle):
    url, store = idle
    ref = upload(url, image_bytes("PNG")).json()["reference"]
    unknown = "upload:img_" + "f" * 32
    for refs, path in (
        ([ref, unknown], "characters[0].reference_images[1]"),
        (["/etc/passwd"], "characters[0].reference_images[0]"),
        (["reference.png"], "characters[0].reference_images[0]"),
        (["upload:../../jobs.sqlite3"], "characters[0].reference_images[0]"),
        ([ref.replace("upload:", "")], "characters[0].reference_images[0]"),
    ):
        reply = httpx.post(f"{url}/v1/jobs", json=with_refs(refs))
        assert reply.status_code == 422, (refs, reply.text)
        assert [i["path"] for i in reply.json()["issues"]] == [path], refs
        assert reply.json()["error"]["param"] == path
        checked = httpx.post(f"{url}/v1/scripts/validate", json=with_refs(refs)).json()
        assert checked["valid"] is False and [i["path"] for i in checked["issues"]] == [path]
    assert store.counts() == {}
    good = with_refs([ref], [ref])  # two characters may share one picture
    assert httpx.post(f"{url}/v1/scripts/validate", json=good).json()["valid"] is True
    reply = httpx.post(f"{url}/v1/jobs", json=good)
    assert reply.status_code == 202, reply.text
    stored = json.loads(store.get(reply.json()["id"]).script)
    assert [c["reference_images"] for c in stored["characters"]] == [[ref], [ref]]  # names, not server paths


def wait_done(url: str, job_id: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = httpx.get(f"{url}/v1/jobs/{job_id}").json()
        if job["status"] in ("completed", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"{job_id} did not finish in {timeout_s:g} s")


def test_previz_job_with_an_uploaded_reference_completes_and_its_manifest_has_the_sha(tmp_path):
    server = ServerProcess(tmp_path / "serve").start()
    try:
        png = image_bytes("PNG")
        made = upload(server.url, png).json()
        reply = httpx.post(f"{server.url}/v1/jobs", json=with_refs([made["reference"]]))
        assert reply.status_code == 202, reply.text
        job = wait_done(server.url, reply.json()["id"])
        assert job["status"] == "completed", job["error"]
        manifest = httpx.get(f"{server.url}/v1/jobs/{job['id']}/files/manifest").json()
        sha = hashlib.sha256(png).hexdigest()
        assert manifest["references"] == [{
            "character": "hero", "index": 0, "reference": made["reference"], "path": f"references/{sha}.png",
            "sha256": sha, "bytes": len(png), "content_type": "image/png", "width": 12, "height": 20}]
        # The renderer was given the stored file: the plan names it, and it is the uploaded bytes.
        plan = httpx.get(f"{server.url}/v1/jobs/{job['id']}/files/plan").json()
        hero = next(c for c in plan["characters"] if c["id"] == "hero")
        assert hero["reference_images"] == [f"references/{sha}.png"]
        placed = JobStore(server.data_dir).job_dir(job["id"]) / "references" / f"{sha}.png"
        assert hashlib.sha256(placed.read_bytes()).hexdigest() == sha
    finally:
        server.stop()


@pytest.mark.slow
def test_wan_vace_worker_receives_the_uploaded_pixels(idle, tiny_vace, tmp_path_factory, monkeypatch):
    """The worker's own run_job, in this process, with a tiny random Wan-VACE standing in for the real one."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    import numpy as np
    from diffusers import WanVACEPipeline

    from daotai.render import wan_vace
    from daotai.server.worker import run_job

    url, store = idle
    model = tiny_vace
    made = upload(url, image_bytes("PNG", size=(40, 56))).json()
    script = with_refs([made["reference"]])
    script.update(size="64x64",
                  shots=[{"shot_id": "a", "duration": 0.25, "subject": "hero", "characters": ["hero", "friend"]}])
    job_id = httpx.post(f"{url}/v1/jobs", params={"backend": "wan-vace"}, json=script).json()["id"]

    calls: list[list[np.ndarray]] = []
    original = WanVACEPipeline.__call__

    def recording_call(self, *args, **kwargs):
        calls.append([np.asarray(r).copy() for r in kwargs["reference_images"] or []])
        kwargs["num_inference_steps"] = 2  # pixels of the output do not matter here, only the inputs
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WanVACEPipeline, "__call__", recording_call)
    from daotai.render import registry

    tiny_default = dataclasses.replace(wan_vace.SPEC, default_model=str(model))
    monkeypatch.setattr(wan_vace, "SPEC", tiny_default)  # what the backend loads
    monkeypatch.setattr(registry, "_specs", {**registry.specs(), "wan-vace": tiny_default})  # what the run checks
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))  # run_job changes the current folder: restored after
    torch.manual_seed(0)
    job = store.claim_next()
    assert job.id == job_id and run_job(store.data_dir, job_id, job.attempts) == 0
    finished = store.get(job_id)
    assert finished.status == "completed", finished.error_message
    assert len(calls) == 1 and len(calls[0]) == 2
    hero, friend = calls[0]
    assert hero.shape == (56, 40, 3) and (hero == REFERENCE_RGB).all()  # the upload, not a swatch
    assert friend.shape == (256, 256, 3)  # no reference: a colour swatch
    manifest = json.loads((store.job_dir(job_id) / "out" / "manifest.json").read_text())
    assert [r["sha256"] for r in manifest["references"]] == [made["sha256"]]
    assert Path(store.job_dir(job_id) / manifest["references"][0]["path"]).is_file()
