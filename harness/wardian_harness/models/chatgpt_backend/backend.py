"""The ChatGPT stand-in's state and life: the tokens, device codes and authorization codes it has handed out, what
it has been asked, and the server's start and stop (its HTTP half is `_http`)."""

from __future__ import annotations

import datetime
import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

from wardian_harness.models.chatgpt_backend._http import BackendRequest, _Server, _tls_context
from wardian_harness.models.chatgpt_backend.account import (
    ACCOUNT_ID,
    AUTH_CLAIMS,
    EMAIL,
    MODEL_PREFIX,
    PLAN_TYPE,
    make_jwt,
    oauth_error,
)
from wardian_harness.models.scripted_model import ScriptedModel

__all__ = ["ChatGPTBackend"]


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
        access = make_jwt({"exp": int(exp), "n": n, AUTH_CLAIMS: auth, "jti": f"at-{n}"})
        id_token = make_jwt({"email": EMAIL, "exp": int(exp), AUTH_CLAIMS: auth})
        refresh = f"rt-test-{n}-{time.time_ns() % 1_000_000}"
        with self._lock:
            self._tokens.access[access] = exp
            self._tokens.live_refresh.add(refresh)
        return {"id_token": id_token, "access_token": access, "refresh_token": refresh}

    def _refresh(self, refresh_token: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if refresh_token in self._tokens.used_refresh:
                return 401, oauth_error("refresh_token_reused", "the refresh token was already used")
            if refresh_token not in self._tokens.live_refresh:
                return 401, oauth_error("refresh_token_invalidated", "unknown refresh token")
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
                return 400, oauth_error("invalid_grant", "unknown or used authorization code")
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
