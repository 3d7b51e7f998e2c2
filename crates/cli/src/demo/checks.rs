//! The exhaustive checker's catalogue (`tlblab check --all`) as a section.

use super::{yes, Section, Table, Unsafe};
use machine::Error;
use std::fmt::Write;

/// The exhaustive checker's catalogue as a table, and whether every verdict
/// was the expected one.
pub fn checks() -> Result<(Section, bool), Error> {
    let mut sec = Section::new(
        "checks",
        false,
        "tlblab check --all: every interleaving of small configurations",
    );
    let mut table = Table {
        caption: "the checker's catalogue: expected and found verdicts".into(),
        head: ["check", "expected", "verdict", "states"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    let mut out = String::from("\n== tlblab check --all ==\n");
    let _ = writeln!(
        out,
        "{:<32} {:>8} {:>8} {:>8}",
        "check", "expected", "verdict", "states"
    );
    let mut ok = true;
    use rayon::prelude::*;
    let outcomes: Vec<Result<check::Outcome, Error>> = check::configs::CATALOGUE
        .par_iter()
        .map(|c| check::configs::run(c, &[], check::Bounds::default(), true))
        .collect();
    for (c, o) in check::configs::CATALOGUE.iter().zip(outcomes) {
        let o = o?;
        let want = if c.expect_safe { "safe" } else { "unsafe" };
        ok &= o.verdict == want;
        let _ = writeln!(
            out,
            "{:<32} {:>8} {:>8} {:>8}",
            c.name, want, o.verdict, o.states
        );
        table.rows.push(vec![
            c.name.to_string(),
            want.to_string(),
            o.verdict.to_string(),
            o.states.to_string(),
        ]);
        if o.verdict == "unsafe" {
            sec.unsafe_variants.push(Unsafe {
                variant: format!("{} ({})", c.name, c.about),
                verdict: format!("unsafe: a counterexample of {} steps", o.depth),
                steps: o.counterexample.clone(),
            });
        }
    }
    let _ = writeln!(out, "every verdict as expected: {}", yes(ok));
    sec.tables.push(table);
    sec.text = out;
    Ok((sec, ok))
}
