"""Codex's ChatGPT sign-in as `wardian auth` runs it: wardian's own session signed in or out through
`wardian.providers.codex.chatgpt_login` (docs/guide/sign-in.md#chatgpt), each run to its end on an event loop of its
own.

A module of its own because anyio and Codex's app-server client (about 300 ms of imports) are this sign-in's alone:
`wardian.cli.credentials` imports it only when a ChatGPT sign-in or sign-out is asked for, never for a key.
"""

from __future__ import annotations

import functools
import sys

import anyio

from wardian.auth.model import CredentialKind
from wardian.auth.store import CredentialEntry, CredentialStore
from wardian.providers.codex.chatgpt_login import SignedIn, login, logout


def sign_in(store: CredentialStore, name: str, *, browser: bool) -> tuple[CredentialEntry, SignedIn]:
    """Sign wardian's own session in (a device code, or `browser`) and return the credential it stored, with the
    account. What to open and enter goes to stderr, so `--json` output stays one document.

    Raises: InvalidArguments, Unsupported, NotSignedIn; Ctrl-C cancels (KeyboardInterrupt).
    """
    signed = anyio.run(functools.partial(login, store.home, out=sys.stderr, browser=browser, name=name))
    entry = next(e for e in store.entries() if e.provider == "codex" and e.kind is CredentialKind.CHATGPT)
    return entry, signed


def sign_out(store: CredentialStore) -> None:
    """Sign wardian's own session out: Codex revokes it at the server (the person's own Codex login is another
    session)."""
    anyio.run(logout, store.home)
