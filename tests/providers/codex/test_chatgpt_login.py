"""Signing wardian's own ChatGPT session in and out, with the real Codex CLI as the owner, offline.

The ChatGPT side is the harness's loopback backend, made the sign-in's issuer (`CODEX_APP_SERVER_LOGIN_ISSUER`):
the device code is approved by the test, as the person entering it would; the browser's return to 127.0.0.1:1455
is made by the test, as the browser would after the sign-in page.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from tests.providers.codex.conftest import codex_or_skip
from wardian import errors
from wardian.auth.model import CredentialKind
from wardian.auth.store import CredentialStore
from wardian.home import Home
from wardian.home_setup import adopt_home
from wardian.providers.codex.chatgpt_login import BROWSER_PORT, SignedIn, login, logout
from wardian.providers.codex.chatgpt_owner import OwnerTokens
from wardian_harness.models.chatgpt_backend import EMAIL, PLAN_TYPE, ChatGPTBackend
from wardian_harness.models.scripted_model import ScriptedModel

pytestmark = pytest.mark.codex


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    """A home whose credentials are kept in its file, not an OS keyring."""
    monkeypatch.setenv("WARDIAN_CREDENTIAL_STORE", "file")
    return Home(tmp_path / "home")


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatGPTBackend]:
    """The backend, with this process's environment (which the owner app-server inherits) pointed at it."""
    monkeypatch.setenv("WARDIAN_CODEX", str(codex_or_skip()))
    with ScriptedModel() as model, ChatGPTBackend(tmp_path / "chatgpt", model) as chatgpt:
        for key, value in chatgpt.env().items():
            monkeypatch.setenv(key, value)
        yield chatgpt


def point_owner(home: Home, backend: ChatGPTBackend) -> Path:
    adopt_home(home)  # a wardian home, as the CLI makes one
    owner = home.codex_auth_dir
    owner.mkdir(mode=0o700)
    (owner / "config.toml").write_text("\n".join(backend.codex_overrides()) + "\n", encoding="utf-8")
    return owner


class Console(io.StringIO):
    """What the sign-in prints, with a callback on each line as it is written."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        super().__init__()
        self._on_line = on_line

    def write(self, s: str) -> int:
        for line in s.splitlines():
            self._on_line(line)
        return super().write(s)


def code_in(text: str) -> str:
    return text.strip().split()[-1]


@pytest.mark.anyio
async def test_the_device_code_sign_in_records_a_chatgpt_credential(home: Home, backend: ChatGPTBackend) -> None:
    owner = point_owner(home, backend)
    lines: list[str] = []

    def seen(line: str) -> None:
        if lines and "enter the code" in lines[-1]:
            backend.approve_device_code(code_in(line))  # the person enters the code (another thread, as in life)
        lines.append(line)

    signed = await login(home, out=Console(seen))
    assert signed == SignedIn(email=EMAIL, plan_type=PLAN_TYPE)
    assert f"open {backend.url}/codex/device in any browser" in lines[0]
    polls = backend.requests_to("/deviceauth/token")
    assert polls[-1].status == 200
    [entry] = CredentialStore(home).entries()
    assert (entry.provider, entry.name, entry.kind) == ("codex", "default", CredentialKind.CHATGPT)
    assert CredentialStore(home).get("codex")[0].secret == ""
    auth = json.loads((owner / "auth.json").read_text())
    assert auth["tokens"]["refresh_token"] in backend.issued_secrets()
    assert (owner / "auth.json").stat().st_mode & 0o777 == 0o600
    # The session now serves Codex agents; the credential store holds none of its tokens.
    tokens = await OwnerTokens(home).tokens(refresh=False)
    assert tokens.access_token in backend.issued_secrets()
    stored = (home.root / "credentials.json").read_text()
    assert not any(s in stored for s in backend.issued_secrets())


@pytest.mark.anyio
async def test_the_browser_sign_in_returns_on_port_1455_which_must_be_free(home: Home, backend: ChatGPTBackend) -> None:
    """One test for both, as only one process at a time can hold the port (the tests may run in parallel)."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", BROWSER_PORT))
        taken.listen()
        with pytest.raises(errors.Unsupported, match=r"port 1455 .* is in use"):
            await login(home, out=io.StringIO(), browser=True, open_url=lambda url: None)
    assert not home.root.exists()  # refused before anything was started or created
    assert backend.requests == []

    point_owner(home, backend)
    visited: list[str] = []

    def browser(url: str) -> None:
        """The sign-in page, then the browser's return to Codex with the code it got."""
        visited.append(url)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
        back = query["redirect_uri"] + "?" + urllib.parse.urlencode(
            {"code": backend.authorization_code(), "state": query["state"]})
        threading.Thread(target=lambda: urllib.request.urlopen(back, timeout=60).read(), daemon=True).start()

    out = io.StringIO()
    signed = await login(home, out=out, browser=True, open_url=browser)
    assert signed.email == EMAIL
    assert visited[0].startswith(f"{backend.url}/oauth/authorize?")
    assert f"redirect_uri=http%3A%2F%2F127.0.0.1%3A{BROWSER_PORT}%2Fauth%2Fcallback" in visited[0]
    assert visited[0] in out.getvalue()  # printed too, for a browser that does not open
    assert CredentialStore(home).has("codex", "default")


@pytest.mark.anyio
async def test_ctrl_c_cancels_the_sign_in_and_records_nothing(home: Home, backend: ChatGPTBackend) -> None:
    owner = point_owner(home, backend)
    out = Console(lambda line: os.kill(os.getpid(), signal.SIGINT) if line.startswith("Waiting") else None)
    with pytest.raises(KeyboardInterrupt):
        await login(home, out=out)
    assert "Sign-in cancelled." in out.getvalue()
    assert not (owner / "auth.json").exists()
    assert CredentialStore(home).entries() == []


@pytest.mark.anyio
async def test_a_second_chatgpt_name_is_refused_and_nothing_is_created(home: Home) -> None:
    with pytest.raises(errors.InvalidArguments, match="one ChatGPT sign-in"):
        await login(home, out=io.StringIO(), name="work")
    assert not home.root.exists()


@pytest.mark.anyio
async def test_logout_revokes_wardians_own_session_and_agents_are_then_not_signed_in(
        home: Home, backend: ChatGPTBackend) -> None:
    owner = point_owner(home, backend)
    session = backend.login()
    (owner / "auth.json").write_text(json.dumps(session), encoding="utf-8")
    assert await logout(home) is True
    [revoke] = backend.requests_to("/oauth/revoke")
    assert revoke.body["token"] == session["tokens"]["refresh_token"]
    assert not (owner / "auth.json").exists()
    assert await logout(home) is False
    with pytest.raises(errors.NotSignedIn, match="wardian auth login codex"):
        await OwnerTokens(home).tokens(refresh=False)


@pytest.mark.anyio
async def test_one_owner_at_a_time_per_home(home: Home, backend: ChatGPTBackend) -> None:
    """A token asked for while a sign-in waits is read once the sign-in has ended, from the new session (had it not
    waited for the sign-in's owner, it would have found no session at all)."""
    owner = point_owner(home, backend)
    read: list[str] = []
    async with anyio.create_task_group() as tg:

        def seen(line: str) -> None:
            if not read and line.startswith("  "):
                read.append("asked")
                backend.approve_device_code(code_in(line))
                tg.start_soon(read_token)

        async def read_token() -> None:
            read.append((await OwnerTokens(home).tokens(refresh=False)).access_token)

        await login(home, out=Console(seen))
    session = json.loads((owner / "auth.json").read_text())
    assert read == ["asked", session["tokens"]["access_token"]]
