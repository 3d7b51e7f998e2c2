"""tlblab from Python: the same runs and sweeps as the ``tlblab`` CLI.

    import tlblab
    r = tlblab.run("skip-sync-collapse", **{"machine.cpus": 256})
    r["interrupt_totals"]["CAL"]          # the dict `tlblab run --json` prints
    rows = tlblab.sweep("skip-sync-collapse",
                        over={"machine.cpus": [8, 64],
                              "mm.skip_redundant_table_sync": [False, True]})
    pandas.DataFrame(rows)                # one row per point, as sweep.csv

Errors are ``ValueError`` with the CLI's one-line message.
"""

import json

from . import _tlblab

__version__ = _tlblab.__version__
__all__ = ["run", "sweep", "sweep_documents", "sets_of", "over_of"]


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def sets_of(sets):
    """``{"machine.cpus": 64}`` -> ``["machine.cpus=64"]`` (the CLI's --set)."""
    return [f"{k}={_value(v)}" for k, v in sets.items()]


def over_of(over):
    """``{"machine.cpus": [8, 64]}`` -> ``["machine.cpus=8,64"]`` (--over)."""
    out = []
    for k, vs in over.items():
        if isinstance(vs, (str, bytes)) or not hasattr(vs, "__iter__"):
            vs = [vs]
        out.append(f"{k}=" + ",".join(_value(v) for v in vs))
    return out


def run(scenario=None, *, workload=None, profile=None, **sets):
    """Run a scenario (a bundled name or a file) or a workload from its own
    defaults, with ``dotted.key=value`` overrides; return the report dict of
    ``tlblab run --json``."""
    return json.loads(_tlblab.run_json(scenario, workload, sets_of(sets), profile))


def sweep_documents(scenario=None, *, over, workload=None, **sets):
    """The ``sweep.csv`` and ``sweep.json`` texts ``tlblab sweep`` writes."""
    return _tlblab.sweep_json(scenario, workload, sets_of(sets), over_of(over))


def sweep(scenario=None, *, over, workload=None, **sets):
    """Run every point of the grid ``over`` (key -> list of values); return
    one dict per point (the swept keys and the metrics), ready for
    ``pandas.DataFrame``."""
    _, doc = sweep_documents(scenario, over=over, workload=workload, **sets)
    rows = []
    for r in json.loads(doc)["rows"]:
        # The swept keys first, as in sweep.csv, typed as the scenario
        # reads them (8 -> 8, "false" -> False, "16MiB" stays a string).
        flat = {k: typed(v) for k, v in dict(r.pop("values")).items()}
        flat.update(r)
        rows.append(flat)
    return rows


def typed(text):
    """A swept value as Python would write it: bool, int, float, else the text."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
