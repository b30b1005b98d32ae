"""Installed into the Wine suite's Windows Python only (scripts/windows.sh): a workaround for a Wine 8.0 gap.

Python 3.12's `shutil.copy2`/`copyfile` call `_winapi.CopyFile2`, which Wine 8.0 exports as a stub that aborts
the whole process ("Unimplemented function KERNEL32.dll.CopyFile2"). Without the attribute `shutil` falls back to
its portable copy. Only under Wine (its registry key is there), so the same interpreter on Windows is untouched
(docs/guide/windows.md#maintaining-the-wine-suite).
"""

import sys

assert sys.platform == "win32"

import _winapi  # noqa: E402 (Windows only, as the assert tells the type checker)
import winreg  # noqa: E402

try:
    winreg.CloseKey(winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"Software\Wine"))
except OSError:
    pass
else:
    if hasattr(_winapi, "CopyFile2"):
        del _winapi.CopyFile2
