import sys

from wardian.cli import main

sys.exit(main())
