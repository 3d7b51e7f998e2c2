//! `tlblab sweep`: the cross product of `--over` axes, whole, sharded or merged.

use super::{options, scenario_of, Common};
use machine::Error;

#[derive(clap::Args)]
pub struct Args {
    scenario: Option<String>,
    #[arg(long)]
    workload: Option<String>,
    /// An axis: "key=v1,v2,..." (repeatable; the first varies slowest).
    #[arg(
        long = "over",
        value_name = "KEY=V1,V2,...",
        required_unless_present = "merge"
    )]
    over: Vec<String>,
    /// Run only the points whose index is I modulo N (a Slurm array task:
    /// --shard $SLURM_ARRAY_TASK_ID/N); writes OUT/shard-I-of-N.json.
    #[arg(long, value_name = "I/N", conflicts_with = "merge")]
    shard: Option<String>,
    /// Merge the shard-*.json files of these directories into the
    /// sweep.csv and sweep.json the unsharded sweep writes.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with_all = ["over", "scenario", "workload"])]
    merge: Vec<String>,
    /// Directory for sweep.csv and sweep.json.
    #[arg(long, default_value = "target/tlblab-sweep")]
    out: String,
    /// Also draw a metric against the last axis, one line per value of
    /// the other axes, to this SVG.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<String>,
    /// The metric --plot draws (a sweep.csv column).
    #[arg(long, default_value = "us_per_op")]
    y: String,
    #[command(flatten)]
    common: Common,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        scenario,
        workload,
        over,
        shard,
        merge,
        out,
        plot,
        y,
        common,
    } = args;
    if plot.is_some() && !tlblab::sweep::METRICS.iter().any(|(n, _)| *n == y) {
        return Err(Error::Config(format!(
            "--y {y}: not a sweep metric ({})",
            tlblab::sweep::metric_names()
        )));
    }
    if !merge.is_empty() {
        let m = tlblab::sweep::merge(&merge)?;
        let name = m.scenario["name"].as_str().unwrap_or("sweep").to_string();
        return write_sweep(
            &out,
            &m.scenario,
            &m.axes,
            &m.rows,
            &name,
            plot,
            &y,
            common.json,
        );
    }
    let base = scenario_of(scenario.as_deref(), workload.as_deref(), &common)?;
    let axes: Vec<tlblab::sweep::Axis> = over
        .iter()
        .map(|o| tlblab::sweep::Axis::parse(o))
        .collect::<Result<_, _>>()?;
    let opts = options(&common)?;
    if let Some(spec) = shard {
        let sh = tlblab::sweep::Shard::parse(&spec)?;
        if plot.is_some() {
            return Err(Error::Config(
                "--plot needs the whole sweep: give it to sweep --merge".into(),
            ));
        }
        let rows = tlblab::sweep::sweep_shard(&base, &axes, &opts, !common.json, sh)?;
        let path = format!("{out}/{}", sh.file_name());
        std::fs::create_dir_all(&out).map_err(|e| Error::Write(format!("{out}: {e}")))?;
        std::fs::write(&path, tlblab::sweep::shard_doc(&base, &axes, sh, &rows))
            .map_err(|e| Error::Write(format!("{path}: {e}")))?;
        eprintln!(
            "wrote {path} ({} runs); merge with: tlblab sweep --merge {out}",
            rows.len()
        );
        return Ok(0);
    }
    let rows = tlblab::sweep::sweep(&base, &axes, &opts, !common.json)?;
    write_sweep(
        &out,
        &base.to_json(),
        &axes,
        &rows,
        &base.name,
        plot,
        &y,
        common.json,
    )
}

/// Write a whole sweep's sweep.csv and sweep.json (and --plot); print them.
#[allow(clippy::too_many_arguments)]
fn write_sweep(
    out: &str,
    scenario: &serde_json::Value,
    axes: &[tlblab::sweep::Axis],
    rows: &[tlblab::sweep::Row],
    name: &str,
    plot: Option<String>,
    y: &str,
    json: bool,
) -> Result<u8, Error> {
    let (csv, doc) = tlblab::sweep::outputs(scenario, axes, rows);
    std::fs::create_dir_all(out).map_err(|e| Error::Write(format!("{out}: {e}")))?;
    std::fs::write(format!("{out}/sweep.csv"), &csv)
        .map_err(|e| Error::Write(format!("{out}/sweep.csv: {e}")))?;
    std::fs::write(format!("{out}/sweep.json"), &doc)
        .map_err(|e| Error::Write(format!("{out}/sweep.json: {e}")))?;
    if json {
        println!("{doc}");
    } else {
        print!("{csv}");
        eprintln!("wrote {out}/sweep.csv and {out}/sweep.json");
    }
    if let Some(path) = plot {
        let svg = tlblab::plot::sweep_chart(name, axes, rows, y).map_err(Error::Config)?;
        std::fs::write(&path, svg).map_err(|e| Error::Write(format!("{path}: {e}")))?;
        eprintln!("wrote {path}");
    }
    Ok(0)
}
