#!/usr/bin/env bash
# Set up a fresh machine and run every test: ruff, pyright, the whole suite from source, then the suites that must
# also hold for the frozen binary (scripts/frozen_check.sh). With arguments, only pytest runs, with them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-node --with-system
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache  # the layering contracts in pyproject.toml
scripts/typecheck.sh
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest -n auto -p no:cacheprovider "$@"
fi
started=$SECONDS
.venv/bin/python build/freeze.py
export WARDIAN_FROZEN_CLI="$PWD/dist/wardian/wardian"
# The Windows suite's setup (a Wine prefix, Windows CPython and its wheels, the freeze under Wine: minutes of one core)
# runs beside the main pytest, whose tests mostly wait on agents; it starts after the Linux freeze above, as both
# freezes share PyInstaller's work folder. Its own process group, ended if this script ends first.
mkdir -p build/work
setsid scripts/windows.sh --prepare > build/work/windows-prepare.log 2>&1 &
prepare=$!
trap 'kill -- -"$prepare" 2>/dev/null || true' EXIT
.venv/bin/python -m pytest -n auto -p no:cacheprovider
if ! wait "$prepare"; then
  cat build/work/windows-prepare.log >&2
  echo "test.sh: the Windows suite's setup failed (its log is above)" >&2
  exit 1
fi
trap - EXIT
cat build/work/windows-prepare.log >&2
scripts/frozen_check.sh
scripts/windows.sh  # docs/guide/windows.md: the Windows suite and dist/windows/, under Wine
scripts/acceptance.sh  # docs/guide/native-acceptance.md: both modes, the mixed teams (real Codex, OpenCode, Claude Code), two hosts; scripted model
echo "test.sh: all suites passed in $((SECONDS - started)) s" >&2
