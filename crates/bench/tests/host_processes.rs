//! The real kernel: will-it-scale tlb_flush2 with processes vs threads, LTP
//! mmapstress01, and the tracefs instance's cleanup (also on SIGTERM).
//! Ignored by default (they need the host kernel: 2 CPUs and TLB/CAL rows in
//! /proc/interrupts); `.ci/run` runs them with `--ignored` where the host has
//! those, and they fail, not pass, when run on a host without them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests here measure system-wide counters: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Take the file's measurement lock (poisoning ignored).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// No child of this process is left, not even a zombie.
fn assert_no_children() {
    // SAFETY: a non-blocking waitpid on any child; null status is allowed.
    let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
    assert_eq!(r, -1, "a child process was left behind");
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ECHILD)
    );
}

/// Fail (never pass silently) where the host cannot run these tests.
fn require_host() {
    if let Some(why) = bench::host_unsuitable() {
        panic!("this host cannot run the host tests: {why}");
    }
}

/// The TLB shootdown IPIs the host sends in `d` while this test runs
/// nothing: the background a run's count includes.
fn background_tlb_ipis(d: Duration) -> u64 {
    let total = || {
        let rows = bench::interrupts::read(&["TLB"]).expect("/proc/interrupts");
        rows["TLB"].iter().sum::<u64>()
    };
    let before = total();
    std::thread::sleep(d);
    total() - before
}

/// Is tracefs mounted here (so a run must count `tlb:tlb_flush` reasons)?
fn traced() -> bool {
    bench::tracefs::instances_dir().is_some_and(|d| d.is_dir())
}

/// A host report's `tlb_flush` reasons: filled where tracefs is mounted,
/// else empty with `host.tracefs` saying why.
fn tlb_flush_or_note(r: &bench::HostReport) -> bool {
    let note = r.host["tracefs"].as_str().expect("a tracefs note");
    if traced() {
        assert!(
            !r.tlb_flush.is_empty(),
            "tracefs is mounted but no reason was counted: {note}"
        );
        true
    } else {
        assert!(r.tlb_flush.is_empty(), "{:?}", r.tlb_flush);
        assert!(note.contains("not mounted"), "{note}");
        false
    }
}

/// `instances/tlblab-*` entries (None when tracefs is not mounted).
fn tlblab_instances() -> Option<Vec<String>> {
    let dir = bench::tracefs::instances_dir()?;
    Some(
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tlblab-"))
            .collect(),
    )
}

#[test]
#[ignore = "needs the host kernel: 2 CPUs and TLB/CAL rows in /proc/interrupts"]
fn processes_send_far_fewer_tlb_ipis_per_op_than_threads() {
    let _s = serial();
    require_host();
    // TLB IPIs per op, less the host's own traffic over as long a time
    // (measured right after the run: `/proc/interrupts` counts every
    // process's shootdowns, and a loaded host sends many).
    let per_op = |r: &bench::HostReport, background: u64| {
        r.interrupt_totals["TLB"].saturating_sub(background) as f64 / r.op_count() as f64
    };
    let p = bench::run("tlb_flush_processes", 2, 400).expect("processes");
    let p_bg = background_tlb_ipis(Duration::from_nanos(p.sim_time_ns));
    assert_no_children();
    let t = bench::run("tlb_flush_threads", 2, 400).expect("threads");
    let t_bg = background_tlb_ipis(Duration::from_nanos(t.sim_time_ns));
    assert_eq!(p.op_count(), 800);
    assert_eq!(p.ops[0]["name"], "tlb_flush_processes");
    assert!(p.us_per_op() > 0.0 && p.ops[0]["latency_ns"]["p99"].as_u64() > Some(0));
    let (pp, tt) = (per_op(&p, p_bg), per_op(&t, t_bg));
    eprintln!("TLB per op, less the background: processes {pp:.4}, threads {tt:.4} (background {p_bg}, {t_bg})");
    // Threads share the mm: each madvise shoots down the other CPU (about 1
    // per op; a noisy VM sees less). Processes: private mms, local flushes
    // only; what remains is other processes' traffic.
    assert!(tt > 0.05, "threads: {tt} TLB IPIs per op");
    assert!(pp * 4.0 < tt, "processes {pp} vs threads {tt} TLB per op");
    if tlb_flush_or_note(&p) {
        // tracefs worked: the children's madvises are local mm shootdowns.
        assert!(
            p.tlb_flush["local_mm_shootdown"] >= p.op_count() / 2,
            "{:?}",
            p.tlb_flush
        );
    }
    let ncpu = std::thread::available_parallelism().unwrap().get() as u32;
    assert!(bench::run("tlb_flush_processes", ncpu + 1, 10).is_err());
    assert!(bench::run("tlb_flush_processes", 0, 10).is_err());
}

#[test]
#[ignore = "needs the host kernel: 2 CPUs and TLB/CAL rows in /proc/interrupts"]
fn mmapstress01_forks_children_that_map_and_unmap_and_reaps_them() {
    let _s = serial();
    require_host();
    let r = bench::run("mmapstress01", 0, 100).expect("mmapstress01");
    assert_no_children();
    assert_eq!(r.ops[0]["name"], "fork", "the model's op");
    assert_eq!(r.op_count(), 100);
    assert!(r.us_per_op() > 0.0);
    // LTP's shape: each child maps and unmaps once.
    assert_eq!(r.arch["child_mmap_munmap"], 100);
    assert!(r.interrupt_totals.contains_key("TLB") && r.interrupt_totals.contains_key("CAL"));
    if tlb_flush_or_note(&r) {
        // Each child's munmap flushes its own mm.
        assert!(
            r.tlb_flush["local_mm_shootdown"] >= 100 / 2,
            "{:?}",
            r.tlb_flush
        );
    }
}

#[test]
#[ignore = "needs the host kernel: 2 CPUs and TLB/CAL rows in /proc/interrupts"]
fn no_trace_instance_is_left_after_a_run_or_an_error() {
    let _s = serial();
    require_host();
    let r = bench::run("lat_mmap", 1, 200).expect("lat_mmap");
    let note = r.host["tracefs"]
        .as_str()
        .expect("a tracefs note")
        .to_string();
    assert!(bench::run("madvise_dontneed", 1000, 10).is_err());
    match tlblab_instances() {
        None => assert!(!traced() && !note.starts_with("trace instance"), "{note}"),
        Some(left) => {
            assert!(left.is_empty(), "left behind: {left:?}");
            assert!(note.starts_with("trace instance"), "{note}");
            assert!(r.tlb_flush.contains_key("local_mm_shootdown"));
        }
    }
}

/// Run by `sigterm_leaves_no_process_or_instance` in a process of its own
/// (which sets `TLBLAB_SIGTERM_HELPER`); not a test. Run any other way it
/// fails, so that `--ignored` never counts it as a pass (.ci/run skips it).
#[test]
#[ignore = "helper: runs until killed"]
fn helper_run_until_killed() {
    assert!(
        std::env::var_os("TLBLAB_SIGTERM_HELPER").is_some(),
        "not a test: the helper of sigterm_leaves_no_process_or_instance (skip it: --skip helper_run_until_killed)"
    );
    let _ = bench::run("tlb_flush_processes", 2, 100_000_000);
}

/// Pids of processes running this test binary, other than this process.
fn copies_of_this_binary() -> Vec<u32> {
    let me = std::env::current_exe().unwrap();
    let self_pid = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != self_pid)
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).ok().as_ref() == Some(&me))
        .filter(|p| {
            // Zombies (already dead, waiting for a reaper) do not count.
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        })
        .collect()
}

#[test]
#[ignore = "needs the host kernel: 2 CPUs and TLB/CAL rows in /proc/interrupts"]
fn sigterm_leaves_no_process_or_instance() {
    let _s = serial();
    require_host();
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_run_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .env("TLBLAB_SIGTERM_HELPER", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let hp = helper.id();
    // Wait for the helper's two benchmark children to be running.
    let t0 = Instant::now();
    while copies_of_this_binary().len() < 3 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        copies_of_this_binary().len() >= 3,
        "helper and children running"
    );
    let instance = tlblab_instances().map(|v| v.contains(&format!("tlblab-{hp}")));
    // SAFETY: sending SIGTERM to our own child process.
    unsafe { libc::kill(hp as libc::pid_t, libc::SIGTERM) };
    let st = helper.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        st.signal(),
        Some(libc::SIGTERM),
        "died of the signal: {st:?}"
    );
    let t0 = Instant::now();
    while !copies_of_this_binary().is_empty() && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        copies_of_this_binary().is_empty(),
        "children died with the parent"
    );
    match (instance, tlblab_instances()) {
        (Some(true), Some(left)) => assert!(left.is_empty(), "left behind: {left:?}"),
        (Some(false), _) => {
            panic!("tracefs is mounted but the helper's instance tlblab-{hp} was never seen")
        }
        (None, _) => assert!(
            !traced(),
            "tracefs not mounted: only the processes were checked"
        ),
        (Some(true), None) => panic!("the instances directory went away during the test"),
    }
}
