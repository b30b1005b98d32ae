#!/usr/bin/env python3
"""docs/reliability.md row P3 [NIGHTLY]: coverage-guided fuzzing (Atheris / libFuzzer) of `wardian mcp serve`'s stdio
frame decoder and dispatcher, in-process, against a fake app. The target and its pass criteria are in
`tests/reliability/mcp_frames.py`; a failed criterion is an uncaught exception, so libFuzzer reports it as a crash
and writes the input (reproduce it with `scripts/fuzz_mcp_frames.py CRASH_FILE`).

    scripts/fuzz_mcp_frames.py -max_total_time=600 -max_len=65536      # a fresh corpus seeded with the M2 lines
    scripts/fuzz_mcp_frames.py -max_total_time=600 -max_len=65536 DIR  # grow (and seed) the corpus in DIR
    scripts/fuzz_mcp_frames.py crash-0123abcd                          # run one input again

Arguments are libFuzzer's. Unless given, `-timeout=120` (an input takes milliseconds; the target gives up on an
answer after 30 s), `-print_final_stats=1` and `-artifact_prefix=` a directory beside the corpus are added.
`scripts/reliability.py` runs this in its nightly run and reports it as row P3.

Atheris is the optional extra `fuzz`, not installed by CI: `uv sync --frozen --extra dev --extra fuzz --inexact`.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The packages whose code steers the fuzzer: ours, and the MCP SDK's JSON-RPC dispatch the server runs on.
INSTRUMENTED = ["wardian", "mcp", "mcp_types"]
# What the server imports only once it runs (the SDK on its thread, the tool calls): imported while instrumenting.
LAZY_IMPORTS = ("mcp.server.lowlevel", "mcp.shared.message", "mcp_types", "wardian.mcp._calls", "wardian.mcp._sdk")
INSTALL_HINT = "uv sync --frozen --extra dev --extra fuzz --inexact"


def _flag(args: list[str], name: str) -> bool:
    return any(a.startswith(f"-{name}=") for a in args)


def _prepare(argv: list[str], work: Path, seeds: list[bytes]) -> list[str]:
    """libFuzzer's argv: the defaults above added, and a corpus directory (`work/corpus` if none) with the seeds."""
    args = argv[1:]
    paths = [Path(a) for a in args if not a.startswith("-")]
    if paths and not paths[0].is_dir():
        return argv  # running given inputs again: no corpus, no seeds
    if paths:
        corpus = paths[0]
    else:
        corpus = work / "corpus"
        corpus.mkdir()
        args.append(str(corpus))
    for seed in seeds:
        path = corpus / f"seed-{hashlib.sha1(seed).hexdigest()}"
        if not path.exists():
            path.write_bytes(seed)
    if not _flag(args, "artifact_prefix"):
        artifacts = work / "artifacts"
        artifacts.mkdir(exist_ok=True)
        args.append(f"-artifact_prefix={artifacts}/")
    if not _flag(args, "timeout"):
        args.append("-timeout=120")
    if not _flag(args, "print_final_stats"):
        args.append("-print_final_stats=1")
    print(f"fuzz_mcp_frames: corpus {corpus}, {len(seeds)} seeds, work directory {work}", file=sys.stderr)
    return [argv[0], *args]


def main() -> int:
    try:
        import atheris
    except ImportError:
        print(f"fuzz_mcp_frames: Atheris is not installed; install the fuzz extra: {INSTALL_HINT}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    # atheris ships no type information for its functions.
    with atheris.instrument_imports(include=INSTRUMENTED):  # pyright: ignore[reportAttributeAccessIssue]
        for name in LAZY_IMPORTS:
            importlib.import_module(name)
        from tests.reliability.mcp_frames import Target, seed_inputs
    # The corpus (unless given), the artifacts and the fake app's home (a Unix socket: keep $TMPDIR short).
    work = Path(tempfile.mkdtemp(prefix="wardian-fuzz-mcp-frames-"))
    target = Target(parent=work)
    atheris.Setup(_prepare(sys.argv, work, seed_inputs()), target.one_input)
    atheris.Fuzz()  # libFuzzer exits the process itself
    return 0


if __name__ == "__main__":
    sys.exit(main())
