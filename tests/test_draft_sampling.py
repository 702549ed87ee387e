"""The drafter's sampling per call: --temperature, --top-p and the model, on the wire of the
OpenAI-compatible and Ollama APIs (loopback servers), from the CLI and from the library."""

from __future__ import annotations

import json

import pytest

from daotai.draft.drafter import DraftOptions, draft_script
from daotai.draft.llm import LLMConfig, LLMError, OllamaChatClient, Sampling, chat_text, resolve_config
from daotai.errors import OptionError
from test_draft_llm import VALID, Scripted, _openai, _run_cli, _text


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch, tmp_path):
    """Tests never read the developer's own LLM settings."""
    for name in ("DAOTAI_LLM_URL", "DAOTAI_LLM_MODEL", "DAOTAI_LLM_API", "DAOTAI_LLM_TIMEOUT", "DAOTAI_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DAOTAI_CONFIG", str(tmp_path / "no-config.toml"))


def test_draft_flags_reach_the_request(tmp_path, monkeypatch, capsys):
    out = tmp_path / "s.json"
    with Scripted([("text", _text(VALID))]) as server:
        code, _, stderr = _run_cli(["draft", "idea", "-o", str(out), "--llm", server.url + "/v1", "--llm-model", "qwen3",
                                    "--temperature", "0.7", "--top-p", "0.9"], monkeypatch, capsys)
    assert code == 0, stderr
    body = server.requests[0]
    assert (body["model"], body["temperature"], body["top_p"]) == ("qwen3", 0.7, 0.9)


def test_defaults_leave_top_p_to_the_server():
    with Scripted([("text", _text(VALID))]) as server:
        draft_script("idea", _openai(server.url))
    body = server.requests[0]
    assert body["temperature"] == 0.2 and "top_p" not in body


def test_each_call_chooses_its_model_and_sampling():
    """One client, two calls, two models: the per-call settings win over the config's, then it's back."""
    with Scripted([("text", "a")]) as server:
        client = _openai(server.url, model="default-model", temperature=0.1)
        chat_text(client, [{"role": "user", "content": "x"}], None, Sampling(model="big", temperature=1.2, top_p=0.5))
        chat_text(client, [{"role": "user", "content": "x"}])
    first, second = server.requests
    assert (first["model"], first["temperature"], first["top_p"]) == ("big", 1.2, 0.5)
    assert (second["model"], second["temperature"]) == ("default-model", 0.1) and "top_p" not in second


def test_repairs_keep_the_draft_sampling():
    broken = dict(VALID, fps=0)
    with Scripted([("text", _text(broken)), ("text", _text(VALID))]) as server:
        draft_script("idea", _openai(server.url), DraftOptions(rounds=2, sampling=Sampling(model="m2", top_p=0.8)))
    assert [(r["model"], r["top_p"]) for r in server.requests] == [("m2", 0.8), ("m2", 0.8)]


def test_ollama_takes_sampling_as_options():
    with Scripted([("text", _text(VALID))], flavour="ollama") as server:
        client = OllamaChatClient(LLMConfig(api="ollama", url=server.url, model="qwen2.5:7b", backoff_s=0.01))
        draft_script("idea", client, DraftOptions(sampling=Sampling(model="llama3.1:8b", temperature=0.0, top_p=0.95)))
    body = server.requests[0]
    assert body["model"] == "llama3.1:8b" and body["options"] == {"temperature": 0.0, "top_p": 0.95}


def test_ollama_per_call_model_stands_in_for_a_missing_config_model():
    with Scripted([("text", "ok")], flavour="ollama") as server:
        client = OllamaChatClient(LLMConfig(api="ollama", url=server.url, backoff_s=0.01))
        with pytest.raises(LLMError, match="needs a model name"):
            chat_text(client, [{"role": "user", "content": "x"}])
        assert chat_text(client, [{"role": "user", "content": "x"}], None, Sampling(model="m")) == "ok"


@pytest.mark.parametrize("flags, named", [
    (["--temperature", "2.5"], "--temperature: 2.5 must be between 0 and 2"),
    (["--top-p", "0"], "--top-p: 0.0 must be greater than 0 and at most 1"),
    (["--top-p", "1.5"], "--top-p: 1.5 must be greater than 0 and at most 1"),
])
def test_out_of_range_flags_are_refused_before_asking(flags, named, tmp_path, monkeypatch, capsys):
    with Scripted([("text", _text(VALID))]) as server:
        code, _, stderr = _run_cli(["draft", "idea", "-o", str(tmp_path / "s.json"), "--llm", server.url, *flags],
                                   monkeypatch, capsys)
    assert code == OptionError.exit_code and named in stderr
    assert server.requests == []


def test_sampling_checks_its_ranges_for_library_callers():
    with pytest.raises(OptionError, match="temperature: -1 must be between 0 and 2"):
        Sampling(temperature=-1)
    with pytest.raises(OptionError, match="top_p: 0 must be greater than 0"):
        Sampling(top_p=0)


def test_config_file_sets_temperature_and_top_p(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[llm]\nurl = "http://127.0.0.1:8080/v1"\ntemperature = 0.6\ntop_p = 0.85\n', encoding="utf-8")
    resolved = resolve_config(env={"DAOTAI_CONFIG": str(config)})
    assert (resolved.temperature, resolved.top_p) == (0.6, 0.85)
    config.write_text('[llm]\nurl = "http://127.0.0.1:8080/v1"\ntop_p = 3\n', encoding="utf-8")
    with pytest.raises(LLMError, match=r"llm.top_p: 3.0 must be greater than 0 and at most 1"):
        resolve_config(env={"DAOTAI_CONFIG": str(config)})


def test_prompts_sampling_flags_need_enhance(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "minimal.json"
    code, _, stderr = _run_cli(["prompts", str(example), "--temperature", "0.5"], monkeypatch, capsys)
    assert code == OptionError.exit_code and "add --enhance" in stderr


def test_prompts_enhance_sends_the_sampling(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "minimal.json"
    with Scripted([("text", "A richer prompt about a programmer.")]) as server:
        code, stdout, stderr = _run_cli(["prompts", str(example), "--enhance", "--llm", server.url, "--json",
                                         "--temperature", "0.9", "--top-p", "0.6"], monkeypatch, capsys)
    assert code == 0, stderr
    assert json.loads(stdout)["shots"][0]["enhanced"] is True
    assert (server.requests[0]["temperature"], server.requests[0]["top_p"]) == (0.9, 0.6)
