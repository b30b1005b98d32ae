"""The documentation stays true to the repository: the generated reference matches the code, and every link, path
and test the README and docs/ name exists.

A reference page that no longer matches the code fails here with the command that regenerates it; a README that
points at a file or a test that was renamed or deleted fails here instead of misleading its reader.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "scripts" / "gen_reference.py"
REGENERATE = ".venv/bin/python scripts/gen_reference.py"
README_MAX_LINES = 250

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
# A repository path in prose or code: these folders hold only files a reader can open in a checkout.
_PATH = re.compile(r"(?<![\w./-])((?:core|harness|tests|scripts|e2e_native|build|docs|benchmarks)/[\w./<>-]*\w)")
_TEST = re.compile(r"((?:tests|e2e_native)/[\w/]+\.py)::(\w+)")
# An absolute path of the machine the docs were written on (a developer's notes, a worktree), not of a checkout.
_MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|shared|home/\w+)/[\w./-]*")


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _prose(text: str) -> str:
    """The text without code blocks and code spans, where bracketed words are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_the_generated_reference_matches_the_code() -> None:
    proc = subprocess.run([sys.executable, str(GENERATOR), "--check"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, (
        f"docs/reference/ is out of date with the code; regenerate it with `{REGENERATE}`:\n"
        f"{proc.stdout}{proc.stderr}")


def test_the_readme_stays_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


@pytest.mark.parametrize("doc", markdown_files(), ids=_rel)
def test_every_relative_link_resolves(doc: Path) -> None:
    broken: list[str] = []
    for target in _LINK.findall(_prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        if target.startswith("/"):
            broken.append(f"{target} (absolute: link relative to the file)")
            continue
        path_part, _, fragment = target.partition("#")
        dest = (doc.parent / path_part).resolve() if path_part else doc
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no heading or anchor #{fragment} in {_rel(dest)})")
    assert not broken, f"{_rel(doc)} has broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("doc", markdown_files(), ids=_rel)
def test_every_repository_path_and_test_named_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing: list[str] = []
    for path in sorted(set(_PATH.findall(text))):
        if "<" in path or path.startswith("build/work"):
            continue  # a placeholder (`agents/<uuid>/`) or a build's own output
        if not (REPO / path).exists() and not (REPO / path.rstrip(".")).exists():
            missing.append(path)
    for path, name in sorted(set(_TEST.findall(text))):
        if name not in _test_functions().get(path, set()):
            moved = sorted(f for f, names in _test_functions().items() if name in names)
            missing.append(f"{path}::{name}" + (f" (now in {', '.join(moved)})" if moved else ""))
    assert not missing, f"{_rel(doc)} names what the repository does not hold:\n" + "\n".join(missing)


@functools.cache
def _test_functions() -> dict[str, set[str]]:
    """Every test module's function names, by repository path: where a test the docs name lives now."""
    found: dict[str, set[str]] = {}
    for folder in ("tests", "e2e_native"):
        for source in (REPO / folder).rglob("test_*.py"):
            names = re.findall(r"^\s*(?:async\s+)?def (test_\w+)\(", source.read_text("utf-8"), re.MULTILINE)
            found[_rel(source)] = set(names)
    return found


@pytest.mark.parametrize("doc", markdown_files(), ids=_rel)
def test_no_doc_points_outside_the_repository(doc: Path) -> None:
    found = _MACHINE_PATH.findall(doc.read_text(encoding="utf-8"))
    assert not found, f"{_rel(doc)} names paths of one machine, which a reader cannot open: {sorted(set(found))}"
