"""Who may talk to the server, and what every reply carries.

- ``check_bind``: listening beyond loopback needs a token (checked before anything starts).
- ``Guard`` (ASGI, outermost but one): bearer token, Host (DNS rebinding), Origin and
  Sec-Fetch-Site (cross-site requests), content type and body size, all before any route runs;
  a body is read up to the cap and no further.
- ``SecurityHeaders`` (ASGI, outermost): CSP, nosniff, no referrer, no framing on every reply,
  the guard's refusals included.
"""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlsplit

from daotai.errors import OptionError
from daotai.server.schemas import error_body, json_response
from daotai.server.state import LOCAL_HOSTS, ServerConfig

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token (OptionError naming --host)."""
    if host not in LOCAL_HOSTS and not token:
        raise OptionError.at(
            "--host", host, "is not a loopback address; serving beyond this machine needs --token "
            "(or DAOTAI_TOKEN) so that every request must carry it",
        )


class Guard:
    """Token, Host/Origin/Sec-Fetch-Site, content type and body size checks before any route."""

    def __init__(self, app: Any, config: ServerConfig):
        self.app = app
        self.config = config

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        problem = self._check(scope["method"], headers)
        if problem is not None:
            status, message, code = problem
            await json_response(status, error_body(message, code=code))(scope, receive, send)
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            body = bytearray()
            while True:  # read up to the cap, then stop: nothing past it is ever parsed
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if len(body) > self.config.max_body_bytes:
                    await json_response(413, error_body(
                        f"body: more than {self.config.max_body_bytes} bytes", code="body_too_large"
                    ))(scope, receive, send)
                    return
                if not message.get("more_body"):
                    break
            replay = [{"type": "http.request", "body": bytes(body), "more_body": False}]

            async def receive_again() -> dict:
                return replay.pop() if replay else await receive()

            await self.app(scope, receive_again, send)
            return
        await self.app(scope, receive, send)

    def _check(self, method: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        token = self.config.token
        if token:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return 401, "Authorization: a valid 'Bearer <token>' header is required", "unauthorized"
        host = headers.get("host", "")
        try:
            hostname = urlsplit("//" + host).hostname or ""
        except ValueError:  # e.g. an unclosed IPv6 bracket
            hostname = ""
        if not self.config.host_allowed(hostname):
            return 403, f"Host: {host!r} is not a name of this server", "host_not_allowed"
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return 403, f"Sec-Fetch-Site: {site!r} requests are refused (cross-site)", "cross_site"
            origin = headers.get("origin")
            if origin is not None and _netloc(origin) != host:
                return 403, f"Origin: {origin!r} does not match Host {host!r}", "cross_origin"
        if method in ("POST", "PUT", "PATCH"):
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind not in ("application/json", "multipart/form-data"):
                return (415, f"Content-Type: {kind or 'none'!r} is not accepted; send application/json or "
                        "multipart/form-data", "unsupported_media_type")
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.config.max_body_bytes):
                return (413, f"Content-Length: {length} exceeds the {self.config.max_body_bytes} byte limit",
                        "body_too_large")
        return None


def _netloc(url: str) -> str | None:
    """host[:port] of a URL, or None when it does not parse."""
    try:
        return urlsplit(url).netloc
    except ValueError:
        return None


class SecurityHeaders:
    """Adds the CSP and friends to every HTTP response that does not already set them."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                present = {k.decode("latin-1").lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def guarded(app: Any, config: ServerConfig) -> Any:
    """Install the request guard and the security headers as the outermost layers; returns ``app``."""
    app.add_middleware(Guard, config=config)
    app.add_middleware(SecurityHeaders)  # added last, so outermost: guard refusals carry them too
    return app
