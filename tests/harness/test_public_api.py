"""The harness drives wardian only through its declared public API, so the core's internals can move freely."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness" / "wardian_harness"
STORE = REPO / "core" / "wardian" / "store"

PUBLIC = ("wardian.client", "wardian.errors", "wardian.model", "wardian.home", "wardian.app.spawn",
          "wardian.providers.version", "wardian.providers.codex.compat", "wardian.store")
"""What the harness may import (`wardian.store`: the package's top-level names only, none of its modules)."""

KNOWN = {
    # Windows only (run under Wine by tests/windows/): the Job Object structures whose x64 layout core's tests
    # check; copying them here would lose that check.
    ("_proctree_windows.py", "wardian.winjob"),
}


def wardian_imports(path: Path) -> set[str]:
    """Every `wardian...` module `path` imports; `from wardian.store import x` counts as `wardian.store.x` when
    `x` is one of the package's modules."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module == "wardian.store":
                names.update(f"wardian.store.{a.name}" for a in node.names
                             if (STORE / f"{a.name}.py").exists() or (STORE / a.name).is_dir())
    return {n for n in names if n == "wardian" or n.startswith("wardian.")}


def test_the_harness_imports_only_the_public_api() -> None:
    paths = sorted(HARNESS.rglob("*.py"))
    assert paths
    for path in paths:
        for name in wardian_imports(path) - {known for file, known in KNOWN if file == path.name}:
            assert name in PUBLIC, f"{path.relative_to(HARNESS)} imports {name}, not in the declared public API"
