"""The server publishes every deliverable the render layout names: the editorial timelines
(FCP XML, EDL) and the camera files too, each with its media type."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.server.testing import ServerProcess  # noqa: E402

SCRIPT = {
    "size": "160x96", "fps": 24, "characters": [{"id": "hero"}],
    "shots": [{"shot_id": "a", "duration": 1, "subject": "hero"},
              {"shot_id": "b", "duration": 1, "subject": "hero", "framing": "close_up",
               "transition": {"type": "crossfade", "duration": 0.25}}],
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A real `daotai serve` process and a completed previz job of SCRIPT."""
    server = ServerProcess(tmp_path_factory.mktemp("serve")).start()
    try:
        reply = httpx.post(f"{server.url}/v1/jobs", json=SCRIPT)
        assert reply.status_code == 202, reply.text
        job_id = reply.json()["id"]
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            job = httpx.get(f"{server.url}/v1/jobs/{job_id}").json()
            if job["status"] in ("completed", "failed"):
                break
            time.sleep(0.3)
        assert job["status"] == "completed", job
        yield server.url, job_id, job
    finally:
        server.stop()


def test_job_lists_the_timelines_and_camera_files(finished):
    _, _, job = finished
    text = repr(job)
    for name in ("timeline", "timeline_xml", "timeline_edl", "camera_pose.a", "camera_json.b"):
        assert f"'{name}'" in text, name


@pytest.mark.parametrize(("name", "media_type", "starts"), [
    ("timeline_xml", "application/xml", "<?xml"),
    ("timeline_edl", "text/plain", "TITLE:"),
    ("camera_pose.a", "text/plain", "# daotai"),
    ("camera_json.b", "application/json", "{"),
])
def test_timelines_and_camera_files_are_served(finished, name, media_type, starts):
    url, job_id, _ = finished
    reply = httpx.get(f"{url}/v1/jobs/{job_id}/files/{name}")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].split(";")[0] == media_type
    assert reply.text.startswith(starts) and len(reply.content) > 20
    if name == "timeline_xml":
        assert "<xmeml" in reply.text and "a.mp4" in reply.text
    if name == "camera_pose.a":  # CameraCtrl: one line per frame after the header, 24 frames
        assert len(reply.text.strip().splitlines()) == 1 + 24
