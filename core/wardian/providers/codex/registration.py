"""Writing `[mcp_servers.wardian]` for one managed agent into its private CODEX_HOME (for `wardian codex register`,
whose command line lives in the CLI, and for the app's managed startup).

Contract rules CFG-1, CFG-2 and APR-2 (docs/design/contract.md): registration preserves user-owned entries, disabled
state and approval settings; an occupied server name or a missing CLI is reported instead of silently replacing
configuration; the user's global provider home is not modified; registration grants no approval unless asked.

Invariants:
- Everything is checked before anything changes: the tool names, the target home, the CLI to register, the
  existing config (parsed, and any `wardian` entry proven ours) and only then is a session issued by the app
  and the file replaced atomically (same directory, fsync, rename). A failure leaves the file untouched.
- An entry is "ours" when it launches a wardian executable with `args = ["mcp", "serve"]` for the same
  WARDIAN_HOME; anything else under `[mcp_servers.wardian]` belongs to the user and is never overwritten.
- Inside our entry only the keys we own are written (`command`, `args`, `tool_timeout_sec`,
  `env.WARDIAN_HOME`, `env.WARDIAN_SESSION_ID`, and `tools.<name>.approval_mode` for `--approve-tools`);
  `enabled`, other env variables, other tools' approval settings and every comment stay as they were.
- The session secret is written only into the config file (mode 0600) and never printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from wardian import errors
from wardian.home import ENV_HOME, ENV_SESSION, Home
from wardian.limits import CODEX_TOOL_TIMEOUT_SEC
from wardian.protocol.tools import SERVER_NAME
from wardian.providers.mcp_command import SERVE_ARGS, wardian_executable, write_private
from wardian.providers.registration import Registration, existing_entry, launches_wardian, target_dir

APPROVE = "approve"
FIELD = "codex_home"
REFUSAL = ("{dir} is the user's global Codex home; register into the agent's private CODEX_HOME (for a host you "
           "configure yourself, run the printed `codex mcp add` command there)")


def _load(path: Path) -> tomlkit.TOMLDocument:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise errors.InvalidArguments(f"{path} is not valid TOML ({exc}); fix it first, nothing was changed",
                                      field=FIELD) from None


def _is_ours(entry: Any, home: Home) -> bool:
    return isinstance(entry, dict) and launches_wardian(entry.get("command"), entry.get("args"), entry.get("env"), home)


def _check_entry(doc: tomlkit.TOMLDocument, home: Home, config_path: Path) -> Any:
    return existing_entry(doc.get("mcp_servers"), config_path, home, key="mcp_servers", kind="a table", field=FIELD,
                          ours=_is_ours)


def _write_entry(doc: tomlkit.TOMLDocument, command: str, home: str, session: str,
                 approved: tuple[str, ...], exact: bool = False) -> tuple[bool, bool]:
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    created = SERVER_NAME not in servers
    if created:
        entry = tomlkit.table()
        servers[SERVER_NAME] = entry
    entry = servers[SERVER_NAME]
    entry["command"] = command
    entry["args"] = list(SERVE_ARGS)
    # Contract rule CFG-4: tool_timeout_sec = 70 outlasts the longest wait (60 s) plus the client's grace.
    entry["tool_timeout_sec"] = CODEX_TOOL_TIMEOUT_SEC
    if "env" not in entry:
        entry["env"] = tomlkit.table()
    entry["env"][ENV_HOME] = home
    entry["env"][ENV_SESSION] = session
    if approved:
        if "tools" not in entry:
            entry["tools"] = tomlkit.table(is_super_table=True)
        tools = entry["tools"]
        for name in approved:
            if name not in tools:
                tools[name] = tomlkit.table()
            tools[name]["approval_mode"] = APPROVE
    if exact and "tools" in entry:
        # The app's own start: the grants it keeps with the agent are all there are, so one a later start no
        # longer gives is taken back (the tool asks again).
        for name, table in list(entry["tools"].items()):
            if name not in approved and isinstance(table, dict) and "approval_mode" in table:
                del table["approval_mode"]
    if created:
        # Keep a blank line between our last table and whatever table follows it in the user's file.
        last = entry["tools"][approved[-1]] if approved else entry["env"]
        last.add(tomlkit.nl())
    enabled = entry.get("enabled", True) is not False
    return created, enabled


def check_registration(codex_home: Path, home: Home) -> Path:
    """Check all that `register_session` will, before the app is asked for a session; returns the absolute home.

    Raises:
        InvalidArguments: the global Codex home, or an unreadable config.
        RegistrationConflict: `[mcp_servers.wardian]` exists and is not ours.
        CliNotFound: no wardian executable to register.
    """
    codex_home = target_dir(codex_home, (Path.home() / ".codex",), REFUSAL, field=FIELD)
    wardian_executable()
    _check_entry(_load(codex_home / "config.toml"), home, codex_home / "config.toml")
    return codex_home


def register_session(codex_home: Path, home: Home, session: str, agent: dict[str, Any],
                     approved: tuple[str, ...], exact: bool = False) -> Registration:
    """Write the entry for an already issued session. `exact`: these are all the grants (an app-owned start's);
    otherwise (`wardian codex register`) grants already in the file are kept.

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: as `check_registration`; nothing was changed.
    """
    codex_home = target_dir(codex_home, (Path.home() / ".codex",), REFUSAL, field=FIELD)
    command = str(wardian_executable())
    config_path = codex_home / "config.toml"
    doc = _load(config_path)
    _check_entry(doc, home, config_path)
    codex_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    created, enabled = _write_entry(doc, command, str(home.root), session, approved, exact)
    write_private(config_path, tomlkit.dumps(doc))
    return Registration(config_path, command, agent, str(home.root), approved, created, enabled)
