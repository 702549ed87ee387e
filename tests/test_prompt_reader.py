"""A /v1/videos prompt read for film language (English and Chinese) into the one-shot script."""

from __future__ import annotations

import json

import pytest

from daotai.plan.planner import plan_script
from daotai.script.load import validate_script
from daotai.script.prompt_reader import read_prompt


def read(prompt: str) -> dict:
    """Field → value of what the prompt was read as."""
    return {name: item["value"] for name, item in read_prompt(prompt).as_record()["read"].items()}


def test_an_english_prompt_becomes_framing_angle_move_time_setting_and_subject():
    reading = read_prompt("slow push in on a woman at a night market, close-up, low angle")
    got = {name: (item["value"], item["words"]) for name, item in reading.as_record()["read"].items()}
    assert got == {
        "camera": ({"type": "dolly", "direction": "in"}, "slow push in"),
        "framing": ("close_up", "close-up"),
        "angle": ("low", "low angle"),
        "time_of_day": ("night", "night"),  # a night market is at night
        "setting": ("night market", "night market"),
        "subject": ("a woman", "woman"),
    }


def test_a_chinese_prompt_reads_the_same_way():
    assert read("夜市，女人，近景，推镜头，仰拍") == {
        "time_of_day": "night", "setting": "夜市", "subject": "女人", "framing": "medium_close_up",
        "camera": {"type": "dolly", "direction": "in"}, "angle": "low",
    }
    assert read("雨夜的小巷，一个穿红衣服的女孩，特写，缓缓向左摇30度，俯拍") == {
        "time_of_day": "night", "weather": "rain", "setting": "小巷", "subject": "一个穿红衣服的女孩",
        "framing": "close_up", "camera": {"type": "pan", "direction": "left", "rotate": [-30.0, 0.0, 0.0]},
        "angle": "high",
    }


@pytest.mark.parametrize(("prompt", "expected"), [
    ("night, slow push in to a close-up",
     {"time_of_day": "night", "camera": {"type": "dolly", "direction": "in"}, "framing": "close_up"}),
    ("A truck drives down a rainy street, wide shot, pan left 20°",  # 'truck' alone is a vehicle
     {"weather": "rain", "setting": "street", "framing": "wide",
      "camera": {"type": "pan", "direction": "left", "rotate": [-20.0, 0.0, 0.0]}}),
    ("MS on Lin, slow push-in", {"framing": "medium", "camera": {"type": "dolly", "direction": "in"}}),
    ("a cowboy at sunset, crane up 2 m, bird's eye view",  # a cowboy is not a cowboy shot
     {"time_of_day": "dusk", "angle": "birds_eye", "camera": {"type": "crane", "direction": "up", "motion": [0.0, 2.0, 0.0]}}),
    ("Close-up of a man in a red coat on a rooftop at dawn, handheld",
     {"framing": "close_up", "subject": "a man in a red coat", "setting": "rooftop", "time_of_day": "dawn",
      "camera": {"type": "handheld"}}),
    ("an old man pushing a 推车 in the park",  # 推 inside a word is no push-in
     {"subject": "an old man pushing a 推车", "setting": "park"}),
    ("a quiet morning", {"time_of_day": "morning"}),
    ("just some words", {}),
])
def test_prompts_read_as_a_director_means_them(prompt, expected):
    assert read(prompt) == expected


def test_what_cannot_be_applied_is_said():
    reading = read_prompt("whip pan right, then a close-up and a wide shot")
    assert reading.camera is not None and reading.camera.value == {"type": "pan", "direction": "right"}
    assert any("amount" in note for note in reading.ignored)  # 'whip' (fast) needs an amount
    assert reading.framing is not None and reading.framing.value == "close_up"
    assert any("'wide shot'" in note and "close-up" in note for note in reading.ignored)


def test_the_script_plans_at_night_with_a_push_in_to_a_close_up():
    reading = read_prompt("night, slow push in to a close-up")
    script = validate_script(reading.script(seconds=3, size="320x180"))
    assert script.scene.time_of_day.value == "night"
    shot = script.shots[0]
    assert (shot.framing.value, shot.camera.type.value, shot.duration) == ("close_up", "dolly", 3.0)
    assert shot.prompt == "night, slow push in to a close-up"  # the words reach a model as written
    plan = plan_script(script)
    start, end = plan.shots[0].cameras[0].cam_to_world, plan.shots[0].cameras[-1].cam_to_world
    assert (start[3], start[7], start[11]) != (end[3], end[7], end[11])  # the camera travels


def test_a_video_job_renders_what_its_prompt_says_and_records_the_reading(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.app import create_app
    from daotai.server.testing import thread_server
    from daotai.server.worker import run_job

    app = create_app(tmp_path / "data", start_dispatcher=False)
    store = app.state.store
    with thread_server(app) as url:
        reply = httpx.post(f"{url}/v1/videos", json={
            "prompt": "夜市，女人，近景，推镜头，仰拍", "seconds": "1", "size": "160x96", "model": "previz"})
        assert reply.status_code == 200, reply.text
        job_id = reply.json()["id"]
    monkeypatch.chdir(tmp_path)  # run_job changes the current folder: restored after
    job = store.claim_next()
    assert job.id == job_id and run_job(store.data_dir, job.id, job.attempts) == 0
    events = store.events(job_id)
    read_event = next(e for e in events if e["kind"] == "prompt_read")
    assert read_event["data"]["read"]["camera"] == {"value": {"type": "dolly", "direction": "in"}, "words": "推镜头"}
    plan = json.loads((store.job_dir(job_id) / "out" / "plan.json").read_text())
    shot = plan["shots"][0]
    assert plan["scene"]["time_of_day"] == "night" and shot["framing"] == "medium_close_up"
    assert shot["angle"] == "low" and shot["duration_s"] == pytest.approx(1.0)
