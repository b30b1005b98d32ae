"""Find the Codex CLI a test or the acceptance run should use, and read its version.

Discovery order (docs/guide/native-acceptance.md): `WARDIAN_E2E_CODEX_EXECUTABLE` when set (it must exist), else
`<repo>/node_modules/.bin/codex` (installed by the project's package.json), else the first `codex` on PATH.
`codex --version` prints `codex-cli 0.171.0` (or a pre-release such as `codex-cli 0.154.0-alpha.6`);
`CodexVersion` (core's, `wardian.providers.codex.compat`) orders such versions by semantic-versioning precedence,
so a pre-release sorts below its release.
When `WARDIAN_E2E_CODEX_EXPECTED_VERSION` is set, a different version is an error. Which versions the product
accepts is decided in core (`wardian.providers.codex.compat`), not here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wardian.providers.codex.compat import CodexVersion
from wardian_harness.providers.cli import REPO_ROOT

__all__ = [
    "EXECUTABLE_ENV",
    "EXPECTED_VERSION_ENV",
    "CodexInstall",
    "CodexInstallError",
    "CodexNotFound",
    "CodexVersion",
    "CodexVersionMismatch",
    "CodexVersionUnreadable",
    "codex_version",
    "discover_codex",
    "find_codex",
]

EXECUTABLE_ENV = "WARDIAN_E2E_CODEX_EXECUTABLE"
EXPECTED_VERSION_ENV = "WARDIAN_E2E_CODEX_EXPECTED_VERSION"


class CodexInstallError(Exception):
    """The Codex CLI could not be found or is not the one asked for."""


class CodexNotFound(CodexInstallError):
    """No Codex executable at the configured path, in node_modules or on PATH."""

    def __init__(self, tried: list[str]) -> None:
        super().__init__("Codex CLI not found; tried: " + "; ".join(tried)
                         + f". Install it (npm install in the repo) or set {EXECUTABLE_ENV}.")
        self.tried = tried


class CodexVersionUnreadable(CodexInstallError):
    """`codex --version` failed or printed something that is not a version."""

    def __init__(self, executable: Path, output: str) -> None:
        super().__init__(f"could not read the version of {executable}: {output!r}")
        self.executable = executable
        self.output = output


class CodexVersionMismatch(CodexInstallError):
    """The discovered Codex is not the version named by WARDIAN_E2E_CODEX_EXPECTED_VERSION."""

    def __init__(self, executable: Path, found: CodexVersion, expected: CodexVersion) -> None:
        super().__init__(f"{executable} is Codex {found}, but {EXPECTED_VERSION_ENV} asks for {expected}")
        self.executable = executable
        self.found = found
        self.expected = expected


@dataclass(frozen=True, slots=True)
class CodexInstall:
    """A Codex executable and the version it reported."""

    executable: Path
    version: CodexVersion
    version_output: str  # the raw `codex --version` line, for evidence


def find_codex(*, env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> Path:
    """The Codex executable to use, by the discovery order in the module docstring.

    Raises:
        CodexNotFound: the configured path does not exist, or nothing was found.
    """
    env = os.environ if env is None else env
    configured = env.get(EXECUTABLE_ENV)
    if configured:
        path = Path(configured).expanduser()
        if path.is_file():
            return path.resolve()
        raise CodexNotFound([f"{EXECUTABLE_ENV}={configured} (no such file)"])
    tried: list[str] = []
    for name in ("codex", "codex.cmd", "codex.exe"):
        local = repo_root / "node_modules" / ".bin" / name
        if local.is_file():
            return local
        tried.append(str(local))
    found = shutil.which("codex", path=env.get("PATH", ""))
    if found:
        return Path(found)
    tried.append("codex on PATH")
    raise CodexNotFound(tried)


def codex_version(executable: Path, *, timeout_s: float = 60.0) -> tuple[CodexVersion, str]:
    """Run `executable --version` and return the parsed version and the raw output line.

    Raises:
        CodexVersionUnreadable: the command failed, timed out or printed no version.
    """
    try:
        done = subprocess.run([str(executable), "--version"], capture_output=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CodexVersionUnreadable(executable, str(exc)) from exc
    output = done.stdout.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        raise CodexVersionUnreadable(executable, output + done.stderr.decode("utf-8", "replace"))
    try:
        return CodexVersion.parse(output), output
    except ValueError:
        raise CodexVersionUnreadable(executable, output) from None


def discover_codex(*, env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT) -> CodexInstall:
    """Find Codex, read its version, and check it against WARDIAN_E2E_CODEX_EXPECTED_VERSION when that is set.

    Raises:
        CodexNotFound: see `find_codex`.
        CodexVersionUnreadable: see `codex_version`.
        CodexVersionMismatch: the expected version is set and differs.
        ValueError: the expected version is set but is not a version.
    """
    env = os.environ if env is None else env
    executable = find_codex(env=env, repo_root=repo_root)
    version, output = codex_version(executable)
    expected_text = env.get(EXPECTED_VERSION_ENV)
    if expected_text:
        expected = CodexVersion.parse(expected_text)
        if version != expected:
            raise CodexVersionMismatch(executable, version, expected)
    return CodexInstall(executable=executable, version=version, version_output=output)
