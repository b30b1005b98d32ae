#!/usr/bin/env bash
# Install everything wardian needs on a fresh machine into ./.venv (and ./node_modules for the third-party test
# tools). Idempotent; called by scripts/demo.sh and scripts/test.sh.
#   --with-node     the pinned npm tools (Codex, OpenCode, Claude Code, the MCP Inspector, pyright)
#   --with-system   Debian's postgresql (the shared store's tests start a private server) and chromium (the web
#                   console's browser tests), with apt-get, when missing (needs root, as CI has)
set -euo pipefail
cd "$(dirname "$0")/.."
with_node=0
with_system=0
for arg in "$@"; do
  case "$arg" in
    --with-node) with_node=1 ;;
    --with-system) with_system=1 ;;
    *) echo "setup.sh: unknown option $arg (allowed: --with-node, --with-system)" >&2; exit 2 ;;
  esac
done
if ! command -v uv >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check uv >&2
fi
UV="$(command -v uv || echo "python3 -m uv")"
# --inexact keeps tools a developer installed by hand; CI starts from a fresh clone anyway.
$UV sync --quiet --frozen --extra dev --extra harness --inexact >&2
if [ "$with_node" = 1 ] && [ -f package.json ]; then
  # `npm install --no-save` installs the versions package-lock.json pins without rewriting it. (`npm ci`
  # refuses this lock: it wants the Windows-only optional dependency napi-windows-process-start-time of
  # the Inspector listed, which npm itself never writes on Linux.)
  npm install --no-save --no-audit --no-fund --loglevel=error >&2
  # The oldest supported Codex, apart from the pinned one, for the version-gate tests.
  npm install --no-save --prefix scripts/npm/codex-0.154.0 --no-audit --no-fund --loglevel=error >&2
fi
if [ "$with_system" = 1 ]; then
  missing=()
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "setup.sh: installing ${missing[*]} from Debian's packages" >&2
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    else
      echo "setup.sh: ${missing[*]} missing; install them (apt-get install ${missing[*]}) to run their tests" >&2
    fi
  fi
fi
