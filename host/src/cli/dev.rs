//! `tessera dev up|down`: a Kubernetes API server and an OCI registry on this machine, for
//! plugin authors to try a module without a control plane or a checkout of Tessera. The
//! same pieces the integration tests start (`tessera::devenv`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use tessera::devenv::cluster::{Cluster, ClusterOptions};
use tessera::devenv::node::{Bridge, ControllerManager, Node, PAUSE_IMAGE};
use tessera::devenv::registry::TestRegistry;
use tessera::devenv::tools;

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Start a real etcd and kube-apiserver 1.20.2 and a registry (Debian's docker-registry)
    /// on loopback, in the background; print the kubeconfig and the registry's address once
    /// they answer. The first time on a machine it installs what is missing (etcd, the
    /// registry, and Kubernetes built from Debian's source: about 6 minutes on 2 cores) and
    /// says so. Each `up` starts empty; stop with `tessera dev down`.
    Up(UpArgs),
    /// Stop what `tessera dev up` started in the directory; its data goes with it.
    Down(DirArgs),
}

#[derive(Debug, Args)]
pub struct DirArgs {
    /// Where the kubeconfig, the registry's address, the logs and the process id are kept.
    #[arg(long, default_value = ".tessera-dev")]
    dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Also a node that runs Pods (containerd, runc, kubelet, kube-controller-manager,
    /// kube-scheduler), for modules whose readiness needs running workloads. Needs root.
    /// Images are not pulled from the internet: the node has `tessera.test/pause:1`, and
    /// `ctr` imports others (the socket is printed).
    #[arg(long)]
    node: bool,
    /// Stay in the foreground until Ctrl-C or SIGTERM instead of returning once ready.
    #[arg(long)]
    foreground: bool,
}

pub fn run(command: DevCommand) -> anyhow::Result<ExitCode> {
    match command {
        DevCommand::Up(args) => up(args),
        DevCommand::Down(args) => down(&args.dir),
    }
}

/// The files of a dev directory.
struct Files(PathBuf);

impl Files {
    fn new(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Self(dir.canonicalize()?))
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    /// The pid of a serving `tessera dev up` in this directory, if one runs: the pid file's
    /// process, alive (not a zombie) and still `tessera dev up` for this directory (a pid
    /// reused by another program is not it).
    fn running(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.path("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let ours = args.windows(2).any(|w| w == [&b"dev"[..], &b"up"[..]])
            && args
                .iter()
                .any(|a| *a == self.0.as_os_str().as_encoded_bytes());
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        (pid > 0 && ours && !zombie).then_some(pid)
    }
    fn clear(&self) {
        for name in ["pid", "ready", "kubeconfig", "registry", "node"] {
            let _ = std::fs::remove_file(self.path(name));
        }
    }
}

fn up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let files = Files::new(&args.dir.dir)?;
    if let Some(pid) = files.running() {
        eprintln!("already running (pid {pid}) in {}", files.0.display());
        wait_ready(&files, || Ok(None))?;
        print_ready(&files);
        return Ok(ExitCode::SUCCESS);
    }
    files.clear();
    if args.node && unsafe { libc::geteuid() } != 0 {
        bail!("--node needs root: containerd, network links and mounts");
    }
    install(&files, args.node)?;
    if args.foreground {
        serve(&files, args.node)
    } else {
        detach(&files, args.node)
    }
}

/// Install what is missing, saying what and how long it took.
fn install(files: &Files, node: bool) -> anyhow::Result<()> {
    let missing = tools::missing(node);
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("first use on this machine: installing what is missing (once):");
    for what in &missing {
        eprintln!("  - {what}");
    }
    let started = Instant::now();
    tools::ensure(node, &files.path("install.log")).map_err(anyhow::Error::msg)?;
    eprintln!("installed in {:.0?}", started.elapsed());
    Ok(())
}

/// Run `tessera dev up --foreground` in a session of its own (a closed terminal or Ctrl-C
/// here does not reach it) and return once it is ready, or with its log when it failed.
fn detach(files: &Files, node: bool) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(files.path("dev.log"))?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["dev", "up", "--foreground", "--dir"])
        .arg(&files.0)
        .args(node.then_some("--node"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("cannot start tessera dev up --foreground")?;
    let started = Instant::now();
    let waited = wait_ready(files, || child.try_wait());
    if waited.is_err() && child.try_wait()?.is_none() {
        // It stops what it started on SIGTERM, once its start-up ends.
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    }
    waited?;
    eprintln!("ready in {:.1?}", started.elapsed());
    print_ready(files);
    Ok(ExitCode::SUCCESS)
}

/// Wait until the serving process says it is ready; `exited` tells whether it ended first.
fn wait_ready(
    files: &Files,
    mut exited: impl FnMut() -> std::io::Result<Option<std::process::ExitStatus>>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while !files.path("ready").exists() {
        if let Some(status) = exited()? {
            bail!(
                "tessera dev up stopped ({status}); the end of {}:\n{}",
                files.path("dev.log").display(),
                tools::tail(&files.path("dev.log"), 30)
            );
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!(
                "not ready after 5 minutes; see {}",
                files.path("dev.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// What a user needs to go on (from the directory's files, so `up` can repeat it).
fn print_ready(files: &Files) {
    let registry = std::fs::read_to_string(files.path("registry")).unwrap_or_default();
    let node = std::fs::read_to_string(files.path("node")).unwrap_or_default();
    println!("export KUBECONFIG={}", files.path("kubeconfig").display());
    println!("# registry: {} (plain HTTP on loopback)", registry.trim());
    if !node.trim().is_empty() {
        println!("# node: {}", node.trim());
    }
    println!("# stop with: tessera dev down --dir {}", files.0.display());
}

/// What `up --foreground` runs; dropped in field order: the node (with its own
/// controllers) or the controller manager, the registry, the cluster, the bridge.
struct Pieces {
    node: Option<Node>,
    _controllers: Option<ControllerManager>,
    registry: TestRegistry,
    cluster: Cluster,
    _bridge: Option<Bridge>,
}

fn start(node: bool, files: &Files) -> Result<Pieces, String> {
    let bridge = if node { Some(Bridge::create()?) } else { None };
    let options = ClusterOptions {
        service_accounts: node,
        address: bridge.as_ref().map(|b| b.gateway),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with("dev", &options)?;
    let registry = TestRegistry::start()?;
    let (node, controllers) = match &bridge {
        Some(b) => (Some(Node::start(&cluster, "dev-node", Some(b))?), None),
        None => {
            let log = files.path("kube-controller-manager.log");
            (None, Some(ControllerManager::start(&cluster, &log)?))
        }
    };
    Ok(Pieces {
        node,
        _controllers: controllers,
        registry,
        cluster,
        _bridge: bridge,
    })
}

/// Start everything, write the directory's files, wait for SIGINT or SIGTERM, stop.
fn serve(files: &Files, node: bool) -> anyhow::Result<ExitCode> {
    let signals = block_signals();
    std::fs::write(files.path("pid"), std::process::id().to_string())?;
    let result = serve_until_signal(files, node, &signals);
    // Whatever happened, the pieces are stopped (dropped) by now.
    files.clear();
    result
}

fn serve_until_signal(
    files: &Files,
    node: bool,
    signals: &libc::sigset_t,
) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let pieces = start(node, files).map_err(anyhow::Error::msg)?;
    std::fs::copy(&pieces.cluster.kubeconfig, files.path("kubeconfig"))?;
    std::fs::write(files.path("registry"), pieces.registry.host())?;
    if let Some(n) = &pieces.node {
        let socket = n.socket().display().to_string();
        let text = format!(
            "{} Ready; images: {PAUSE_IMAGE}; import more with: ctr --address {socket} -n k8s.io images import FILE",
            n.name
        );
        std::fs::write(files.path("node"), text)?;
    }
    std::fs::write(files.path("ready"), "")?;
    eprintln!("ready in {:.1?}", started.elapsed());
    print_ready(files);
    let signal = wait_for(signals);
    eprintln!("signal {signal}: stopping");
    drop(pieces);
    eprintln!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// SIGINT and SIGTERM blocked in this thread (and the threads it starts), to be taken with
/// [`wait_for`] rather than ending the process before the pieces are stopped.
fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a local signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for(set: &libc::sigset_t) -> i32 {
    let mut signal = 0;
    // SAFETY: `set` was filled by `block_signals`.
    unsafe { libc::sigwait(set, &mut signal) };
    signal
}

/// SIGTERM to the serving process, then wait until it is gone.
fn down(dir: &Path) -> anyhow::Result<ExitCode> {
    let files = Files::new(dir)?;
    let Some(pid) = files.running() else {
        eprintln!("nothing runs in {}", files.0.display());
        files.clear();
        return Ok(ExitCode::SUCCESS);
    };
    // SAFETY: a signal to the pid of our own file, checked to be `tessera dev up` for it.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        bail!(
            "cannot signal pid {pid}: {} (started by another user, e.g. root for --node?)",
            std::io::Error::last_os_error()
        );
    }
    let started = Instant::now();
    // A start-up in progress (up to a few minutes with a node) ends before the stop.
    while files.running().is_some() && files.path("pid").exists() {
        if started.elapsed() > Duration::from_secs(300) {
            bail!(
                "pid {pid} still runs after 300 s; see {}",
                files.path("dev.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("stopped (pid {pid}) in {:.1?}", started.elapsed());
    Ok(ExitCode::SUCCESS)
}
