"""`wardian auth login codex` (ChatGPT) and its logout: signing wardian's own session in and out.

The sign-in runs in the home's owner app-server (`chatgpt_owner`), never in the person's `~/.codex`:
- device code (the default, for any machine): `account/login/start {type: "chatgptDeviceCode"}` gives a URL and a
  one-time code for the person to enter in any browser; Codex polls until they have;
- browser (`--browser`, a browser on this machine): `{type: "chatgpt"}` gives the sign-in URL, which is printed and
  opened; the browser returns to Codex on 127.0.0.1:1455, a port Codex fixes (OpenCode's ChatGPT sign-in uses it
  too), so it must be free.
Either way the wait ends with `account/login/completed`; it prints how long it has waited, and Ctrl-C (or the
bound) cancels it at Codex (`account/login/cancel`). Once signed in, the home's credential store records a ChatGPT
credential, which holds no secret: the session itself stays in the owner's home.

The logout is `account/logout` in the owner, which revokes wardian's own session at the server and deletes its
file; the person's own Codex login is a different session and is not touched.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import anyio

from wardian import errors
from wardian.auth.model import DEFAULT_NAME, Credential, CredentialKind
from wardian.auth.store import CredentialStore
from wardian.home import Home
from wardian.providers.codex.chatgpt_owner import Owner, open_owner

BROWSER_PORT = 1455
LOGIN_TIMEOUT_S = 16 * 60.0
"""A device code lasts 15 minutes; the wait ends a little after."""
PROGRESS_EVERY_S = 30.0


@dataclass(frozen=True, slots=True)
class SignedIn:
    email: str | None
    plan_type: str | None


def check_browser_port(port: int = BROWSER_PORT) -> None:
    """Raises: Unsupported, when the port the browser sign-in returns to is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a finished sign-in's TIME_WAIT is no user
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise errors.Unsupported(
                f"port {port} on 127.0.0.1, where the ChatGPT browser sign-in returns, is in use (another sign-in of "
                "Codex or OpenCode waiting there?); end it, or sign in with a device code: `wardian auth login "
                "codex` without --browser", field="browser", allowed="a free port 1455, or the device code") from None


async def login(home: Home, *, out: TextIO, browser: bool = False, name: str = DEFAULT_NAME,
                open_url: Callable[[str], Any] = webbrowser.open, timeout_s: float = LOGIN_TIMEOUT_S) -> SignedIn:
    """Sign wardian's own ChatGPT session in (device code, or `browser`), then record the credential.

    Raises:
        InvalidArguments: a `name` other than the default (one ChatGPT session per home).
        Unsupported: `browser` and port 1455 is taken.
        NotSignedIn: the sign-in failed, was refused or timed out (nothing is recorded).
        KeyboardInterrupt: Ctrl-C; the sign-in was cancelled (nothing is recorded).
    """
    if name != DEFAULT_NAME:
        raise errors.InvalidArguments(
            "a home holds one ChatGPT sign-in for its Codex agents, under the default name; --name is for API keys",
            field="name", allowed=DEFAULT_NAME)
    if browser:
        check_browser_port()
    async with open_owner(home) as owner:
        started = await owner.request("account/login/start",
                                      {"type": "chatgpt" if browser else "chatgptDeviceCode"})
        login_id = str(started["loginId"])
        if browser:
            url = str(started["authUrl"])
            print(f"Opening the ChatGPT sign-in in your browser. If it does not open, visit:\n  {url}", file=out)
            open_url(url)
        else:
            print(f"To sign wardian in to ChatGPT, open {started['verificationUrl']} in any browser and enter the "
                  f"code:\n  {started['userCode']}", file=out)
        done = await _wait_completed(owner, login_id, out, timeout_s)
        if not done.get("success"):
            raise errors.NotSignedIn(f"the ChatGPT sign-in did not succeed ({done.get('error') or 'no reason given'})"
                                     "; run `wardian auth login codex` to try again")
        account = (await owner.account()).get("account") or {}
    await anyio.to_thread.run_sync(CredentialStore(home).put,
                                   Credential("codex", DEFAULT_NAME, CredentialKind.CHATGPT, ""))
    return SignedIn(email=account.get("email"), plan_type=account.get("planType"))


async def _wait_completed(owner: Owner, login_id: str, out: TextIO, timeout_s: float) -> dict[str, Any]:
    """`account/login/completed` of this login; Ctrl-C or the bound cancels it at Codex first."""
    result: dict[str, Any] | None = None
    failure: errors.WardianError | None = None
    interrupted = False
    with anyio.open_signal_receiver(signal.SIGINT) as interrupts, anyio.move_on_after(timeout_s):
        print("Waiting for the sign-in (Ctrl-C cancels)…", file=out, flush=True)
        async with anyio.create_task_group() as tg:

            async def completed() -> None:
                nonlocal result, failure
                try:
                    while result is None:
                        note = await owner.next_notification("account/login/completed")
                        if note.params.get("loginId") in (login_id, None):
                            result = note.params
                except errors.WardianError as exc:
                    failure = exc
                tg.cancel_scope.cancel()

            async def interrupt() -> None:
                nonlocal interrupted
                async for _ in interrupts:
                    interrupted = True
                    tg.cancel_scope.cancel()

            tg.start_soon(completed)
            tg.start_soon(interrupt)
            tg.start_soon(_progress, out)
    if failure is not None:
        raise failure
    if result is not None:
        return result
    with anyio.CancelScope(shield=True), anyio.move_on_after(10), contextlib.suppress(errors.WardianError):
        await owner.request("account/login/cancel", {"loginId": login_id})
    if interrupted:
        print("Sign-in cancelled.", file=out, flush=True)
        raise KeyboardInterrupt
    raise errors.NotSignedIn(f"the ChatGPT sign-in did not finish within {timeout_s / 60:g} min and was cancelled; "
                             "run `wardian auth login codex` to try again")


async def _progress(out: TextIO) -> None:
    waited = 0.0
    while True:
        await anyio.sleep(PROGRESS_EVERY_S)
        waited += PROGRESS_EVERY_S
        print(f"Still waiting for the sign-in ({waited / 60:g} min)…", file=out, flush=True)


async def logout(home: Home) -> bool:
    """Sign wardian's own session out (revoked at the server); False when it was not signed in."""
    async with open_owner(home) as owner:
        account = (await owner.account()).get("account")
        if not account:
            return False
        await owner.request("account/logout", {})
    return True
