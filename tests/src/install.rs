//! The chart installed onto a cluster with a real node, for the chart's end-to-end test
//! (`tests/tests/install.rs`) and `./x demo --in-pod`: the test images of the test build's
//! host loaded on the node (docs/image.md#test-images), the Gardener kubeconfig Secret, a module plugin in a registry the pods
//! reach, then `helm install`.
//!
//! The pods reach the API servers, the simulator and the registry at the node bridge's
//! address (no kube-proxy here: the chart's `extraEnv` points the host at its API server).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::env::ControlPlane;
use crate::modules::{PIPELINE_CRD, crd_grant, kubectl_ok, plugin_file, requested_grants, tessera};
use crate::node::PAUSE_IMAGE;
use crate::registry::TestRegistry;

use crate::Result;

pub const NS: &str = "tessera-system";
pub const IMAGE: &str = "tessera.test/tessera";
pub const LIMIT: Duration = Duration::from_secs(120);

pub fn helm_bin() -> PathBuf {
    std::env::var_os("TESSERA_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tessera/helm/helm")
        })
}

/// The test image's tar (`./x test` and `./x demo --in-pod` build it from the test build's
/// host and export its path).
pub fn image_tar() -> PathBuf {
    std::env::var_os("TESSERA_IMAGE_TAR")
        .map(PathBuf::from)
        .expect("TESSERA_IMAGE_TAR: run through ./x test, which builds the image")
}

/// The image of a second build of the same source whose `--version` says `<version>-next`
/// (the upgrade's target); tagged `next`. Without it (`./x demo --in-pod`) only `dev`.
pub fn next_image_tar() -> Option<PathBuf> {
    std::env::var_os("TESSERA_NEXT_IMAGE_TAR").map(PathBuf::from)
}

pub fn json_of(cluster: &Cluster, args: &[&str]) -> Result<Value> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl_ok(cluster, &all)?).map_err(|e| e.to_string())
}

pub fn helm(cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let started = Instant::now();
    let out = std::process::Command::new(helm_bin())
        .args(args)
        .arg("--kubeconfig")
        .arg(&cp.garden.kubeconfig)
        .output()
        .map_err(|e| format!("helm: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "helm {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    eprintln!("  helm {}: took {:.1?}", args[0], started.elapsed());
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Poll `probe` every 500 ms until it gives a value or `LIMIT` passes.
pub fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> Result<T> {
    let started = Instant::now();
    while started.elapsed() < LIMIT {
        if let Some(v) = probe() {
            eprintln!("  {what}: after {:.1?}", started.elapsed());
            return Ok(v);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!("{what}: not within {LIMIT:?}"))
}

/// What went on in the release namespace, for failure messages.
pub fn diagnose(cp: &ControlPlane) -> String {
    let pods = kubectl_ok(&cp.garden, &["get", "pods", "-A", "-o", "wide"]).unwrap_or_default();
    let events = kubectl_ok(&cp.garden, &["get", "events", "-n", NS]).unwrap_or_default();
    let logs = kubectl_ok(
        &cp.garden,
        &[
            "logs",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/name=tessera",
            "--tail=30",
        ],
    )
    .unwrap_or_else(|e| e);
    let node = cp.node.as_ref().map(|n| n.logs()).unwrap_or_default();
    format!("pods:\n{pods}\nevents:\n{events}\nhost logs:\n{logs}\nnode:\n{node}")
}

/// The API server's port on the bridge.
pub fn apiserver_port(cp: &ControlPlane) -> u16 {
    let port = cp.garden.server.rsplit(':').next().unwrap();
    port.parse().expect("the API server's port")
}

/// The chart's values for this cluster; the host reaches its API server at `api_port` on
/// the bridge (the API server's own, or a relay's).
pub fn values(cp: &ControlPlane, registry: &TestRegistry, tag: &str, api_port: u16) -> Value {
    let bridge = cp.bridge.as_ref().expect("the plane serves on a bridge");
    json!({
        "image": {"repository": IMAGE, "tag": tag, "pullPolicy": "IfNotPresent"},
        "replicaCount": 2,
        "leaderElection": {"leaseDuration": "6s"},
        "gardener": {"kubeconfigSecret": "gardener"},
        "modules": {"localClusterAdmin": true},
        "plugins": {"resync": "2s", "insecureRegistries": [registry.host()]},
        "requeue": {"error": "1s", "pending": "5s", "retry": "5s", "errorMax": "5s"},
        "liveness": {"stallTimeout": "12s", "periodSeconds": 1, "failureThreshold": 2},
        "extraEnv": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": bridge.gateway.to_string()},
            {"name": "KUBERNETES_SERVICE_PORT", "value": api_port.to_string()},
        ],
    })
}

/// The Gardener kubeconfig as the Secret the chart mounts: the simulator, as the project's
/// ServiceAccount (Gardener's project-member rights in `garden-kyma-dev`, nothing more).
fn gardener_secret(cp: &ControlPlane) -> Result {
    kubectl_ok(&cp.garden, &["create", "namespace", NS])?;
    let kubeconfig = cp.gardener_kubeconfig.display().to_string();
    kubectl_ok(
        &cp.garden,
        &[
            "-n",
            NS,
            "create",
            "secret",
            "generic",
            "gardener",
            &format!("--from-file=kubeconfig={kubeconfig}"),
        ],
    )
    .map(drop)
}

/// The telemetry module and its CRD bundle (the `manifest` plugin) in the registry, and
/// their Plugin resources.
fn module_plugins(cp: &ControlPlane, registry: &TestRegistry) -> Result {
    for file in ["telemetry", "manifest"] {
        let reference = format!("{}/modules/{file}:1.0.0", registry.host());
        let path = plugin_file(file).display().to_string();
        let host = registry.host();
        let (ok, out) = tessera(&[
            "plugin",
            "push",
            &path,
            &reference,
            "--version",
            "1.0.0",
            "--insecure-registry",
            &host,
        ]);
        if !ok {
            return Err(out);
        }
    }
    let plugin = |name: &str, file: &str, extra: Value| {
        let mut spec = json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": format!("{}/modules/{file}:1.0.0", registry.host())}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
        });
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"apiVersion": "tessera.dev/v1alpha1", "kind": "Plugin",
            "metadata": {"name": name}, "spec": spec})
    };
    apply(
        &cp.garden,
        &plugin(
            "telemetry",
            "telemetry",
            json!({"grants": requested_grants("telemetry")}),
        ),
    )?;
    apply(
        &cp.garden,
        &plugin(
            "telemetry-crds",
            "manifest",
            json!({"config": {"manifest": PIPELINE_CRD},
                "grants": crd_grant("pipelines.telemetry.tessera.dev")}),
        ),
    )
}

pub fn apply(cluster: &Cluster, doc: &Value) -> Result {
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], &doc.to_string());
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(())
}

fn write_values(dir: &Path, values: &Value) -> String {
    let path = dir.join("values.json");
    std::fs::write(&path, values.to_string()).unwrap();
    path.display().to_string()
}

/// A directory on the node every host pod keeps its precompiled plugins in (the pods run
/// as a non-root user): only the first pods compile; a failover's or an upgrade's new pod
/// starts at once, as with a shared volume in production.
fn shared_cache(dir: &Path) -> Result<Value> {
    use std::os::unix::fs::PermissionsExt;
    let cache = dir.join("wasm-cache");
    std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777))
        .map_err(|e| format!("{}: {e}", cache.display()))?;
    Ok(json!({"hostPath": {"path": cache, "type": "Directory"}}))
}

/// Both images on the node, the prerequisites, then `helm install --wait`; the host reaches
/// its API server at `api_port` on the bridge.
pub fn install(cp: &ControlPlane, registry: &TestRegistry, dir: &Path, api_port: u16) -> Result {
    let node = cp.node.as_ref().expect("a node");
    node.import(&image_tar(), &format!("{IMAGE}:dev"))?;
    if let Some(next) = next_image_tar() {
        node.import(&next, &format!("{IMAGE}:next"))?;
    }
    gardener_secret(cp)?;
    module_plugins(cp, registry)?;
    let chart = crate::workspace().join("charts/tessera");
    let mut values = values(cp, registry, "dev", api_port);
    values["plugins"]["cacheVolume"] = shared_cache(dir)?;
    let values = write_values(dir, &values);
    let chart = chart.display().to_string();
    helm(
        cp,
        &[
            "install",
            "tessera",
            &chart,
            "-n",
            NS,
            "-f",
            &values,
            "--wait",
            "--timeout",
            "3m",
        ],
    )
    .map_err(|e| format!("{e}\n{}", diagnose(cp)))?;
    Ok(())
}

/// The `(Ready, Shoot uid)` of Runtime `id` once Ready, with its kubeconfig Secret.
pub fn runtime_ready(cp: &ControlPlane, id: &str) -> Result<String> {
    wait_for(&format!("Runtime {id} Ready"), || {
        let rt = json_of(&cp.garden, &["-n", NS, "get", "runtime", id]).ok()?;
        (rt["status"]["state"] == "Ready").then_some(())
    })
    .map_err(|e| format!("{e}\n{}", diagnose(cp)))?;
    let secret = json_of(
        &cp.garden,
        &["-n", NS, "get", "secret", &format!("kubeconfig-{id}")],
    )?;
    if secret["data"]["config"].as_str().unwrap_or("").is_empty() {
        return Err(format!("kubeconfig-{id} has no kubeconfig"));
    }
    let shoot_name = format!("shoot-{id}");
    let shoot = json_of(
        &cp.garden,
        &[
            "-n",
            "garden-kyma-dev",
            "get",
            "shoots.core.gardener.cloud",
            &shoot_name,
        ],
    )?;
    let refused = cp.refusals(&shoot_name);
    if !refused.is_empty() {
        return Err(format!(
            "Gardener refused requests about {shoot_name}: {refused:?}"
        ));
    }
    Ok(shoot["metadata"]["uid"].as_str().unwrap_or("").to_string())
}

pub fn new_runtime(cp: &ControlPlane, id: &str) -> Result {
    let rt = crate::runtimes::runtime_doc(NS, id, &format!("shoot-{id}"));
    apply(&cp.garden, &serde_json::to_value(rt).unwrap())
}

/// A ModuleSet installing into this cluster: its Deployment really becomes available.
/// The Deployment's uid.
pub fn modules_available(cp: &ControlPlane) -> Result<String> {
    let set = json!({
        "apiVersion": "tessera.dev/v1alpha1", "kind": "ModuleSet",
        "metadata": {"name": "local", "namespace": NS},
        "spec": {"modules": [
            {"name": "telemetry-crds"},
            {"name": "telemetry", "config": {"endpoint": "otlp.example:4317", "image": PAUSE_IMAGE}},
        ]},
    });
    apply(&cp.garden, &set)?;
    wait_for("ModuleSet local Ready", || {
        let s = json_of(&cp.garden, &["-n", NS, "get", "moduleset", "local"]).ok()?;
        (s["status"]["state"] == "Ready").then_some(())
    })
    .map_err(|e| format!("{e}\n{}", diagnose(cp)))?;
    let d = json_of(
        &cp.garden,
        &[
            "-n",
            "kyma-system",
            "get",
            "deployment",
            "telemetry-gateway",
        ],
    )?;
    let (want, available) = (&d["spec"]["replicas"], &d["status"]["availableReplicas"]);
    if want != available {
        return Err(format!("Deployment available {available} of {want}"));
    }
    Ok(d["metadata"]["uid"].as_str().unwrap_or("").to_string())
}
