"""Language-model backends for the drafter: configured in one place, local by default.

Where a model lives is resolved once into an :class:`LLMConfig`, from (first match wins)
the ``--llm`` flag, the environment (``DAOTAI_LLM_URL``, ``DAOTAI_LLM_MODEL``,
``DAOTAI_LLM_API``, ``DAOTAI_LLM_TIMEOUT``) and a TOML config file (``$DAOTAI_CONFIG`` or
``~/.config/daotai/config.toml``)::

    [llm]
    url = "http://127.0.0.1:8080/v1"      # any OpenAI-compatible server
    model = "qwen2.5-7b-instruct"

    [llm.profiles.ollama]                  # --llm ollama
    url = "http://127.0.0.1:11434"
    api = "ollama"
    model = "qwen2.5:7b"

The config file may also set ``temperature`` and ``top_p``. Each call may choose its own
model and sampling (:class:`Sampling`: ``--llm-model``, ``--temperature``, ``--top-p``), so
one client serves requests for several models of a server.

There is no cloud default and nothing touches the network at import. Clients stream
tokens (``chat`` is a generator of text pieces), apply timeouts and retry transient
failures (connection refused, timeouts, HTTP 429/5xx) a bounded number of times with
exponential backoff.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol
from urllib.parse import urlsplit

from daotai.errors import BackendError, DependencyMissing, Issue, OptionError

APIS = ("openai", "ollama", "llamacpp")
OLLAMA_PORT = 11434
MAX_TEMPERATURE = 2.0  # the OpenAI API's range, which local servers follow
CONFIGURE_HINT = (
    "configure a local language model with --llm <url | profile | model.gguf>, or set DAOTAI_LLM_URL "
    "(e.g. http://127.0.0.1:8080/v1 for llama.cpp / LM Studio / vLLM, http://127.0.0.1:11434 for Ollama) "
    "and DAOTAI_LLM_MODEL, or add an [llm] table to ~/.config/daotai/config.toml ($DAOTAI_CONFIG)"
)


class LLMError(BackendError):
    """The language model is not configured, not reachable or answered with an error."""


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to reach a language model."""

    api: str  # "openai" | "ollama" | "llamacpp"
    url: str  # base URL, or a .gguf path for llamacpp
    model: str = ""
    api_key: str = ""  # sent as a bearer token when set (some local servers want one)
    timeout_s: float = 120.0  # longest wait for the next byte of an answer
    connect_timeout_s: float = 10.0
    retries: int = 2  # extra attempts after the first, on transient failures only
    backoff_s: float = 1.0  # first wait between attempts; doubles each time
    temperature: float = 0.2
    structured: bool = True  # ask for JSON-schema constrained output where the API has it
    top_p: float | None = None  # nucleus sampling; None: the server's default

    def describe(self) -> str:
        """One-line description for messages, e.g. 'openai API at http://…/v1 (model x)'."""
        model = f" (model {self.model})" if self.model else ""
        return f"{self.api} API at {self.url}{model}"


def sampling_issues(temperature: float | None, top_p: float | None, prefix: str = "") -> list[Issue]:
    """Problems with sampling settings; ``prefix`` names them as the user wrote them ('--' for flags)."""
    issues = []
    if temperature is not None and not 0.0 <= temperature <= MAX_TEMPERATURE:
        issues.append(Issue(f"{prefix}temperature", temperature, f"must be between 0 and {MAX_TEMPERATURE:g}"))
    if top_p is not None and not 0.0 < top_p <= 1.0:
        issues.append(Issue(f"{prefix}top{'-' if prefix == '--' else '_'}p", top_p,
                            "must be greater than 0 and at most 1"))
    return issues


@dataclass(frozen=True)
class Sampling:
    """One call's model and sampling; None keeps the config's (the server's default for top_p)."""

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        issues = sampling_issues(self.temperature, self.top_p)
        if issues:
            raise OptionError(issues)

    def settings(self, config: "LLMConfig") -> tuple[str, float, float | None]:
        """(model, temperature, top_p) for a call under ``config``."""
        return (self.model or config.model, config.temperature if self.temperature is None else self.temperature,
                config.top_p if self.top_p is None else self.top_p)


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file: $DAOTAI_CONFIG, else $XDG_CONFIG_HOME or ~/.config, /daotai/config.toml."""
    env = os.environ if env is None else env
    if env.get("DAOTAI_CONFIG"):
        return Path(env["DAOTAI_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path(env.get("HOME", "~")) / ".config"
    return (base / "daotai" / "config.toml").expanduser()


def _read_config_file(path: Path) -> dict[str, Any]:
    """The [llm] table of the config file ({} when there is no file)."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LLMError(f"config file {path}: cannot be read as TOML ({exc})") from None
    table = data.get("llm", {})
    if not isinstance(table, dict):
        raise LLMError(f"config file {path}: [llm] must be a table")
    return table


def guess_api(url: str) -> str:
    """The API a URL most likely speaks: .gguf → llamacpp, Ollama's port without /v1 → ollama."""
    if url.lower().endswith(".gguf"):
        return "llamacpp"
    for prefix in ("ollama+", "openai+"):
        if url.startswith(prefix):
            return prefix[:-1]
    parts = urlsplit(url)
    if parts.port == OLLAMA_PORT and "/v1" not in parts.path:
        return "ollama"
    if parts.path.rstrip("/").endswith("/api/chat"):
        return "ollama"
    return "openai"


def resolve_config(
    flag: str | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    **overrides: Any,
) -> LLMConfig:
    """Resolve the one LLM config from flag, environment and config file; LLMError if none."""
    env = os.environ if env is None else env
    path = config_path or default_config_path(env)
    table = _read_config_file(path)
    profiles = table.get("profiles", {}) if isinstance(table.get("profiles", {}), dict) else {}
    settings: dict[str, Any] = {k: v for k, v in table.items() if k != "profiles"}
    if env.get("DAOTAI_LLM_URL"):
        settings = {**settings, "url": env["DAOTAI_LLM_URL"], "api": env.get("DAOTAI_LLM_API") or None}
    for key, name in (("model", "DAOTAI_LLM_MODEL"), ("api_key", "DAOTAI_LLM_API_KEY"), ("timeout", "DAOTAI_LLM_TIMEOUT")):
        if env.get(name):
            settings[key] = env[name]
    if flag:
        if flag in profiles:
            settings = {**settings, **profiles[flag]}
        elif "://" in flag or flag.lower().endswith(".gguf"):
            settings = {**settings, "url": flag, "api": None}
        else:
            known = ", ".join(sorted(profiles)) or "none defined"
            raise LLMError(
                f"--llm {flag!r} is neither a URL, a .gguf file nor a profile in {path} (profiles: {known}); "
                + CONFIGURE_HINT
            )
    if model:
        settings["model"] = model
    if not settings.get("url"):
        raise LLMError("no language model is configured; " + CONFIGURE_HINT)
    return _build(settings, path, overrides)


def _build(settings: Mapping[str, Any], source: Path, overrides: Mapping[str, Any]) -> LLMConfig:
    """Check and convert raw settings into an LLMConfig."""
    url = str(settings["url"])
    api = settings.get("api") or guess_api(url)
    if api not in APIS:
        raise LLMError(f"llm api {api!r} is not known; use one of: {', '.join(APIS)}")
    for prefix in ("ollama+", "openai+"):
        url = url.removeprefix(prefix)
    if api != "llamacpp" and urlsplit(url).scheme not in ("http", "https"):
        raise LLMError(f"llm url {url!r} must start with http:// or https://")
    try:
        timeout = float(settings.get("timeout", 120.0))
        retries = int(settings.get("retries", 2))
        temperature = float(settings.get("temperature", 0.2))
        top_p = None if settings.get("top_p") is None else float(settings["top_p"])
    except (TypeError, ValueError):
        raise LLMError(f"llm timeout / retries / temperature / top_p in {source} or the environment must be "
                       "numbers") from None
    if not timeout > 0 or retries < 0:
        raise LLMError(f"llm timeout {timeout:g} must be > 0 and retries {retries} must be >= 0")
    bad = sampling_issues(temperature, top_p, prefix="llm.")
    if bad:
        raise LLMError(f"{source}: " + "; ".join(str(issue) for issue in bad))
    config = LLMConfig(
        api=api,
        url=url.rstrip("/"),
        model=str(settings.get("model") or ""),
        api_key=str(settings.get("api_key") or ""),
        timeout_s=timeout,
        retries=retries,
        temperature=temperature,
        top_p=top_p,
        structured=bool(settings.get("structured", True)),
    )
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})


class ChatClient(Protocol):
    """A chat model: ``chat`` yields the answer's text pieces as they arrive."""

    config: LLMConfig

    def chat(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None,
             sampling: Sampling | None = None) -> Iterator[str]:
        """Stream the answer to ``messages``; ``schema`` constrains it to JSON where supported;
        ``sampling`` chooses this call's model, temperature and top_p."""
        ...

    def close(self) -> None:
        """Release connections or the in-process model."""
        ...


def create_client(config: LLMConfig) -> ChatClient:
    """The client for a config's API (httpx for servers, llama-cpp-python in process)."""
    if config.api == "openai":
        return OpenAIChatClient(config)
    if config.api == "ollama":
        return OllamaChatClient(config)
    return LlamaCppClient(config)


def chat_text(client: ChatClient, messages: list[dict[str, str]], schema: dict[str, Any] | None = None,
              sampling: Sampling | None = None) -> str:
    """The whole answer as one string (no streaming display)."""
    return "".join(client.chat(messages, schema, sampling))


class _HttpClient:
    """Shared HTTP plumbing: one httpx client, retries with backoff, clear errors."""

    endpoint_path = ""

    def __init__(self, config: LLMConfig):
        import httpx  # imported here so that importing daotai never needs it

        self.config = config
        self._httpx = httpx
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._http = httpx.Client(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            headers=headers,
            trust_env=False,  # a local model must not be routed through a proxy from the environment
        )

    @property
    def endpoint(self) -> str:
        """Full URL of the chat endpoint."""
        return self.config.url

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def _stream_lines(self, body: dict[str, Any]) -> Iterator[str]:
        """POST body and yield response lines, retrying transient failures before the first line."""
        httpx = self._httpx
        attempts = self.config.retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            started = False
            try:
                with self._http.stream("POST", self.endpoint, json=body) as response:
                    if response.status_code >= 400:
                        detail = response.read().decode("utf-8", "replace")[:300]
                        if (response.status_code == 429 or response.status_code >= 500) and not last:
                            self._wait(attempt)
                            continue
                        raise _HttpStatus(response.status_code, detail)
                    for line in response.iter_lines():
                        started = True
                        yield line
                    return
            except httpx.TimeoutException:
                if started or last:
                    raise LLMError(
                        f"no answer from {self.config.describe()} within {self.config.timeout_s:g} s "
                        f"(timeout, {attempt + 1} attempt{'s' if attempt else ''}); the model may be loading or too "
                        "slow: raise the timeout (--timeout, DAOTAI_LLM_TIMEOUT) or use a smaller model"
                    ) from None
            except httpx.TransportError as exc:
                if started or last:
                    raise LLMError(
                        f"cannot reach {self.config.describe()} ({type(exc).__name__}: {exc}); start the server "
                        "or " + CONFIGURE_HINT
                    ) from None
            self._wait(attempt)

    def _wait(self, attempt: int) -> None:
        """Exponential backoff between attempts."""
        time.sleep(self.config.backoff_s * (2**attempt))


class _HttpStatus(LLMError):
    """An HTTP error status from the model server."""

    def __init__(self, status: int, detail: str):
        self.status = status
        self.detail = detail
        super().__init__(f"the model server answered HTTP {status}: {detail.strip()}")


def openai_endpoint(url: str) -> str:
    """…/v1/chat/completions from a base URL given with or without /v1 or the full path."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


class OpenAIChatClient(_HttpClient):
    """Any OpenAI-compatible chat server (llama.cpp server, LM Studio, vLLM, Ollama's /v1)."""

    def __init__(self, config: LLMConfig):
        super().__init__(config)
        self.structured_ok = config.structured  # turned off once the server refuses response_format

    @property
    def endpoint(self) -> str:
        """The chat-completions URL."""
        return openai_endpoint(self.config.url)

    def request_body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                     sampling: Sampling | None = None) -> dict[str, Any]:
        """The JSON body of one streaming chat request."""
        model, temperature, top_p = (sampling or Sampling()).settings(self.config)
        body: dict[str, Any] = {
            "model": model or "local-model",  # most local servers ignore the name
            "messages": messages,
            "temperature": temperature,
            "stream": True,
        }
        if top_p is not None:
            body["top_p"] = top_p
        if schema is not None and self.structured_ok:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "daotai_script", "schema": schema, "strict": False},
            }
        return body

    def chat(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None,
             sampling: Sampling | None = None) -> Iterator[str]:
        """Stream the answer; fall back to plain JSON when response_format is refused."""
        body = self.request_body(messages, schema, sampling)
        try:
            yield from self._parse(self._stream_lines(body))
        except _HttpStatus as exc:
            # Servers without structured output answer 400/422 (or 501) naming the field.
            if "response_format" in body and exc.status in (400, 404, 415, 422, 500, 501):
                self.structured_ok = False
                yield from self._parse(self._stream_lines(self.request_body(messages, schema, sampling)))
            else:
                raise

    def _parse(self, lines: Iterator[str]) -> Iterator[str]:
        """Text pieces from SSE 'data:' lines, or from one plain JSON body (non-streaming servers)."""
        plain: list[str] = []
        for line in lines:
            line = line.strip()
            if not line:
                continue
            if not line.startswith("data:"):
                plain.append(line)
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            chunk = _json_or_error(payload, self.config)
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or (choice.get("message") or {}).get("content")
                if piece:
                    yield piece
        if plain:
            answer = _json_or_error("\n".join(plain), self.config)
            choices = answer.get("choices") or [{}]
            content = (choices[0].get("message") or {}).get("content")
            if not isinstance(content, str):
                raise LLMError(f"{self.config.describe()} answered without choices[0].message.content")
            yield content


class OllamaChatClient(_HttpClient):
    """Ollama's native API: /api/chat with ``format`` set to the JSON Schema."""

    @property
    def endpoint(self) -> str:
        """The /api/chat URL."""
        url = self.config.url.rstrip("/")
        return url if url.endswith("/api/chat") else url + "/api/chat"

    def request_body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                     sampling: Sampling | None = None) -> dict[str, Any]:
        """The JSON body of one streaming chat request."""
        model, temperature, top_p = (sampling or Sampling()).settings(self.config)
        if not model:
            raise LLMError(
                f"Ollama at {self.config.url} needs a model name: set DAOTAI_LLM_MODEL (e.g. qwen2.5:7b), "
                "--llm-model, or model = … in the config file"
            )
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            "options": {"temperature": temperature, **({"top_p": top_p} if top_p is not None else {})},
        }
        if schema is not None and self.config.structured:
            body["format"] = schema
        return body

    def chat(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None,
             sampling: Sampling | None = None) -> Iterator[str]:
        """Stream the answer; Ollama versions without schema formats get format 'json' instead."""
        body = self.request_body(messages, schema, sampling)
        try:
            yield from self._parse(self._stream_lines(body))
        except _HttpStatus as exc:
            if isinstance(body.get("format"), dict) and exc.status in (400, 422, 500):
                yield from self._parse(self._stream_lines({**body, "format": "json"}))
            else:
                raise

    def _parse(self, lines: Iterator[str]) -> Iterator[str]:
        """Text pieces from newline-delimited JSON chunks."""
        for line in lines:
            if not line.strip():
                continue
            chunk = _json_or_error(line, self.config)
            if chunk.get("error"):
                raise LLMError(f"{self.config.describe()} reported: {chunk['error']}")
            piece = (chunk.get("message") or {}).get("content")
            if piece:
                yield piece
            if chunk.get("done"):
                return


class LlamaCppClient:
    """In-process llama.cpp on a user-supplied GGUF file (optional extra 'llm')."""

    def __init__(self, config: LLMConfig):
        try:
            import llama_cpp  # noqa: F401  (optional, heavy: imported only when chosen)
        except ImportError:
            raise DependencyMissing("llama-cpp-python", "llm", "the in-process GGUF language model") from None
        path = Path(config.url).expanduser()
        if not path.is_file():
            raise LLMError(f"--llm {config.url!r}: the GGUF model file does not exist")
        self.config = config
        self._llm = llama_cpp.Llama(model_path=str(path), n_ctx=16384, verbose=False)

    def chat(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None,
             sampling: Sampling | None = None) -> Iterator[str]:
        """Stream the answer; the schema becomes a grammar-constrained JSON response format."""
        model, temperature, top_p = (sampling or Sampling()).settings(self.config)
        if sampling is not None and sampling.model and sampling.model != self.config.model:
            raise LLMError(f"--llm-model {sampling.model!r}: the in-process model is the file {self.config.url}; "
                           "choose another model with --llm <file.gguf>")
        extra: dict[str, Any] = {"response_format": {"type": "json_object", "schema": schema}} if schema is not None else {}
        if top_p is not None:
            extra["top_p"] = top_p
        for chunk in self._llm.create_chat_completion(
            messages=messages, temperature=temperature, stream=True, **extra
        ):
            piece = chunk["choices"][0].get("delta", {}).get("content")
            if piece:
                yield piece

    def close(self) -> None:
        """Free the model."""
        self._llm = None


def _json_or_error(text: str, config: LLMConfig) -> dict[str, Any]:
    """Parse one JSON object from the server, or raise LLMError quoting it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise LLMError(f"{config.describe()} sent something that is not JSON: {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise LLMError(f"{config.describe()} sent JSON that is not an object: {text[:120]!r}")
    if isinstance(data.get("error"), (dict, str)) and not data.get("choices") and "message" not in data:
        error = data["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise LLMError(f"{config.describe()} reported: {message}")
    return data
