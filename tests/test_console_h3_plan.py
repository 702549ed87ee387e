"""Before Render with MiniMax-H3: the service and the console say which workflow each shot will use
and what it will be conditioned on, in the order the backend sends it (no model needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import thread_server  # noqa: E402
from test_console_render_plan import live, page  # noqa: E402,F401  (fixtures: a real serve, headless Chromium)

SCRIPT = {
    "fps": 24, "size": "160x96", "seed": 5,
    "characters": [{"id": "ana", "colour": "#3366cc"}, {"id": "bo"}],
    "shots": [
        {"shot_id": "move", "duration": 2, "subject": "ana", "characters": ["ana", "bo"], "camera": "pan_left"},
        {"shot_id": "still", "duration": 2, "characters": ["bo"]},
        {"shot_id": "long", "duration": 16, "characters": ["bo"]},
    ],
}


def test_the_render_plan_names_each_shots_h3_workflow_and_references(tmp_path):
    app = create_app(tmp_path / "data", start_dispatcher=False)
    with thread_server(app) as url:
        reply = httpx.post(f"{url}/v1/scripts/render-plan", json=SCRIPT, params={"backend": "h3"})
        forced = httpx.post(f"{url}/v1/scripts/render-plan", json={**SCRIPT, "options": {"workflow": "t2va"}},
                            params={"backend": "h3"})
        plain = httpx.post(f"{url}/v1/scripts/render-plan", json=SCRIPT)
        shorter = httpx.post(f"{url}/v1/scripts/render-plan", json={**SCRIPT, "options": {"segment_seconds": 5.5}},
                             params={"backend": "h3"})
    assert reply.status_code == 200, reply.text
    shots = {s["shot_id"]: s for s in reply.json()["shots"]}
    assert shots["move"]["workflow"] == "ref2va" and "camera moves" in shots["move"]["why"]
    assert shots["move"]["references"] == ["<Picture 1> ana (colour swatch)", "<Picture 2> bo (colour swatch)",
                                           "<Video 1> previz of move"]
    assert (shots["still"]["workflow"], shots["still"]["references"], shots["still"]["segments"]) == ("t2va", [], 1)
    assert shots["long"]["segments"] == 2  # 16 s: two generations, the second continuing from the first
    assert {s["workflow"] for s in forced.json()["shots"]} == {"t2va"}
    # At most 5.5 s a generation, as the backend cuts it: 124-frame segments sharing a frame, four for 16 s
    assert shorter.status_code == 200, shorter.text
    assert [s["segments"] for s in shorter.json()["shots"]] == [1, 1, 4]
    assert all("workflow" not in s for s in plain.json()["shots"])  # other backends: nothing about H3


def test_without_the_model_pulled_every_shot_will_render(tmp_path, monkeypatch):
    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)  # keys are computed: the model must be resolved
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    app = create_app(tmp_path / "data", start_dispatcher=False)
    with thread_server(app) as url:
        reply = httpx.post(f"{url}/v1/scripts/render-plan", json=SCRIPT, params={"backend": "h3"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["rendered"] == ["move", "still", "long"] and body["cache"] is False
    assert body["shots"][0]["workflow"] == "ref2va"


def test_the_console_shows_the_h3_workflow_before_render(page):  # noqa: F811  (the imported fixture)
    page.select_option("#example-select", "quick")
    page.click("#load-example")
    page.wait_for_selector("#validation-status[data-state=ok]")
    page.select_option("#backend-select", "h3")
    page.wait_for_selector("#render-plan .plan-shot[data-workflow]:not([data-workflow=''])")
    workflows = page.locator("#render-plan .plan-shot").evaluate_all("items => items.map(li => li.dataset.workflow)")
    assert workflows and set(workflows) <= {"t2va", "ref2va", "fl2va"}
    text = page.inner_text("#render-plan")
    assert any(w in text for w in ("t2va", "ref2va"))
    if "ref2va" in workflows:
        assert "<Video 1> previz of" in text
