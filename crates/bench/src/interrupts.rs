//! Parsing `/proc/interrupts` (fs/proc/interrupts.c, arch_show_interrupts).

use machine::Error;
use std::collections::BTreeMap;

/// The numbered IPI rows of arm64 and RISC-V (`IPI0:` ... with the
/// kernel's description at the end, arch/arm64/kernel/smp.c `ipi_types`,
/// arch/riscv/kernel/smp.c `ipi_names`) that x86's rows name.
const IPI_ALIASES: [(&str, &str); 2] = [
    ("RES", "Rescheduling interrupts"),
    ("CAL", "Function call interrupts"),
];

/// Per-CPU counts of the named rows (e.g. `TLB`, `CAL`, `RES`). On arm64
/// and RISC-V, `RES` and `CAL` read the `IPIn` rows of the same meaning and
/// `TLB` (which neither has) reads as zeros.
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
    let ipi_numbered = text.lines().any(|l| l.trim_start().starts_with("IPI0:"));
    let mut out = BTreeMap::new();
    for line in lines {
        let mut f = line.split_whitespace();
        let Some(name) = f.next().and_then(|n| n.strip_suffix(':')) else {
            continue;
        };
        let counts: Vec<u64> = f
            .by_ref()
            .take(ncpu)
            .map_while(|v| v.parse().ok())
            .collect();
        // arm64 and RISC-V number their IPI rows (IPI0, IPI1, ...); the x86
        // names stand for the rows of the same meaning there.
        let desc = f.collect::<Vec<_>>().join(" ");
        let alias = name
            .starts_with("IPI")
            .then(|| {
                IPI_ALIASES
                    .iter()
                    .find(|(_, d)| *d == desc)
                    .map(|(x86, _)| *x86)
            })
            .flatten();
        let name = match alias {
            Some(a) if rows.contains(&a) && !rows.contains(&name) => a,
            _ => name,
        };
        if !rows.contains(&name) {
            continue;
        }
        if counts.len() != ncpu {
            return Err(Error::Unsupported(format!(
                "/proc/interrupts row {name} has {} counts for {ncpu} CPUs",
                counts.len()
            )));
        }
        if ipi_numbered {
            out.entry(name.to_string()).or_insert(counts);
        } else {
            out.insert(name.to_string(), counts);
        }
    }
    // No TLB-shootdown row on arm64 (broadcast TLBI, no IPI) or RISC-V
    // (remote flushes are call-function IPIs, in CAL): zero, not missing.
    if ipi_numbered && rows.contains(&"TLB") {
        out.entry("TLB".to_string())
            .or_insert_with(|| vec![0; ncpu]);
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
    fn numbered_ipi_rows_of_arm64_and_riscv() {
        // RISC-V 6.12 under QEMU with AIA (IMSIC IPIs).
        let rv = "           CPU0       CPU1       \n 10:        512        480  RISC-V INTC   5 Edge      riscv-timer\nIPI0:        30         41  Rescheduling interrupts\nIPI1:       900        870  Function call interrupts\nIPI2:         0          0  CPU stop interrupts\n";
        let r = parse(rv, &["TLB", "CAL", "RES"]).unwrap();
        assert_eq!(r["CAL"], vec![900, 870]);
        assert_eq!(r["RES"], vec![30, 41]);
        assert_eq!(r["TLB"], vec![0, 0]);
        let r = parse(rv, &["IPI1"]).unwrap();
        assert_eq!(r["IPI1"], vec![900, 870]);
        assert!(parse(SAMPLE, &["IPI1"]).is_err());
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
