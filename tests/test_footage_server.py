"""Footage through the service: video uploads checked in the sandbox (type, length, frame size), jobs that name
them as a shot's reference_video, and a Wan-VACE job whose control video is the uploaded clip."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from builders import pan_frames, write_clip  # noqa: E402
from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import thread_server  # noqa: E402

SCRIPT = {
    "size": "64x64",
    "fps": 24,
    "characters": [{"id": "hero", "appearance": "red coat"}],
    "shots": [{"shot_id": "a", "duration": 0.25, "subject": "hero"}],
}


def upload(url: str, data: bytes, name: str = "take.mp4", kind: str = "video/mp4") -> httpx.Response:
    return httpx.post(f"{url}/v1/uploads", files={"file": (name, data, kind)}, timeout=120)


def encoded(path: Path, frames: list[np.ndarray], fps: float, codec: str = "libx264",
            container_format: str | None = None) -> bytes:
    """Frames encoded with PyAV into ``path`` (any container): the file's bytes."""
    import av

    with av.open(str(path), "w", format=container_format) as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path.read_bytes()


@pytest.fixture()
def idle(tmp_path):
    """A live server in a thread whose dispatcher is off: jobs stay queued."""
    app = create_app(tmp_path / "data", start_dispatcher=False)
    with thread_server(app) as url:
        yield url, app.state.store


@pytest.fixture()
def clip(tmp_path) -> Path:
    return write_clip(tmp_path / "take.mp4", pan_frames(48, 96, 64), 24)


def test_video_uploads_are_checked_and_kept_as_footage(idle, clip, tmp_path):
    url, store = idle
    data = clip.read_bytes()
    reply = upload(url, data, name="rehearsal.png", kind="image/png")  # the type comes from the bytes
    assert reply.status_code == 201, reply.text
    body = reply.json()
    sha = hashlib.sha256(data).hexdigest()
    assert (body["id"], body["content_type"], body["width"], body["height"]) == (f"vid_{sha[:32]}", "video/mp4", 96, 64)
    assert body["reference"] == f"upload:vid_{sha[:32]}"
    served = httpx.get(url + body["url"])
    assert served.status_code == 200 and served.content == data and served.headers["content-type"] == "video/mp4"
    assert upload(url, data).status_code == 200  # the same bytes: the same upload
    # WebM (VP9) too.
    webm = encoded(tmp_path / "take.webm", list(pan_frames(6, 64, 48)), 24, codec="libvpx-vp9")
    made = upload(url, webm, name="take.webm", kind="video/webm")
    assert made.status_code == 201 and made.json()["content_type"] == "video/webm", made.text
    # An MP4 box holding sound alone is a soundtrack, not footage.
    import av

    with av.open(str(tmp_path / "voice.m4a"), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=16000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 16000), np.float32), format="fltp", layout="mono")
        frame.sample_rate = 16000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    sound = upload(url, (tmp_path / "voice.m4a").read_bytes(), name="voice.m4a", kind="audio/mp4")
    assert sound.status_code == 201 and sound.json()["id"].startswith("snd_"), sound.text
    assert list((store.data_dir / "staging").iterdir()) == []


def test_hostile_or_oversized_videos_are_refused_and_nothing_is_kept(idle, clip, tmp_path):
    url, store = idle
    kept_before = sorted(p.name for p in (store.data_dir / "uploads").glob("*")) \
        if (store.data_dir / "uploads").exists() else []
    good = clip.read_bytes()
    flat = np.full((2176, 4112, 3), 90, np.uint8)  # past DCI 4K, but one flat frame is a few kilobytes
    huge = encoded(tmp_path / "huge.mp4", [flat], 24)
    still = np.full((16, 16, 3), 40, np.uint8)
    long = encoded(tmp_path / "long.mp4", [still] * 602, 1)  # 10 min 2 s at one frame a second
    cases = {
        "truncated": (good[: len(good) // 3], 400, "invalid_video"),
        "ftyp_then_garbage": (b"\x00\x00\x00\x18ftypisom" + b"\x00junk" * 200, 400, "invalid_video"),
        "matroska_then_garbage": (b"\x1a\x45\xdf\xa3" + b"\x00" * 200, 400, "invalid_video"),
        "too_many_pixels": (huge, 413, "video_too_large"),
        "too_long": (long, 413, "video_too_long"),
    }
    for name, (data, status, code) in cases.items():
        reply = upload(url, data, name="../../evil.mp4")
        assert reply.status_code == status, (name, reply.status_code, reply.text)
        error = reply.json()["error"]
        assert error["code"] == code and error["param"] == "file" and error["message"].startswith("file: "), name
    assert list((store.data_dir / "staging").iterdir()) == []
    kept = sorted(p.name for p in (store.data_dir / "uploads").glob("*")) if (store.data_dir / "uploads").exists() else []
    assert kept == kept_before


def test_jobs_take_footage_upload_names_and_refuse_paths(idle, clip):
    url, _ = idle
    made = upload(url, clip.read_bytes()).json()
    for value, rule in (("take.mp4", "the server reads no file paths"),
                        ("upload:vid_" + "0" * 32, "is not a stored upload")):
        script = json.loads(json.dumps(SCRIPT))
        script["shots"][0]["reference_video"] = {"path": value, "in": 0.5}
        reply = httpx.post(f"{url}/v1/jobs", json=script)
        assert reply.status_code == 422, reply.text
        issues = reply.json()["issues"]
        assert [i["path"] for i in issues] == ["shots[0].reference_video.path"] and rule in issues[0]["rule"]
    script = json.loads(json.dumps(SCRIPT))
    script["shots"][0]["footage"] = made["reference"]
    assert httpx.post(f"{url}/v1/jobs", json=script).status_code == 202


def test_wan_vace_job_follows_the_uploaded_footage(idle, tiny_vace, clip, tmp_path_factory, monkeypatch):
    """The worker's own run_job, in this process, with a tiny random Wan-VACE standing in for the real one."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import WanVACEPipeline

    from daotai.plan.planner import plan_script
    from daotai.render import registry, wan_vace
    from daotai.render.footage import footage_times, read_footage
    from daotai.render.neural.request import family_defaults, native_request
    from daotai.script.load import validate_script
    from daotai.server.worker import run_job

    url, store = idle
    made = upload(url, clip.read_bytes()).json()
    script = json.loads(json.dumps(SCRIPT))
    script["shots"][0]["reference_video"] = {"path": made["reference"], "start": 1.0}
    job_id = httpx.post(f"{url}/v1/jobs", params={"backend": "wan-vace"}, json=script).json()["id"]

    calls: list[list[np.ndarray]] = []
    original = WanVACEPipeline.__call__

    def recording_call(self, *args, **kwargs):  # the real pipeline runs; its control video is kept
        calls.append([np.asarray(f).copy() for f in kwargs["video"]])
        kwargs["num_inference_steps"] = 2
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WanVACEPipeline, "__call__", recording_call)
    tiny_default = dataclasses.replace(wan_vace.SPEC, default_model=str(tiny_vace))
    monkeypatch.setattr(wan_vace, "SPEC", tiny_default)
    monkeypatch.setattr(registry, "_specs", {**registry.specs(), "wan-vace": tiny_default})
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    torch.manual_seed(0)
    job = store.claim_next()
    assert job.id == job_id and run_job(store.data_dir, job_id, job.attempts) == 0
    finished = store.get(job_id)
    assert finished.status == "completed", finished.error_message
    plan = plan_script(validate_script(script))
    request = native_request(plan, plan.shots[0], family_defaults("wan-vace"))
    times = footage_times(request.frames, request.fps, plan.shots[0].duration_s, 1.0, 1.25)
    expected = read_footage(clip, times, request.width, request.height)  # the uploaded bytes are this clip's
    assert len(calls) == 1 and np.array_equal(np.stack(calls[0]), expected)
    manifest = json.loads((store.job_dir(job_id) / "out" / "manifest.json").read_text())
    entry = next(r for r in manifest["references"] if r.get("shot") == "a")
    assert entry["sha256"] == made["sha256"] and entry["content_type"] == "video/mp4"
    placed = store.job_dir(job_id) / entry["path"]
    assert hashlib.sha256(placed.read_bytes()).hexdigest() == made["sha256"]
