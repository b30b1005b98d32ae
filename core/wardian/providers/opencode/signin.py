"""How an OpenCode agent gets its credentials, and how the app says it has none (docs/providers/opencode.md#sign-in).

Delivery: the agent's API keys (`Credential(provider="opencode", provider_id=…)`) travel as one JSON map in
`OPENCODE_AUTH_CONTENT`, in the environment of its `opencode serve` only. OpenCode then reads that map instead of its
`auth.json`, so nothing is written to the agent's private home. Verified with OpenCode 1.18.33:
- a key set in the agent's `opencode.json` (`provider.<id>.options.apiKey`) overrides the injected one: warned;
- a `PUT /auth/…` to the serve (wardian never sends one; any client holding the serve's password can) writes the whole
  injected map into `<data>/opencode/auth.json`: wardian removes those copies when the serve stops and at the next
  start, and warns about any other entry there;
- the agent's commands get serve's environment without this map (`shell_env`), yet run as the same user and can
  read it in serve's `/proc/<pid>/environ`: the keys are the agent's, and no other agent's are there.

Not signed in: before anything is delivered, `GET /provider`'s `connected` (only that field is read: the same answer
carries the resolved keys) says whether the provider of the agent's model has a key. A provider declared in the
agent's config is listed as connected even without one; for those the turn's own error says so (`outcome_of`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.auth.model import DEFAULT_NAME, Credential, CredentialKind
from wardian.providers.mcp_command import write_private
from wardian.providers.opencode.wire import NotSent, ServeClient

log = logging.getLogger("wardian.opencode")

ENV_AUTH_CONTENT = "OPENCODE_AUTH_CONTENT"
AUTH_FILE = "auth.json"  # under the agent's XDG_DATA_HOME/opencode


def api_keys(name: str, credentials: Iterable[Credential]) -> dict[str, Credential]:
    """The agent's OpenCode API keys by OpenCode provider id.

    Raises:
        InvalidArguments: a credential is not an OpenCode API key, names no provider id, or two name the same one.
    """
    keys: dict[str, Credential] = {}
    for credential in credentials:
        if credential.provider != "opencode" or credential.kind is not CredentialKind.API_KEY:
            raise errors.InvalidArguments(
                f"OpenCode agent {name} was given a {credential.provider} {credential.kind} credential "
                f"({credential.name!r}); OpenCode agents take OpenCode API keys only", field="auth",
                allowed="credentials from `wardian auth login opencode --provider ID --with-api-key`")
        if not credential.provider_id:
            raise errors.InvalidArguments(f"OpenCode credential {credential.name!r} names no OpenCode provider id",
                                          field="auth")
        if credential.provider_id in keys:
            raise errors.InvalidArguments(
                f"OpenCode agent {name} was given two keys for provider {credential.provider_id}", field="auth")
        keys[credential.provider_id] = credential
    return keys


def auth_content(keys: Mapping[str, Credential]) -> str:
    """`OPENCODE_AUTH_CONTENT`: OpenCode's own `auth.json` shape, provider id -> `{"type": "api", "key": …}`."""
    return json.dumps({pid: {"type": "api", "key": c.secret} for pid, c in sorted(keys.items())})


def login_hint(provider_id: str, keys: Mapping[str, Credential]) -> str:
    """The command that gives the agent a key for `provider_id` (under the credential name it already uses)."""
    names = {c.name for c in keys.values()} - {DEFAULT_NAME}
    named = f" --name {sorted(names)[0]}" if len(names) == 1 else ""
    return f"wardian auth login opencode --provider {provider_id} --with-api-key{named}"


def config_key_warnings(name: str, config: Any, keys: Mapping[str, Credential]) -> list[str]:
    """A warning per injected provider whose `apiKey` the agent's `opencode.json` also sets: OpenCode uses the
    config's key, not the credential's."""
    providers = config.get("provider") if isinstance(config, dict) else None
    if not isinstance(providers, dict):
        return []
    found = []
    for pid, credential in sorted(keys.items()):
        entry = providers.get(pid)
        options = entry.get("options") if isinstance(entry, dict) else None
        if isinstance(options, dict) and options.get("apiKey") not in (None, ""):
            found.append(f"OpenCode agent {name}: its opencode.json sets provider.{pid}.options.apiKey, which "
                         f"OpenCode uses instead of the key of credential {credential.name!r}; remove that setting "
                         "(from the agent's -c settings, or from its opencode.json) to use the credential")
    return found


def scrub_auth_file(data_dir: Path, keys: Mapping[str, Credential]) -> list[str] | None:
    """Remove from the agent's `auth.json` every entry that is a copy of a key wardian gave it (OpenCode writes the
    injected map there on any `PUT /auth`). Returns the provider ids of the entries left, or None when no file is
    left ([] for a file wardian cannot read)."""
    path = data_dir / "opencode" / AUTH_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return []
    if not isinstance(stored, dict):
        return []
    secrets = {c.secret for c in keys.values()}
    kept = {pid: entry for pid, entry in stored.items()
            if not (isinstance(entry, dict) and entry.get("key") in secrets)}
    if len(kept) == len(stored):
        return sorted(kept) if kept else None  # `{}` holds nothing
    log.warning("removed %d copies of wardian's keys that OpenCode wrote into %s", len(stored) - len(kept), path)
    if not kept:
        path.unlink(missing_ok=True)
        return None
    write_private(path, json.dumps(kept, indent=2))
    return sorted(kept)


def stale_auth_warning(name: str, data_dir: Path, left: list[str] | None, injected: bool) -> str | None:
    """What to tell a person of an `auth.json` left in the agent's private data dir (never its keys)."""
    if left is None:
        return None
    path = data_dir / "opencode" / AUTH_FILE
    held = f"keys for {', '.join(left)}" if left else "entries wardian cannot read"
    used = ("OpenCode ignores it while wardian gives the agent credentials, and uses it whenever the agent starts "
            "without any" if injected else "OpenCode uses it, since wardian gives the agent no credential")
    return (f"OpenCode agent {name}: {path} holds {held} ({used}); remove it and sign in with "
            "`wardian auth login opencode --provider ID --with-api-key` instead")


def check_connected(name: str, model: Any, declared: Iterable[str], connected: Any,
                    keys: Mapping[str, Credential]) -> None:
    """Refuse a start whose model's provider has no key.

    `model` is the agent's configured `provider/model` (None: OpenCode chooses, nothing to check), `declared` the
    provider ids its config declares (listed as connected with or without a key: their turns say so instead),
    `connected` `GET /provider`'s field.

    Raises:
        NotSignedIn: the model's provider is neither declared nor connected.
    """
    if not isinstance(model, str) or "/" not in model:
        return
    provider_id = model.split("/", 1)[0]
    if provider_id in set(declared):
        return
    if isinstance(connected, list) and provider_id in connected:
        return
    raise errors.NotSignedIn(f"OpenCode agent {name} has no key for provider {provider_id}: run "
                             f"`{login_hint(provider_id, keys)}`", field="auth")


async def check_start(client: ServeClient, name: str, keys: Mapping[str, Credential]) -> list[str]:
    """Before anything is delivered: warnings about the agent's config (its keys never leave this function), and the
    refusal of an agent whose model's provider has no key.

    Raises:
        NotSignedIn: see `check_connected`.
        ProviderUnavailable: serve did not answer.
    """
    try:
        # Both answers carry resolved keys: only the fields named here are read, and neither body is logged.
        config = (await client.request("GET", "/config")).json()
        connected = (await client.request("GET", "/provider")).json().get("connected")
    except (NotSent, ValueError, AttributeError) as exc:
        raise errors.ProviderUnavailable(f"OpenCode of {name} did not say which providers have keys "
                                         f"({type(exc).__name__})") from None
    if not isinstance(config, dict):
        config = {}
    declared = config.get("provider")
    check_connected(name, config.get("model"), declared if isinstance(declared, dict) else (), connected, keys)
    return config_key_warnings(name, config, keys)
