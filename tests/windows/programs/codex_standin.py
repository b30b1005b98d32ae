"""Stand-in for Codex's CLI where the real one cannot run (Wine 8.0, docs/guide/windows.md#codex-under-wine):
`--version` answers as the pinned Codex does; `app-server` becomes `holder.py $STANDIN_DIR wait` (a DETACHED_PROCESS
grandchild, both pids recorded, then it reads stdin until it closes), answering nothing, so the app's start of the
agent waits while the tree runs.

usage: codex_standin.py --version | app-server [ARGS...]
"""

import os
import runpy
import sys
from pathlib import Path

if sys.argv[1:] == ["--version"]:
    print("codex-cli 0.171.0")
    sys.exit(0)
sys.argv = ["holder.py", os.environ["STANDIN_DIR"], "wait"]
runpy.run_path(str(Path(__file__).with_name("holder.py")), run_name="__main__")
