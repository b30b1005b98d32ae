"""The acceptance's settings: the `WARDIAN_E2E_*` variables (contract ACC-3, docs/guide/native-acceptance.md), read
once, with the team they choose (a lead and a worker, each a Codex, OpenCode or Claude Code agent, beside the person
who asks) and the tool grants each agent gets."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["E2E_PROVIDERS", "MODES", "NO_ATTACHED", "OPERATOR", "PROVIDERS", "PROVIDERS_ENV", "RECEIVER", "SENDER",
           "SENDER_TOOLS", "SIX_TOOLS", "Settings", "parse_providers"]

MODES = ("background", "attached_tui")
PROVIDERS = ("codex", "opencode", "claude", "qwen", "gemini", "acp", "pi")
"""What `wardian demo` runs."""
E2E_PROVIDERS = ("codex", "opencode", "claude")
"""What the acceptance (`run-native-e2e`) runs: its checks read each of these providers' own records."""
NO_ATTACHED = {"opencode": "OpenCode", "claude": "Claude Code", "qwen": "Qwen Code", "gemini": "Gemini CLI",
               "acp": "generic ACP (opencode acp)", "pi": "Pi"}
"""The providers without an attached TUI in wardian, by the name a person knows them by."""
PROVIDERS_ENV = "WARDIAN_E2E_MESSAGING_V2_PROVIDERS"
SIX_TOOLS = ("send_message", "followup_task", "wait_agent", "receive_messages", "reply", "list_agents")
"""What WARDIAN_E2E_MESSAGING_V2_APPROVE_TOOLS=1 grants: every tool of the seed but the destructive `interrupt_agent`
(the acceptance has no approvals to answer: `answer_approval` is not granted)."""
SENDER_TOOLS = ("followup_task",)
"""The default grant (our choice): the sender's one open-world call; receive_messages needs no grant."""

SENDER, RECEIVER, OPERATOR = "lead", "worker", "human"


def parse_providers(value: str, allowed: tuple[str, ...] = E2E_PROVIDERS) -> tuple[str, str]:
    """`lead,worker` providers, e.g. "codex,opencode".

    Raises:
        ValueError: not two names, or a name that is not a provider.
    """
    names = tuple(part.strip() for part in value.split(","))
    if len(names) != 2 or any(n not in allowed for n in names):
        raise ValueError(f"{PROVIDERS_ENV}={value!r}: give the lead's and the worker's provider, e.g. "
                         f"codex,opencode (allowed: {', '.join(allowed)})")
    return names[0], names[1]


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    return default if value in (None, "") else value == "1"


@dataclass(frozen=True)
class Settings:
    """The acceptance's `WARDIAN_E2E_*` variables (contract ACC-3, docs/guide/native-acceptance.md), read once."""

    mode: str = "background"
    lifecycle: bool = False
    real: bool = False
    trust: bool = True
    approve_all: bool = False
    cli: tuple[str, ...] = (sys.executable, "-m", "wardian")
    app: tuple[str, ...] = (sys.executable, "-m", "wardian")
    auth_home: Path | None = None
    providers: tuple[str, str] = ("codex", "codex")
    """The lead's and the worker's provider (WARDIAN_E2E_MESSAGING_V2_PROVIDERS=lead,worker)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Raises: ValueError: an unknown mode or provider, or a combination the run cannot do."""
        env = os.environ if env is None else env
        mode = env.get("WARDIAN_E2E_MESSAGING_V2_MODE") or "background"
        if mode not in MODES:
            raise ValueError(f"WARDIAN_E2E_MESSAGING_V2_MODE={mode!r} (allowed: {', '.join(MODES)})")
        providers = parse_providers(env.get(PROVIDERS_ENV) or "codex,codex")
        real = _flag(env, "WARDIAN_E2E_REAL_MESSAGING_V2", False)
        others = [NO_ATTACHED[p] for p in dict.fromkeys(providers) if p in NO_ATTACHED]
        if others and mode != "background":
            raise ValueError(f"{PROVIDERS_ENV}={','.join(providers)} needs WARDIAN_E2E_MESSAGING_V2_MODE=background: "
                             f"{' and '.join(others)} agents have no attached TUI in wardian")
        if others and real:
            raise ValueError(f"{PROVIDERS_ENV}={','.join(providers)}: the real-model run signs in Codex agents only "
                             f"(WARDIAN_E2E_CODEX_AUTH_HOME); {' and '.join(others)} agents run on the scripted model")
        cli = env.get("WARDIAN_E2E_MESSAGING_CLI")
        app = env.get("WARDIAN_NATIVE_APP")
        source = (sys.executable, "-m", "wardian")
        cli_cmd = (str(Path(cli).resolve()),) if cli else (str(Path(app).resolve()),) if app else source
        app_cmd = (str(Path(app).resolve()),) if app else cli_cmd
        auth = env.get("WARDIAN_E2E_CODEX_AUTH_HOME")
        return cls(mode=mode, lifecycle=_flag(env, "WARDIAN_E2E_MESSAGING_V2_LIFECYCLE", False), real=real,
                   trust=_flag(env, "WARDIAN_E2E_MESSAGING_V2_TRUST_FIXTURE_WORKSPACES", True),
                   approve_all=_flag(env, "WARDIAN_E2E_MESSAGING_V2_APPROVE_TOOLS", False),
                   cli=cli_cmd, app=app_cmd, auth_home=Path(auth) if auth else None, providers=providers)

    @property
    def attached(self) -> bool:
        return self.mode == "attached_tui"

    def provider(self, name: str) -> str:
        """The provider of the agent called `name` (the operator's never-started agent is a Codex one)."""
        return self.providers[0] if name == SENDER else self.providers[1] if name == RECEIVER else "codex"

    def grants(self, name: str) -> tuple[str, ...]:
        if self.provider(name) == "opencode":
            return ()  # OpenCode has no approval step for MCP tools: wardian refuses grants for it
        if self.approve_all:
            return SIX_TOOLS
        return SENDER_TOOLS if name == SENDER else ()
