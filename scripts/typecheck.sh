#!/usr/bin/env bash
# Type-check the code (core/ as `wardian`, harness/ as `wardian_harness`, and tests/, scripts/, e2e_native/)
# with pyright, pinned in package.json (scripts/setup.sh --with-node installs it). pyright resolves imports by
# directory name and cannot follow setuptools' editable-install finder, so it checks a temporary tree of
# symlinks that gives each directory its import name.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
ln -s "$root/core" "$tree/wardian"
ln -s "$root/harness" "$tree/wardian_harness"
for dir in tests scripts e2e_native; do ln -s "$root/$dir" "$tree/$dir"; done
cat > "$tree/pyrightconfig.json" <<JSON
{"include": ["wardian", "wardian_harness", "tests", "scripts", "e2e_native"], "extraPaths": ["$tree"], "venvPath": "$root", "venv": ".venv",
 "pythonVersion": "3.11", "typeCheckingMode": "standard"}
JSON
node_modules/.bin/pyright -p "$tree/pyrightconfig.json"
