//! `gardener-sim`: the Gardener simulator as a process (see `tessera_tests::gardener_sim`).
//! Prints `listening on http://ADDR` once ready.

use std::path::PathBuf;

use clap::Parser;

/// Simulated Gardener in front of a real kube-apiserver.
#[derive(Debug, Parser)]
struct Args {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Kubeconfig of the garden API server.
    #[arg(long)]
    garden_kubeconfig: PathBuf,
    /// URL of the API server Shoots become.
    #[arg(long)]
    runtime_server: String,
    /// File with one token per line, valid on the runtime API server.
    #[arg(long)]
    runtime_tokens: PathBuf,
    /// JSON script: delays and failures (re-read as operations end).
    #[arg(long)]
    script: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let tokens: Vec<String> = std::fs::read_to_string(&args.runtime_tokens)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    anyhow::ensure!(!tokens.is_empty(), "--runtime-tokens lists no token");
    let addr = tessera_tests::gardener_sim::start(tessera_tests::gardener_sim::SimConfig {
        listen: args.listen,
        garden_kubeconfig: args.garden_kubeconfig,
        runtime_server: args.runtime_server,
        runtime_tokens: tokens,
        script: args.script,
    })
    .await?;
    println!("listening on http://{addr}");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
