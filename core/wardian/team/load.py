"""Reading a team file: the whole file is checked first and every problem reported at once, each with its line,
its field and what is allowed; nothing is started, created or changed, whatever the file holds."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.home import ENV_HOME
from wardian.model import PROVIDERS
from wardian.overrides import MAX_OVERRIDES, check_command, check_env
from wardian.team import policy, rules
from wardian.team.lines import KeyLines, scan
from wardian.team.model import Team, TeamAgent, TeamFileError, TeamProblem
from wardian.team.schema import AGENT_FIELDS, TEAM_FIELDS
from wardian.team.values import Key, flatten, key_text, merge, toml_value

MAX_FILE_BYTES = 1 << 20
TOP_KEYS = ("team", "defaults", "agents")
TEAM_KEYS = tuple(TEAM_FIELDS)
AGENT_KEYS = tuple(AGENT_FIELDS)
_AT = re.compile(r" \(at (?:line (\d+), column (\d+)|end of document)\)$")


class _Checker:
    """Collects the problems of one file while it reads it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dir = path.parent
        self.problems: list[TeamProblem] = []
        self.at = KeyLines()

    def add(self, where: Key | int, field: str, message: str) -> None:
        line = where if isinstance(where, int) else self.at.line_of(where)
        self.problems.append(TeamProblem(self.path, line, field, message))

    def on(self, path: Key, message: str) -> None:
        self.add(path, key_text(path), message)

    def table(self, path: Key, value: Any) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.on(path, f"must be a table ([{key_text(path)}]), not {_kind(value)}")
        return None

    def keys(self, path: Key, table: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                self.on((*path, key), f"unknown key {key[:60]!r}; allowed: {', '.join(allowed)}")

    def string(self, path: Key, value: Any) -> str | None:
        if isinstance(value, str) and value:
            return value
        self.on(path, f"must be a non-empty string, not {_kind(value)}")
        return None


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    return {bool: "a boolean", int: "an integer", float: "a float"}.get(type(value), "a date or time")


def _shown(path: Path) -> str:
    """The path as a person would type it here: relative below the current directory, else absolute."""
    try:
        relative = os.path.relpath(path)
    except (OSError, ValueError):
        return str(path)
    return str(path) if relative.startswith("..") else relative


def _read(check: _Checker) -> str | None:
    try:
        with check.path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        check.add(0, "file", f"there is no such file; write one with `wardian init {_shown(check.path)}`")
        return None
    except IsADirectoryError:
        check.add(0, "file", "this is a directory; give the team file itself (default wardian.toml)")
        return None
    except (OSError, ValueError) as exc:
        check.add(0, "file", f"the file cannot be read: {getattr(exc, 'strerror', None) or exc}")
        return None
    if len(data) > MAX_FILE_BYTES:
        check.add(0, "file", f"the file is larger than {MAX_FILE_BYTES} bytes; a team file is a few lines")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        check.add(data.count(b"\n", 0, exc.start) + 1, "file",
                  f"the file is not UTF-8 text (byte {exc.start + 1}); allowed: TOML in UTF-8")
        return None
    return text.removeprefix("\ufeff")


def _parse(check: _Checker, text: str) -> dict[str, Any] | None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _AT.search(message)
        line = text.count("\n") + 1
        if found is not None:
            message = message[:found.start()] + (f" (column {found[2]})" if found[1] else " (at the end)")
            line = int(found[1]) if found[1] else line
        check.add(line, "toml", f"not valid TOML: {message}; allowed: TOML 1.0 (https://toml.io/en/v1.0.0)")
        return None
    check.at = scan(text)
    return data


def _home(check: _Checker, team: Mapping[str, Any], environ: Mapping[str, str]) -> Path:
    if "home" in team:
        raw = check.string(("team", "home"), team["home"])
        if raw is not None:
            return _absolute(check.dir, raw)
    elif environ.get(ENV_HOME):
        try:
            return Path(os.path.abspath(os.path.expanduser(environ[ENV_HOME])))
        except (OSError, ValueError) as exc:  # the current directory is gone
            check.add(1, "team.home", f"cannot read ${ENV_HOME} ({exc}); give [team].home in the file")
    return check.dir / ".wardian"


def _absolute(base: Path, raw: str) -> Path:
    """`raw` read from `base`, `~` expanded (os.path's expansion leaves `~` as it is when there is no home)."""
    return Path(os.path.normpath(base / os.path.expanduser(raw)))


def _team(check: _Checker, data: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[Path, str | None]:
    table = check.table(("team",), data["team"]) if "team" in data else {}
    if table is None:
        return check.dir / ".wardian", None
    check.keys(("team",), table, TEAM_KEYS)
    console = None
    if "console" in table:
        console = check.string(("team", "console"), table["console"])
        if (why := None if console is None else rules.console_error(console)) is not None:
            check.on(("team", "console"), why)
    return _home(check, table, environ), console


def _settings(check: _Checker, provider: str | None, at: Key, table: Mapping[str, Any]) -> dict[Key, Any]:
    """The settings under `table` (the document path `at`), each checked as `agent start -c` would check it."""
    found: dict[Key, Any] = {}
    inline = any(at[:end] in check.at.assigned for end in range(1, len(at) + 1))  # within an inline table
    for key, value in flatten(table, at, check.at.assigned, inline=inline):
        found[key] = value
        if provider is not None:
            why = rules.setting_error(provider, key, f"{key_text(key)}={toml_value(value)}")
            if why is not None:
                check.on((*at, *key), why)
    return found


def _defaults(check: _Checker, data: Mapping[str, Any]) -> dict[str, dict[Key, Any]]:
    table = check.table(("defaults",), data["defaults"]) if "defaults" in data else None
    found: dict[str, dict[Key, Any]] = {}
    for provider, value in (table or {}).items():
        at = ("defaults", provider)
        if provider not in PROVIDERS:
            check.on(at, f"[defaults.{key_text((provider,))}] names no provider; allowed: {', '.join(PROVIDERS)}")
            continue
        settings = check.table(at, value)
        if settings is not None:
            found[provider] = _settings(check, provider, at, settings)
    return found


def _workspace(check: _Checker, at: Key, value: Any) -> Path | None:
    raw = check.string(at, value)
    if raw is None:
        return None
    try:
        path = _absolute(check.dir, raw).resolve()
        exists, is_dir = path.exists(), path.is_dir()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL byte, `~` without a home
        check.on(at, f"the workspace {raw[:200]!r} cannot be read: {exc}")
        return None
    if not exists:
        check.on(at, f"the workspace {path} does not exist; allowed: an existing directory (relative paths are "
                     "read from the team file's directory)")
    elif not is_dir:
        check.on(at, f"the workspace {path} is not a directory; allowed: an existing directory")
    return path if exists and is_dir else None


def _mode(check: _Checker, at: Key, value: Any) -> str | None:
    mode = check.string(at, value)
    if mode is not None and mode not in rules.MODES:
        check.on(at, f"unknown mode {mode[:40]!r}; allowed: {', '.join(rules.MODES)}")
        return None
    return mode


def _tools(check: _Checker, at: Key, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        check.on(at, f"must be an array of tool names (approve_tools = [\"reply\"]), not {_kind(value)}")
        return ()
    if not all(isinstance(v, str) for v in value):
        odd = next(v for v in value if not isinstance(v, str))
        check.on(at, f"must be an array of tool names (approve_tools = [\"reply\"]); it holds {_kind(odd)}")
        return ()
    tools, why = rules.tools_error(value)
    if why is not None:
        check.on(at, why)
    return tools


def _env(check: _Checker, at: Key, value: Any) -> tuple[str, ...]:
    table = check.table(at, value)
    if table is None:
        return ()
    out: list[str] = []
    for name, text in sorted(table.items()):
        if not isinstance(text, str):
            check.on((*at, name), f"must be text (an environment variable), not {_kind(text)}")
            continue
        try:
            out.append(check_env(f"{name}={text}"))
        except errors.WardianError as exc:
            check.on((*at, name), exc.message)
    return tuple(out)


def _command(check: _Checker, at: Key, provider: str, table: Mapping[str, Any]) -> tuple[str, ...]:
    value = table.get("command")
    if value is not None and (not isinstance(value, list) or not all(isinstance(w, str) for w in value)):
        check.on((*at, "command"), f'must be an array of strings (command = ["opencode", "acp"]), not {_kind(value)}')
        return ()
    try:
        return check_command(provider, value)
    except errors.WardianError as exc:
        check.on((*at, "command"), rules.said(exc))
        return ()


def _provider_of(check: _Checker, at: Key, table: Mapping[str, Any]) -> str | None:
    if "provider" not in table:
        check.on(at, f"provider is required; allowed: {', '.join(PROVIDERS)}")
        return None
    provider = check.string((*at, "provider"), table["provider"])
    if (why := None if provider is None else rules.provider_error(provider)) is not None:
        check.on((*at, "provider"), why)
        return None
    return provider


def _agent(check: _Checker, name: str, table: Mapping[str, Any],
           defaults: Mapping[str, Mapping[Key, Any]]) -> TeamAgent | None:
    at = ("agents", name)
    before = len(check.problems)
    if (why := rules.agent_name_error(name)) is not None:
        check.on(at, why)
    check.keys(at, table, AGENT_KEYS)
    provider = _provider_of(check, at, table)
    workspace = _workspace(check, (*at, "workspace"), table["workspace"]) if "workspace" in table else None
    mode = _mode(check, (*at, "mode"), table["mode"]) if "mode" in table else None
    tools = _tools(check, (*at, "approve_tools"), table["approve_tools"]) if "approve_tools" in table else ()
    auth = check.string((*at, "auth"), table["auth"]) if "auth" in table else None
    if auth is not None and (why := rules.credential_name_error(auth)) is not None:
        check.on((*at, "auth"), why)
    env = _env(check, (*at, "env"), table["env"]) if "env" in table else ()
    command = _command(check, at, provider, table) if provider is not None else ()
    extras, problems = rules.agent_extras(name, table)
    for key, why in problems:
        check.on((*at, key), why)
    own: dict[Key, Any] = {}
    if "settings" in table:
        settings = check.table((*at, "settings"), table["settings"])
        own = _settings(check, provider, (*at, "settings"), settings) if settings is not None else {}
    if provider is not None and mode is not None and (why := rules.launch_error(provider, mode, ())) is not None:
        check.on((*at, "mode"), why)
    if provider is not None and tools and (why := rules.launch_error(provider, "background", tools)) is not None:
        check.on((*at, "approve_tools"), why)
    merged = merge(defaults.get(provider or "", {}), own)
    if len(merged) > MAX_OVERRIDES:
        check.on((*at, "settings"), f"{len(merged)} settings, counting [defaults.{provider}]; at most "
                                    f"{MAX_OVERRIDES} are allowed (as -c)")
    if len(check.problems) > before or provider is None:
        return None
    settings_text = tuple(f"{k}={v}" for k, v in sorted((key_text(k), toml_value(v)) for k, v in merged.items()))
    return TeamAgent(name=name, provider=provider, workspace=workspace or (check.dir if extras["worktree"] else None),
                     mode=mode, approve_tools=tools, auth=auth, settings=settings_text, env=env, command=command,
                     line=check.at.line_of(at), **extras)


def _agents(check: _Checker, data: Mapping[str, Any], defaults: Mapping[str, Mapping[Key, Any]]) -> list[TeamAgent]:
    if "agents" not in data:
        check.add(1, "agents", "the file names no agent; add one: [agents.NAME] with provider = \"codex\"")
        return []
    table = check.table(("agents",), data["agents"])
    if table is None:
        return []
    if not table:
        check.on(("agents",), "the file names no agent; add one: [agents.NAME] with provider = \"codex\"")
    found: list[TeamAgent] = []
    for name, value in table.items():
        agent_table = check.table(("agents", name), value)
        agent = None if agent_table is None else _agent(check, name, agent_table, defaults)
        if agent is not None:
            found.append(agent)
    return found


def _check(check: _Checker, environ: Mapping[str, str]) -> Team | None:
    text = _read(check)
    data = None if text is None else _parse(check, text)
    if data is None:
        return None
    check.keys((), data, TOP_KEYS)
    home, console, team = *_team(check, data, environ), data.get("team")
    return Team(check.path, home, console, tuple(_agents(check, data, _defaults(check, data))),
                policy=policy.read_policy(check.on, team), notify=rules.read_notify(check.on, team))


def load_team(path: Path, *, environ: Mapping[str, str] | None = None) -> Team:
    """The team file at `path`, every part of it checked (docs/reference/team-file.md); `environ` (default: the
    process's) gives `WARDIAN_HOME` when the file names no home. Reads the file and stats its workspaces; starts,
    creates and changes nothing.

    Raises:
        TeamFileError: every problem of the file, in the order of its lines.
    """
    try:
        file = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    except OSError as exc:  # a relative path, and the current directory is gone
        problem = TeamProblem(Path(path), 0, "file", f"cannot find the file: {exc}")
        raise TeamFileError.of(Path(path), (problem,)) from None
    check = _Checker(file)
    try:
        team = _check(check, os.environ if environ is None else environ)
    except RecursionError:
        check.add(1, "toml", "the file nests arrays or tables too deeply to read; a team file needs a few levels")
        team = None
    if check.problems or team is None:
        raise TeamFileError.of(check.path, tuple(sorted(check.problems, key=lambda p: p.line)))
    return team
