"""Which Pi wardian drives, and what it may do (docs/guide/pi.md).

- Pi 0.73.1 or newer (pinned in package.json), as `pi --mode rpc`: one JSON object per line both ways; a task is one
  `prompt`, the run's end its `agent_end`.
- What it may do, stated as capabilities the app reads:
  - steer: a `steer` command joins the running run (the model sees it at its next request, after the tool results
    of the current step), and the run's end answers it;
  - inject while a run is active: information is a `steer` too. Not while idle: Pi would keep it queued in its
    memory only (lost if Pi restarts), so the app keeps it and pushes it just before the next task's prompt, which
    Pi then hands the model ahead of it;
  - interrupt (`abort`) and exact completion (`agent_end` carries the run's messages and how the last one stopped);
  - tool grants: wardian's extension asks the client (`extension_ui_request` confirm) before each wardian tool that
    changes what another agent sees, and the app answers from the agent's `--approve-tools`;
  - no attached terminal: the conversation is the app's RPC session.
"""

from __future__ import annotations

from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate

GATE = VersionGate("Pi", "pi", "@mariozechner/pi-coding-agent", "WARDIAN_PI", Version(0, 73, 1))
NO_ATTACH_REASON = ("the agent's conversation is the app's Pi RPC session, which no terminal UI can join; talk to it "
                    "through wardian (message send, task) instead")


def capabilities(version: Version) -> Capabilities:
    """What wardian may ask of this Pi version. Raises: Unsupported (older than 0.73.1, or a pre-release)."""
    GATE.check(version)
    return Capabilities(steer=True, inject=True, interrupt=True, exact_completion=True, attach=False,
                        inject_while_active=True, inject_while_idle=False, tool_grants=True,
                        no_attach_reason=NO_ATTACH_REASON)
