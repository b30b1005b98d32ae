"""Which credentials an agent's start gets, and the command that fixes a missing one (docs/guide/sign-in.md)."""

from __future__ import annotations

from wardian import errors
from wardian.auth.model import AUTH_PROVIDERS, DEFAULT_NAME, Credential
from wardian.auth.store import CredentialStore

PROVIDER_TITLES = {"codex": "Codex", "opencode": "OpenCode", "claude": "Claude Code", "qwen": "Qwen Code",
                   "gemini": "Gemini CLI", "pi": "Pi"}


def login_hint(provider: str, name: str = DEFAULT_NAME, provider_id: str | None = None) -> str:
    """The `wardian auth login` command that stores a credential of `provider` under `name`."""
    how = {"codex": "codex --with-api-key",
           "opencode": f"opencode --provider {provider_id or 'ID'} --with-api-key",
           "claude": "claude --with-api-key (or --with-oauth-token)", "qwen": "qwen --with-api-key",
           "gemini": "gemini --with-api-key",
           "pi": f"pi --provider {provider_id or 'ID'} --with-api-key"}.get(provider, provider)
    named = "" if name == DEFAULT_NAME else f" --name {name}"
    return f"wardian auth login {how}{named}"


def check_auth_choice(store: CredentialStore, provider: str, agent: str, auth: str) -> None:
    """`--auth NAME` for an agent of `provider`: a credential of that provider must be stored under the name.

    Raises: Unsupported (the provider takes no credentials from wardian); NotSignedIn (none stored under it).
    """
    if provider not in AUTH_PROVIDERS:
        raise errors.Unsupported(f"{provider} agents take no credential from wardian's store", field="auth",
                                 allowed="no --auth for " + provider)
    if not store.has(provider, auth):
        raise errors.NotSignedIn(
            f"there is no {PROVIDER_TITLES[provider]} credential named {auth!r} for agent {agent}: run "
            f"`{login_hint(provider, auth)}`, or see `wardian auth status`", field="auth")


def credentials_for(store: CredentialStore, provider: str, agent: str, auth: str | None) -> tuple[Credential, ...]:
    """What an agent's start hands its provider: the credentials stored under the agent's `auth` name, else under
    the default name. None under the default name is the provider's to judge (a custom model provider may need
    none); none under a name the agent was given is refused.

    Raises: NotSignedIn (the agent's `auth` names no stored credential); StorageUnavailable; InsecureHome.
    """
    if provider not in AUTH_PROVIDERS:
        return ()
    found = store.get(provider, auth or DEFAULT_NAME)
    if not found and auth is not None:
        raise errors.NotSignedIn(
            f"{PROVIDER_TITLES[provider]} agent {agent} uses the credential {auth!r}, which is not stored: run "
            f"`{login_hint(provider, auth)}`, or choose another with `wardian agent start {agent} --auth NAME`",
            field="auth")
    return found
