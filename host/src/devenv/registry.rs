//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! server) on 127.0.0.1 (or a given address) with a temporary config and filesystem storage.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running registry; stopped on drop.
pub struct TestRegistry {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    /// Basic-auth user and password (htpasswd), if the registry requires them.
    auth: Option<(String, String)>,
    address: std::net::Ipv4Addr,
}

impl TestRegistry {
    /// Start on a free loopback port.
    pub fn start() -> Result<Self, String> {
        Self::start_with(None)
    }

    /// Start with htpasswd basic auth for `user` / `password`.
    pub fn start_with_auth(user: &str, password: &str) -> Result<Self, String> {
        Self::start_with(Some((user.to_string(), password.to_string())))
    }

    /// Start on a free port of `address` (a node's bridge, say, so that pods reach it).
    pub fn start_on(address: std::net::Ipv4Addr) -> Result<Self, String> {
        Self::start_at(None, address)
    }

    fn start_with(auth: Option<(String, String)>) -> Result<Self, String> {
        Self::start_at(auth, std::net::Ipv4Addr::LOCALHOST)
    }

    fn start_at(
        auth: Option<(String, String)>,
        address: std::net::Ipv4Addr,
    ) -> Result<Self, String> {
        let mut registry = Self {
            child: None,
            dir: tempfile::tempdir().map_err(|e| e.to_string())?,
            port: super::cluster::free_port(),
            auth,
            address,
        };
        registry.restart()?;
        Ok(registry)
    }

    /// `<address>:<port>` (`127.0.0.1:<port>` unless started with [`TestRegistry::start_on`]).
    pub fn host(&self) -> String {
        format!("{}:{}", self.address, self.port)
    }

    /// Where blobs live: `<storage>/docker/registry/v2/blobs/sha256/<ab>/<hex>/data`.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// Stop the server (storage is kept).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// (Re)start the server on the same port and storage, and wait until it answers.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let config = self.dir.path().join("config.yml");
        let mut text = format!(
            "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp: {{addr: {}}}\n",
            self.storage().display(),
            self.host()
        );
        if let Some((user, password)) = &self.auth {
            let htpasswd = self.dir.path().join("htpasswd");
            let hash = bcrypt::hash(password, 4).map_err(|e| e.to_string())?;
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).map_err(|e| e.to_string())?;
            text.push_str(&format!(
                "auth:\n  htpasswd: {{realm: tessera-test, path: {}}}\n",
                htpasswd.display()
            ));
        }
        std::fs::write(&config, text).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(self.dir.path().join("registry.log"))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(super::tools::registry_binary());
        // A group of its own, as the cluster's: stopped by `drop`, not by a Ctrl-C.
        let child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {}: {e} (install Debian's docker-registry)",
                    super::tools::registry_binary().display()
                )
            })?;
        self.child = Some(child);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if std::net::TcpStream::connect((self.address, self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "registry did not listen on {} within 15 s: {}",
            self.host(),
            self.log()
        ))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The temporary directory (for the tests' own files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}
