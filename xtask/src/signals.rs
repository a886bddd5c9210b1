//! `./x demo` runs the demo as its child. A stop signal that reaches only `./x demo` (a
//! supervisor, `kill -INT`, a closed terminal) is passed on to the demo, which stops what
//! it started and says so; `./x demo` then ends as the demo did, without an error of its
//! own. The demo has its own process group, so a terminal's Ctrl-C reaches it once, through
//! here, and not twice.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{Context, Result, bail};

/// The child ended because it was asked to stop: its exit code (128 + the signal).
#[derive(Debug)]
pub(crate) struct Stopped(pub(crate) u8);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by a signal (exit code {})", self.0)
    }
}

impl std::error::Error for Stopped {}

static CHILD: AtomicI32 = AtomicI32::new(0);
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Run `cmd` in its own process group, passing SIGINT, SIGTERM and SIGHUP on to it.
pub(crate) fn run_forwarding(mut cmd: Command) -> Result<()> {
    eprintln!("+ {cmd:?}");
    cmd.process_group(0);
    let handler = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only touches atomics and calls kill.
        unsafe { libc::signal(signal, handler) };
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot run {cmd:?}"))?;
    let pid = child.id() as i32;
    CHILD.store(pid, Ordering::SeqCst);
    // A signal that came while the child was being started found no one to pass it to.
    let early = RECEIVED.load(Ordering::SeqCst);
    if early != 0 {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(pid, early) };
    }
    let status = child.wait()?;
    CHILD.store(0, Ordering::SeqCst);
    if status.success() {
        return Ok(());
    }
    // Only a stop we passed on is a quiet end; a crash (a signal of its own) is an error.
    if RECEIVED.load(Ordering::SeqCst) != 0 {
        let code = status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(130);
        return Err(Stopped(u8::try_from(code).unwrap_or(130)).into());
    }
    bail!("{cmd:?} failed with {status}")
}
