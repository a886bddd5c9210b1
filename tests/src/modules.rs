//! Helpers for the module tests: a stand-in for the parts of kube-controller-manager
//! modules rely on (the test API servers run no controllers): Deployment rollouts and
//! namespace finalization. And the sample modules.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::cluster::Cluster;

/// Marks every module-managed Deployment on a cluster as rolled out, as the Deployment
/// controller would, and empties and finalizes terminating namespaces, as the namespace
/// controller would; stops on drop.
pub struct Rollouts {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Rollouts {
    pub fn start(kubeconfig: &std::path::Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let kubeconfig = kubeconfig.to_path_buf();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                roll_out(&kubeconfig);
                finalize_namespaces(&kubeconfig);
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

fn roll_out(kubeconfig: &std::path::Path) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "get",
            "deployments",
            "-A",
            "-l",
            "modules.tessera.dev/module",
            "-o",
            "json",
        ])
        .output();
    let Ok(out) = out else { return };
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    for d in list["items"].as_array().cloned().unwrap_or_default() {
        let generation = d["metadata"]["generation"].as_i64().unwrap_or(0);
        let replicas = d["spec"]["replicas"].as_i64().unwrap_or(1);
        let status = &d["status"];
        if status["observedGeneration"].as_i64() == Some(generation)
            && status["availableReplicas"].as_i64() == Some(replicas)
        {
            continue;
        }
        let patch = serde_json::json!({"status": {
            "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
        }});
        let _ = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "patch",
                "deployment",
                d["metadata"]["name"].as_str().unwrap_or_default(),
                "-n",
                d["metadata"]["namespace"].as_str().unwrap_or_default(),
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch.to_string(),
            ])
            .output();
    }
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Vec<u8> {
    use std::io::Write;
    let mut child = match std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(_) => return Vec::new(),
    };
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    child
        .wait_with_output()
        .map(|o| o.stdout)
        .unwrap_or_default()
}

fn finalize_namespaces(kubeconfig: &std::path::Path) {
    let list: serde_json::Value = serde_json::from_slice(&kubectl(
        kubeconfig,
        &["get", "namespaces", "-o", "json"],
        None,
    ))
    .unwrap_or_default();
    for ns in list["items"].as_array().cloned().unwrap_or_default() {
        if ns["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let name = ns["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let kinds = String::from_utf8_lossy(&kubectl(
            kubeconfig,
            &[
                "api-resources",
                "--namespaced=true",
                "--verbs=delete",
                "-o",
                "name",
            ],
            None,
        ))
        .lines()
        .filter(|k| !k.starts_with("events"))
        .collect::<Vec<_>>()
        .join(",");
        kubectl(
            kubeconfig,
            &["delete", &kinds, "--all", "-n", &name, "--wait=false"],
            None,
        );
        let mut body = ns.clone();
        body["spec"]["finalizers"] = serde_json::json!([]);
        kubectl(
            kubeconfig,
            &[
                "replace",
                "--raw",
                &format!("/api/v1/namespaces/{name}/finalize"),
                "-f",
                "-",
            ],
            Some(&body.to_string()),
        );
    }
}

impl Drop for Rollouts {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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
