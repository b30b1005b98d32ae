"""Stand-in long-lived process: blocks until something kills it (the test kills it itself when no job does)."""

import threading

threading.Event().wait()
