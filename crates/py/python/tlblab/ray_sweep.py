"""A tlblab sweep on a Ray cluster: one task per grid point.

Each task runs its point as shard ``i/N`` of the sweep (N = the number of
points) and returns the shard file's text; the driver writes the shard files
and merges them with the same code as ``tlblab sweep --merge``, so the
``sweep.csv`` it writes is byte-identical to an unsharded ``tlblab sweep``.

    python -m tlblab.ray_sweep skip-sync-collapse --out sweep-out \\
        --over machine.cpus=8,64,256 --over mm.skip_redundant_table_sync=false,true

With ``ray.init()`` it runs on a local single-node Ray; on a cluster, start
the script where ``ray.init(address="auto")`` reaches it (``--address auto``).
"""

import argparse
import os

import ray

from . import _tlblab, over_of, sets_of


@ray.remote
def _point(scenario, workload, sets, over, index, count):
    return _tlblab.sweep_shard_json(scenario, workload, sets, over, index, count)


def sweep(scenario=None, *, over, out, workload=None, **sets):
    """Run the sweep as Ray tasks; write ``out/shards/*`` and the merged
    ``out/sweep.csv`` and ``out/sweep.json``; return the CSV text."""
    over = over_of(over) if isinstance(over, dict) else list(over)
    sets = sets_of(sets)
    n = _tlblab.sweep_points(over)
    futures = [_point.remote(scenario, workload, sets, over, i, n) for i in range(n)]
    shard_dir = os.path.join(out, "shards")
    os.makedirs(shard_dir, exist_ok=True)
    for name, text in ray.get(futures):
        with open(os.path.join(shard_dir, name), "w") as f:
            f.write(text)
    csv, doc = _tlblab.merge_shards([shard_dir])
    with open(os.path.join(out, "sweep.csv"), "w") as f:
        f.write(csv)
    with open(os.path.join(out, "sweep.json"), "w") as f:
        f.write(doc)
    return csv


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenario", nargs="?")
    p.add_argument("--workload")
    p.add_argument("--over", action="append", required=True, help="key=v1,v2,...")
    p.add_argument("--set", action="append", default=[], help="key=value")
    p.add_argument("--out", default="sweep-out")
    p.add_argument("--address", help="a Ray cluster address (default: a local Ray)")
    a = p.parse_args(argv)
    ray.init(address=a.address, include_dashboard=False, log_to_driver=False)
    sets = dict(kv.split("=", 1) for kv in a.set)
    print(sweep(a.scenario, over=a.over, out=a.out, workload=a.workload, **sets), end="")


if __name__ == "__main__":
    main()
