//! Tenant isolation against real API servers and the Gardener simulator: whoever can write
//! in one namespace of the control plane gets no more than that namespace. Kubeconfigs from
//! Secrets are data (an `exec` plugin never runs), references are bound to their owners (a
//! hand-made RuntimeKubeconfig fetches nothing and writes no Secret it did not create, a
//! ModuleSet reaches only its namespace's targets), and a frozen leader writes nothing once
//! its lease can have passed to another host.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tessera::crd::{ModuleSet, Runtime, RuntimeKubeconfig, RuntimeState};
use tessera::gardener::shoot_resource;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{Fixture, LIMIT};
use tessera_tests::probe::{eventually, tail};
use tessera_tests::runtimes::{runtime_doc, runtime_in};
use tessera_tests::{scenario, scenarios};

use tessera_tests::Result;

/// A kubeconfig for the runtime API server with `user` as its user entry.
fn kubeconfig(cp: &ControlPlane, user: Value) -> String {
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": cp.runtime.server, "insecure-skip-tls-verify": true}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    })
    .to_string()
}

async fn secret(f: &Fixture<'_>, name: &str, data: &[(&str, &str)]) -> Result {
    let string_data: BTreeMap<&str, &str> = data.iter().copied().collect();
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": string_data}))
            .unwrap();
    Api::<Secret>::namespaced(f.client.clone(), &f.ns)
        .create(&PostParams::default(), &secret)
        .await
        .map_err(|e| format!("Secret {name}: {e}"))?;
    Ok(())
}

/// The set's `TargetReachable` condition message once it is False.
async fn unreachable(f: &Fixture<'_>, set: &str, host: &Host) -> Result<String> {
    let target = json!({"secretName": set});
    f.apply_set(set, json!({"target": target, "modules": []}))
        .await?;
    let s = f
        .wait_set(set, host, "target refused", |s: &ModuleSet| {
            target_condition(s).is_some_and(|(ok, _)| !ok)
        })
        .await?;
    Ok(target_condition(&s).map(|(_, m)| m).unwrap_or_default())
}

fn target_condition(s: &ModuleSet) -> Option<(bool, String)> {
    let c = s
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "TargetReachable")?;
    Some((
        c.status == tessera::crd::ConditionStatus::True,
        c.message.clone(),
    ))
}

/// An `exec` kubeconfig never runs, nor do file paths or proxies get used; the refusal
/// names the field and no value.
async fn kubeconfigs_from_secrets_are_data(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "ten-kube").await?;
    let marker = f.dir.path().join("exec-ran");
    let command = format!("touch {}", marker.display());
    // Positive control: the marker shows when the command runs at all.
    let ran = std::process::Command::new("/bin/sh")
        .args(["-c", &command])
        .status();
    if !ran.is_ok_and(|s| s.success()) || !marker.exists() {
        return Err("the exec command does not leave its marker when run".into());
    }
    std::fs::remove_file(&marker).map_err(|e| e.to_string())?;
    let exec = json!({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "/bin/sh", "args": ["-c", command]}});
    let file = json!({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"});
    secret(&f, "exec-target", &[("config", &kubeconfig(cp, exec))]).await?;
    secret(&f, "file-target", &[("config", &kubeconfig(cp, file))]).await?;
    // The operator allows these Secrets as targets: the sanitizer is what refuses them.
    let host = f.host_with("a", &["--module-target", "ten-kube/*"]);
    let message = unreachable(&f, "exec-target", &host).await?;
    if !message.contains("users[0].user.exec") || message.contains("touch") {
        return Err(format!("exec kubeconfig: {message}"));
    }
    let message = unreachable(&f, "file-target", &host).await?;
    if !message.contains("users[0].user.tokenFile") || message.contains("serviceaccount") {
        return Err(format!("file kubeconfig: {message}"));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    if marker.exists() {
        return Err("the exec command ran".into());
    }
    Ok(())
}

/// A ModuleSet reaches a hand-made Secret only when the operator allows it, and the host's
/// own cluster only in namespaces the operator lists; a kubeconfig Secret Tessera wrote for
/// a Runtime of the namespace is a target.
async fn module_targets_are_bound_to_their_namespace(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "ten-bind").await?;
    let text = std::fs::read_to_string(&cp.runtime.kubeconfig).unwrap();
    secret(&f, "handmade", &[("config", &text)]).await?;
    let host = f.bare_host("a", &[]);
    let message = unreachable(&f, "handmade", &host).await?;
    if !message.contains("--module-target") {
        return Err(format!("hand-made target: {message}"));
    }
    // Another namespace's Secret cannot even be named.
    let cross = json!({"secretName": "ten-kube/exec-target"});
    match f
        .apply_set("cross", json!({"target": cross, "modules": []}))
        .await
    {
        Err(e) if e.contains("spec.target.secretName") => {}
        other => return Err(format!("a cross-namespace target was accepted: {other:?}")),
    }
    f.apply_set("local", json!({"modules": []})).await?;
    f.wait_set("local", &host, "local install refused", |s: &ModuleSet| {
        target_condition(s).is_some_and(|(ok, m)| !ok && m.contains("--local-modules"))
    })
    .await?;
    // The kubeconfig Secret of a Runtime of this namespace is a target.
    let runtimes: Api<Runtime> = Api::namespaced(f.client.clone(), &f.ns);
    runtimes
        .create(
            &PostParams::default(),
            &runtime_doc(&f.ns, "rt-bind", "s-bind"),
        )
        .await
        .map_err(|e| e.to_string())?;
    runtime_in(&runtimes, "rt-bind", RuntimeState::Ready, &host).await?;
    shoot_stays_put(&f, &runtimes, &host).await?;
    let target = json!({"secretName": "kubeconfig-rt-bind"});
    f.apply_set("own", json!({"target": target, "modules": []}))
        .await?;
    f.wait_set(
        "own",
        &host,
        "the Runtime's kubeconfig as target",
        |s: &ModuleSet| target_condition(s).is_some_and(|(ok, _)| ok),
    )
    .await?;
    Ok(())
}

/// A Runtime whose spec later names another Shoot fails `ShootIdentityChanged`; its Shoot
/// stays the only one. Then the change is undone.
async fn shoot_stays_put(f: &Fixture<'_>, runtimes: &Api<Runtime>, host: &Host) -> Result {
    let rename = |shoot: &str| json!({"spec": {"shoot": {"name": shoot}}});
    let params = kube::api::PatchParams::default();
    runtimes
        .patch(
            "rt-bind",
            &params,
            &kube::api::Patch::Merge(rename("s-bind-moved")),
        )
        .await
        .map_err(|e| e.to_string())?;
    let rt = runtime_in(runtimes, "rt-bind", RuntimeState::Failed, host).await?;
    let reason = rt.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Provisioned")
            .map(|c| c.reason.clone())
    });
    if reason.as_deref() != Some("ShootIdentityChanged") {
        return Err(format!("renamed Runtime: reason {reason:?}"));
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(f.client.clone(), "garden-kyma-dev", &shoot_resource());
    let shoots: Vec<String> = api
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    if shoots.iter().any(|n| n == "s-bind-moved") || !shoots.iter().any(|n| n == "s-bind") {
        return Err(format!("Shoots after the rename: {shoots:?}"));
    }
    runtimes
        .patch(
            "rt-bind",
            &params,
            &kube::api::Patch::Merge(rename("s-bind")),
        )
        .await
        .map_err(|e| e.to_string())?;
    runtime_in(runtimes, "rt-bind", RuntimeState::Ready, host).await?;
    Ok(())
}

/// Wait until RuntimeKubeconfig `name` says `reason`, and return its message.
async fn rkc_refused(
    api: &Api<RuntimeKubeconfig>,
    name: &str,
    reason: &str,
    host: &Host,
) -> Result<String> {
    eventually(
        &format!("RuntimeKubeconfig {name} {reason}"),
        LIMIT,
        || async {
            let k = api.get(name).await.ok()?;
            let c = k
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Ready")?;
            (c.reason == reason).then_some(c.message)
        },
    )
    .await
    .map_err(|e| format!("{e}\nhost log tail:\n{}", tail(&host.logs(), 30)))
}

fn rkc_doc(
    ns: &str,
    name: &str,
    owner: Option<&Runtime>,
    shoot: (&str, &str),
    secret: &str,
) -> RuntimeKubeconfig {
    let owners = owner.map(|rt| {
        json!([{"apiVersion": "tessera.dev/v1alpha1", "kind": "Runtime", "name": rt.metadata.name,
            "uid": rt.metadata.uid, "controller": true}])
    });
    serde_json::from_value(json!({
        "apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeKubeconfig",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": owners},
        "spec": {"runtime": owner.map_or(name.to_string(), |r| r.metadata.name.clone().unwrap_or_default()),
            "shoot": {"namespace": shoot.0, "name": shoot.1},
            "secret": {"namespace": ns, "name": secret, "key": "config"}},
    }))
    .unwrap()
}

/// What the simulator counted for `key` (`shoot/<name>`, `namespace/<ns>`): other tests
/// run at the same time, so each counts only its own objects.
fn counted(cp: &ControlPlane, key: &str, what: &str) -> u64 {
    cp.sim_stats()["byObject"][key][what].as_u64().unwrap_or(0)
}

/// Admin kubeconfigs requested for the Shoots this test names.
fn admin_kubeconfigs(cp: &ControlPlane) -> u64 {
    ["s-other-tenant", "s-rkc-own", "s-rkc-squat"]
        .iter()
        .map(|shoot| counted(cp, &format!("shoot/{shoot}"), "adminKubeconfigs"))
        .sum()
}

/// Hand-made RuntimeKubeconfigs fetch nothing and write nothing; a foreign Secret is never
/// overwritten or deleted.
async fn runtime_kubeconfigs_act_only_for_their_runtime(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "ten-rkc").await?;
    secret(&f, "db-password", &[("config", "hunter2")]).await?;
    secret(&f, "kubeconfig-rt-squat", &[("config", "not ours")]).await?;
    let host = f.bare_host("a", &[]);
    let runtimes: Api<Runtime> = Api::namespaced(f.client.clone(), &f.ns);
    runtimes
        .create(
            &PostParams::default(),
            &runtime_doc(&f.ns, "rt-own", "s-rkc-own"),
        )
        .await
        .map_err(|e| e.to_string())?;
    let owner = runtime_in(&runtimes, "rt-own", RuntimeState::Ready, &host).await?;
    let fetched = admin_kubeconfigs(cp);
    let rkcs: Api<RuntimeKubeconfig> = Api::namespaced(f.client.clone(), &f.ns);
    refuse_hostile_rkcs(&f, &rkcs, &owner, &host).await?;
    // A Runtime whose kubeconfig Secret name is taken by someone else's Secret.
    runtimes
        .create(
            &PostParams::default(),
            &runtime_doc(&f.ns, "rt-squat", "s-rkc-squat"),
        )
        .await
        .map_err(|e| e.to_string())?;
    rkc_refused(&rkcs, "rt-squat", "SecretNotOwned", &host).await?;
    // Deleting the stray one deletes nothing either: once the host let it go (it holds the
    // host's finalizer, so its being gone shows the host acted on the deletion), the
    // Secrets are as they were.
    rkcs.delete("stray", &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    eventually(
        "the stray RuntimeKubeconfig let go by the host",
        LIMIT,
        || async { rkcs.get_opt("stray").await.ok()?.is_none().then_some(()) },
    )
    .await?;
    secrets_unchanged(&f).await?;
    // Only rt-squat's own (refused) kubeconfig was ever asked for: none of the hostile ones.
    let now = admin_kubeconfigs(cp);
    if now != fetched {
        return Err(format!(
            "{} admin kubeconfigs were requested for hand-made RuntimeKubeconfigs",
            now - fetched
        ));
    }
    Ok(())
}

/// RuntimeKubeconfigs made by hand — unowned, naming another tenant's Shoot, or a Secret
/// that is not the Runtime's — are refused, each naming its fault.
async fn refuse_hostile_rkcs(
    f: &Fixture<'_>,
    rkcs: &Api<RuntimeKubeconfig>,
    owner: &Runtime,
    host: &Host,
) -> Result {
    let hostile = [
        rkc_doc(
            &f.ns,
            "stray",
            None,
            ("garden-kyma-dev", "s-other-tenant"),
            "db-password",
        ),
        rkc_doc(
            &f.ns,
            "steal",
            Some(owner),
            ("garden-kyma-dev", "s-other-tenant"),
            "kubeconfig-rt-own",
        ),
        rkc_doc(
            &f.ns,
            "overwrite",
            Some(owner),
            ("garden-kyma-dev", "s-rkc-own"),
            "db-password",
        ),
    ];
    for (doc, needle) in hostile
        .iter()
        .zip(["no controller owner", "spec.shoot", "spec.secret"])
    {
        rkcs.create(&PostParams::default(), doc)
            .await
            .map_err(|e| e.to_string())?;
        let name = doc.metadata.name.clone().unwrap_or_default();
        let message = rkc_refused(rkcs, &name, "NotBound", host).await?;
        if !message.contains(needle) {
            return Err(format!("RuntimeKubeconfig {name}: {message}"));
        }
    }
    Ok(())
}

/// The Secrets a hostile RuntimeKubeconfig named are as they were.
async fn secrets_unchanged(f: &Fixture<'_>) -> Result {
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), &f.ns);
    for (name, value) in [
        ("db-password", "hunter2"),
        ("kubeconfig-rt-squat", "not ours"),
    ] {
        let s = secrets
            .get(name)
            .await
            .map_err(|e| format!("Secret {name}: {e}"))?;
        let data = s.data.unwrap_or_default();
        if data.get("config").map(|b| b.0.as_slice()) != Some(value.as_bytes())
            || s.metadata.labels.is_some()
        {
            return Err(format!("Secret {name} was changed"));
        }
    }
    Ok(())
}

fn signal(host: &Host, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &host.pid().to_string()])
        .status();
}

/// Writes in the test's namespace and to its Shoots.
fn writes(cp: &ControlPlane, ns: &str) -> u64 {
    let shoots: u64 = ["s-lease-1", "s-lease-2"]
        .iter()
        .map(|shoot| counted(cp, &format!("shoot/{shoot}"), "writes"))
        .sum();
    counted(cp, &format!("namespace/{ns}"), "writes") + shoots
}

async fn logged(host: &Host, needle: &str, limit: Duration) -> Result {
    eventually(needle, limit, || async {
        host.logs().contains(needle).then_some(())
    })
    .await
    .map_err(|e| format!("{e}\nlog tail:\n{}", tail(&host.logs(), 20)))
}

/// A leader frozen past its lease while a standby takes over writes nothing after it
/// resumes (counted at the simulator every host request passes through), and exits.
async fn frozen_leader_writes_nothing(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "ten-lease").await?;
    let mut a = f.bare_host("a", &[]);
    logged(&a, "became leader", LIMIT).await?;
    let mut b = f.bare_host("b", &[]);
    logged(&b, "waiting for the leader lease", LIMIT).await?;
    let runtimes: Api<Runtime> = Api::namespaced(f.client.clone(), &f.ns);
    runtimes
        .create(
            &PostParams::default(),
            &runtime_doc(&f.ns, "rt-lease-1", "s-lease-1"),
        )
        .await
        .map_err(|e| e.to_string())?;
    runtime_in(&runtimes, "rt-lease-1", RuntimeState::Ready, &a).await?;
    signal(&a, "STOP");
    logged(&b, "became leader", Duration::from_secs(30)).await?;
    b.kill();
    let before = writes(cp, &f.ns);
    // Work for the frozen host: it sees this the moment it resumes.
    runtimes
        .create(
            &PostParams::default(),
            &runtime_doc(&f.ns, "rt-lease-2", "s-lease-2"),
        )
        .await
        .map_err(|e| e.to_string())?;
    signal(&a, "CONT");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while a.is_running() {
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "the resumed host still runs:\n{}",
                tail(&a.logs(), 20)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = writes(cp, &f.ns);
    if after != before {
        return Err(format!(
            "the resumed host wrote {} times after losing its lease:\n{}",
            after - before,
            tail(&a.logs(), 20)
        ));
    }
    Ok(())
}

fn main() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    scenarios::run(
        &sim,
        &Script::quick(),
        vec![
            scenario!(kubeconfigs_from_secrets_are_data),
            scenario!(module_targets_are_bound_to_their_namespace),
            scenario!(runtime_kubeconfigs_act_only_for_their_runtime),
            scenario!(frozen_leader_writes_nothing),
        ],
    )
}
