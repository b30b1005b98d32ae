"""Which OpenCode CLI versions wardian drives, and what they may do (docs/providers/opencode.md).

- Eligible: 1.18.33 or newer (the version every behaviour below was verified with, pinned in package.json):
  `opencode serve` with Basic auth from `OPENCODE_SERVER_PASSWORD`, `prompt_async` with a client-chosen `msg_` id
  and `GET /session/{id}/message/{msgID}` to look one up, `noReply` messages, `abort`, and the `/event` stream.
  Pre-releases are refused: nothing says they keep those routes.
- What OpenCode cannot do, stated as capabilities the app reads:
  - no turn-fenced steer: `prompt_async` while a loop runs is folded into that loop at its next step, with no fence
    on which loop; so a task for a busy agent waits for `session.idle` and starts its own turn;
  - no push while a loop runs: a `noReply` message sent then is consumed like a prompt (an extra model step), so
    information and replies wait for idle (meanwhile they are on the receive path);
  - no attached TUI of the app-owned server.
"""

from __future__ import annotations

from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate

ENV_OPENCODE = "WARDIAN_OPENCODE"
MIN_VERSION = Version(1, 18, 33)
GATE = VersionGate("OpenCode", "opencode", "opencode-ai", ENV_OPENCODE, MIN_VERSION)

parse_opencode_version = GATE.parse
"""The version in `opencode --version` output (`1.18.33`). Raises: Unsupported (no version in it)."""


def capabilities(version: Version) -> Capabilities:
    """What wardian may ask of this OpenCode version.

    Raises:
        Unsupported: the version is older than MIN_VERSION or a pre-release (the message names WARDIAN_OPENCODE).
    """
    GATE.check(version)
    return Capabilities(steer=False, inject=True, interrupt=True, exact_completion=True, attach=False,
                        inject_while_active=False)
