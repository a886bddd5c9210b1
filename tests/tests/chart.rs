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
    let out = cmd
        .output()
        .expect("helm (tests/chart/ensure-helm.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
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
        "requeue.ready=10m",
        "forceDeletion=true",
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
