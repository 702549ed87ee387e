"""Drafter against real loopback HTTP servers speaking the OpenAI chat API and Ollama's API."""

from __future__ import annotations

import copy
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from daotai.cli import main
from daotai.draft.drafter import Drafted, DraftOptions, RoundFailed, Token, draft_events, draft_script
from daotai.draft.llm import LLMConfig, LLMError, OllamaChatClient, OpenAIChatClient, create_client, resolve_config
from daotai.errors import DependencyMissing, ScriptError
from daotai.plan.planner import plan_script
from daotai.script.jsonschema import script_json_schema
from daotai.script.load import load_script, validate_script

IDEA_ZH = "一个戴眼镜的程序员清晨走进办公室，镜头缓慢推进，然后切到窗外的城市全景"
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")

VALID = {
    "title": "清晨的办公室",
    "fps": 24,
    "size": "360p",
    "scene": {
        "name": "open-plan office",
        "description": "glass walls, morning sun through half-closed blinds, rows of desks",
        "time_of_day": "morning",
    },
    "characters": [
        {
            "id": "xiaoli",
            "name": "小李",
            "appearance": "a young programmer in his late twenties, black-rimmed glasses, grey hoodie, laptop bag",
        }
    ],
    "shots": [
        {
            "shot_id": "s01",
            "duration": 4,
            "subject": "xiaoli",
            "framing": "full",
            "camera": {"type": "dolly", "direction": "in"},
            "action": "小李 walks into the office, pushes his glasses up and sits down",
        },
        {
            "shot_id": "s02",
            "duration": 3,
            "framing": "extreme_wide",
            "camera": "static",
            "characters": [],
            "action": "the city skyline outside the window at sunrise, glass towers catching the light",
        },
    ],
}
BROKEN = copy.deepcopy(VALID)
BROKEN["shots"][0]["duration"] = -2
BROKEN["shots"][1]["framing"] = "gigantic"


class Scripted:
    """A loopback chat server that plays back a list of answers (the last one repeats)."""

    def __init__(self, answers: list[tuple], flavour: str = "openai"):
        self.answers = list(answers)
        self.flavour = flavour
        self.requests: list[dict] = []
        self.paths: list[str] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                scripted.requests.append(body)
                scripted.paths.append(self.path)
                index = min(len(scripted.requests), len(scripted.answers)) - 1
                try:
                    scripted.reply(self, body, scripted.answers[index])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "Scripted":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply(self, handler: BaseHTTPRequestHandler, body: dict, answer: tuple) -> None:
        """Send one scripted answer: ('text', s), ('sleep', seconds, s), ('status', code, s), ('plain', s)."""
        kind = answer[0]
        if kind == "sleep":
            time.sleep(answer[1])
            answer = ("text", answer[2])
            kind = "text"
        if kind == "status":
            self._send(handler, answer[1], "application/json", json.dumps({"error": {"message": answer[2]}}).encode())
            return
        if kind == "reject_schema" and ("response_format" in body or isinstance(body.get("format"), dict)):
            self._send(handler, 400, "application/json", b'{"error": {"message": "response_format is not supported"}}')
            return
        text = answer[-1]
        if kind == "plain":  # a server that ignores "stream": one chat.completion object
            reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
            self._send(handler, 200, "application/json", json.dumps(reply).encode())
            return
        pieces = [text[i : i + 17] for i in range(0, len(text), 17)] or [""]
        if self.flavour == "openai":
            lines = [
                "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) + "\n\n" for p in pieces
            ] + ["data: [DONE]\n\n"]
            content_type = "text/event-stream"
        else:
            lines = [json.dumps({"message": {"role": "assistant", "content": p}, "done": False}) + "\n" for p in pieces]
            lines.append(json.dumps({"message": {"role": "assistant", "content": ""}, "done": True}) + "\n")
            content_type = "application/x-ndjson"
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Connection", "close")
        handler.end_headers()
        for line in lines:  # written piece by piece: a real stream, not one body
            handler.wfile.write(line.encode())
            handler.wfile.flush()

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, code: int, content_type: str, data: bytes) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def _openai(url: str, **kw) -> OpenAIChatClient:
    return OpenAIChatClient(LLMConfig(api="openai", url=url + "/v1", timeout_s=kw.pop("timeout_s", 5.0), backoff_s=0.01,
                                      **kw))


def _text(data) -> str:
    return json.dumps(data, ensure_ascii=False)


def _run_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """Run the real entry point in-process; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["daotai", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch, tmp_path):
    """Tests never read the developer's own LLM settings."""
    for name in ("DAOTAI_LLM_URL", "DAOTAI_LLM_MODEL", "DAOTAI_LLM_API", "DAOTAI_LLM_TIMEOUT", "DAOTAI_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DAOTAI_CONFIG", str(tmp_path / "no-config.toml"))


def test_valid_answer_is_written_and_request_carries_schema_and_idea(tmp_path, monkeypatch, capsys):
    out = tmp_path / "script.json"
    with Scripted([("text", _text(VALID))]) as server:
        code, stdout, stderr = _run_cli(
            ["draft", IDEA_ZH, "-o", str(out), "--llm", server.url + "/v1", "--shots", "2", "--duration", "7"],
            monkeypatch,
            capsys,
        )
    assert code == 0, stderr
    assert "drafted" in stdout and "2 shots" in stdout
    assert load_script(out) == validate_script(VALID)
    request = server.requests[0]
    assert server.paths == ["/v1/chat/completions"]
    assert request["stream"] is True
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["schema"] == script_json_schema()
    system, user = request["messages"]
    assert "exactly 2 shots" in system["content"] and "dolly_zoom" in system["content"]
    assert IDEA_ZH in user["content"]


def test_chinese_idea_gives_prompts_without_chinese_except_quoted_names():
    with Scripted([("text", _text(VALID))]) as server:
        drafted = draft_script(IDEA_ZH, _openai(server.url))
    names = {c.name for c in drafted.script.characters}
    plan = plan_script(drafted.script)
    for shot in plan.shots:
        quoted = re.findall(r'"([^"]*)"', shot.prompt)
        assert all(q in names for q in quoted if CJK.search(q)), quoted
        assert not CJK.search(re.sub(r'"[^"]*"', "", shot.prompt)), shot.prompt
    assert '"小李"' in plan.shots[0].prompt and "dollies in" in plan.shots[0].prompt


def test_chinese_in_english_fields_is_sent_back_for_repair():
    lazy = copy.deepcopy(VALID)
    lazy["characters"][0]["appearance"] = "戴眼镜的年轻程序员"
    with Scripted([("text", _text(lazy)), ("text", _text(VALID))]) as server:
        drafted = draft_script(IDEA_ZH, _openai(server.url), DraftOptions(rounds=2))
    assert drafted.rounds == 2
    repair = server.requests[1]["messages"][-1]["content"]
    assert "characters[0].appearance: '戴眼镜的年轻程序员' must be written in English" in repair


def test_invalid_json_then_repair(tmp_path):
    with Scripted([("text", "Here you go: {\"title\": \"x\", shots: [}"), ("text", _text(VALID))]) as server:
        events = list(draft_events(IDEA_ZH, _openai(server.url), DraftOptions(rounds=2)))
    failed = [e for e in events if isinstance(e, RoundFailed)]
    assert len(failed) == 1 and "is not valid JSON" in str(failed[0].issues[0])
    assert isinstance(events[-1], Drafted) and events[-1].rounds == 2
    messages = server.requests[1]["messages"]
    assert messages[-2] == {"role": "assistant", "content": "Here you go: {\"title\": \"x\", shots: [}"}
    assert "is not valid JSON" in messages[-1]["content"]


def test_invalid_json_with_one_round_fails_and_writes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "script.json"
    with Scripted([("text", "```json\n{\"shots\": [\n```")]) as server:
        code, _, stderr = _run_cli(["draft", "idea", "-o", str(out), "--llm", server.url, "--rounds", "1"],
                                   monkeypatch, capsys)
    assert code == ScriptError.exit_code
    assert "still invalid after 1 round" in stderr and "is not valid JSON" in stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert "Traceback" not in stderr


def test_schema_errors_are_sent_back_verbatim_and_repaired():
    with pytest.raises(ScriptError) as expected:
        validate_script(BROKEN)
    lines = [str(issue) for issue in expected.value.issues]
    assert len(lines) == 2
    with Scripted([("text", _text(BROKEN)), ("text", _text(VALID))]) as server:
        drafted = draft_script(IDEA_ZH, _openai(server.url), DraftOptions(rounds=3))
    assert drafted.rounds == 2 and len(server.requests) == 2
    repair = server.requests[1]["messages"][-1]["content"]
    for line in lines:
        assert line in repair.splitlines()


def test_endless_invalid_answers_fail_bounded_and_leave_existing_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "script.json"
    out.write_text("keep me", encoding="utf-8")
    with Scripted([("text", _text(BROKEN))]) as server:
        code, _, stderr = _run_cli(["draft", "idea", "-o", str(out), "--llm", server.url, "--rounds", "3"],
                                   monkeypatch, capsys)
        requests = len(server.requests)
    assert code == ScriptError.exit_code and requests == 3
    assert "after 3 rounds" in stderr and "shots[0].duration" in stderr and "Traceback" not in stderr
    assert out.read_text(encoding="utf-8") == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["script.json"]  # no temp files left


def test_slow_answer_times_out_with_clear_error(tmp_path, monkeypatch, capsys):
    out = tmp_path / "script.json"
    with Scripted([("sleep", 2.0, _text(VALID))]) as server:
        started = time.monotonic()
        code, _, stderr = _run_cli(
            ["draft", "idea", "-o", str(out), "--llm", server.url, "--timeout", "0.3", "--retries", "0"],
            monkeypatch, capsys,
        )
        elapsed = time.monotonic() - started
    assert code == LLMError.exit_code
    assert "within 0.3 s (timeout" in stderr and "DAOTAI_LLM_TIMEOUT" in stderr
    assert elapsed < 1.8 and not out.exists()


def test_transient_server_error_is_retried_with_backoff():
    with Scripted([("status", 503, "loading model"), ("text", _text(VALID))]) as server:
        drafted = draft_script("idea", _openai(server.url, retries=2))
    assert drafted.rounds == 1 and len(server.requests) == 2


def test_client_error_is_not_retried():
    with Scripted([("status", 401, "bad key")]) as server:
        with pytest.raises(LLMError, match="HTTP 401.*bad key"):
            draft_script("idea", _openai(server.url, retries=3, structured=False))
        assert len(server.requests) == 1


def test_streaming_answer_arrives_in_pieces(tmp_path, monkeypatch, capsys):
    with Scripted([("text", _text(VALID))]) as server:
        events = list(draft_events("idea", _openai(server.url)))
        tokens = [e.text for e in events if isinstance(e, Token)]
        assert len(tokens) > 10 and "".join(tokens) == _text(VALID)
        out = tmp_path / "s.json"
        code, _, stderr = _run_cli(["draft", "idea", "-o", str(out), "--llm", server.url, "--show-tokens"],
                                   monkeypatch, capsys)
    assert code == 0 and '"shot_id": "s01"' in stderr  # the raw answer was echoed as it streamed
    assert json.loads(out.read_text(encoding="utf-8")) == VALID


def test_non_streaming_server_answer_is_accepted():
    with Scripted([("plain", _text(VALID))]) as server:
        assert draft_script("idea", _openai(server.url)).script == validate_script(VALID)


def test_server_without_structured_output_falls_back_to_plain_json():
    wrapped = "Sure! Here is the script:\n```json\n" + _text(VALID) + "\n```\nEnjoy."
    with Scripted([("reject_schema", wrapped)]) as server:
        client = _openai(server.url)
        drafted = draft_script("idea", client)
    assert drafted.script == validate_script(VALID)
    assert "response_format" in server.requests[0] and "response_format" not in server.requests[1]
    assert client.structured_ok is False


def test_ollama_native_api(tmp_path, monkeypatch, capsys):
    out = tmp_path / "script.json"
    monkeypatch.setenv("DAOTAI_LLM_MODEL", "qwen2.5:7b")
    with Scripted([("text", _text(BROKEN)), ("text", _text(VALID))], flavour="ollama") as server:
        monkeypatch.setenv("DAOTAI_LLM_URL", "ollama+" + server.url)
        code, stdout, stderr = _run_cli(["draft", IDEA_ZH, "-o", str(out)], monkeypatch, capsys)
    assert code == 0, stderr
    assert server.paths == ["/api/chat", "/api/chat"]
    first = server.requests[0]
    assert first["model"] == "qwen2.5:7b" and first["stream"] is True and first["format"] == script_json_schema()
    assert "shots[0].duration" in server.requests[1]["messages"][-1]["content"]
    assert load_script(out) == validate_script(VALID)


def test_ollama_without_schema_support_falls_back_to_json_format():
    with Scripted([("reject_schema", _text(VALID))], flavour="ollama") as server:
        client = OllamaChatClient(LLMConfig(api="ollama", url=server.url, model="m", backoff_s=0.01))
        drafted = draft_script("idea", client)
    assert drafted.script == validate_script(VALID)
    assert [r["format"] == "json" for r in server.requests] == [False, True]


def test_ollama_without_model_names_the_setting():
    client = OllamaChatClient(LLMConfig(api="ollama", url="http://127.0.0.1:1"))
    with pytest.raises(LLMError, match="DAOTAI_LLM_MODEL"):
        list(client.chat([{"role": "user", "content": "x"}]))


def test_no_backend_configured_is_one_clear_message(tmp_path, monkeypatch, capsys):
    code, stdout, stderr = _run_cli(["draft", "idea", "-o", str(tmp_path / "s.json")], monkeypatch, capsys)
    assert code == LLMError.exit_code
    assert "no language model is configured" in stderr
    assert "--llm" in stderr and "DAOTAI_LLM_URL" in stderr and "config.toml" in stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) <= 3
    assert list(tmp_path.iterdir()) == []


def test_unreachable_server_is_a_clear_error(tmp_path, monkeypatch, capsys):
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, stderr = _run_cli(
        ["draft", "idea", "-o", str(tmp_path / "s.json"), "--llm", f"http://127.0.0.1:{port}/v1", "--retries", "0"],
        monkeypatch,
        capsys,
    )
    assert code == LLMError.exit_code and "cannot reach openai API" in stderr and "Traceback" not in stderr


def test_config_precedence_flag_env_file(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        '[llm]\nurl = "http://127.0.0.1:8080/v1"\nmodel = "file-model"\ntimeout = 30\n\n'
        '[llm.profiles.local]\nurl = "http://127.0.0.1:11434"\nmodel = "qwen2.5:7b"\n',
        encoding="utf-8",
    )
    env = {"DAOTAI_CONFIG": str(config)}
    from_file = resolve_config(env=env)
    assert (from_file.api, from_file.url, from_file.model, from_file.timeout_s) == (
        "openai", "http://127.0.0.1:8080/v1", "file-model", 30.0,
    )
    from_env = resolve_config(env={**env, "DAOTAI_LLM_URL": "http://10.0.0.2:9000/", "DAOTAI_LLM_MODEL": "env-model"})
    assert (from_env.url, from_env.model) == ("http://10.0.0.2:9000", "env-model")
    profile = resolve_config("local", env={**env, "DAOTAI_LLM_URL": "http://10.0.0.2:9000"})
    assert (profile.api, profile.model) == ("ollama", "qwen2.5:7b")
    assert resolve_config("/models/q.gguf", env=env).api == "llamacpp"
    with pytest.raises(LLMError, match="neither a URL.*profiles: local"):
        resolve_config("nosuch", env=env)
    config.write_text("[llm\nurl=", encoding="utf-8")
    with pytest.raises(LLMError, match="cannot be read as TOML"):
        resolve_config(env=env)


def test_gguf_without_llama_cpp_names_the_pip_command(tmp_path):
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("llama-cpp-python is installed here")
    with pytest.raises(DependencyMissing, match=r"pip install 'daotai\[llm\]'"):
        create_client(resolve_config(str(tmp_path / "m.gguf"), env={"DAOTAI_CONFIG": str(tmp_path / "none")}))


def _write_valid(tmp_path: Path) -> Path:
    path = tmp_path / "office_zh.json"
    path.write_text(_text(VALID), encoding="utf-8")
    return path


def test_prompts_enhance_keeps_camera_words_names_and_budget(tmp_path, monkeypatch, capsys):
    script = _write_valid(tmp_path)
    camera = plan_script(validate_script(VALID)).shots[0].prompt.split(". ")[-1]
    assert camera.startswith("The camera slowly dollies in")
    rich = 'Cinematic full shot of "小李", a young programmer with black-rimmed glasses, warm sunlight. ' * 12
    with Scripted([("text", rich)]) as server:
        code, stdout, stderr = _run_cli(
            ["prompts", str(script), "--enhance", "--model", "ltx", "--json", "--llm", server.url], monkeypatch, capsys
        )
        asked = server.requests[0]
    assert code == 0, stderr
    rows = json.loads(stdout)["shots"]
    assert len(rows) == 2 and all(r["enhanced"] and r["tokens"] <= r["budget"] == 128 for r in rows)
    assert rows[0]["prompt"].endswith(camera)  # the dropped camera sentence was put back
    assert rows[0]["prompt"].startswith("Cinematic full shot of")
    assert "response_format" not in asked and asked["messages"][1]["content"].startswith("Full shot of")


def test_prompts_shows_planner_prompts_and_negatives(tmp_path, monkeypatch, capsys):
    code, stdout, stderr = _run_cli(["prompts", str(_write_valid(tmp_path)), "--json"], monkeypatch, capsys)
    assert code == 0, stderr
    plan = plan_script(validate_script(VALID))
    shown = json.loads(stdout)
    assert shown["model"] == "wan"
    assert [r["prompt"] for r in shown["shots"]] == [s.prompt for s in plan.shots]
    assert [r["negative_prompt"] for r in shown["shots"]] == [s.negative_prompt for s in plan.shots]
    code, _, stderr = _run_cli(["prompts", str(_write_valid(tmp_path)), "--model", "sora"], monkeypatch, capsys)
    assert code == ScriptError.exit_code and "--model: 'sora' must be one of: wan" in stderr
