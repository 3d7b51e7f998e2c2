//! `tlblab demo`: every seed's experiment, the checks and the figures, as a report.

use machine::Error;
use tlblab::RunOptions;

#[derive(clap::Args)]
pub struct Args {
    /// Iterations of the madvise experiment (others scale from it).
    #[arg(long, default_value_t = 20000)]
    iterations: u64,
    /// Directory for index.html.
    #[arg(long, default_value = "target/tlblab-report")]
    out: String,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args { iterations, out } = args;
    if iterations == 0 || iterations > 10_000_000 {
        return Err(Error::Range(format!(
            "--iterations {iterations} (allowed 1..=10000000)"
        )));
    }
    let opts = RunOptions {
        progress: false,
        ..RunOptions::default()
    };
    let bar =
        indicatif::ProgressBar::with_draw_target(Some(2), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {msg}")
            .expect("template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message("seed experiments and check --all");
    // The seed runs and the exhaustive checks are independent.
    let (sections, checks) = rayon::join(
        || tlblab::demo::demo(&opts, iterations),
        tlblab::demo::checks,
    );
    let mut sections = sections?;
    sections.push(checks?.0);
    bar.inc(1);
    bar.set_message("figure sweeps");
    let figs = tlblab::demo::figures(&opts)?;
    bar.finish_and_clear();
    print!("{}", tlblab::demo::text(&sections, iterations));
    let meta = tlblab::demo::Meta::current(iterations);
    let path = tlblab::demo::write_report(&out, &meta, &sections, &figs)?;
    println!("\nreport: {path}");
    Ok(0)
}
