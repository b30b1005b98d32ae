"""Generated team files, valid and broken (and plain random text and bytes): `load_team` returns a team or raises
`TeamFileError`, nothing else; it creates and changes no file; every problem names a line of the file; and what it
accepts, the JSON Schema accepts, with settings that `-c` reads back exactly."""

from __future__ import annotations

import os
import re
import tempfile
import tomllib
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wardian.overrides import ValueSyntax, parse_override
from wardian.team import Team, TeamFileError, TeamProblem, load_team
from wardian.team.schema import schema
from wardian.team.values import key_text, toml_value

pytestmark = pytest.mark.fast

VALIDATOR = jsonschema.Draft7Validator(schema())
SYNTAX = {"codex": ValueSyntax.TOML_OR_STRING, "opencode": ValueSyntax.TOML_OR_JSON,
          "claude": ValueSyntax.TOML_OR_JSON}
BARE = re.compile(r"[A-Za-z0-9_-]+")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text_chars = st.characters(blacklist_categories=("Cs",))  # TOML text is Unicode scalar values
names = st.one_of(st.sampled_from(["lead", "worker", "a.b", "W-2", "all", "Operator", "-x", "", "x" * 65, "é",
                                   "a b", "123e4567-e89b-12d3-a456-426614174000"]),
                  st.text(text_chars, max_size=6))
keys = st.one_of(st.sampled_from(["model", "env", "provider", "ANTHROPIC_API_KEY", "a", "x=y", 'q"', ""]),
                 st.text(text_chars, max_size=5))


def toml_string(text: str) -> str:
    """A TOML basic string with every character outside printable ASCII escaped as \\UXXXXXXXX."""
    return '"' + "".join(c if " " <= c < "\x7f" and c not in '"\\' else f"\\U{ord(c):08x}" for c in text) + '"'


def key(name: str) -> str:
    return name if BARE.fullmatch(name) else toml_string(name)


scalars = st.one_of(st.integers(), st.floats(), st.booleans(), st.text(text_chars, max_size=8),
                    st.dates(), st.datetimes(), st.times())


def _value_text(value: object) -> str:
    return toml_string(value) if isinstance(value, str) else toml_value(value)


values = st.recursive(scalars.map(_value_text), lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    st.dictionaries(keys, inner, max_size=3).map(
        lambda d: "{ " + ", ".join(f"{key(k)} = {v}" for k, v in d.items()) + " }")), max_leaves=6)


@st.composite
def settings_lines(draw: st.DrawFn, prefix: str) -> list[str]:
    """Settings written as `key = value`, dotted keys, or a sub-table header (`prefix` names the table)."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        path = ".".join(key(k) for k in draw(st.lists(keys, min_size=1, max_size=3)))
        out.append(f"{path} = {draw(values)}")
    if draw(st.booleans()):
        out += [f"[{prefix}.{key(draw(keys))}]", f"{key(draw(keys))} = {draw(values)}"]
    return out


FIELD_VALUES = {
    "provider": st.sampled_from(['"codex"', '"opencode"', '"claude"', '"goose"', "5"]),
    "workspace": st.sampled_from(['"src"', '"."', '"missing"', '"file"', '""', '"~"', '"\\u0000"', "[1]"]),
    "mode": st.sampled_from(['"background"', '"attached"', '"sideways"', "true"]),
    "approve_tools": st.sampled_from(['["reply"]', '["send_message", "reply", "reply"]', '["rm"]', "[]", '"reply"',
                                      "[1]"]),
    "auth": st.sampled_from(['"work"', '"Work Key"', '""', "7"]),
    "colour": st.just('"blue"'),
}


@st.composite
def agent_lines(draw: st.DrawFn) -> list[str]:
    name = key(draw(names))
    fields = draw(st.lists(st.sampled_from(sorted(FIELD_VALUES)), unique=True, max_size=4))
    if draw(st.integers(0, 9)):
        fields = ["provider", *[f for f in fields if f != "provider"]]
    body = [f"{f} = {draw(FIELD_VALUES[f])}" for f in fields]
    style = draw(st.sampled_from(["table", "settings table", "dotted settings", "inline settings"]))
    if style == "settings table":
        table = f"agents.{name}.settings"
        return [f"[agents.{name}]", *body, f"[{table}]", *draw(settings_lines(table))]
    if style == "dotted settings":
        return [f"[agents.{name}]", *body, *(f"settings.{line}" for line in draw(settings_lines("x"))
                                              if not line.startswith("["))]
    if style == "inline settings":
        return [f"[agents.{name}]", *body, f"settings = {{ model = {draw(values)} }}"]
    return [f"[agents.{name}]", *body]


@st.composite
def team_files(draw: st.DrawFn) -> str:
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["[team]", *draw(st.lists(st.sampled_from([
            'home = "h"', 'home = ""', 'console = "127.0.0.1:0"', 'console = "10.0.0.1:1"', 'console = "x:y:z"',
            "console = 1", 'colour = "blue"']), unique=True, max_size=3))]
    for provider in draw(st.lists(st.sampled_from(["codex", "opencode", "claude", "goose"]), unique=True,
                                  max_size=2)):
        lines += [f"[defaults.{provider}]", *draw(settings_lines(f"defaults.{provider}"))]
    for _ in range(draw(st.integers(0, 3))):
        lines += draw(agent_lines())
        if draw(st.integers(0, 4)) == 0:
            lines.append(f"# {draw(st.text(text_chars, max_size=10))}")
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 3)) == 0:  # break it somewhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(text_chars, max_size=3)) + text[at + draw(st.integers(0, 3)):]
    return text


VALID_FIELDS = {
    "workspace": st.sampled_from(['"src"', '"."', '"~"']),
    "auth": st.sampled_from(['"work"', '"default"', '"a.b-c_1"']),
}
GRANTS = st.sampled_from(['["reply"]', '["send_message", "reply", "reply"]', "[]"])


@st.composite
def valid_settings(draw: st.DrawFn, prefix: str) -> list[str]:
    """Settings no provider refuses: distinct keys (none a prefix of another), in any of the three styles."""
    firsts = draw(st.lists(st.sampled_from(["model", "a", "b", "c", "provider", "features"]), unique=True,
                           max_size=4))
    out: list[str] = []
    tables: list[str] = []
    for first in firsts:
        style = draw(st.sampled_from(["plain", "dotted", "table"]))
        if style == "plain":
            out.append(f"{first} = {draw(values)}")
        elif style == "dotted":
            segment = draw(st.text(text_chars, min_size=1, max_size=4).filter(lambda t: '"' not in t and "=" not in t))
            out.append(f"{first}.{key(segment)} = {draw(values)}")
        else:
            tables += [f"[{prefix}.{first}]", f"x = {draw(values)}"]
    return out + tables


@st.composite
def valid_team_files(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A file no check refuses, and the names of its agents in order."""
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["[team]", 'home = "h"', 'console = "127.0.0.1:0"'][: draw(st.integers(1, 3))]
    for provider in draw(st.lists(st.sampled_from(["codex", "opencode", "claude"]), unique=True, max_size=3)):
        lines += [f"[defaults.{provider}]", *draw(valid_settings(f"defaults.{provider}"))]
    agents = draw(st.lists(st.sampled_from(["lead", "worker", "w-2", "a.b", "Z9"]), unique=True, min_size=1,
                           max_size=3))
    for name in agents:
        provider = draw(st.sampled_from(["codex", "opencode", "claude"]))
        header = f"agents.{key(name)}"
        lines += [f"[{header}]", f'provider = "{provider}"']
        lines += [f"{f} = {draw(v)}" for f, v in VALID_FIELDS.items() if draw(st.booleans())]
        if draw(st.booleans()):
            lines.append('mode = "attached"' if provider == "codex" else 'mode = "background"')
        if provider != "opencode" and draw(st.booleans()):
            lines.append(f"approve_tools = {draw(GRANTS)}")
        if draw(st.booleans()):
            lines += [f"[{header}.settings]", *draw(valid_settings(f"{header}.settings"))]
    return "\n".join(lines) + "\n", agents


def snapshot(root: Path) -> list[tuple[str, int, int, int]]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            st_ = (Path(dirpath) / name).lstat()
            found.append((os.path.relpath(Path(dirpath) / name, root), st_.st_size, st_.st_mtime_ns, st_.st_mode))
    return sorted(found)


def check(content: str | bytes) -> tuple[Team | None, tuple[TeamProblem, ...]]:
    """Load `content` from a fresh directory; the team, or the problems (each checked to name a line)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        (root / "file").write_text("x", encoding="utf-8")
        path = root / "wardian.toml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        before = snapshot(root)
        team, problems = None, ()
        try:
            team = load_team(path, environ={})
        except TeamFileError as exc:
            problems = exc.problems
        assert snapshot(root) == before  # nothing created or changed, not even the home
    if team is not None:
        accepted(content if isinstance(content, str) else content.decode("utf-8"), team)
        return team, ()
    lines = (content if isinstance(content, bytes) else content.encode("utf-8")).count(b"\n") + 1
    assert problems
    for problem in problems:
        assert 0 <= problem.line <= lines, problem
        assert str(problem).startswith(f"{path}:{problem.line}: {problem.field}: "), problem
        assert problem.message
    return None, problems


def accepted(text: str, team: Team) -> None:
    assert VALIDATOR.is_valid(tomllib.loads(text.removeprefix("\ufeff")))
    count = text.count("\n") + 1
    for agent in team.agents:
        assert 1 <= agent.line <= count
        keys = [setting.partition("=")[0] for setting in agent.settings]
        assert keys == sorted(set(keys))  # sorted by key, each key once
        for setting in agent.settings:
            key_part, _, value_part = setting.partition("=")
            parsed = parse_override(setting, SYNTAX[agent.provider])
            assert toml_value(parsed.value) == value_part, setting
            assert key_text(parsed.path) == key_part


@FUZZ
@given(team_files())
def test_generated_team_files_load_or_fail_cleanly_and_change_nothing(text: str) -> None:
    check(text)


@FUZZ
@given(st.text(text_chars, max_size=200))
def test_random_text_loads_or_fails_cleanly(text: str) -> None:
    check(text)


@FUZZ
@given(st.text(alphabet="[]{}\"'=.#,\n\t\\ aeu0123-_:+", max_size=120))
def test_random_toml_punctuation_loads_or_fails_cleanly(text: str) -> None:
    """Mostly TOML's own characters: strings of the four kinds, comments, nested arrays and tables, escapes."""
    check(text)


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_load_or_fail_cleanly(data: bytes) -> None:
    check(data)


@FUZZ
@given(valid_team_files())
def test_valid_team_files_load_with_every_agent(file: tuple[str, list[str]]) -> None:
    text, names = file
    team, problems = check(text)
    assert team is not None, [str(p) for p in problems]
    assert [a.name for a in team.agents] == names
    lines = text.splitlines()
    assert [lines[a.line - 1] for a in team.agents] == [f"[agents.{key(a.name)}]" for a in team.agents]
