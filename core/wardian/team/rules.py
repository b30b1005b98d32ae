"""The checks of a team file's fields, each the one the product applies to the same value when it is given on the
command line (`wardian agent add`, `wardian agent start`, `wardian app run --console`), so a file is refused for
exactly what those commands would refuse, with their words.

Each check returns None when the value is fine, else what is wrong and what is allowed. What each provider can do
is read from its version gates (`compat`), which are light; the checks that need a heavy stack (pydantic, the app's
launch check, the providers' implementations) import it only when a file has a value for them, so `wardian init`,
which reads this module for the capabilities, and a file that fails on its syntax need none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from wardian import errors
from wardian.approval_rules import check_rules
from wardian.approvals import POLICIES
from wardian.branches import check_branch, default_branch
from wardian.console.address import parse_console_address
from wardian.durations import parse_duration
from wardian.model import PROVIDERS
from wardian.notifications import parse_notify_command
from wardian.overrides import MAX_OVERRIDE_CHARS, parse_override
from wardian.protocol.tools import parse_tool_names
from wardian.providers.acp import compat as acp
from wardian.providers.claude import compat as claude
from wardian.providers.codex import compat as codex
from wardian.providers.opencode import compat as opencode
from wardian.providers.pi import compat as pi
from wardian.providers.version import Version
from wardian.team.values import toml_value

if TYPE_CHECKING:
    from wardian.providers import Capabilities, Provider

MODES = ("background", "attached")


def said(exc: errors.WardianError) -> str:
    """An error's message with what it allows, as one sentence for a problem line."""
    return f"{exc.message}; allowed: {exc.allowed}" if exc.allowed else exc.message


def provider_error(value: str) -> str | None:
    return None if value in PROVIDERS else f"unknown provider {value[:40]!r}; allowed: {', '.join(PROVIDERS)}"


def agent_name_error(name: str) -> str | None:
    from wardian.protocol.methods.base import check_agent_name  # pydantic (~100 ms): not `wardian init`'s

    try:
        check_agent_name(name)
    except errors.WardianError as exc:
        return said(exc)
    return None


def credential_name_error(name: str) -> str | None:
    from wardian.auth.checks import check_name  # the credential model: `wardian init` never loads it

    try:
        check_name(name, "auth")
    except errors.WardianError as exc:
        return said(exc)
    return None


def worktree_branch(agent: str, value: object) -> tuple[str | None, str | None]:
    """The branch of an agent's `worktree = VALUE` (None: no worktree), or what is wrong with VALUE."""
    if value is False:
        return None, None
    if value is not True and not isinstance(value, str):
        return None, f'must be true or a branch name (worktree = "feature"), not {_kind(value)}'
    try:
        return check_branch(default_branch(agent) if value is True else value, "worktree"), None
    except errors.WardianError as exc:
        return None, said(exc)


class AgentExtras(TypedDict):
    """The `TeamAgent` fields `agent_extras` reads."""

    worktree: str | None
    approvals: str | None
    approval_timeout_ms: int | None
    allow: tuple[str, ...]


def agent_extras(agent: str, table: Mapping[str, Any]) -> tuple[AgentExtras, list[tuple[str, str]]]:
    """An agent's `worktree` branch, `approvals` policy and `approval_timeout` (milliseconds), each None when not
    given, and its `allow` rules; and what is wrong with any of them, by key."""
    problems: list[tuple[str, str]] = []
    branch, why = worktree_branch(agent, table.get("worktree", False))
    if why is not None:
        problems.append(("worktree", why))
    policy = table.get("approvals")
    if policy is not None and policy not in POLICIES:
        shown = repr(policy) if isinstance(policy, str) else _kind(policy)
        problems.append(("approvals", f"must be one of {', '.join(POLICIES)} (approvals = \"person\"), not {shown}"))
        policy = None
    timeout: int | None = None
    if "approval_timeout" in table:
        value = table["approval_timeout"]
        try:
            if not isinstance(value, str):
                raise errors.InvalidArguments(f"must be a duration as text (approval_timeout = \"10m\"), not "
                                              f"{_kind(value)}")
            timeout = parse_duration(value, "approval_timeout")
        except errors.WardianError as exc:
            problems.append(("approval_timeout", said(exc)))
    allow, why = allow_rules(table["allow"]) if "allow" in table else ((), None)
    if why is not None:
        problems.append(("allow", why))
    return {"worktree": branch, "approvals": policy, "approval_timeout_ms": timeout, "allow": allow}, problems


def allow_rules(value: object) -> tuple[tuple[str, ...], str | None]:
    """An agent's `allow` rules, as `agent start --allow` keeps them, and what is wrong with them (None: nothing)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        held = _kind(value) if not isinstance(value, list) else "an array holding " + next(
            _kind(v) for v in value if not isinstance(v, str))  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
        return (), f'must be an array of rules (allow = ["Bash(git status:*)"]), not {held}'
    try:
        return tuple(check_rules(value, "allow")), None  # pyright: ignore[reportUnknownArgumentType]
    except errors.WardianError as exc:
        return (), said(exc)


def _kind(value: object) -> str:
    """A TOML value's kind, as a problem line names it."""
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a float", list: "an array", dict: "a table", str: "text"}.get(type(value),
                                                                                                   "a date")


def console_error(text: str) -> str | None:
    try:
        parse_console_address(text)
    except errors.WardianError as exc:
        return said(exc)
    return None


def read_notify(on: Callable[[tuple[str, ...], str], None], table: object) -> tuple[str, ...] | None:
    """`[team].notify`: a list (the program and its arguments), as `--notify-command` takes it once split; None when
    left out, or wrong (reported with `on`), or when [team] is not a table (the loader reports that)."""
    if not isinstance(table, dict) or "notify" not in table:
        return None
    value: object = table["notify"]
    if not isinstance(value, list):
        on(("team", "notify"), 'must be an array of strings (the program and its arguments: ["notify-send", '
                               f'"wardian"]), not {_kind(value)}')
        return None
    try:
        return parse_notify_command(value, "notify")
    except errors.WardianError as exc:
        on(("team", "notify"), said(exc))
        return None


def tools_error(names: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    try:
        return tuple(sorted(parse_tool_names(list(names)))), None
    except errors.WardianError as exc:
        return (), said(exc)


@functools.cache
def _provider(name: str) -> Provider:
    # Every provider's implementation with anyio and their wire stacks (~300 ms): only for a file with settings.
    from wardian.providers.registry import PROVIDERS as IMPLEMENTATIONS

    return IMPLEMENTATIONS[name]


@functools.cache
def capabilities(name: str) -> Capabilities:
    """What every version of the provider wardian drives may do: whether it has an attached mode and takes tool
    grants does not change between eligible versions, so the oldest eligible one answers for all (the start itself
    asks the installed one again)."""
    if name == "codex":
        return codex.capabilities(Version(*codex.MIN_STABLE))
    if name == "opencode":
        return opencode.capabilities(opencode.MIN_VERSION)
    if name == "qwen":
        return acp.qwen_capabilities(acp.QWEN_GATE.minimum)
    if name == "gemini":
        return acp.gemini_capabilities(acp.GEMINI_GATE.minimum)
    if name == "pi":
        return pi.capabilities(pi.GATE.minimum)
    if name == "acp":
        return acp.generic_capabilities(Version(0, 0, 0))
    return claude.capabilities(claude.MIN_VERSION)


def launch_error(provider: str, mode: str, approve_tools: Sequence[str]) -> str | None:
    """What `wardian agent start` refuses of this mode and these grants for the provider (`check_launch`)."""
    from wardian.app.runtime.launch import check_launch  # the app's runtime (anyio; ~100 ms): not `wardian init`'s

    try:
        check_launch(provider, capabilities(provider), mode, approve_tools)
    except errors.WardianError as exc:
        return said(exc)
    return None


def setting_error(provider: str, key: tuple[str, ...], text: str) -> str | None:
    """What `wardian agent start NAME -c TEXT` refuses for an agent of `provider`, where TEXT sets `key`. Never
    quotes the value: a setting may hold a secret."""
    if any(not segment or '"' in segment or "=" in segment for segment in key):
        return ("a key given to -c is dotted segments of A-Z a-z 0-9 _ -, or double-quoted text without \" or =; "
                "this one cannot be passed on")
    if len(text) > MAX_OVERRIDE_CHARS:
        return f"the setting is longer than {MAX_OVERRIDE_CHARS} characters as -c KEY=VALUE"
    syntax = _provider(provider).settings_syntax
    try:
        parsed = parse_override(text, syntax)
        if provider == "claude":
            # Loaded already with the registry (`_provider`); at module level `wardian init` would load it too.
            from wardian.providers.claude.settings import parse

            parse([text])
    except errors.WardianError as exc:
        return said(exc)
    if parsed.path != key or toml_value(parsed.value) != text.partition("=")[2]:
        return "this setting does not read back as itself from -c KEY=VALUE; write its key as plain dotted segments"
    return None
