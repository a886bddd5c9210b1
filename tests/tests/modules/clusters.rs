//! ModuleSets on distinct clusters (the runtime API server served as two, each its own
//! address, TLS endpoint and token), whose targets go idle: the host drops their clients
//! and drift watches, and the next pass of a set connects again and repairs drift again.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;
use tessera::modules::State;
use tessera_tests::clusters::Clusters;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::modules::{Fixture, LIMIT, kubectl_ok, state_is, target_get};
use tessera_tests::probe::{eventually, tail};
use tessera_tests::rollout::{metric_sum, scrape};

use super::{Result, page_plugin};

const NS: &str = "mods-idle";

/// (target clusters, drift watches) the host reports.
fn held(host: &Host) -> Option<(f64, f64)> {
    let addr = host.metrics_addr(std::time::Duration::from_secs(5))?;
    let text = scrape(&addr);
    Some((
        metric_sum(&text, "tessera_module_targets", &[]),
        metric_sum(&text, "tessera_drift_watches", &[]),
    ))
}

async fn wait_held(host: &Host, what: &str, want: (f64, f64)) -> Result {
    eventually(what, LIMIT, || async {
        (held(host)? == want).then_some(())
    })
    .await
    .map_err(|e| format!("{e}; now {:?}\n{}", held(host), tail(&host.logs(), 20)))
}

/// Secret `name` of the fixture's namespace with `kubeconfig`.
async fn target_secret(f: &Fixture<'_>, name: &str, kubeconfig: &str) -> Result {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name}, "stringData": {"config": kubeconfig},
    }))
    .map_err(|e| e.to_string())?;
    Api::<Secret>::namespaced(f.client.clone(), &f.ns)
        .create(&PostParams::default(), &secret)
        .await
        .map(drop)
        .map_err(|e| format!("Secret {name}: {e}"))
}

fn page_set(secret: &str, plugin: &str, title: &str) -> serde_json::Value {
    json!({"target": {"secretName": secret},
        "modules": [{"name": plugin, "config": {"values": {"title": title}}}]})
}

pub(crate) async fn idle_targets(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, NS).await?;
    let clusters = Clusters::serve(&cp.runtime, 2, false).await?;
    target_secret(&f, "cluster-a", &clusters.kubeconfigs[0]).await?;
    target_secret(&f, "cluster-b", &clusters.kubeconfigs[1]).await?;
    f.push("manifest", "manifest", "1.0.0")?;
    page_plugin(&f, "idle-page-a", "idle-a").await?;
    page_plugin(&f, "idle-page-b", "idle-b").await?;
    let allowed = format!("{NS}/cluster-*");
    let host = f.bare_host("a", &["--module-target", &allowed, "--target-idle", "10s"]);
    f.apply_set("on-a", page_set("cluster-a", "idle-page-a", "A"))
        .await?;
    f.apply_set("on-b", page_set("cluster-b", "idle-page-b", "B"))
        .await?;
    for set in ["on-a", "on-b"] {
        f.wait_set(set, &host, "Ready", |s| state_is(s, State::Ready))
            .await?;
    }
    // Two clusters to the host: a client and a Namespace and a ConfigMap watch each.
    wait_held(&host, "two targets, four drift watches", (2.0, 4.0)).await?;
    wait_held(&host, "idle targets dropped", (0.0, 0.0)).await?;
    // The next pass connects again and watches again: drift is repaired at once.
    f.apply_set("on-a", page_set("cluster-a", "idle-page-a", "A2"))
        .await?;
    f.wait_set("on-a", &host, "Ready again", |s| state_is(s, State::Ready))
        .await?;
    let title = |ns: &'static str| target_get(cp, &["configmap", "dashboard", "-n", ns]);
    if title("idle-a").map(|c| c["data"]["title"].clone()) != Some(json!("A2")) {
        return Err(format!("idle-a: {:?}", title("idle-a")));
    }
    wait_held(&host, "one target, two drift watches", (1.0, 2.0)).await?;
    let patch = r#"{"data":{"title":"hacked"}}"#;
    let args = [
        "patch",
        "configmap",
        "dashboard",
        "-n",
        "idle-a",
        "--type=merge",
        "-p",
        patch,
    ];
    kubectl_ok(&cp.runtime, &args)?;
    eventually("drift repaired after reconnecting", LIMIT, || async {
        (title("idle-a")?["data"]["title"] == "A2").then_some(())
    })
    .await?;
    for set in ["on-a", "on-b"] {
        f.delete_set(set).await?;
    }
    Ok(())
}
