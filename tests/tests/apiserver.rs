//! The test environment itself: a real etcd + kube-apiserver on loopback serves the API
//! features the operator relies on (namespaces, CRDs, server-side apply, status).

use tessera_tests::cluster::Cluster;

fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.test.tessera.dev}
spec:
  group: test.tessera.dev
  scope: Namespaced
  names: {plural: probes, singular: probe, kind: Probe}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
            status: {type: object, properties: {state: {type: string}}}
"#;

#[test]
fn two_api_servers_on_one_machine_serve_crds_and_server_side_apply() {
    let garden = Cluster::start("garden").unwrap_or_else(|e| panic!("{e}"));
    let runtime = Cluster::start("runtime").unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(garden.server, runtime.server);

    ok(garden.kubectl(&["create", "namespace", "garden-kyma-dev"]));
    let namespaces = ok(runtime.kubectl(&["get", "namespaces", "-o", "name"]));
    assert!(
        !namespaces.contains("garden-kyma-dev"),
        "clusters are separate"
    );

    ok(garden.kubectl_stdin(&["apply", "-f", "-"], CRD));
    ok(garden.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/probes.test.tessera.dev",
        "--timeout=60s",
    ]));
    let probe = "apiVersion: test.tessera.dev/v1\nkind: Probe\nmetadata: {name: p1, namespace: garden-kyma-dev}\nspec: {size: 3}\n";
    ok(garden.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "tessera",
            "-f",
            "-",
        ],
        probe,
    ));
    let managed = ok(garden.kubectl(&[
        "get",
        "probe",
        "p1",
        "-n",
        "garden-kyma-dev",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[0].manager} {.spec.size}",
    ]));
    assert_eq!(managed, "tessera 3");
}

/// The node the module and chart tests use: a Deployment's pod really starts on it (real
/// scheduler, kubelet, containerd and runc, a bridge pod IP), the Deployment controller
/// reports it available, and deleting the namespace really finalizes it.
#[test]
fn a_node_runs_pods_and_namespaces_finalize() {
    use tessera_tests::node::{Node, PAUSE_IMAGE};
    let started = std::time::Instant::now();
    let cluster = Cluster::start("node").expect("cluster");
    let node = Node::start(&cluster, "node-0", None).expect("node");
    eprintln!("cluster and node Ready after {:.1?}", started.elapsed());
    ok(cluster.kubectl(&["create", "namespace", "work"]));
    ok(cluster.kubectl(&[
        "-n",
        "work",
        "create",
        "deployment",
        "sleeper",
        "--image",
        PAUSE_IMAGE,
        "--replicas",
        "2",
    ]));
    let rolled = cluster.kubectl(&[
        "-n",
        "work",
        "rollout",
        "status",
        "deployment/sleeper",
        "--timeout=90s",
    ]);
    assert!(
        rolled.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&rolled.stderr),
        node.logs()
    );
    let ips = ok(cluster.kubectl(&[
        "-n",
        "work",
        "get",
        "pods",
        "-o",
        "jsonpath={.items[*].status.podIP}",
    ]));
    assert!(
        ips.split(' ').all(|ip| ip.starts_with("10.88.")),
        "pod IPs come from the bridge: {ips}"
    );
    eprintln!("Deployment available after {:.1?}", started.elapsed());
    ok(cluster.kubectl(&["delete", "namespace", "work", "--timeout=90s"]));
    eprintln!("namespace finalized after {:.1?}", started.elapsed());
    let gone = cluster.kubectl(&["get", "namespace", "work"]);
    assert!(
        !gone.status.success(),
        "the namespace is finalized and gone"
    );
}
