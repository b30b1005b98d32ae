"""`python -m wardian.protocol.schemas [--check]`: write the JSON Schemas, or report how they drifted."""

from __future__ import annotations

import sys

from wardian.protocol.schemas.generate import main

sys.exit(main(sys.argv[1:]))
