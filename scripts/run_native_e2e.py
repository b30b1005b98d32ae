#!/usr/bin/env python3
"""Thin entry for `run-native-e2e` (the native acceptance runner): see harness/runner.py."""

import sys

from wardian_harness.runner import main

if __name__ == "__main__":
    sys.exit(main())
