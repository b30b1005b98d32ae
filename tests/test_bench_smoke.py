"""`scripts/bench.py --quick` runs end to end and prints only JSON lines with the expected metrics
(docs/benchmarks.md#the-metrics).

Figures are not checked: tests never assert wall-clock numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "scripts" / "bench.py"

EXPECTED = {
    "roundtrip_mailbox_wait",
    "roundtrip_agent_list",
    "wake_1_waiter",
    "wake_100_waiters",
    "wake_100_waiters_same_recipient",
    "durable_sends_per_s_32_senders",
    "app_floor_requests_per_s_32_senders",
    "store_ceiling_sends_per_s_batches_of_32",
    "minimal_server_sends_per_s_32_senders",
    "receive_100_at_1m",
    "receive_100_at_1m_cursor",
    "minimal_server_receive_100_at_1m_cursor",
    "cli_cold_start_message_wait",
    "python_start_floor",
    "cli_import_time",
    "mcp_startup",
    "mcp_startup_trivial_sdk_server",
    "mcp_roundtrip_trivial_tool",
    "mcp_roundtrip_send_message",
    "mcp_roundtrip_list_agents",
    "app_roundtrip_message_send",
    "mcp_first_call_trivial_sdk_server",
    "mcp_first_wait_agent",
    "mcp_first_receive_messages",
    "mcp_first_list_agents",
}


@pytest.mark.timeout(600)
def test_bench_quick_prints_one_json_object_per_line_for_every_metric():
    """docs/benchmarks.md#the-metrics: the benchmark prints JSON lines with each named figure."""
    proc = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, timeout=580,
                          check=False)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-4000:]
    lines = proc.stdout.decode("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert all(isinstance(r, dict) and isinstance(r.get("metric"), str) for r in records)
    assert {r["metric"] for r in records} == EXPECTED
    assert len(records) == len(EXPECTED)
    for r in records:
        assert "unit" in r
        assert r["n"] > 0
        assert ("value" in r) or ("p50_ms" in r and "p99_ms" in r)
    by_metric = {r["metric"]: r for r in records}
    # The cold start carries its ratio to the interpreter's start-up in the same run, so no arithmetic is needed.
    cold, floor = by_metric["cli_cold_start_message_wait"], by_metric["python_start_floor"]
    assert cold["ratio_to_python"] == pytest.approx(cold["value"] / floor["value"], rel=0.01)
    # The sends carry their ratios to the store's ceiling and to the least server of the same run.
    durable, minimal = by_metric["durable_sends_per_s_32_senders"], by_metric["minimal_server_sends_per_s_32_senders"]
    assert minimal["ratio_to_ceiling"] == pytest.approx(minimal["value"] / minimal["store_ceiling_sends_per_s"],
                                                        rel=0.01)
    assert durable["ratio_to_minimal_server"] == pytest.approx(durable["value"] / minimal["value"], rel=0.02)
    assert minimal["overlap_shape_sends_per_s"] > 0
    assert durable["app_mean_batch"] >= 1
    assert minimal["fill_unvalidated_shape_sends_per_s"] > 0
    # The cursor walk carries its ratio to the least server's walk on the same home, which reads the same pages.
    walk, floor = by_metric["receive_100_at_1m_cursor"], by_metric["minimal_server_receive_100_at_1m_cursor"]
    assert walk["minimal_server_p99_ms"] == floor["p99_ms"]
    assert walk["ratio_to_minimal_server"] == pytest.approx(walk["p99_ms"] / floor["p99_ms"], rel=0.01)
    assert floor["first_reads"] > 0
    assert floor["reread_p50_ms"] > 0


# `--store postgresql`: each store-bound figure on both backends, tagged, plus the PostgreSQL-only ones.
EXPECTED_BOTH_STORES = {
    ("roundtrip_mailbox_wait", "sqlite"), ("roundtrip_mailbox_wait", "postgresql"),
    ("roundtrip_agent_list", "sqlite"), ("roundtrip_agent_list", "postgresql"),
    ("wake_1_waiter", "sqlite"), ("wake_1_waiter", "postgresql"), ("wake_1_waiter_cross_host", "postgresql"),
    ("app_floor_requests_per_s_32_senders", "sqlite"), ("minimal_server_sends_per_s_32_senders", "sqlite"),
    ("store_ceiling_sends_per_s_batches_of_32", "sqlite"), ("store_ceiling_sends_per_s_batches_of_32", "postgresql"),
    ("pg_raw_insert_commit_per_s_32_connections", "postgresql"),
    ("durable_sends_per_s_32_senders", "sqlite"), ("durable_sends_per_s_32_senders", "postgresql"),
    ("receive_100_at_1m", "sqlite"), ("receive_100_at_1m", "postgresql"),
    ("receive_100_at_1m_cursor", "sqlite"), ("receive_100_at_1m_cursor", "postgresql"),
}


@pytest.mark.timeout(600)
def test_bench_quick_on_postgresql_prints_each_store_figure_for_both_stores():
    """`--store postgresql` starts its own private server and tags every figure with its store."""
    from tests.conftest import require_postgres

    require_postgres()
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--store", "postgresql"], capture_output=True,
                          timeout=580, check=False)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-4000:]
    records = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert {(r["metric"], r["store"]) for r in records} == EXPECTED_BOTH_STORES
    assert len(records) == len(EXPECTED_BOTH_STORES)
    for r in records:
        assert "unit" in r
        assert r["n"] > 0
        assert ("value" in r) or ("p50_ms" in r and "p99_ms" in r)
    durable = {r["store"]: r for r in records if r["metric"] == "durable_sends_per_s_32_senders"}
    assert durable["postgresql"]["apps"] == 2
    assert {"ratio_to_sqlite", "ratio_to_raw_ceiling", "raw_ceiling_inserts_per_s"} <= set(durable["postgresql"])
