//! The litmus runner's partial-order reduction (`litmus::run::run_with`:
//! where one thread's next instruction commutes with everything the other
//! threads may still do, only that thread's step is explored) keeps every
//! final state: on every test of the aarch64 and RISC-V catalogues and the
//! x86 shapes, and on
//! random RISC-V programs (stores, loads, barriers, and accesses whose
//! address depends on a load), the reduced and the full search give the
//! same set of final states (registers, memory, faults), and the reduced
//! one explores no more states.

use litmus::ast::{Parsed, Test};
use litmus::parse::parse;
use litmus::run::final_states;
use proptest::prelude::*;
use std::path::Path;

const CATALOGUES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/litmus");

fn test(text: &str) -> Test {
    match parse(text) {
        Ok(Parsed::Test(t)) => t,
        other => panic!("expected a test, got {other:?}\n{text}"),
    }
}

/// Same final states both ways; returns (states reduced, states full).
fn compare(t: &Test) -> Result<(usize, usize), String> {
    let ((reduced, r), (full, a)) = (final_states(t, true)?, final_states(t, false)?);
    if reduced != full {
        return Err(format!(
            "{}: {} final states reduced, {} full",
            t.name,
            reduced.len(),
            full.len()
        ));
    }
    Ok((r, a))
}

#[test]
fn the_reduction_keeps_every_final_state_of_the_catalogues() {
    let (mut reduced, mut full, mut tests) = (0, 0, 0);
    let x86 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x86");
    let dirs = [
        Path::new(CATALOGUES).join("aarch64"),
        Path::new(CATALOGUES).join("riscv"),
        x86,
    ];
    let mut shared = true;
    for dir in dirs {
        if !dir.exists() {
            // As conformance.rs: a checkout without ../shared next to it.
            eprintln!("SKIPPED: {} is absent (../shared/litmus)", dir.display());
            shared = false;
            continue;
        }
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("a directory that exists reads")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "litmus"))
            .collect();
        files.sort();
        for f in files {
            let Ok(Parsed::Test(t)) = parse(&std::fs::read_to_string(&f).unwrap()) else {
                continue;
            };
            let (r, a) = compare(&t).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert!(r <= a, "{}: {r} states reduced, {a} full", f.display());
            (reduced, full, tests) = (reduced + r, full + a, tests + 1);
        }
    }
    // The shared catalogues hold 448 runnable tests; the bundled x86 shapes 9.
    assert!(
        tests >= if shared { 400 } else { 9 },
        "only {tests} tests ran"
    );
    // Where a thread's barrier, register operation or last loads commute
    // with the rest, the reduced search skips interleavings (aarch64:
    // 10,490 -> 7,409 states, RISC-V 524,648 -> 444,237 when written; the
    // x86 shapes alone: SB+mfences 49 -> 47, SB+xchgs 60 -> 46).
    assert!(reduced < full, "{reduced} states reduced, {full} full");
}

/// One instruction of a random RISC-V thread. Locations x (`x6`) and y
/// (`x7`); stored values 1 (`x5`) and 2 (`x11`); loads go to registers of
/// their own (`x12` on), so the final registers record what each read.
#[derive(Clone, Copy, Debug)]
enum Op {
    Store {
        y: bool,
        two: bool,
    },
    Load {
        y: bool,
    },
    Fence(u8),
    /// `xor x20,<last load>,<last load>; add x21,<x or y>,x20`: an address
    /// that depends on the last load (0 added), for the next access.
    Dep {
        y: bool,
    },
    /// A store or load through `x21` (the last `Dep`'s address, else x,
    /// its initial value: a `Dep` later in the thread then changes where
    /// a later access goes, which the reduction must not take as known).
    StoreDep,
    LoadDep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), any::<bool>()).prop_map(|(y, two)| Op::Store { y, two }),
        3 => any::<bool>().prop_map(|y| Op::Load { y }),
        1 => (0..4u8).prop_map(Op::Fence),
        2 => any::<bool>().prop_map(|y| Op::Dep { y }),
        2 => Just(Op::StoreDep),
        1 => Just(Op::LoadDep),
    ]
}

/// The litmus text of threads `ops`.
fn program(ops: &[Vec<Op>]) -> String {
    let mut cols: Vec<Vec<String>> = Vec::new();
    for th in ops {
        let (mut col, mut next) = (Vec::new(), 12);
        for o in th {
            let loc = |y: bool| if y { "x7" } else { "x6" };
            match *o {
                Op::Store { y, two } => col.push(format!(
                    "sw {},0({})",
                    if two { "x11" } else { "x5" },
                    loc(y)
                )),
                Op::Load { y } => {
                    col.push(format!("lw x{next},0({})", loc(y)));
                    next += 1;
                }
                Op::Fence(f) => {
                    let f = ["rw,rw", "r,rw", "rw,w", "w,w"][f as usize];
                    col.push(format!("fence {f}"));
                }
                Op::Dep { y } => {
                    let last = if next > 12 { next - 1 } else { 0 };
                    col.push(format!("xor x20,x{last},x{last}"));
                    col.push(format!("add x21,{},x20", loc(y)));
                }
                Op::StoreDep => col.push("sw x5,0(x21)".to_string()),
                Op::LoadDep => {
                    col.push(format!("lw x{next},0(x21)"));
                    next += 1;
                }
            }
        }
        cols.push(col);
    }
    let init: Vec<String> = (0..ops.len())
        .map(|t| format!("{t}:x5=1; {t}:x11=2; {t}:x6=x; {t}:x7=y; {t}:x21=x;"))
        .collect();
    let rows = cols.iter().map(Vec::len).max().unwrap_or(0);
    let header: Vec<String> = (0..ops.len()).map(|t| format!(" P{t}")).collect();
    let mut text = format!(
        "RISCV random\n{{\n{}\n}}\n{} ;\n",
        init.join("\n"),
        header.join(" |")
    );
    for r in 0..rows {
        let cells: Vec<String> = cols
            .iter()
            .map(|c| format!(" {}", c.get(r).map_or("", String::as_str)))
            .collect();
        text.push_str(&format!("{} ;\n", cells.join(" |")));
    }
    text.push_str("exists (x=1 /\\ y=1)\n");
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_reduction_keeps_every_final_state_of_random_programs(
        ops in prop::collection::vec(prop::collection::vec(op(), 1..4), 2..4)
    ) {
        let text = program(&ops);
        let t = test(&text);
        let (r, a) = compare(&t).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(r <= a, "{} states reduced, {} full\n{}", r, a, text);
    }
}
