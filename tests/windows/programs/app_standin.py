"""Stand-in for the app: start one agent's provider process the way the app does (`ProviderProcess`) with
`holder.py` as the provider, then run until killed.

usage: app_standin.py DIR   (holder.py writes DIR/child.pid and DIR/grandchild.pid)
"""

import os
import sys
from pathlib import Path

import anyio

from wardian.providers.process import ProviderProcess


async def main(folder: Path) -> None:
    holder = str(Path(__file__).with_name("holder.py"))
    child = ProviderProcess([sys.executable, holder, str(folder), "wait"], name="stand-in", env=dict(os.environ),
                            cwd=folder, log_path=folder / "provider.log", pid_path=folder / "provider.pid")
    await child.start()
    await anyio.sleep_forever()


anyio.run(main, Path(sys.argv[1]))
