#!/usr/bin/env bash
# Type-check the product code (core/ as `wardian`, harness/ as `wardian_harness`) with pyright, pinned in
# package.json (scripts/setup.sh --with-node installs it). pyright resolves imports by directory name and
# cannot follow setuptools' editable-install finder, so it checks a temporary tree of symlinks that gives
# each directory its import name.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
ln -s "$root/core" "$tree/wardian"
ln -s "$root/harness" "$tree/wardian_harness"
cat > "$tree/pyrightconfig.json" <<JSON
{"include": ["wardian", "wardian_harness"], "extraPaths": ["$tree"], "venvPath": "$root", "venv": ".venv",
 "pythonVersion": "3.11", "typeCheckingMode": "standard"}
JSON
node_modules/.bin/pyright -p "$tree/pyrightconfig.json"
