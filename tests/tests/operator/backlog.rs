//! A backlog is no stall: with two workers and every request about its Runtimes served
//! half a second late, a burst of Runtimes waits its turn longer than `--stall-timeout`
//! (kube-runtime takes the objects due beyond `--workers` in hash order). The watchdog
//! excuses them, since the workers were busy and reconciles kept ending: `/healthz` never
//! fails, nothing is logged as stalled, and every Runtime gets Ready. The scenario checks
//! that some Runtime's first reconcile really came later than the timeout; without the
//! excuse, `/healthz` fails here.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_tests::probe::{http_get, tail};

use super::{ControlPlane, LIMIT, Result, RuntimeState, Scenario};

const RUNTIMES: usize = 40;
/// The simulator's outage code that serves each request half a second late.
const SLOW: u16 = 998;
const STALL_TIMEOUT: Duration = Duration::from_secs(12);
/// What is slow: the Runtimes of the scenario's namespace (each reconcile reads or writes
/// its Runtime), not its Leases (the leader fence needs an answer within a quarter of the
/// lease).
const RUNTIMES_PATH: &str = "/namespaces/t-backlog/runtimes";

pub(super) async fn backlog_is_no_stall(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-backlog").await;
    cp.sim_outage_any(RUNTIMES_PATH, Some(SLOW));
    let stall = format!("{}s", STALL_TIMEOUT.as_secs());
    let args = [
        "--workers",
        "2",
        "--stall-timeout",
        &stall,
        "--requeue-pending",
        "2s",
        "--requeue-error-max",
        "4s",
    ];
    let host = s.host("a", &args);
    let addr = host.metrics_addr(LIMIT).ok_or("no metrics address")?;
    for i in 0..RUNTIMES {
        let doc = s.manifest(&format!("rt-bl{i}"), &format!("backlog{i}"));
        s.create(&doc).await?;
    }
    let result = healthy_until_ready(&s, &addr).await;
    cp.sim_outage_any(RUNTIMES_PATH, None);
    result.map_err(|e| format!("{e}\n{}", tail(&host.logs(), 30)))?;
    if host.logs().contains("controller stalled") {
        return Err(format!("a stall was logged:\n{}", tail(&host.logs(), 30)));
    }
    let latest = latest_first_reconcile(&s, &host.logs()).await?;
    println!(
        "backlog_is_no_stall: the last first reconcile {latest:.1} s after its Runtime was created (stall timeout {}s)",
        STALL_TIMEOUT.as_secs()
    );
    // The watchdog sees a waiting object at its next listing (a quarter of the timeout)
    // and calls it stalled a whole timeout later: a shorter wait tests nothing.
    if latest < (STALL_TIMEOUT + STALL_TIMEOUT / 2).as_secs_f64() {
        return Err(format!(
            "no Runtime waited long enough ({latest:.1} s) to test the watchdog"
        ));
    }
    Ok(())
}

/// Poll `/healthz` every half second until every Runtime is Ready.
async fn healthy_until_ready(s: &Scenario<'_>, addr: &str) -> Result {
    let started = Instant::now();
    loop {
        if let Err(e) = http_get(addr, "/healthz").await {
            return Err(format!(
                "/healthz failed {:.1} s into the backlog: {e}",
                started.elapsed().as_secs_f64()
            ));
        }
        let ready = s
            .runtimes()
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|r| r.status.as_ref().and_then(|s| s.state) == Some(RuntimeState::Ready))
            .count();
        if ready == RUNTIMES {
            return Ok(());
        }
        if started.elapsed() > LIMIT * 5 {
            return Err(format!("only {ready} of {RUNTIMES} Ready"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The longest any Runtime waited from its creation to its first state transition (its
/// first reconcile), in seconds, from the host's log.
async fn latest_first_reconcile(s: &Scenario<'_>, logs: &str) -> Result<f64> {
    let mut first: HashMap<String, jiff::Timestamp> = HashMap::new();
    for line in logs.lines().filter(|l| l.contains("\"transition\"")) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(rt), Some(at)) = (v["fields"]["runtime"].as_str(), v["timestamp"].as_str())
        else {
            continue;
        };
        if let Ok(at) = at.parse() {
            first.entry(rt.to_string()).or_insert(at);
        }
    }
    let runtimes = s
        .runtimes()
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let waits = runtimes.items.iter().filter_map(|r| {
        let created = r.metadata.creation_timestamp.as_ref()?.0;
        let at = first.get(r.metadata.name.as_deref()?)?;
        Some(at.duration_since(created).as_secs_f64())
    });
    Ok(waits.fold(0.0, f64::max))
}
