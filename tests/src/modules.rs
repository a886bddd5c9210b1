//! Helpers for the module tests: fixtures and the sample modules. Deployments roll out and
//! namespaces finalize on a real node ([`crate::node`]).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera::crd::{ModuleSet, Plugin};
use tessera::modules::{ModuleReport, State};

use crate::cluster::Cluster;
use crate::env::{ControlPlane, Host, tessera_bin};
use crate::probe::{client_for, eventually, tail};
use crate::registry::TestRegistry;

use crate::Result;

/// How long module tests wait for a state.
pub const LIMIT: Duration = Duration::from_secs(60);

/// A first-party component.
pub fn plugin_file(name: &str) -> PathBuf {
    crate::plugin_dir().join(format!("{name}.wasm"))
}

/// Run the `tessera` binary; (success, stdout + stderr).
pub fn tessera(args: &[&str]) -> (bool, String) {
    let out = Command::new(tessera_bin())
        .args(args)
        .output()
        .expect("run tessera");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `kubectl` on `cluster`; its stdout, or why it failed.
pub fn kubectl_ok(cluster: &Cluster, args: &[&str]) -> Result<String> {
    let out = cluster.kubectl(args);
    if !out.status.success() {
        return Err(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// What first-party plugin `name` declares it needs (`plugins/<name>/requests.yaml`): the
/// grants an operator writes on its `Plugin` to run it as shipped.
pub fn requested_grants(name: &str) -> Value {
    let path = crate::workspace().join(format!("plugins/{name}/requests.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let requests = tessera::grants::Requests::parse(&text).unwrap();
    serde_json::to_value(requests.grants).unwrap()
}

/// A write grant for one CRD (cluster-scoped, named).
pub fn crd_grant(name: &str) -> Value {
    json!({"write": [{"apiGroups": ["apiextensions.k8s.io"], "kinds": ["CustomResourceDefinition"],
        "clusterScoped": true, "names": [name]}]})
}

/// Module `name` of the set's status.
pub fn module<'a>(set: &'a ModuleSet, name: &str) -> Option<&'a ModuleReport> {
    set.status.as_ref()?.modules.iter().find(|m| m.name == name)
}

/// Whether the set's aggregate state is `state`.
pub fn state_is(set: &ModuleSet, state: State) -> bool {
    set.status.as_ref().and_then(|s| s.state) == Some(state)
}

/// `kubectl get ARGS -o json` on the target, when it exists.
pub fn target_get(cp: &ControlPlane, args: &[&str]) -> Option<Value> {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    let out = cp.runtime.kubectl(&a);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap_or_default())
}

/// The Pipeline CRD the `telemetry-crds` module (the `manifest` plugin) installs.
pub const PIPELINE_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pipelines.telemetry.tessera.dev
spec:
  group: telemetry.tessera.dev
  scope: Namespaced
  names: {plural: pipelines, singular: pipeline, kind: Pipeline}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

/// A manifest module whose ConfigMap shows the module version (`dashboard`).
pub const DASHBOARD: &str = "apiVersion: v1
kind: Namespace
metadata: {name: '${namespace}'}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: dashboard, namespace: '${namespace}'}
data: {version: '${version}', title: '${title}'}
";

/// Objects still labelled as module-managed on `cluster`, as `kind/namespace/name`.
/// Wait until no object of `kinds` carries Tessera's module label on `cluster`: deletion
/// is asynchronous there (garbage collection, pods' grace period, namespace finalization);
/// on timeout, the objects left.
pub async fn no_managed_objects(cluster: &Cluster, kinds: &str) -> Result {
    let gone = eventually("managed objects gone", LIMIT, || async {
        managed_objects(cluster, kinds).is_empty().then_some(())
    })
    .await;
    gone.map_err(|e| format!("{e}: left {:?}", managed_objects(cluster, kinds)))
}

pub fn managed_objects(cluster: &Cluster, kinds: &str) -> Vec<String> {
    let out = cluster.kubectl(&[
        "get",
        kinds,
        "-A",
        "-l",
        "modules.tessera.dev/module",
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// A namespace on the control plane with a kubeconfig Secret for the target, a registry,
/// and helpers to push module plugins, write Plugins and ModuleSets, and wait for them.
pub struct Fixture<'a> {
    pub cp: &'a ControlPlane,
    pub client: Client,
    pub ns: String,
    pub registry: TestRegistry,
    pub dir: tempfile::TempDir,
}

impl<'a> Fixture<'a> {
    pub async fn new(cp: &'a ControlPlane, ns: &str) -> Result<Self> {
        let client = client_for(&cp.garden.kubeconfig).await;
        let _ = Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await;
        let f = Self {
            cp,
            client,
            ns: ns.to_string(),
            registry: TestRegistry::start()?,
            dir: tempfile::tempdir().map_err(|e| e.to_string())?,
        };
        // The target's kubeconfig, as the Runtime controller would have stored it.
        let text = std::fs::read_to_string(&cp.runtime.kubeconfig).unwrap();
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "kubeconfig-target"},
            "stringData": {"config": text},
        }))
        .unwrap();
        Api::<Secret>::namespaced(f.client.clone(), ns)
            .create(&PostParams::default(), &secret)
            .await
            .map_err(|e| format!("kubeconfig Secret: {e}"))?;
        Ok(f)
    }

    /// Push first-party plugin `file` as `<repo>:<tag>`.
    pub fn push(&self, file: &str, repo: &str, tag: &str) -> Result {
        self.push_path(&plugin_file(file), repo, tag)
    }

    /// Push the component at `path` as `<repo>:<tag>`.
    pub fn push_path(&self, path: &std::path::Path, repo: &str, tag: &str) -> Result {
        let reference = format!("{}/{}/{repo}:{tag}", self.registry.host(), self.ns);
        let (ok, out) = tessera(&[
            "plugin",
            "push",
            &path.display().to_string(),
            &reference,
            "--version",
            tag,
        ]);
        if ok { Ok(()) } else { Err(out) }
    }

    pub fn reference(&self, repo: &str, tag: &str) -> String {
        format!("{}/{}/{repo}:{tag}", self.registry.host(), self.ns)
    }

    pub async fn plugin(&self, name: &str, spec: Value) -> Result {
        let doc = json!({
            "apiVersion": "tessera.dev/v1alpha1", "kind": "Plugin",
            "metadata": {"name": name, "labels": {"tessera.dev/test": self.ns}},
            "spec": spec,
        });
        Api::<Plugin>::all(self.client.clone())
            .patch(
                name,
                &PatchParams::apply("modules-test").force(),
                &Patch::Apply(&doc),
            )
            .await
            .map_err(|e| format!("Plugin {name}: {e}"))?;
        Ok(())
    }

    /// The Plugins of the control plane.
    pub fn plugins(&self) -> Api<Plugin> {
        Api::all(self.client.clone())
    }

    pub fn host(&self, name: &str) -> Host {
        self.host_with(name, &[])
    }

    /// A host for this fixture's namespace and Plugins, with `extra` arguments; the
    /// fixture's hand-made kubeconfig Secret, and installs into the control plane for this
    /// namespace's sets, are granted by the operator (the test).
    pub fn host_with(&self, name: &str, extra: &[&str]) -> Host {
        let target = format!("{}/kubeconfig-target", self.ns);
        let mut args = vec!["--module-target", &target, "--local-modules", &self.ns];
        args.extend_from_slice(extra);
        self.bare_host(name, &args)
    }

    /// A host for this fixture's namespace and Plugins, granted only `extra`.
    pub fn bare_host(&self, name: &str, extra: &[&str]) -> Host {
        let store = self.dir.path().join("store").display().to_string();
        let selector = format!("tessera.dev/test={}", self.ns);
        let lease = format!("tessera-{}", self.ns);
        let mut args = vec![
            "--namespace",
            &self.ns,
            "--requeue-error",
            "1s",
            "--lease-duration",
            "6s",
            "--lease-name",
            &lease,
            "--plugin-resync",
            "2s",
            "--plugin-store",
            &store,
            "--plugin-selector",
            &selector,
        ];
        args.extend_from_slice(extra);
        self.cp.host(&format!("{}-{name}", self.ns), &args)
    }

    pub fn sets(&self) -> Api<ModuleSet> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub async fn apply_set(&self, name: &str, spec: Value) -> Result {
        let doc = json!({
            "apiVersion": "tessera.dev/v1alpha1", "kind": "ModuleSet",
            "metadata": {"name": name}, "spec": spec,
        });
        self.sets()
            .patch(
                name,
                &PatchParams::apply("modules-test").force(),
                &Patch::Apply(&doc),
            )
            .await
            .map_err(|e| format!("ModuleSet {name}: {e}"))?;
        Ok(())
    }

    /// Delete ModuleSet `name` and wait until it is gone (its finalizer released).
    pub async fn delete_set(&self, name: &str) -> Result {
        self.sets()
            .delete(name, &DeleteParams::default())
            .await
            .map_err(|e| format!("delete ModuleSet {name}: {e}"))?;
        eventually(&format!("ModuleSet {name} gone"), LIMIT, || async {
            self.sets()
                .get_opt(name)
                .await
                .ok()?
                .is_none()
                .then_some(())
        })
        .await
    }

    pub async fn wait_set(
        &self,
        name: &str,
        host: &Host,
        what: &str,
        pred: impl Fn(&ModuleSet) -> bool,
    ) -> Result<ModuleSet> {
        eventually(&format!("ModuleSet {name}: {what}"), LIMIT, || async {
            let s = self.sets().get(name).await.ok()?;
            let current = s.status.as_ref()?.observed_generation == s.metadata.generation;
            (current && pred(&s)).then_some(s)
        })
        .await
        .map_err(|e| {
            let status = futures::executor::block_on(self.sets().get(name))
                .ok()
                .and_then(|s| serde_json::to_string_pretty(&s.status).ok());
            format!(
                "{e}\nstatus: {}\nhost log tail:\n{}",
                status.unwrap_or_default(),
                tail(&host.logs(), 30)
            )
        })
    }

    pub async fn events(&self, reason: &str) -> Vec<String> {
        Api::<Event>::namespaced(self.client.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter(|e| e.reason.as_deref() == Some(reason))
                    .filter_map(|e| e.message)
                    .collect()
            })
            .unwrap_or_default()
    }
}
