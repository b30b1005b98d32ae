"""A provider's `probe`, written once: find its CLI, ask its version, pass it through the provider's gate.

The executable is the path the gate's variable names (`WARDIAN_CLAUDE`), else, for a CLI the repository pins in
package.json, the pinned npm one (`node_modules/.bin/<command>` of the working directory or of a source checkout),
else `<command>` on PATH. What the version may do is the provider's own `capabilities(version)` (its `compat`).

The version is npm's own record when the executable is the bin its package declares (the `package.json` of the
gate's package beside it, as npm installs it): a Node CLI's `--version` is a whole start of it, 0.1-2 s, paid at
every agent start. Any other executable (a path set by hand, a wrapper, a binary not from npm) is asked `--version`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio

from wardian import errors
from wardian.providers.base import ProviderInfo
from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate


def find_executable(gate: VersionGate) -> str:
    """The provider's executable (module docstring).

    Raises:
        Unsupported: none found, or the gate's variable names no executable (the message names the variable and
            the package).
    """
    explicit = os.environ.get(gate.env_var)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise errors.Unsupported(f"{gate.env_var}={explicit} is not an executable", field=gate.command)
        return explicit
    if gate.pinned:
        checkout = Path(__file__).resolve().parents[3]  # core/wardian/providers -> the source checkout
        for root in (Path.cwd(), checkout):
            pinned = root / "node_modules" / ".bin" / gate.command
            if os.access(pinned, os.X_OK):
                return str(pinned)
    found = shutil.which(gate.command)
    if not found:
        raise errors.Unsupported(f"no {gate.label} CLI found: install {gate.package} (npm) or set {gate.env_var} to "
                                 "its path", field=gate.command)
    return found


def find_command(word: str) -> str:
    """The executable a command line's first word names: an absolute path, else the first match on PATH.

    Raises: Unsupported (naming `command`: nothing executable by that name).
    """
    found = word if os.path.isabs(word) and os.access(word, os.X_OK) else shutil.which(word)
    if not found or os.path.isdir(found):
        raise errors.Unsupported(f"{word[:200]!r} is not an executable on the app's PATH; give its absolute path or "
                                 "install it", field="command", allowed="an executable on PATH, or an absolute path")
    return found


def version_output(executable: str) -> str:
    """`<executable> --version` output (bounded)."""
    out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60, check=False,
                         stdin=subprocess.DEVNULL)
    return out.stdout.strip() or out.stderr.strip()


def npm_version(executable: str, package: str) -> str | None:
    """The version in the `package.json` of npm package `package` when `executable` is that package's declared bin
    (after symlinks); None when it is not (another package's, or none found within a few folders up)."""
    real = Path(os.path.realpath(executable))
    for folder in list(real.parents)[:4]:
        try:
            manifest = json.loads((folder / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(manifest, dict) or "name" not in manifest:
            continue  # a nested manifest (`{"type": "module"}`), not a package's
        if manifest.get("name") != package:
            return None
        bins = manifest.get("bin")
        targets = [bins] if isinstance(bins, str) else list(bins.values()) if isinstance(bins, dict) else []
        version = manifest.get("version")
        mine = any(isinstance(t, str) and Path(os.path.realpath(folder / t)) == real for t in targets)
        return version if mine and isinstance(version, str) else None
    return None


async def probe(gate: VersionGate, capabilities: Callable[[Version], Capabilities]) -> ProviderInfo:
    """`Provider.probe`: the executable, its version and what that version may do.

    Raises:
        Unsupported: no executable, no version in its output, or a version the gate refuses.
    """
    executable = find_executable(gate)
    text = npm_version(executable, gate.package) or await anyio.to_thread.run_sync(version_output, executable)
    version = gate.parse(text)
    return ProviderInfo(executable=executable, version=str(version), capabilities=capabilities(version))
