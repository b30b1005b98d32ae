"""Project structure rules (docs/design/architecture.md, docs/reference/errors.md): dependency direction and the
error-code mapping."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

from wardian import errors
from wardian.protocol import jsonrpc

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "core" / "wardian"
HARNESS = REPO / "harness" / "wardian_harness"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(folder: str) -> list[Path]:
    return sorted((CORE / folder).rglob("*.py")) if (CORE / folder).is_dir() else [CORE / folder]


# `wardian auth status` needs no app: without one, it reads the roster through the store's read-only module (no write,
# no migration), the one part of the store the CLI may import.
ALLOWED = {"cli/auth_usage.py": frozenset({"wardian.store.sqlite.readonly"})}


@pytest.mark.parametrize(("room", "forbidden"), [
    ("limits.py", ("wardian.", "pydantic", "anyio", "sqlite3")),
    # The model reads only the limits (a leaf of plain constants it re-exports).
    ("model.py", ("wardian.errors", "wardian.home", "wardian.protocol", "wardian.store", "wardian.app", "wardian.cli",
                  "wardian.client", "wardian.providers", "wardian.auth", "pydantic", "anyio", "sqlite3")),
    ("errors.py", ("wardian.", "pydantic", "anyio")),
    # The client's connect path and the app's accept path share it: stdlib only, already loaded by the CLI.
    ("peercred.py", ("wardian.", "pydantic", "anyio", "pwd", "ctypes")),
    ("home.py", ("pydantic", "anyio", "wardian.store", "wardian.app", "wardian.providers", "wardian.protocol")),
    ("home_setup.py", ("pydantic", "anyio", "wardian.store", "wardian.app", "wardian.providers", "wardian.protocol")),
    ("overrides.py", ("pydantic", "anyio", "wardian.store", "wardian.app", "wardian.providers", "wardian.protocol")),
    # Decision 0014: the store never imports pydantic or providers, and hands out no connection (see below).
    ("store", ("pydantic", "anyio", "wardian.protocol", "wardian.app", "wardian.client", "wardian.mcp",
               "wardian.providers")),
    ("protocol", ("anyio", "sqlite3", "wardian.store", "wardian.app", "wardian.client", "wardian.providers")),
    # Decision 0014: the app is provider-neutral; it reaches providers through wardian.providers (base and registry).
    ("app", ("wardian.providers.codex", "wardian.cli", "wardian.mcp", "wardian.client", "wardian.console", "sqlite3")),
    ("app/spawn.py", ("pydantic", "anyio", "mcp", "wardian.store", "wardian.providers", "wardian.protocol")),
    ("providers", ("wardian.cli", "wardian.mcp", "wardian.store", "wardian.app", "wardian.client", "wardian.launcher",
                   "wardian.console")),
    ("providers/base.py", ("wardian.providers.codex", "wardian.providers.opencode", "pydantic")),
    # Providers know nothing of each other; what they share lives beside base.py.
    ("providers/codex", ("wardian.providers.opencode",)),
    ("providers/opencode", ("wardian.providers.codex",)),
    # Decision 0018: the console reads and acts only through the service's method table, never the store or a provider.
    ("console", ("wardian.store", "wardian.providers", "wardian.app.runtime", "wardian.client", "wardian.mcp",
                 "sqlite3")),
    ("client.py", ("pydantic", "anyio", "mcp", "wardian.store", "wardian.app")),
    ("cli", ("mcp", "wardian.store")),
    # Sign-in is provider neutral: a provider's own sign-in is in its package, the CLI's part in the CLI.
    ("auth", ("wardian.providers", "wardian.client", "wardian.app", "wardian.cli", "wardian.store", "pydantic",
              "anyio")),
    ("mcp", ("wardian.store", "wardian.app", "sqlite3")),
])
def test_dependency_direction(room: str, forbidden: tuple[str, ...]) -> None:
    """docs/design/architecture.md: who may import whom; the app alone opens the store."""
    for path in modules(room):
        bad = {name for name in imports_of(path) for f in forbidden if name == f.rstrip(".") or
               name.startswith(f if f.endswith(".") else f + ".") or name == f}
        bad -= ALLOWED.get(path.relative_to(CORE).as_posix(), frozenset())
        assert not bad, f"{path.relative_to(CORE)} imports {sorted(bad)}"


def test_core_never_imports_the_harness() -> None:
    """docs/design/architecture.md: core/wardian never imports the harness, e2e_native or tests."""
    paths = list(CORE.rglob("*.py"))
    assert paths
    for path in paths:
        names = imports_of(path)
        assert not any(n.split(".")[0] in {"wardian_harness", "e2e_native", "tests"} for n in names), path


def test_the_package_list_comes_from_discovery() -> None:
    """Decision 0013: the packages are found, not listed by hand, so every subpackage ships in the wheel."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "package-dir" not in setuptools
    assert isinstance(setuptools["packages"], dict), "packages must be discovered ([tool.setuptools.packages.find])"
    assert setuptools["packages"]["find"]["where"] == ["core", "harness"]


@pytest.mark.parametrize("root", [CORE, HARNESS], ids=["core", "harness"])
def test_every_folder_of_python_code_is_a_discovered_package(root: Path) -> None:
    """Decision 0013: a folder under a package's import name that holds Python code is a package setuptools discovers
    (an `__init__.py`, so not silently left out of the wheel as a namespace folder)."""
    found = set(find_packages(where=str(root.parent)))
    folders = {p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    assert folders
    for folder in folders:
        name = ".".join(folder.relative_to(root.parent).parts)
        assert (folder / "__init__.py").is_file(), f"{folder} holds Python code but no __init__.py"
        assert name in found, name


def test_no_database_connection_leaves_the_store() -> None:
    """Decision 0014: outside `wardian.store`, no module touches sqlite3 or a store's connection (`_db`, `_conn`)."""
    for path in CORE.rglob("*.py"):
        if "store" in path.relative_to(CORE).parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert "sqlite3" not in imports_of(path), path
        assert not re.search(r"\._(db|conn)\b", text), path


def test_every_provider_name_has_its_implementation() -> None:
    """Decision 0014: the registry serves exactly the provider names the app accepts."""
    from wardian.model import PROVIDERS as NAMES
    from wardian.providers import PROVIDERS

    assert set(PROVIDERS) == set(NAMES)
    assert all(provider.name == name for name, provider in PROVIDERS.items())


def test_every_method_has_its_handler() -> None:
    """Decision 0014: `METHODS` is the one method table; every entry is served by one coroutine function registered
    for it, which takes the service and that method's params and returns the method's declared result type."""
    import inspect
    import typing

    from wardian.app.service import HANDLERS, AppService
    from wardian.protocol.methods import METHODS

    assert set(HANDLERS) == set(METHODS)
    for name, spec in METHODS.items():
        handler = HANDLERS[name]
        assert inspect.iscoroutinefunction(handler), name
        hints = typing.get_type_hints(handler, localns={"AppService": AppService})
        service, params = inspect.signature(handler).parameters
        assert (hints[service], hints[params], hints["return"]) == (AppService, spec.params, spec.result), name


def test_a_method_table_refuses_a_missing_an_unknown_or_a_second_handler() -> None:
    """What makes a method without its function fail when the app is imported, not when the method is called."""
    from wardian.protocol.methods import METHODS, Handlers

    async def serve(service: object, params: object) -> None:
        return None

    table: Handlers[object] = Handlers()
    for name in list(METHODS)[1:]:
        table.serves(name)(serve)
    with pytest.raises(LookupError, match="message/send"):
        table.complete()
    with pytest.raises(LookupError, match="two handlers"):
        table.serves("agent/list")(serve)
    with pytest.raises(LookupError, match="no method"):
        table.serves("agent/launch")(serve)
    table.serves("message/send")(serve)
    assert set(table.complete()) == set(METHODS)


def all_error_classes() -> list[type[errors.WardianError]]:
    out: list[type[errors.WardianError]] = []
    todo: list[type[errors.WardianError]] = [errors.WardianError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_round_trips_through_its_wire_form(cls: type[errors.WardianError]) -> None:
    """docs/reference/errors.md: each class maps to one code and back."""
    exc = cls("message", field="f", allowed="a..b", extra=1)
    back = jsonrpc.error_from_object(jsonrpc.error_object(exc))
    assert back.code == exc.code
    assert isinstance(back, errors.error_class_for(exc.code))
    assert isinstance(exc, type(back)) or type(back) is errors.error_class_for(exc.code)
    assert (back.field, back.allowed, back.details, back.delivery) == ("f", "a..b", {"extra": 1}, exc.delivery)


def test_error_codes_are_unique_per_leaf() -> None:
    """A stable code names one kind of failure."""
    leaves = [c for c in all_error_classes() if not c.__subclasses__()]
    codes = [c.code for c in leaves]
    assert len(codes) == len(set(codes))


def test_uncertain_and_transport_errors_are_distinct_types() -> None:
    """docs/reference/errors.md: whether a byte was written decides between TransportError and DeliveryUncertain."""
    assert not issubclass(errors.DeliveryUncertain, errors.TransportError)
    assert not issubclass(errors.TransportError, errors.DeliveryUncertain)
    assert errors.DeliveryUncertain.delivery == "uncertain"
    assert errors.AppNotRunning.delivery == "not_admitted"
