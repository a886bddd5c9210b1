//! `demo`: the main job on a laptop. Starts the local control plane (etcd, a garden and a
//! runtime API server, the Gardener simulator), runs a Tessera host against it, applies
//! `examples/runtime-aws.yaml` and follows it to Ready and its kubeconfig Secret.
//! With `--kubeconfig`, uses that cluster (and the Gardener behind it) instead. With
//! `--in-pod`, the host runs as the Helm chart installs it: two pods on a real node (the
//! test image `./x demo --in-pod` builds of the demo's host), the Runtime in the release
//! namespace. A stop signal stops everything it started (`tessera_tests::stop`).
//! Run through `cargo xtask demo`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use tessera_tests::env::{ControlPlane, Host, NodeOn, PlaneOptions};
use tessera_tests::gardener_sim::Script;
use tessera_tests::registry::TestRegistry;
use tessera_tests::stop;

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
    /// Run the host in pods, installed by `helm install` onto a real node of the local
    /// control plane (kubelet, containerd), instead of as a local process.
    #[arg(long, conflicts_with = "kubeconfig")]
    in_pod: bool,
}

/// Where the host runs, and where to read its log.
enum Running {
    Process(Host),
    /// The chart's pods on the local control plane's node.
    Pods,
}

impl Running {
    fn log(&self) -> String {
        match self {
            Self::Process(host) => host.log.display().to_string(),
            Self::Pods => format!(
                "kubectl logs -n {} -l app.kubernetes.io/name=tessera",
                tessera_tests::install::NS
            ),
        }
    }
}

fn script() -> Script {
    Script {
        create_ms: 3000,
        reconcile_ms: 1500,
        delete_ms: 1500,
        ..Script::default()
    }
}

fn print_plane(cp: &ControlPlane) {
    println!("garden API server:  {}", cp.garden.server);
    println!("runtime API server: {}", cp.runtime.server);
    println!("Gardener simulator: {}", cp.sim_url);
    println!(
        "Gardener identity:  system:serviceaccount:garden-kyma-dev:tessera (a member of project kyma-dev: {})",
        cp.gardener_kubeconfig.display()
    );
}

/// The local control plane with a node, the chart installed onto it.
fn start_in_pods() -> anyhow::Result<(ControlPlane, TestRegistry)> {
    println!("starting the local control plane with a node (containerd, kubelet, controllers)…");
    let sim = std::env::current_exe()?.with_file_name("gardener-sim");
    let options = PlaneOptions {
        node: Some(NodeOn::Garden),
        pods_reach_plane: true,
    };
    let cp = ControlPlane::start_with(&sim, &script(), &options).map_err(anyhow::Error::msg)?;
    print_plane(&cp);
    let gateway = cp.bridge.as_ref().expect("a bridge").gateway;
    let registry = TestRegistry::start_on(gateway).map_err(anyhow::Error::msg)?;
    println!(
        "helm install tessera charts/tessera (2 replicas, image {})…",
        tessera_tests::install::IMAGE
    );
    let dir = tempfile::tempdir()?;
    let api_port = tessera_tests::install::apiserver_port(&cp);
    tessera_tests::install::install(&cp, &registry, dir.path(), api_port)
        .map_err(anyhow::Error::msg)?;
    show(
        &cp.garden.kubeconfig,
        &[
            "get",
            "pods",
            "-n",
            tessera_tests::install::NS,
            "-o",
            "wide",
        ],
    );
    Ok((cp, registry))
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

/// The Runtime file's name and namespace (the release namespace when the host runs in pods).
fn runtime_id(file: &Path, in_pod: bool) -> anyhow::Result<(String, String, serde_json::Value)> {
    let mut doc: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(file)?)?;
    let id = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if in_pod {
        // The chart's host watches its release namespace.
        doc["metadata"]["namespace"] = tessera_tests::install::NS.into();
    }
    let ns = doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    Ok((id, ns, doc))
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if let Err(err) = stop::install() {
        eprintln!("warning: cannot watch for Ctrl-C ({err}): stop with the processes it names");
    }
    let result = run(&args);
    // Everything `run` started has been dropped (stopped) by now; a stop also takes what is
    // left and says what it stopped.
    if stop::requested() {
        stop::finish();
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The local control plane and a host process against it.
fn start_local() -> anyhow::Result<(ControlPlane, Host)> {
    println!("starting etcd, the garden and runtime API servers and the Gardener simulator…");
    let sim = std::env::current_exe()?.with_file_name("gardener-sim");
    let cp = ControlPlane::start(&sim, &script()).map_err(anyhow::Error::msg)?;
    print_plane(&cp);
    let host = cp.host("demo-host", &[]);
    println!(
        "tessera run: pid {}, log {}",
        host.pid(),
        host.log.display()
    );
    Ok((cp, host))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let root = tessera_tests::workspace();
    let (id, ns, doc) = runtime_id(&root.join(&args.runtime), args.in_pod)?;
    // Held until the end: dropping them stops the control plane and the registry.
    let (_plane, kubeconfig, running) = match (&args.kubeconfig, args.in_pod) {
        (Some(kc), _) => {
            println!("using the cluster of {}", kc.display());
            let crds = root.join("charts/tessera/crds").display().to_string();
            print!("{}", kubectl(kc, &["apply", "-f", &crds]));
            let log = std::env::temp_dir().join("tessera-demo-host.log");
            (
                None,
                kc.clone(),
                Running::Process(Host::start(kc, &log, &[])),
            )
        }
        (None, true) => {
            let (cp, registry) = start_in_pods()?;
            let kc = cp.garden.kubeconfig.clone();
            (Some((cp, Some(registry))), kc, Running::Pods)
        }
        (None, false) => {
            let (cp, host) = start_local()?;
            // kubectl sends no token over plain HTTP (the simulator): it reads the garden
            // API server itself.
            let kc = cp.garden.kubeconfig.clone();
            (Some((cp, None)), kc, Running::Process(host))
        }
    };
    let _ = kubectl(&kubeconfig, &["create", "namespace", &ns]);
    // The Runtime as given, or moved into the release namespace.
    let file = std::env::temp_dir().join(format!("tessera-demo-{id}.json"));
    std::fs::write(&file, doc.to_string())?;
    show(&kubeconfig, &["apply", "-f", &file.display().to_string()]);
    let started = Instant::now();
    if !follow(&kubeconfig, &id, &ns, &running)? {
        return Ok(());
    }
    show_result(&kubeconfig, &id, &ns)?;
    println!("Ready after {:.1}s", started.elapsed().as_secs_f64());
    if args.keep {
        println!("kubeconfig: {}", kubeconfig.display());
        println!(
            "running until stopped: Ctrl-C, or `kill {}` (SIGINT, SIGTERM or SIGHUP), stops every process it started",
            std::process::id()
        );
        while !stop::sleep(Duration::from_secs(3600)) {}
    }
    Ok(())
}

/// Print each state the Runtime passes through until Ready (true), or until a stop is
/// requested (false).
fn follow(kubeconfig: &Path, id: &str, ns: &str, running: &Running) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let state = kubectl(
            kubeconfig,
            &[
                "get",
                "runtime",
                id,
                "-n",
                ns,
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
            return Ok(true);
        }
        if state.starts_with("Failed") || started.elapsed() > Duration::from_secs(300) {
            show(kubeconfig, &["get", "runtime", id, "-n", ns, "-o", "yaml"]);
            anyhow::bail!(
                "the Runtime did not become Ready; host log: {}",
                running.log()
            );
        }
        if stop::sleep(Duration::from_millis(250)) {
            return Ok(false);
        }
    }
}

/// The Runtime, its kubeconfig and Shoot, and the cluster seen through that kubeconfig.
fn show_result(kubeconfig: &Path, id: &str, ns: &str) -> anyhow::Result<()> {
    show(kubeconfig, &["get", "runtimes", "-n", ns, "-o", "wide"]);
    show(kubeconfig, &["get", "runtimekubeconfigs", "-n", ns]);
    let secret = format!("kubeconfig-{id}");
    show(
        kubeconfig,
        &["get", "secret", &secret, "-n", ns, "--show-labels"],
    );
    show(
        kubeconfig,
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
        kubeconfig,
        &[
            "get",
            "secret",
            &secret,
            "-n",
            ns,
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
    Ok(())
}
