#!/usr/bin/env bash
# Install everything wardian needs on a fresh machine into ./.venv (and ./node_modules for the
# third-party test tools). Idempotent; called by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check uv >&2
fi
UV="$(command -v uv || echo "python3 -m uv")"
# --inexact keeps tools a developer installed by hand; CI starts from a fresh clone anyway.
$UV sync --quiet --frozen --extra dev --inexact >&2
if [ "${1:-}" = "--with-node" ] && [ -f package.json ]; then
  # `npm install --no-save` installs the versions package-lock.json pins without rewriting it. (`npm ci`
  # refuses this lock: it wants the Windows-only optional dependency napi-windows-process-start-time of
  # the Inspector listed, which npm itself never writes on Linux.)
  npm install --no-save --no-audit --no-fund --loglevel=error >&2
  # The oldest supported Codex, apart from the pinned one, for the version-gate tests.
  npm install --no-save --prefix scripts/npm/codex-0.154.0 --no-audit --no-fund --loglevel=error >&2
fi
