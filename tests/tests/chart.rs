//! The Helm chart: lints, renders, its manifests pass a real API server's validation
//! (server-side dry run), and the arguments it gives `tessera run` parse.

use std::path::PathBuf;
use std::process::Command;

use tessera_tests::cluster::Cluster;

fn helm() -> PathBuf {
    std::env::var_os("TESSERA_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tessera/helm/helm")
        })
}

fn chart() -> PathBuf {
    tessera_tests::workspace().join("charts/tessera")
}

fn template(sets: &[&str]) -> String {
    let out = try_template(sets);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn try_template(sets: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(helm());
    cmd.args([
        "template",
        "tessera",
        "--namespace",
        "default",
        "--include-crds",
    ])
    .arg(chart());
    for set in sets {
        cmd.args(["--set", set]);
    }
    cmd.output()
        .expect("helm (tests/chart/ensure-helm.sh installs it)")
}

/// The rendered documents, parsed.
fn documents(rendered: &str) -> Vec<serde_json::Value> {
    rendered
        .split("\n---")
        .filter_map(|d| serde_saphyr::from_str::<serde_json::Value>(d).ok())
        .filter(|d| d.is_object())
        .collect()
}

fn find<'a>(
    docs: &'a [serde_json::Value],
    kind: &str,
    name: &str,
) -> Option<&'a serde_json::Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"].as_str() == Some(name))
}

/// The `args` of the Deployment's container.
fn container_args(rendered: &str) -> Vec<String> {
    let deployment = rendered
        .split("\n---")
        .find(|doc| doc.contains("kind: Deployment"))
        .expect("a Deployment");
    let doc: serde_json::Value = serde_saphyr::from_str(deployment).unwrap();
    doc["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

const VARIANTS: &[&[&str]] = &[
    &[],
    &[
        "gardener.kubeconfigSecret=garden-kubeconfig",
        "watchNamespace=kcp-system",
        "leaderElection.enabled=false",
        "replicaCount=1",
        "modules.targets[0]=kcp-system/kubeconfig-*",
        "kubeconfigs.servers[0]=https://api.*.example.com",
        "metrics.allowFrom[0].namespaceSelector.matchLabels.team=monitoring",
        "requeue.ready=10m",
        "forceDeletion=true",
        "runtimeNamespaces[0]=kyma-system",
        "gardener.requestsPerSecond=10",
        "chain.project=kyma-prod",
        "chain.plugins.labels.grants.shootPaths[0]=metadata.labels.account",
        "plugins.selector=tier=prod",
        "plugins.trustPolicy.requireSignatures=true",
        "plugins.registryCredentialsSecret=registry-auth",
        "plugins.insecureRegistries[0]=registry.internal:5000",
        "plugins.storeVolume.persistentVolumeClaim.claimName=tessera-plugins",
        "modules.localClusterAdmin=true",
    ],
];

#[test]
fn chart_chain_configuration_is_what_the_host_reads() {
    let rendered = template(VARIANTS[1]);
    let doc = rendered
        .split("\n---")
        .find(|d| d.contains("kind: ConfigMap") && d.contains("chain.yaml"))
        .expect("the chain ConfigMap");
    let cm: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.yaml");
    std::fs::write(&path, cm["data"]["chain.yaml"].as_str().unwrap()).unwrap();
    let config = tessera::plugins::ChainConfig::from_file(&path).expect("the host reads it");
    assert_eq!(config.project(), "kyma-prod");
    assert!(config.plugins["labels"].grants.is_some());
}

#[test]
fn chart_runs_least_privileged() {
    let docs = documents(&template(&[]));
    let deployment = find(&docs, "Deployment", "tessera-tessera").expect("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0]["securityContext"];
    assert_eq!(container["readOnlyRootFilesystem"], true);
    assert_eq!(container["allowPrivilegeEscalation"], false);
    assert_eq!(container["capabilities"]["drop"][0], "ALL");
    // Secrets only in the managed namespace; nothing cluster-wide grants them.
    let cluster_role = find(&docs, "ClusterRole", "tessera-tessera").expect("ClusterRole");
    assert!(
        !cluster_role.to_string().contains("secrets"),
        "{cluster_role}"
    );
    let role = find(&docs, "Role", "tessera-tessera-secrets").expect("a Role for Secrets");
    assert_eq!(role["metadata"]["namespace"], "default");
    let shoots = find(&docs, "Role", "tessera-tessera-shoots").expect("a Role for Shoots");
    assert_eq!(shoots["metadata"]["namespace"], "garden-kyma-dev");
    let policy = find(&docs, "NetworkPolicy", "tessera-tessera").expect("NetworkPolicy");
    assert_eq!(
        policy["spec"]["ingress"],
        serde_json::json!([]),
        "metrics closed by default"
    );
    let args = container_args(&template(&[]));
    assert!(
        args.contains(&"--namespace=default".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--cache-key-file=/etc/tessera-cache-key/key".to_string()),
        "{args:?}"
    );
}

/// The precompiled plugins live on an emptyDir unless the operator names a volume the pods
/// share.
#[test]
fn chart_keeps_precompiled_plugins_where_told() {
    let cache = |sets: &[&str]| {
        let docs = documents(&template(sets));
        let deployment = find(&docs, "Deployment", "tessera-tessera").expect("Deployment");
        let volumes = deployment["spec"]["template"]["spec"]["volumes"].clone();
        let volumes = volumes.as_array().cloned().unwrap_or_default();
        volumes
            .into_iter()
            .find(|v| v["name"] == "cache")
            .expect("the cache volume")
    };
    assert_eq!(
        cache(&[]),
        serde_json::json!({"name": "cache", "emptyDir": {}})
    );
    assert_eq!(
        cache(&["plugins.cacheVolume.persistentVolumeClaim.claimName=tessera-wasm"]),
        serde_json::json!({"name": "cache", "persistentVolumeClaim": {"claimName": "tessera-wasm"}})
    );
}

/// The image `./x image` names (repository:appVersion), another tag, or a pinned digest.
#[test]
fn chart_image_is_a_tag_or_a_digest() {
    let image = |sets: &[&str]| {
        let docs = documents(&template(sets));
        let deployment = find(&docs, "Deployment", "tessera-tessera").expect("Deployment");
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .expect("an image")
            .to_string()
    };
    assert_eq!(
        image(&[]),
        format!("ghcr.io/tessera-dev/tessera:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        image(&["image.repository=127.0.0.1:5000/tessera", "image.tag=dev"]),
        "127.0.0.1:5000/tessera:dev"
    );
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        image(&["image.tag=dev", &format!("image.digest={digest}")]),
        format!("ghcr.io/tessera-dev/tessera@{digest}")
    );
}

#[test]
fn chart_refuses_two_replicas_without_leader_election() {
    let out = try_template(&["leaderElection.enabled=false"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs leaderElection.enabled"), "{stderr}");
}

#[test]
fn chart_lints() {
    let out = Command::new(helm())
        .arg("lint")
        .arg(chart())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn chart_arguments_parse() {
    let tessera = tessera_tests::env::tessera_bin();
    for sets in VARIANTS {
        let args = container_args(&template(sets));
        assert!(args.contains(&"run".to_string()), "{args:?}");
        let out = Command::new(&tessera)
            .args(&args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tessera {args:?} is refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn chart_manifests_pass_server_validation() {
    let cluster = Cluster::start("chart").expect("API server");
    // The namespaces the chart puts Roles in (the watched one, the Gardener project).
    for ns in ["kcp-system", "garden-kyma-dev", "garden-kyma-prod"] {
        cluster.kubectl(&["create", "namespace", ns]);
    }
    for sets in VARIANTS {
        let rendered = template(sets);
        // CRDs first: a dry run cannot create them for the resources that follow.
        let out = cluster.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered);
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
