"""`wardian.launcher` from source, as `wardian-mcp.exe` runs it: start argv[1:] contained, exit with its status."""

import sys

from wardian import launcher

launcher.finish(launcher.run(sys.argv[1:]))
