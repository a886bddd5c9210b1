//! Sharding (`tessera run --sharding`) against the real API server: replicas split the
//! Runtimes, a Runtime's RuntimeKubeconfig goes with it, a replica killed hands its
//! objects over once its Lease expires, one joining takes its share through the drain
//! step, and one stopping gives its Lease back so that its objects move at once. Every
//! Shoot is created once, and every move leaves objects that still make progress.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use tessera::crd::{RuntimeKubeconfig, labels};
use tessera_tests::probe::{eventually, http_get, tail};

use super::{
    ControlPlane, Host, LIMIT, Result, RuntimeState, Scenario, create_orphaned_kubeconfig,
};

const RUNTIMES: usize = 8;
/// `--lease-duration` of the scenario's hosts.
const LEASE: Duration = Duration::from_secs(6);

fn id(i: usize) -> String {
    format!("rt-shard-{i}")
}

fn shard_host(s: &Scenario<'_>, shard: &str) -> Host {
    s.host(shard, &["--sharding", "--identity", shard])
}

/// Each Runtime's shard label (Runtimes without one are missing).
async fn placement(s: &Scenario<'_>) -> BTreeMap<String, String> {
    let runtimes = s.runtimes().list(&ListParams::default()).await;
    runtimes
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| Some((r.name_any(), r.labels().get(labels::SHARD)?.clone())))
        .collect()
}

/// Wait until every Runtime named in `ids` is on one of `shards` with no drain label left.
async fn settled_on(
    s: &Scenario<'_>,
    ids: &[String],
    shards: &[&str],
    limit: Duration,
) -> Result<BTreeMap<String, String>> {
    eventually(&format!("Runtimes on {shards:?}"), limit, || async {
        let all = s.runtimes().list(&ListParams::default()).await.ok()?;
        let draining = all
            .items
            .iter()
            .any(|r| r.labels().contains_key(labels::DRAIN));
        let placed = placement(s).await;
        let on = ids
            .iter()
            .all(|i| placed.get(i).is_some_and(|p| shards.contains(&p.as_str())));
        (on && !draining).then_some(placed)
    })
    .await
}

/// Every Runtime's RuntimeKubeconfig carries its Runtime's shard.
async fn kubeconfigs_follow(s: &Scenario<'_>) -> Result {
    let placed = placement(s).await;
    let rkcs: Api<RuntimeKubeconfig> = Api::namespaced(s.client.clone(), &s.ns);
    eventually(
        "RuntimeKubeconfigs on their Runtime's shard",
        LIMIT,
        || async {
            let rkcs = rkcs.list(&ListParams::default()).await.ok()?;
            rkcs.items
                .iter()
                .all(|k| k.labels().get(labels::SHARD) == placed.get(&k.spec.runtime))
                .then_some(())
        },
    )
    .await
}

async fn all_ready(s: &Scenario<'_>, ids: &[String], hosts: &[&Host]) -> Result {
    for i in ids {
        s.wait_state(i, RuntimeState::Ready, hosts[0])
            .await
            .map_err(|e| {
                let logs: Vec<String> = hosts.iter().map(|h| tail(&h.logs(), 20)).collect();
                format!("{e}\n== other hosts\n{}", logs.join("\n=="))
            })?;
    }
    Ok(())
}

/// Delete Runtime `id` and wait until it is gone (its shard released the finalizer).
async fn deleted(s: &Scenario<'_>, id: &str) -> Result<Duration> {
    let started = Instant::now();
    s.runtimes()
        .delete(id, &DeleteParams::default())
        .await
        .map_err(|e| format!("delete {id}: {e}"))?;
    eventually(&format!("Runtime {id} gone"), LIMIT, || async {
        s.runtimes().get_opt(id).await.ok()?.is_none().then_some(())
    })
    .await?;
    Ok(started.elapsed())
}

/// One Shoot per Runtime, each created once (the simulator notes every uid a name had).
fn created_once(s: &Scenario<'_>, ids: &[String]) -> Result {
    let stats = s.cp.sim_stats();
    for i in ids {
        let shoot = format!("shoot/{}", i.trim_start_matches("rt-"));
        let made = stats["byObject"][&shoot]["uids"]
            .as_array()
            .map_or(0, Vec::len);
        if made != 1 {
            return Err(format!("{shoot} was created {made} time(s)"));
        }
    }
    Ok(())
}

pub(super) async fn shards_split_and_hand_over(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-shard").await;
    // Swept by the leader once it has nothing to move.
    create_orphaned_kubeconfig(&s, "kubeconfig-ghost").await?;
    let mut a = shard_host(&s, "shard-a");
    let b = shard_host(&s, "shard-b");
    let ids: Vec<String> = (0..RUNTIMES).map(id).collect();
    // Both replicas take part from the first Runtime on.
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    for shard in ["shard-a", "shard-b"] {
        eventually(&format!("{shard} holding its Lease"), LIMIT, || async {
            let lease = leases
                .get_opt(&format!("tessera-shard-{shard}"))
                .await
                .ok()??;
            (lease.spec?.holder_identity.as_deref() == Some(shard)).then_some(())
        })
        .await?;
    }
    for (i, rt) in ids.iter().enumerate() {
        s.create(&s.manifest(rt, &format!("shard-{i}"))).await?;
    }
    all_ready(&s, &ids, &[&a, &b]).await?;
    let placed = settled_on(&s, &ids, &["shard-a", "shard-b"], LIMIT).await?;
    let on_a: Vec<String> = placed
        .iter()
        .filter(|(_, shard)| *shard == "shard-a")
        .map(|(rt, _)| rt.clone())
        .collect();
    if on_a.is_empty() || on_a.len() == RUNTIMES {
        return Err(format!("the Runtimes were not split: {placed:?}"));
    }
    kubeconfigs_follow(&s).await?;
    eventually("the leader to sweep the orphaned Secret", LIMIT, || async {
        let left = s.secrets().get_opt("kubeconfig-ghost").await.ok()?;
        left.is_none().then_some(())
    })
    .await?;
    let created = [&a, &b].map(|h| h.logs().matches("Shoot created").count());
    if created.contains(&0) || created.iter().sum::<usize>() != RUNTIMES {
        return Err(format!(
            "Shoots created by shard-a and shard-b: {created:?}, for {RUNTIMES} Runtimes ({placed:?})"
        ));
    }
    let gone = handover_after_kill(&s, &mut a, &b, &ids, &on_a).await?;
    let live: Vec<String> = ids.iter().filter(|i| **i != gone).cloned().collect();
    join_and_leave(&s, &b, &live).await?;
    created_once(&s, &ids)
}

/// Kill -9 shard-a: once its Lease expires the leader takes it and moves its Runtimes to
/// shard-b, where they make progress (one is deleted); its Lease goes once empty.
async fn handover_after_kill(
    s: &Scenario<'_>,
    a: &mut Host,
    b: &Host,
    ids: &[String],
    on_a: &[String],
) -> Result<String> {
    a.kill();
    let killed = Instant::now();
    settled_on(s, ids, &["shard-b"], 4 * LEASE + LIMIT / 2).await?;
    let moved = killed.elapsed();
    let gone = deleted(s, &on_a[0]).await?;
    let live: Vec<String> = ids.iter().filter(|i| **i != on_a[0]).cloned().collect();
    all_ready(s, &live, &[b]).await?;
    expiries_exported(s, b, &on_a[1..]).await?;
    eprintln!(
        "sharding: {} Runtimes of a killed replica moved after {moved:?} (lease {LEASE:?}); one deleted {gone:?} later",
        on_a.len()
    );
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    eventually("the dead shard's Lease deleted", LIMIT, || async {
        leases
            .get_opt("tessera-shard-shard-a")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n== b\n{}", tail(&b.logs(), 20)))?;
    Ok(on_a[0].clone())
}

/// The survivor exports the kubeconfig expiry of each Runtime it took over, though it
/// rotated none of them: the alert on that expiry must not go blind after a handover.
async fn expiries_exported(s: &Scenario<'_>, b: &Host, taken: &[String]) -> Result {
    kubeconfigs_follow(s).await?;
    let addr = b
        .metrics_addr(LIMIT)
        .ok_or("shard-b logged no metrics address")?;
    let series = |rt: &String| {
        format!(
            r#"tessera_kubeconfig_expiration_timestamp_seconds{{namespace="{}",runtime="{rt}"}}"#,
            s.ns
        )
    };
    eventually(
        "the taken kubeconfigs' expiry on shard-b",
        LIMIT,
        || async {
            let metrics = http_get(&addr, "/metrics").await.ok()?;
            taken
                .iter()
                .all(|rt| metrics.contains(&series(rt)))
                .then_some(())
        },
    )
    .await
    .map_err(|e| format!("{e}\n== b\n{}", tail(&b.logs(), 20)))
}

/// shard-c joins and takes its share through the drain step (nothing is worked on twice:
/// every Runtime stays Ready with one Shoot); it stops with SIGTERM, gives its Lease back,
/// and its Runtimes move back to shard-b well within a lease duration.
async fn join_and_leave(s: &Scenario<'_>, b: &Host, live: &[String]) -> Result {
    let mut c = shard_host(s, "shard-c");
    eventually("shard-c to take its share", LIMIT, || async {
        let placed = placement(s).await;
        placed.values().any(|p| p == "shard-c").then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n== c\n{}", tail(&c.logs(), 20)))?;
    let placed = settled_on(s, live, &["shard-b", "shard-c"], LIMIT).await?;
    kubeconfigs_follow(s).await?;
    all_ready(s, live, &[&c, b]).await?;
    let on_c = placed.values().filter(|p| *p == "shard-c").count();
    if !b.logs().contains("let go to another shard") {
        return Err(format!(
            "shard-b did not let a Runtime go through the drain step:\n{}",
            tail(&b.logs(), 20)
        ));
    }
    match c.terminate(Duration::from_secs(30)) {
        Some(status) if status.success() => {}
        ended => return Err(format!("SIGTERM ended shard-c with {ended:?}")),
    }
    let stopped = Instant::now();
    settled_on(s, live, &["shard-b"], LIMIT).await?;
    let back = stopped.elapsed();
    eprintln!("sharding: {on_c} Runtimes of a stopped replica back on shard-b after {back:?}");
    if back >= LEASE {
        return Err(format!(
            "a replica that gave its Lease back held its Runtimes for {back:?} (lease {LEASE:?})"
        ));
    }
    all_ready(s, live, &[b]).await
}
