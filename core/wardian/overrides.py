"""Launch-setting overrides (`wardian agent start NAME -c key=value`), parsed in one place (stdlib only).

An override is `key.path=VALUE`, the way `codex -c` reads it: a dotted key whose segments are bare
(`A-Z a-z 0-9 _ -`) or double-quoted (`projects."/srv/ws".trust_level`), then `=`, then a TOML value (`"o4-mini"`,
`true`, `[1, 2]`, `{ a = 1 }`). Each provider applies the parsed path and value to its own configuration (Codex: `-c`
and config.toml; other providers: their config file), and says what a value that is not TOML means
(`ValueSyntax`):
- `TOML_OR_STRING` (Codex): a literal string, exactly as `codex -c` takes it (`-c model=o3`).
- `TOML_OR_JSON` (OpenCode, whose own config is JSON): a JSON value (`-c 'provider={"mock": {"npm": "…"}}'`), and
  anything that is neither TOML nor JSON is refused, naming the key and both syntaxes, so an object is never
  passed on as a string.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from wardian import errors

MAX_OVERRIDES = 64
MAX_OVERRIDE_CHARS = 4096
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_ALLOWED = "key=value, where key is a dotted config path and value is TOML (as `codex -c`)"


class ValueSyntax(Enum):
    """What a provider takes a `-c` value that is not TOML for."""

    TOML_OR_STRING = "toml_or_string"
    TOML_OR_JSON = "toml_or_json"


_ALLOWED_VALUE = ("a TOML value (\"text\", 5, true, [1, 2], { a = 1 }) or a JSON value (\"text\", 5, true, [1, 2], "
                  "{\"a\": 1}); quote text")


@dataclass(frozen=True, slots=True)
class Override:
    path: tuple[str, ...]
    value: Any


def _key_path(key: str) -> list[str] | None:
    path: list[str] = []
    i, n = 0, len(key)
    while True:
        while i < n and key[i] == " ":
            i += 1
        if i < n and key[i] == '"':
            end = key.find('"', i + 1)
            if end < 0 or end == i + 1:
                return None
            path.append(key[i + 1:end])
            i = end + 1
        else:
            match = _BARE.match(key, i)
            if match is None:
                return None
            path.append(match.group())
            i = match.end()
        while i < n and key[i] == " ":
            i += 1
        if i == n:
            return path
        if key[i] != ".":
            return None
        i += 1


def parse_override(text: str, syntax: ValueSyntax = ValueSyntax.TOML_OR_STRING) -> Override:
    """`key.path="value"` -> Override(("key", "path"), "value").

    Raises:
        InvalidArguments: too long, no `=`, a key that is not a dotted path, or (`TOML_OR_JSON`) a value that is
            neither TOML nor JSON.
    """
    if len(text) > MAX_OVERRIDE_CHARS:
        raise errors.InvalidArguments(f"config override is longer than {MAX_OVERRIDE_CHARS} characters",
                                      field="config", allowed=_ALLOWED)
    key, sep, raw = text.partition("=")
    path = _key_path(key) if sep else None
    if path is None:
        raise errors.InvalidArguments(f"config override {text[:80]!r} is not key=value", field="config",
                                      allowed=_ALLOWED)
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw if syntax is ValueSyntax.TOML_OR_STRING else _json_value(".".join(path), raw)
    return Override(tuple(path), value)


def _json_value(key: str, raw: str) -> Any:
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except ValueError:
        raise errors.InvalidArguments(
            f"the value of {key[:80]} is neither TOML nor JSON: {raw[:80]!r}", field="config",
            allowed=_ALLOWED_VALUE, key=key[:200]) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


# A setting whose key (any segment of its dotted path, or a key inside its value) contains one of these is shown
# masked wherever the app lists settings: `agent list --json` and the console.
SECRET_KEY_PARTS = ("key", "token", "secret", "password")
MASK = "********"


def _secret(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in SECRET_KEY_PARTS)


def _mask_value(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        masked, changed = {}, False
        for k, v in value.items():
            if _secret(str(k)):
                masked[k], changed = MASK, True
            else:
                masked[k], inner = _mask_value(v)
                changed = changed or inner
        return masked, changed
    if isinstance(value, list):
        items = [_mask_value(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def masked_setting(text: str) -> str:
    """A saved `-c` setting as the operator is shown it: the value of a key that looks like a secret (`*key*`,
    `*token*`, `*secret*`, `*password*`, case-insensitive), at any depth of its value, replaced by `********`; a
    setting with nothing to hide is shown as it was given."""
    key = text.partition("=")[0]
    path = _key_path(key)
    if path is None:
        return text
    if any(_secret(segment) for segment in path):
        return f"{key.strip()}={MASK}"
    try:
        value = parse_override(text, ValueSyntax.TOML_OR_JSON).value
    except errors.InvalidArguments:
        return text  # a plain string (Codex's fallback): nothing inside it is keyed
    shown, changed = _mask_value(value)
    return f"{key.strip()}={json.dumps(shown, ensure_ascii=False, default=str)}" if changed else text


def check_override(text: str, syntax: ValueSyntax = ValueSyntax.TOML_OR_STRING) -> str:
    """`text`, once it parses (the app's validation of `-c`). Raises: InvalidArguments."""
    parse_override(text, syntax)
    return text


# --- environment settings (`wardian agent start NAME --env NAME=VALUE`) -------------------------------------------

MAX_ENV = 64
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# What a credential's variable is called: a key, token, secret or password never travels as a launch setting (it
# would be kept in the store and shown by `agent list`); it goes through `wardian auth login`.
_CREDENTIAL_NAME = re.compile(r".*(_API_KEY|_TOKEN|_SECRET|PASSWORD.*)", re.IGNORECASE)
ENV_ALLOWED = ("NAME=VALUE: a variable name of A-Z a-z 0-9 _ (not WARDIAN_*, not a credential's: *_API_KEY, "
               "*_TOKEN, *_SECRET, *PASSWORD*), then text without line breaks")


def credential_name(name: str) -> bool:
    """Whether a variable's name is a credential's (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`)."""
    return _CREDENTIAL_NAME.fullmatch(name) is not None


def check_env(text: str) -> str:
    """One `--env NAME=VALUE` setting, checked. Raises: InvalidArguments (naming `env`; never quoting the value)."""
    name, sep, value = text.partition("=")
    if not sep or not _ENV_NAME.fullmatch(name):
        raise errors.InvalidArguments(f"{name[:60]!r} is not NAME=VALUE with a variable name", field="env",
                                      allowed=ENV_ALLOWED)
    if name.upper().startswith("WARDIAN_"):
        raise errors.InvalidArguments(f"{name} is wardian's own variable; an agent's is set by the app",
                                      field="env", allowed=ENV_ALLOWED)
    if _CREDENTIAL_NAME.fullmatch(name):
        raise errors.InvalidArguments(
            f"{name} looks like a credential, which --env does not carry (it would be kept and shown with the "
            "agent's settings): store it with `wardian auth login PROVIDER --with-api-key`", field="env",
            allowed=ENV_ALLOWED)
    if len(text) > MAX_OVERRIDE_CHARS or any(c in value for c in "\0\r\n"):
        raise errors.InvalidArguments(f"the value of {name} is longer than {MAX_OVERRIDE_CHARS} characters or has "
                                      "a line break or NUL", field="env", allowed=ENV_ALLOWED)
    return text


def env_mapping(settings: Sequence[str]) -> dict[str, str]:
    """Checked `--env` settings as variables (a later setting of a name wins). Raises: InvalidArguments."""
    return dict(check_env(text).split("=", 1) for text in settings)  # type: ignore[misc]


MAX_COMMAND = 64
COMMAND_ALLOWED = ("a command line of 1 to 64 words (`opencode acp`), the first an executable on the app's PATH or "
                   "an absolute path, no word empty or holding a line break or NUL")


def check_command(provider: str, command: Sequence[str] | None) -> tuple[str, ...]:
    """A generic ACP agent's command line (provider `acp` needs one; no other provider takes one), checked.

    Raises: InvalidArguments (naming `command`)."""
    if provider != "acp":
        if command:
            raise errors.InvalidArguments(f"only an `acp` agent takes a command; wardian finds {provider}'s itself",
                                          field="command", allowed="no command, or provider acp")
        return ()
    if not command:
        raise errors.InvalidArguments("an `acp` agent needs the command that starts it speaking ACP on stdio "
                                      "(`--command \"opencode acp\"`; team file `command = [\"opencode\", \"acp\"]`)",
                                      field="command", allowed=COMMAND_ALLOWED)
    if len(command) > MAX_COMMAND or any(not word or len(word) > MAX_OVERRIDE_CHARS or
                                         any(c in word for c in "\0\r\n") for word in command):
        raise errors.InvalidArguments("the command has an empty word, one with a line break or NUL, or too many",
                                      field="command", allowed=COMMAND_ALLOWED)
    return tuple(command)
