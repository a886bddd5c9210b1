//! The chart installed for real: `helm install` of `charts/tessera` with the test image of
//! the test build's host (`./x test` builds it, docs/image.md#test-images), onto a cluster with a real node (kubelet, controllers, containerd, runc), the host
//! in two pods against the Gardener simulator. A Runtime becomes Ready with its kubeconfig
//! Secret, a ModuleSet's Deployment really becomes available, another host takes over when
//! the leader's pod is deleted, a leader whose connections went silent fails its liveness
//! probe and is restarted by the kubelet, `helm upgrade` to a second build of the host (another
//! image digest, its version `-next`) loses and repeats nothing,
//! and `helm uninstall` leaves only what the chart documents (the CRDs).

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};
use tessera_tests::Result;
use tessera_tests::blackhole::Blackhole;
use tessera_tests::env::{ControlPlane, NodeOn, PlaneOptions};
use tessera_tests::gardener_sim::Script;
use tessera_tests::install::{
    IMAGE, NS, apiserver_port, diagnose, helm, install, json_of, modules_available, new_runtime,
    runtime_ready, wait_for,
};
use tessera_tests::modules::kubectl_ok;
use tessera_tests::node::PAUSE_IMAGE;
use tessera_tests::registry::TestRegistry;

fn lease_holder(cp: &ControlPlane) -> Option<String> {
    let lease = json_of(&cp.garden, &["-n", NS, "get", "lease", "tessera"]).ok()?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_string)
}

/// The host's pods (the chart's Deployment), as `kubectl get -o json` lists them.
fn host_pods(cp: &ControlPlane) -> Result<Vec<Value>> {
    let pods = json_of(
        &cp.garden,
        &[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=tessera",
        ],
    )?;
    Ok(pods["items"].as_array().cloned().unwrap_or_default())
}

/// The names of the host's pods that are not being deleted.
fn live_host_pods(cp: &ControlPlane) -> Result<Vec<String>> {
    Ok(host_pods(cp)?
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect())
}

/// Whether the Lease identity `holder` is pod `pod`'s: sharding replicas are named after
/// their pod, others `<hostname>-<pid>` (a pod's hostname is its name).
fn is_pods(holder: &str, pod: &str) -> bool {
    holder == pod || holder.starts_with(&format!("{pod}-"))
}

/// Every live host pod holds its shard lease, so the sharder has placed ModuleSet `local`
/// among all of them (a pod made at the failover joins later, and sets move to it then),
/// and the set is on one of them.
fn shards_settled(cp: &ControlPlane) -> Result {
    wait_for("every host on its shard, ModuleSet local on one", || {
        let pods = live_host_pods(cp).ok()?;
        let held = |pod: &String| {
            let lease = format!("tessera-shard-{pod}");
            let lease = json_of(&cp.garden, &["-n", NS, "get", "lease", &lease]).ok()?;
            (lease["spec"]["holderIdentity"] == pod.as_str()).then_some(())
        };
        pods.iter().try_for_each(held)?;
        let set = json_of(&cp.garden, &["-n", NS, "get", "moduleset", "local"]).ok()?;
        let shard = set["metadata"]["labels"]["tessera.dev/shard"].as_str()?;
        pods.iter().any(|p| p == shard).then_some(())
    })
}

/// The pod holding the lease.
fn leader_pod(cp: &ControlPlane) -> Result<String> {
    let holder = wait_for("a leader", || lease_holder(cp))?;
    let pods = live_host_pods(cp)?;
    let leader = pods
        .iter()
        .find(|p| is_pods(&holder, p))
        .ok_or_else(|| format!("lease holder {holder} is none of the pods {pods:?}"))?
        .clone();
    Ok(leader)
}

/// The leader's pod is deleted: another host takes the lease — the standby, or the pod
/// made in its place if it starts first (with the shared cache it compiles nothing).
fn failover(cp: &ControlPlane) -> Result {
    let leader = leader_pod(cp)?;
    kubectl_ok(
        &cp.garden,
        &["-n", NS, "delete", "pod", &leader, "--wait=false"],
    )?;
    wait_for("another host to take the lease", || {
        let now = lease_holder(cp)?;
        let others = live_host_pods(cp).ok()?;
        others
            .iter()
            .any(|p| *p != leader && is_pods(&now, p))
            .then_some(())
    })
    .map_err(|e| format!("{e} (leader was {leader})\n{}", diagnose(cp)))
}

/// How often the kubelet restarted `pod`'s container.
fn restarts(cp: &ControlPlane, pod: &str) -> Option<i64> {
    let pod = json_of(&cp.garden, &["-n", NS, "get", "pod", pod]).ok()?;
    pod["status"]["containerStatuses"][0]["restartCount"].as_i64()
}

/// The connections the hosts opened go silent for good, as after a load balancer's
/// fail-over: the hosts' watches never deliver again. A change to the ModuleSet then
/// waits; `/healthz` of the host whose shard holds it fails after `liveness.stallTimeout`
/// naming it, the kubelet restarts that container, and the new process (on new
/// connections) carries the change out.
fn stalled_host_restarts(cp: &ControlPlane, relay: &Blackhole) -> Result {
    shards_settled(cp)?;
    let pods = live_host_pods(cp)?;
    let before: Vec<i64> = pods
        .iter()
        .map(|p| restarts(cp, p).ok_or(format!("{p}'s restart count")))
        .collect::<Result<_>>()?;
    relay.swallow_open_connections();
    let patch = json!({"spec": {"modules": [
        {"name": "telemetry-crds"},
        {"name": "telemetry", "config": {"endpoint": "otlp.example:4318", "image": PAUSE_IMAGE}},
    ]}});
    kubectl_ok(
        &cp.garden,
        &[
            "-n",
            NS,
            "patch",
            "moduleset",
            "local",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
    )?;
    let generation =
        json_of(&cp.garden, &["-n", NS, "get", "moduleset", "local"])?["metadata"]["generation"]
            .as_i64()
            .unwrap_or_default();
    // Whichever pod restarts must have stalled on the set (the check below); the label is
    // not read again, as the silenced hosts cannot move it.
    let host = wait_for("the host's container restarted", || {
        pods.iter()
            .zip(&before)
            .find(|(pod, was)| restarts(cp, pod).is_some_and(|n| n > **was))
            .map(|(pod, _)| pod)
    })
    .map_err(|e| format!("{e}\n{}", diagnose(cp)))?;
    stopped_after_stalling(cp, host)?;
    wait_for("the change carried out after the restart", || {
        let set = json_of(&cp.garden, &["-n", NS, "get", "moduleset", "local"]).ok()?;
        (set["status"]["observedGeneration"].as_i64() >= Some(generation)
            && set["status"]["state"] == "Ready")
            .then_some(())
    })
    .map_err(|e| format!("{e}\n{}", diagnose(cp)))
}

/// `pod`'s container was restarted by the kubelet, not crashed: the stopped container logged
/// the stall, then the kubelet's SIGTERM (a pod that is not being deleted is stopped so
/// only for a failed probe), and exited cleanly. The kubelet's "Liveness probe failed"
/// Event is not relied on: it drops a pod's Events beyond a budget, which the start-up
/// probes may have spent.
fn stopped_after_stalling(cp: &ControlPlane, pod: &str) -> Result {
    let status = json_of(&cp.garden, &["-n", NS, "get", "pod", pod])?;
    let ended = &status["status"]["containerStatuses"][0]["lastState"]["terminated"];
    if ended["exitCode"] != 0 {
        return Err(format!("{pod}'s container did not stop cleanly: {ended}"));
    }
    let previous = kubectl_ok(&cp.garden, &["-n", NS, "logs", pod, "--previous"])?;
    let said = |line: &Value| {
        if line["fields"]["message"] == "stop signal received" {
            Some("stop")
        } else {
            let stalled = line["fields"]["message"]
                == "controller stalled: /healthz fails until it moves"
                && line["fields"]["controller"] == "moduleset"
                && line["fields"]["object"] == format!("ModuleSet/{NS}/local");
            stalled.then_some("stalled")
        }
    };
    let order: Vec<&str> = previous
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| said(&line))
        .collect();
    if order.first() != Some(&"stalled") || !order.contains(&"stop") {
        return Err(format!(
            "the stopped container did not log the stalled ModuleSet, then the stop signal ({order:?}):\n{previous}"
        ));
    }
    Ok(())
}

/// Each running host pod's (name, image digest as the kubelet reports it, version its
/// `tessera run` logged at start), once every pod has said its version.
fn running_builds(cp: &ControlPlane) -> Result<Vec<(String, String, String)>> {
    let mut last = String::new();
    wait_for("every host pod's image and version", || {
        let pods = host_pods(cp).ok()?;
        let mut builds = Vec::new();
        for pod in pods
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        {
            let name = pod["metadata"]["name"].as_str()?.to_string();
            let Some(digest) = pod["status"]["containerStatuses"][0]["imageID"].as_str() else {
                last = format!("{name}: no imageID yet");
                return None;
            };
            let digest = digest.rsplit('@').next()?.to_string();
            match started_version(cp, &name) {
                Ok(version) => builds.push((name, digest, version)),
                Err(why) => {
                    last = format!("{name}: {why}");
                    return None;
                }
            }
        }
        last = format!("{} live pods", builds.len());
        (builds.len() == 2).then_some(builds)
    })
    .map_err(|e| format!("{e} (last: {last})\n{}", diagnose(cp)))
}

/// The version in the pod's `tessera run starting` log line (the chart logs JSON).
fn started_version(cp: &ControlPlane, pod: &str) -> Result<String> {
    let logs = kubectl_ok(&cp.garden, &["-n", NS, "logs", pod])?;
    logs.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["fields"]["message"] == "tessera run starting")
        .and_then(|line| line["fields"]["version"].as_str().map(str::to_string))
        .ok_or_else(|| {
            let head: Vec<&str> = logs.lines().take(3).collect();
            format!("no start line with a version in its log: {head:?}")
        })
}

/// `helm upgrade` to the `next` image while a new Runtime is being created: both pods
/// roll, the new Runtime becomes Ready, and nothing that was done is done again (the
/// Shoot and the module's Deployment are the same objects).
fn upgrade(cp: &ControlPlane, shoot_uid: &str, deployment_uid: &str) -> Result {
    let before = running_builds(cp)?;
    eprintln!("before the upgrade: {before:?}");
    if before
        .iter()
        .any(|(_, _, version)| version.ends_with("-next"))
    {
        return Err(format!(
            "the -next build runs before the upgrade: {before:?}"
        ));
    }
    new_runtime(cp, "rt-b")?;
    let chart = tessera_tests::workspace().join("charts/tessera");
    let chart = chart.display().to_string();
    let tag = "image.tag=next";
    helm(
        cp,
        &[
            "upgrade",
            "tessera",
            &chart,
            "-n",
            NS,
            "--reuse-values",
            "--set",
            tag,
            "--wait",
        ],
    )
    .map_err(|e| format!("{e}\n{}", diagnose(cp)))?;
    wait_for("every host pod on the new image", || {
        let pods = host_pods(cp).ok()?;
        let images: Vec<&str> = pods
            .iter()
            .filter_map(|p| p["spec"]["containers"][0]["image"].as_str())
            .collect();
        (images.len() == 2 && images.iter().all(|i| *i == format!("{IMAGE}:next"))).then_some(())
    })?;
    let after = running_builds(cp)?;
    eprintln!("after the upgrade: {after:?}");
    let next_digests: Vec<&String> = after.iter().map(|(_, digest, _)| digest).collect();
    if after
        .iter()
        .any(|(_, _, version)| !version.ends_with("-next"))
        || next_digests
            .iter()
            .any(|d| before.iter().any(|(_, old, _)| old == *d))
    {
        return Err(format!(
            "the pods do not run the new build: before {before:?}, after {after:?}"
        ));
    }
    runtime_ready(cp, "rt-b")?;
    if runtime_ready(cp, "rt-a")? != shoot_uid {
        return Err("the upgrade made rt-a's Shoot anew".into());
    }
    if modules_available(cp)? != deployment_uid {
        return Err("the upgrade made the module's Deployment anew".into());
    }
    Ok(())
}

/// Delete what the host manages (its finalizers need the host), then `helm uninstall`.
fn uninstall(cp: &ControlPlane) -> Result {
    kubectl_ok(
        &cp.garden,
        &["-n", NS, "delete", "moduleset", "local", "--timeout=120s"],
    )?;
    kubectl_ok(
        &cp.garden,
        &[
            "-n",
            NS,
            "delete",
            "runtime",
            "rt-a",
            "rt-b",
            "--timeout=120s",
        ],
    )?;
    let gone = kubectl_ok(
        &cp.garden,
        &["get", "namespace", "kyma-system", "--ignore-not-found"],
    )?;
    if !gone.trim().is_empty() {
        return Err(format!("the module's namespace is still there: {gone}"));
    }
    helm(cp, &["uninstall", "tessera", "-n", NS, "--wait"])?;
    // The pods terminate after the uninstall returns (the ReplicaSet's garbage collection).
    wait_for("the release namespace emptied", || {
        leftovers(cp).ok().filter(|left| left.is_empty())
    })
    .map(drop)
    .map_err(|e| format!("{e}: helm uninstall left {:?}", leftovers(cp)))
}

/// Objects in the release namespace that neither Kubernetes (the default service account,
/// its token, the root CA ConfigMap, Events) nor the test (the Gardener Secret) made, and
/// cluster-wide RBAC naming the release.
fn leftovers(cp: &ControlPlane) -> Result<Vec<String>> {
    let kinds = kubectl_ok(
        &cp.garden,
        &[
            "api-resources",
            "--namespaced=true",
            "--verbs=list",
            "-o",
            "name",
        ],
    )?;
    let kinds: Vec<&str> = kinds.lines().filter(|k| !k.starts_with("events")).collect();
    let listed = kubectl_ok(
        &cp.garden,
        &["-n", NS, "get", &kinds.join(","), "-o", "name"],
    )?;
    let expected = |name: &str| {
        name == "serviceaccount/default"
            || name.starts_with("secret/default-token-")
            || name == "configmap/kube-root-ca.crt"
            || name == "secret/gardener"
    };
    let mut left: Vec<String> = listed
        .lines()
        .filter(|n| !expected(n))
        .map(str::to_string)
        .collect();
    let rbac = kubectl_ok(
        &cp.garden,
        &["get", "clusterroles,clusterrolebindings", "-o", "name"],
    )?;
    left.extend(
        rbac.lines()
            .filter(|n| n.contains("tessera"))
            .map(str::to_string),
    );
    Ok(left)
}

#[test]
fn the_chart_on_a_real_node() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    let script = Script::quick();
    let options = PlaneOptions {
        node: Some(NodeOn::Garden),
        pods_reach_plane: true,
    };
    let cp = ControlPlane::start_with(&sim, &script, &options).expect("control plane");
    let gateway = cp.bridge.as_ref().unwrap().gateway;
    let registry = TestRegistry::start_on(gateway).expect("registry");
    // The hosts reach their API server through a relay that can silence their connections.
    let upstream = (gateway, apiserver_port(&cp)).into();
    let relay = Blackhole::start(gateway.into(), upstream).expect("relay");
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let step = |what: &str, r: Result| {
        eprintln!("{what}: {:?} after {:.0?}", r.is_ok(), started.elapsed());
        r.unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    step(
        "helm install",
        install(&cp, &registry, dir.path(), relay.port()),
    );
    new_runtime(&cp, "rt-a").unwrap();
    let shoot_uid = runtime_ready(&cp, "rt-a").unwrap_or_else(|e| panic!("rt-a: {e}"));
    let deployment_uid = modules_available(&cp).unwrap_or_else(|e| panic!("modules: {e}"));
    step("leader failover", failover(&cp));
    step("stalled host restarted", stalled_host_restarts(&cp, &relay));
    step("helm upgrade", upgrade(&cp, &shoot_uid, &deployment_uid));
    step("helm uninstall", uninstall(&cp));
}
