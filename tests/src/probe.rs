//! Waiting and probing helpers shared by the integration tests.

use std::future::Future;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::Result;

/// A client from a kubeconfig file.
pub async fn client_for(kubeconfig: &std::path::Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Poll `probe` every 200 ms until it returns `Some`, or fail after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if started.elapsed() > limit {
            return Err(format!("timed out after {limit:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// GET `path` from `addr` over plain HTTP/1.1; the response must be 200.
pub async fn http_get(addr: &str, path: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    stream
        .read_to_string(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    if !out.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {out}"));
    }
    Ok(out)
}

/// The most of `times` (milliseconds) that fall within any one second (sorts them).
pub fn busiest_second(times: &mut [i64]) -> usize {
    times.sort_unstable();
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|&&t| t - times[i] < 1000)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Run a benchmark binary of this crate (`exe`, from `env!("CARGO_BIN_EXE_…")`) with
/// `args`, write what it printed to stderr straight (the test harness keeps a passing
/// test's `println!` to itself, and these figures are for every CI log) and return it;
/// `Err` with the tail of its log when it failed.
pub fn run_bench(exe: &str, args: &[&str]) -> Result<String> {
    use std::io::Write;
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| format!("{exe} does not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let _ = writeln!(std::io::stderr(), "{stdout}");
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{exe} failed ({}):\n{stdout}\n{}",
            out.status,
            tail(&stderr, 40)
        ));
    }
    Ok(stdout)
}

#[cfg(test)]
mod tests {
    use super::busiest_second;

    #[test]
    fn the_busiest_second_counts_times_less_than_a_second_apart() {
        assert_eq!(busiest_second(&mut [0, 999, 1000, 3000]), 2);
        assert_eq!(busiest_second(&mut [5, 1, 3]), 3);
        assert_eq!(busiest_second(&mut []), 0);
    }
}
