"""The team file `wardian init` writes: a lead and a worker of the chosen providers, every key explained in a
comment, the settings a person changes first (the model) shown commented out, and no secret (sign-in stays with
`wardian auth`); the file loads with `load_team` as written. It names no path of the machine that wrote it, since a
team file is shared through repositories: with `--schema`, the team file's JSON Schema is written beside it
(`wardian.schema.json`) and the file's first line points editors at it relatively (`#:schema`, read by taplo and Even
Better TOML)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

from wardian import errors
from wardian.model import PROVIDERS
from wardian.taskpolicy import DEFAULT_MAX_CHAIN_TASKS, DEFAULT_MAX_TASK_DEPTH
from wardian.team.rules import capabilities
from wardian.team.schema import AGENT_FIELDS, DEFAULTS_DOC, SCHEMA_FILE, SETTINGS_OF, TEAM_FIELDS

DEFAULT_PROVIDERS = ("codex",)
# What a person sets first, per provider: shown commented out, since the provider's own default works as it is.
SAMPLE_SETTINGS: dict[str, tuple[str, ...]] = {
    "codex": ('model = "gpt-5-codex"', 'model_reasoning_effort = "medium"'),
    "opencode": ('model = "openai/gpt-5"',),
    "claude": ('model = "sonnet"',),
    "qwen": ('model.name = "qwen3-coder-plus"',),
    "gemini": ('model.name = "gemini-2.5-pro"',),
    "pi": ('defaultModel = "claude-sonnet-4-5"', 'defaultProvider = "anthropic"'),
    "acp": ('env.OPENCODE_LOG_LEVEL = "WARN"',),
}
SAMPLE_COMMAND = '["opencode", "acp"]'
"""A generic ACP agent's command line, which its table must have: the one verified with wardian."""
# The tools a lead and a worker use to hand each other work and answer it.
GRANTS = ("send_message", "followup_task", "reply")
_ALLOWED = f"one to {len(PROVIDERS)} of {', '.join(PROVIDERS)}, comma-separated (the first is the lead's)"


def parse_providers(text: str | None) -> tuple[str, ...]:
    """`--providers codex,claude`: the lead's provider first, then one worker for each further one (one provider:
    a lead and a worker of it). Raises: InvalidArguments."""
    if text is None:
        return DEFAULT_PROVIDERS
    names = tuple(n.strip() for n in text.split(","))
    unknown = [n for n in names if n not in PROVIDERS]
    if unknown:
        shown = ", ".join(repr(n[:40]) for n in unknown[:3])
        raise errors.InvalidArguments(f"--providers names no provider: {shown}", field="providers",
                                      allowed=_ALLOWED)
    if len(names) > len(PROVIDERS):
        raise errors.InvalidArguments(f"--providers names {len(names)} agents' providers; at most {len(PROVIDERS)}",
                                      field="providers", allowed=_ALLOWED)
    return names


def roster(providers: Sequence[str]) -> list[tuple[str, str]]:
    """(name, provider) of each agent the file has: `lead`, then `worker`, `worker-2`, ..."""
    if len(providers) == 1:
        return [("lead", providers[0]), ("worker", providers[0])]
    workers = [("worker" if i == 0 else f"worker-{i + 1}", p) for i, p in enumerate(providers[1:])]
    return [("lead", providers[0]), *workers]


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, 100 - len(indent))]


SCHEMA_NAME = "wardian.schema.json"
_SCHEMA_TITLE = '"title": "wardian team file (wardian.toml)"'
_SCHEMA_LINE = f"#:schema ./{SCHEMA_NAME}"


def _header(schema: bool) -> list[str]:
    editors = ([_SCHEMA_LINE] if schema else
               [f"# For completion in editors (taplo, Even Better TOML): `wardian init --schema` writes {SCHEMA_NAME}",
                f"# beside this file; then make `{_SCHEMA_LINE}` this file's first line."])
    return [*editors,
            "# A team of coding agents in one file. `wardian up` makes it so: it checks the whole file, starts the",
            "# app if needed, and adds and starts each agent below; `wardian down` stops them. Every key is",
            "# explained in a comment; docs/reference/team-file.md lists them all. Sign in once per provider with",
            "# `wardian auth login PROVIDER`: the key stays in the home's credential store, never in this file.",
            "", "[team]", *_comment(TEAM_FIELDS["home"]), '# home = ".wardian"',
            *_comment(TEAM_FIELDS["console"]), '# console = "127.0.0.1:8765"',
            *_comment(TEAM_FIELDS["notify"]), '# notify = ["notify-send", "wardian"]',
            *_comment(TEAM_FIELDS["task_deadline"]), '# task_deadline = "30m"',
            *_comment(TEAM_FIELDS["max_task_depth"]), f"# max_task_depth = {DEFAULT_MAX_TASK_DEPTH}",
            *_comment(TEAM_FIELDS["max_chain_tasks"]), f"# max_chain_tasks = {DEFAULT_MAX_CHAIN_TASKS}", ""]


def _defaults(providers: Sequence[str]) -> list[str]:
    out = _comment(DEFAULTS_DOC)
    for provider in dict.fromkeys(providers):
        out += [f"[defaults.{provider}]", *_comment(SETTINGS_OF[provider])]
        out += [f"# {line}" for line in SAMPLE_SETTINGS[provider]]
        out.append("")
    return out


def _agent(name: str, provider: str, lead: bool) -> list[str]:
    """The lead's table explains every key; a worker's repeats only what differs."""
    caps = capabilities(provider)
    tools = ", ".join(f'"{t}"' for t in GRANTS)
    grants = (f"approve_tools = [{tools}]" if caps.tool_grants
              else f"# approve_tools: none ({provider} has no approval step)")
    model = f"# {SAMPLE_SETTINGS[provider][0]}"
    command = [f"command = {SAMPLE_COMMAND}"] if provider == "acp" else []
    if not lead:
        return [f"# {name} ({provider}): takes the lead's tasks and replies; its keys mean what the lead's do.",
                f"[agents.{name}]", f'provider = "{provider}"', *command, '# workspace = "."', "# worktree = true",
                grants, '# approvals = "lead"', '# allow = ["Bash(git status:*)", "edit"]',
                '# auth = "work"', f"[agents.{name}.settings]", model, ""]
    return [f"# {name} ({provider}): hands out the work and answers you.", f"[agents.{name}]",
            *_comment(AGENT_FIELDS["provider"]), f'provider = "{provider}"',
            *(_comment(AGENT_FIELDS["command"]) if command else []), *command,
            *_comment(AGENT_FIELDS["workspace"]), 'workspace = "."',
            *_comment(AGENT_FIELDS["worktree"]), "# worktree = true",
            *_comment(AGENT_FIELDS["mode"]), '# mode = "attached"' if caps.attach else '# mode = "background"',
            *_comment(AGENT_FIELDS["approve_tools"]), grants,
            *_comment(AGENT_FIELDS["approvals"]), '# approvals = "person"',
            *_comment(AGENT_FIELDS["approval_timeout"]), '# approval_timeout = "10m"',
            *_comment(AGENT_FIELDS["allow"]), '# allow = ["Bash(git status:*)", "Bash(git diff:*)"]',
            *_comment(AGENT_FIELDS["auth"]), '# auth = "work"',
            *_comment(AGENT_FIELDS["settings"]), f"[agents.{name}.settings]", model, ""]


def team_file(providers: Sequence[str] = DEFAULT_PROVIDERS, *, schema: bool = False) -> str:
    """The text of a new team file for these providers (`parse_providers`); with `schema`, its first line points at
    the schema written beside it (`write_schema`)."""
    lines = _header(schema) + _defaults(providers)
    for i, (name, provider) in enumerate(roster(providers)):
        lines += _agent(name, provider, lead=i == 0)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_team_file(path: Path, providers: Sequence[str] = DEFAULT_PROVIDERS, *, force: bool = False,
                    schema: bool = False) -> Path:
    """Write a new team file at `path` (absolute, returned); an existing one only with `force`, replaced whole. With
    `schema` its first line points at `wardian.schema.json` beside it (`write_schema` writes that).

    Raises:
        InvalidArguments: the file exists (without `force`), is a directory, or cannot be written; nothing was
            changed.
    """
    path = _team_path(path)
    text = team_file(providers, schema=schema)
    try:
        if force:
            _replace(path, text)
        else:
            _create(path, text)
    except FileExistsError:
        raise errors.InvalidArguments(f"{path} already exists; nothing was changed (pass --force to overwrite it)",
                                      field="file", allowed="a new file, or --force") from None
    except OSError as exc:
        raise errors.InvalidArguments(f"cannot write {path}: {exc.strerror or exc}; nothing was written",
                                      field="file", allowed="a writable file path") from None
    return path


def schema_path(team_path: Path) -> Path:
    """Where `write_schema` writes the schema of the team file `team_path`, checked before anything is written.

    Raises: InvalidArguments (the team file's folder is missing, or the name holds something other than wardian's
        schema)."""
    target = _team_path(team_path).with_name(SCHEMA_NAME)
    try:
        current = target.read_text(encoding="utf-8") if target.exists() or target.is_symlink() else None
    except (OSError, UnicodeDecodeError):
        current = ""
    if current is not None and _SCHEMA_TITLE not in current[:200_000]:
        raise errors.InvalidArguments(f"{target} exists and is not a wardian team file's schema; nothing was changed",
                                      field="file", allowed=f"a folder whose {SCHEMA_NAME} is wardian's, or none")
    return target


def write_schema(team_path: Path) -> Path:
    """Write (or bring up to date) the team file's JSON Schema beside `team_path`, as `wardian.schema.json`; its path.
    A file of that name that is not a wardian team file's schema is left as it is.

    Raises: InvalidArguments (see `schema_path`; or it cannot be written: nothing was changed).
    """
    target = schema_path(team_path)
    try:
        _replace(target, SCHEMA_FILE.read_text(encoding="utf-8"))
    except OSError as exc:
        raise errors.InvalidArguments(f"cannot write {target}: {exc.strerror or exc}; nothing was written",
                                      field="file", allowed="a writable folder") from None
    return target


def _team_path(path: Path) -> Path:
    """`path` made absolute. Raises: InvalidArguments (a directory, or its folder is missing)."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        raise errors.InvalidArguments(f"{path} is a directory; give the team file's name (default wardian.toml)",
                                      field="file", allowed="a file path")
    if not path.parent.is_dir():
        raise errors.InvalidArguments(f"the directory {path.parent} does not exist; nothing was written",
                                      field="file", allowed="a file in an existing directory")
    return path


def _create(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # never follows or replaces what is there
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _replace(path: Path, text: str) -> None:
    """Whole or not at all: a reader never sees half a file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _create(temp, text)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
