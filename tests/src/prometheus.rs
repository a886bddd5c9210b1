//! A real Prometheus for the tests: Debian's `prometheus` on 127.0.0.1 with a temporary
//! configuration and storage directory, scraping given targets every second; and
//! `promtool`, from the same directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Result;

/// `$TESSERA_PROMETHEUS_DIR/<tool>` (set by `./x test`), else `<tool>` from the PATH.
pub fn tool(name: &str) -> PathBuf {
    std::env::var_os("TESSERA_PROMETHEUS_DIR")
        .map(|dir| PathBuf::from(dir).join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Run `promtool args…` in `dir`; its output, or an error carrying all of it.
pub fn promtool(dir: &Path, args: &[&str]) -> Result<String> {
    let out: Output = Command::new(tool("promtool"))
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run promtool (tests/prometheus/ensure-prometheus.sh): {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "promtool {}: {}\n{text}",
            args.join(" "),
            out.status
        ))
    }
}

/// A running Prometheus server; stopped on drop.
pub struct TestPrometheus {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

impl TestPrometheus {
    /// Start scraping `targets` (`host:port`, path /metrics) every second.
    pub fn start(targets: &[&str]) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        // honor_labels: the host's metrics carry their own `namespace` label.
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: tessera\n    honor_labels: true\n    static_configs:\n      - targets: [{list}]\n"
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let addr = format!("127.0.0.1:{}", crate::cluster::free_port());
        let log =
            std::fs::File::create(dir.path().join("prometheus.log")).map_err(|e| e.to_string())?;
        let child = Command::new(tool("prometheus"))
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start prometheus: {e}"))?;
        let prometheus = Self { child, dir, addr };
        prometheus.wait_ready(Duration::from_secs(30))?;
        Ok(prometheus)
    }

    fn wait_ready(&self, limit: Duration) -> Result<()> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if get(&self.addr, "/-/ready").is_ok_and(|(status, _)| status == 200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(format!("prometheus not ready:\n{}", self.log()))
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Evaluate `expr` now (`/api/v1/query`); the `data.result` array.
    pub fn query(&self, expr: &str) -> Result<Vec<Value>> {
        let path = format!("/api/v1/query?query={}", percent_encode(expr));
        let (status, body) = get(&self.addr, &path)?;
        let doc: Value = serde_json::from_str(&body)
            .map_err(|e| format!("query {expr}: {e}: {status} {body}"))?;
        if doc["status"] != "success" {
            return Err(format!("query {expr}: {status} {body}"));
        }
        Ok(doc["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

impl Drop for TestPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET over HTTP/1.0, so the answer is never chunked; status and body.
fn get(addr: &str, path: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nhost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

/// Every byte but unreserved ones as `%XX` (a query parameter).
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
