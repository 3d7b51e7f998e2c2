//! `tlblab run`: simulate one scenario and print its report.

use super::{options, scenario_of, Common};
use machine::Error;
use tlblab::run_scenario;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file or bundled scenario name.
    scenario: Option<String>,
    /// Also write the run in the Chrome trace-event format (Perfetto,
    /// chrome://tracing): a track per CPU, kernel paths, IPI flows, flushes.
    #[arg(long, value_name = "FILE.json")]
    trace_out: Option<String>,
    /// At most this many trace events (--trace-out); a longer run is cut
    /// there, with a note on stderr.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    trace_max_events: usize,
    /// Run this workload with its defaults (its bundled scenario, see `tlblab list`); with a scenario, run it there instead.
    #[arg(long)]
    workload: Option<String>,
    #[command(flatten)]
    common: Common,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        scenario,
        trace_out,
        trace_max_events,
        workload,
        common,
    } = args;
    let s = scenario_of(scenario.as_deref(), workload.as_deref(), &common)?;
    let mut opts = options(&common)?;
    if !(1000..=50_000_000).contains(&trace_max_events) {
        return Err(Error::Range(format!(
            "--trace-max-events {trace_max_events} (allowed 1000..=50000000)"
        )));
    }
    opts.trace_out = trace_out.map(|p| (p, trace_max_events));
    let (r, wall) = run_scenario(&s, &opts)?;
    let unsafe_run = !r.violations.is_empty();
    if common.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("report serialises")
        );
    } else {
        print!("{}", r.text());
        eprintln!(
            "  wall {:.3} s, {:.2} M events/s",
            wall.seconds,
            wall.events_per_sec() / 1e6
        );
    }
    Ok(u8::from(unsafe_run))
}
