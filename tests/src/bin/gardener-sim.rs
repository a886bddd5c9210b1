//! `gardener-sim`: the Gardener simulator as a process (see `tessera_tests::gardener_sim`).
//! Prints `listening on http://ADDR` once ready.

use std::path::PathBuf;

use clap::Parser;

/// Simulated Gardener in front of a real kube-apiserver.
#[derive(Debug, Parser)]
struct Args {
    /// Listen address (the admission webhooks listen on its IP too).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Kubeconfig of the garden API server, with Gardener's own (administrator) rights.
    #[arg(long)]
    garden_kubeconfig: PathBuf,
    /// URL of the API server Shoots become.
    #[arg(long)]
    runtime_server: String,
    /// The CA certificate (PEM) of the runtime API server's serving certificate.
    #[arg(long)]
    runtime_ca: PathBuf,
    /// The runtime API server's client CA certificate (PEM); admin kubeconfigs are client
    /// certificates it signs.
    #[arg(long)]
    runtime_client_ca: PathBuf,
    /// The client CA's private key (PEM).
    #[arg(long)]
    runtime_client_ca_key: PathBuf,
    /// The client CA's common name.
    #[arg(long)]
    runtime_client_ca_name: String,
    /// Longest admin kubeconfig lifetime, seconds (Gardener's
    /// `--shoot-admin-kubeconfig-max-expiration`, 24 h by default); longer requests are
    /// lowered to it.
    #[arg(long, default_value_t = 86400)]
    admin_kubeconfig_max_seconds: i64,
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
    let addr = tessera_tests::gardener_sim::start(tessera_tests::gardener_sim::SimConfig {
        listen: args.listen,
        garden_kubeconfig: args.garden_kubeconfig,
        runtime_server: args.runtime_server,
        runtime_ca: args.runtime_ca,
        runtime_client_ca: (
            args.runtime_client_ca,
            args.runtime_client_ca_key,
            args.runtime_client_ca_name,
        ),
        admin_kubeconfig_max_seconds: args.admin_kubeconfig_max_seconds,
        script: args.script,
    })
    .await?;
    println!("listening on http://{addr}");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
