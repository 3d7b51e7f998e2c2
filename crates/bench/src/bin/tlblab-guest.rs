//! The guest agent of `tlblab validate --guest --arch riscv64|arm64`: PID 1
//! of the guest's initramfs, cross-built static (scripts/build-guest-agent.sh).
//! It is the bench crate's side of `tlblab guest-agent` alone: cross-building
//! the whole CLI (the simulator, the checker, plotters, mimalloc's C) for two
//! more targets would cost CI minutes for code the guest never runs.
//!
//! The kernel passes the words after `--` on its command line:
//! `guest-agent --madvise-iterations N --collapse-mib M --collapse-rounds R --forks F`.

#[cfg(target_os = "linux")]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut v = [2000u64, 64, 2, 0];
    let keys = [
        "--madvise-iterations",
        "--collapse-mib",
        "--collapse-rounds",
        "--forks",
    ];
    let mut it = args.iter().filter(|a| *a != "guest-agent");
    while let Some(k) = it.next() {
        let Some(i) = keys.iter().position(|x| x == k) else {
            eprintln!("tlblab-guest: unknown argument {k}");
            std::process::exit(2);
        };
        match it.next().and_then(|x| x.parse().ok()) {
            Some(x) => v[i] = x,
            None => {
                eprintln!("tlblab-guest: {k} needs a number");
                std::process::exit(2);
            }
        }
    }
    // MADV_COLLAPSE and the fork rows each in a fresh process born on CPU0.
    bench::guest::agent_main_with(v[0], v[1], v[2], v[3], true)
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("tlblab-guest runs as PID 1 of a Linux guest");
    std::process::exit(2);
}
