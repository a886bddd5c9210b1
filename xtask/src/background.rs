//! The Kubernetes build (Go, several minutes on a fresh machine) runs beside cargo's builds:
//! on two cores each leaves gaps the other fills (links, the largest crates alone).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// `tests/kube/ensure-apiserver.sh`, running; its log in `<cache>/build.log`.
pub(crate) struct Background {
    child: Child,
    log: PathBuf,
    started: Instant,
}

impl Background {
    /// Start making sure the API server (and with `node`, kubelet, kube-controller-manager
    /// and kube-scheduler) is built. Returns at once; [`Background::wait`] gives the API
    /// server's path.
    pub(crate) fn kube(node: bool) -> Result<Self> {
        let script = crate::root().join("tests/kube/ensure-apiserver.sh");
        let cache = std::env::var_os("TESSERA_KUBE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| home().join(".cache/tessera/kube"));
        std::fs::create_dir_all(&cache)?;
        let log = cache.join("build.log");
        let mut cmd = Command::new("bash");
        cmd.arg(&script);
        if node {
            cmd.arg("--node");
        }
        let file = std::fs::File::create(&log).with_context(|| log.display().to_string())?;
        cmd.stdout(Stdio::piped()).stderr(file);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot run {}", script.display()))?;
        Ok(Self {
            child,
            log,
            started: Instant::now(),
        })
    }

    /// Wait for the build (saying so when it is still running) and return the API server.
    pub(crate) fn wait(mut self) -> Result<PathBuf> {
        if self.child.try_wait()?.is_none() {
            eprintln!(
                "waiting for the Kubernetes build (log: {})…",
                self.log.display()
            );
        }
        let out = self.child.wait_with_output()?;
        if !out.status.success() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "tests/kube/ensure-apiserver.sh failed with {}; the end of {}:\n{}",
                out.status,
                self.log.display(),
                tail.join("\n")
            );
        }
        let path = PathBuf::from(String::from_utf8(out.stdout)?.trim());
        eprintln!(
            "kube-apiserver: {} (ready after {:.0} s)",
            path.display(),
            self.started.elapsed().as_secs_f64()
        );
        Ok(path)
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
}
