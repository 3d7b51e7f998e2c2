//! Fuzzing every input surface: scenario TOML, `--set`, cost-profile files and
//! sweep axes. Each bad input must give an `Err` whose message is one line
//! (the CLI prints it after `tlblab: ` and exits 2), never a panic; inputs
//! that parse are carried through `validate`, the memory estimate and, when
//! small, building the world.
//!
//! CI runs 2,500 cases per surface (10,000 in all). A longer run:
//! `PROPTEST_CASES=100000 cargo test --release -p tlblab --test fuzz_inputs`.

use machine::{CostProfile, Scenario};

mod common;
use proptest::prelude::*;
use tlblab::sweep::Axis;

const SCENARIOS: &[&str] = &[
    include_str!("../../../scenarios/default.toml"),
    include_str!("../../../scenarios/skip-sync-collapse.toml"),
    include_str!("../../../scenarios/usemem-fork-exec.toml"),
    include_str!("../../../scenarios/mmapstress01.toml"),
    include_str!("../../../scenarios/rt-latency.toml"),
    include_str!("../../../scenarios/hugetlb-unshare.toml"),
];
const PROFILES: &[&str] = &[
    include_str!("../../machine/profiles/x86-icelake.toml"),
    include_str!("../../machine/profiles/arm64-neoverse-n2.toml"),
    include_str!("../../machine/profiles/riscv-sg2042.toml"),
];

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_500)
}

fn one_line(e: &machine::Error) {
    let m = e.to_string();
    assert!(
        !m.is_empty() && !m.chars().any(char::is_control),
        "not one clean line: {m:?}"
    );
}

/// A key from `tlblab list` (half the time) or a random path.
fn key() -> impl Strategy<Value = String> {
    let keys: Vec<String> = Scenario::switches()
        .iter()
        .map(|(k, _, _)| k.to_string())
        .collect();
    prop_oneof![
        proptest::sample::select(keys),
        "[a-z_.]{0,24}".prop_map(String::from),
    ]
}

/// A value for `key`: one of the values `tlblab list` documents for it
/// (`true | false`, `percpu | stack_aligned | ...`), or something hostile.
fn value_for(key: String) -> impl Strategy<Value = (String, String)> {
    let documented: Vec<String> = Scenario::switches()
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, vals, _)| vals.split('|').map(|v| v.trim().to_string()).collect())
        .unwrap_or_default();
    let k = key.clone();
    if documented.is_empty() {
        hostile().prop_map(move |v| (k.clone(), v)).boxed()
    } else {
        prop_oneof![
            proptest::sample::select(documented).prop_map(move |v| (key.clone(), v)),
            hostile().prop_map(move |v| (k.clone(), v)),
        ]
        .boxed()
    }
}

/// A valid text with one random edit: a cut, an insertion, or a value
/// replaced by something hostile.
fn mutate(text: &str, at: usize, len: usize, kind: u8, junk: &str) -> String {
    let mut b: Vec<char> = text.chars().collect();
    let at = at % (b.len() + 1);
    let end = (at + len).min(b.len());
    match kind % 4 {
        0 => {
            b.drain(at..end);
        }
        1 => b.splice(at..at, junk.chars()).for_each(drop),
        2 => b.splice(at..end, junk.chars()).for_each(drop),
        _ => {
            // Replace the value of the line holding `at`.
            let s: String = b.iter().collect();
            let mut out = String::new();
            let mut pos = 0;
            for line in s.split_inclusive('\n') {
                if (pos..pos + line.len()).contains(&at) && line.contains('=') {
                    let k = line.split('=').next().unwrap_or("");
                    out.push_str(&format!("{k}= {junk}\n"));
                } else {
                    out.push_str(line);
                }
                pos += line.len();
            }
            return out;
        }
    }
    b.into_iter().collect()
}

fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("18446744073709551615".to_string()),
        Just("9999999999999999999999".to_string()),
        Just("1e308".to_string()),
        Just("nan".to_string()),
        Just("\"1TiB\"".to_string()),
        Just("\"0KiB\"".to_string()),
        Just("\"\"".to_string()),
        Just("[]".to_string()),
        Just("{ }".to_string()),
        Just("true".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,8}",
    ]
}

/// Everything past parsing that a run does before simulating.
fn carry_through(s: &Scenario) {
    if let Err(e) = s.validate() {
        return one_line(&e);
    }
    match workloads::estimate_bytes(s) {
        Err(e) => one_line(&e),
        Ok(need) if need < 64 << 20 => {
            if let Err(e) = workloads::build(s) {
                return one_line(&e);
            }
            simulate_briefly(s);
        }
        Ok(_) => {}
    }
}

/// A scenario that built runs, for at most 1 ms of simulated time and a
/// few iterations: no panic, and a refusal (if any) is one clean line.
fn simulate_briefly(s: &Scenario) {
    let mut s = s.clone();
    s.machine.max_sim_time_ms = s.machine.max_sim_time_ms.min(1);
    s.workload.iterations = s.workload.iterations.min(4);
    if let Err(e) = tlblab::run_scenario(&s, &tlblab::RunOptions::default()) {
        one_line(&e);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn scenario_toml_never_panics(i in 0..SCENARIOS.len(), at in 0usize..4000, len in 0usize..40,
                                  kind in 0u8..4, junk in hostile()) {
        let text = mutate(SCENARIOS[i], at, len, kind, &junk);
        match Scenario::from_toml(&text, "fuzz.toml") {
            Ok(s) => carry_through(&s),
            Err(e) => one_line(&e),
        }
    }

    #[test]
    fn set_never_panics((key, val) in key().prop_flat_map(value_for), eq in any::<bool>()) {
        let kv = if eq { format!("{key}={val}") } else { format!("{key}{val}") };
        let mut s = Scenario::from_toml(SCENARIOS[0], "default").unwrap();
        match s.set(&kv) {
            Ok(()) => carry_through(&s),
            Err(e) => one_line(&e),
        }
    }

    #[test]
    fn cost_profile_never_panics(i in 0..PROFILES.len(), at in 0usize..8000, len in 0usize..40,
                                 kind in 0u8..4, junk in hostile()) {
        let text = mutate(PROFILES[i], at, len, kind, &junk);
        match CostProfile::from_toml(&text, "fuzz-profile.toml") {
            Ok(p) => {
                for c in machine::Cost::ALL {
                    let c = *c;
                    let ns = p.ns(c);
                    prop_assert!(ns.is_finite() && ns >= 0.0, "{}: {ns}", c.name());
                }
            }
            Err(e) => one_line(&e),
        }
    }

    #[test]
    fn sweep_axes_never_panic(
        (key, val) in key().prop_flat_map(value_for),
        more in proptest::collection::vec(hostile(), 0..3),
        raw in "[a-z_.=,0-9 ]{0,40}",
        real in any::<bool>(),
    ) {
        // A real key with documented and hostile values, or a random spec.
        let spec = if real { format!("{key}={}", [vec![val], more].concat().join(",")) } else { raw };
        match Axis::parse(&spec) {
            Ok(a) => {
                prop_assert!(!a.values.is_empty());
                let mut s = Scenario::from_toml(SCENARIOS[0], "default").unwrap();
                for v in &a.values {
                    if let Err(e) = s.set(&format!("{}={v}", a.key)) {
                        one_line(&e);
                    }
                }
            }
            Err(e) => one_line(&e),
        }
    }
}

/// Through the binary: a sample of bad inputs each exits 2 with one line on
/// stderr and no panic message.
#[test]
fn the_binary_answers_bad_input_in_one_line_with_exit_2() {
    let dir = common::scratch_dir("fuzz");
    let bad_toml = dir.join("bad.toml");
    std::fs::write(&bad_toml, "[machine]\ncpus = \"many\"\n").unwrap();
    let bad_profile = dir.join("bad-profile.toml");
    std::fs::write(
        &bad_profile,
        "name = \"x\"\n[costs]\nipi_delivery = { ns = -5, source = \"s\" }\n",
    )
    .unwrap();
    let runs: Vec<Vec<String>> = vec![
        vec!["run".into(), bad_toml.display().to_string()],
        vec!["run".into(), "--set".into(), "machine.cpus=0".into()],
        vec!["run".into(), "--set".into(), "machine.cpus".into()],
        vec!["run".into(), "--set".into(), "no.such.key=1".into()],
        vec!["run".into(), "--set".into(), "machine.memory=1EiB".into()],
        vec![
            "run".into(),
            "--profile".into(),
            bad_profile.display().to_string(),
        ],
        vec!["sweep".into(), "--over".into(), "machine.cpus".into()],
        vec!["sweep".into(), "--over".into(), "machine.cpus=2,x".into()],
    ];
    for args in runs {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tlblab"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
