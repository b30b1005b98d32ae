"""Keeping OpenCode from installing `@opencode-ai/plugin` into an agent's private config dir when nothing there uses it.

At each start OpenCode forks a background npm install of `@opencode-ai/plugin` into every config dir it reads (the
agent's `$XDG_CONFIG_HOME/opencode` among them), so that plugin and tool files kept there can import it. It skips the
install when the dir already has a `node_modules/` and its `package-lock.json` lists, at its root, every dependency of
its `package.json` plus `@opencode-ai/plugin`. Unchecked, each fresh agent fetches some 3,500 files from the npm
registry at start: slow, a network access nobody asked for (and a failure offline), and slow to delete.

The app's private config dir holds only what wardian writes and the agent's `-c` settings, so wardian writes
placeholders of what that check reads (an empty `node_modules/` and a lockfile naming the package) while nothing in
the dir could use the package. As soon as something could (a `plugin` list in the config, a `package.json`, plugin or
tool files in the dir other than wardian's own plugin, which imports nothing), the placeholders are taken back and
OpenCode installs as it always does (docs/providers/opencode.md#plugin-packages).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wardian.providers.mcp_command import write_private
from wardian.providers.opencode import jsonc, shell_env
from wardian.providers.opencode.registration import config_file, read_config

PACKAGE = "@opencode-ai/plugin"
LOCKFILE = "package-lock.json"
PLACEHOLDER: dict[str, Any] = {"name": "wardian-agent-opencode-config", "lockfileVersion": 3, "requires": True,
                        "packages": {"": {"dependencies": {PACKAGE: "*"}}}}
"""What wardian writes as the lockfile: only the root entry, which is all OpenCode's check reads."""
USER_PARTS = ("package.json", "plugin", "plugins", "tool", "tools")
"""Entries of a config dir that mean its plugin or tool code may import the package (OpenCode's own layout)."""


def wants_package(config_dir: Path) -> bool:
    """Whether anything in the config dir may need the package: a non-empty `plugin` list, or any of USER_PARTS
    (the folder of wardian's own plugin only once it holds something else)."""
    ours = config_dir / shell_env.PLUGIN
    for part in USER_PARTS:
        path = config_dir / part
        if path == ours.parent and path.is_dir() and not path.is_symlink() and all(e == ours for e in path.iterdir()):
            continue
        if path.exists():
            return True
    return bool(jsonc.get(read_config(config_file(config_dir)), ("plugin",), None))


def _is_placeholder(lockfile: Path) -> bool:
    try:
        return bool(json.loads(lockfile.read_text(encoding="utf-8")) == PLACEHOLDER)
    except (FileNotFoundError, ValueError):
        return False


def settle(config_dir: Path) -> bool:
    """Write the placeholders when nothing in the config dir needs the package, else take ours back; True when written.

    A lockfile or `node_modules/` OpenCode wrote itself (a real install) is never touched.
    """
    lockfile, modules = config_dir / LOCKFILE, config_dir / "node_modules"
    if wants_package(config_dir):
        if _is_placeholder(lockfile):
            lockfile.unlink()
            if modules.is_dir() and not any(modules.iterdir()):
                modules.rmdir()
        return False
    modules.mkdir(mode=0o700, exist_ok=True)
    if not lockfile.exists():
        write_private(lockfile, json.dumps(PLACEHOLDER, indent=2) + "\n")
    return True
