"""`python -m wardian.cli`, the same as `wardian`."""

import sys

from wardian.cli import main

if __name__ == "__main__":  # imported, as by a walk over the package's modules, it runs nothing
    sys.exit(main())
