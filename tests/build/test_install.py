"""`pip install .` gives a working `wardian` (decision 0013): build the sdist and the wheel from a clean copy of the
tree, install the wheel into a fresh virtual environment that cannot see the checkout, and use the installed CLI end to
end.

The editable install every other test uses hides a wheel that leaves subpackages out (it once held 24 files and no
`wardian.app`); this test installs the built artefact the way a user does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import unavailable
from wardian import __version__
from wardian.protocol.tools import TOOL_NAMES

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"wardian": REPO / "core" / "wardian", "wardian_harness": REPO / "harness" / "wardian_harness"}

pytestmark = pytest.mark.timeout(600)


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        unavailable("uv is not installed: run scripts/setup.sh")
    return uv


def _clean_copy(dest: Path) -> Path:
    """The files git tracks (and new ones it does not ignore), copied as they are in the work tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode("utf-8").split("\0")):
        source = REPO / name
        if not source.is_file():  # a file deleted in the work tree but not yet in the index
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def _package_files(name: str) -> set[str]:
    """Every file of a package that the tree holds (modules, `py.typed`, templates, static files, schemas: whatever
    git tracks or would add under the package's folder), as wheel paths, computed from the tree, not listed by hand:
    a new kind of package data that `[tool.setuptools.package-data]` does not name is caught here."""
    root = PACKAGES[name]
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
                            cwd=root, capture_output=True, check=True).stdout
    return {f"{name}/{rel}" for rel in filter(None, listed.decode("utf-8").split("\0"))
            if (root / rel).is_file() and "__pycache__" not in Path(rel).parts}


def test_the_package_files_are_every_file_of_the_tree_not_only_modules() -> None:
    """The wheel checks below compare against every file under the package folders: data files included."""
    files = _package_files("wardian")
    assert "wardian/py.typed" in files
    assert "wardian/console/templates/base.j2" in files
    assert "wardian/console/static/console.css" in files
    assert not any(f.endswith(".pyc") for f in files)


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[Path, Path, Path]]:
    """(sdist, wheel, venv python): built from a clean copy, the wheel installed into a fresh venv."""
    uv = _uv()
    work = Path(tempfile.mkdtemp(prefix="wardian-install-"))
    try:
        src = _clean_copy(work / "src")
        dist = work / "dist"
        # With both, uv builds the sdist first and the wheel from that sdist: the sdist must hold everything.
        subprocess.run([uv, "build", "--sdist", "--wheel", "--out-dir", str(dist), str(src)], cwd=work,
                       capture_output=True, check=True, timeout=300)
        sdist = next(dist.glob("wardian-*.tar.gz"))
        wheel = next(dist.glob("wardian-*.whl"))
        shutil.rmtree(src)  # nothing of the tree is left to fall back on
        venv = work / "venv"
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=work, check=True,
                       capture_output=True, timeout=120)
        python = venv / "bin" / "python"
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)], cwd=work,
                       check=True, capture_output=True, timeout=300)
        yield sdist, wheel, python
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _env(home: Path, venv_python: Path, session: str | None = None) -> dict[str, str]:
    """An environment that knows only the fresh venv: no PYTHONPATH, no WARDIAN_*, the venv's bin first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARDIAN_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv_python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["WARDIAN_HOME"] = str(home)
    if session is not None:
        env["WARDIAN_SESSION_ID"] = session
    return env


def test_the_wheel_holds_every_module_of_both_packages(built: tuple[Path, Path, Path]) -> None:
    """Every file under core/wardian and harness/wardian_harness (modules, py.typed, templates, static files) is in
    the wheel."""
    _, wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for package in PACKAGES:
        expected = _package_files(package)
        assert f"{package}/py.typed" in expected
        assert not expected - names, sorted(expected - names)
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)


def test_the_sdist_holds_the_tree_the_wheel_is_built_from(built: tuple[Path, Path, Path]) -> None:
    """Decision 0013: the sdist carries both package folders under their import names, and the project metadata."""
    sdist, _, _ = built
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert "pyproject.toml" in names
    for package, root in PACKAGES.items():
        folder = root.relative_to(REPO).as_posix()
        expected = {f"{folder}/{p.split('/', 1)[1]}" for p in _package_files(package)}
        assert not expected - names, sorted(expected - names)


def test_the_installed_cli_works_without_the_checkout(built: tuple[Path, Path, Path]) -> None:
    """Decision 0013: from the fresh venv alone: --version, app start, agent add x2, agent env, message task, receive
    --json, reply, `mcp serve` answering initialize and tools/list over stdio, app stop."""
    _, _, python = built
    wardian = str(python.parent / "wardian")
    home = Path(tempfile.mkdtemp(prefix="wi", dir="/tmp"))
    cwd = Path(tempfile.mkdtemp(prefix="wardian-cwd-"))  # never the checkout

    def run(*args: str, session: str | None = None, input_: bytes | None = None) -> str:
        out = subprocess.run([wardian, *args], env=_env(home, python, session), cwd=cwd, input=input_,
                             capture_output=True, timeout=120)
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out.stdout.decode("utf-8")

    try:
        where = subprocess.run([str(python), "-c", "import wardian, sys; print(wardian.__file__)"], cwd=cwd,
                               env=_env(home, python), capture_output=True, text=True, check=True).stdout
        assert Path(where.strip()).is_relative_to(python.parent.parent), where
        assert run("--version").strip() == f"wardian {__version__}"
        run("app", "start")
        try:
            run("agent", "add", "lead", "--provider", "codex")
            run("agent", "add", "worker", "--provider", "codex")
            lead = orjson.loads(run("agent", "env", "lead", "--json"))["WARDIAN_SESSION_ID"]
            worker = orjson.loads(run("agent", "env", "worker", "--json"))["WARDIAN_SESSION_ID"]
            receipt = orjson.loads(run("message", "task", "--to", "worker", "Check the retry loop", "--json",
                                       session=lead))
            page = orjson.loads(run("message", "receive", "--json", session=worker))
            assert [r["request_id"] for r in page["records"]] == [receipt["request_id"]]
            assert page["records"][0]["new_work"] is True
            run("message", "reply", receipt["request_id"], "--status", "done", "It is right", session=worker)
            answers = orjson.loads(run("message", "receive", "--json", session=lead))["records"]
            assert [(r["kind"], r["text"]) for r in answers] == [("reply", "It is right")]
            frames = b"".join(orjson.dumps(m) + b"\n" for m in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "install-test", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            lines = [orjson.loads(line) for line in run("mcp", "serve", session=lead, input_=frames).splitlines()]
            assert [m["id"] for m in lines] == [1, 2]
            assert lines[0]["result"]["serverInfo"]["name"] == "wardian"
            assert len(lines[1]["result"]["tools"]) == len(TOOL_NAMES)
        finally:
            run("app", "stop")
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(cwd, ignore_errors=True)
