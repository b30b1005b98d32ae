"""The ChatGPT stand-in's HTTP half: HTTPS on 127.0.0.1, each request routed by its path's end to the backend's state
(`backend`), or forwarded to the scripted model's Responses endpoint of the agent its model names, and recorded."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from wardian_harness.models.chatgpt_backend.account import ACCOUNT_ID, MODEL_PREFIX, PLAN_TYPE, oauth_error
from wardian_harness.tls import make_server_certificate

if TYPE_CHECKING:
    from wardian_harness.models.chatgpt_backend.backend import ChatGPTBackend

__all__ = ["BackendRequest"]


@dataclass(frozen=True, slots=True)
class BackendRequest:
    """One request the backend received. `bearer` is the Authorization token (a test value), or None."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    bearer: str | None
    status: int = 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, backend: ChatGPTBackend) -> None:
        self.backend = backend
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def _backend(self) -> ChatGPTBackend:
        return cast(_Server, self.server).backend

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request list is the record

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, TimeoutError, ssl.SSLError):
            self.close_connection = True  # a client that went away mid-exchange (Codex drops idle connections)

    def do_GET(self) -> None:
        self._serve("GET", None)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        self._serve("POST", raw)

    def _serve(self, method: str, raw: bytes | None) -> None:
        path = urlsplit(self.path).path
        body = _parse_body(raw, self.headers.get("content-type", ""))
        auth = self.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        status = self._route(method, path, body, bearer, raw)
        self._backend._record(BackendRequest(method, self.path, headers, body, bearer, status))

    def _route(self, method: str, path: str, body: Any, bearer: str | None, raw: bytes | None) -> int:
        backend = self._backend
        if path.endswith("/oauth/token") and method == "POST":
            grant = (body or {}).get("grant_type")
            if grant == "authorization_code":
                status, answer = backend._exchange(body)
            elif grant != "refresh_token":  # e.g. the API-key token exchange a sign-in tries: not offered here
                status, answer = 400, oauth_error("unsupported_grant_type", f"grant {grant!r} is not served")
            else:
                status, answer = backend._refresh(str((body or {}).get("refresh_token", "")))
            return self._json(status, answer)
        if path.endswith("/api/accounts/deviceauth/usercode") and method == "POST":
            return self._json(200, backend._device_code())
        if path.endswith("/api/accounts/deviceauth/token") and method == "POST":
            status, answer = backend._device_poll(body or {})
            return self._json(status, answer)
        if path.endswith("/oauth/revoke") and method == "POST":
            backend._revoke(str((body or {}).get("token", "")))
            return self._json(200, {})
        if path.endswith("/wham/accounts/check"):
            # No residency constraint: Codex keeps the configured `chatgpt_base_url` (here, this server).
            return self._json(200, {"accounts": [{
                "id": ACCOUNT_ID, "plan_type": PLAN_TYPE, "structure": "personal",
                "workspace_backend_origin": "NO_CONSTRAINT", "account_routing_override": "NO_CONSTRAINT"}],
                "account_ordering": [ACCOUNT_ID]})
        if path.endswith("/wham/settings/user"):
            return self._json(200, {})
        if path.endswith("/codex/responses"):
            if method != "POST":
                return self._json(426, {"error": {"message": "use HTTP streaming"}})
            if not backend._access_ok(bearer) or self.headers.get("chatgpt-account-id") != ACCOUNT_ID:
                return self._json(401, {"error": {"message": "Your authentication token has expired.",
                                                  "code": "token_expired"}})
            return self._forward(body, raw or b"")
        return self._json(404, {"error": {"message": f"not served: {method} {path}"}})

    def _forward(self, body: Any, raw: bytes) -> int:
        """Stream the scripted answer of the agent the request's model names back unchanged."""
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str) or not model.startswith(MODEL_PREFIX):
            self._backend.errors.append(f"a model request for model {model!r}, not one of codex_overrides(agent)")
            return self._json(404, {"error": {"message": f"unknown model {model!r}"}})
        target = urlsplit(self._backend.model.agent(unquote(model[len(MODEL_PREFIX):])).base_url + "/responses")
        conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=600)
        try:
            conn.request("POST", target.path, body=raw, headers={"content-type": "application/json",
                                                                 "content-encoding": self.headers.get(
                                                                     "content-encoding", "identity")})
            answer = conn.getresponse()
            self.send_response(answer.status)
            for key in ("content-type", "cache-control"):
                if answer.getheader(key):
                    self.send_header(key, answer.getheader(key) or "")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            while chunk := answer.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return answer.status
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
            return 0
        finally:
            conn.close()

    def _json(self, status: int, value: Any) -> int:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return status


def _parse_body(raw: bytes | None, content_type: str) -> Any:
    if not raw:
        return None
    if "json" in content_type or raw[:1] in (b"{", b"["):
        try:
            return json.loads(raw)
        except ValueError:
            return None
    if "x-www-form-urlencoded" in content_type:
        return dict(parse_qsl(raw.decode("utf-8", "replace")))
    return None


def _tls_context(directory: Path) -> ssl.SSLContext:
    """A server context with a certificate for 127.0.0.1 signed by a CA made for this run (written to ca.pem)."""
    made = make_server_certificate("wardian test CA (ChatGPT backend)")
    (directory / "ca.pem").write_bytes(made.ca)
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(made.cert)
    key_path.write_bytes(made.key)
    key_path.chmod(0o600)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return context
