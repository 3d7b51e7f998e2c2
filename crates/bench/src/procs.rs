//! Forked child processes for the multi-process benchmarks (will-it-scale's
//! `*_processes` runners, LTP's mmapstress01): each child is pinned, dies with
//! its parent (`PR_SET_PDEATHSIG`), and is killed and reaped by [`Children`]'s
//! drop on every path out of the benchmark (error, panic, early return).

use machine::Error;

/// Exit codes a child uses to say what failed (read back by [`Children::wait`]).
pub(crate) const CHILD_PIN: i32 = 3;
pub(crate) const CHILD_PANIC: i32 = 101;

/// `fork()`: 0 in the child, the child's pid in the parent, or the
/// error (`Error::Unsupported`, with errno).
///
/// # Safety
/// As `libc::fork`: in a multi-threaded process the child may only make
/// async-signal-safe calls until it execs or exits.
pub(crate) unsafe fn fork() -> Result<libc::pid_t, Error> {
    // SAFETY: the caller's contract.
    match unsafe { libc::fork() } {
        -1 => Err(Error::Unsupported(format!(
            "fork: {}",
            std::io::Error::last_os_error()
        ))),
        pid => Ok(pid),
    }
}

/// What a child's exit code means, for error messages.
pub(crate) fn describe(code: i32) -> String {
    match code {
        CHILD_PIN => "could not pin itself to its CPU".into(),
        CHILD_PANIC => "panicked".into(),
        c if c >= 128 => format!("was killed by signal {}", c - 128),
        c => format!("exited with code {c}"),
    }
}

/// Child processes of this benchmark: on drop each one still running is
/// SIGKILLed and every one is reaped, so no process outlives the run.
pub(crate) struct Children {
    pids: Vec<libc::pid_t>,
}

impl Children {
    /// No children yet.
    pub(crate) fn new() -> Children {
        Children { pids: Vec::new() }
    }

    /// Children forked and not yet reaped.
    pub(crate) fn len(&self) -> usize {
        self.pids.len()
    }

    /// The oldest child not yet reaped.
    pub(crate) fn oldest(&self) -> Option<libc::pid_t> {
        self.pids.first().copied()
    }

    /// Fork a child pinned to `cpu` that runs `body` and `_exit`s with its
    /// result; the child never returns into the caller's code (so never runs
    /// the parent's destructors). `body` runs in a copy of a possibly
    /// multi-threaded process: it must not take locks another thread may have
    /// held at fork time (no allocation, no stdio).
    pub(crate) fn spawn(
        &mut self,
        cpu: usize,
        body: impl FnOnce() -> i32,
    ) -> Result<libc::pid_t, Error> {
        self.pids.reserve(1);
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork has no preconditions; the child only makes
        // async-signal-safe calls before running `body`, which is documented
        // to avoid locks, and it leaves with _exit.
        let pid = unsafe { fork()? };
        if pid == 0 {
            child_start(parent, cpu, body);
        }
        self.pids.push(pid);
        Ok(pid)
    }

    /// Reap `pid`: its exit code, or 128 + the signal that killed it.
    pub(crate) fn wait(&mut self, pid: libc::pid_t) -> Result<i32, Error> {
        let status = waitpid_retry(pid)?;
        self.pids.retain(|p| *p != pid);
        Ok(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else if libc::WIFSIGNALED(status) {
            128 + libc::WTERMSIG(status)
        } else {
            255
        })
    }

    /// Reap every child, failing with the first one that did not exit 0.
    pub(crate) fn wait_all(&mut self, what: &str) -> Result<(), Error> {
        let mut first = Ok(());
        while let Some(pid) = self.oldest() {
            let code = self.wait(pid)?;
            if code != 0 && first.is_ok() {
                first = Err(Error::Unsupported(format!(
                    "{what}: child process {pid} {}",
                    describe(code)
                )));
            }
        }
        first
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: pid is our own unreaped child, so it cannot have been
            // recycled for another process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for pid in std::mem::take(&mut self.pids) {
            let _ = waitpid_retry(pid);
        }
    }
}

/// `waitpid(pid, &status, 0)`, retried on EINTR.
fn waitpid_retry(pid: libc::pid_t) -> Result<libc::c_int, Error> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer; pid is our child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(Error::Unsupported(format!("waitpid({pid}): {e}")));
        }
    }
}

/// In the child: default SIGINT/SIGTERM, die with the parent, pin, run, `_exit`.
fn child_start(parent: libc::pid_t, cpu: usize, body: impl FnOnce() -> i32) -> ! {
    // SAFETY: signal, prctl, getppid, sched_setaffinity and _exit are
    // async-signal-safe; a zeroed cpu_set_t is valid and CPU_SET writes
    // inside it. The parent's SIGINT/SIGTERM cleanup handler (tracefs) must
    // not run here, hence SIG_DFL.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // The parent may have died before prctl took effect.
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            libc::_exit(CHILD_PIN);
        }
    }
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(CHILD_PANIC);
    // SAFETY: _exit skips atexit handlers and destructors, which belong to
    // the parent's copy of the program.
    unsafe { libc::_exit(code) }
}

/// A pipe (both ends `O_CLOEXEC`), each end closed on drop.
pub(crate) struct Pipe {
    pub(crate) r: Fd,
    pub(crate) w: Fd,
}

impl Pipe {
    /// `pipe2(O_CLOEXEC)`.
    pub(crate) fn new() -> Result<Pipe, Error> {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid 2-element out-array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::Unsupported(format!(
                "pipe2: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Pipe {
            r: Fd(fds[0]),
            w: Fd(fds[1]),
        })
    }
}

/// An owned file descriptor, closed on drop (or by [`Fd::close`]).
pub(crate) struct Fd(pub(crate) libc::c_int);

impl Fd {
    /// Close now (idempotent).
    pub(crate) fn close(&mut self) {
        if self.0 >= 0 {
            // SAFETY: we own the fd; it is closed once and then forgotten.
            unsafe { libc::close(self.0) };
            self.0 = -1;
        }
    }

    /// Write all of `buf`, retrying short writes and EINTR; false on error.
    /// Async-signal-safe (used by children).
    pub(crate) fn write_all(&self, mut buf: &[u8]) -> bool {
        while !buf.is_empty() {
            // SAFETY: buf is valid for buf.len() bytes.
            let n = unsafe { libc::write(self.0, buf.as_ptr() as *const libc::c_void, buf.len()) };
            if n > 0 {
                buf = &buf[n as usize..];
            } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            } else {
                return false;
            }
        }
        true
    }

    /// Fill `buf` exactly; Ok(false) on end of file before the first byte.
    pub(crate) fn read_exact(&self, buf: &mut [u8]) -> Result<bool, Error> {
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: the tail of buf is valid for writes of its length.
            let n = unsafe {
                libc::read(
                    self.0,
                    buf[got..].as_mut_ptr() as *mut libc::c_void,
                    buf.len() - got,
                )
            };
            if n > 0 {
                got += n as usize;
            } else if n == 0 {
                if got == 0 {
                    return Ok(false);
                }
                return Err(Error::Unsupported("short read from a child's pipe".into()));
            } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(Error::Unsupported(format!(
                    "read from a child's pipe: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
        Ok(true)
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        self.close();
    }
}

/// `CLOCK_MONOTONIC` in ns: async-signal-safe, and a plain number a child
/// can send through a pipe (an `Instant` is not).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_children_kills_and_reaps_them() {
        let mut c = Children::new();
        let pid = c
            .spawn(0, || {
                // SAFETY: pause just sleeps until a signal.
                unsafe { libc::pause() };
                0
            })
            .unwrap();
        drop(c);
        // Reaped: no such child any more.
        // SAFETY: a non-blocking probe of a pid that was our child.
        let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!(r, -1, "the child was reaped by the guard");
        // SAFETY: signal 0 only checks existence.
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "the child is gone");
    }

    #[test]
    fn child_exit_codes_come_back() {
        let mut c = Children::new();
        let a = c.spawn(0, || 7).unwrap();
        let b = c.spawn(0, || panic!("boom")).unwrap();
        assert_eq!(c.wait(a).unwrap(), 7);
        assert_eq!(c.wait(b).unwrap(), CHILD_PANIC);
        assert_eq!(c.len(), 0);
        let mut c = Children::new();
        c.spawn(0, || 0).unwrap();
        c.spawn(0, || 5).unwrap();
        let e = c.wait_all("t").unwrap_err().to_string();
        assert!(e.contains("exited with code 5"), "{e}");
    }
}
