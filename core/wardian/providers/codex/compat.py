"""Which Codex CLI versions wardian drives, and what each may do (contract rule VER-2).

- Eligible: stable 0.154.0 or newer, and the explicitly tested pre-release 0.154.0-alpha.6. Any other
  pre-release is refused: contract rule VER-2 names one exception, not a range.
- Structured steering (`turn/steer` fenced by `expectedTurnId` with `additionalContext`): stable 0.159.2 or
  newer. Older eligible versions keep idle task delivery (`turn/start`) and information delivery
  (`thread/inject_items`).
- Eligibility is never evidence of delivery: every delivery still needs the provider's acknowledgement.
"""

from __future__ import annotations

from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate

CodexVersion = Version  # Codex's CLI versions are semantic versions; the harness reads them with this too
ENV_CODEX = "WARDIAN_CODEX"
MIN_STABLE = (0, 154, 0)
ALPHA_EXCEPTION = "0.154.0-alpha.6"
MIN_STEERING = (0, 159, 2)
# Not pinned: the executable is WARDIAN_CODEX, else the first `codex` on PATH (never a node_modules one).
GATE = VersionGate("Codex", "codex", "@openai/codex", ENV_CODEX, Version(*MIN_STABLE), tested=(ALPHA_EXCEPTION,),
                   pinned=False)

parse_codex_version = GATE.parse
"""The version in `codex --version` output (`codex-cli 0.171.0`). Raises: Unsupported (no version in it)."""


def capabilities(version: Version) -> Capabilities:
    """What wardian may ask of this Codex version.

    Raises:
        Unsupported: the version is not eligible (the message says which versions are).
    """
    GATE.check(version)
    steering = not version.is_prerelease and version.triple >= MIN_STEERING
    # Every eligible version pushes information (thread/inject_items), interrupts the exact turn, reports each
    # turn's end with its items, and serves an attached TUI over its app-server socket.
    return Capabilities(steer=steering, inject=True, interrupt=True, exact_completion=True, attach=True,
                        tool_grants=True)
