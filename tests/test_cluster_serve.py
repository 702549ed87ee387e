"""`daotai serve --cluster`: jobs submitted through the OpenAI client render on Ray."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install 'daotai[cluster]'")
openai = pytest.importorskip("openai")

from daotai.server.store import JobStore  # noqa: E402
from daotai.server.testing import ServerProcess  # noqa: E402


@pytest.mark.slow
def test_openai_client_job_renders_on_the_cluster(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--cluster", "local")).start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=180)
            video = client.videos.create_and_poll(prompt="a dancer on a rooftop", model="previz",
                                                  seconds="1", size="160x96")
            assert video.status == "completed", video.error
            content = client.videos.download_content(video.id)
        assert content.content[4:8] == b"ftyp"
        job = JobStore(server.data_dir).get(video.id)
        manifest = json.loads((JobStore(server.data_dir).job_dir(video.id) / "out" / "manifest.json").read_text())
        assert manifest["settings"]["cluster"] == "local"
        assert job.outputs["video"].sha256
    finally:
        server.stop()
