//! A real etcd and kube-apiserver on loopback (recipe: ../shared/kube-apiserver.md), for
//! `tessera dev up` and the tests. [`super::tools::ensure`] builds the binary once per
//! machine (`./x test` runs the same script first and exports its path).

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A loopback port nobody listens on, below the kernel's ephemeral range: a port the
/// kernel hands out (bind to 0) can be taken by any outgoing connection before the server
/// that is to listen on it starts ("address already in use", seen in CI).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = ephemeral_low().clamp(11_000, 65_000);
    let span = u32::from(low) - 10_000;
    // Processes start at different offsets; one process walks its own sequence.
    let seed = std::process::id().wrapping_mul(2_654_435_761)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    for _ in 0..span {
        let n = seed.wrapping_add(NEXT.fetch_add(7_919, Ordering::Relaxed)) % span;
        let port = (10_000 + n) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port below {low}")
}

/// The first port of the kernel's ephemeral range (Linux's default when unreadable).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

fn spawn(cmd: &mut Command, log: &Path) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    // A group of its own: a terminal's Ctrl-C reaches only whoever started it, which stops
    // it in order (a node's containers before containerd, the API server before etcd).
    cmd.process_group(0)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))
}

/// How to start a [`Cluster`] beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// More `system:masters` bearer tokens the API server accepts.
    pub extra_tokens: Vec<String>,
    /// Run the ServiceAccount admission plugin, so pods get their account's token mounted
    /// (needs a kube-controller-manager to issue the tokens: a [`super::node::Node`]).
    pub service_accounts: bool,
    /// Address to serve on instead of 127.0.0.1 (pods on a node's bridge reach the API
    /// server at the bridge's address). The self-signed certificate names it.
    pub address: Option<std::net::Ipv4Addr>,
}

/// One API server with its own etcd, started on free loopback ports.
pub struct Cluster {
    children: Vec<Child>,
    dir: tempfile::TempDir,
    /// `https://127.0.0.1:<port>`
    pub server: String,
    /// Bearer token of a `system:masters` user.
    pub token: String,
    /// A kubeconfig for that user (verifying the serving certificate with [`Cluster::ca`]).
    pub kubeconfig: PathBuf,
    /// The cluster CA (PEM) that signed the serving certificate.
    pub ca: String,
    /// The client CA's certificate and key files: client certificates it signs authenticate
    /// (user = common name, groups = organizations).
    pub client_ca: (PathBuf, PathBuf),
}

impl Cluster {
    /// Start etcd and kube-apiserver and wait until `/readyz` answers.
    pub fn start(name: &str) -> Result<Self, String> {
        Self::start_with_tokens(name, &[])
    }

    /// Like [`Cluster::start`], with more `system:masters` bearer tokens accepted.
    pub fn start_with_tokens(name: &str, extra_tokens: &[String]) -> Result<Self, String> {
        Self::start_with(
            name,
            &ClusterOptions {
                extra_tokens: extra_tokens.to_vec(),
                ..ClusterOptions::default()
            },
        )
    }

    /// Start a cluster with `options`.
    pub fn start_with(name: &str, options: &ClusterOptions) -> Result<Self, String> {
        let binary = super::tools::apiserver_binary();
        if !binary.is_file() {
            return Err(format!(
                "{} is missing: `tessera dev up` builds it (so does ./x test)",
                binary.display()
            ));
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let secure = free_port();
        let address = options.address.unwrap_or(std::net::Ipv4Addr::LOCALHOST);
        let mut cluster = Cluster {
            children: Vec::new(),
            server: format!("https://{address}:{secure}"),
            token: format!("tessera-{name}-{secure}"),
            kubeconfig: dir.path().join("kubeconfig"),
            ca: String::new(),
            client_ca: (
                dir.path().join("client-ca.crt"),
                dir.path().join("client-ca.key"),
            ),
            dir,
        };
        let etcd_url = cluster.start_etcd(name)?;
        cluster.write_credentials(options)?;
        cluster.write_certificates(name, address.into())?;
        let mut apiserver = Command::new(&binary);
        if !options.service_accounts {
            apiserver.args(["--disable-admission-plugins", "ServiceAccount"]);
        }
        if options.address.is_some() {
            // The serving certificate names the advertised address.
            apiserver.args(["--advertise-address", &address.to_string()]);
        }
        apiserver.args([
            "--etcd-servers",
            &etcd_url,
            "--etcd-prefix",
            &format!("/{name}"),
            "--bind-address",
            &address.to_string(),
            "--secure-port",
            &secure.to_string(),
        ]);
        cluster.start_apiserver(&mut apiserver)?;
        cluster.write_kubeconfig(name)?;
        cluster.wait_ready(Duration::from_secs(90))?;
        Ok(cluster)
    }

    /// etcd on free loopback ports; its client URL.
    fn start_etcd(&mut self, name: &str) -> Result<String, String> {
        let d = self.dir.path().to_path_buf();
        let etcd_url = format!("http://127.0.0.1:{}", free_port());
        let peer_url = format!("http://127.0.0.1:{}", free_port());
        self.children.push(spawn(
            Command::new("etcd").args([
                "--name",
                name,
                "--data-dir",
                &d.join("etcd").display().to_string(),
                "--listen-client-urls",
                &etcd_url,
                "--advertise-client-urls",
                &etcd_url,
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
                "--initial-cluster",
                &format!("{name}={peer_url}"),
            ]),
            &d.join("etcd.log"),
        )?);
        Ok(etcd_url)
    }

    /// The service-account key pair and the bearer tokens the API server accepts.
    fn write_credentials(&self, options: &ClusterOptions) -> Result<(), String> {
        let d = self.dir.path();
        for args in [
            vec!["genrsa", "-out", "sa.key", "2048"],
            vec!["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"],
        ] {
            let out = Command::new("openssl").args(&args).current_dir(d).output();
            match out {
                Ok(o) if o.status.success() => {}
                other => return Err(format!("openssl {args:?} failed: {other:?}")),
            }
        }
        let mut tokens = format!("{},admin,admin,system:masters\n", self.token);
        for (i, token) in options.extra_tokens.iter().enumerate() {
            tokens.push_str(&format!("{token},admin-{i},admin-{i},system:masters\n"));
        }
        std::fs::write(d.join("tokens.csv"), tokens).map_err(|e| e.to_string())
    }

    /// The cluster CA and the serving certificate it signs, and the client CA.
    fn write_certificates(&mut self, name: &str, address: std::net::IpAddr) -> Result<(), String> {
        let d = self.dir.path();
        let ca = super::certs::Ca::new(&format!("{name}-ca"))?;
        let serving = ca.serving("kube-apiserver", &super::certs::apiserver_hosts(address))?;
        std::fs::write(d.join("ca.crt"), &ca.cert).map_err(|e| e.to_string())?;
        std::fs::write(d.join("serving.crt"), &serving.cert).map_err(|e| e.to_string())?;
        std::fs::write(d.join("serving.key"), &serving.key).map_err(|e| e.to_string())?;
        let client_ca = super::certs::Ca::new(&client_ca_name(name))?;
        client_ca.write(&self.client_ca.0, &self.client_ca.1)?;
        self.ca = ca.cert;
        Ok(())
    }

    /// kube-apiserver: `cmd` (address, ports, etcd) plus what every test cluster shares.
    fn start_apiserver(&mut self, cmd: &mut Command) -> Result<(), String> {
        let d = self.dir.path().to_path_buf();
        self.children.push(spawn(
            cmd.args([
                // kubectl logs/exec reach kubelets by the address they register.
                "--kubelet-preferred-address-types",
                "InternalIP",
                "--tls-cert-file",
                &d.join("serving.crt").display().to_string(),
                "--tls-private-key-file",
                &d.join("serving.key").display().to_string(),
                "--client-ca-file",
                &d.join("client-ca.crt").display().to_string(),
                "--token-auth-file",
                &d.join("tokens.csv").display().to_string(),
                "--authorization-mode",
                "RBAC",
                "--service-account-key-file",
                &d.join("sa.pub").display().to_string(),
                "--service-account-signing-key-file",
                &d.join("sa.key").display().to_string(),
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-cluster-ip-range",
                "10.0.0.0/24",
            ]),
            &d.join("kube-apiserver.log"),
        )?);
        Ok(())
    }

    fn write_kubeconfig(&self, name: &str) -> Result<(), String> {
        std::fs::write(&self.kubeconfig, self.token_kubeconfig(name, &self.token))
            .map_err(|e| e.to_string())
    }

    /// A kubeconfig for this cluster, verifying its certificate, authenticating with
    /// `token`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: user}}\ncurrent-context: {name}\n",
            self.server
        )
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.kubectl(&["get", "--raw", "/readyz"]).status.success() {
                return Ok(());
            }
            for child in &mut self.children {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "a control-plane process exited with {status}:\n{}",
                        self.logs()
                    ));
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!("not ready after {limit:?}:\n{}", self.logs()))
    }

    /// A file of the cluster's directory: `sa.key` (service-account signing key), `ca.crt`
    /// (the cluster CA).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// (process, pid) of etcd and kube-apiserver.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        ["etcd", "kube-apiserver"]
            .into_iter()
            .zip(self.children.iter().map(|c| c.id()))
            .collect()
    }

    /// The last lines of the etcd and API server logs, for failure messages.
    pub fn logs(&self) -> String {
        ["etcd.log", "kube-apiserver.log"]
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!(
                    "== {f}\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Run kubectl against this cluster.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .expect("kubectl")
    }

    /// Run kubectl with `stdin` as input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }
}

/// The common name of the client CA of cluster `name` (what [`super::certs::Ca::load`] needs).
pub fn client_ca_name(name: &str) -> String {
    format!("{name}-client-ca")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // API server first, then its etcd.
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
