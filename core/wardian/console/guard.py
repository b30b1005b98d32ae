"""The middleware in front of every page, stream and static file of the console: loopback Host names only, and the
security headers on every response."""

from __future__ import annotations

import re
import time

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_LOOPBACK_HOST = re.compile(r"^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?$")
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
# Referrer-Policy same-origin: a login URL never travels to another site in a Referer, and a form post keeps its real
# Origin (under no-referrer, a browser sends `Origin: null` for a form navigation, which the CSRF check refuses).
_HEADERS = [(b"content-security-policy", _CSP.encode()), (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin"),
            (b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-resource-policy", b"same-origin")]


class Guard:
    """Serve only loopback Host names; add the security headers, and the server's time to the response's start as
    `Server-Timing: app;dur=MS` (what `scripts/bench.py --only console` reports), to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if not _LOOPBACK_HOST.match(host):
            # Another name pointing here (DNS rebinding) must not reach a page that holds the operator's powers.
            response = PlainTextResponse("this console answers only to 127.0.0.1, localhost or [::1]", 400)
            await response(scope, receive, send)
            return

        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = f"app;dur={(time.perf_counter() - started) * 1000:.3f}".encode()
                message["headers"] = [*message.get("headers", []), *_HEADERS, (b"server-timing", took)]
            await send(message)

        await self.app(scope, receive, send_with_headers)
