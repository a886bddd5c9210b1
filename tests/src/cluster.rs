//! A real etcd and kube-apiserver on loopback, for tests that need Kubernetes
//! (recipe: ../shared/kube-apiserver.md). `tests/kube/ensure-apiserver.sh` builds the
//! binary once per machine; `./x test` runs it first and exports its path.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The kube-apiserver binary: `$TESSERA_KUBE_APISERVER`, or the per-machine cache.
pub fn apiserver_binary() -> PathBuf {
    std::env::var_os("TESSERA_KUBE_APISERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/tessera/kube/kube-apiserver-1.20.2")
        })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn spawn(cmd: &mut Command, log: &Path) -> Result<Child, String> {
    let file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
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
    /// (needs a kube-controller-manager to issue the tokens: a [`crate::node::Node`]).
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
    /// A kubeconfig for that user (skips TLS verification: the certificate is self-signed).
    pub kubeconfig: PathBuf,
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
        let binary = apiserver_binary();
        if !binary.is_file() {
            return Err(format!(
                "{} is missing: run tests/kube/ensure-apiserver.sh (./x test does)",
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
            dir,
        };
        let etcd_url = cluster.start_etcd(name)?;
        cluster.write_credentials(options)?;
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

    /// kube-apiserver: `cmd` (address, ports, etcd) plus what every test cluster shares.
    fn start_apiserver(&mut self, cmd: &mut Command) -> Result<(), String> {
        let d = self.dir.path().to_path_buf();
        self.children.push(spawn(
            cmd.args([
                // kubectl logs/exec reach kubelets by the address they register.
                "--kubelet-preferred-address-types",
                "InternalIP",
                "--cert-dir",
                &d.join("certs").display().to_string(),
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
        let mut kubeconfig = std::fs::File::create(&self.kubeconfig).map_err(|e| e.to_string())?;
        write!(
            kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: admin}}\ncurrent-context: {name}\n",
            self.server, self.token
        )
        .map_err(|e| e.to_string())
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

    /// A file of the cluster's directory: `sa.key` (service-account signing key),
    /// `certs/apiserver.crt` (the self-signed serving certificate and its CA).
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

impl Drop for Cluster {
    fn drop(&mut self) {
        // API server first, then its etcd.
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
