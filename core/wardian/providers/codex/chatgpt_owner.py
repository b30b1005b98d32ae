"""wardian's own ChatGPT session: one Codex app-server under the home that holds it, and the tokens Codex agents get.

The session lives in a Codex home of its own, `$WARDIAN_HOME/codex-auth/` (0700, Codex's file store: `auth.json`,
0600), never in the person's `~/.codex`: its refresh token is wardian's alone, so neither side's refresh can sign
the other out (docs/guide/sign-in.md#chatgpt). That home's app-server (the owner) is started on demand and ended
after each use, one at a time per home (`codex-auth/owner.lock`), and it is the only process that ever refreshes:
agents get short-lived access tokens (`ChatGPTTokens`), and when one is rejected the agent asks the app, which asks
the owner to refresh (`OwnerTokens.tokens(refresh=True)`). A refresh rotates the refresh token, so the owner
refreshes only when an agent's token was rejected, and once for every agent that was rejected at the same time.

An access token is kept in this process's memory only; it is never written, logged or put on a command line.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import tomlkit

from wardian import __version__, errors, filelock
from wardian.auth.model import ChatGPTTokens
from wardian.home import Home
from wardian.home_setup import adopt_home
from wardian.providers.codex.app_server import AppServerClient, Notification
from wardian.providers.codex.launch import app_server_env, codex_version, resolve_codex
from wardian.providers.codex.transport import NdjsonStream
from wardian.providers.process import ProviderProcess, StopPolicy

log = logging.getLogger("wardian.auth.chatgpt")  # the name the app's log has always given these lines

OWNER_CLIENT = "wardian-auth"
"""The owner's `clientInfo.name`; Codex sends it as the `originator` of the owner's requests."""
LOCK_TIMEOUT_S = 60.0
START_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 60.0
EXPIRY_MARGIN_S = 300.0
"""A cached access token this close to its expiry is fetched again (the owner refreshes an expired one itself)."""
STOP_POLICY = StopPolicy(polite_s=3.0, term_s=3.0, kill_s=3.0)
_AUTH_CLAIMS = "https://api.openai.com/auth"
NOT_SIGNED_IN = "wardian has no ChatGPT sign-in for Codex: run `wardian auth login codex`"


def _prepare(home: Home) -> Path:
    """Create the owner's home (0700) and make sure its config keeps the session in the file store there."""
    adopt_home(home)  # as the credential store and the app make a home: only its owner may enter
    path = home.codex_auth_dir
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    config = path / "config.toml"
    doc = tomlkit.parse(config.read_text(encoding="utf-8")) if config.exists() else tomlkit.document()
    if doc.get("cli_auth_credentials_store") != "file":
        # Other settings (a person's own, a test backend's) are kept; only where the session lives is wardian's.
        doc["cli_auth_credentials_store"] = "file"
        config.write_text(tomlkit.dumps(doc), encoding="utf-8")
    home.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@contextlib.asynccontextmanager
async def _owner_lock(path: Path, timeout_s: float) -> AsyncIterator[None]:
    """The home's one owner at a time: a lock on `owner.lock` (`wardian.filelock`), waited for (polled) at most
    `timeout_s`."""
    fd = os.open(path / "owner.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        locked = False
        with anyio.move_on_after(timeout_s):
            while not locked:
                try:
                    filelock.lock(fd, wait=False)
                    locked = True
                except BlockingIOError:
                    await anyio.sleep(0.1)
        try:
            if not locked:  # one last try (a Windows byte lock cannot be taken twice)
                filelock.lock(fd, wait=False)
        except BlockingIOError:
            raise errors.ProviderUnavailable(
                f"wardian's ChatGPT sign-in ({path}) stayed in use by another wardian process for {timeout_s:g} s "
                "(a `wardian auth login codex` waiting for its sign-in?); try again once it has ended") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class Owner:
    """A running owner app-server (get one with `open_owner`)."""

    def __init__(self, client: AppServerClient) -> None:
        self.client = client
        self.notifications = client.notifications

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self.client.request(method, params, timeout_s=REQUEST_TIMEOUT_S)

    async def account(self) -> dict[str, Any]:
        """`account/read`: `{account: null | {type, email, planType, …}, …}`."""
        result = await self.request("account/read", {})
        return result if isinstance(result, dict) else {}

    async def tokens(self, *, refresh: bool) -> ChatGPTTokens:
        """The session's current access token (`refresh`: rotated first, for a token an agent had rejected).

        Raises:
            NotSignedIn: the session is not a ChatGPT sign-in (never made, logged out, or its refresh failed).
        """
        status = await self.request("getAuthStatus", {"includeToken": True, "refreshToken": refresh})
        token = status.get("authToken") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token or status.get("authMethod") != "chatgpt":
            raise errors.NotSignedIn(NOT_SIGNED_IN)
        account = await self.account()
        details = account.get("account") or {}
        routing = account.get("workspaceRouting") or {}
        claims = jwt_claims(token).get(_AUTH_CLAIMS) or {}
        account_id = routing.get("chatgptAccountId") or claims.get("chatgpt_account_id")
        if details.get("type") != "chatgpt" or not isinstance(account_id, str):
            raise errors.NotSignedIn(NOT_SIGNED_IN)
        plan = details.get("planType") or claims.get("chatgpt_plan_type")
        return ChatGPTTokens(access_token=token, account_id=account_id,
                             plan_type=plan if isinstance(plan, str) else None)

    async def next_notification(self, method: str) -> Notification:
        """The next notification `method` (others are skipped). Raises: ProviderUnavailable (the owner ended)."""
        async for note in self.notifications:
            if note.method == method:
                return note
        raise errors.ProviderUnavailable("the Codex app-server holding wardian's ChatGPT sign-in ended")


@contextlib.asynccontextmanager
async def open_owner(home: Home, *, lock_timeout_s: float = LOCK_TIMEOUT_S) -> AsyncIterator[Owner]:
    """Start the home's owner app-server (after taking its lock), yield it once initialized, end it on exit.

    Raises:
        Unsupported: no Codex CLI. ProviderUnavailable: the lock stayed taken, or the owner did not start.
    """
    codex = resolve_codex()
    path = await anyio.to_thread.run_sync(_prepare, home)
    async with _owner_lock(path, lock_timeout_s):
        child = ProviderProcess([codex, "app-server"], name="codex-auth", cwd=path, pid_path=None,
                                env=app_server_env(path),
                                log_path=home.log_dir / "codex-auth.log")
        process = await child.start()
        assert process.stdin is not None
        assert process.stdout is not None
        client = AppServerClient(NdjsonStream(process.stdin, process.stdout), name="codex-auth")
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(client.run)
                await _initialize(client, codex)
                yield Owner(client)
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise _first(group) from None  # the caller's own error, not the reader's task group around it
        finally:
            client.notifications.close()
            with anyio.CancelScope(shield=True):
                await child.stop(STOP_POLICY, polite=client.aclose)


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _initialize(client: AppServerClient, codex: str) -> None:
    try:
        await client.request("initialize", {
            "clientInfo": {"name": OWNER_CLIENT, "title": "Wardian sign-in", "version": __version__},
            "capabilities": {"experimentalApi": True}}, timeout_s=START_TIMEOUT_S)
        await client.notify("initialized")
    except errors.WardianError as exc:
        version = await anyio.to_thread.run_sync(codex_version, codex)
        raise errors.ProviderUnavailable(f"the Codex app-server holding wardian's ChatGPT sign-in did not start "
                                         f"({version}): {exc.message}") from None


def jwt_claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified ({} when it is not one): only to read the expiry and account of our own token."""
    try:
        payload = token.split(".")[1]
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, orjson.JSONDecodeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _fresh(tokens: ChatGPTTokens) -> bool:
    exp = jwt_claims(tokens.access_token).get("exp")
    return isinstance(exp, int | float) and exp - EXPIRY_MARGIN_S > time.time()


class OwnerTokens:
    """The `ChatGPTTokenSource` (`wardian.auth.model`) of every Codex agent of one home: the Codex provider holds one
    per home.

    A token is served from memory while it is fresh; otherwise the owner is started for it. Agents that ask for a
    refresh together share one: a refresh asked for while another ran, or within `SHARED_REFRESH_S` after one,
    takes that one's token (the agents' tokens were all rejected at once; one rotation renews them all).
    """

    SHARED_REFRESH_S = 30.0

    def __init__(self, home: Home) -> None:
        self.home = home
        self._lock = anyio.Lock()
        self._cached: ChatGPTTokens | None = None
        self._refreshes = 0
        self._refreshed_at = float("-inf")

    async def tokens(self, *, refresh: bool) -> ChatGPTTokens:
        asked_after = self._refreshes
        async with self._lock:
            cached = self._cached
            if cached is not None and refresh and (
                    self._refreshes != asked_after
                    or anyio.current_time() - self._refreshed_at < self.SHARED_REFRESH_S):
                return cached  # already renewed for this wave of rejections
            if cached is not None and not refresh and _fresh(cached):
                return cached
            tokens = await self._fetch(refresh=refresh)
            if refresh:
                self._refreshes += 1
                self._refreshed_at = anyio.current_time()
            self._cached = tokens
            log.info("ChatGPT access token for Codex agents %s by wardian's own sign-in",
                     "refreshed" if refresh else "read")
            return tokens

    async def _fetch(self, *, refresh: bool) -> ChatGPTTokens:
        async with open_owner(self.home) as owner:
            return await owner.tokens(refresh=refresh)

    def forget(self) -> None:
        """Drop the token held in memory (after a logout)."""
        self._cached = None
