//! What the local pieces need on the machine, made on first use: etcd and Kubernetes 1.20.2
//! built from Debian's `kubernetes` source package (kube-apiserver and
//! kube-controller-manager; with a node also kubelet and kube-scheduler), containerd, runc, the CNI plugins and a pause
//! image for a node, and Debian's `docker-registry`. The scripts are the ones `./x test`
//! runs, built into the binary so that this works outside a checkout.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const APISERVER_SCRIPT: &str = include_str!("../../../tests/kube/ensure-apiserver.sh");
const NODE_SCRIPT: &str = include_str!("../../../tests/node/ensure-node.sh");
const REGISTRY_SCRIPT: &str = include_str!("../../../tests/registry/ensure-registry.sh");

/// `~/.cache/tessera/<what>` (or `$XDG_CACHE_HOME/tessera/<what>`).
fn cache(what: &str) -> PathBuf {
    crate::paths::cache_dir(what).unwrap_or_else(|| Path::new("tessera").join(what))
}

/// Where the Kubernetes binaries are cached: `$TESSERA_KUBE_CACHE`, else
/// `~/.cache/tessera/kube` (the scripts' default too).
pub fn kube_cache() -> PathBuf {
    std::env::var_os("TESSERA_KUBE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache("kube"))
}

/// The node's cached files (`pause.tar`): `$TESSERA_NODE_DIR`, else `~/.cache/tessera/node`.
pub fn node_cache() -> PathBuf {
    std::env::var_os("TESSERA_NODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache("node"))
}

/// The kube-apiserver binary: `$TESSERA_KUBE_APISERVER`, else the cache's.
pub fn apiserver_binary() -> PathBuf {
    std::env::var_os("TESSERA_KUBE_APISERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| kube_cache().join("kube-apiserver-1.20.2"))
}

/// `kubelet`, `kube-controller-manager`, `kube-scheduler`: beside the API server binary.
pub fn kube_binary(command: &str) -> PathBuf {
    apiserver_binary()
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{command}-1.20.2"))
}

/// `docker-registry` from `$TESSERA_REGISTRY_BIN` or the `PATH`.
pub fn registry_binary() -> PathBuf {
    std::env::var_os("TESSERA_REGISTRY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("docker-registry"))
}

/// Whether `program` is an executable file: a path, or a name found on the `PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
}

/// What [`ensure`] still has to install or build for these pieces, in words; empty when
/// everything is there.
pub fn missing(node: bool) -> Vec<String> {
    let mut missing = Vec::new();
    if !on_path("etcd") {
        missing.push("etcd (Debian's etcd-server)".to_string());
    }
    let mut commands = vec!["kube-apiserver", "kube-controller-manager"];
    if node {
        commands.extend(["kubelet", "kube-scheduler"]);
    }
    let absent: Vec<&str> = commands
        .into_iter()
        .filter(|c| !kube_binary(c).is_file())
        .collect();
    if !absent.is_empty() {
        missing.push(format!(
            "{} 1.20.2, built from Debian's kubernetes source package with Go 1.19 into {} \
             (about 6 minutes on 2 cores, 4 GB of disk for the source tree)",
            absent.join(", "),
            kube_cache().display()
        ));
    }
    if node && !node_cache().join("pause.tar").is_file() {
        missing.push("containerd, runc and the CNI plugins (Debian), and a pause image".into());
    }
    if !on_path(&registry_binary().display().to_string()) {
        missing.push("docker-registry (Debian's docker-registry)".into());
    }
    missing
}

/// Install and build what is [`missing`], writing the scripts' output to `log` and a line
/// to stderr every 30 s; idempotent and cheap when nothing is missing. Needs root or sudo
/// for the Debian packages.
pub fn ensure(node: bool, log: &Path) -> Result<(), String> {
    let flag = if node {
        "--node"
    } else {
        "--controller-manager"
    };
    run_script("ensure-apiserver.sh", APISERVER_SCRIPT, &[flag], log)?;
    if node {
        run_script("ensure-node.sh", NODE_SCRIPT, &[], log)?;
    }
    ensure_registry(log)
}

fn ensure_registry(log: &Path) -> Result<(), String> {
    if on_path(&registry_binary().display().to_string()) {
        return Ok(());
    }
    run_script("ensure-registry.sh", REGISTRY_SCRIPT, &[], log)
}

/// `bash -c SCRIPT NAME ARGS…`, its stderr appended to `log`; progress every 30 s.
fn run_script(name: &str, script: &str, args: &[&str], log: &Path) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(name)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .map_err(|e| format!("cannot run bash for {name}: {e}"))?;
    let started = Instant::now();
    let mut told = Duration::ZERO;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                return Err(format!(
                    "{name} failed ({status}); the end of {}:\n{}",
                    log.display(),
                    tail(log, 20)
                ));
            }
            Ok(None) => {}
            Err(e) => return Err(format!("{name}: {e}")),
        }
        if started.elapsed() >= told + Duration::from_secs(30) {
            told = started.elapsed();
            eprintln!("  {name}: {} s (log: {})", told.as_secs(), log.display());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The last `lines` lines of a file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
