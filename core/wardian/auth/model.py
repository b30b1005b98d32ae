"""The credential records shared by the credential store, the CLI, the app and the providers (stdlib only).

A credential is one secret of one provider under a name (`default` unless `--name` chose another); an OpenCode
credential also names the OpenCode provider id it is for (`openai`, `anthropic`, a custom one), and one name may
hold several of those. A ChatGPT sign-in is not a secret wardian holds: it lives in the home's own Codex login, and
its record here only says that it exists. A secret is never part of a record's `repr`, and never leaves through
`mask()` (docs/guide/sign-in.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

AUTH_PROVIDERS = ("codex", "opencode", "claude", "qwen", "gemini", "pi")
DEFAULT_NAME = "default"


class CredentialKind(StrEnum):
    API_KEY = "api_key"
    """An API key: Codex (OpenAI), an OpenCode provider's, Claude Code's `ANTHROPIC_API_KEY`, Qwen Code's
    `OPENAI_API_KEY`, Gemini CLI's `GEMINI_API_KEY` or a Pi model provider's key."""
    OAUTH_TOKEN = "oauth_token"
    """Claude Code's long-lived token from `claude setup-token` (`CLAUDE_CODE_OAUTH_TOKEN`)."""
    CHATGPT = "chatgpt"
    """Codex's ChatGPT sign-in, held by the home's own Codex login; agents get short-lived access tokens."""


@dataclass(frozen=True, slots=True)
class Credential:
    provider: str
    """One of AUTH_PROVIDERS."""
    name: str
    kind: CredentialKind
    secret: str = field(repr=False)
    """The key or token itself ("" for a ChatGPT sign-in); never logged, never shown."""
    provider_id: str | None = None
    """OpenCode and Pi only: the OpenCode or Pi model provider id the key is for."""

    def mask(self) -> str:
        """What may be shown of the secret: its last four characters, when it is long enough to spare them."""
        if self.kind is CredentialKind.CHATGPT or len(self.secret) < 12:
            return "…"
        return "…" + self.secret[-4:]


@dataclass(frozen=True, slots=True)
class ChatGPTTokens:
    """A short-lived ChatGPT access token for a Codex agent (`account/login/start` `chatgptAuthTokens`)."""

    access_token: str = field(repr=False)
    account_id: str
    plan_type: str | None = None


class ChatGPTTokenSource(Protocol):
    """Where a Codex agent's ChatGPT tokens come from: the home's own Codex login, the only process that ever
    refreshes (docs/guide/sign-in.md#chatgpt)."""

    async def tokens(self, *, refresh: bool) -> ChatGPTTokens:
        """A current access token; `refresh` when the agent's was rejected (the owner then refreshes once)."""
        ...
