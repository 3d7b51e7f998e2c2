//! Counting the kernel's `tlb:tlb_flush` tracepoint (include/trace/events/tlb.h,
//! `TP_printk("pages:%ld reason:%s (%d)")`) by reason, in a private trace
//! instance (`instances/tlblab-<pid>`), so the global trace settings are never
//! touched. The instance is removed when the [`Session`] drops and, if the
//! process gets SIGINT or SIGTERM meanwhile, by a signal handler; instances
//! left by a process that died of SIGKILL are removed by the next session.
//! tracefs is never mounted here: if it is absent the caller gets the reason.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};

/// The simulator's `tlb_flush` keys (kernel `FlushReason::name`), in
/// `enum tlb_flush_reason` order (include/linux/mm_types.h).
pub const REASONS: [&str; 6] = [
    "task_switch",
    "remote_shootdown",
    "local_shootdown",
    "local_mm_shootdown",
    "remote_send_ipi",
    "remote_wrong_cpu",
];

/// The report key for a printed reason (`"remote IPI send"`; kernels differ
/// in capitals) or, if the string is empty, its number.
pub fn reason_key(printed: &str, num: Option<i64>) -> String {
    match printed.trim().to_ascii_lowercase().as_str() {
        "flush on task switch" => "task_switch".into(),
        "remote ipi send" => "remote_send_ipi".into(),
        "" => match num {
            Some(n) if (0..REASONS.len() as i64).contains(&n) => REASONS[n as usize].into(),
            Some(n) => format!("reason_{n}"),
            None => "reason_unknown".into(),
        },
        // "remote shootdown", "local mm shootdown", "remote wrong CPU", ...
        s => s.split_whitespace().collect::<Vec<_>>().join("_"),
    }
}

/// One line of a `trace` file: the reason key of a `tlb_flush:` event, or
/// None for headers and other events.
pub fn parse_line(line: &str) -> Option<String> {
    let (_, ev) = line.split_once(" tlb_flush: ")?;
    let (_, rest) = ev.split_once("reason:")?;
    // "remote shootdown (1)": the number is in the last parentheses.
    let (printed, num) = match rest.rsplit_once('(') {
        Some((p, n)) => (p, n.trim_end().trim_end_matches(')').trim().parse().ok()),
        None => (rest, None),
    };
    Some(reason_key(printed, num))
}

/// Count `tlb_flush` events per reason in `trace` text; every reason of
/// [`REASONS`] is present (0 if unseen), as in the simulator's report.
pub fn count<R: BufRead>(text: R) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = REASONS.iter().map(|r| (r.to_string(), 0)).collect();
    for line in text.lines().map_while(Result::ok) {
        if let Some(k) = parse_line(&line) {
            *out.entry(k).or_default() += 1;
        }
    }
    out
}

/// Sum of `overrun:` and `dropped events:` over `per_cpu/*/stats` texts.
pub fn lost_events<'a>(stats: impl IntoIterator<Item = &'a str>) -> u64 {
    stats
        .into_iter()
        .flat_map(|s| s.lines())
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

/// The tracefs mount point with an `instances` directory: /sys/kernel/tracing,
/// /sys/kernel/debug/tracing, or any tracefs in /proc/mounts.
fn find_root() -> Result<PathBuf, String> {
    let mut candidates = vec![
        PathBuf::from("/sys/kernel/tracing"),
        PathBuf::from("/sys/kernel/debug/tracing"),
    ];
    if let Ok(m) = std::fs::read_to_string("/proc/mounts") {
        for l in m.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 2 && f[2] == "tracefs" {
                candidates.push(PathBuf::from(f[1]));
            }
        }
    }
    candidates
        .into_iter()
        .find(|p| p.join("instances").is_dir())
        .ok_or_else(|| {
            "tracefs is not mounted (not at /sys/kernel/tracing or /sys/kernel/debug/tracing); tlb_flush left empty; as root: mount -t tracefs nodev /sys/kernel/tracing".to_string()
        })
}

/// Remove `tlblab-<pid>` instances whose process no longer exists (left by a
/// run killed with SIGKILL, which no handler can catch).
fn sweep_stale(instances: &Path) {
    let Ok(dir) = std::fs::read_dir(instances) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("tlblab-")
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only checks whether the pid exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

// The instance to remove if SIGINT/SIGTERM arrives: a NUL-terminated path
// in atomics (readable from a signal handler), the owning pid, and whether
// it is armed.
const PATH_MAX: usize = 256;
static ARMED: AtomicBool = AtomicBool::new(false);
static OWNER: AtomicI32 = AtomicI32::new(0);
static PATH: [AtomicU8; PATH_MAX] = [const { AtomicU8::new(0) }; PATH_MAX];

/// SIGINT/SIGTERM handler: remove the armed instance, then die of the
/// signal as if no handler had been installed.
extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: getpid, rmdir, signal and raise are async-signal-safe; the
    // path is NUL-terminated (PATH_MAX - 1 bytes at most are stored).
    unsafe {
        if ARMED.swap(false, Ordering::SeqCst) && OWNER.load(Ordering::SeqCst) == libc::getpid() {
            let mut buf = [0u8; PATH_MAX];
            for (b, a) in buf.iter_mut().zip(PATH.iter()) {
                *b = a.load(Ordering::SeqCst);
            }
            libc::rmdir(buf.as_ptr() as *const libc::c_char);
        }
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// A private trace instance recording `tlb:tlb_flush`, removed on drop.
pub struct Session {
    dir: PathBuf,
    name: String,
    prev: Vec<(libc::c_int, libc::sigaction)>,
}

/// Per-CPU ring buffer for the instance: 64 MiB over all CPUs, 1.4..16 MiB
/// each (an event is ~28 bytes).
fn buffer_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u64;
    (65536 / cpus).clamp(1410, 16384)
}

impl Session {
    /// Create `instances/tlblab-<pid>`, size its buffer, enable
    /// `tlb/tlb_flush` in it; Err is the reason it cannot (never fatal).
    pub fn start() -> Result<Session, String> {
        let root = find_root()?;
        if !root.join("events/tlb/tlb_flush").is_dir() {
            return Err(format!(
                "no tlb:tlb_flush event in {} (the tracepoint is x86-only and needs CONFIG_TRACEPOINTS); tlb_flush left empty",
                root.display()
            ));
        }
        let instances = root.join("instances");
        sweep_stale(&instances);
        let name = format!("tlblab-{}", std::process::id());
        let dir = instances.join(&name);
        if dir.as_os_str().len() >= PATH_MAX {
            return Err(format!("tracefs path {} too long", dir.display()));
        }
        let mut s = Session {
            dir,
            name,
            prev: Vec::new(),
        };
        s.arm();
        if let Err(e) = std::fs::create_dir(&s.dir) {
            s.disarm();
            return Err(format!(
                "cannot create trace instance {}: {e}{}; tlb_flush left empty",
                s.dir.display(),
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    " (needs root)"
                } else {
                    ""
                }
            ));
        }
        // From here on, dropping `s` removes the instance.
        let w = |f: &str, v: &str| {
            std::fs::write(s.dir.join(f), v).map_err(|e| {
                format!(
                    "cannot write {}/{f}: {e}; tlb_flush left empty",
                    s.dir.display()
                )
            })
        };
        w("buffer_size_kb", &buffer_kb().to_string())?;
        w("events/tlb/tlb_flush/enable", "1")?;
        Ok(s)
    }

    /// Point the signal handler at this instance and install it for
    /// SIGINT and SIGTERM (keeping the previous actions for drop).
    fn arm(&mut self) {
        let bytes = self.dir.as_os_str().as_encoded_bytes();
        for (i, a) in PATH.iter().enumerate() {
            a.store(bytes.get(i).copied().unwrap_or(0), Ordering::SeqCst);
        }
        OWNER.store(std::process::id() as i32, Ordering::SeqCst);
        ARMED.store(true, Ordering::SeqCst);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction is valid; on_signal has the
            // handler's signature and only makes async-signal-safe calls.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut old) == 0 {
                    self.prev.push((sig, old));
                }
            }
        }
    }

    /// Restore the previous SIGINT/SIGTERM actions and disarm the handler.
    fn disarm(&mut self) {
        for (sig, old) in self.prev.drain(..) {
            // SAFETY: restoring an action sigaction returned earlier.
            unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
        }
        ARMED.store(false, Ordering::SeqCst);
    }

    /// Stop recording and count the events per reason; the note says how
    /// many there were (and how many the buffer lost) or why none could be read.
    pub fn finish(self) -> Result<(BTreeMap<String, u64>, String), String> {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let mut stats = Vec::new();
        if let Ok(d) = std::fs::read_dir(self.dir.join("per_cpu")) {
            for e in d.flatten() {
                if let Ok(t) = std::fs::read_to_string(e.path().join("stats")) {
                    stats.push(t);
                }
            }
        }
        let lost = lost_events(stats.iter().map(String::as_str));
        let f = std::fs::File::open(self.dir.join("trace"))
            .map_err(|e| format!("cannot read {}/trace: {e}", self.dir.display()))?;
        let counts = count(std::io::BufReader::with_capacity(1 << 16, f));
        let total: u64 = counts.values().sum();
        let mut note = format!(
            "trace instance {} at {}: {total} tlb:tlb_flush events, all processes, whole run (setup included)",
            self.name,
            self.dir.parent().and_then(Path::parent).unwrap_or(Path::new("?")).display()
        );
        if lost > 0 {
            note.push_str(&format!(
                "; {lost} events lost (buffer full): counts are low"
            ));
        }
        Ok((counts, note))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("events/tlb/tlb_flush/enable"), "0");
        let _ = std::fs::remove_dir(&self.dir);
        self.disarm();
    }
}

/// Where tracefs instances live on this host, if tracefs is mounted.
pub fn instances_dir() -> Option<PathBuf> {
    find_root().ok().map(|r| r.join("instances"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from an instance's `trace` on Linux 6.18 (x86-64, 2 CPUs)
    /// during `tlblab bench tlb_flush_threads` and `mmapstress01` (note the
    /// kernel's capitals: "local MM", "remote IPI send"); the last two
    /// tlb_flush lines are made up: an older kernel's lower-case spelling and
    /// a reason number this parser does not know.
    const SAMPLE: &str = "\
# tracer: nop
#
# entries-in-buffer/entries-written: 5591/5591   #P:2
#
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
              sh-9278    [001] d..1. 25384.089354: tlb_flush: pages:-1 reason:flush on task switch (0)
              sh-9278    [001] d..1. 25384.089355: tlb_flush: pages:0 reason:flush on task switch (0)
          tlblab-9281    [000] d..3. 25384.090568: tlb_flush: pages:1 reason:local MM shootdown (3)
          tlblab-9282    [000] ...1. 25384.111119: tlb_flush: pages:-1 reason:remote IPI send (4)
          tlblab-9283    [001] d.h2. 25384.111145: tlb_flush: pages:-1 reason:remote shootdown (1)
          tlblab-9283    [001] d.h.. 25384.111561: tlb_flush: pages:-1 reason:remote shootdown (1)
 qemu-system-x86-9260    [001] d.h.. 25384.182782: tlb_flush: pages:0 reason:remote wrong CPU (5)
          tlblab-5121    [000] ..... 25070.100203: tlb_flush: pages:1 reason:local shootdown (2)
          tlblab-5121    [000] d..1. 25070.100402: tlb_flush: pages:1 reason: (7)
          tlblab-5121    [000] d..1. 25070.100402: sched_switch: prev_comm=tlblab
";

    #[test]
    fn counts_trace_lines_by_reason_with_the_simulators_keys() {
        let c = count(SAMPLE.as_bytes());
        assert_eq!(c["task_switch"], 2);
        assert_eq!(c["remote_shootdown"], 2);
        assert_eq!(c["local_shootdown"], 1);
        assert_eq!(c["local_mm_shootdown"], 1);
        assert_eq!(c["remote_send_ipi"], 1);
        assert_eq!(reason_key("remote ipi send", Some(4)), "remote_send_ipi");
        assert_eq!(c["remote_wrong_cpu"], 1);
        assert_eq!(c["reason_7"], 1);
        assert_eq!(
            c.values().sum::<u64>(),
            9,
            "headers and other events ignored"
        );
        assert_eq!(reason_key("", Some(1)), "remote_shootdown");
        assert!(parse_line("# tracer: nop").is_none());
    }

    #[test]
    fn lost_events_sum_overruns_and_drops() {
        let a = "entries: 111\noverrun: 3\ncommit overrun: 0\nbytes: 3108\ndropped events: 2\nread events: 0\n";
        let b = "entries: 5\noverrun: 0\n";
        assert_eq!(lost_events([a, b]), 5);
    }
}
