"""The native acceptance's fixtures: one isolated run, its process tree, the app and (offline) the scripted model.

Direct `pytest e2e_native` runs only the inert contract tests: the acceptance needs the real-provider opt-in
(`WARDIAN_E2E_REAL_MESSAGING_V2=1`) or the runner's own scripted-mode flag (`WARDIAN_E2E_RUNNER_SCRIPTED=1`,
set only by `run-native-e2e`, which also owns the home lock and the process tree and passes the run root).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.acceptance.installs import Installs
from wardian_harness.acceptance.native import NativeRun
from wardian_harness.acceptance.settings import Settings
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.processes.proctree import RUN_MARKER_ENV, ProcessTree

RUNNER_SCRIPTED_ENV = "WARDIAN_E2E_RUNNER_SCRIPTED"
RUN_ROOT_ENV = "WARDIAN_E2E_RUN_ROOT"
REPORT_DIR_ENV = "WARDIAN_E2E_REPORT_DIR"


def acceptance_enabled() -> bool:
    return os.environ.get("WARDIAN_E2E_REAL_MESSAGING_V2") == "1" or os.environ.get(RUNNER_SCRIPTED_ENV) == "1"


@pytest.fixture
def native() -> Iterator[NativeRun]:
    """A NativeRun on the runner's root (or, for a direct real-model run, a root of our own), reaped after."""
    if not acceptance_enabled():
        pytest.skip("opt-in: run-native-e2e (scripted) or WARDIAN_E2E_REAL_MESSAGING_V2=1 (real model)")
    settings = Settings.from_env()
    installs = Installs.find(settings.providers)
    root = os.environ.get(RUN_ROOT_ENV)
    run = IsolatedRun.join(Path(root), os.environ[RUN_MARKER_ENV]) if root else IsolatedRun.create()
    model = None if settings.real else ScriptedModel().start()
    tree = ProcessTree(run.run_id)
    native = NativeRun(settings, run, tree, installs.codex, model,
                       progress=lambda line: print(f"[native] {line}", flush=True), opencode=installs.opencode,
                       claude=installs.claude)
    try:
        yield native
    finally:
        for agent in native.agents.values():
            if agent.terminal is not None:
                agent.terminal.close(timeout_s=15)
        native.stop_app()
        leftovers = tree.close()
        if model is not None:
            model.stop()
        run.close(keep=True)  # the runner removes its root; a direct run keeps it for the evidence
        assert leftovers == [], f"processes left behind: {[p.pid for p in leftovers]}"
        if model is not None:
            model.check()


@pytest.fixture
def report_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get(REPORT_DIR_ENV) or tmp_path / "report")
