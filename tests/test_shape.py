"""The code's shape as a rule: small modules, short functions, imports at the top (docs/design/architecture.md,
"Shape").

Ruff's C90 and PLR0915 bound a function's branches and statements; these bound what ruff does not measure: a
module's length, and a function's length in lines, so that each file keeps one job a reader can hold at once; and the
imports inside functions, so that a module's dependencies are read at its top.
"""

from __future__ import annotations

import ast
import io
import tokenize
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
MAX_LOCAL_IMPORTS = 40


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


def _local_imports(source: str) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside functions, each once however deeply its function is nested."""
    found: dict[int, ast.Import | ast.ImportFrom] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    found[inner.lineno] = inner
    return [found[line] for line in sorted(found)]


def _core_local_imports() -> dict[str, bool]:
    """`path:line` of each import inside a function of the core, and whether a comment on its own lines or the line
    above says why it is there."""
    found: dict[str, bool] = {}
    for path in _sources(CORE):
        source = path.read_text(encoding="utf-8")
        comments = {token.start[0] for token in tokenize.generate_tokens(io.StringIO(source).readline)
                    if token.type == tokenize.COMMENT}
        for node in _local_imports(source):
            lines = set(range(node.lineno - 1, (node.end_lineno or node.lineno) + 1))
            found[f"{path.relative_to(ROOT).as_posix()}:{node.lineno}"] = bool(comments & lines)
    return found


def test_the_core_imports_inside_a_function_only_for_a_measured_cold_start() -> None:
    """An import inside a function keeps a heavy module off the commands that do not need it (docs/benchmarks.md,
    "What the CLI's cold start loads"); everything else is imported at the top of its module."""
    found = _core_local_imports()
    assert len(found) <= MAX_LOCAL_IMPORTS, (
        f"{len(found)} imports inside functions in core/wardian, at most {MAX_LOCAL_IMPORTS}: import at the top of "
        f"the module, or name a command's handler by where it is (wardian.cli.common.Handler): {sorted(found)}")


def test_each_import_inside_a_function_of_the_core_says_why() -> None:
    """Our own choice: the reason an import waits for its function (the module it keeps off which command, and what
    it costs) is written on its line or the line above, so that it is measured again when it stops being true."""
    silent = sorted(where for where, commented in _core_local_imports().items() if not commented)
    assert not silent, f"imports inside functions without a comment saying why: {silent}"
