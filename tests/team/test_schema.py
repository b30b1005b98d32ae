"""The team file's JSON Schema: a valid draft-07 schema, the shipped copy is the generated one, it accepts the file
`wardian init` writes and every example in the docs, and it refuses what the loader refuses where a schema can say
it (so an editor flags the same mistakes)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

from wardian.model import PROVIDERS
from wardian.team import TeamFileError, load_team
from wardian.team.init import team_file
from wardian.team.schema import SCHEMA_FILE, render, schema

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft7Validator(schema())
COMBINATIONS = [(p,) for p in PROVIDERS] + [(a, b) for a in PROVIDERS for b in PROVIDERS if a != b] + [PROVIDERS]


def errors_of(text: str) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(tomllib.loads(text))]


def test_the_schema_is_a_draft_7_schema_and_the_shipped_copy_is_the_generated_one() -> None:
    jsonschema.Draft7Validator.check_schema(schema())
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render()
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == schema()


@pytest.mark.parametrize("providers", COMBINATIONS, ids=",".join)
def test_the_file_init_writes_validates_and_loads(tmp_path: Path, providers: tuple[str, ...]) -> None:
    text = team_file(providers, schema=True)
    assert text.splitlines()[0] == "#:schema ./wardian.schema.json"
    assert errors_of(text) == []
    assert errors_of(team_file(providers)) == []
    path = tmp_path / "wardian.toml"
    path.write_text(text, encoding="utf-8")
    team = load_team(path, environ={})
    assert [a.provider for a in team.agents][: len(providers)] == list(providers)


def doc_examples() -> list[tuple[str, int, str]]:
    """Every ```toml block of the docs that is a team file (it has an [agents.NAME] table)."""
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for block in re.finditer(r"^```toml\n(.*?)^```", text, re.S | re.M):
            if "[agents." in block[1]:
                found.append((str(doc.relative_to(REPO)), text.count("\n", 0, block.start()) + 1, block[1]))
    return found


def test_the_docs_have_team_file_examples() -> None:
    assert len(doc_examples()) >= 3


@pytest.mark.parametrize(("doc", "line", "text"), doc_examples(), ids=lambda v: str(v)[:40])
def test_every_team_file_example_in_the_docs_validates_and_loads(tmp_path: Path, doc: str, line: int,
                                                                 text: str) -> None:
    assert errors_of(text) == [], f"{doc}:{line}"
    (tmp_path / "src").mkdir()  # the examples' workspaces
    path = tmp_path / "wardian.toml"
    path.write_text(text, encoding="utf-8")
    load_team(path, environ={})


@pytest.mark.parametrize(("text", "expected"), [
    ('[agents.a]\nprovider = "claude"\nmode = "attached"\n', "'attached' is not one of ['background']"),
    ('[agents.a]\nprovider = "opencode"\napprove_tools = ["reply"]\n', "is expected to be empty"),
    ('[agents.a]\nprovider = "codex"\napprove_tools = ["rm"]\n', "'rm' is not one of"),
    ('[agents.all]\nprovider = "codex"\n', "should not be valid"),
    ('[agents.Operator]\nprovider = "codex"\n', "should not be valid"),
    ('[agents.0e8400e2-9b1d-41d4-a716-446655440000]\nprovider = "codex"\n', "should not be valid"),
    ('[agents."-x"]\nprovider = "codex"\n', "does not match"),
    ('[agents.a]\nprovider = "goose"\n', "'goose' is not one of"),
    ('[agents.a]\nprovider = "codex"\ncolour = 1\n', "Additional properties are not allowed ('colour'"),
    ('[agents.a]\nprovider = "codex"\nauth = "Work Key"\n', "does not match"),
    ('[agents.a]\nworkspace = "."\n', "'provider' is a required property"),
    ('[defaults.goose]\n[agents.a]\nprovider = "codex"\n', "Additional properties are not allowed ('goose'"),
    ('[team]\nhome = ""\n[agents.a]\nprovider = "codex"\n', "should be non-empty"),
    ('[team]\n', "'agents' is a required property"),
    ('[agents]\n', "should be non-empty"),
])
def test_the_schema_refuses_what_the_loader_refuses(tmp_path: Path, text: str, expected: str) -> None:
    found: list[str] = errors_of(text)
    assert any(expected in m for m in found), found
    path = tmp_path / "wardian.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TeamFileError):
        load_team(path, environ={})
