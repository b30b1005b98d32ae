#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite (lint included). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-node
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -n auto -p no:cacheprovider "$@"
