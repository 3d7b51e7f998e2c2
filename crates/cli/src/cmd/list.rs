//! `tlblab list`: workloads with their defaults, switches, scenarios, cost profiles.

use machine::{Cost, CostProfile, Error, Scenario};

pub fn main() -> Result<u8, Error> {
    println!("workloads:");
    for w in workloads::catalogue() {
        println!(
            "  {:<22} {}\n  {:<22} keys: {}",
            w.name, w.about, "", w.keys
        );
        let d = workloads::defaults(w.name)?;
        println!(
            "  {:<22} defaults (scenarios/{}.toml): {}",
            "",
            workloads::defaults_source(w.name)?,
            d.settings()
                .into_iter()
                .filter(|kv| !kv.starts_with("workload.name="))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    println!("\nswitches (--set key=value):");
    for (k, v, about) in Scenario::switches() {
        println!("  {k:<36} {v:<42} {about}");
    }
    println!("\nnamed barriers (--set inject.drop_barrier=NAME, tlblab check only):");
    for b in kernel::hw::memory_model::BARRIERS {
        println!(
            "  {:<36} {}\n  {:<36} pairs with {}",
            b.name, b.kernel, "", b.pairs_with
        );
        let set = format!("inject.drop_barrier={}", b.name);
        for c in check::configs::CATALOGUE
            .iter()
            .filter(|c| c.sets.contains(&set.as_str()))
        {
            let verdict = if c.expect_safe {
                "safe (finding)"
            } else {
                "unsafe"
            };
            println!("  {:<36} drop check: {} (expected {verdict})", "", c.name);
        }
    }
    println!("\nbundled scenarios:");
    for (n, _) in tlblab::BUNDLED {
        println!("  {n}");
    }
    use machine::scenario::Arch;
    let ps: Vec<CostProfile> = [Arch::X86, Arch::Arm64, Arch::Riscv]
        .into_iter()
        .map(CostProfile::default_for)
        .collect();
    println!("\nbundled cost profiles (the default is the one of machine.arch; sources in crates/machine/profiles/):");
    for p in &ps {
        println!("  {:<20} {}", p.name, p.description);
    }
    for (n, _) in machine::cost::EXTRA_PROFILES {
        let p = CostProfile::bundled(n).expect("bundled");
        println!("  {:<20} {} (--profile {n})", p.name, p.description);
    }
    println!(
        "\n  {:<24} {:>9} {:>9} {:>9}  x86 source",
        "cost (ns)", "x86", "arm64", "riscv"
    );
    for c in Cost::ALL {
        println!(
            "  {:<24} {:>9.1} {:>9.1} {:>9.1}  {}",
            c.name(),
            ps[0].ns(*c),
            ps[1].ns(*c),
            ps[2].ns(*c),
            ps[0].source(*c)
        );
    }
    Ok(0)
}
