"""Tests of the Python package against the CLI it wraps."""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

import tlblab

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# The CLI to compare with: $TLBLAB_BIN, else the newest build in target/.
_BUILDS = [os.path.join(ROOT, "target", d, "tlblab") for d in ("release", "debug")]
CLI = os.environ.get("TLBLAB_BIN") or max(
    (p for p in _BUILDS if os.path.exists(p)), key=os.path.getmtime, default="tlblab"
)


def cli(*args):
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True)


def test_run_is_the_cli_json():
    r = tlblab.run("skip-sync-collapse", **{"machine.cpus": 8, "workload.size": "64MiB"})
    out = cli("run", "skip-sync-collapse", "--json", "--set", "machine.cpus=8",
              "--set", "workload.size=64MiB")
    assert out.returncode == 0, out.stderr
    assert r == json.loads(out.stdout)
    # The mechanism: one sync IPI to each of the 7 other CPUs per 2 MiB collapse.
    assert r["interrupt_totals"]["CAL"] == 32 * 7


def test_workload_defaults_and_booleans():
    r = tlblab.run(workload="khugepaged_collapse",
                   **{"machine.cpus": 4, "workload.size": "8MiB",
                      "mm.skip_redundant_table_sync": True})
    assert r["interrupt_totals"]["CAL"] == 0
    assert r["arch"]["table_sync_skipped"] == 4


def test_errors_are_one_line_value_errors():
    with pytest.raises(ValueError) as e:
        tlblab.run(**{"machine.cpuz": 4})
    assert "machine.cpuz" in str(e.value) and "\n" not in str(e.value)


def test_sweep_rows_match_the_cli_csv():
    over = {"machine.cpus": [4, 8], "mm.skip_redundant_table_sync": [False, True]}
    sets = {"workload.size": "16MiB"}
    rows = tlblab.sweep("skip-sync-collapse", over=over, **sets)
    assert len(rows) == 4
    # Swept values come back typed, as pandas users expect.
    assert [r["machine.cpus"] for r in rows] == [4, 4, 8, 8]
    assert [r["mm.skip_redundant_table_sync"] for r in rows] == [False, True, False, True]
    assert tlblab.typed("16MiB") == "16MiB" and tlblab.typed("0.5") == 0.5
    # The mechanism: 8 collapses, each syncing cpus - 1 CPUs unless skipped.
    assert [r["cal_total"] for r in rows] == [24, 0, 56, 0]
    d = tempfile.mkdtemp()
    try:
        out = cli("sweep", "skip-sync-collapse", "--over", "machine.cpus=4,8",
                  "--over", "mm.skip_redundant_table_sync=false,true",
                  "--set", "workload.size=16MiB", "--out", d)
        assert out.returncode == 0, out.stderr
        csv, _ = tlblab.sweep_documents("skip-sync-collapse", over=over, **sets)
        with open(os.path.join(d, "sweep.csv")) as f:
            assert f.read() == csv
    finally:
        shutil.rmtree(d)


def test_ray_sweep_merges_to_the_unsharded_csv():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install ray)")
    from tlblab import ray_sweep

    over = {"machine.cpus": [4, 8], "mm.skip_redundant_table_sync": [False, True]}
    sets = {"workload.size": "16MiB"}
    d = tempfile.mkdtemp()
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        csv = ray_sweep.sweep("skip-sync-collapse", over=over, out=d, **sets)
        ray.shutdown()
        want, _ = tlblab.sweep_documents("skip-sync-collapse", over=over, **sets)
        assert csv == want
        with open(os.path.join(d, "sweep.csv")) as f:
            assert f.read() == want
        assert len(os.listdir(os.path.join(d, "shards"))) == 4
    finally:
        shutil.rmtree(d)
