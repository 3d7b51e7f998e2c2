//! `tlblab calibrate`: fit the cost profile to this host.

use machine::Error;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = "target/tlblab-calibrated.toml")]
    out: String,
    #[arg(long, default_value_t = 100_000)]
    iterations: u64,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args { out, iterations } = args;
    let c = tlblab::calibrate::calibrate(iterations)?;
    if let Some(dir) = std::path::Path::new(&out)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Write(format!("{}: {e}", dir.display())))?;
    }
    std::fs::write(&out, c.profile.to_toml()).map_err(|e| Error::Write(format!("{out}: {e}")))?;
    println!(
        "{:<30} {:>10} {:>14} {:>16} {:>8}",
        "metric", "host", "model default", "model calibrated", "ratio"
    );
    for r in &c.rows {
        println!(
            "{:<30} {:>10.4} {:>14.4} {:>16.4} {:>8.3}",
            r.metric,
            r.host,
            r.before,
            r.after,
            r.after / r.host.max(1e-12)
        );
    }
    println!("wrote {out}; use it with: tlblab run --profile {out}");
    Ok(0)
}
