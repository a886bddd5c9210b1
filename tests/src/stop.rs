//! A clean stop for `demo`: on SIGINT, SIGTERM or SIGHUP (a terminal's Ctrl-C, a supervisor,
//! `kill` aimed at the program alone) everything the program started stops, the program
//! names what it stopped and exits with 128 + the signal's number, without a backtrace.
//!
//! The program becomes a child subreaper, so what its children leave behind (containerd's
//! shims, pod processes) stays among its descendants. The main thread asks [`requested`] at
//! its waits and returns; its drops stop what they own in the order they know (kubelet
//! before the containers it would restart), and [`finish`] kills whatever is left. When the
//! main thread is busy (starting the control plane) for longer than [`GRACE`], the signal's
//! thread kills every descendant itself and exits.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How long the main thread has to come to a wait and stop what it owns.
pub const GRACE: Duration = Duration::from_secs(30);

static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The main thread saw the stop and is stopping what it owns (drops may take long: a node
/// unmounts and kills its containers); the grace's fallback leaves it to it.
static SEEN: AtomicBool = AtomicBool::new(false);
static FINISHING: AtomicBool = AtomicBool::new(false);
/// The descendants when the main thread saw the stop.
static RUNNING: Mutex<BTreeMap<i32, String>> = Mutex::new(BTreeMap::new());

/// Say something on stderr; a terminal that hung up (SIGHUP) makes writes fail, and a
/// stop must go on regardless.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Become a subreaper and start listening for the stop signals.
pub fn install() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let signals = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>([
            (libc::SIGINT, signal(SignalKind::interrupt())?),
            (libc::SIGTERM, signal(SignalKind::terminate())?),
            (libc::SIGHUP, signal(SignalKind::hangup())?),
        ])
    })?;
    std::thread::spawn(move || runtime.block_on(listen(signals)));
    Ok(())
}

/// The first signal asks for a stop; a second one, or the grace running out before the
/// main thread saw the first, stops every process at once.
async fn listen(signals: [(i32, tokio::signal::unix::Signal); 3]) {
    let [(int, mut a), (term, mut b), (hup, mut c)] = signals;
    let mut next = async || {
        tokio::select! {
            _ = a.recv() => int,
            _ = b.recv() => term,
            _ = c.recv() => hup,
        }
    };
    let signal = next().await;
    SIGNAL.store(signal, Ordering::SeqCst);
    say!("\nstopping ({})…", name(signal));
    tokio::select! {
        again = next() => say!("{}: stopping every process now", name(again)),
        _ = grace() => say!("still busy after {GRACE:?}: stopping every process now"),
    }
    if !FINISHING.load(Ordering::SeqCst) {
        finish();
    }
}

/// The grace, unless the main thread saw the stop (then it never ends).
async fn grace() {
    tokio::time::sleep(GRACE).await;
    while SEEN.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// Whether a stop signal came: the main thread returns from its waits when it did (and
/// from then on stops what it owns, however long that takes).
pub fn requested() -> bool {
    let requested = SIGNAL.load(Ordering::SeqCst) != 0;
    if requested && !SEEN.swap(true, Ordering::SeqCst) {
        // What runs now is what the stop stops: the drops end most of it, finish the rest.
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = descendants(std::process::id() as i32);
    }
    requested
}

/// Sleep `wait` unless a stop is requested; true when it is.
pub fn sleep(wait: Duration) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if requested() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100).min(until - Instant::now()));
    }
    requested()
}

/// After the main thread dropped what it owns: kill what is left of the descendants
/// (SIGTERM, then SIGKILL), say what stopped, and exit with 128 + the signal's number.
pub fn finish() -> ! {
    FINISHING.store(true, Ordering::SeqCst);
    let mut stopped = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
    stopped.extend(stop_descendants());
    let names: Vec<String> = stopped
        .iter()
        .map(|(pid, name)| format!("{name} ({pid})"))
        .collect();
    if names.is_empty() {
        say!("stopped: it had started no process that was still running");
    } else {
        say!("stopped {} processes: {}", names.len(), names.join(", "));
    }
    let signal = SIGNAL.load(Ordering::SeqCst);
    std::process::exit(128 + if signal == 0 { libc::SIGTERM } else { signal });
}

/// Kill every live descendant; the ones that were alive, by pid, with their names.
fn stop_descendants() -> BTreeMap<i32, String> {
    let me = std::process::id() as i32;
    let found = descendants(me);
    for pid in found.keys() {
        // SAFETY: kill has no memory effects; a pid that ended meanwhile gives ESRCH.
        unsafe { libc::kill(*pid, libc::SIGTERM) };
    }
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until && !descendants(me).is_empty() {
        reap();
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in descendants(me).keys() {
        // SAFETY: as above.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    reap();
    found
}

/// Collect exited children (ours, and the orphans the subreaper inherited).
fn reap() {
    loop {
        // SAFETY: waitpid with a null status pointer and WNOHANG.
        let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        if pid <= 0 {
            break;
        }
    }
}

/// Live (not zombie) descendants of `root`, by pid, with their command names.
pub fn descendants(root: i32) -> BTreeMap<i32, String> {
    let mut parent = BTreeMap::new();
    let mut names = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((name, state, ppid)) = parse_stat(&stat)
            && state != 'Z'
        {
            parent.insert(pid, ppid);
            names.insert(pid, name);
        }
    }
    let mut found = BTreeMap::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, _) in parent.iter().filter(|(_, pp)| **pp == p) {
            if found.insert(*child, names[child].clone()).is_none() {
                frontier.push(*child);
            }
        }
    }
    found
}

/// `pid (comm) state ppid …`: the command may hold spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(String, char, i32)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((name, state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(
            parse_stat("42 (kube-apiserver) S 7 42 42 0"),
            Some(("kube-apiserver".into(), 'S', 7))
        );
        assert_eq!(
            parse_stat("43 (a (b) c) Z 42 1"),
            Some(("a (b) c".into(), 'Z', 42))
        );
    }

    #[test]
    fn a_child_and_its_child_are_descendants() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let sh = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(5);
        // Other tests of this binary start processes too: only the shell's count.
        let mut found = descendants(sh);
        while found.values().all(|n| n != "sleep") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            found = descendants(sh);
        }
        // From this process down: the shell, and the shell's own child.
        let mine = descendants(std::process::id() as i32);
        assert_eq!(mine.get(&sh).map(String::as_str), Some("sh"), "{mine:?}");
        assert!(found.keys().all(|pid| mine.contains_key(pid)), "{mine:?}");
        for pid in found.keys() {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.values().any(|n| n == "sleep"), "{found:?}");
    }
}
