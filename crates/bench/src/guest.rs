//! `tlblab validate --guest`: run the host benchmarks inside a real Linux
//! kernel booted under QEMU with more vCPUs than this machine has cores.
//!
//! ```text
//!   host: tlblab validate --guest --cpus 8
//!     ├─ initramfs (newc cpio, written here): /bin/tlblab, its shared
//!     │  libraries, /dev/console, /proc, /sys
//!     └─ qemu-system-x86_64 -smp 8 -kernel /boot/vmlinuz-* -initrd ...
//!          -append "console=ttyS0 rdinit=/bin/tlblab -- guest-agent ..."
//!   guest: tlblab guest-agent (PID 1)
//!     mounts /proc and /sys, runs madvise_dontneed and khugepaged_collapse
//!     exactly as `tlblab bench` does, prints one `TLBLAB-RESULT {json}` line
//!     per benchmark on the serial console, then powers the guest off.
//! ```
//! The guest runs with KVM when `/dev/kvm` opens, else under TCG. A KVM
//! guest uses the paravirtual TLB flush (`kvm_flush_tlb_multi`, which skips
//! preempted vCPUs) unless `kvm-pv-tlb-flush=off` hides the feature; the
//! agent reads the kernel log to report which one the guest kernel chose,
//! and the per-vCPU steal time that drives how often a target is preempted.

use crate::HostReport;
use machine::Error;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Marker of a result line on the guest's console.
pub const RESULT_MARK: &str = "TLBLAB-RESULT ";
/// Marker of an agent error line on the guest's console.
pub const ERROR_MARK: &str = "TLBLAB-ERROR ";

/// The guest's architecture: x86-64 boots this host's own kernel and
/// executable; riscv64 and arm64 boot Debian's 6.12 kernel of that
/// architecture (scripts/install-guest-cross.sh) under QEMU TCG with the
/// cross-built static agent (scripts/build-guest-agent.sh) as PID 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestArch {
    X86_64,
    Riscv64,
    Arm64,
}

impl GuestArch {
    /// `x86_64` (or `x86`), `riscv64` (or `riscv`), `arm64` (or `aarch64`).
    pub fn parse(s: &str) -> Result<GuestArch, Error> {
        match s {
            "x86_64" | "x86" => Ok(GuestArch::X86_64),
            "riscv64" | "riscv" => Ok(GuestArch::Riscv64),
            "arm64" | "aarch64" => Ok(GuestArch::Arm64),
            other => Err(Error::Config(format!(
                "--arch {other} (expected x86_64, riscv64 or arm64)"
            ))),
        }
    }
    /// Debian's name of the architecture (the cache's subdirectory).
    pub fn name(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::Riscv64 => "riscv64",
            GuestArch::Arm64 => "arm64",
        }
    }
    /// The model's `machine.arch`.
    pub fn model_arch(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86",
            GuestArch::Riscv64 => "riscv",
            GuestArch::Arm64 => "arm64",
        }
    }
    fn qemu(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "qemu-system-x86_64",
            GuestArch::Riscv64 => "qemu-system-riscv64",
            GuestArch::Arm64 => "qemu-system-aarch64",
        }
    }
    /// The Rust target the guest agent is cross-built for.
    pub fn rust_target(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64-unknown-linux-gnu",
            GuestArch::Riscv64 => "riscv64gc-unknown-linux-gnu",
            GuestArch::Arm64 => "aarch64-unknown-linux-gnu",
        }
    }
}

/// What the guest should run.
#[derive(Clone, Debug)]
pub struct GuestPlan {
    pub arch: GuestArch,
    pub cpus: u32,
    /// Boot with the paravirtual flush offered (KVM only).
    pub paravirt: bool,
    /// madvise(MADV_DONTNEED) calls, with `cpus - 1` busy threads.
    pub madvise_iterations: u64,
    /// MiB collapsed per MADV_COLLAPSE round (a multiple of 2).
    pub collapse_mib: u64,
    pub collapse_rounds: u64,
    /// Children forked in all by the mmapstress01-like fork rows (one run
    /// with a single child alive, one with LTP's min(cpus − 1, 20)); 0: none.
    pub forks: u64,
    /// Give up on a guest that has not powered off by then.
    pub timeout: Duration,
}

/// One guest boot's results.
#[derive(Clone, Debug)]
pub struct GuestRun {
    pub kernel: String,
    pub accel: &'static str,
    /// The guest kernel installed `kvm_flush_tlb_multi` ("KVM setup pv remote TLB flush").
    pub pv_tlb_flush: bool,
    pub madvise: HostReport,
    /// Fraction of the madvise run each busy vCPU spent preempted (steal time).
    pub steal_fraction: f64,
    pub collapse: HostReport,
    /// mmapstress01 with one child alive at a time (fork + exit), if run.
    pub fork_one: Option<HostReport>,
    /// mmapstress01 as LTP runs it (`guest_ltp`: nothing pinned, `wait()` then
    /// `fork()`), if run; traced where tracefs is there (counts in `arch`).
    pub fork_ltp: Option<HostReport>,
    /// fork+exit with each child born on its own CPU (`guest_fork` with `placed`), if run.
    pub fork_placed: Option<HostReport>,
    /// A second such run traced: call-function requests and reschedule IPIs per fork, by function.
    pub fork_placed_ipis: Vec<(String, f64)>,
    /// The traced collapse round (one unrecorded round, one recorded: 2 x
    /// the extents): events by kind, CPU and fields (information).
    pub collapse_trace: Vec<(String, u64)>,
}

/// Where scripts/install-guest-cross.sh unpacks the cross kernels
/// (`$TLBLAB_GUEST_CACHE`, default /var/cache/tlblab-guest).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("TLBLAB_GUEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/tlblab-guest"))
}

/// What a guest of `arch` needs on this host: QEMU, the kernel, and the
/// executable to run as PID 1 (x86-64: this one; riscv64 and arm64: the
/// cross-built static agent), or why it cannot.
pub fn prerequisites_for(arch: GuestArch) -> Result<(PathBuf, PathBuf, PathBuf), Error> {
    if arch == GuestArch::X86_64 {
        let (q, k) = prerequisites()?;
        let exe = std::env::current_exe()
            .map_err(|e| Error::Unsupported(format!("cannot find this executable: {e}")))?;
        return Ok((q, k, exe));
    }
    let a = arch.name();
    let install = format!("run scripts/install-guest-cross.sh {a} (as root)");
    let qemu = which(arch.qemu())
        .ok_or_else(|| Error::Unsupported(format!("{} not found; {install}", arch.qemu())))?;
    if arch == GuestArch::Riscv64 && which("dtc").is_none() {
        return Err(Error::Unsupported(format!(
            "dtc not found (the RISC-V AIA device-tree workaround needs it); {install}"
        )));
    }
    let kernel = cross_kernel(arch).ok_or_else(|| {
        Error::Unsupported(format!(
            "no {a} guest kernel in {}/{a}/boot; {install}",
            cache_dir().display()
        ))
    })?;
    let agent = guest_agent(arch).ok_or_else(|| {
        Error::Unsupported(format!(
            "no {a} guest agent (target/{}/guest/tlblab-guest); run scripts/build-guest-agent.sh {a}",
            arch.rust_target()
        ))
    })?;
    Ok((qemu, kernel, agent))
}

/// The kernel of a cross guest: `$TLBLAB_GUEST_KERNEL_<ARCH>` or the newest
/// `vmlinu*` the install script unpacked.
fn cross_kernel(arch: GuestArch) -> Option<PathBuf> {
    let var = format!("TLBLAB_GUEST_KERNEL_{}", arch.name().to_uppercase());
    if let Some(k) = std::env::var_os(var) {
        return Some(PathBuf::from(k));
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache_dir().join(arch.name()).join("boot"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinu") && !n.ends_with(".sig"))
        })
        .collect();
    v.sort();
    v.pop()
}

/// The cross-built agent: `$TLBLAB_GUEST_AGENT_<ARCH>`, or
/// `<target>/<triple>/guest/tlblab-guest` in the target directory this
/// executable was built in (scripts/build-guest-agent.sh).
pub fn guest_agent(arch: GuestArch) -> Option<PathBuf> {
    let var = format!("TLBLAB_GUEST_AGENT_{}", arch.name().to_uppercase());
    if let Some(a) = std::env::var_os(var) {
        return Some(PathBuf::from(a));
    }
    let exe = std::env::current_exe().ok()?;
    let rel = Path::new(arch.rust_target())
        .join("guest")
        .join("tlblab-guest");
    exe.ancestors()
        .skip(1)
        .take(4)
        .map(|d| d.join(&rel))
        .find(|p| p.is_file())
}

/// The guest kernel and QEMU this host would use, or why it cannot.
pub fn prerequisites() -> Result<(PathBuf, PathBuf), Error> {
    let qemu = which("qemu-system-x86_64").ok_or_else(|| {
        Error::Unsupported(
            "qemu-system-x86_64 not found; run scripts/install-guest.sh (as root)".into(),
        )
    })?;
    let kernel = guest_kernel().ok_or_else(|| {
        Error::Unsupported(
            "no guest kernel in /boot (vmlinuz-*); run scripts/install-guest.sh (as root)".into(),
        )
    })?;
    if std::fs::File::open(&kernel).is_err() {
        return Err(Error::Unsupported(format!(
            "cannot read the guest kernel {} (needs root)",
            kernel.display()
        )));
    }
    Ok((qemu, kernel))
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.is_file())
}

/// The newest `/boot/vmlinuz-*` (or `$TLBLAB_GUEST_KERNEL`).
fn guest_kernel() -> Option<PathBuf> {
    if let Some(k) = std::env::var_os("TLBLAB_GUEST_KERNEL") {
        return Some(PathBuf::from(k));
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .collect();
    v.sort();
    v.pop()
}

/// Can this process use KVM? `/dev/kvm` must open and the CPU must offer
/// hardware virtualization (`vmx`/`svm` in /proc/cpuinfo): inside a VM
/// without nested virtualization `/dev/kvm` may exist while a KVM guest
/// hangs at kernel entry (seen on this project's 2-vCPU machines).
pub fn kvm_usable() -> bool {
    kvm_unusable_reason().is_none()
}

/// Why KVM cannot run the guest here, if it cannot.
pub fn kvm_unusable_reason() -> Option<&'static str> {
    let opens = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if !opens {
        return Some("/dev/kvm does not open");
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if !hw {
        return Some(
            "the CPU offers no vmx/svm (no nested virtualization), so a KVM guest cannot run",
        );
    }
    None
}

/// A newc-format cpio archive (the initramfs format, Documentation/
/// driver-api/early-userspace/buffer-format.rst), written in memory.
#[derive(Default)]
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.ino += 1;
        let hdr = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.buf.extend_from_slice(hdr.as_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }
    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }
    /// A directory.
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, (0, 0), &[]);
    }
    /// A regular file.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | mode, (0, 0), data);
    }
    /// A character device node.
    pub fn chardev(&mut self, name: &str, major: u32, minor: u32) {
        self.entry(name, 0o020600, (major, minor), &[]);
    }
    /// Close the archive and return its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.buf
    }
}

/// The shared libraries (and the ELF interpreter) `exe` needs, from `ldd`.
fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, Error> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .map_err(|e| Error::Unsupported(format!("cannot run ldd: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("not a dynamic executable") || !out.status.success() {
        return Ok(Vec::new());
    }
    Ok(text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, r)) => r.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// An initramfs holding `exe` as `/bin/tlblab` and what it links against.
pub fn initramfs(exe: &Path) -> Result<Vec<u8>, Error> {
    initramfs_with(exe, true)
}

/// An initramfs holding `exe` as `/bin/tlblab`, with the shared libraries
/// `ldd` names for it when `libs` (a static cross-built agent has none).
fn initramfs_with(exe: &Path, libs: bool) -> Result<Vec<u8>, Error> {
    let read = |p: &Path| {
        std::fs::read(p)
            .map_err(|e| Error::Unsupported(format!("cannot read {}: {e}", p.display())))
    };
    let mut c = Cpio::default();
    for d in ["bin", "dev", "proc", "sys", "tmp"] {
        c.dir(d);
    }
    c.chardev("dev/console", 5, 1);
    c.chardev("dev/null", 1, 3);
    c.file("bin/tlblab", 0o755, &read(exe)?);
    let mut dirs = std::collections::BTreeSet::new();
    let libs = if libs {
        shared_libraries(exe)?
    } else {
        Vec::new()
    };
    for lib in libs {
        let rel = lib.to_string_lossy().trim_start_matches('/').to_string();
        let mut acc = String::new();
        for part in Path::new(&rel).parent().into_iter().flat_map(|p| p.iter()) {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(&part.to_string_lossy());
            if dirs.insert(acc.clone()) {
                c.dir(&acc);
            }
        }
        // Follow symlinks: the archive holds the library's bytes under its name.
        c.file(&rel, 0o755, &read(&lib)?);
    }
    Ok(c.finish())
}

/// Kills QEMU on every exit path (and QEMU dies with us on a signal, by
/// PR_SET_PDEATHSIG). The initramfs lives in a memfd: nothing on disk.
struct Vm {
    child: Child,
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The initramfs in an anonymous memory file QEMU inherits and opens as
/// `/dev/fd/N`; it vanishes when both processes have closed it.
fn initrd_memfd(img: &[u8]) -> Result<std::fs::File, Error> {
    use std::io::Write as _;
    use std::os::fd::FromRawFd;
    // SAFETY: a NUL-terminated name; no MFD_CLOEXEC so QEMU inherits it.
    let fd = unsafe { libc::memfd_create(c"tlblab-initramfs".as_ptr(), 0) };
    if fd < 0 {
        return Err(Error::Unsupported(format!(
            "memfd_create for the initramfs: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(img)
        .map_err(|e| Error::Unsupported(format!("cannot write the initramfs: {e}")))?;
    Ok(f)
}

/// Boot the guest once and collect the agent's results.
pub fn run(plan: &GuestPlan) -> Result<GuestRun, Error> {
    let (qemu, kernel, exe) = prerequisites_for(plan.arch)?;
    let cross = plan.arch != GuestArch::X86_64;
    if !cross && plan.forks > 0 {
        return Err(Error::Unsupported(
            "the fork rows run in the riscv64 and arm64 guests only".into(),
        ));
    }
    if !(2..=64).contains(&plan.cpus) {
        return Err(Error::Range(format!(
            "--cpus {} (allowed 2..=64 vCPUs)",
            plan.cpus
        )));
    }
    if plan.collapse_mib == 0 || !plan.collapse_mib.is_multiple_of(2) || plan.collapse_mib > 512 {
        return Err(Error::Range(format!(
            "collapse size {} MiB (a multiple of 2, at most 512)",
            plan.collapse_mib
        )));
    }
    let kvm = !cross && kvm_usable();
    if plan.paravirt && !kvm {
        return Err(Error::Unsupported(format!(
            "the paravirtual TLB flush needs a KVM guest: {}",
            kvm_unusable_reason().unwrap_or("KVM unusable")
        )));
    }
    let initrd = initrd_memfd(&initramfs_with(&exe, !cross)?)?;
    let initrd_path = {
        use std::os::fd::AsRawFd;
        format!("/dev/fd/{}", initrd.as_raw_fd())
    };
    let mem_mib = if cross { 1024 } else { 2048 } + plan.collapse_mib * 2;
    let cpu = match (plan.arch, kvm, plan.paravirt) {
        (GuestArch::X86_64, true, true) => "host",
        (GuestArch::X86_64, true, false) => "host,kvm-pv-tlb-flush=off",
        (GuestArch::X86_64, false, _) => "max",
        (GuestArch::Riscv64, ..) => "rv64",
        // Pointer authentication with QEMU's own algorithm: ~3x faster
        // under TCG than the architected one.
        (GuestArch::Arm64, ..) => "max,pauth-impdef=on",
    };
    let console = match plan.arch {
        GuestArch::X86_64 | GuestArch::Riscv64 => "ttyS0",
        GuestArch::Arm64 => "ttyAMA0",
    };
    let mut append = format!(
        "console={console} quiet panic=-1 rdinit=/bin/tlblab -- guest-agent --madvise-iterations {} --collapse-mib {} --collapse-rounds {}",
        plan.madvise_iterations, plan.collapse_mib, plan.collapse_rounds
    );
    if cross {
        append.push_str(&format!(" --forks {}", plan.forks));
    }
    // RISC-V: the AIA machine (IMSIC IPIs, so remote flushes are IPIs that
    // /proc/interrupts counts, not SBI remote fences), with its device tree
    // patched (see `riscv_aia_dtb`).
    let scratch = Scratch::new()?;
    let machine = match plan.arch {
        GuestArch::X86_64 => None,
        GuestArch::Riscv64 => Some("virt,aia=aplic-imsic".to_string()),
        GuestArch::Arm64 => Some("virt,gic-version=3".to_string()),
    };
    let mut cmd = Command::new(&qemu);
    cmd.args([
        "-nodefaults",
        "-nographic",
        "-no-reboot",
        "-serial",
        "stdio",
    ]);
    if let Some(m) = &machine {
        cmd.args(["-machine", m, "-nic", "none"]);
    }
    if plan.arch == GuestArch::Riscv64 {
        let dtb = riscv_aia_dtb(&qemu, plan.cpus, mem_mib, &scratch.0)?;
        cmd.arg("-dtb").arg(dtb);
    }
    cmd.args([
        "-accel",
        match (kvm, cross) {
            (true, _) => "kvm",
            (false, false) => "tcg",
            (false, true) => "tcg,thread=multi",
        },
    ])
    .args(["-cpu", cpu])
    .args(["-smp", &plan.cpus.to_string()])
    .args(["-m", &mem_mib.to_string()])
    .arg("-kernel")
    .arg(&kernel)
    .arg("-initrd")
    .arg(&initrd_path)
    .args(["-append", &append])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // QEMU dies with us, even when we are killed by a signal.
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| Error::Unsupported(format!("cannot start QEMU: {e}")))?;
    let mut vm = Vm { child };
    drop(initrd); // QEMU holds its own copy of the descriptor
    let stdout = vm.child.stdout.take().expect("piped");
    // Read the console on a thread so the timeout can fire while it blocks.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + plan.timeout;
    let mut results: Vec<serde_json::Value> = Vec::new();
    let mut console = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Unsupported(format!(
                "the guest did not finish within {} s; last console lines: {}",
                plan.timeout.as_secs(),
                tail(&console)
            )));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(500))) {
            Ok(line) => {
                let line = line.trim_end_matches('\r').to_string();
                if let Some(j) = line.find(RESULT_MARK) {
                    let v = serde_json::from_str(&line[j + RESULT_MARK.len()..]).map_err(|e| {
                        Error::Unsupported(format!("corrupt result line from the guest: {e}"))
                    })?;
                    results.push(v);
                } else if let Some(j) = line.find(ERROR_MARK) {
                    return Err(Error::Unsupported(format!(
                        "the guest benchmark failed: {}",
                        &line[j + ERROR_MARK.len()..]
                    )));
                } else {
                    console.push(line);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = vm.child.wait();
    let agent = results
        .iter()
        .find(|v| v["kind"] == "agent")
        .cloned()
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "the guest powered off without results; last console lines: {}",
                tail(&console)
            ))
        })?;
    let report = |kind: &str| -> Result<HostReport, Error> {
        let v = results
            .iter()
            .find(|v| v["kind"] == kind)
            .ok_or_else(|| Error::Unsupported(format!("the guest reported no {kind} run")))?;
        serde_json::from_value(v["report"].clone())
            .map_err(|e| Error::Unsupported(format!("corrupt {kind} report from the guest: {e}")))
    };
    let optional = |kind: &str| -> Result<Option<HostReport>, Error> {
        match results.iter().find(|v| v["kind"] == kind) {
            None => Ok(None),
            Some(_) => report(kind).map(Some),
        }
    };
    drop(scratch);
    Ok(GuestRun {
        fork_one: optional("fork_one")?,
        fork_ltp: optional("fork_ltp")?,
        fork_placed: optional("fork_placed")?,
        fork_placed_ipis: results
            .iter()
            .find(|v| v["kind"] == "fork_placed_ipis")
            .map(|v| {
                let forks = v["forks"].as_f64().unwrap_or(1.0).max(1.0);
                v["by_callback"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, n)| (k.clone(), n.as_f64().unwrap_or(0.0) / forks))
                    .collect()
            })
            .unwrap_or_default(),
        collapse_trace: results
            .iter()
            .find(|v| v["kind"] == "collapse_trace")
            .map(|v| {
                v["by_event"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default(),
        kernel: agent["kernel"].as_str().unwrap_or("?").to_string(),
        accel: if kvm { "kvm" } else { "tcg" },
        pv_tlb_flush: agent["pv_tlb_flush"].as_bool().unwrap_or(false),
        steal_fraction: agent["steal_fraction"].as_f64().unwrap_or(0.0),
        madvise: report("madvise_dontneed")?,
        collapse: report("khugepaged_collapse")?,
    })
}

/// A scratch directory of this process, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, Error> {
        let d = std::env::temp_dir().join(format!(
            "tlblab-guest-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d)
            .map_err(|e| Error::Unsupported(format!("cannot create {}: {e}", d.display())))?;
        Ok(Scratch(d))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// QEMU 7.2's `virt,aia=aplic-imsic` device tree, minus the wired
/// interrupts of the UART and the RTC: with them a 6.12 kernel locks up in
/// boot (their APLIC lines storm). Dumped by QEMU for this vCPU count and
/// memory size, edited with `dtc`; the UART then runs polled.
fn riscv_aia_dtb(qemu: &Path, cpus: u32, mem_mib: u64, dir: &Path) -> Result<PathBuf, Error> {
    let (raw, dts, out) = (
        dir.join("aia.dtb"),
        dir.join("aia.dts"),
        dir.join("guest.dtb"),
    );
    let run = |cmd: &mut Command, what: &str| -> Result<(), Error> {
        let o = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Unsupported(format!("{what}: {e}")))?;
        if !o.status.success() {
            return Err(Error::Unsupported(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Ok(())
    };
    run(
        Command::new(qemu)
            .args(["-nodefaults", "-nographic", "-cpu", "rv64"])
            .arg("-machine")
            .arg(format!("virt,aia=aplic-imsic,dumpdtb={}", raw.display()))
            .args(["-smp", &cpus.to_string(), "-m", &mem_mib.to_string()]),
        "dumping the RISC-V device tree",
    )?;
    run(
        Command::new("dtc")
            .args(["-q", "-I", "dtb", "-O", "dts", "-o"])
            .arg(&dts)
            .arg(&raw),
        "dtc (decompile)",
    )?;
    let text = std::fs::read_to_string(&dts)
        .map_err(|e| Error::Unsupported(format!("cannot read {}: {e}", dts.display())))?;
    std::fs::write(
        &dts,
        strip_wired_interrupts(&text, &["serial@10000000", "rtc@101000"]),
    )
    .map_err(|e| Error::Unsupported(format!("cannot write {}: {e}", dts.display())))?;
    run(
        Command::new("dtc")
            .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
            .arg(&out)
            .arg(&dts),
        "dtc (compile)",
    )?;
    Ok(out)
}

/// `dts` without the `interrupts` and `interrupt-parent` properties of the
/// named nodes.
fn strip_wired_interrupts(dts: &str, nodes: &[&str]) -> String {
    let mut out = String::with_capacity(dts.len());
    let mut depth_in: Option<usize> = None;
    let mut depth = 0usize;
    for line in dts.lines() {
        let t = line.trim();
        if t.ends_with('{') {
            depth += 1;
            if depth_in.is_none() && nodes.iter().any(|n| t.starts_with(&format!("{n} "))) {
                depth_in = Some(depth);
            }
        }
        let drop = depth_in == Some(depth)
            && (t.starts_with("interrupts =") || t.starts_with("interrupt-parent ="));
        if t.starts_with('}') {
            if depth_in == Some(depth) {
                depth_in = None;
            }
            depth = depth.saturating_sub(1);
        }
        if !drop {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn tail(lines: &[String]) -> String {
    let n = lines.len();
    lines[n.saturating_sub(3)..].join(" | ")
}

/// Per-CPU (busy, steal) jiffies from `/proc/stat`.
fn cpu_times() -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            let total: u64 = f.iter().take(8).sum();
            (total, f.get(7).copied().unwrap_or(0))
        })
        .collect()
}

/// The guest side: PID 1 in the initramfs. Mounts what the benchmarks read,
/// runs them, prints the results on the console and powers off.
pub fn agent_main(madvise_iterations: u64, collapse_mib: u64, collapse_rounds: u64) -> ! {
    agent_main_with(madvise_iterations, collapse_mib, collapse_rounds, 0, false)
}

/// [`agent_main`] with the fork rows: `forks` children in all per
/// mmapstress01 run (0: none). With `fresh` (the riscv64 and arm64 guests'
/// agent) MADV_COLLAPSE and the fork rows each run in a fresh process born
/// on CPU0 (`in_fresh_process`).
pub fn agent_main_with(
    madvise_iterations: u64,
    collapse_mib: u64,
    collapse_rounds: u64,
    forks: u64,
    fresh: bool,
) -> ! {
    let mut out = std::io::stdout();
    let result = agent(
        madvise_iterations,
        collapse_mib,
        collapse_rounds,
        forks,
        fresh,
    );
    match result {
        Ok(lines) => {
            for l in lines {
                let _ = writeln!(out, "{RESULT_MARK}{l}");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "{ERROR_MARK}{e}");
        }
    }
    let _ = out.flush();
    // SAFETY: tcdrain on stdout; waits until the console has sent it all.
    unsafe {
        libc::tcdrain(1);
    }
    // The RISC-V guest's UART runs polled (no wired interrupt, see
    // `riscv_aia_dtb`): give it a moment before the power goes.
    if cfg!(not(target_arch = "x86_64")) && std::process::id() == 1 {
        std::thread::sleep(Duration::from_millis(500));
    }
    power_off()
}

fn agent(
    madvise_iterations: u64,
    collapse_mib: u64,
    collapse_rounds: u64,
    forks: u64,
    fresh: bool,
) -> Result<Vec<String>, Error> {
    if std::process::id() == 1 {
        mount("proc", "/proc", "proc")?;
        mount("sysfs", "/sys", "sysfs")?;
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let log = kernel_log();
    let pv = log.contains("KVM setup pv remote TLB flush");
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    // Collapse first, from CPU0 only: no other CPU has had this mm loaded, so
    // none is lazy in it (a lazy CPU would take one pmdp_collapse_flush IPI).
    // khugepaged would scan this process (MADV_HUGEPAGE registers it) and
    // collapse ranges on its own, each with a sync IPI to every CPU. With
    // "never" it stops; MADV_COLLAPSE ignores the sysfs setting (6.1+).
    let _ = std::fs::write("/sys/kernel/mm/transparent_hugepage/enabled", "never");
    // The report's thp_collapse_alloc counts the recorded rounds only.
    // With `fresh`, in a process born on CPU0 (see `in_fresh_process`).
    let collapse = if fresh {
        in_fresh_process(false, || {
            crate::collapse::run(collapse_mib << 20, collapse_rounds)
        })?
    } else {
        let _restore = crate::madvise::Affinity::save()?;
        crate::madvise::pin(0)?;
        crate::collapse::run(collapse_mib << 20, collapse_rounds)?
    };
    // One more round with the scheduler's, workqueue's and IPI tracepoints
    // on (those this kernel has): what sends the call-function IPIs a
    // collapse takes beyond its sync (information, `collapse_trace`).
    let collapse_trace = collapse_trace(|| {
        if fresh {
            in_fresh_process(false, || crate::collapse::run(collapse_mib << 20, 1)).map(|_| ())
        } else {
            let _restore = crate::madvise::Affinity::save()?;
            crate::madvise::pin(0)?;
            crate::collapse::run(collapse_mib << 20, 1).map(|_| ())
        }
    });
    let t0 = cpu_times();
    let madvise = crate::run("madvise_dontneed", ncpu - 1, madvise_iterations)?;
    let t1 = cpu_times();
    // Steal of the busy vCPUs (1..): time the host ran something else.
    let (mut total, mut steal) = (0u64, 0u64);
    for (a, b) in t0.iter().zip(&t1).skip(1) {
        total += b.0.saturating_sub(a.0);
        steal += b.1.saturating_sub(a.1);
    }
    let enc = |v: serde_json::Value| serde_json::to_string(&v).expect("json");
    let mut forked = Vec::new();
    if forks > 0 {
        // A 4 KiB shared file, as the model's mmapstress01 scenario.
        let one = in_fresh_process(true, || crate::guest_fork::run(1, forks, false))?;
        forked.push(enc(serde_json::json!({"kind": "fork_one", "report": one})));
        // LTP's own shape (nothing pinned; wait() then fork), traced where
        // tracefs is there: the trace's counts go into the report's `arch`.
        let mut text = None;
        let mut ltp = traced(&LTP_EVENTS, &mut text, || {
            in_fresh_process(true, || crate::guest_ltp::run(0, forks))
        })?;
        if let Some(t) = text {
            let pid = ltp.arch.get("parent_pid").copied().unwrap_or(0);
            crate::guest_ltp::count_trace(&t, pid, &mut ltp.arch);
            ltp.host["parent_migrations"] = crate::guest_ltp::parent_moves(&t, pid).into();
            ltp.arch.insert("traced".into(), 1);
        }
        ltp.host["sched_domains"] = sched_domains(0).into();
        forked.push(enc(serde_json::json!({"kind": "fork_ltp", "report": ltp})));
        let placed = in_fresh_process(true, || crate::guest_fork::run(1, forks, true))?;
        forked.push(enc(
            serde_json::json!({"kind": "fork_placed", "report": placed}),
        ));
        // The same once more with the kernel's IPI tracepoints on: which
        // callbacks the remaining call-function IPIs run (information).
        if fresh {
            if let Some(by) = ipi_callbacks(|| {
                in_fresh_process(true, || crate::guest_fork::run(1, forks, true)).map(|_| ())
            }) {
                forked.push(enc(serde_json::json!({
                    "kind": "fork_placed_ipis", "forks": forks, "by_callback": by,
                })));
            }
        }
    }
    Ok(forked
        .into_iter()
        .chain([
            enc(serde_json::json!({"kind": "madvise_dontneed", "report": madvise})),
            enc(serde_json::json!({"kind": "khugepaged_collapse", "report": collapse})),
            enc(serde_json::json!({"kind": "collapse_trace", "by_event": collapse_trace})),
            enc(serde_json::json!({
                "kind": "agent", "kernel": kernel, "pv_tlb_flush": pv, "cpus": ncpu,
                "steal_fraction": steal as f64 / total.max(1) as f64,
            })),
        ])
        .collect())
}

/// Run `f` in a child process forked while this thread is pinned to CPU0,
/// so the child's mm has been loaded on CPU0 alone: RISC-V never clears a
/// CPU from `mm_cpumask` (ASIDs), so a flush of the agent's own mm would
/// also reach every hart PID 1 ran on since boot (the madvise rows' busy
/// threads, the CPU the kernel started init on), which the model's
/// workloads, started on CPU0, do not have. The report comes back as JSON
/// on a pipe. Call only while this process has no other threads.
///
/// Without `widen` the child stays pinned to CPU0, and so do the threads it
/// spawns until they pin themselves (a new thread of an unpinned process
/// starts on the idlest CPU, which loads the mm there first). With `widen`
/// the child may use every CPU (mmapstress01 counts them and pins its
/// children to CPUs 1..): its parent thread may then start elsewhere
/// before it pins itself to CPU0.
fn in_fresh_process(
    widen: bool,
    f: impl FnOnce() -> Result<HostReport, Error>,
) -> Result<HostReport, Error> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _restore = crate::madvise::Affinity::save()?;
    crate::madvise::pin(0)?;
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(Error::Unsupported(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: the agent is single-threaded here (documented precondition):
    // the child may allocate and run the benchmark, and leaves by _exit.
    let pid = unsafe { crate::procs::fork()? };
    if pid == 0 {
        // SAFETY: the write end, owned by the child from here on.
        let mut w = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        // Born on CPU0 (CPU0 idles meanwhile: the parent waits on the
        // pipe, so nothing moves this thread off it).
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for c in 0..if widen { ncpu } else { 1 } {
                libc::CPU_SET(c, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        let out = match f() {
            Ok(r) => serde_json::json!({"ok": r}),
            Err(e) => serde_json::json!({"err": e.to_string()}),
        };
        let _ = w.write_all(out.to_string().as_bytes());
        drop(w);
        // SAFETY: leave without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: fds[1] is ours to close; fds[0] is owned by the File.
    unsafe { libc::close(fds[1]) };
    let mut r = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let mut text = String::new();
    let read = r.read_to_string(&mut text);
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    read.map_err(|e| Error::Unsupported(format!("reading the benchmark's process: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        Error::Unsupported(format!(
            "the benchmark's process ended without a report (wait status {status})"
        ))
    })?;
    match (v.get("ok"), v.get("err")) {
        (Some(ok), _) => serde_json::from_value(ok.clone())
            .map_err(|e| Error::Unsupported(format!("corrupt report: {e}"))),
        (_, Some(e)) => Err(Error::Unsupported(e.as_str().unwrap_or("?").to_string())),
        _ => Err(Error::Unsupported("empty report".into())),
    }
}

fn mount(src: &str, target: &str, fstype: &str) -> Result<(), Error> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (s, t, f) = (c(src), c(target), c(fstype));
    // SAFETY: valid NUL-terminated strings; no mount data.
    let rc = unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(Error::Unsupported(format!(
            "mount {fstype} on {target}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Run `f` with the `csd:csd_queue_cpu` tracepoint (kernel/smp.c, 6.4+:
/// one per call-function request queued on a CPU, with the function it will
/// run; a wake-up through the wake list shows as `sched_ttwu_pending`) and
/// `ipi:ipi_send_cpu` (reschedule IPIs: no callback) on, and count them by
/// function. `None` where tracefs or the events are missing.
fn ipi_callbacks(
    f: impl FnOnce() -> Result<(), Error>,
) -> Option<std::collections::BTreeMap<String, u64>> {
    let t = Path::new("/sys/kernel/tracing");
    if !t.join("events").exists() {
        mount("tracefs", "/sys/kernel/tracing", "tracefs").ok()?;
    }
    let w = |p: &str, v: &str| std::fs::write(t.join(p), v).ok();
    w("buffer_size_kb", "16384")?;
    w("trace", "")?;
    w("events/csd/csd_queue_cpu/enable", "1")?;
    let _ = w("events/ipi/ipi_send_cpu/enable", "1");
    let ran = f();
    let _ = w("events/csd/csd_queue_cpu/enable", "0");
    let _ = w("events/ipi/ipi_send_cpu/enable", "0");
    ran.ok()?;
    let text = std::fs::read_to_string(t.join("trace")).ok()?;
    let _ = w("trace", "");
    let mut by = std::collections::BTreeMap::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let field = |k: &str| {
            l.split_whitespace()
                .find_map(|x| x.strip_prefix(k))
                .map(|v| v.split('+').next().unwrap_or(v).to_string())
        };
        let key = match (field("func="), field("callback=")) {
            (Some(func), _) => func,
            (None, Some(cb)) if cb == "0x0" => "(reschedule IPI)".to_string(),
            _ => continue, // the IPI of a request counted above
        };
        *by.entry(key).or_insert(0) += 1;
    }
    Some(by)
}

/// Tracepoints of the traced collapse round, each enabled where this
/// kernel has it (6.1: no `csd` or `ipi_send_cpu` events; x86 only has
/// `irq_vectors`).
const COLLAPSE_EVENTS: [&str; 10] = [
    "tlb/tlb_flush",
    "irq_vectors/call_function_entry",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/reschedule_entry",
    "csd/csd_queue_cpu",
    "ipi/ipi_send_cpu",
    "sched/sched_waking",
    "sched/sched_wake_idle_without_ipi",
    "workqueue/workqueue_queue_work",
    "irq_vectors/local_timer_entry",
];

/// Run `f` (two collapse rounds: an unrecorded one and one) with
/// [`COLLAPSE_EVENTS`] on while the second round's `MADV_COLLAPSE` call
/// runs ([`crate::collapse::TRACE_AROUND_COLLAPSE`]), and the function
/// tracer's stacks of `smp_call_function_many_cond` and
/// `__smp_call_single_queue` (who queues call-function work); the events counted by
/// kind, the CPU they ran on and their telling fields (the function a csd
/// or a work item runs, the task woken and where). Empty where tracefs is
/// missing.
fn collapse_trace(
    f: impl FnOnce() -> Result<(), Error>,
) -> std::collections::BTreeMap<String, u64> {
    let by = std::collections::BTreeMap::new();
    let t = Path::new("/sys/kernel/tracing");
    if !t.join("events").exists() {
        let _ = mount("tracefs", "/sys/kernel/tracing", "tracefs");
    }
    let w = |p: &str, v: &str| std::fs::write(t.join(p), v).is_ok();
    if !(w("buffer_size_kb", "65536") && w("trace", "") && w("tracing_on", "0")) {
        return by;
    }
    // Who calls smp_call_function_many_cond (the mask IPIs, x86
    // CALL_FUNCTION_VECTOR): the function tracer with a stack per call.
    let stacks = w(
        "set_ftrace_filter",
        "smp_call_function_many_cond __smp_call_single_queue generic_exec_single nohz_csd_func",
    ) && w("options/func_stack_trace", "1")
        && w("current_tracer", "function");
    crate::collapse::TRACE_SKIP.store(1, std::sync::atomic::Ordering::Relaxed);
    crate::collapse::TRACE_AROUND_COLLAPSE.store(true, std::sync::atomic::Ordering::Relaxed);
    let on: Vec<&str> = COLLAPSE_EVENTS
        .iter()
        .copied()
        .filter(|e| w(&format!("events/{e}/enable"), "1"))
        .collect();
    let ran = f();
    crate::collapse::TRACE_AROUND_COLLAPSE.store(false, std::sync::atomic::Ordering::Relaxed);
    for e in &on {
        w(&format!("events/{e}/enable"), "0");
    }
    // (Read before the tracer changes: a change clears the buffer.)
    let text = std::fs::read_to_string(t.join("trace")).unwrap_or_default();
    if stacks {
        w("current_tracer", "nop");
        w("options/func_stack_trace", "0");
        w("set_ftrace_filter", "");
    }
    w("tracing_on", "1");
    let _ = w("trace", "");
    if ran.is_err() {
        return by;
    }
    count_collapse_trace(&text)
}

/// One trace line's key for [`count_collapse_trace`]: the event, the CPU it
/// ran on and its telling fields (the function a csd or work item runs,
/// the task woken and where); `None` for a line that is no event.
fn trace_event_key(l: &str) -> Option<String> {
    let cpu = l
        .split_whitespace()
        .find_map(|x| x.strip_prefix('[')?.strip_suffix(']'))
        .and_then(|c| c.parse::<u32>().ok());
    let field = |k: &str| {
        l.split_whitespace()
            .find_map(|x| x.strip_prefix(k))
            .map(|v| v.split('+').next().unwrap_or(v).to_string())
    };
    let event = l
        .split_whitespace()
        .map(|x| x.trim_end_matches(':'))
        .zip(l.split_whitespace())
        .find(|(e, x)| {
            x.ends_with(':') && e.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        })
        .map(|(e, _)| e)?;
    let on_cpu = cpu.map_or(String::new(), |c| format!(" on cpu{c}"));
    Some(match event {
        "csd_queue_cpu" => format!(
            "csd_queue_cpu func={} to cpu{}",
            field("func=").unwrap_or_default(),
            field("cpu=").unwrap_or_default()
        ),
        "ipi_send_cpu" => format!(
            "ipi_send_cpu callback={} to cpu{}",
            field("callback=").unwrap_or_default(),
            field("cpu=").unwrap_or_default()
        ),
        "sched_waking" => format!(
            "sched_waking {}{on_cpu} -> cpu{}",
            field("comm=").unwrap_or_default(),
            field("target_cpu=").unwrap_or_default()
        ),
        "sched_wake_idle_without_ipi" => {
            format!(
                "sched_wake_idle_without_ipi cpu{}",
                field("cpu=").unwrap_or_default()
            )
        }
        "workqueue_queue_work" => format!(
            "workqueue_queue_work function={}{on_cpu} -> cpu{}",
            field("function=").unwrap_or_default(),
            field("cpu=").unwrap_or_default()
        ),
        other => format!("{other}{on_cpu}"),
    })
}

/// [`collapse_trace`]'s text counted: each event by kind, CPU and telling
/// fields; each function-tracer stack (its first seven frames) by itself.
fn count_collapse_trace(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut by = std::collections::BTreeMap::new();
    // The function tracer's stacks: " => frame" lines after "<stack trace>".
    let mut frames: Vec<&str> = Vec::new();
    let flush = |frames: &mut Vec<&str>, by: &mut std::collections::BTreeMap<String, u64>| {
        if !frames.is_empty() {
            let key = format!(
                "stack {}",
                frames
                    .iter()
                    .take(7)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" < ")
            );
            *by.entry(key).or_insert(0) += 1;
            frames.clear();
        }
    };
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(f) = l.trim_start().strip_prefix("=> ") {
            frames.push(f.split('+').next().unwrap_or(f).trim());
            continue;
        }
        flush(&mut frames, &mut by);
        if l.contains("<stack trace>") {
            continue;
        }
        if let Some(key) = trace_event_key(l) {
            *by.entry(key).or_insert(0) += 1;
        }
    }
    flush(&mut frames, &mut by);
    by
}

/// `cpu`'s scheduling domains as the kernel built them (debugfs
/// sched/domains: each level's name and flags), lowest first; empty where
/// debugfs or CONFIG_SCHED_DEBUG is missing.
fn sched_domains(cpu: u32) -> Vec<String> {
    let d = Path::new("/sys/kernel/debug");
    if !d.join("sched").exists() {
        let _ = mount("debugfs", "/sys/kernel/debug", "debugfs");
    }
    let base = d.join(format!("sched/domains/cpu{cpu}"));
    let mut out = Vec::new();
    for k in 0.. {
        let dir = base.join(format!("domain{k}"));
        let Ok(name) = std::fs::read_to_string(dir.join("name")) else {
            break;
        };
        let flags = std::fs::read_to_string(dir.join("flags")).unwrap_or_default();
        let span = std::fs::read_to_string(dir.join("span")).unwrap_or_default();
        out.push(format!(
            "{} span {}: {}",
            name.trim(),
            span.trim(),
            flags.trim()
        ));
    }
    out
}

/// The events the LTP-shaped mmapstress01 run is traced with.
const LTP_EVENTS: [&str; 5] = [
    "csd/csd_queue_cpu",
    "sched/sched_migrate_task",
    "sched/sched_wakeup_new",
    "sched/sched_waking",
    "sched/sched_switch",
];

/// Run `f` with the tracefs `events` on; the trace text goes to `text`
/// (left `None` where tracefs or an event is missing: `f` still runs).
fn traced<R>(
    events: &[&str],
    text: &mut Option<String>,
    f: impl FnOnce() -> Result<R, Error>,
) -> Result<R, Error> {
    let t = Path::new("/sys/kernel/tracing");
    if !t.join("events").exists() {
        let _ = mount("tracefs", "/sys/kernel/tracing", "tracefs");
    }
    let w = |p: &str, v: &str| std::fs::write(t.join(p), v).is_ok();
    let on = w("buffer_size_kb", "16384")
        && w("trace", "")
        && events.iter().all(|e| w(&format!("events/{e}/enable"), "1"));
    let r = f();
    for e in events {
        w(&format!("events/{e}/enable"), "0");
    }
    if on && r.is_ok() {
        *text = std::fs::read_to_string(t.join("trace")).ok();
    }
    w("trace", "");
    r
}

/// The kernel log buffer (`dmesg`), via syslog(2) SYSLOG_ACTION_READ_ALL.
fn kernel_log() -> String {
    let mut buf = vec![0u8; 1 << 20];
    // SAFETY: the buffer is valid for its length.
    let n = unsafe { libc::klogctl(3, buf.as_mut_ptr() as *mut libc::c_char, buf.len() as i32) };
    buf.truncate(n.max(0) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// As PID 1 of the guest: power off (QEMU then exits). Anywhere else: exit.
fn power_off() -> ! {
    if std::process::id() != 1 {
        std::process::exit(0);
    }
    // SAFETY: sync and reboot take no pointers; as PID 1 in a throwaway VM,
    // powering off is the intended end.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    std::process::exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_newc_layout() {
        let mut c = Cpio::default();
        c.dir("bin");
        c.file("bin/x", 0o755, b"abcde");
        let b = c.finish();
        // Every header starts on a 4-byte boundary with the newc magic.
        assert_eq!(&b[..6], b"070701");
        // A 110-byte header, "bin\0", padded to a multiple of 4.
        let second = (110 + 4usize).next_multiple_of(4);
        assert_eq!(&b[second..second + 6], b"070701");
        // mode field of the file entry: regular, 0755
        assert_eq!(&b[second + 14..second + 22], b"000081ed");
        // filesize field = 5
        assert_eq!(&b[second + 54..second + 62], b"00000005");
        assert!(b.len().is_multiple_of(4));
        let s = String::from_utf8_lossy(&b);
        assert!(s.contains("TRAILER!!!"));
        assert!(s.contains("abcde"));
    }

    #[test]
    fn riscv_dtb_loses_only_the_uart_and_rtc_interrupts() {
        let dts = "/ {\n\tsoc {\n\t\trtc@101000 {\n\t\t\tinterrupts = <0x0b 0x04>;\n\t\t\tinterrupt-parent = <0x05>;\n\t\t\treg = <0x00>;\n\t\t};\n\t\tserial@10000000 {\n\t\t\tinterrupts = <0x0a 0x04>;\n\t\t\tinterrupt-parent = <0x05>;\n\t\t\tclock-frequency = <0x384000>;\n\t\t};\n\t\tvirtio_mmio@10001000 {\n\t\t\tinterrupts = <0x01 0x04>;\n\t\t\tinterrupt-parent = <0x05>;\n\t\t};\n\t};\n};\n";
        let s = strip_wired_interrupts(dts, &["serial@10000000", "rtc@101000"]);
        assert_eq!(s.matches("interrupts =").count(), 1, "{s}");
        assert_eq!(s.matches("interrupt-parent =").count(), 1, "{s}");
        assert!(s.contains("clock-frequency") && s.contains("reg = <0x00>"));
        assert!(s.contains("virtio_mmio@10001000 {\n\t\t\tinterrupts = <0x01"));
    }

    #[test]
    fn arch_names() {
        for a in ["x86_64", "riscv64", "arm64"] {
            assert_eq!(GuestArch::parse(a).unwrap().name(), a);
        }
        assert_eq!(GuestArch::parse("aarch64").unwrap(), GuestArch::Arm64);
        assert_eq!(GuestArch::parse("riscv").unwrap().model_arch(), "riscv");
        assert!(GuestArch::parse("mips").is_err());
    }

    /// The traced collapse round's text, as 6.1 (x86) and 6.12 print it:
    /// events keyed by kind, CPU and fields; the function tracer's stacks
    /// by their frames; its own call lines and the headers are no events.
    #[test]
    fn collapse_trace_lines_are_counted_by_event_and_stack() {
        let text = "# tracer: function\n\
            tlblab-1  [000] d.h1.  7.108770: local_timer_entry: vector=236\n\
            tlblab-1  [000] d.h1.  7.108990: local_timer_entry: vector=236\n\
            tlblab-9  [001] dn...  32.8: csd_queue_cpu: cpu=0 callsite=ttwu_queue_wakelist+0x120/0x134 func=sched_ttwu_pending csd=0000\n\
            tlblab-1  [000] ...1.  7.2: smp_call_function_many_cond <-smp_call_function\n\
            tlblab-1  [000] ...1.  7.2: <stack trace>\n \
            => 0xffffffffc05de083\n \
            => smp_call_function_many_cond+0x5/0x400\n \
            => smp_call_function+0x2/0x50\n";
        let by = super::count_collapse_trace(text);
        let got: Vec<(&str, u64)> = by.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            vec![
                ("csd_queue_cpu func=sched_ttwu_pending to cpu0", 1),
                ("local_timer_entry on cpu0", 2),
                (
                    "stack 0xffffffffc05de083 < smp_call_function_many_cond < smp_call_function",
                    1
                ),
            ]
        );
    }
}
