//! A Gardener simulator in front of a real kube-apiserver ("garden"), faithful to Gardener
//! at the commit pinned in `tests/kube/gardener.pin` (every rule cites the Gardener file and
//! function it comes from; where it still differs from Gardener: `tests/README.md`):
//!
//! - Shoots, CloudProfiles, Projects, SecretBindings and CredentialsBindings are custom
//!   resources whose structural schemas are generated from Gardener's Go types
//!   (`tests/kube/gen-gardener-crds.py`): the API server refuses fields Gardener lacks;
//! - every request is forwarded with the caller's own credentials, so the garden API
//!   server enforces RBAC as Gardener's does (hosts use a project member's ServiceAccount);
//! - Gardener's defaulting and validation run as admission webhooks of the garden API
//!   server (`webhook`, `rules`), so they see every Shoot write, whoever sends it;
//! - `POST …/shoots/{name}/adminkubeconfig` issues a kubeconfig for the "runtime" API
//!   server as Gardener does: the cluster's CA, and a client certificate of the cluster's
//!   client CA that expires when the response says;
//! - a driver moves `status.lastOperation` the way the gardenlet does (Create, Reconcile,
//!   Delete; Processing → Succeeded, or the scripted failures with `Error`/`Failed` and
//!   `lastErrors` codes), honours `gardener.cloud/operation: retry` and force deletion, and
//!   removes its `gardener` finalizer once a deletion succeeded.
//!
//! The host talks to it exactly as to Gardener: through an ordinary kubeconfig.

mod admin_kubeconfig;
mod driver;
mod proxy;
pub mod rules;
mod script;
pub(crate) mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

pub use script::{Failure, Script, ShootScript};

/// How the simulator is wired.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen (port 0: any free port); the webhooks listen on the same address.
    pub listen: SocketAddr,
    /// Kubeconfig of the garden API server (an administrator: Gardener's own rights).
    pub garden_kubeconfig: PathBuf,
    /// `https://…` of the API server Shoots "become".
    pub runtime_server: String,
    /// The CA (PEM file) that signed the runtime API server's certificate.
    pub runtime_ca: PathBuf,
    /// The runtime API server's client CA: certificate and key files, and its common name.
    pub runtime_client_ca: (PathBuf, PathBuf, String),
    /// Gardener's `--shoot-admin-kubeconfig-max-expiration`, seconds (default 24 h).
    pub admin_kubeconfig_max_seconds: i64,
    /// Delays and scripted failures; re-read whenever an operation ends.
    pub script: Option<PathBuf>,
}

/// Requests the simulator saw from clients (the host), for the load benchmark.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub requests: std::sync::atomic::AtomicU64,
    /// POST, PUT, PATCH, DELETE outside coordination.k8s.io (leases renew all the time).
    pub writes: std::sync::atomic::AtomicU64,
    pub lease_requests: std::sync::atomic::AtomicU64,
    pub watches: std::sync::atomic::AtomicU64,
    /// Requests Gardener would answer on a real landscape (its API groups, the project
    /// namespaces), leases aside.
    pub gardener_requests: std::sync::atomic::AtomicU64,
    /// Admin kubeconfigs requested (`POST …/shoots/<name>/adminkubeconfig`).
    pub admin_kubeconfigs: std::sync::atomic::AtomicU64,
    /// Writes per `namespace/<ns>` (`shoot/<name>` for Shoots, whose project namespace all
    /// tests share), admin kubeconfigs, request arrival times and Gardener's refusals per
    /// `shoot/<name>`, so that tests running side by side each count their own.
    pub by_object: std::sync::Mutex<std::collections::BTreeMap<String, Value>>,
    /// Requests per kind (`"<verb> <resource>[/<subresource>]"`, the verb as the API
    /// server's audit names it: get, list, watch, create, patch, …), leases included, so
    /// that a benchmark can say what a phase's requests were.
    pub by_kind: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

pub(crate) struct Sim {
    /// Gardener's own client of the garden API server (an administrator).
    pub client: kube::Client,
    /// The same API server without credentials: requests carry the caller's.
    pub forward: kube::Client,
    pub stats: Stats,
    pub config: SimConfig,
    /// The runtime API server's client CA, which signs admin kubeconfigs.
    pub client_ca: crate::certs::Ca,
    pub consumed: std::sync::Mutex<std::collections::HashMap<(String, String), usize>>,
    /// Simulated outages: requests whose URI contains the key are answered with the HTTP
    /// status — Shoot API requests only when the flag is set (`/_sim/outage/<needle>/<code>`),
    /// any request otherwise (`/_sim/outage-any/<needle>/<code>`); code 999 holds them until
    /// the outage ends.
    pub outages: std::sync::Mutex<std::collections::BTreeMap<String, (u16, bool)>>,
}

/// A Gardener (or core) resource of the garden by plural name.
pub(crate) fn resource(plural: &str) -> ApiResource {
    let (group, version, kind) = match plural {
        "shoots" => ("core.gardener.cloud", "v1beta1", "Shoot"),
        "cloudprofiles" => ("core.gardener.cloud", "v1beta1", "CloudProfile"),
        "projects" => ("core.gardener.cloud", "v1beta1", "Project"),
        "secretbindings" => ("core.gardener.cloud", "v1beta1", "SecretBinding"),
        "credentialsbindings" => ("security.gardener.cloud", "v1alpha1", "CredentialsBinding"),
        "configmaps" => ("", "v1", "ConfigMap"),
        "secrets" => ("", "v1", "Secret"),
        other => panic!("the simulator knows no resource {other}"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

impl Sim {
    pub fn script(&self) -> Script {
        self.config
            .script
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// The object `name` of `plural` (in `namespace`), if it exists.
    pub async fn garden_object(
        &self,
        plural: &str,
        namespace: Option<String>,
        name: String,
    ) -> Option<Value> {
        let resource = resource(plural);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), &ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let found = api.get_opt(&name).await.ok()??;
        serde_json::to_value(found).ok()
    }

    /// Whether `user` in `groups` may do what `attributes` (a SubjectAccessReview's
    /// `resourceAttributes`) say: Gardener asks the API server, as the simulator does.
    pub async fn allowed(&self, user: &str, groups: &[String], attributes: Value) -> bool {
        use k8s_openapi::api::authorization::v1::SubjectAccessReview;
        let review: SubjectAccessReview = serde_json::from_value(json!({
            "spec": { "user": user, "groups": groups, "resourceAttributes": attributes },
        }))
        .expect("a SubjectAccessReview");
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        api.create(&Default::default(), &review)
            .await
            .ok()
            .and_then(|r| r.status)
            .is_some_and(|s| s.allowed)
    }

    /// Note that Gardener refused a request about Shoot `shoot` by `user`.
    pub fn refused(&self, shoot: &str, user: &str, refusal: &rules::Refusal) {
        let mut by = self.stats.by_object.lock().expect("stats lock");
        let entry = by
            .entry(format!("shoot/{shoot}"))
            .or_insert_with(|| json!({}));
        let record = json!({
            "user": user, "code": refusal.code, "rules": refusal.rules,
            "message": refusal.message,
        });
        match entry["refusals"].as_array_mut() {
            Some(list) => list.push(record),
            None => entry["refusals"] = json!([record]),
        }
    }
}

async fn clients(path: &std::path::Path) -> anyhow::Result<(kube::Client, kube::Client)> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    let mut kc = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    // Watches are streamed through: no client-side read timeout.
    kc.read_timeout = None;
    let client = kube::Client::try_from(kc.clone())?;
    kc.auth_info = Default::default();
    // A forwarded request is the caller's: retrying it is the caller's business too.
    kc.default_retry = false;
    Ok((client, kube::Client::try_from(kc)?))
}

/// Start the proxy, the webhooks and the driver; returns the address the proxy listens on.
pub async fn start(config: SimConfig) -> anyhow::Result<SocketAddr> {
    let (client, forward) = clients(&config.garden_kubeconfig).await?;
    let (cert, key, name) = &config.runtime_client_ca;
    let client_ca = crate::certs::Ca::load(name, cert, key).map_err(anyhow::Error::msg)?;
    let sim = Arc::new(Sim {
        client,
        forward,
        client_ca,
        config,
        stats: Stats::default(),
        consumed: Default::default(),
        outages: Default::default(),
    });
    webhook::serve(sim.clone(), sim.config.listen.ip()).await?;
    let addr = proxy::serve(sim.clone()).await?;
    tokio::spawn(driver::run(sim));
    Ok(addr)
}
