"""An agent's start learns its CLI's version once, and without starting the CLI when npm installed it
(`wardian.providers.probe`): a Node CLI's `--version` is a whole start of it (docs/benchmarks.md,
`acp_cold_start_to_idle`)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.acp.conftest import REPO, AcpApp
from wardian.providers.probe import npm_version
from wardian_harness.models.scripted_model import Message, ScriptedModel

QWEN = "@qwen-code/qwen-code"


def recording_wrapper(path: Path, calls: Path) -> Path:
    """An executable at `path` that notes its arguments in `calls`, then runs the pinned Qwen Code with them."""
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(calls))}\nexec {shlex.quote(str(cli))} "$@"\n',
                    encoding="utf-8")
    path.chmod(0o755)
    return path


def versions_asked(calls: Path) -> int:
    return calls.read_text(encoding="utf-8").splitlines().count("--version") if calls.exists() else 0


def start_and_answer(executable: Path, calls: Path) -> dict[str, object]:
    """Start a Qwen Code agent on `executable`, check it answers a task, restart it: its two starts' answers."""
    env = {"WARDIAN_QWEN": str(executable)}
    with ScriptedModel() as model, app_on_root(short_home("wv"), env) as handle:
        world = AcpApp(handle, model, env, "qwen")
        _, lead, _ = world.agent("lead", start=False)
        _, _, script = world.agent("worker", start=False)
        first = world.start("worker")
        asked = versions_asked(calls)
        script.add(Message("probed"))
        world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hello"})
        (reply,) = world.app.records_for(lead)
        assert reply["text"] == "probed"
        second = world.start("worker")
        return {"first": first["provider_version"], "second": second["provider_version"], "asked_first": asked,
                "asked": versions_asked(calls)}


def test_a_cli_outside_npm_is_asked_its_version_once_per_start(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    got = start_and_answer(recording_wrapper(tmp_path / "bin" / "qwen", calls), calls)
    assert got == {"first": "0.24.4", "second": "0.24.4", "asked_first": 1, "asked": 2}


def test_an_npm_installed_cli_is_never_started_for_its_version(tmp_path: Path) -> None:
    """The bin npm's manifest declares is this executable: the version is the manifest's."""
    calls = tmp_path / "calls.txt"
    package = tmp_path / "node_modules" / "@qwen-code" / "qwen-code"
    cli = recording_wrapper(package / "cli-entry.js", calls)
    (package / "package.json").write_text(json.dumps({"name": QWEN, "version": "0.24.4", "bin": {
        "qwen": "cli-entry.js"}}), encoding="utf-8")
    bin_link = tmp_path / "node_modules" / ".bin" / "qwen"
    bin_link.parent.mkdir()
    bin_link.symlink_to(cli)
    got = start_and_answer(bin_link, calls)
    assert got == {"first": "0.24.4", "second": "0.24.4", "asked_first": 0, "asked": 0}


def test_only_the_manifest_of_the_gates_package_declaring_this_executable_counts(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "dist").mkdir(parents=True)
    entry = package / "dist" / "cli.js"
    entry.write_text("", encoding="utf-8")
    (package / "dist" / "package.json").write_text('{"type": "module"}', encoding="utf-8")  # nested, skipped

    def manifest(**fields: object) -> str | None:
        (package / "package.json").write_text(json.dumps(fields), encoding="utf-8")
        return npm_version(str(entry), QWEN)

    assert manifest(name=QWEN, version="0.30.0", bin={"qwen": "dist/cli.js"}) == "0.30.0"
    assert manifest(name=QWEN, version="0.30.0", bin="./dist/cli.js") == "0.30.0"
    assert manifest(name="another", version="0.30.0", bin={"qwen": "dist/cli.js"}) is None
    assert manifest(name=QWEN, version="0.30.0", bin={"qwen": "dist/other.js"}) is None
    assert manifest(name=QWEN, bin={"qwen": "dist/cli.js"}) is None
    assert npm_version(str(tmp_path / "elsewhere"), QWEN) is None
