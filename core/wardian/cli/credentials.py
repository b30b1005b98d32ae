"""The handlers of `wardian auth login|status|logout` (`wardian.cli.auth` adds their parsers): the home's
credentials (docs/guide/sign-in.md).

These commands need no running app: they read and write the home's credential store (`wardian.auth.store`)
directly, and a running app reads it afresh at each agent start. A secret only ever arrives on standard input (never
in argv, where `ps` shows it), and is never printed: output shows a mask such as `…3f9a`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.auth.checks import (
    check_kind,
    check_name,
    check_provider,
    check_provider_id,
    check_secret,
    secret_from_input,
)
from wardian.auth.model import AUTH_PROVIDERS, DEFAULT_NAME, Credential, CredentialKind
from wardian.auth.store import CredentialEntry, CredentialStore
from wardian.cli.auth_usage import agents_using
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import resolve_home

# A secret is at most 4096 characters (wardian.auth.checks): read a little more, to say it is too long.
MAX_INPUT_BYTES = 4 * 4096 + 2


def _store(args: argparse.Namespace) -> CredentialStore:
    return CredentialStore(resolve_home(args.home))


# --- login ------------------------------------------------------------------------------------------------


def cmd_auth_login(args: argparse.Namespace) -> int:
    provider = check_provider(args.provider)
    name = check_name(args.name)
    provider_id = check_provider_id(provider, args.provider_id)
    if args.browser and (provider != "codex" or args.with_api_key or args.from_codex_home is not None):
        raise errors.InvalidArguments("--browser is for Codex's ChatGPT sign-in only", field="browser",
                                      allowed="wardian auth login codex --browser")
    store = _store(args)
    if args.from_codex_home is not None:
        if provider != "codex":
            raise errors.InvalidArguments("--from-codex-home imports a Codex login", field="from_codex_home",
                                          allowed="codex")
        credential = Credential(provider, name, CredentialKind.API_KEY, codex_home_api_key(Path(args.from_codex_home)))
    elif args.with_api_key or args.with_oauth_token:
        kind = CredentialKind.OAUTH_TOKEN if args.with_oauth_token else CredentialKind.API_KEY
        check_kind(provider, kind)
        credential = Credential(provider, name, kind, read_secret(kind), provider_id)
    elif provider == "codex":
        return chatgpt_login(args, store, name)
    else:
        flags = "--with-api-key" if provider in ("opencode", "pi") else "--with-api-key or --with-oauth-token"
        raise errors.InvalidArguments(f"say how to sign in to {provider}: {flags}, with the secret on standard "
                                      "input", field="method", allowed=flags)
    entry = store.put(credential)
    if args.json:
        out(dump(_entry_json(entry, None, store)))
    else:
        out(f"signed in: {_describe(entry)}, kept in {_where(entry, store)}")
    return EXIT_OK


def chatgpt_login(args: argparse.Namespace, store: CredentialStore, name: str) -> int:
    """`wardian auth login codex` without a key: the ChatGPT sign-in of wardian's own Codex login (device code,
    or `--browser`; docs/guide/sign-in.md#chatgpt). What to open and enter goes to stderr, so `--json` output stays
    one document. Raises: InvalidArguments, Unsupported, NotSignedIn; Ctrl-C cancels (exit 130)."""
    from wardian.cli.auth_chatgpt import sign_in  # anyio and Codex's app-server client (~300 ms): this sign-in's alone

    entry, signed = sign_in(store, name, browser=args.browser)
    if args.json:
        out(dump({**_entry_json(entry, None, store), "email": signed.email, "plan_type": signed.plan_type}))
    else:
        account = ", ".join(v for v in (signed.email, signed.plan_type) if v) or "ChatGPT"
        out(f"signed in: ChatGPT ({account}) for Codex agents, as {name!r}; wardian's own session is kept in "
            f"{store.home.codex_auth_dir}")
    return EXIT_OK


def chatgpt_logout(store: CredentialStore, provider: str, name: str) -> None:
    """Before a Codex ChatGPT credential is forgotten, sign wardian's own session out (Codex revokes it at the
    server; the person's own Codex login is another session)."""
    if provider != "codex" or not any(e.provider == provider and e.name == name and e.kind is CredentialKind.CHATGPT
                                      for e in store.entries()):
        return
    from wardian.cli.auth_chatgpt import sign_out  # anyio and Codex's app-server client (~300 ms): only for this

    sign_out(store)


def read_secret(kind: CredentialKind) -> str:
    """The secret from standard input, which must not be a terminal (a typed secret would stay on the screen and
    in the scrollback); one trailing line ending is dropped, then it is checked.

    Raises: InvalidArguments.
    """
    what = "token" if kind is CredentialKind.OAUTH_TOKEN else "key"
    if sys.stdin is None or sys.stdin.isatty():
        raise errors.InvalidArguments(
            f"the {what} is read from standard input, not typed: pipe it in, e.g. `wardian auth login ... < "
            f"{what}.txt` or `printenv MY_{what.upper()} | wardian auth login ...`", field="secret",
            allowed="a pipe or a file on standard input")
    data = sys.stdin.buffer.read(MAX_INPUT_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidArguments(f"the {what} on standard input is not UTF-8 (byte {exc.start + 1})",
                                      field="secret", allowed="UTF-8 text") from None
    return check_secret(secret_from_input(text), kind)


def codex_home_api_key(codex_home: Path) -> str:
    """The API key of a Codex home's API-key login (`auth.json`: `auth_mode` apikey, or no mode and a key).

    The file is only read. A ChatGPT login is refused: its refresh token is rotated at first use, so a copy that
    refreshes signs the person out of their own Codex CLI (or is itself signed out when the CLI refreshes first).

    Raises: InvalidArguments (no such login, a ChatGPT or other login, a file that is not Codex's).
    """
    path = codex_home.expanduser() / "auth.json"
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        raise errors.InvalidArguments(
            f"there is no Codex login file {path} (a Codex login kept in the OS keyring cannot be imported): "
            "pipe the key to `wardian auth login codex --with-api-key`", field="from_codex_home") from None
    except (OSError, ValueError):
        raise errors.InvalidArguments(f"{path} is not a Codex login file (unreadable, or not JSON)",
                                      field="from_codex_home") from None
    if not isinstance(doc, dict):
        raise errors.InvalidArguments(f"{path} is not a Codex login file", field="from_codex_home")
    fields: dict[str, Any] = doc
    key = fields.get("OPENAI_API_KEY")
    mode = fields.get("auth_mode") or ("apikey" if key else "chatgpt")
    if mode == "chatgpt":
        raise errors.InvalidArguments(
            f"{path} holds a ChatGPT sign-in, which wardian does not copy: its refresh token is replaced at each "
            "refresh, so a copy would sign you out of your own Codex CLI. Run `wardian auth login codex` for "
            "wardian's own ChatGPT sign-in, or use an API key", field="from_codex_home",
            allowed="a Codex home whose login is an API key")
    if mode != "apikey" or not isinstance(key, str) or not key:
        raise errors.InvalidArguments(f"{path} holds a {str(mode)[:30]!r} login, not an API key",
                                      field="from_codex_home", allowed="a Codex home whose login is an API key")
    return check_secret(key, CredentialKind.API_KEY)


# --- status and logout ----------------------------------------------------------------------------------------


def cmd_auth_status(args: argparse.Namespace) -> int:
    store = _store(args)
    entries = store.entries()
    used = agents_using(store.home) if entries else {}
    where = store.backend_description(probe=False)
    if args.json:
        out(dump({"credentials": [_entry_json(e, used, store) for e in entries], "store": where,
                  "agents_known": used is not None}))
        return EXIT_OK
    if not entries:
        out(f"no credentials in {store.home.root}; sign in with `wardian auth login "
            f"{'|'.join(AUTH_PROVIDERS)} --with-api-key` (see `wardian auth login --help`)")
        return EXIT_OK
    rows = [("PROVIDER", "NAME", "KIND", "FOR", "KEY", "KEPT IN", "AGENTS")]
    for e in entries:
        agents = "?" if used is None else ", ".join(used.get((e.provider, e.name), [])) or "-"
        rows.append((e.provider, e.name, e.kind.value, e.provider_id or "-", e.mask, e.stored, agents))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    out(f"new logins are kept in {where}")
    if used is None:
        out("(which agents use each credential is known only while the home's app runs: `wardian app start`)")
    return EXIT_OK


def cmd_auth_logout(args: argparse.Namespace) -> int:
    provider = check_provider(args.provider)
    name = check_name(args.name)
    provider_id = check_provider_id(provider, args.provider_id) if args.provider_id is not None else None
    store = _store(args)
    chatgpt_logout(store, provider, name)
    removed = store.remove(provider, name, provider_id)
    if not removed:
        which = f"{provider} credential {name!r}" + (f" for {provider_id}" if provider_id else "")
        raise errors.UnknownCredential(f"there is no {which} to sign out of; see `wardian auth status`",
                                       field="name")
    if args.json:
        out(dump({"provider": provider, "name": name, "provider_id": provider_id, "removed": removed}))
    else:
        out(f"signed out: {removed} {provider} credential{'s' if removed > 1 else ''} {name!r} forgotten"
            + ("; agents using it are refused at their next start until you sign in again" if name != DEFAULT_NAME
               else ""))
    return EXIT_OK


def _describe(e: CredentialEntry) -> str:
    what = f"{e.provider} {e.provider_id} key" if e.provider_id else f"{e.provider} {e.kind.value.replace('_', ' ')}"
    return f"{what} {e.mask} as {e.name!r}"


def _where(e: CredentialEntry, store: CredentialStore) -> str:
    if e.kind is CredentialKind.CHATGPT:
        return f"{store.home.codex_auth_dir} (wardian's own Codex sign-in)"
    return str(store.path) if e.stored == "file" else f"the OS keyring, service {store.service}"


def _entry_json(e: CredentialEntry, used: dict[tuple[str, str], list[str]] | None,
                store: CredentialStore) -> dict[str, Any]:
    shown: dict[str, Any] = {"provider": e.provider, "name": e.name, "kind": e.kind.value,
                             "provider_id": e.provider_id, "mask": e.mask, "stored": e.stored,
                             "updated_at": e.updated_at}
    shown["where"] = _where(e, store)
    if used is not None:
        shown["agents"] = used.get((e.provider, e.name), [])
    return shown

