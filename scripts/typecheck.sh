#!/usr/bin/env bash
# Type-check the code (core/wardian, harness/wardian_harness, tests/, scripts/, e2e_native/ and build/freeze.py)
# with pyright, pinned in package.json (scripts/setup.sh --with-node installs it); its settings are
# [tool.pyright] in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
exec node_modules/.bin/pyright -p pyproject.toml "$@"
