"""PyInstaller entry script of the frozen CLI (`wardian`, `wardian-cli.exe`): exactly `wardian.cli:main`."""

import sys

from wardian.cli import main

sys.exit(main())
