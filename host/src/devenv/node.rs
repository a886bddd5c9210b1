//! A real node for a test [`Cluster`]: containerd + runc from Debian, kubelet,
//! kube-controller-manager and kube-scheduler 1.20.2 built from the same source as the API
//! server (`tests/kube/ensure-apiserver.sh`), pod networking from Debian's CNI bridge and
//! host-local plugins, and a pause image built locally (`tests/node/ensure-node.sh`).
//! Pods really run; Deployments roll out and namespaces finalize because the real
//! controllers do it. Needs root (containerd, network links, mounts).
//!
//! No kube-proxy (these machines have no iptables): Service cluster IPs do not route. Pods
//! reach the API server at the bridge's address when the cluster serves there
//! ([`super::cluster::ClusterOptions::address`]).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cluster::{Cluster, free_port};
use super::tools::{kube_binary, node_cache};

/// The image every pod sandbox uses, and the one test modules run.
pub const PAUSE_IMAGE: &str = "tessera.test/pause:1";

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A Linux bridge with a /24 of its own: the pods' network, and an address on the host
/// that pods can reach. Deleted on drop.
pub struct Bridge {
    pub name: String,
    /// The bridge's own address (the pods' gateway): `10.88.N.1`.
    pub gateway: Ipv4Addr,
    /// `10.88.N.0/24`
    pub subnet: String,
}

impl Bridge {
    /// Create a bridge whose name and subnet no other test uses right now.
    pub fn create() -> Result<Self, String> {
        let start = std::process::id() as u8;
        for i in 0..=255u8 {
            let n = start.wrapping_add(i);
            let name = format!("tsr{n}");
            // Creating the link is the lock: a name (and so a subnet) in use fails here.
            if run(Command::new("ip").args(["link", "add", &name, "type", "bridge"])).is_err() {
                continue;
            }
            let bridge = Bridge {
                name,
                gateway: Ipv4Addr::new(10, 88, n, 1),
                subnet: format!("10.88.{n}.0/24"),
            };
            run(Command::new("ip").args([
                "addr",
                "add",
                &format!("{}/24", bridge.gateway),
                "dev",
                &bridge.name,
            ]))?;
            run(Command::new("ip").args(["link", "set", &bridge.name, "up"]))?;
            return Ok(bridge);
        }
        Err("no free bridge name tsr0..tsr255".into())
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = run(Command::new("ip").args(["link", "del", &self.name]));
    }
}

/// kube-controller-manager for `cluster`: namespaces finalize, dependents of deleted owners
/// are collected, Deployments get ReplicaSets, the token controller signs service-account
/// tokens with the API server's key and hands pods the cluster CA.
fn controller_manager(cluster: &Cluster) -> Command {
    let mut cmd = Command::new(kube_binary("kube-controller-manager"));
    cmd.arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["--leader-elect=false", "--port=0", "--secure-port=0"])
        .arg("--service-account-private-key-file")
        .arg(cluster.file("sa.key"))
        .arg("--root-ca-file")
        .arg(cluster.file("ca.crt"))
        .args(["--use-service-account-credentials=false", "--controllers=*"]);
    cmd
}

/// kube-controller-manager alone, for a cluster without a node (`tessera dev up`), so that
/// it behaves like a cluster where namespaces and owned objects go when deleted. Stopped
/// on drop.
pub struct ControllerManager {
    child: Child,
}

impl ControllerManager {
    /// Start it for `cluster`, its output in `log`.
    pub fn start(cluster: &Cluster, log: &Path) -> Result<Self, String> {
        let file = std::fs::File::create(log)
            .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = controller_manager(cluster);
        let child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start kube-controller-manager: {e}"))?;
        Ok(Self { child })
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One node registered with a cluster, and the cluster's controllers; stops on drop
/// (containers included).
pub struct Node {
    children: Vec<(&'static str, Child)>,
    dir: tempfile::TempDir,
    socket: PathBuf,
    /// The Node object's name.
    pub name: String,
    bridge: Option<Bridge>,
}

impl Node {
    /// Start containerd, load the pause image, then kube-controller-manager,
    /// kube-scheduler and a kubelet for `cluster`; wait until the node is Ready. Pods go on
    /// `bridge` (one is made when `None`).
    pub fn start(cluster: &Cluster, name: &str, bridge: Option<&Bridge>) -> Result<Self, String> {
        let own = match bridge {
            Some(_) => None,
            None => Some(Bridge::create()?),
        };
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut node = Node {
            children: Vec::new(),
            socket: dir.path().join("containerd.sock"),
            dir,
            name: name.to_string(),
            bridge: None,
        };
        let net = bridge.or(own.as_ref()).expect("a bridge");
        node.write_cni(net)?;
        node.start_containerd()?;
        node.import(&node_cache().join("pause.tar"), PAUSE_IMAGE)?;
        node.start_controllers(cluster)?;
        node.start_kubelet(cluster, net.gateway)?;
        node.bridge = own;
        node.wait_ready(cluster, Duration::from_secs(90))?;
        Ok(node)
    }

    /// containerd's socket (for `ctr --address`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn spawn(&mut self, what: &'static str, cmd: &mut Command) -> Result<(), String> {
        let log =
            std::fs::File::create(self.path(&format!("{what}.log"))).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        // A group of its own, as the cluster's: stopped in order by `drop`, not by a Ctrl-C.
        let child = std::os::unix::process::CommandExt::process_group(cmd, 0)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {what} ({cmd:?}): {e}"))?;
        self.children.push((what, child));
        Ok(())
    }

    fn write_cni(&self, bridge: &Bridge) -> Result<(), String> {
        let conf = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "tessera-test",
            "plugins": [{
                "type": "bridge",
                "bridge": bridge.name,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": bridge.subnet, "gateway": bridge.gateway.to_string()}]],
                    "dataDir": self.path("ipam"),
                },
            }],
        });
        std::fs::create_dir_all(self.path("cni")).map_err(|e| e.to_string())?;
        std::fs::write(self.path("cni/10-tessera.conflist"), conf.to_string())
            .map_err(|e| e.to_string())
    }

    fn start_containerd(&mut self) -> Result<(), String> {
        let d = self.dir.path().display().to_string();
        // restrict_oom_score_adj: this VM refuses negative oom_score_adj, and runc then
        // fails with "can't get final child's PID from pipe: EOF".
        let config = format!(
            r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
[grpc]
  address = "{d}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/cni"
"#
        );
        std::fs::write(self.path("containerd.toml"), config).map_err(|e| e.to_string())?;
        let config = self.path("containerd.toml");
        self.spawn(
            "containerd",
            Command::new("containerd").arg("--config").arg(&config),
        )?;
        let started = Instant::now();
        while self.ctr(&["version"]).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("containerd did not start:\n{}", self.logs()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// `ctr` against this node's containerd, in the CRI namespace.
    pub fn ctr(&self, args: &[&str]) -> Result<String, String> {
        run(Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io"])
            .args(args))
    }

    /// Load an OCI image layout tar as `name` (`repo:tag`), as if pulled (pods use it with
    /// `imagePullPolicy: IfNotPresent`).
    pub fn import(&self, tar: &Path, name: &str) -> Result<(), String> {
        let tar = tar.display().to_string();
        let repo = name.rsplit_once(':').map_or(name, |(repo, _)| repo);
        // ctr names the index `name`, and the manifest after the layout's own tag
        // (`org.opencontainers.image.ref.name`), by default `import-<date>:<tag>`. The
        // manifest's name must differ from `name` (else it replaces the index's record and
        // the index is collected mid-import) and must stay: the CRI image cache can keep
        // mapping the image to a removed name, then reports it missing ("failed to get
        // image from containerd … not found").
        let base = format!("{repo}-layout");
        self.ctr(&[
            "images",
            "import",
            "--base-name",
            &base,
            "--index-name",
            name,
            &tar,
        ])?;
        Ok(())
    }

    fn start_controllers(&mut self, cluster: &Cluster) -> Result<(), String> {
        let kubeconfig = cluster.kubeconfig.display().to_string();
        self.spawn("kube-controller-manager", &mut controller_manager(cluster))?;
        self.spawn(
            "kube-scheduler",
            Command::new(kube_binary("kube-scheduler")).args([
                "--kubeconfig",
                &kubeconfig,
                "--leader-elect=false",
                "--port=0",
                "--secure-port=0",
            ]),
        )
    }

    /// The kubelet registers and serves at `address` (kubelet refuses a loopback node IP,
    /// and the API server reaches it there for `kubectl logs`).
    fn start_kubelet(&mut self, cluster: &Cluster, address: Ipv4Addr) -> Result<(), String> {
        let address = address.to_string();
        let d = self.dir.path().display().to_string();
        let port = free_port().to_string();
        let endpoint = format!("unix://{}", self.socket.display());
        let kubeconfig = cluster.kubeconfig.display().to_string();
        let name = self.name.clone();
        self.spawn(
            "kubelet",
            Command::new(kube_binary("kubelet")).args([
                "--kubeconfig",
                &kubeconfig,
                "--container-runtime",
                "remote",
                "--container-runtime-endpoint",
                &endpoint,
                "--cgroup-driver",
                "cgroupfs",
                "--fail-swap-on=false",
                "--cgroups-per-qos=false",
                "--enforce-node-allocatable=",
                "--pod-infra-container-image",
                PAUSE_IMAGE,
                "--root-dir",
                &format!("{d}/kubelet"),
                "--cert-dir",
                &format!("{d}/kubelet-pki"),
                "--hostname-override",
                &name,
                "--node-ip",
                &address,
                "--address",
                &address,
                "--port",
                &port,
                "--healthz-port=0",
                "--read-only-port=0",
                // Imported images cannot be pulled again: never collect them.
                "--image-gc-high-threshold=100",
                // A test node shares the machine's disk: a full disk elsewhere must not taint
                // it with DiskPressure (which keeps every pod unscheduled) or evict its pods.
                "--eviction-hard=",
                "--eviction-soft=",
            ]),
        )
    }

    fn wait_ready(&mut self, cluster: &Cluster, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        let path = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
        while started.elapsed() < limit {
            let out = cluster.kubectl(&["get", "node", &self.name, "-o", path]);
            if out.status.success() && out.stdout == b"True" {
                return Ok(());
            }
            let exited = self
                .children
                .iter_mut()
                .find_map(|(what, child)| Some((*what, child.try_wait().ok()??)));
            if let Some((what, status)) = exited {
                return Err(format!("{what} exited with {status}:\n{}", self.logs()));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!(
            "node {} not Ready after {limit:?}:\n{}",
            self.name,
            self.logs()
        ))
    }

    /// The last lines of every node process's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for what in [
            "containerd",
            "kube-controller-manager",
            "kube-scheduler",
            "kubelet",
        ] {
            let log =
                std::fs::read_to_string(self.path(&format!("{what}.log"))).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(12)..];
            text.push_str(&format!("== {what}\n{}\n", tail.join("\n")));
        }
        text
    }

    /// The network namespaces CRI made for this node's pods (`/var/run/netns/cni-…`): they
    /// outlive the containers unless removed, and keep their veths on the host.
    fn pod_netns(&self) -> Vec<String> {
        let ids = self.ctr(&["containers", "ls", "-q"]).unwrap_or_default();
        ids.lines()
            .filter_map(|id| self.ctr(&["containers", "info", id]).ok())
            .filter_map(|info| serde_json::from_str::<serde_json::Value>(&info).ok())
            .flat_map(|info| {
                let namespaces = info["Spec"]["linux"]["namespaces"].as_array().cloned();
                namespaces.unwrap_or_default()
            })
            .filter(|ns| ns["type"] == "network")
            .filter_map(|ns| ns["path"].as_str().map(str::to_string))
            .filter(|path| path.starts_with("/var/run/netns/"))
            .collect()
    }

    /// Kill every container of the node (kubelet is gone by then and cannot stop them),
    /// then remove their network namespaces.
    fn kill_containers(&self) {
        let netns = self.pod_netns();
        self.kill_tasks();
        for path in netns {
            let _ = Command::new("umount").arg(&path).status();
            let _ = std::fs::remove_file(&path);
        }
    }

    fn kill_tasks(&self) {
        let Ok(tasks) = self.ctr(&["tasks", "ls", "-q"]) else {
            return;
        };
        for task in tasks.lines() {
            let _ = self.ctr(&["tasks", "kill", "-s", "SIGKILL", task]);
        }
        std::thread::sleep(Duration::from_millis(300));
        for task in tasks.lines() {
            let _ = self.ctr(&["tasks", "rm", "-f", task]);
        }
    }

    /// Unmount what kubelet and containerd mounted under the node's directory (volumes,
    /// rootfs, sandbox /dev/shm), deepest first, so the directory can go.
    fn unmount_all(&self) {
        let root = self.dir.path().display().to_string();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut points: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|p| p.starts_with(&root))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for point in points {
            let _ = Command::new("umount").args(["-l", point]).status();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // kubelet first (it would restart what we kill), then the containers, then the rest.
        if let Some((_, kubelet)) = self.children.iter_mut().find(|(w, _)| *w == "kubelet") {
            let _ = kubelet.kill();
            let _ = kubelet.wait();
        }
        self.kill_containers();
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.unmount_all();
    }
}
