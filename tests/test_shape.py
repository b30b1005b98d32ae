"""The code's shape as a rule: small modules, short functions (docs/design/architecture.md, "Shape").

Ruff's C90 and PLR0915 bound a function's branches and statements; these bound what ruff does not measure: a
module's length, and a function's length in lines, so that each file keeps one job a reader can hold at once.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "wardian"
MAX_MODULE_LINES = 500
LONG_MODULE_LINES = 350
MAX_LONG_MODULES = 3
MAX_FUNCTION_LINES = 60
HARNESS = ROOT / "harness" / "wardian_harness"
MAX_HARNESS_MODULE_LINES = 400


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for r in roots for p in r.rglob("*.py") if "__pycache__" not in p.parts)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_the_core_is_long() -> None:
    sizes = {p.relative_to(ROOT).as_posix(): _lines(p) for p in _sources(CORE)}
    too_long = {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them by job): {too_long}"
    long = {p: n for p, n in sizes.items() if n > LONG_MODULE_LINES}
    assert len(long) <= MAX_LONG_MODULES, (
        f"at most {MAX_LONG_MODULES} modules may exceed {LONG_MODULE_LINES} lines; these do: {long}")


def test_no_module_of_the_harness_is_long() -> None:
    """The harness's rooms (docs/design/architecture.md, "The harness") hold modules of one job each."""
    sizes = {p.relative_to(ROOT).as_posix(): _lines(p) for p in _sources(HARNESS)}
    too_long = {p: n for p, n in sizes.items() if n > MAX_HARNESS_MODULE_LINES}
    assert not too_long, f"harness modules over {MAX_HARNESS_MODULE_LINES} lines (split them by job): {too_long}"


def test_no_function_of_the_core_or_the_harness_is_long() -> None:
    long: list[str] = []
    for path in _sources(CORE, ROOT / "harness" / "wardian_harness"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name} ({length} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
