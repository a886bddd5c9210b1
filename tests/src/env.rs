//! The local control plane: a "garden" API server (Runtimes, Shoots, Secrets), a "runtime"
//! API server (the cluster every Shoot becomes), the Gardener simulator in front of the
//! garden, and Tessera hosts started against it. Used by the operator tests, the demo and
//! the load benchmark.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, ClusterOptions};
use crate::gardener_sim::Script;
use crate::node::{Bridge, Node};

/// Every process of the local control plane; dropping it stops them.
pub struct ControlPlane {
    /// The real node, when asked for (first field: it stops before the API servers).
    pub node: Option<Node>,
    pub garden: Cluster,
    pub runtime: Cluster,
    sim: Child,
    /// `http://127.0.0.1:<port>`: the simulator, i.e. "Gardener".
    pub sim_url: String,
    /// Kubeconfig of the control plane through the simulator (an administrator of the
    /// garden API server: what the host reads Runtimes and writes Secrets with).
    pub kubeconfig: PathBuf,
    /// Kubeconfig of "Gardener": the simulator, as the project's ServiceAccount `tessera`
    /// (a member of project `kyma-dev` with role admin: Gardener's rights in
    /// `garden-kyma-dev`, nothing elsewhere).
    pub gardener_kubeconfig: PathBuf,
    /// The bearer token of that ServiceAccount.
    pub project_token: String,
    pub script: PathBuf,
    pub dir: tempfile::TempDir,
    /// The pods' network, when the plane serves on it (last: it goes after everything).
    pub bridge: Option<Bridge>,
}

/// `kubectl apply -f path`, tried again for up to 15 s: the API server serves the kinds of
/// CRDs just established a moment after saying so ("no matches for kind").
fn apply_file(cluster: &Cluster, path: &Path) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let out = cluster.kubectl(&["apply", "-f", &path.display().to_string()]);
        if out.status.success() {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(15) {
            return Err(format!(
                "kubectl apply -f {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn wait_established(cluster: &Cluster, crd: &str) -> Result<(), String> {
    let out = cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{crd}"),
    ]);
    if !out.status.success() {
        return Err(format!(
            "CRD {crd} not established: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The garden and runtime API servers, in parallel, with their CRDs established, the
/// garden's Gardener resources (`tests/kube/garden.yaml`, `cloudprofiles.yaml`) and what
/// Gardener puts into each Shoot (`shoot-access.yaml`).
fn start_clusters(
    options: &PlaneOptions,
    address: Option<Ipv4Addr>,
) -> Result<(Cluster, Cluster), String> {
    let garden_options = ClusterOptions {
        service_accounts: options.pods_reach_plane,
        address,
        ..ClusterOptions::default()
    };
    let runtime_options = ClusterOptions {
        address,
        ..ClusterOptions::default()
    };
    let (garden, runtime) = std::thread::scope(|s| {
        let g = s.spawn(|| Cluster::start_with("garden", &garden_options));
        let r = s.spawn(|| Cluster::start_with("runtime", &runtime_options));
        (g.join().unwrap(), r.join().unwrap())
    });
    let (garden, runtime) = (garden?, runtime?);
    let root = crate::workspace();
    apply_file(&garden, &root.join("charts/tessera/crds"))?;
    apply_file(&garden, &root.join("tests/kube/gardener-crds.yaml"))?;
    apply_file(&runtime, &root.join("tests/kube/runtime-crds.yaml"))?;
    apply_file(&runtime, &root.join("tests/kube/shoot-access.yaml"))?;
    for crd in [
        "runtimes.tessera.dev",
        "runtimekubeconfigs.tessera.dev",
        "runtimeaccesses.tessera.dev",
        "plugins.tessera.dev",
        "shoots.core.gardener.cloud",
        "cloudprofiles.core.gardener.cloud",
        "projects.core.gardener.cloud",
        "secretbindings.core.gardener.cloud",
        "credentialsbindings.security.gardener.cloud",
        "seeds.core.gardener.cloud",
    ] {
        wait_established(&garden, crd)?;
    }
    apply_file(&garden, &root.join("tests/kube/garden.yaml"))?;
    apply_file(&garden, &root.join("tests/kube/cloudprofiles.yaml"))?;
    apply_file(&garden, &root.join("tests/kube/seeds.yaml"))?;
    seeds_ready(&garden)?;
    wait_established(&runtime, "openidconnects.authentication.gardener.cloud")?;
    Ok((garden, runtime))
}

/// Every Seed of `tests/kube/seeds.yaml` ready, as its gardenlet reports it: a
/// `lastOperation` and `GardenletReady` True, written through the status subresource.
fn seeds_ready(garden: &Cluster) -> Result<(), String> {
    let out = garden.kubectl(&["get", "seeds", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "kubectl get seeds: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    for mut seed in list["items"].as_array().cloned().unwrap_or_default() {
        let name = seed["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let now = jiff::Timestamp::now().to_string();
        seed["status"] = serde_json::json!({
            "lastOperation": {"type": "Reconcile", "state": "Succeeded", "progress": 100,
                "description": "Seed has been reconciled.", "lastUpdateTime": now},
            "conditions": [{"type": "GardenletReady", "status": "True", "reason": "GardenletReady",
                "message": "Gardenlet is posting ready status.", "lastTransitionTime": now,
                "lastUpdateTime": now}],
        });
        let path = format!("/apis/core.gardener.cloud/v1beta1/seeds/{name}/status");
        let out = garden.kubectl_stdin(&["replace", "--raw", &path, "-f", "-"], &seed.to_string());
        if !out.status.success() {
            return Err(format!(
                "Seed {name} status: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(())
}

/// A token of the project's ServiceAccount `tessera` (TokenRequest, valid two days).
fn project_token(garden: &Cluster) -> Result<String, String> {
    let out = garden.kubectl(&[
        "-n",
        "garden-kyma-dev",
        "create",
        "token",
        "tessera",
        "--duration",
        "48h",
    ]);
    if !out.status.success() {
        return Err(format!(
            "a token for the project's ServiceAccount: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A kubeconfig for `server` (plain HTTP: the simulator) with `token`.
pub fn http_kubeconfig(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gardener\n  cluster:\n    server: {server}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: gardener\n  context: {{cluster: gardener, user: user}}\ncurrent-context: gardener\n"
    )
}

/// The simulator's command line: listening on `listen`, in front of `garden`, issuing
/// kubeconfigs for `runtime`, its script in `dir`.
fn sim_command(
    sim_bin: &Path,
    listen: &str,
    garden: &Cluster,
    runtime: &Cluster,
    dir: &Path,
) -> Result<Command, String> {
    let runtime_ca = dir.join("runtime-ca.crt");
    std::fs::write(&runtime_ca, &runtime.ca).map_err(|e| e.to_string())?;
    let mut sim = Command::new(sim_bin);
    sim.arg("--listen")
        .arg(listen)
        .arg("--garden-kubeconfig")
        .arg(&garden.kubeconfig)
        .arg("--runtime-server")
        .arg(&runtime.server)
        .arg("--runtime-ca")
        .arg(&runtime_ca)
        .arg("--runtime-client-ca")
        .arg(&runtime.client_ca.0)
        .arg("--runtime-client-ca-key")
        .arg(&runtime.client_ca.1)
        .arg("--runtime-client-ca-name")
        .arg(crate::cluster::client_ca_name("runtime"))
        .arg("--script")
        .arg(dir.join("script.json"));
    Ok(sim)
}

/// Start the simulator; the process and the URL it prints once it listens.
fn start_sim(cmd: &mut Command, log: &Path) -> Result<(Child, String), String> {
    let log = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let mut sim = cmd
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let mut line = String::new();
    BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| format!("simulator did not start: {line:?}"))?
        .to_string();
    Ok((sim, url))
}

/// Which cluster of a [`ControlPlane`] gets a real node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOn {
    /// The control plane itself: the host can run there in pods.
    Garden,
    /// The cluster Runtimes become: module Deployments really start.
    Runtime,
}

/// How to start a [`ControlPlane`] beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct PlaneOptions {
    /// A real node (kubelet, controllers, containerd) on one of the clusters.
    pub node: Option<NodeOn>,
    /// Serve both API servers and the simulator on a bridge's address instead of
    /// 127.0.0.1, so that pods reach them; the garden runs the ServiceAccount admission
    /// plugin so that pods get tokens.
    pub pods_reach_plane: bool,
}

impl ControlPlane {
    /// Start both API servers, install the CRDs, start the simulator (`sim_bin`).
    pub fn start(sim_bin: &Path, script: &Script) -> Result<Self, String> {
        Self::start_with(sim_bin, script, &PlaneOptions::default())
    }

    /// The control plane of a benchmark or chaos tool: the simulator built beside the
    /// `tessera` binary playing `script`, and `namespace` made on the garden.
    pub fn start_for_tool(script: &Script, namespace: &str) -> Result<Self, String> {
        let sim = tessera_bin().with_file_name("gardener-sim");
        eprintln!("starting the local control plane…");
        let cp = Self::start(&sim, script)?;
        crate::modules::kubectl_ok(&cp.garden, &["create", "namespace", namespace])?;
        Ok(cp)
    }

    /// [`ControlPlane::start`] with `options`.
    pub fn start_with(
        sim_bin: &Path,
        script: &Script,
        options: &PlaneOptions,
    ) -> Result<Self, String> {
        let bridge = match options.pods_reach_plane {
            true => Some(Bridge::create()?),
            false => None,
        };
        let address = bridge.as_ref().map(|b| b.gateway);
        let (garden, runtime) = start_clusters(options, address)?;
        // Before the simulator: a failure here leaves no process behind.
        let node = match options.node {
            Some(NodeOn::Garden) => Some(Node::start(&garden, "garden-node", bridge.as_ref())?),
            Some(NodeOn::Runtime) => Some(Node::start(&runtime, "runtime-node", bridge.as_ref())?),
            None => None,
        };
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, serde_json::to_string(script).unwrap())
            .map_err(|e| e.to_string())?;
        let listen = format!("{}:0", address.unwrap_or(Ipv4Addr::LOCALHOST));
        let mut sim = sim_command(sim_bin, &listen, &garden, &runtime, dir.path())?;
        let (sim, sim_url) = start_sim(&mut sim, &dir.path().join("sim.log"))?;
        let kubeconfig = dir.path().join("control-plane.kubeconfig");
        std::fs::write(&kubeconfig, http_kubeconfig(&sim_url, &garden.token))
            .map_err(|e| e.to_string())?;
        let project_token = project_token(&garden)?;
        let gardener_kubeconfig = dir.path().join("gardener.kubeconfig");
        std::fs::write(
            &gardener_kubeconfig,
            http_kubeconfig(&sim_url, &project_token),
        )
        .map_err(|e| e.to_string())?;
        Ok(Self {
            node,
            garden,
            runtime,
            sim,
            sim_url,
            kubeconfig,
            gardener_kubeconfig,
            project_token,
            script: script_path,
            dir,
            bridge,
        })
    }

    /// Requests the simulator has seen: `requests`, `writes` (leases excluded),
    /// `leaseRequests`, `watches`, and per object (`byObject`) writes, arrivals and
    /// Gardener's refusals. Panics when the simulator does not answer with statistics: a
    /// count that cannot be read must not pass for zero.
    pub fn sim_stats(&self) -> serde_json::Value {
        let body = self.sim_get("/_sim/stats");
        match serde_json::from_str::<serde_json::Value>(&body) {
            Ok(stats) if stats["requests"].is_u64() => stats,
            _ => panic!("the simulator's statistics are unreadable: {body:?}"),
        }
    }

    /// Gardener's refusals of requests about Shoot `shoot` (each with `user`, `code`,
    /// `rules` and `message`).
    pub fn refusals(&self, shoot: &str) -> Vec<serde_json::Value> {
        self.sim_stats()["byObject"][format!("shoot/{shoot}")]["refusals"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Make the simulator answer Shoot API requests whose URI contains `needle` with
    /// `code` (404: the Shoot API is gone), or end that outage with `None`.
    pub fn sim_outage(&self, needle: &str, code: Option<u16>) {
        let _ = self.sim_get(&format!("/_sim/outage/{needle}/{}", code.unwrap_or(0)));
    }

    /// Like [`ControlPlane::sim_outage`], for any request through the simulator (a target
    /// cluster reached through it, say). Code 999 holds the requests until the outage ends
    /// (a cluster that hangs); code 998 serves each half a second late (a busy API server).
    pub fn sim_outage_any(&self, needle: &str, code: Option<u16>) {
        let _ = self.sim_get(&format!("/_sim/outage-any/{needle}/{}", code.unwrap_or(0)));
    }

    /// GET `path` from the simulator's own endpoints; the response body.
    fn sim_get(&self, path: &str) -> String {
        let addr = self.sim_url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).expect("simulator");
        use std::io::{Read, Write};
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nhost: sim\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
    }

    /// CPU seconds used so far by the simulator and the API servers and etcds.
    pub fn process_cpu(&self) -> String {
        let mut parts = vec![format!("simulator {:.1}", cpu_seconds(self.sim.id()))];
        for (name, cluster) in [("garden", &self.garden), ("runtime", &self.runtime)] {
            for (what, pid) in cluster.pids() {
                parts.push(format!("{name} {what} {:.1}", cpu_seconds(pid)));
            }
        }
        parts.join(", ")
    }

    /// Replace the simulator's script (it re-reads it as operations end).
    pub fn set_script(&self, script: &Script) {
        std::fs::write(&self.script, serde_json::to_string(script).unwrap()).unwrap();
    }

    /// Start a host with `args` after `tessera run --kubeconfig <control plane>
    /// --gardener-kubeconfig <the project's ServiceAccount>`.
    pub fn host(&self, name: &str, args: &[&str]) -> Host {
        self.host_as(name, &self.gardener_kubeconfig, args)
    }

    /// Like [`ControlPlane::host`], reaching Gardener with the kubeconfig `gardener`.
    pub fn host_as(&self, name: &str, gardener: &Path, args: &[&str]) -> Host {
        let gardener = gardener.display().to_string();
        let mut all = vec!["--gardener-kubeconfig", gardener.as_str()];
        all.extend_from_slice(args);
        Host::start(
            &self.kubeconfig,
            &self.dir.path().join(format!("{name}.log")),
            &all,
        )
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = self.sim.kill();
        let _ = self.sim.wait();
    }
}

/// The `tessera` binary: `$TESSERA_BIN`, else next to the test executable's directory.
pub fn tessera_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("TESSERA_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .map(|p| p.join("tessera"))
        .find(|p| p.is_file())
        .expect("the tessera binary next to the tests (cargo build -p tessera)")
}

/// A running `tessera run` process; killed (SIGKILL) on drop.
pub struct Host {
    child: Child,
    pub log: PathBuf,
}

impl Host {
    pub fn start(kubeconfig: &Path, log: &Path, args: &[&str]) -> Host {
        let file = std::fs::File::create(log).unwrap();
        // A scenario may pass its own `--log` filter.
        let filter = match args.iter().position(|a| *a == "--log") {
            Some(i) => args.get(i + 1).copied().unwrap_or_default(),
            None => "info,kube=warn,tower=warn,hyper=warn",
        };
        let args: Vec<&str> = match args.iter().position(|a| *a == "--log") {
            Some(i) => [&args[..i], &args[(i + 2).min(args.len())..]].concat(),
            None => args.to_vec(),
        };
        let child = Command::new(tessera_bin())
            .args(["--log-format", "json", "--log", filter])
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--plugins")
            .arg(crate::plugin_dir())
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(&args)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start tessera run");
        Host {
            child,
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, as the kubelet stops a container; how the process ended, if it did within
    /// `limit`.
    pub fn terminate(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let pid = libc::pid_t::try_from(self.child.id()).ok()?;
        // SAFETY: signalling our own child, which has not been reaped (we own it).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The metrics address the host logged.
    pub fn metrics_addr(&self, limit: Duration) -> Option<String> {
        let started = Instant::now();
        while started.elapsed() < limit {
            for line in self.logs().lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line)
                    && v["fields"]["message"] == "serving /metrics, /healthz, /readyz"
                {
                    return v["fields"]["addr"].as_str().map(str::to_string);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// Log lines at ERROR level.
    pub fn error_lines(&self) -> Vec<String> {
        self.logs()
            .lines()
            .filter(|l| l.contains("\"level\":\"ERROR\""))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill();
    }
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum::<f64>()
        / 100.0
}
