"""POST /v1/sweeps: one script over a grid of seeds and settings becomes a group of jobs with one id."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import thread_server  # noqa: E402

SCRIPT = {"fps": 24, "size": "160x96", "characters": [{"id": "ana"}],
          "shots": [{"shot_id": "a", "duration": 0.5, "subject": "ana", "camera": "push_in"}]}


@pytest.fixture()
def idle(tmp_path):
    app = create_app(tmp_path / "data", start_dispatcher=False, queue_limit=20)
    with thread_server(app) as url:
        yield url, app.state.store


def test_a_sweep_queues_one_job_per_combination_under_one_id(idle, tmp_path, monkeypatch):
    url, store = idle
    reply = httpx.post(f"{url}/v1/sweeps", params={"backend": "wan"},
                       json={**SCRIPT, "options": {"guidance": 4.0}, "sweep": {"seed": [1, 2], "steps": [2, 4]}})
    assert reply.status_code == 202, reply.text
    sweep = reply.json()
    assert sweep["object"] == "daotai.sweep" and sweep["count"] == 4 and sweep["finished"] == 0
    assert [j["variation"] for j in sweep["jobs"]] == [
        {"seed": 1, "steps": 2}, {"seed": 1, "steps": 4}, {"seed": 2, "steps": 2}, {"seed": 2, "steps": 4}]
    for item in sweep["jobs"]:
        job = store.get(item["id"])
        assert job.model == "wan" and job.status == "queued"
        assert json.loads(job.script)["seed"] == item["variation"]["seed"]
        assert json.loads(job.options) == {"guidance": 4.0, "steps": item["variation"]["steps"]}
    again = httpx.get(f"{url}/v1/sweeps/{sweep['id']}").json()
    assert [j["id"] for j in again["jobs"]] == [j["id"] for j in sweep["jobs"]]
    assert all(j["status"] == "queued" and j["url"] == f"/v1/jobs/{j['id']}" for j in again["jobs"])
    assert httpx.get(f"{url}/v1/sweeps/sweep_{'0' * 24}").status_code == 404
    assert httpx.get(f"{url}/v1/sweeps/..%2Fsecrets").status_code == 404


def test_a_seed_sweep_renders_each_seed(idle, tmp_path, monkeypatch):
    from daotai.server.worker import run_job

    url, store = idle
    sweep = httpx.post(f"{url}/v1/sweeps", json={**SCRIPT, "sweep": {"seed": [7, 8]}}).json()
    monkeypatch.chdir(tmp_path)  # run_job changes the current folder: restored after
    seeds = []
    for _ in sweep["jobs"]:
        job = store.claim_next()
        assert run_job(store.data_dir, job.id, job.attempts) == 0
        seeds.append(json.loads((store.job_dir(job.id) / "out" / "plan.json").read_text())["shots"][0]["seed"])
    assert len(set(seeds)) == 2  # each job planned its shot from its own script seed
    done = httpx.get(f"{url}/v1/sweeps/{sweep['id']}").json()
    assert done["finished"] == 2 and {j["status"] for j in done["jobs"]} == {"completed"}


@pytest.mark.parametrize(("body", "backend", "path"), [
    ({"sweep": {"colour": [1, 2]}}, "previz", "sweep.colour"),  # not a field a sweep varies
    ({"sweep": {"steps": [2, 4]}}, "previz", "sweep.steps"),  # previz has no steps
    ({"sweep": {"steps": [2, 0]}}, "wan", "sweep.steps[1]"),  # a value its option refuses
    ({"sweep": {"seed": [1, -1]}}, "previz", "sweep.seed[1]"),
    ({"sweep": {"seed": [1, 1]}}, "previz", "sweep.seed"),  # the same value twice
    ({"sweep": {"seed": list(range(16)), "steps": list(range(1, 6))}}, "wan", "sweep"),  # 80 jobs
    ({"sweep": []}, "previz", "sweep"),
])
def test_a_wrong_sweep_is_refused_before_anything_is_queued(idle, body, backend, path):
    url, store = idle
    reply = httpx.post(f"{url}/v1/sweeps", params={"backend": backend}, json={**SCRIPT, **body})
    assert reply.status_code == 422, reply.text
    assert path in reply.text
    assert store.claim_next() is None


def test_a_sweep_that_would_overfill_the_queue_is_refused_whole(idle):
    url, store = idle
    reply = httpx.post(f"{url}/v1/sweeps", json={**SCRIPT, "sweep": {"seed": list(range(16)) + [99]}})
    assert reply.status_code == 422  # 17 values: more than a field takes
    reply = httpx.post(f"{url}/v1/sweeps", params={"backend": "wan"},
                       json={**SCRIPT, "sweep": {"seed": list(range(7)), "steps": [2, 3, 4]}})
    assert reply.status_code == 429 and store.claim_next() is None  # 21 jobs, the queue takes 20
