"""The reliability suites' path to the fake `codex`, which is `tests/codex/fake_codex.py` (`world.FAKE_CODEX`
still names this file). Runs it as the script, stdlib only, as `python -S fake_codex.py` needs."""

import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "codex", "fake_codex.py"),
               run_name="__main__")
