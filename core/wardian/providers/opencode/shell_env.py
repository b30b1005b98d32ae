"""The plugin wardian writes into an agent's private OpenCode config dir, so that the commands the agent runs do not
inherit its serve's credentials (docs/providers/opencode.md#sign-in).

OpenCode 1.18.33 gives every command the agent runs (its `bash` tool, a `!` shell command, a terminal) serve's own
environment plus what the plugins' `shell.env` hooks put in `output.env`, the hooks' entries winning
(https://opencode.ai/docs/plugins). This plugin puts there the names of serve's secrets with no value (JavaScript's
`undefined`), and the spawn leaves such a name out of the child's environment. serve keeps both for itself: it reads
`OPENCODE_AUTH_CONTENT` at each use of a key and the password when it starts.

Still exposed to the agent's commands, which run as the same user: serve's `/proc/<pid>/environ` (the environment
it was started with, which no later change in the process alters), and the environment of the children serve starts
without the hook (its MCP servers, language servers and formatters).
"""

from __future__ import annotations

import json
from pathlib import Path

from wardian.providers.mcp_command import write_private

PLUGIN = Path("plugin") / "wardian-credentials.js"
"""Where in the config dir (OpenCode loads `{plugin,plugins}/*.{js,ts}` there at start)."""
HIDDEN = ("OPENCODE_AUTH_CONTENT", "OPENCODE_SERVER_PASSWORD")
"""serve's secrets: the agent's keys (`signin`) and the password of its HTTP API (`provider`)."""

SOURCE = f"""\
// Written by wardian at each start of this agent; changes are overwritten.
// The commands the agent runs get OpenCode's environment without these names (an undefined value is left out).
const HIDDEN = {json.dumps(list(HIDDEN))}

export const WardianCredentials = async () => ({{
  "shell.env": async (_input, output) => {{
    for (const name of HIDDEN) output.env[name] = undefined
  }},
}})
"""


def write(config_dir: Path) -> None:
    """Write the plugin into the agent's config dir (owner-only, replaced whole)."""
    path = config_dir / PLUGIN
    path.parent.mkdir(mode=0o700, exist_ok=True)
    write_private(path, SOURCE)
