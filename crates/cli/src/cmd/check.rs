//! `tlblab check`: every interleaving of a catalogue configuration.

use machine::Error;

#[derive(clap::Args)]
pub struct Args {
    /// A check from the catalogue (`tlblab check --all` lists them).
    name: Option<String>,
    /// Run the whole catalogue and print a verdict table.
    #[arg(long)]
    all: bool,
    /// Override a setting of the check's scenario (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Explore interleavings of at most this many steps; a longer one
    /// makes the verdict "bounded".
    #[arg(long, default_value_t = 400)]
    max_depth: usize,
    /// Stop after this many distinct states (the verdict is then
    /// "bounded" unless a violation was found first) [default: 2000000].
    /// A check measured larger than the default is refused, with its
    /// size, unless this or --max-seconds is given.
    #[arg(long)]
    max_states: Option<usize>,
    /// Stop after this many seconds of search (the verdict is then
    /// "bounded", with the states reached and those still to expand):
    /// for a check whose size is unknown, instead of running blindly.
    /// The only bound that depends on the machine's speed.
    #[arg(long, value_name = "SECONDS")]
    max_seconds: Option<f64>,
    /// Symmetry reduction over the check's interchangeable CPUs (where
    /// it declares some): `off` explores every renamed copy, to compare.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    symmetry: String,
    /// Partial-order reduction: `sleep` (sleep sets over the steps'
    /// recorded footprints: the same states by fewer transitions), `dpor`
    /// or `on` (stateful dynamic partial-order reduction: fewer states
    /// where steps of different CPUs commute; depth-first), `off` (the
    /// default: breadth-first, every interleaving). Verdicts do not
    /// depend on it.
    #[arg(long, default_value = "off", value_parser = ["on", "off", "sleep", "dpor"])]
    reduction: String,
    /// Memory model: `arch` (x86-TSO on x86, the weak model on arm64
    /// and RISC-V), or `sc` / `tso` / `weak` to compare.
    #[arg(long, default_value = "arch", value_parser = ["arch", "sc", "tso", "weak"])]
    memory_model: String,
    #[arg(long)]
    json: bool,
    /// Worker threads of the exploration (0: one per core). Verdicts,
    /// counts and counterexamples do not depend on it.
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

pub fn main(args: Args) -> Result<u8, Error> {
    let Args {
        name,
        all,
        set,
        max_depth,
        max_states,
        max_seconds,
        symmetry,
        reduction,
        memory_model,
        json,
        threads,
    } = args;
    // Bounded by the user: a check measured larger than the default
    // bound runs into theirs; else it is refused with its size.
    let user_bound = max_states.is_some() || max_seconds.is_some();
    let max_states = max_states.unwrap_or(check::Bounds::default().max_states);
    // A bound of 0 would explore nothing and call it a verdict.
    if max_depth == 0 || max_states == 0 {
        return Err(Error::Range(format!(
            "--max-depth {max_depth}, --max-states {max_states} (each at least 1)"
        )));
    }
    if let Some(s) = max_seconds.filter(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(Error::Range(format!(
            "--max-seconds {s} (a number of seconds above 0)"
        )));
    }
    super::set_checker_threads(threads)?;
    let model =
        kernel::hw::memory_model::MemoryModel::parse(&memory_model).map_err(Error::Config)?;
    let bounds = check::Bounds {
        max_depth,
        max_states,
        reduction: check::Reduction::parse(&reduction).map_err(Error::Config)?,
        max_seconds,
    };
    let symmetry = symmetry == "on";
    if all {
        return check_all(&set, bounds, symmetry, model, json);
    }
    let name = name.ok_or_else(|| Error::Config("tlblab check needs a NAME or --all".into()))?;
    let c = check::configs::find(&name)?;
    refuse_unbounded(&name, max_states, user_bound)?;
    let o = check::configs::run_with(c, &set, bounds, symmetry, model)?;
    let sym = match (o.symmetry.is_empty(), c.sym.is_empty()) {
        (false, _) => format!(" (symmetry: {})", check::groups_text(&o.symmetry)),
        (true, false) => " (symmetry off)".to_string(),
        (true, true) => String::new(),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"check": name, "outcome": o}))
                .expect("json")
        );
    } else if o.verdict == "unsafe" {
        println!(
            "unsafe: {} states, {} transitions, counterexample of {} steps, {:.2} s{sym}",
            o.states, o.transitions, o.depth, o.seconds
        );
        for l in &o.counterexample {
            println!("  {l}");
        }
    } else {
        let left = format!(", {} reached but not yet expanded", o.frontier);
        let verdict = match o.bound {
            Some("max_states") => format!("bounded (--max-states {max_states} reached{left})"),
            Some("max_seconds") => format!(
                "bounded (--max-seconds {} reached{left})",
                max_seconds.unwrap_or_default()
            ),
            Some(_) => format!("bounded (--max-depth {max_depth} reached{left})"),
            None => o.verdict.to_string(),
        };
        println!(
            "{}: {} states, {} transitions, depth {}, {:.2} s, {:.0} states/s{sym}",
            verdict,
            o.states,
            o.transitions,
            o.depth,
            o.seconds,
            o.states as f64 / o.seconds.max(1e-9)
        );
    }
    Ok(u8::from(o.verdict == "unsafe"))
}

/// A check measured above the default state bound, run without a bound
/// of the user's, is refused with its size ([`check::configs::sizes`])
/// instead of running for minutes into the default bound.
fn refuse_unbounded(name: &str, max_states: usize, user_bound: bool) -> Result<(), Error> {
    match check::configs::sizes::size(name) {
        Some(s) if !user_bound && s.states > max_states as u64 => Err(Error::TooBig(format!(
            "check {name}: {}, above the default --max-states {max_states}: give --max-states N \
             (above its size to run it in full) or --max-seconds S to run it bounded",
            s.describe()
        ))),
        _ => Ok(()),
    }
}

fn check_all(
    set: &[String],
    bounds: check::Bounds,
    symmetry: bool,
    model: Option<kernel::hw::memory_model::MemoryModel>,
    json: bool,
) -> Result<u8, Error> {
    let mut rows = Vec::new();
    let mut ok = true;
    for c in check::configs::CATALOGUE {
        let o = check::configs::run_with(c, set, bounds, symmetry, model)?;
        let expected = if c.expect_safe { "safe" } else { "unsafe" };
        let pass = o.verdict == expected;
        ok &= pass;
        rows.push((c, expected, pass, o));
    }
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(c, e, p, o)| serde_json::json!({"check": c.name, "expected": e, "pass": p, "outcome": o}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        println!(
            "{:<32} {:>8} {:>8} {:>9} {:>11} {:>6} {:>8} {:>12} {:>9}  ",
            "check",
            "expected",
            "verdict",
            "states",
            "transitions",
            "depth",
            "seconds",
            "states/s",
            "symmetry"
        );
        for (c, e, p, o) in &rows {
            let sym = if o.symmetry.is_empty() {
                "-".to_string()
            } else {
                check::groups_text(&o.symmetry)
            };
            println!(
                "{:<32} {:>8} {:>8} {:>9} {:>11} {:>6} {:>8.2} {:>12.0} {:>9}  {}",
                c.name,
                e,
                o.verdict,
                o.states,
                o.transitions,
                o.depth,
                o.seconds,
                o.states as f64 / o.seconds.max(1e-9),
                sym,
                if *p { "ok" } else { "UNEXPECTED" }
            );
        }
        for (c, _, _, o) in rows.iter().filter(|r| r.3.verdict == "unsafe") {
            println!("\n{} ({}): counterexample", c.name, c.about);
            for l in &o.counterexample {
                println!("  {l}");
            }
        }
    }
    Ok(u8::from(!ok))
}
