//! Giving freed memory back to the system. glibc keeps what a process frees for its next
//! allocations, in up to eight arenas per core: at 10,000 Runtimes over three replicas a
//! third of each replica's heap was free but held (`malloc_stats`: 142 MB in use of 219 MB
//! taken), mostly left by bursts (lists, relabelling, a failover) that the steady state
//! never needs again, and one `malloc_trim` gave 24 MiB back (docs/performance.md).

use std::time::Duration;

/// How often: a trim walks every arena under its lock, a few milliseconds at 200 MiB.
const EVERY: Duration = Duration::from_secs(30);

/// Trim the heap every [`EVERY`], while the controllers run.
pub(crate) async fn give_back_forever() -> std::convert::Infallible {
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // Off the async workers: it holds each arena's lock while it walks it.
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}

/// Return the free pages of every arena to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointers and is safe to call from any thread.
    unsafe { libc::malloc_trim(0) };
}

/// Other allocators have no such call; musl's (the static image's) unmaps freed memory by
/// itself. The benchmarks' figures are glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
