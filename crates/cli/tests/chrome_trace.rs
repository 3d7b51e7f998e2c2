//! `tlblab run --trace-out`: the file loads back as Chrome trace-event JSON,
//! slices nest on every CPU track and every IPI flow starts and finishes.
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

mod common;

/// Run the binary: exit code and stderr.
fn tlblab(args: &[&str]) -> (i32, String) {
    let (code, _, err) = common::tlblab(args);
    (code, err)
}

/// Run with `--trace-out` into a fresh file and load it back.
fn traced(tag: &str, args: &[&str]) -> (Value, String, String) {
    let dir = common::scratch_dir(&format!("trace-{tag}"));
    let path = dir.join("trace.json");
    let p = path.to_str().unwrap();
    let mut all = vec!["run", "--json", "--trace-out", p];
    all.extend_from_slice(args);
    let (code, err) = tlblab(&all);
    // Exit 1: the run recorded violations (still traced); 0: safe.
    assert!(
        code == 0 || (code == 1 && tag == "violation"),
        "{code}: {err}"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    (serde_json::from_str(&text).expect("valid JSON"), text, err)
}

fn events(doc: &Value) -> &Vec<Value> {
    doc["traceEvents"].as_array().expect("traceEvents")
}

/// Nanoseconds from a microsecond timestamp.
fn ns(v: &Value) -> i64 {
    (v.as_f64().expect("a number") * 1000.0).round() as i64
}

fn track(e: &Value) -> (u64, u64) {
    (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())
}

/// Complete slices of each track, as (start, end) in ns, sorted.
fn slices(doc: &Value) -> BTreeMap<(u64, u64), Vec<(i64, i64)>> {
    let mut m: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for e in events(doc).iter().filter(|e| e["ph"] == "X") {
        let (ts, dur) = (ns(&e["ts"]), ns(&e["dur"]));
        assert!(dur >= 0);
        m.entry(track(e)).or_default().push((ts, ts + dur));
    }
    for v in m.values_mut() {
        v.sort_by_key(|&(s, e)| (s, -e));
    }
    m
}

/// Slices on one track either nest or follow each other, never overlap in part.
fn assert_nested(doc: &Value) {
    for (t, v) in slices(doc) {
        let mut open: Vec<(i64, i64)> = Vec::new();
        for (s, e) in v {
            while open.last().is_some_and(|&(_, oe)| oe <= s) {
                open.pop();
            }
            if let Some(&(os, oe)) = open.last() {
                assert!(
                    e <= oe,
                    "track {t:?}: [{s}, {e}) overlaps [{os}, {oe}) in part"
                );
            }
            open.push((s, e));
        }
    }
}

fn inside_a_slice(sl: &BTreeMap<(u64, u64), Vec<(i64, i64)>>, e: &Value) -> bool {
    let ts = ns(&e["ts"]);
    sl.get(&track(e)).is_some_and(|v| {
        // The last slice starting at or before ts (sorted by start) holds it
        // if any does: slices on a CPU track follow each other.
        let i = v.partition_point(|&(s, _)| s <= ts);
        v[..i]
            .iter()
            .rev()
            .take(2)
            .any(|&(s, end)| s <= ts && ts <= end)
    })
}

/// Every flow start has exactly one finish with its id, both bound to a slice.
fn assert_flows_connect(doc: &Value) -> usize {
    let ids = |ph: &str| -> Vec<u64> {
        events(doc)
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| e["id"].as_u64().expect("flow id"))
            .collect()
    };
    let (starts, finishes) = (ids("s"), ids("f"));
    let (s, f): (BTreeSet<u64>, BTreeSet<u64>) = (
        starts.iter().copied().collect(),
        finishes.iter().copied().collect(),
    );
    assert_eq!(s.len(), starts.len(), "duplicate flow starts");
    assert_eq!(f.len(), finishes.len(), "duplicate flow finishes");
    assert_eq!(s, f, "a flow start without a finish or the reverse");
    let sl = slices(doc);
    for e in events(doc)
        .iter()
        .filter(|e| e["ph"] == "s" || e["ph"] == "f")
    {
        assert!(inside_a_slice(&sl, e), "flow event outside any slice: {e}");
    }
    starts.len()
}

#[test]
fn madvise_trace_has_cpu_tracks_kernel_slices_ipi_flows_and_flushes() {
    let args = [
        "default",
        "--set",
        "workload.iterations=200",
        "--set",
        "machine.cpus=4",
    ];
    let (doc, text, _) = traced("madvise", &args);
    let ev = events(&doc);
    let names: BTreeSet<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["CPU 0", "CPU 1", "CPU 2", "CPU 3"].into());
    assert_nested(&doc);
    // The counts the modelled path must produce for n = 200 calls with
    // k = 3 busy threads (workloads::madvise_dontneed: the initiator on
    // CPU 0, a spinner of the same mm on each of CPUs 1-3, none lazy).
    let (n, k) = (200, 3);
    // Flows: `flush_tlb_mm_range` -> `native_flush_tlb_multi` ->
    // `smp_call_function_many_cond` (kernel_smp.rs) queues a csd to each of
    // the k CPUs `should_flush_tlb` keeps and IPIs every one whose
    // `call_single_queue` was empty. The single initiator blocks in
    // `csd_lock_wait` until every target ran its csd, so no queue is ever
    // non-empty at the next call: nothing coalesces, k IPIs per call. Every
    // flow finishes: the last call returns only after its targets took the
    // interrupt (`sysvec_call_function`), so none is dropped as pending.
    let flows = assert_flows_connect(&doc);
    assert_eq!(flows, k * n, "IPI flows for {n} madvise calls");
    let slice_names: BTreeSet<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for k in [
        "madvise(MADV_DONTNEED)",
        "flush_tlb_func",
        "smp_call_function_many_cond",
    ] {
        assert!(slice_names.contains(k), "no {k} slice in {slice_names:?}");
    }
    let mut flushes: BTreeMap<&str, usize> = BTreeMap::new();
    for e in ev
        .iter()
        .filter(|e| e["ph"] == "i" && e["cat"] == "tlb_flush")
    {
        *flushes.entry(e["name"].as_str().unwrap()).or_default() += 1;
    }
    // Flush instants: every call runs `flush_tlb_func` (arch/x86/tlb.rs)
    // once locally and once in each target's IPI; with one initiator each
    // target's `tlb_gen` is exactly one behind, so none takes a
    // `FlushTlbFuncSkip` branch: (k + 1) per call. Besides those, only
    // `switch_mm_irqs_off`'s flush when each of the k + 1 CPUs first loads
    // the mm (`choose_new_asid` hands it a PCID slot that held no context
    // of it: `need_flush`); the tasks never leave their CPUs after that.
    let want: BTreeMap<&str, usize> = [
        ("flush_tlb_func", (k + 1) * n),
        ("switch_mm_irqs_off", k + 1),
    ]
    .into();
    assert_eq!(flushes, want, "flush instants by kernel function");
    // The same run gives the same file.
    assert_eq!(text, traced("madvise-again", &args).1);
}

#[test]
fn violations_are_instants_on_the_cpu_that_used_the_stale_entry() {
    let (doc, _, _) = traced(
        "violation",
        &[
            "default",
            "--set",
            "workload.name=madvise_race",
            "--set",
            "workload.iterations=300",
            "--set",
            "inject.free_before_flush=true",
        ],
    );
    let v: Vec<&Value> = events(&doc)
        .iter()
        .filter(|e| e["cat"] == "violation")
        .collect();
    assert!(!v.is_empty(), "no violation instant");
    assert!(v
        .iter()
        .all(|e| e["ph"] == "i" && e["name"] == "violation: invariant 1"));
    assert_nested(&doc);
    assert_flows_connect(&doc);
}

#[test]
fn a_capped_trace_says_so_and_stays_well_formed() {
    let (doc, _, err) = traced(
        "capped",
        &[
            "default",
            "--set",
            "workload.iterations=2000",
            "--trace-max-events",
            "1000",
        ],
    );
    assert!(err.contains("trace capped at 1000 events"), "{err}");
    // `ChromeTrace::step` records a step only while fewer than the cap
    // are held, and the step it records last adds at most: its slice, a
    // flow start per IPI it sends (the 3 busy CPUs), one flow finish (one
    // initiator: a target's queue holds at most its one csd) and one flush
    // instant (a step runs `flush_tlb_func` or a flushing switch at most
    // once here), 6 in all; `finish` adds the truncation instant and drops
    // the flow starts whose interrupt came after the cap (at most the 3 of
    // the last flush). (This replaces "< 1100", a margin picked by hand.)
    let n = events(&doc).len();
    assert!((1000 + 1 - 3..=1000 + 6).contains(&n), "{n} events");
    assert_eq!(doc["otherData"]["truncated"], true);
    assert_nested(&doc);
    assert_flows_connect(&doc);
    let (code, err) = tlblab(&["run", "--trace-out", "/dev/null", "--trace-max-events", "5"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--trace-max-events 5") && !err.trim().contains('\n'),
        "{err}"
    );
}
