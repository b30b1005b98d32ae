"""Stand-in agent: start a DETACHED_PROCESS grandchild (`sleeper.py`), record both pids, then either exit at once
(`exit`) or run until stdin closes (`wait`).

usage: holder.py DIR exit|wait   (writes DIR/child.pid and DIR/grandchild.pid)
"""

import os
import subprocess
import sys
from pathlib import Path

DETACHED_PROCESS = 0x00000008

folder = Path(sys.argv[1])
grandchild = subprocess.Popen([sys.executable, str(Path(__file__).with_name("sleeper.py"))],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              creationflags=DETACHED_PROCESS)
for name, pid in (("child", os.getpid()), ("grandchild", grandchild.pid)):
    (folder / f"{name}.tmp").write_text(str(pid), encoding="utf-8")
    os.replace(folder / f"{name}.tmp", folder / f"{name}.pid")
if sys.argv[2] == "wait":
    sys.stdin.buffer.read()
