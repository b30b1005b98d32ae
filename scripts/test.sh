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
.venv/bin/python -m pytest -n auto -p no:cacheprovider
scripts/frozen_check.sh
scripts/windows.sh  # docs/guide/windows.md: the Windows suite and dist/windows/, under Wine
scripts/acceptance.sh  # docs/guide/native-acceptance.md: both modes, the mixed teams (real Codex, OpenCode, Claude Code), two hosts; scripted model
echo "test.sh: all suites passed in $((SECONDS - started)) s" >&2
