//! The native half of the `tlblab` Python package (`tlblab._tlblab`).
//!
//! Each function takes the CLI's own inputs (a scenario name or path, a
//! workload, `dotted.key=value` overrides, sweep axes) and returns the JSON
//! text the CLI prints, so `tlblab.run(...)` is exactly `tlblab run --json`
//! and a sweep gathered from shards is exactly `tlblab sweep`'s output. The
//! Python side (`python/tlblab/__init__.py`) turns the text into dicts.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tlblab::sweep::{self, Axis, Shard};
use tlblab::RunOptions;

/// A tlblab error as a Python `ValueError` with the CLI's one-line message.
fn err(e: machine::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn axes(over: &[String]) -> PyResult<Vec<Axis>> {
    over.iter().map(|o| Axis::parse(o).map_err(err)).collect()
}

/// `tlblab run [SCENARIO] [--workload W] [--set K=V]... [--profile P] --json`.
#[pyfunction]
#[pyo3(signature = (scenario, workload, sets, profile=None))]
fn run_json(
    py: Python<'_>,
    scenario: Option<String>,
    workload: Option<String>,
    sets: Vec<String>,
    profile: Option<String>,
) -> PyResult<String> {
    py.detach(|| {
        let s = tlblab::resolve_scenario(scenario.as_deref(), workload.as_deref(), &sets)?;
        let opts = RunOptions {
            profile,
            ..RunOptions::default()
        };
        let (r, _) = tlblab::run_scenario(&s, &opts)?;
        Ok(serde_json::to_string_pretty(&r).expect("report serialises"))
    })
    .map_err(err)
}

/// `tlblab sweep ... --over K=V1,V2 ...`: the `sweep.json` document (its
/// `rows` are the CSV's rows).
#[pyfunction]
fn sweep_json(
    py: Python<'_>,
    scenario: Option<String>,
    workload: Option<String>,
    sets: Vec<String>,
    over: Vec<String>,
) -> PyResult<(String, String)> {
    let axes = axes(&over)?;
    py.detach(|| {
        let base = tlblab::resolve_scenario(scenario.as_deref(), workload.as_deref(), &sets)?;
        let rows = sweep::sweep(&base, &axes, &RunOptions::default(), false)?;
        Ok(sweep::outputs(&base.to_json(), &axes, &rows))
    })
    .map_err(err)
}

/// `tlblab sweep ... --shard INDEX/COUNT`: the shard file's name and text.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn sweep_shard_json(
    py: Python<'_>,
    scenario: Option<String>,
    workload: Option<String>,
    sets: Vec<String>,
    over: Vec<String>,
    index: usize,
    count: usize,
) -> PyResult<(String, String)> {
    let axes = axes(&over)?;
    let shard = Shard::parse(&format!("{index}/{count}")).map_err(err)?;
    py.detach(|| {
        let base = tlblab::resolve_scenario(scenario.as_deref(), workload.as_deref(), &sets)?;
        let rows = sweep::sweep_shard(&base, &axes, &RunOptions::default(), false, shard)?;
        Ok((
            shard.file_name(),
            sweep::shard_doc(&base, &axes, shard, &rows),
        ))
    })
    .map_err(err)
}

/// The number of points of a sweep over `over` (for one task per point).
#[pyfunction]
fn sweep_points(over: Vec<String>) -> PyResult<usize> {
    Ok(sweep::combinations(&axes(&over)?).len())
}

/// `tlblab sweep --merge DIR...`: the merged `sweep.csv` and `sweep.json`.
#[pyfunction]
fn merge_shards(dirs: Vec<String>) -> PyResult<(String, String)> {
    let m = sweep::merge(&dirs).map_err(err)?;
    Ok(sweep::outputs(&m.scenario, &m.axes, &m.rows))
}

#[pymodule]
fn _tlblab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_json, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_shard_json, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_points, m)?)?;
    m.add_function(wrap_pyfunction!(merge_shards, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
