//! Parsing `/proc/interrupts` (fs/proc/interrupts.c, arch_show_interrupts).

use machine::Error;
use std::collections::BTreeMap;

/// Per-CPU counts of the named rows (e.g. `TLB`, `CAL`, `RES`).
pub fn parse(text: &str, rows: &[&str]) -> Result<BTreeMap<String, Vec<u64>>, Error> {
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| Error::Unsupported("/proc/interrupts is empty".into()))?;
    let ncpu = header
        .split_whitespace()
        .filter(|c| c.starts_with("CPU"))
        .count();
    if ncpu == 0 {
        return Err(Error::Unsupported(
            "/proc/interrupts has no CPU header line".into(),
        ));
    }
    let mut out = BTreeMap::new();
    for line in lines {
        let mut f = line.split_whitespace();
        let Some(name) = f.next().and_then(|n| n.strip_suffix(':')) else {
            continue;
        };
        if !rows.contains(&name) {
            continue;
        }
        let counts: Vec<u64> = f.take(ncpu).map_while(|v| v.parse().ok()).collect();
        if counts.len() != ncpu {
            return Err(Error::Unsupported(format!(
                "/proc/interrupts row {name} has {} counts for {ncpu} CPUs",
                counts.len()
            )));
        }
        out.insert(name.to_string(), counts);
    }
    if let Some(missing) = rows.iter().find(|r| !out.contains_key(**r)) {
        return Err(Error::Unsupported(format!(
            "/proc/interrupts has no {missing} row"
        )));
    }
    Ok(out)
}

/// Read the rows from this host.
pub fn read(rows: &[&str]) -> Result<BTreeMap<String, Vec<u64>>, Error> {
    let text = std::fs::read_to_string("/proc/interrupts")
        .map_err(|e| Error::Unsupported(format!("cannot read /proc/interrupts: {e}")))?;
    parse(&text, rows)
}

/// `after - before`, row by row and CPU by CPU.
pub fn delta(
    before: &BTreeMap<String, Vec<u64>>,
    after: &BTreeMap<String, Vec<u64>>,
) -> BTreeMap<String, Vec<u64>> {
    after
        .iter()
        .map(|(k, a)| {
            let b = &before[k];
            (
                k.clone(),
                a.iter().zip(b).map(|(x, y)| x.saturating_sub(*y)).collect(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "           CPU0       CPU1       \n  0:         43          0   IO-APIC   2-edge      timer\nRES:      24568      21428   Rescheduling interrupts\nCAL:     154416     108288   Function call interrupts\nTLB:      78572      70762   TLB shootdowns\n";

    #[test]
    fn parses_rows_per_cpu() {
        let r = parse(SAMPLE, &["TLB", "CAL", "RES"]).unwrap();
        assert_eq!(r["TLB"], vec![78572, 70762]);
        assert_eq!(r["CAL"], vec![154416, 108288]);
        let d = delta(
            &r,
            &parse(&SAMPLE.replace("78572", "78600"), &["TLB", "CAL", "RES"]).unwrap(),
        );
        assert_eq!(d["TLB"], vec![28, 0]);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(parse("", &["TLB"]).is_err());
        assert!(parse("garbage\nTLB: 1 2\n", &["TLB"]).is_err());
        let e = parse(SAMPLE, &["TLB", "XYZ"]).unwrap_err().to_string();
        assert!(e.contains("no XYZ row"), "{e}");
        assert!(parse("  CPU0 CPU1\nTLB: 5 x\n", &["TLB"]).is_err());
    }
}
