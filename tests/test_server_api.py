"""The local video service against live servers on loopback: OpenAI client, native jobs, hardening."""

from __future__ import annotations

import hashlib
import json
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from builders import png_bytes, png_claiming  # noqa: E402
from daotai.errors import DaotaiError  # noqa: E402
from daotai.server.app import create_app  # noqa: E402
from daotai.server.store import JobStore  # noqa: E402
from daotai.server.testing import ServerProcess, thread_server  # noqa: E402

SMALL = {"seconds": "1", "size": "160x96"}
SCRIPT = {
    "size": "160x96",
    "fps": 24,
    "characters": [{"id": "hero", "appearance": "red coat"}],
    "shots": [
        {"shot_id": "a", "duration": 1, "camera": {"type": "dolly", "motion": [0, 0, -0.3]}},
        {"shot_id": "b", "duration": 1, "framing": "close_up"},
    ],
}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A real `daotai serve` subprocess rendering with previz."""
    server = ServerProcess(tmp_path_factory.mktemp("serve")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(live):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture()
def idle(tmp_path):
    """A live server in a thread whose dispatcher is off: jobs stay queued (fast, deterministic)."""
    app = create_app(tmp_path / "data", start_dispatcher=False, queue_limit=150)
    with thread_server(app) as url:
        yield url, app.state.store


# ------------------------------------------------------------------ OpenAI client


def test_openai_client_create_poll_download(client, live, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        video = client.videos.create_and_poll(prompt="a cat crosses the street", model="previz", **SMALL)
        assert video.status == "completed", video.error
        assert video.progress == 100 and video.object == "video" and video.model == "previz"
        assert video.completed_at >= video.created_at
        content = client.videos.download_content(video.id)
        thumb = client.videos.download_content(video.id, variant="thumbnail")
        sheet = client.videos.download_content(video.id, variant="spritesheet")
    path = tmp_path / "v.mp4"
    path.write_bytes(content.content)
    from daotai.encode.read import decode_frames, probe

    info = probe(path)
    assert (info.width, info.height) == (160, 96)
    frames = list(decode_frames(path))
    assert len(frames) == info.frames >= 12 and frames[0].shape == (96, 160, 3)
    assert frames[len(frames) // 2].std() > 1.0  # a rendered picture, not a blank frame
    assert thumb.content[:3] == b"\xff\xd8\xff" and sheet.content[:3] == b"\xff\xd8\xff"
    # The store's checksum is the checksum of the bytes served.
    job = JobStore(live.data_dir).get(video.id)
    assert job.outputs["video"].sha256 == hashlib.sha256(content.content).hexdigest()


def test_openai_list_retrieve_delete(client, live):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ids = [client.videos.create(prompt=f"shot {i}", **SMALL).id for i in range(3)]
        assert client.videos.retrieve(ids[0]).id == ids[0]
        raw = httpx.get(f"{live.url}/v1/videos/{ids[2]}")
        assert raw.status_code == 200
        if raw.json()["status"] in ("queued", "in_progress"):
            assert int(raw.headers["openai-poll-after-ms"]) > 0
        page = client.videos.list(limit=2, order="asc")
        assert len(page.data) == 2 and page.has_more
        seen = [v.id for v in page]  # the client follows `after` cursors itself
        assert all(i in seen for i in ids) and len(seen) == len(set(seen))
        newest_first = [v.id for v in client.videos.list(order="desc")]
        assert newest_first[: 3] == ids[::-1]
        deleted = client.videos.delete(ids[2])  # queued or running: cancelled, then gone
        assert deleted.deleted and deleted.id == ids[2]
        with pytest.raises(openai.NotFoundError):
            client.videos.retrieve(ids[2])
        assert ids[2] not in [v.id for v in client.videos.list()]
        with pytest.raises(openai.BadRequestError):
            client.videos.create(prompt="x", model="no-such-backend", **SMALL)
        with pytest.raises(openai.BadRequestError):
            client.videos.create(prompt="x", seconds="-3", size="160x96")
        with pytest.raises(openai.BadRequestError):
            client.videos.create(prompt="x", seconds="1", size="161x96")  # odd width: H.264 needs even


# ------------------------------------------------------------------ native script jobs


def test_script_validation_errors_are_422_with_paths(live):
    bad = json.loads(json.dumps(SCRIPT))
    bad["shots"][0]["duration"] = -1
    bad["shots"][1]["subject"] = "nobody"
    reply = httpx.post(f"{live.url}/v1/jobs", json=bad)
    assert reply.status_code == 422
    paths = {issue["path"] for issue in reply.json()["issues"]}
    assert "shots[0].duration" in paths and "shots[1].subject" in paths
    refs = json.loads(json.dumps(SCRIPT))
    refs["characters"][0]["reference_images"] = ["/etc/passwd"]
    reply = httpx.post(f"{live.url}/v1/jobs", json=refs)
    assert reply.status_code == 422
    assert reply.json()["issues"][0]["path"] == "characters[0].reference_images[0]"
    nan = httpx.post(f"{live.url}/v1/jobs", content=b'{"shots": [{"shot_id": "a", "duration": NaN}]}',
                     headers={"content-type": "application/json"})
    assert nan.status_code == 422 and nan.json()["issues"][0]["path"] == "shots[0].duration"
    deep = httpx.post(f"{live.url}/v1/jobs", content=b"[" * 5000 + b"]" * 5000,
                      headers={"content-type": "application/json"})
    assert deep.status_code == 422


def test_script_job_streams_events_and_serves_every_deliverable(live):
    reply = httpx.post(f"{live.url}/v1/jobs", json=SCRIPT)
    assert reply.status_code == 202
    job_id = reply.json()["id"]
    assert [s["shot_id"] for s in reply.json()["shots"]] == ["a", "b"]
    kinds, progress = [], []
    with httpx.stream("GET", f"{live.url}/v1/jobs/{job_id}/events", timeout=60) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                kinds.append(event)
            elif line.startswith("data: ") and event == "progress":
                progress.append(json.loads(line[6:])["progress"])
    assert "progress" in kinds and kinds[-1] == "status"
    assert len(progress) >= 3 and max(progress) >= 85
    job = httpx.get(f"{live.url}/v1/jobs/{job_id}").json()
    assert job["status"] == "completed" and job["progress"] == 100
    assert [(s["shot_id"], s["status"], s["done"] == s["frames"] > 0) for s in job["shots"]] == [
        ("a", "completed", True), ("b", "completed", True)]
    names = {o["name"] for o in job["outputs"]}
    assert {"video", "thumbnail", "spritesheet", "contact_sheet", "manifest", "qc", "timeline", "plan",
            "shot.a", "shot.b", "depth.a", "mask.b"} <= names
    for output in job["outputs"]:
        body = httpx.get(live.url + output["url"])
        assert body.status_code == 200, output
        assert hashlib.sha256(body.content).hexdigest() == output["sha256"]
    # Resuming the stream after the last event returns nothing new and ends.
    resumed = httpx.get(f"{live.url}/v1/jobs/{job_id}/events", headers={"Last-Event-ID": "999999999"})
    assert resumed.status_code == 200 and "event:" not in resumed.text


def test_a_running_job_shows_the_frame_being_rendered_and_each_finished_shot(live):
    """While it renders, a job's preview events point at a small JPEG of the frame being drawn, and
    each shot's output event names a clip that plays at once; both are gone once it has ended, and
    the clip was the delivered shot file."""
    import io

    from PIL import Image

    script = {**SCRIPT, "shots": [{"shot_id": f"s{i}", "duration": 1} for i in range(4)]}
    job_id = httpx.post(f"{live.url}/v1/jobs", json=script).json()["id"]
    previews, pictures, clips = [], [], {}
    with httpx.stream("GET", f"{live.url}/v1/jobs/{job_id}/events", timeout=60) as stream:
        event = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "preview":
                previews.append(json.loads(line[6:]))
                if not pictures:  # fetched while the later shots still render
                    reply = httpx.get(f"{live.url}/v1/jobs/{job_id}/live/preview")
                    assert reply.status_code == 200 and reply.headers["content-type"] == "image/jpeg"
                    assert reply.headers["cache-control"] == "no-store"
                    pictures.append(Image.open(io.BytesIO(reply.content)))
            elif line.startswith("data: ") and event == "output":
                data = json.loads(line[6:])
                if data.get("live") and data["shot_id"] in ("s0", "s1"):
                    reply = httpx.get(f"{live.url}/v1/jobs/{job_id}/live/{data['live']}")
                    assert reply.status_code == 200 and reply.headers["content-type"] == "video/mp4", data
                    clips[data["shot_id"]] = hashlib.sha256(reply.content).hexdigest()
    # each shot's first frame at least, in order, numbered one after another
    assert {p["shot_id"] for p in previews if p["index"] == 0} == {"s0", "s1", "s2", "s3"}
    assert [p["n"] for p in previews] == list(range(1, len(previews) + 1))
    assert pictures[0].size == (160, 96)  # the script's own size: under the glimpse width, kept
    assert set(clips) == {"s0", "s1"}
    job = httpx.get(f"{live.url}/v1/jobs/{job_id}").json()
    delivered = {o["name"]: o["sha256"] for o in job["outputs"]}
    assert clips == {"s0": delivered["shot.s0"], "s1": delivered["shot.s1"]}
    assert httpx.get(f"{live.url}/v1/jobs/{job_id}/live/preview").status_code == 404
    assert httpx.get(f"{live.url}/v1/jobs/{job_id}/live/shot.s0").status_code == 404
    assert (live.data_dir / "jobs" / job_id / "out").is_dir() and not (live.data_dir / "jobs" / job_id / "live").exists()
    assert httpx.get(f"{live.url}/v1/jobs/{job_id}/live/qc").status_code == 422  # not a live name


def test_event_stream_keeps_the_final_status_of_a_job_that_ends_between_reads(idle):
    # The job ends right after the stream found no new events: the stream must still send the
    # final status event instead of seeing the ended job and closing before reading it.
    url, store = idle
    job_id = httpx.post(f"{url}/v1/jobs", json=SCRIPT).json()["id"]
    plain_events = store.events

    def events_then_fail(job: str, after_seq: int = 0, limit: int = 500):
        found = plain_events(job, after_seq, limit)
        if not found and store.get(job, True).status not in ("failed", "completed", "cancelled"):
            store.finish(job, "failed", "render_failed", "ended between two reads")
        return found

    store.events = events_then_fail
    body = httpx.get(f"{url}/v1/jobs/{job_id}/events", timeout=30).text
    kinds = [line[7:] for line in body.splitlines() if line.startswith("event: ")]
    assert kinds[-1] == "status" and '"failed"' in body.split("event: ")[-1]


def test_server_wide_speed_mode_reaches_every_jobs_settings(tmp_path):
    # `daotai serve --speed fast`: the warm workers render every job with that mode, and each
    # job's manifest says so (previz ignores it; a neural backend would run its fast levers).
    server = ServerProcess(tmp_path / "data", extra_args=("--speed", "fast")).start()
    try:
        job_id = httpx.post(f"{server.url}/v1/jobs", json=SCRIPT).json()["id"]
        with httpx.stream("GET", f"{server.url}/v1/jobs/{job_id}/events", timeout=60) as stream:
            for _ in stream.iter_lines():
                pass
        job = httpx.get(f"{server.url}/v1/jobs/{job_id}").json()
        assert job["status"] == "completed", job
        manifest = httpx.get(f"{server.url}/v1/jobs/{job_id}/files/manifest").json()
        # the run-wide default is recorded; previz has no speed option, so its options do not carry it
        assert manifest["settings"]["option_defaults"]["speed"] == "fast"
        assert "speed" not in manifest["settings"]["options"]
    finally:
        server.stop()


def test_serve_refuses_an_unknown_speed_mode(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", "from daotai.cli import main; main()", "serve", "--speed", "turbo",
                             "--data-dir", str(tmp_path / "data")], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "speed: 'turbo' must be one of off, exact, fast" in result.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was created


# ------------------------------------------------------------------ queue rules


def test_idempotency_key_concurrent_and_conflict(idle):
    url, store = idle
    body = {"prompt": "same", **SMALL}

    def post(_: int) -> httpx.Response:
        return httpx.post(f"{url}/v1/videos", json=body, headers={"Idempotency-Key": "k-1"}, timeout=30)

    with ThreadPoolExecutor(10) as pool:
        replies = list(pool.map(post, range(10)))
    assert all(r.status_code == 200 for r in replies)
    assert len({r.json()["id"] for r in replies}) == 1
    assert store.counts() == {"queued": 1}
    other = httpx.post(f"{url}/v1/videos", json={**body, "prompt": "different"}, headers={"Idempotency-Key": "k-1"})
    assert other.status_code == 409


def test_queue_limit_answers_429_with_retry_after(tmp_path):
    app = create_app(tmp_path, start_dispatcher=False, queue_limit=2)
    with thread_server(app) as url:
        codes = [httpx.post(f"{url}/v1/videos", json={"prompt": f"p{i}", **SMALL}) for i in range(3)]
    assert [c.status_code for c in codes] == [200, 200, 429]
    assert int(codes[2].headers["Retry-After"]) > 0
    assert codes[2].json()["error"]["code"] == "queue_full"


def test_twenty_clients_five_jobs_each_lose_nothing(idle):
    url, store = idle

    def client_run(n: int) -> list[str]:
        with httpx.Client(base_url=url, timeout=30) as http:
            return [http.post("/v1/videos", json={"prompt": f"c{n} j{j}", **SMALL}).json()["id"] for j in range(5)]

    with ThreadPoolExecutor(20) as pool:
        ids = [i for batch in pool.map(client_run, range(20)) for i in batch]
    assert len(set(ids)) == 100
    listed, after = [], None
    while True:
        page = httpx.get(f"{url}/v1/videos", params={"limit": 100, **({"after": after} if after else {})},
                         timeout=30).json()  # a loaded 2-core machine may take seconds for 100 jobs
        listed += [v["id"] for v in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert sorted(listed) == sorted(ids)


# ------------------------------------------------------------------ hardening


def test_traversal_attempts_are_rejected_and_canary_never_read(idle, tmp_path):
    url, store = idle
    canary = tmp_path / "canary.txt"
    canary.write_text("CANARY-SECRET")
    job_id = httpx.post(f"{url}/v1/videos", json={"prompt": "p", **SMALL}).json()["id"]
    # A symlink planted in the jobs folder under a valid-looking id is not a job.
    planted = "video_" + "0" * 32
    (store.data_dir / "jobs" / planted).symlink_to(tmp_path)
    evil_ids = ["../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "%2e%2e%2f%2e%2e", str(canary), "..\\..\\canary.txt",
                "video_../../canary", planted, f"{job_id}/../../canary.txt", "%00", "video_" + "g" * 32]
    evil_names = ["../../canary.txt", "..%2Fcanary.txt", str(canary), "..\\canary.txt", "video/../../x", "%2e%2e"]
    replies = []
    for bad in evil_ids:
        replies += [httpx.get(f"{url}/v1/videos/{bad}"), httpx.get(f"{url}/v1/videos/{bad}/content"),
                    httpx.get(f"{url}/v1/jobs/{bad}"), httpx.get(f"{url}/v1/jobs/{bad}/files/video"),
                    httpx.delete(f"{url}/v1/videos/{bad}"), httpx.get(f"{url}/v1/videos", params={"after": bad})]
    for bad in evil_names:
        replies += [httpx.get(f"{url}/v1/jobs/{job_id}/files/{bad}"),
                    httpx.get(f"{url}/v1/videos/{job_id}/content", params={"variant": bad})]
    for reply in replies:
        assert 400 <= reply.status_code < 500, (reply.request.url, reply.status_code)
        assert b"CANARY" not in reply.content
    # A finished job whose file was swapped for a symlink to the canary is not served either.
    out = store.job_dir(job_id) / "out"
    out.mkdir(parents=True)
    (out / "sequence.mp4").symlink_to(canary)
    from daotai.server.store import OutputFile

    store.claim_next()
    work = store.job_dir(job_id) / "work-1"
    work.mkdir()
    (work / "sequence.mp4").symlink_to(canary)
    assert store.complete(job_id, 1, work, [OutputFile("video", "sequence.mp4", "0" * 64, 13)])
    reply = httpx.get(f"{url}/v1/videos/{job_id}/content")
    assert reply.status_code == 404 and b"CANARY" not in reply.content


def test_hostile_uploads_get_4xx_and_server_survives(idle):
    url, store = idle
    fields = {"prompt": "with a reference", **SMALL}
    good = png_bytes()
    hostile = {
        "zero": b"",
        "truncated": good[: len(good) // 2],
        "bomb": png_claiming(60000, 60000),
        "wrong_type": b"GIF89a" + b"\0" * 100,
        "text": b"#!/bin/sh\nrm -rf /\n",
        "webp_lie": b"RIFF\0\0\0\0AVI " + b"\0" * 64,
    }
    for name, data in hostile.items():
        reply = httpx.post(f"{url}/v1/videos", data=fields,
                           files={"input_reference": (f"{name}.png", data, "image/png")})
        assert 400 <= reply.status_code < 500, (name, reply.status_code, reply.text)
    huge = httpx.post(f"{url}/v1/videos", data=fields,
                      files={"input_reference": ("big.png", b"\x89PNG\r\n\x1a\n" + b"\0" * (17 << 20), "image/png")})
    assert huge.status_code == 413
    assert httpx.get(f"{url}/health").status_code == 200
    assert store.counts() == {}  # nothing hostile was queued
    ok = httpx.post(f"{url}/v1/videos", data=fields, files={"input_reference": ("ref.png", good, "image/png")})
    assert ok.status_code == 200
    job_dir = store.job_dir(ok.json()["id"])
    from PIL import Image

    with Image.open(job_dir / "reference.png") as image:
        assert image.size == (8, 8)
    script = json.loads(store.get(ok.json()["id"]).script)
    assert script["characters"][0]["reference_images"] == ["reference.png"]
    assert list((store.data_dir / "staging").iterdir()) == []


def test_unknown_model_is_a_400_naming_the_value_and_the_models(idle):
    url, store = idle
    for send in ({"json": {"prompt": "p", "model": "wan2", **SMALL}},
                 {"files": {k: (None, v) for k, v in {"prompt": "p", "model": "wan2", **SMALL}.items()}}):
        # JSON, and the multipart form the official client sends
        reply = httpx.post(f"{url}/v1/videos", **send)
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == "model"
        assert error["code"] == "model_not_found"
        assert error["message"].startswith("model: 'wan2' is not a known backend; did you mean 'wan'")
        assert "choose one of: h3, " in error["message"] and "previz" in error["message"]
    assert httpx.post(f"{url}/v1/videos", json={"prompt": "p", "model": 7, **SMALL}).json()["error"]["param"] == "model"
    assert store.list(limit=10)[0] == []  # nothing was queued
    # the other fields name themselves as OpenAI's param too
    assert httpx.post(f"{url}/v1/videos", json={"prompt": "p", "seconds": "0"}).json()["error"]["param"] == "seconds"
    assert httpx.post(f"{url}/v1/videos", json={"prompt": " "}).json()["error"]["param"] == "prompt"


def test_openai_client_sees_an_unknown_model_as_a_bad_request(client):
    with warnings.catch_warnings(), pytest.raises(openai.BadRequestError) as refused:
        warnings.simplefilter("ignore", DeprecationWarning)
        client.videos.create(prompt="a cat", model="sora-2", **SMALL)
    assert refused.value.status_code == 400 and refused.value.param == "model"
    assert "'sora-2' is not a known backend" in refused.value.message


def test_request_guard_content_type_origin_host_size(idle):
    url, _ = idle
    post = f"{url}/v1/videos"
    body = json.dumps({"prompt": "p", **SMALL})
    json_type = {"content-type": "application/json"}
    assert httpx.post(post, content=body, headers={"content-type": "text/plain"}).status_code == 415
    assert httpx.post(post, content=body, headers={**json_type, "sec-fetch-site": "cross-site"}).status_code == 403
    assert httpx.post(post, content=body, headers={**json_type, "origin": "http://evil.example"}).status_code == 403
    assert httpx.post(post, content=body, headers={**json_type, "host": "evil.example"}).status_code == 403
    assert httpx.get(f"{url}/health", headers={"host": "rebound.example:80"}).status_code == 403
    assert httpx.get(f"{url}/health", headers={"host": "[::1"}).status_code == 403
    assert httpx.post(post, content=body, headers={**json_type, "origin": "http://[bad"}).status_code == 403
    same = url.removeprefix("http://")
    assert httpx.post(post, content=body, headers={**json_type, "origin": f"http://{same}",
                                                   "sec-fetch-site": "same-origin"}).status_code == 200
    assert httpx.post(post, content=b"{" + b" " * (17 << 20) + b"}", headers=json_type).status_code == 413
    assert httpx.post(post, content=b'{"prompt": "p", "seconds": Infinity}', headers=json_type).status_code == 422
    assert httpx.post(post, content=b"\xff\xfe", headers=json_type).status_code == 422
    multipart = {"content-type": "multipart/form-data; boundary=x"}
    assert httpx.post(post, content=b"--x\r\nbroken", headers=multipart).status_code == 400


def test_token_required_beyond_loopback(tmp_path):
    with pytest.raises(DaotaiError, match="token"):
        create_app(tmp_path, host="0.0.0.0")
    app = create_app(tmp_path, token="s3cret", host="0.0.0.0", start_dispatcher=False)
    with thread_server(app) as url:
        assert httpx.get(f"{url}/health").status_code == 401
        assert httpx.get(f"{url}/health", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{url}/health", headers={"authorization": "Bearer s3cret"}).status_code == 200


def test_openapi_lists_every_endpoint(idle):
    url, _ = idle
    paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    assert set(paths) >= {"/health", "/v1/videos", "/v1/videos/{video_id}", "/v1/videos/{video_id}/content",
                          "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/events", "/v1/jobs/{job_id}/files/{name}"}
    assert set(paths["/v1/videos"]["post"]["requestBody"]["content"]) == {"application/json", "multipart/form-data"}


def test_serve_refuses_non_loopback_without_token(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "DAOTAI_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-c", "from daotai.cli import main; main()", "serve", "--host", "0.0.0.0",
         "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=60, env=env,
    )
    assert done.returncode == 2  # OptionError: --host beyond loopback needs --token
    assert "--token" in done.stderr and "Traceback" not in done.stderr


def test_openai_client_lists_the_backends_and_what_they_can_do(client):
    models = {m.id: m for m in client.models.list()}
    assert {"previz", "wan", "wan-vace", "ltx", "wan-mlx"} <= set(models)
    previz = models["previz"].model_dump()
    assert previz["object"] == "model" and previz["owned_by"] == "daotai"
    assert previz["daotai"]["controls"] is True and previz["daotai"]["device_class"] == "cpu"
    assert "speed" in models["wan"].model_dump()["daotai"]["options"]
    assert client.models.retrieve("wan-vace").id == "wan-vace"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_a_file_reached_through_a_symlinked_folder_is_not_served(idle, tmp_path):
    # The file itself is regular; the folder above it inside out/ points outside the job.
    url, store = idle
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sequence.mp4").write_text("CANARY-SECRET")
    job_id = httpx.post(f"{url}/v1/videos", json={"prompt": "p", **SMALL}).json()["id"]
    from daotai.server.store import OutputFile

    store.claim_next()
    work = store.job_dir(job_id) / "work-1"
    work.mkdir(parents=True)
    (work / "media").symlink_to(outside, target_is_directory=True)
    assert store.complete(job_id, 1, work, [OutputFile("video", "media/sequence.mp4", "0" * 64, 13)])
    for reply in (httpx.get(f"{url}/v1/videos/{job_id}/content"), httpx.get(f"{url}/v1/jobs/{job_id}/files/video")):
        assert reply.status_code == 404 and b"CANARY" not in reply.content


def test_serving_beyond_loopback_needs_a_token():
    from daotai.errors import OptionError
    from daotai.server.security import check_bind

    for host in ("127.0.0.1", "localhost", "::1"):
        check_bind(host, None)
    check_bind("0.0.0.0", "a-token")
    for token in (None, ""):
        with pytest.raises(OptionError, match="--host"):
            check_bind("0.0.0.0", token)


def test_a_body_without_content_length_is_cut_off_at_the_cap(idle):
    # Chunked upload: no Content-Length header to refuse early, so the guard counts what arrives.
    url, store = idle

    def chunks():
        yield b'{"prompt": "'
        for _ in range(17):
            yield b" " * (1 << 20)
        yield b'"}'

    reply = httpx.post(f"{url}/v1/videos", content=chunks(), headers={"content-type": "application/json"})
    assert reply.status_code == 413 and reply.json()["error"]["code"] == "body_too_large"
    assert store.counts() == {}


def test_a_live_view_that_cannot_be_written_costs_the_render_nothing(tmp_path, monkeypatch):
    """The live folder is a courtesy: a full disk there skips the picture or the clip, it does not fail the job."""
    import errno

    import numpy as np

    import daotai.files
    from daotai.events import Glimpse, Output
    from daotai.server.live import LiveView, live_file

    view = LiveView(tmp_path / "live")
    shot = tmp_path / "s1.mp4"
    shot.write_bytes(b"frames")
    picture = Glimpse("s1", 0, np.zeros((4, 6, 3), np.uint8))
    assert view.glimpse(picture) == {"shot_id": "s1", "index": 0, "n": 1}
    denoising = Glimpse("s2", 6, np.zeros((4, 6, 3), np.uint8), step=3, steps=20)  # a neural shot's latents
    assert view.glimpse(denoising) == {"shot_id": "s2", "index": 6, "n": 2, "step": 3, "steps": 20}
    assert view.clip(Output("shot", str(tmp_path / "out" / "s1.mp4"), "s1", written=str(shot))) == "shot.s1"
    assert live_file(view.folder, "shot.s1").read_bytes() == b"frames"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(daotai.files, "atomic_write_bytes", full)
    monkeypatch.setattr(daotai.files, "link_or_copy", full)
    assert view.glimpse(picture) is None and view.glimpses == 2
    assert view.clip(Output("shot", str(shot), "s1")) is None
    assert view.clip(Output("depth", str(shot), "s1")) is None  # not a shot file
    assert live_file(view.folder, "../s1") is None and live_file(view.folder, "shot.s2") is None
    view.close()
    assert not view.folder.exists()
