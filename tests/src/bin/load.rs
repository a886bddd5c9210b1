//! `load --runtimes N`: N Runtimes against the local control plane (real API servers and
//! the Gardener simulator) and one release-built host. Prints the time until all are
//! Ready, the host's peak RSS and CPU seconds, the API requests it made, and what a no-op
//! resync (a restarted host) writes. Run through `cargo xtask load`.

use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use tessera::crd::{Runtime, RuntimeState};
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;

#[derive(Debug, Parser)]
struct Args {
    /// How many Runtimes.
    #[arg(long, default_value_t = 1000)]
    runtimes: usize,
    /// Simulated Gardener: milliseconds a Create stays Processing.
    #[arg(long, default_value_t = 2000)]
    create_ms: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Extra arguments for `tessera run` (e.g. `--workers=64`).
    #[arg(long, allow_hyphen_values = true)]
    host_arg: Vec<String>,
}

/// (peak RSS in MiB, CPU seconds) of a process, from /proc.
fn usage(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after the comm.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    (hwm_kib / 1024.0, ticks / 100.0)
}

fn delta(after: &Value, before: &Value, key: &str) -> u64 {
    after[key].as_u64().unwrap_or(0) - before[key].as_u64().unwrap_or(0)
}

async fn ready_count(api: &Api<Runtime>) -> usize {
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|r| r.status.as_ref().and_then(|s| s.state) == Some(RuntimeState::Ready))
                .count()
        })
        .unwrap_or(0)
}

/// Runtimes the host reports Ready on /metrics.
fn ready_from_metrics(addr: &str) -> usize {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let _ = write!(
        stream,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    );
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text.lines()
        .filter(|l| l.starts_with("tessera_runtime_state{") && l.contains("state=\"Ready\"} 1"))
        .count()
}

/// Wait until the host has made no request (leases aside) for `quiet`.
fn wait_quiet(cp: &ControlPlane, quiet: Duration, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut last = cp.sim_stats();
    let mut since = Instant::now();
    while started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(500));
        let now = cp.sim_stats();
        let busy = delta(&now, &last, "requests") - delta(&now, &last, "leaseRequests");
        if busy > 0 {
            since = Instant::now();
            last = now;
        } else if since.elapsed() >= quiet {
            break;
        }
    }
    since.duration_since(started)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sim = std::env::current_exe()?.with_file_name("gardener-sim");
    let script = Script {
        create_ms: args.create_ms,
        reconcile_ms: 1000,
        delete_ms: 500,
        ..Script::default()
    };
    eprintln!("starting the local control plane…");
    let cp = ControlPlane::start(&sim, &script).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Runtime::new()?;
    let client = rt.block_on(async {
        let kc = Kubeconfig::read_from(&cp.garden.kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        anyhow::Ok(kube::Client::try_from(config)?)
    })?;
    let _ = cp.garden.kubectl(&["create", "namespace", "load"]);
    let api: Api<Runtime> = Api::namespaced(client.clone(), "load");
    let template: Value = serde_saphyr::from_str(&std::fs::read_to_string(
        tessera_tests::workspace().join("examples/runtime-aws.yaml"),
    )?)?;

    let mut host_args: Vec<&str> = vec!["--namespace", "load"];
    host_args.extend(args.host_arg.iter().map(String::as_str));
    let host: Host = cp.host("load-host", &host_args);
    let stats0 = cp.sim_stats();
    let started = Instant::now();
    rt.block_on(async {
        futures::stream::iter(0..args.runtimes)
            .map(|i| {
                let api = api.clone();
                let mut doc = template.clone();
                doc["metadata"] = json!({ "name": format!("load-{i}"), "namespace": "load" });
                doc["spec"]["shoot"]["name"] = format!("load-{i}").into();
                async move {
                    let rt: Runtime = serde_json::from_value(doc).expect("runtime");
                    api.create(&PostParams::default(), &rt).await
                }
            })
            .buffer_unordered(16)
            .for_each(|r| {
                if let Err(e) = r {
                    eprintln!("create failed: {e}");
                }
                futures::future::ready(())
            })
            .await;
    });
    let created = started.elapsed();
    eprintln!("created {} Runtimes in {created:.1?}", args.runtimes);
    // Progress from the host's /metrics (cheap); the final count from the API server.
    let metrics = host
        .metrics_addr(Duration::from_secs(30))
        .ok_or_else(|| anyhow::anyhow!("the host logged no metrics address"))?;
    let mut last_print = Instant::now();
    while started.elapsed() < Duration::from_secs(args.timeout) {
        let ready = ready_from_metrics(&metrics);
        if ready == args.runtimes {
            break;
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "{:>6.0?}: {ready}/{} Ready",
                started.elapsed(),
                args.runtimes
            );
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let all_ready = started.elapsed();
    let ready = rt.block_on(ready_count(&api));
    let (rss, cpu) = usage(host.pid());
    let stats1 = cp.sim_stats();
    anyhow::ensure!(
        ready == args.runtimes,
        "only {ready}/{} Ready after {:?}",
        args.runtimes,
        all_ready
    );

    // A no-op resync: a fresh host lists and reconciles every Runtime once.
    let mut host = host;
    host.kill();
    let before = cp.sim_stats();
    let restarted = Instant::now();
    let host2 = cp.host("load-host-2", &host_args);
    // The killed leader's lease must expire before the new host starts reconciling.
    let lease_wait = Instant::now();
    while !host2.logs().contains("became leader") && lease_wait.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let settle = wait_quiet(
        &cp,
        Duration::from_secs(10),
        Duration::from_secs(args.timeout),
    );
    let after = cp.sim_stats();
    let (rss2, cpu2) = usage(host2.pid());
    let leader_line = host2.logs().contains("became leader");

    println!("runtimes:                      {}", args.runtimes);
    println!("simulated Gardener create:     {} ms", args.create_ms);
    println!(
        "created (16 parallel clients): {:.1} s",
        created.as_secs_f64()
    );
    println!(
        "all Ready after:               {:.1} s",
        all_ready.as_secs_f64()
    );
    println!("host peak RSS:                 {rss:.0} MiB");
    println!("host CPU:                      {cpu:.1} s");
    println!(
        "host API requests:             {} ({} writes, {} watch requests, {} lease)",
        delta(&stats1, &stats0, "requests"),
        delta(&stats1, &stats0, "writes"),
        delta(&stats1, &stats0, "watches"),
        delta(&stats1, &stats0, "leaseRequests"),
    );
    println!(
        "no-op resync (restarted host): {} requests, {} writes, busy {:.1} s, CPU {cpu2:.1} s, peak RSS {rss2:.0} MiB, leader: {leader_line}",
        delta(&after, &before, "requests") - delta(&after, &before, "leaseRequests"),
        delta(&after, &before, "writes"),
        settle.as_secs_f64(),
    );
    let _ = restarted;
    println!("processes (CPU seconds): {}", cp.process_cpu());
    Ok(())
}
