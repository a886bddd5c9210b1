//! `demo`: the main job on a laptop. Starts the local control plane (etcd, a garden and a
//! runtime API server, the Gardener simulator), runs a Tessera host against it, applies
//! `examples/runtime-aws.yaml` and follows it to Ready and its kubeconfig Secret.
//! With `--kubeconfig`, uses that cluster (and the Gardener behind it) instead.
//! Run through `cargo xtask demo`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;

#[derive(Debug, Parser)]
struct Args {
    /// Use this cluster (Runtimes and Gardener) instead of a local control plane.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The Runtime to apply.
    #[arg(long, default_value = "examples/runtime-aws.yaml")]
    runtime: PathBuf,
    /// Keep everything running until Ctrl-C.
    #[arg(long)]
    keep: bool,
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        text.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    text
}

fn show(kubeconfig: &Path, args: &[&str]) {
    println!("$ kubectl {}", args.join(" "));
    print!("{}", kubectl(kubeconfig, args));
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = tessera_tests::workspace();
    let runtime_file = root.join(&args.runtime);
    let doc: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(&runtime_file)?)?;
    let id = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();

    let control_plane;
    let (kubeconfig, host): (PathBuf, Host) = match &args.kubeconfig {
        Some(kc) => {
            println!("using the cluster of {}", kc.display());
            print!(
                "{}",
                kubectl(
                    kc,
                    &[
                        "apply",
                        "-f",
                        &root.join("charts/tessera/crds").display().to_string()
                    ]
                )
            );
            let log = std::env::temp_dir().join("tessera-demo-host.log");
            let host = Host::start(kc, &log, &[]);
            (kc.clone(), host)
        }
        None => {
            println!(
                "starting etcd, the garden and runtime API servers and the Gardener simulator…"
            );
            let sim = std::env::current_exe()?.with_file_name("gardener-sim");
            let script = Script {
                create_ms: 3000,
                reconcile_ms: 1500,
                delete_ms: 1500,
                ..Script::default()
            };
            control_plane = ControlPlane::start(&sim, &script).map_err(anyhow::Error::msg)?;
            println!("garden API server:  {}", control_plane.garden.server);
            println!("runtime API server: {}", control_plane.runtime.server);
            println!("Gardener simulator: {}", control_plane.sim_url);
            let host = control_plane.host("demo-host", &[]);
            (control_plane.kubeconfig.clone(), host)
        }
    };
    println!(
        "tessera run: pid {}, log {}",
        host.pid(),
        host.log.display()
    );
    let _ = kubectl(&kubeconfig, &["create", "namespace", &ns]);
    show(
        &kubeconfig,
        &["apply", "-f", &runtime_file.display().to_string()],
    );

    let started = Instant::now();
    let mut last = String::new();
    loop {
        let state = kubectl(
            &kubeconfig,
            &[
                "get",
                "runtime",
                &id,
                "-n",
                &ns,
                "-o",
                "jsonpath={.status.state} {.status.step} {.status.conditions[?(@.type==\"Provisioned\")].reason}",
            ],
        );
        if state != last {
            println!(
                "{:>5.1}s  {}",
                started.elapsed().as_secs_f64(),
                state.trim()
            );
            last = state.clone();
        }
        if state.starts_with("Ready") {
            break;
        }
        if state.starts_with("Failed") || started.elapsed() > Duration::from_secs(300) {
            show(
                &kubeconfig,
                &["get", "runtime", &id, "-n", &ns, "-o", "yaml"],
            );
            anyhow::bail!(
                "the Runtime did not become Ready; host log: {}",
                host.log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    show(&kubeconfig, &["get", "runtimes", "-n", &ns, "-o", "wide"]);
    show(&kubeconfig, &["get", "runtimekubeconfigs", "-n", &ns]);
    let secret = format!("kubeconfig-{id}");
    show(
        &kubeconfig,
        &["get", "secret", &secret, "-n", &ns, "--show-labels"],
    );
    show(
        &kubeconfig,
        &[
            "get",
            "shoots",
            "-A",
            "-o",
            "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,OPERATION:.status.lastOperation.type,STATE:.status.lastOperation.state",
        ],
    );
    // The fetched kubeconfig reaches the new cluster, where the admin bindings are.
    let encoded = kubectl(
        &kubeconfig,
        &[
            "get",
            "secret",
            &secret,
            "-n",
            &ns,
            "-o",
            "jsonpath={.data.config}",
        ],
    );
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim())?;
    let runtime_kc = std::env::temp_dir().join(format!("tessera-demo-{id}.kubeconfig"));
    std::fs::write(&runtime_kc, decoded)?;
    println!("# with the Runtime's own kubeconfig:");
    show(
        &runtime_kc,
        &[
            "get",
            "clusterrolebindings",
            "-l",
            "app.kubernetes.io/managed-by=tessera",
            "-o",
            "custom-columns=NAME:.metadata.name,ROLE:.roleRef.name,USER:.subjects[0].name",
        ],
    );
    println!("Ready after {:.1}s", started.elapsed().as_secs_f64());
    if args.keep {
        println!(
            "kubeconfig: {} — Ctrl-C stops everything",
            kubeconfig.display()
        );
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    Ok(())
}
