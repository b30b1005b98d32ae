#!/usr/bin/env python3
"""Thin entry for `run-native-e2e` (the native acceptance runner): see harness/wardian_harness/acceptance/runner.py."""

import sys

from wardian_harness.acceptance.runner import main

if __name__ == "__main__":
    sys.exit(main())
