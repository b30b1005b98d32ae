"""A loopback stand-in for ChatGPT's sign-in and backend, so Codex's ChatGPT route runs offline in tests.

`ChatGPTBackend` is an HTTPS server on 127.0.0.1 (ephemeral port, background threads) with a CA generated for the
run (`ca_path`, given to Codex as `CODEX_CA_CERTIFICATE`). It serves, under any path prefix:
- `POST …/oauth/token` (`CODEX_REFRESH_TOKEN_URL_OVERRIDE`): the refresh grant. Each refresh token is accepted once
  and rotated: the answer carries a new access token, id token and refresh token; a refresh token used again gets
  401 `{"error": {"code": "refresh_token_reused"}}`, an unknown one `refresh_token_invalidated`.
- the sign-in itself, with the server as the issuer (`CODEX_APP_SERVER_LOGIN_ISSUER`, which the app-server's logins
  read): the device code (`…/api/accounts/deviceauth/usercode`, then `…/deviceauth/token` polled until the test
  calls `approve_device_code(user_code)`, as the person entering the code would) and the browser's authorization
  code (`authorization_code()` makes one for the callback), each exchanged once at `…/oauth/token`.
- `POST …/oauth/revoke` (`CODEX_REVOKE_TOKEN_URL_OVERRIDE`): recorded; the refresh token it names stops working.
- the ChatGPT backend Codex calls under `chatgpt_base_url`: `…/wham/accounts/check`, `…/wham/settings/user`, and
  `…/codex/responses`, which needs `Authorization: Bearer <a live access token>` and `chatgpt-account-id`, else
  401; an accepted request is forwarded to the scripted model's Responses endpoint of the agent its `model` names
  (`codex_overrides(agent)` sets it: Codex sends its model requests to the origin's `/backend-api/codex/responses`
  whatever the path of `chatgpt_base_url`, so the model is what tells the agents apart), and its answer is streamed
  back unchanged, so every scripted step works here too. Anything else is answered 404 and recorded.

Tokens are test values that look like the real ones (JWTs whose claims Codex reads without checking a
signature); `login()` makes the `auth.json` of a signed-in Codex home, the way a finished sign-in leaves it.
`reject_access_tokens()` makes every access token issued so far answer 401, as an expired one would.

Invariants: the server binds 127.0.0.1 only; its only outbound connection is to the scripted model on loopback.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import itertools
import json
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.tls import make_server_certificate

__all__ = ["ACCOUNT_ID", "CLIENT_ID", "EMAIL", "MODEL_PREFIX", "PLAN_TYPE", "BackendRequest", "ChatGPTBackend",
           "make_jwt"]

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
"""Codex's OAuth client id, as it sends it on a refresh and a revoke."""
ACCOUNT_ID = "acct-wardian-test"
PLAN_TYPE = "plus"
EMAIL = "someone@example.test"
MODEL_PREFIX = "scripted-agent-"
"""The model name `codex_overrides` gives an agent: this prefix, then the agent's name (URL-quoted)."""
_AUTH_CLAIMS = "https://api.openai.com/auth"


@dataclass(frozen=True, slots=True)
class BackendRequest:
    """One request the backend received. `bearer` is the Authorization token (a test value), or None."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    bearer: str | None
    status: int = 0


def make_jwt(claims: Mapping[str, Any]) -> str:
    """An unsigned-looking JWT (Codex decodes the claims of its tokens without verifying them)."""
    def part(value: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{part({'sig': 'test'})}"


@dataclass
class _Tokens:
    access: dict[str, float] = field(default_factory=dict)  # access token -> expiry (epoch s)
    rejected: set[str] = field(default_factory=set)
    live_refresh: set[str] = field(default_factory=set)
    used_refresh: set[str] = field(default_factory=set)


class ChatGPTBackend:
    """The sign-in and backend stand-in; use it as a context manager inside a running `ScriptedModel`."""

    def __init__(self, directory: Path, model: ScriptedModel, *, access_ttl_s: float = 3600.0) -> None:
        self.directory = directory
        self.model = model
        self.access_ttl_s = access_ttl_s
        self.requests: list[BackendRequest] = []
        self.errors: list[str] = []
        self._tokens = _Tokens()
        self._devices: dict[str, str] = {}  # user code -> device auth id
        self._approved: set[str] = set()
        self._codes: set[str] = set()  # authorization codes not yet exchanged
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------------

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the ChatGPT backend is not running; use it inside `with ChatGPTBackend(...)`")
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The `chatgpt_base_url` that points Codex's ChatGPT backend here."""
        return f"{self.url}/backend-api/"

    def codex_overrides(self, agent: str | None = None) -> list[str]:
        """`codex -c` settings for a Codex on this backend; with `agent`, its model requests reach that agent's
        script."""
        settings = [f'chatgpt_base_url="{self.base_url}"', "features.plugins=false", "features.apps=false",
                    # Plain JSON request bodies (Codex compresses them with zstd on the ChatGPT backend).
                    "features.enable_request_compression=false"]
        if agent is not None:
            settings += [f'model="{MODEL_PREFIX}{quote(agent, safe="")}"', 'approval_policy="never"',
                         'sandbox_mode="read-only"']
        return settings

    def env(self) -> dict[str, str]:
        """The variables that point Codex's sign-in at this server and make it trust the test CA."""
        return {"CODEX_CA_CERTIFICATE": str(self.ca_path), "CODEX_APP_SERVER_LOGIN_ISSUER": self.url,
                "CODEX_REFRESH_TOKEN_URL_OVERRIDE": f"{self.url}/oauth/token",
                "CODEX_REVOKE_TOKEN_URL_OVERRIDE": f"{self.url}/oauth/revoke"}

    def start(self) -> ChatGPTBackend:
        self.directory.mkdir(parents=True, exist_ok=True)
        context = _tls_context(self.directory)
        self._server = _Server(self)
        # The handshake runs in the request's own thread, so a slow client never stalls the accept loop.
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="chatgpt-backend", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> ChatGPTBackend:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if exc_type is None and self.errors:
            raise AssertionError("the ChatGPT backend recorded errors:\n" + "\n".join(self.errors))

    # --- tokens -------------------------------------------------------------------------------------

    def login(self, *, expired: bool = False) -> dict[str, Any]:
        """The `auth.json` of a Codex home that has just signed in (a fresh refresh token; the access token already
        expired when `expired`)."""
        tokens = self._issue(expired=expired)
        stamp = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
        return {"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "last_refresh": stamp,
                "tokens": {"id_token": tokens["id_token"], "access_token": tokens["access_token"],
                           "refresh_token": tokens["refresh_token"], "account_id": ACCOUNT_ID}}

    def reject_access_tokens(self) -> None:
        """Every access token issued so far is refused from now on (401), as an expired one would be."""
        with self._lock:
            self._tokens.rejected.update(self._tokens.access)

    @property
    def refresh_tokens_used(self) -> list[str]:
        """The refresh tokens accepted so far, in order."""
        return [r.body["refresh_token"] for r in self.requests_to("/oauth/token")
                if r.status == 200 and r.body.get("grant_type") == "refresh_token"]

    def requests_to(self, suffix: str) -> list[BackendRequest]:
        with self._lock:
            return [r for r in self.requests if urlsplit(r.path).path.endswith(suffix)]

    def issued_secrets(self) -> list[str]:
        """Every access and refresh token handed out (for tests that prove none is left where it must not be)."""
        with self._lock:
            return [*self._tokens.access, *self._tokens.live_refresh, *self._tokens.used_refresh]

    def _issue(self, *, expired: bool = False) -> dict[str, str]:
        n = next(self._ids)
        exp = time.time() + (-600 if expired else self.access_ttl_s)
        auth = {"chatgpt_account_id": ACCOUNT_ID, "chatgpt_plan_type": PLAN_TYPE, "chatgpt_user_id": "user-test"}
        access = make_jwt({"exp": int(exp), "n": n, _AUTH_CLAIMS: auth, "jti": f"at-{n}"})
        id_token = make_jwt({"email": EMAIL, "exp": int(exp), _AUTH_CLAIMS: auth})
        refresh = f"rt-test-{n}-{time.time_ns() % 1_000_000}"
        with self._lock:
            self._tokens.access[access] = exp
            self._tokens.live_refresh.add(refresh)
        return {"id_token": id_token, "access_token": access, "refresh_token": refresh}

    def _refresh(self, refresh_token: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if refresh_token in self._tokens.used_refresh:
                return 401, _oauth_error("refresh_token_reused", "the refresh token was already used")
            if refresh_token not in self._tokens.live_refresh:
                return 401, _oauth_error("refresh_token_invalidated", "unknown refresh token")
            self._tokens.live_refresh.discard(refresh_token)
            self._tokens.used_refresh.add(refresh_token)
        return 200, self._issue()

    def approve_device_code(self, user_code: str) -> None:
        """The person entered `user_code` at the verification page and allowed the sign-in."""
        with self._lock:
            if user_code not in self._devices:
                raise KeyError(f"no device code {user_code!r} was handed out")
            self._approved.add(user_code)

    def authorization_code(self) -> str:
        """A code the sign-in page would hand the browser (for the browser sign-in's callback), valid once."""
        code = f"authcode-browser-{next(self._ids)}"
        with self._lock:
            self._codes.add(code)
        return code

    def _device_code(self) -> dict[str, Any]:
        n = next(self._ids)
        code = f"WARD-{n:04d}"
        with self._lock:
            self._devices[code] = f"device-auth-{n}"
        return {"device_auth_id": f"device-auth-{n}", "user_code": code, "interval": "1", "expires_in": 900}

    def _device_poll(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        code = str(body.get("user_code", ""))
        with self._lock:
            known = self._devices.get(code) == body.get("device_auth_id")
            approved = known and code in self._approved
            if approved:
                self._approved.discard(code)
                self._codes.add(f"authcode-{code}")
        if not approved:
            return 403, {"error": {"code": "deviceauth_authorization_pending" if known else "unknown_device"}}
        return 200, {"authorization_code": f"authcode-{code}", "code_challenge": "challenge",
                     "code_verifier": "verifier"}

    def _exchange(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """The authorization-code grant that ends a sign-in: each code works once."""
        with self._lock:
            code = str(body.get("code", ""))
            if code not in self._codes:
                return 400, _oauth_error("invalid_grant", "unknown or used authorization code")
            self._codes.discard(code)
        return 200, self._issue()

    def _revoke(self, token: str) -> None:
        with self._lock:
            if token in self._tokens.live_refresh:
                self._tokens.live_refresh.discard(token)
                self._tokens.used_refresh.add(token)

    def _access_ok(self, token: str | None) -> bool:
        with self._lock:
            exp = self._tokens.access.get(token or "")
            return exp is not None and exp > time.time() and token not in self._tokens.rejected

    def _record(self, request: BackendRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _oauth_error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}, "error_description": message}


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
                status, answer = 400, _oauth_error("unsupported_grant_type", f"grant {grant!r} is not served")
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
