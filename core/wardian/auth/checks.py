"""What a credential may be: its provider, name, kind, OpenCode provider id and secret (docs/guide/sign-in.md).

Every check raises `InvalidArguments` naming the field and what is allowed, and never quotes a secret: an error
is printed, logged and sent over the wire, and a secret must reach none of them.
"""

from __future__ import annotations

import re
import unicodedata

from wardian import errors
from wardian.auth.model import AUTH_PROVIDERS, Credential, CredentialKind

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
NAME_ALLOWED = "1 to 64 characters of a-z, 0-9, '_', '.' and '-', starting with a letter or digit"
MAX_SECRET_CHARS = 4096
# The kinds each provider takes: what its agents can be handed (docs/guide/sign-in.md).
KINDS: dict[str, tuple[CredentialKind, ...]] = {
    "codex": (CredentialKind.API_KEY, CredentialKind.CHATGPT),
    "opencode": (CredentialKind.API_KEY,),
    "claude": (CredentialKind.API_KEY, CredentialKind.OAUTH_TOKEN),
    "qwen": (CredentialKind.API_KEY,),
    "gemini": (CredentialKind.API_KEY,),
    "pi": (CredentialKind.API_KEY,),
}
# The providers whose keys are each for one of their model providers, and what those are called there.
PROVIDER_IDS = {"opencode": ("an OpenCode provider id", "an OpenCode credential is for one OpenCode provider: give "
                             "its id with --provider (openai, anthropic, or a provider of your opencode.json)"),
                "pi": ("a Pi model provider id", "a Pi credential is for one of Pi's model providers: give its id "
                       "with --provider (anthropic, openai, or a provider of the agent's models.json)")}


def check_provider(provider: str) -> str:
    if provider not in AUTH_PROVIDERS:
        raise errors.InvalidArguments(f"there is no sign-in for provider {provider[:40]!r}", field="provider",
                                      allowed=", ".join(AUTH_PROVIDERS))
    return provider


def check_name(name: str, field: str = "name") -> str:
    """A credential name (`--name`, `--auth`)."""
    if not NAME_PATTERN.fullmatch(name):
        raise errors.InvalidArguments(f"{name[:70]!r} is not a credential name", field=field, allowed=NAME_ALLOWED)
    return name


def check_provider_id(provider: str, provider_id: str | None) -> str | None:
    """A model provider id is required for OpenCode and Pi, and refused for the others."""
    known = PROVIDER_IDS.get(provider)
    if known is None:
        if provider_id is not None:
            raise errors.InvalidArguments(
                f"--provider names a model provider id; a {provider} credential has none", field="provider_id",
                allowed="no --provider for " + provider)
        return None
    if provider_id is None:
        raise errors.InvalidArguments(known[1], field="provider_id", allowed=NAME_ALLOWED)
    if not NAME_PATTERN.fullmatch(provider_id):
        raise errors.InvalidArguments(f"{provider_id[:70]!r} is not {known[0]}", field="provider_id",
                                      allowed=NAME_ALLOWED)
    return provider_id


def check_kind(provider: str, kind: CredentialKind) -> CredentialKind:
    allowed = KINDS[provider]
    if kind not in allowed:
        raise errors.InvalidArguments(f"a {provider} credential cannot be a {kind.value}", field="kind",
                                      allowed=", ".join(k.value for k in allowed))
    return kind


def secret_from_input(raw: str) -> str:
    """What was read from standard input, less the one line ending `echo` or a file adds (then checked)."""
    if raw.endswith("\r\n"):
        return raw[:-2]
    return raw[:-1] if raw.endswith("\n") else raw


def check_secret(secret: str, kind: CredentialKind) -> str:
    """A key or token: one line of printable characters. A ChatGPT sign-in holds no secret here."""
    what = "token" if kind is CredentialKind.OAUTH_TOKEN else "key"
    if kind is CredentialKind.CHATGPT:
        if secret:
            raise errors.InvalidArguments("a ChatGPT sign-in holds no secret in the credential store",
                                          field="secret", allowed="an empty secret for kind chatgpt")
        return secret
    allowed = f"one line of 1 to {MAX_SECRET_CHARS} printable characters, no space at either end"
    if not secret:
        raise errors.InvalidArguments(f"the {what} is empty: pipe it on standard input", field="secret",
                                      allowed=allowed)
    if len(secret) > MAX_SECRET_CHARS:
        raise errors.InvalidArguments(f"the {what} is {len(secret)} characters long", field="secret", allowed=allowed)
    for i, ch in enumerate(secret):
        if ch in "\r\n\u2028\u2029":
            raise errors.InvalidArguments(f"the {what} holds a line break (character {i + 1}): give one line",
                                          field="secret", allowed=allowed)
        if ch == "\0":
            raise errors.InvalidArguments(f"the {what} holds a NUL byte (character {i + 1})", field="secret",
                                          allowed=allowed)
        if unicodedata.category(ch) == "Cc":
            raise errors.InvalidArguments(f"the {what} holds a control character (U+{ord(ch):04X}, character "
                                          f"{i + 1})", field="secret", allowed=allowed)
    if secret != secret.strip():
        raise errors.InvalidArguments(f"the {what} starts or ends with white space", field="secret", allowed=allowed)
    return secret


def check_credential(credential: Credential) -> Credential:
    """Raises: InvalidArguments (the first thing wrong, in the order provider, name, provider id, kind, secret)."""
    check_provider(credential.provider)
    check_name(credential.name)
    check_provider_id(credential.provider, credential.provider_id)
    check_kind(credential.provider, credential.kind)
    check_secret(credential.secret, credential.kind)
    return credential
