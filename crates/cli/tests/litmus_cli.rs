//! `tlblab litmus`: verdicts against a kinds file, the JSON contract, and
//! the exit codes (0 all agree, 1 a disagreement, 2 a malformed file).
mod common;
use common::tlblab;

fn x86_dir() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../litmus/tests/x86").to_string()
}

#[test]
fn bundled_x86_shapes_agree_and_exit_0() {
    let (code, out, err) = tlblab(&["litmus", &x86_dir()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("SB+mfences"), "{out}");
    assert_eq!(out.matches(" ok (").count(), 9, "{out}");
    assert!(
        out.contains("x86                   9    9 (100%)       9         0"),
        "{out}"
    );
}

#[test]
fn json_is_a_list_of_rows_with_the_contract_keys() {
    let (code, out, _) = tlblab(&["litmus", "--json", &x86_dir()]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    let rows = v.as_array().expect("a list");
    assert_eq!(rows.len(), 9);
    for r in rows {
        let o = r.as_object().expect("an object");
        let mut keys: Vec<&str> = o.keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "agrees",
                "arch",
                "expected",
                "name",
                "unsupported",
                "verdict"
            ]
        );
        assert_eq!(o["arch"], "X86");
        assert_eq!(o["agrees"], true);
        assert!(o["unsupported"].is_null());
    }
    let sb = rows.iter().find(|r| r["name"] == "SB").expect("SB");
    assert_eq!(sb["verdict"], "Allowed");
}

/// A wrong reference verdict is a disagreement: exit 1, marked in the row.
#[test]
fn a_disagreement_exits_1() {
    let dir = common::scratch_dir("litmus-disagree");
    let kinds = dir.join("kinds.txt");
    std::fs::write(&kinds, "SB Forbidden\nMP Forbidden\n").unwrap();
    let sb = format!("{}/SB.litmus", x86_dir());
    let mp = format!("{}/MP.litmus", x86_dir());
    let (code, out, _) = tlblab(&["litmus", "--kinds", kinds.to_str().unwrap(), &sb, &mp]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DISAGREES"), "{out}");
    assert_eq!(out.matches("DISAGREES").count(), 1, "only SB: {out}");
}

/// Malformed input: one line naming the file (and the line), exit 2.
#[test]
fn malformed_files_exit_2_with_one_line() {
    let dir = common::scratch_dir("litmus-bad");
    let bad = dir.join("bad.litmus");
    std::fs::write(
        &bad,
        "AArch64 bad\n{ 0:X1=x; }\n P0 | P1 ;\n LDR W0,[X1] ;\nexists (0:X0=1)\n",
    )
    .unwrap();
    let kinds = dir.join("kinds-bad.txt");
    std::fs::write(&kinds, "SB Sometimes\n").unwrap();
    let sb = format!("{}/SB.litmus", x86_dir());
    for args in [
        vec!["litmus", bad.to_str().unwrap()],
        vec!["litmus", "--kinds", kinds.to_str().unwrap(), &sb],
        vec!["litmus", "/no/such/test.litmus"],
        vec!["litmus", dir.join("kinds-bad.txt").to_str().unwrap()],
    ] {
        let (code, out, err) = tlblab(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("tlblab: "), "{err}");
    }
    let (_, _, err) = tlblab(&["litmus", bad.to_str().unwrap()]);
    assert!(err.contains("bad.litmus:"), "names the file: {err}");
}

/// `--reduction off` explores every interleaving: the same verdicts, and
/// per test at least the states of the reduced search (SB+mfences: each
/// thread's `MFENCE` touches only its own thread, so the reduced search
/// takes it alone and skips interleavings).
#[test]
fn reduction_off_gives_the_same_verdicts_from_more_states() {
    let rows = |r: &str| {
        let (code, out, err) = tlblab(&["litmus", "--reduction", r, &x86_dir()]);
        assert_eq!(code, 0, "{out}{err}");
        let rows: Vec<(String, String, usize)> = out
            .lines()
            .filter(|l| l.ends_with(" states)"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let states = f[f.len() - 2].trim_start_matches('(').parse().unwrap();
                (f[0].to_string(), f[2].to_string(), states)
            })
            .collect();
        assert_eq!(rows.len(), 9, "{out}");
        rows
    };
    let (on, off) = (rows("on"), rows("off"));
    for (a, b) in on.iter().zip(&off) {
        assert_eq!((&a.0, &a.1), (&b.0, &b.1), "same test, same verdict");
        assert!(a.2 <= b.2, "{}: {} states reduced, {} full", a.0, a.2, b.2);
    }
    let states = |rows: &[(String, String, usize)], name: &str| {
        rows.iter().find(|r| r.0 == name).expect(name).2
    };
    assert!(states(&on, "SB+mfences") < states(&off, "SB+mfences"));
}
