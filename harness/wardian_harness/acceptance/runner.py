"""`run-native-e2e`: the runner of the native acceptance (contract ACC-1..ACC-8).

It selects Codex (WARDIAN_E2E_CODEX_EXECUTABLE, else node_modules/.bin/codex, else PATH; checked against
WARDIAN_E2E_CODEX_EXPECTED_VERSION), builds the frozen CLI when asked, creates the isolated run root and holds
its lock, runs the acceptance test under pytest as a member of its process tree with the selected Codex first
on PATH, prints where the evidence report is, and stops every process of the run before it exits, pass or
fail. Without WARDIAN_E2E_REAL_MESSAGING_V2=1 it runs the scripted-model acceptance (real Codex, offline).

Exit status: 0 passed; 1 the acceptance failed; 2 bad settings; 3 Codex (or, for a team with an OpenCode or
Claude Code agent chosen by WARDIAN_E2E_MESSAGING_V2_PROVIDERS, that CLI) missing, unreadable or the wrong version;
4 a process outlived the run (a harness bug: the run is not clean).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.acceptance.installs import Installs
from wardian_harness.acceptance.settings import Settings
from wardian_harness.processes.proctree import RUN_MARKER_ENV, ProcessTree
from wardian_harness.providers.cli import REPO_ROOT, CliNotFound
from wardian_harness.providers.codex_install import CodexInstall, CodexInstallError

DEFAULT_TEST = "e2e_native/tests/test_agent_messaging_v2_real_native.py"
EXIT_FAILED, EXIT_SETTINGS, EXIT_CODEX, EXIT_LEFTOVER = 1, 2, 3, 4


def _say(line: str) -> None:
    print(f"run-native-e2e: {line}", file=sys.stderr, flush=True)


def _build_if_asked(settings: Settings, env: dict[str, str]) -> None:
    """WARDIAN_NATIVE_SKIP_BUILD unset: rebuild a frozen CLI/app that lives in this checkout's dist/."""
    if env.get("WARDIAN_NATIVE_SKIP_BUILD") == "1":
        return
    dist = REPO_ROOT / "dist"
    targets = {Path(c[0]) for c in (settings.cli, settings.app) if len(c) == 1}
    if any(dist in t.parents for t in targets):
        _say("building the frozen CLI (python build/freeze.py; WARDIAN_NATIVE_SKIP_BUILD=1 skips this)")
        subprocess.run([sys.executable, str(REPO_ROOT / "build" / "freeze.py")], check=True, cwd=REPO_ROOT)


def _settings(env: dict[str, str]) -> Settings | int:
    """The run's settings, or the exit status that refuses them (said why)."""
    try:
        settings = Settings.from_env(env)
    except ValueError as exc:
        _say(f"bad settings: {exc}")
        return EXIT_SETTINGS
    if settings.real and settings.auth_home is None:
        _say("WARDIAN_E2E_REAL_MESSAGING_V2=1 needs WARDIAN_E2E_CODEX_AUTH_HOME (an authorized Codex home)")
        return EXIT_SETTINGS
    return settings


def _missing_build(settings: Settings, env: dict[str, str]) -> bool:
    """Whether a frozen CLI/app the settings name is missing while building is switched off (said so)."""
    for cmd in (settings.cli, settings.app):
        if len(cmd) == 1 and not Path(cmd[0]).is_file() and env.get("WARDIAN_NATIVE_SKIP_BUILD") == "1":
            _say(f"{cmd[0]} does not exist (WARDIAN_NATIVE_SKIP_BUILD=1, so nothing is built)")
            return True
    return False


def _installs(settings: Settings, env: dict[str, str]) -> Installs | int:
    """The CLIs the team runs; or the exit status that refuses the run (said why)."""
    try:
        return Installs.find(settings.providers, env)
    except (CodexInstallError, ValueError) as exc:
        _say(f"Codex unusable: {exc} (install the pinned one with scripts/setup.sh --with-node, or set "
             "WARDIAN_E2E_CODEX_EXECUTABLE)")
    except CliNotFound as exc:
        _say(f"{exc.cli} unusable: {exc}")
    return EXIT_CODEX


def _child_env(env: dict[str, str], settings: Settings, codex: CodexInstall, run: IsolatedRun,
               report_dir: Path) -> dict[str, str]:
    """The acceptance's environment: the selected Codex first on PATH, the run root, its marker and the report."""
    child_env = {**env, "PATH": os.pathsep.join([str(codex.executable.parent), env.get("PATH", "")]),
                 "WARDIAN_E2E_CODEX_EXECUTABLE": str(codex.executable), "WARDIAN_E2E_RUN_ROOT": str(run.root),
                 RUN_MARKER_ENV: run.run_id, "WARDIAN_E2E_REPORT_DIR": str(report_dir),
                 "PYTHONWARNDEFAULTENCODING": "1"}
    if not settings.real:
        child_env["WARDIAN_E2E_RUNNER_SCRIPTED"] = "1"
    return child_env


def _run_acceptance(tree: ProcessTree, tests: list[str], child_env: dict[str, str]) -> int:
    """pytest on `tests` as a member of the tree; the run's exit status (SIGTERM stops it like Ctrl-C)."""
    def _on_term(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the run like Ctrl-C: the caller's finally block still reaps the tree

    signal.signal(signal.SIGTERM, _on_term)
    proc = tree.spawn([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-v", "-o", "timeout=900",
                       *tests], child_env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _say("interrupted; stopping the run")
        code = 130
    _say("acceptance passed" if code == 0 else f"acceptance FAILED (pytest exit {code})")
    return 0 if code == 0 else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run-native-e2e", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("tests", nargs="*", default=[DEFAULT_TEST], help="test files (default: the acceptance)")
    parser.add_argument("--keep", action="store_true", help="keep the run root (homes, rollouts) for inspection")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    settings = _settings(env)
    if isinstance(settings, int):
        return settings
    found = _installs(settings, env)
    if isinstance(found, int):
        return found
    if _missing_build(settings, env):
        return EXIT_SETTINGS
    _build_if_asked(settings, env)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    team = "-".join(settings.providers)
    report_dir = Path(env.get("WARDIAN_E2E_REPORT_DIR") or
                      REPO_ROOT / "dist" / "e2e-reports" / f"{stamp}-{settings.mode}-{team}-{os.getpid()}")
    run = IsolatedRun.create()
    tree = ProcessTree(run.run_id)
    _say(f"{found.describe(paths=True)}; team {','.join(settings.providers)} "
         f"(lead,worker); mode {settings.mode}"
         f"{' + lifecycle' if settings.lifecycle else ''}; {'real model' if settings.real else 'scripted model'}; "
         f"run root {run.root}")
    status = EXIT_FAILED
    try:
        status = _run_acceptance(tree, args.tests, _child_env(env, settings, found.codex, run, report_dir))
    finally:
        leftovers = tree.close()
        run.close(keep=args.keep)
        if leftovers:
            _say(f"processes outlived the run: {[(p.pid, p.name()) for p in leftovers]}")
            status = EXIT_LEFTOVER
        if (report_dir / "report.json").exists():
            _say(f"evidence report: {report_dir / 'report.json'} (summary: {report_dir / 'report.md'})")
        else:
            _say(f"no evidence report was written (expected in {report_dir})")
    return status


if __name__ == "__main__":
    sys.exit(main())
