"""benchmarks/bench_cli.py cannot rot: its tape generator and its builder make a small log that
the real CLI imports, lists, searches and doctors (a few hundred events, through the benchmark's own
subprocesses; what the test then reads of the log, the same commands in process)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

from tests.support.in_process import run_in_process

ROOT = Path(__file__).resolve().parents[3]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_cli", ROOT / "benchmarks" / "bench_cli.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_builder_makes_a_log_every_row_can_read(tmp_path, monkeypatch):
    bench = _bench()
    monkeypatch.setattr(bench, "CACHE", tmp_path / "cache")
    info = bench.build_log("smoke", 12, 25)
    assert info["events"] == 300 and Path(info["db"]).exists()
    assert {"import_s", "tasks_first_s", "grep_first_s", "doctor_first_s"} <= set(info)
    again = bench.build_log("smoke", 12, 25)  # cached: nothing rebuilt
    assert "import_s" in again and Path(again["db"]).stat().st_mtime == Path(info["db"]).stat().st_mtime

    def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
        return run_in_process([*args, "--db", info["db"]], tmp_path)

    rows = json.loads(cli("tasks", "--json").stdout)
    assert len(rows) == 12 and all(r["events"] == 25 and r["state"] == "completed" for r in rows)
    hits = json.loads(cli("grep", bench.NEEDLE, "--json").stdout)
    assert len({h["task_id"] for h in hits}) == bench.NEEDLE_TASKS
    doctor = json.loads(cli("doctor", "--json").stdout)
    assert doctor["tasks"] == 12 and doctor["ok"]
    r = bench.run([bench.A2A_TAPE, "tasks", "--limit", "5", "--db", info["db"]])
    assert r.code == 0 and r.wall > 0 and r.rss_kb > 0


def test_generated_tape_is_deterministic_and_well_formed(tmp_path):
    bench = _bench()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert bench.write_tape(a, 3, 10) == 1 + 3 + 30
    bench.write_tape(b, 3, 10)
    assert a.read_bytes() == b.read_bytes()
    header = json.loads(a.read_bytes().splitlines()[0])
    assert header["type"] == "header" and header["events"] == 30
