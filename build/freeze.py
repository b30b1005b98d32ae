"""Freeze wardian with PyInstaller: `python build/freeze.py [--onefile] [--clean]`.

Produces `dist/wardian/wardian` (onedir) on Linux/macOS; on Windows `dist/windows/` holds `wardian-cli.exe` and
the silent launcher `wardian-mcp.exe` (built under Wine by scripts/windows.sh). `--onefile` builds
`dist/onefile/wardian` instead, for start-time comparisons only (it unpacks itself on every start). PyInstaller's
work files go to `build/work/` (ignored by git).

PyInstaller finds the package in `core/` (which holds `wardian/` under its import name), or, with
`--source-rev REV`, in `core/` as committed in REV (extracted with `git archive` under `build/work/`). Run it with
the project's environment (`.venv/bin/python build/freeze.py`); a plain `python` re-executes itself under `.venv`
when PyInstaller is missing. Prints the build time and the size of the result; exits non-zero if the binary
does not start.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
WORK = BUILD / "work"
SPEC = BUILD / "wardian.spec"


def venv_python() -> Path | None:
    for candidate in (ROOT / ".venv" / "bin" / "python", ROOT / ".venv" / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return None


def source_root(rev: str | None) -> Path:
    """The folder holding the `wardian` package to freeze: `core/` of the work tree, or of commit `rev`."""
    if rev is None:
        return ROOT / "core"
    dest = WORK / "rev"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "core"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "core"


def tree_size(path: Path) -> int:
    """Bytes of the regular files under `path` (links are not followed, so nothing counts twice)."""
    if path.is_file():
        return path.stat().st_size
    return sum(st.st_size for st in (p.lstat() for p in path.rglob("*")) if stat.S_ISREG(st.st_mode))


def freeze(onefile: bool, clean: bool, distpath: Path, rev: str | None = None) -> Path:
    """Run PyInstaller on `build/wardian.spec`; the path of the CLI it produced.

    Raises:
        subprocess.CalledProcessError: PyInstaller failed.
    """
    src = source_root(rev)
    workpath = WORK / ("pyinstaller-onefile" if onefile else "pyinstaller")
    cmd = [sys.executable, "-m", "PyInstaller", str(SPEC), "--noconfirm", "--log-level", "WARN",
           "--distpath", str(distpath), "--workpath", str(workpath)]
    if clean:
        cmd.append("--clean")
    cmd += ["--", "--src", str(src)] + (["--onefile"] if onefile else [])
    subprocess.run(cmd, check=True, cwd=ROOT)
    exe, folder = ("wardian-cli.exe", "windows") if os.name == "nt" else ("wardian", "wardian")
    return distpath / exe if onefile else distpath / folder / exe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--onefile", action="store_true", help="one self-unpacking file (measurements only)")
    parser.add_argument("--clean", action="store_true", help="drop PyInstaller's caches first")
    parser.add_argument("--source-rev", metavar="REV", default=None,
                        help="freeze core/ as committed in REV (e.g. HEAD) instead of the work tree")
    parser.add_argument("--distpath", type=Path, default=None,
                        help="where to put the result (default: dist/, or dist/onefile/ with --onefile)")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("PyInstaller") is None:
        python = venv_python()
        if python is None or Path(sys.executable).resolve() == python.resolve():
            sys.exit("freeze.py: PyInstaller is not installed; run scripts/setup.sh (uv sync --extra dev) first")
        os.execv(python, [str(python), __file__, *(sys.argv[1:] if argv is None else argv)])
    distpath = (args.distpath or (ROOT / "dist" / ("onefile" if args.onefile else ""))).absolute()
    t0 = time.perf_counter()
    exe = freeze(args.onefile, args.clean, distpath, args.source_rev)
    elapsed = time.perf_counter() - t0
    check = subprocess.run([str(exe), "--version"], capture_output=True, timeout=60, check=False)
    if check.returncode != 0:
        sys.stderr.write(check.stderr.decode("utf-8", "replace"))
        sys.exit(f"freeze.py: {exe} --version exited {check.returncode}")
    built = exe if args.onefile else exe.parent
    print(f"built {exe} ({check.stdout.decode('utf-8').strip()}) in {elapsed:.1f} s; "
          f"{tree_size(built) / 1e6:.1f} MB in {built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
