"""`python -m wardian.launcher ARGS…`: the launcher from source; runs `python -m wardian ARGS…` (tests, debugging)."""

from wardian.launcher import main

main()
