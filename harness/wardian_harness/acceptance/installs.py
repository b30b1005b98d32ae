"""The CLIs a team of the acceptance runs, found once for the runner, the demo and the acceptance's fixtures: Codex
always (the person's agent is a Codex one, and so is every agent of the default team), and the OpenCode and Claude
Code, Qwen Code, Gemini CLI and Pi of an agent of those providers (a generic ACP agent runs `opencode acp`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wardian_harness.providers.acp_home import find_acp_cli
from wardian_harness.providers.claude_home import find_claude
from wardian_harness.providers.cli import CliInstall
from wardian_harness.providers.codex_install import CodexInstall, discover_codex
from wardian_harness.providers.opencode_home import find_opencode
from wardian_harness.providers.pi_home import find_pi

__all__ = ["Installs"]


@dataclass(frozen=True, slots=True)
class Installs:
    codex: CodexInstall
    opencode: CliInstall | None = None
    claude: CliInstall | None = None
    qwen: CliInstall | None = None
    gemini: CliInstall | None = None
    pi: CliInstall | None = None

    @classmethod
    def find(cls, providers: Iterable[str], env: Mapping[str, str] | None = None) -> Installs:
        """Codex, and the OpenCode and Claude Code CLIs when `providers` names them.

        Raises:
            CodexInstallError, ValueError: Codex is unusable (`discover_codex`).
            CliNotFound: an OpenCode or Claude Code the team needs is unusable; its `cli` names which.
        """
        wanted = set(providers)
        codex = discover_codex(env=env)
        opencode = find_opencode(env) if wanted & {"opencode", "acp"} else None  # a generic ACP agent: opencode acp
        return cls(codex, opencode, find_claude(env) if "claude" in wanted else None,
                   find_acp_cli("qwen", env) if "qwen" in wanted else None,
                   find_acp_cli("gemini", env) if "gemini" in wanted else None,
                   find_pi(env) if "pi" in wanted else None)

    def describe(self, *, paths: bool = False) -> str:
        """"Codex 0.171.0, OpenCode 1.18.33"; with `paths`, "Codex 0.171.0 at …; OpenCode 1.18.33 at …"."""
        found = [(name, install) for name, install in
                 (("Codex", self.codex), ("OpenCode", self.opencode), ("Claude Code", self.claude),
                  ("Qwen Code", self.qwen), ("Gemini CLI", self.gemini), ("Pi", self.pi)) if install]
        if paths:
            return "; ".join(f"{name} {install.version} at {install.executable}" for name, install in found)
        return ", ".join(f"{name} {install.version}" for name, install in found)
