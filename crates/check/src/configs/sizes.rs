//! The measured sizes of the checks too large to run blindly.
//!
//! Checker bookkeeping, not a model of anything in the kernel. A check
//! whose last full run (or, where none finished, its last bounded run)
//! exceeded the default state bound is listed here with what it took;
//! `tlblab check NAME` refuses such a check, naming its size, unless the
//! user bounds it (`--max-states`, `--max-seconds`), instead of running
//! it for minutes into the default bound. Every other check of
//! [`super::CATALOGUE`] and [`super::LARGE`] stays under that bound.
//! The figures are measurements: re-measure them when the model or the
//! search changes a check's size (docs/checker.md, "Every protocol at 4
//! CPUs").

/// A check's size when it was last measured.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    /// States the search stored.
    pub states: u64,
    /// The search was stopped by a bound: `states` is a lower bound.
    pub at_least: bool,
    /// CPU seconds of the search, on one thread of this project's 2-core
    /// machines (until the bound, where one stopped it).
    pub cpu_seconds: u32,
    /// When, and at which commit.
    pub measured: &'static str,
}

/// The checks measured above the default state bound (release build,
/// `tlblab check NAME --threads 1`, symmetry as declared).
pub const SIZES: &[(&str, Size)] = &[
    (
        "arm64_collapse_targeted_4cpu",
        Size {
            states: 4_866_992,
            at_least: false,
            cpu_seconds: 94,
            measured: "2026-11-28 at 82b6f32 (56 s wall on two threads; 145 s at eaceab1)",
        },
    ),
    (
        "riscv_defer_vs_switch_4cpu",
        Size {
            states: 40_000_000,
            at_least: true,
            cpu_seconds: 539,
            measured: "2026-11-28 at eaceab1, stopped by --max-states 40000000",
        },
    ),
    (
        "x86_madvise_race_4cpu_3rounds",
        Size {
            states: 10_255_031,
            at_least: true,
            cpu_seconds: 300,
            measured: "2026-11-28 at 86e8656, stopped by --max-seconds 300",
        },
    ),
];

/// The recorded size of check `name`, if it is one measured above the
/// default state bound.
pub fn size(name: &str) -> Option<&'static Size> {
    SIZES.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
}

impl Size {
    /// One line for a refusal: "more than 40,000,000 states (over 539 s
    /// of CPU ...)".
    pub fn describe(&self) -> String {
        let more = if self.at_least { "more than " } else { "" };
        let cpu = if self.at_least { "over " } else { "" };
        format!(
            "{more}{} states ({cpu}{} s of CPU on one thread; measured {})",
            thousands(self.states),
            self.cpu_seconds,
            self.measured
        )
    }
}

/// `n` with thousands separators.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_reads_as_one_line() {
        let s = size("riscv_defer_vs_switch_4cpu").expect("listed");
        assert_eq!(
            s.describe(),
            "more than 40,000,000 states (over 539 s of CPU on one thread; \
             measured 2026-11-28 at eaceab1, stopped by --max-states 40000000)"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_395_316), "12,395,316");
        assert!(size("x86_madvise_race").is_none());
    }
}
