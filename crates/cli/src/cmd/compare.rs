//! `tlblab compare`: a scenario and variants of it side by side.

use super::{options, scenario_of, Common};
use machine::Error;
use tlblab::{apply_variant, compare_table, run_scenario};

#[derive(clap::Args)]
pub struct Args {
    scenario: Option<String>,
    #[arg(long)]
    workload: Option<String>,
    /// A variant: "key=value[,key=value...]" (repeatable).
    #[arg(long = "vs", value_name = "KEY=VALUE,...", required = true)]
    vs: Vec<String>,
    /// Also draw the main op's latency CDF of every variant to this SVG.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<String>,
    #[command(flatten)]
    common: Common,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        scenario,
        workload,
        vs,
        plot,
        common,
    } = args;
    let base = scenario_of(scenario.as_deref(), workload.as_deref(), &common)?;
    let opts = options(&common)?;
    let mut labels = vec!["as given".to_string()];
    let mut scenarios = vec![base.clone()];
    for v in &vs {
        scenarios.push(apply_variant(&base, v)?);
        labels.push(v.clone());
    }
    let mut reports = Vec::new();
    for s in &scenarios {
        reports.push(run_scenario(s, &opts)?.0);
    }
    let unsafe_run = reports.iter().any(|r| !r.violations.is_empty());
    if common.json {
        let runs: Vec<_> = labels
            .iter()
            .zip(&reports)
            .map(|(l, r)| serde_json::json!({"label": l, "report": r}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"runs": runs})).expect("json")
        );
    } else {
        println!(
            "scenario {} ({} CPUs, workload {})",
            base.name, base.machine.cpus, base.workload.name
        );
        print!("{}", compare_table(&labels, &reports));
    }
    if let Some(path) = plot {
        let svg =
            tlblab::plot::latency_cdf(&base.name, &labels, &reports).map_err(Error::Config)?;
        std::fs::write(&path, svg).map_err(|e| Error::Write(format!("{path}: {e}")))?;
        eprintln!("wrote {path}");
    }
    Ok(u8::from(unsafe_run))
}
