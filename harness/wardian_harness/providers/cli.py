"""Find a provider's CLI and read its version: the one discovery of Claude Code and OpenCode (Codex's own, with its
Windows shims and the expected-version check of the acceptance, is `codex_install`).

Discovery: the provider's variable (`WARDIAN_CLAUDE`, `WARDIAN_OPENCODE`) when set (it must exist), else
`<repo>/node_modules/.bin/<name>` (the repository's package.json pins each CLI), else the first `<name>` on PATH.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from wardian.providers.version import Version

__all__ = ["REPO_ROOT", "CliInstall", "CliNotFound", "find_cli"]

REPO_ROOT = Path(__file__).resolve().parents[3]
"""The source checkout: its package.json pins the providers' CLIs into `node_modules/.bin`."""


class CliNotFound(Exception):
    """No executable of a provider's CLI at the configured path, in node_modules or on PATH, or what was found prints
    no version; each provider raises its own subclass, which names the CLI as people know it (`cli`)."""

    cli: ClassVar[str] = "the provider's"


@dataclass(frozen=True, slots=True)
class CliInstall:
    """A provider's CLI and the version it reported."""

    executable: Path
    version: Version
    version_output: str  # the raw `--version` line, for evidence


def find_cli(name: str, variable: str, not_found: type[CliNotFound], env: Mapping[str, str] | None = None,
             repo_root: Path = REPO_ROOT) -> CliInstall:
    """The CLI `name` to use and its version, by the discovery order of the module docstring; `variable` names a path
    that overrides it.

    Raises:
        CliNotFound: as `not_found`: nothing found, or what was found does not print a version.
    """
    env = os.environ if env is None else env
    configured = env.get(variable)
    candidates = [Path(configured)] if configured else [repo_root / "node_modules" / ".bin" / name]
    if not configured and (found := shutil.which(name, path=env.get("PATH", ""))):
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            built = path.stat()
            out = _version_output(path, built.st_mtime_ns, built.st_size)
            try:
                return CliInstall(path, Version.parse(out), out)
            except ValueError:
                raise not_found(f"{path} --version printed {out[:80]!r}, not a version") from None
    raise not_found(f"{not_found.cli} CLI not found; tried " + ", ".join(map(str, candidates))
                    + f". Install it (npm install in the repo) or set {variable}.")


@functools.cache
def _version_output(path: Path, mtime_ns: int, size: int) -> str:
    """What `path --version` prints, once per build of the executable (its time and size): the tests look a CLI up
    for each world, and OpenCode's answer alone takes a second of CPU."""
    done = subprocess.run([str(path), "--version"], capture_output=True, text=True, encoding="utf-8",
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    return done.stdout.strip() or done.stderr.strip()  # Pi 0.73.1 prints its version on stderr
