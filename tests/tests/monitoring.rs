//! The operations kit against the real Prometheus (Debian's, from
//! tests/prometheus/ensure-prometheus.sh): promtool checks and unit-tests the alert rules,
//! and a Prometheus server scraping a host answers every query of the Grafana dashboard with
//! at least one series once the host has done what each panel shows.

use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tessera::crd::{Runtime, RuntimeState};
use tessera::modules::State;
use tessera::plugins::FIRST_PARTY;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{DASHBOARD, Fixture, LIMIT, kubectl_ok, state_is};
use tessera_tests::probe::{eventually, http_get, tail};
use tessera_tests::prometheus::{TestPrometheus, promtool};
use tessera_tests::registry::stamp_variant;
use tessera_tests::runtimes::{runtime_doc, runtime_in};
use tessera_tests::scenarios;

use tessera_tests::Result;

/// `promtool check rules` on the chart's rule file, and its unit tests.
async fn alert_rules() -> Result {
    let root = tessera_tests::workspace();
    promtool(
        &root,
        &["check", "rules", "charts/tessera/files/alerts.yaml"],
    )?;
    let out = promtool(
        &root,
        &["test", "rules", "tests/prometheus/alerts.test.yaml"],
    )?;
    if !out.contains("SUCCESS") {
        return Err(format!("promtool test rules:\n{out}"));
    }
    Ok(())
}

/// Every query of the dashboard, its variables substituted: what Grafana would send with
/// "All" namespaces, a 1-minute rate interval and a 1-hour range. The namespace variable's
/// `label_values(metric, label)` becomes the query Grafana runs for it.
fn dashboard_queries() -> Result<Vec<(String, String)>> {
    let path = tessera_tests::workspace().join("charts/tessera/dashboards/tessera.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("dashboard: {e}"))?;
    let mut queries = Vec::new();
    for panel in doc["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().ok_or("a target without expr")?;
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            queries.push((title, substitute(expr)));
        }
    }
    for var in doc["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(q) = var["definition"].as_str() {
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .ok_or(format!("variable query {q}"))?;
            let (metric, label) = inner.split_once(',').ok_or(format!("variable {q}"))?;
            let expr = format!("count by ({}) ({metric})", label.trim());
            queries.push((format!("variable {}", var["name"]), expr));
        }
    }
    if queries.len() < 15 {
        return Err(format!("only {} queries in the dashboard", queries.len()));
    }
    Ok(queries)
}

fn substitute(expr: &str) -> String {
    expr.replace("$namespace", ".*")
        .replace("$__rate_interval", "1m")
        .replace("$__range", "1h")
}

/// The test plugin `stamp` as 1.0.0 and, writing another value, as 1.1.0: channel
/// `regular` runs 1.0.0 and renders 1.1.0 as its shadow, which differs.
async fn stamp_plugin(f: &Fixture<'_>) -> Result {
    let v1 = std::fs::read(tessera_tests::test_plugin_dir().join("stamp.wasm"))
        .map_err(|e| format!("stamp.wasm: {e}"))?;
    for (version, bytes) in [("1.0.0", v1.clone()), ("1.1.0", stamp_variant(&v1, "v3"))] {
        let file = f.dir.path().join(format!("stamp-{version}.wasm"));
        std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
        f.push_path(&file, "stamp", version)?;
    }
    f.plugin(
        "mon-stamp",
        json!({
            "kind": "shoot-extension",
            "versions": [
                {"version": "1.0.0", "ref": f.reference("stamp", "1.0.0")},
                {"version": "1.1.0", "ref": f.reference("stamp", "1.1.0")},
            ],
            "channels": [{"name": "regular", "version": "1.0.0", "shadow": "1.1.0"}],
        }),
    )
    .await
}

/// A manifest module writing a Namespace and a ConfigMap on the target.
async fn page_plugin(f: &Fixture<'_>) -> Result {
    f.push("manifest", "manifest", "1.0.0")?;
    f.plugin(
        "mon-page",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"manifest": DASHBOARD, "values": {"namespace": "mon-page", "title": "Overview"}},
            "grants": {"write": [
                {"apiGroups": [""], "kinds": ["Namespace"], "clusterScoped": true, "names": ["mon-page"]},
                {"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["mon-page"]},
            ]},
        }),
    )
    .await
}

/// A host with the first-party chain plus the registry step `stamp`, and the module targets
/// of the fixture.
fn host(f: &Fixture<'_>) -> Host {
    let mut chain: Vec<Value> = FIRST_PARTY.iter().map(|p| json!(p)).collect();
    chain.push(json!("stamp"));
    let config = json!({
        "chain": chain,
        "plugins": { "stamp": {
            "source": "registry",
            "plugin": "mon-stamp",
            "grants": { "shootPaths": [r#"metadata.annotations["tessera.dev/stamp"]"#] },
        } },
    });
    let path = f.dir.path().join("chain.yaml");
    std::fs::write(&path, config.to_string()).unwrap();
    let path = path.display().to_string();
    let args = [
        "--config",
        &path,
        "--requeue-retry",
        "1s",
        "--requeue-error-max",
        "2s",
        // One shard, so that the sharding panels have series too.
        "--sharding",
        "--identity",
        "mon-a",
    ];
    f.host_with("a", &args)
}

/// Wait until the host's /metrics has a line starting with `prefix` whose value is not 0.
async fn metric_counted(addr: &str, prefix: &str, host: &Host) -> Result {
    eventually(prefix, LIMIT, || async {
        let text = http_get(addr, "/metrics").await.ok()?;
        text.lines()
            .any(|l| l.starts_with(prefix) && !l.ends_with(" 0"))
            .then_some(())
    })
    .await
    .map_err(|e| {
        let name = prefix.split('{').next().unwrap_or(prefix);
        let text = futures::executor::block_on(http_get(addr, "/metrics")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(name)).collect();
        let logs = host.logs();
        let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("\"WARN\"")).collect();
        format!(
            "{e}\n{name} now:\n{}\nhost warnings:\n{}",
            lines.join("\n"),
            tail(&warnings.join("\n"), 10)
        )
    })
}

async fn create(api: &Api<Runtime>, runtime: &Runtime) -> Result {
    let params = PostParams::default();
    match api.create(&params, runtime).await {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("create Runtime: {e}")),
    }
}

/// Runtimes: `rt-mon` meets a Gardener that refuses admin kubeconfigs for a while (Gardener
/// errors, kubeconfig reconcile errors and unexpected stops), then becomes Ready with a
/// differing shadow; `rt-bad` is invalid, so a plugin call fails and it is Failed.
async fn runtimes(f: &Fixture<'_>, addr: &str, host: &Host) -> Result {
    let api: Api<Runtime> = Api::namespaced(f.client.clone(), &f.ns);
    // 500, not 503: the client itself retries 503 (and 429, 504).
    f.cp.sim_outage("adminkubeconfig", Some(500));
    create(&api, &runtime_doc(&f.ns, "rt-mon", "mon1")).await?;
    let stops = r#"tessera_state_machine_unexpected_stops_total{controller="kubeconfig""#;
    metric_counted(addr, stops, host).await?;
    let errors = r#"tessera_gardener_errors_total{call="adminkubeconfig",failure="unavailable"}"#;
    metric_counted(addr, errors, host).await?;
    f.cp.sim_outage("adminkubeconfig", None);
    let mut bad = serde_json::to_value(runtime_doc(&f.ns, "rt-bad", "mon-bad")).unwrap();
    bad["spec"]["shoot"]["networking"]["nodes"] = "10.250.0.0/33".into();
    let bad: Runtime = serde_json::from_value(bad).map_err(|e| e.to_string())?;
    create(&api, &bad).await?;
    runtime_in(&api, "rt-bad", RuntimeState::Failed, host).await?;
    runtime_in(&api, "rt-mon", RuntimeState::Ready, host).await?;
    let differs = r#"tessera_shadow_renders_total{plugin="stamp",result="differs""#;
    metric_counted(addr, differs, host).await?;
    metric_counted(addr, "tessera_plugin_call_failures_total{", host).await
}

/// ModuleSets: `pages` becomes Ready, then someone edits its ConfigMap on the target (drift);
/// `broken` names a module without a Plugin and never becomes Ready.
async fn module_sets(f: &Fixture<'_>, addr: &str, host: &Host) -> Result {
    let target = json!({"secretName": "kubeconfig-target"});
    f.apply_set(
        "pages",
        json!({"target": target, "modules": [{"name": "mon-page"}]}),
    )
    .await?;
    f.wait_set("pages", host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    let edit = [
        "label",
        "configmap",
        "dashboard",
        "-n",
        "mon-page",
        "edited=by-hand",
    ];
    kubectl_ok(&f.cp.runtime, &edit)?;
    metric_counted(addr, "tessera_module_object_events_total{", host).await?;
    f.apply_set(
        "broken",
        json!({"target": target, "modules": [{"name": "mon-absent"}]}),
    )
    .await?;
    f.wait_set("broken", host, "a state other than Ready", |s| {
        s.status.as_ref().is_some_and(|st| st.state.is_some()) && !state_is(s, State::Ready)
    })
    .await?;
    Ok(())
}

/// Query every dashboard expression until each has a series (scrapes lag by a second or
/// two); name the ones that have none.
async fn every_query_answers(prometheus: &TestPrometheus) -> Result {
    let queries = dashboard_queries()?;
    let mut empty = Vec::new();
    for _ in 0..30 {
        empty.clear();
        for (title, expr) in &queries {
            match prometheus.query(expr) {
                Ok(result) if !result.is_empty() => {}
                Ok(_) => empty.push(format!("{title}: {expr}: no series")),
                Err(e) => empty.push(format!("{title}: {e}")),
            }
        }
        if empty.is_empty() {
            println!("all {} dashboard queries answered", queries.len());
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(format!(
        "{} of {} dashboard queries have no series:\n{}\nprometheus log tail:\n{}",
        empty.len(),
        queries.len(),
        empty.join("\n"),
        tail(&prometheus.log(), 10)
    ))
}

/// A host reconciles Runtimes, Plugins and ModuleSets while Prometheus scrapes it; then
/// every dashboard query has series.
async fn dashboard_end_to_end(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mon").await?;
    stamp_plugin(&f).await?;
    page_plugin(&f).await?;
    let host = host(&f);
    let addr = host.metrics_addr(LIMIT).ok_or("no metrics address")?;
    let prometheus = TestPrometheus::start(&[&addr])?;
    runtimes(&f, &addr, &host).await?;
    module_sets(&f, &addr, &host).await?;
    every_query_answers(&prometheus).await
}

fn main() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    let script = Script::quick();
    scenarios::run(
        &sim,
        &script,
        vec![
            ("alert_rules", |_| Box::pin(alert_rules())),
            ("dashboard_end_to_end", |cp| {
                Box::pin(dashboard_end_to_end(cp))
            }),
        ],
    )
}
