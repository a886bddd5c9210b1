//! `tessera shadow RUNTIME`: what the shadow versions would have changed in its Shoot.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::ReportFormat;
use kube::Api;
use tessera::crd::Runtime;

#[derive(Debug, Args)]
pub struct ShadowArgs {
    /// The Runtime (its name is the runtime id).
    runtime: String,
    /// Namespace of the Runtime.
    #[arg(long, short, default_value = "default")]
    namespace: String,
    /// Control-plane kubeconfig [default: in-cluster, else $KUBECONFIG, else ~/.kube/config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    output: ReportFormat,
}

pub fn run(args: ShadowArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = tessera::operator::client(args.kubeconfig.as_ref(), None).await?;
        let api: Api<Runtime> = Api::namespaced(client, &args.namespace);
        let rt = api
            .get(&args.runtime)
            .await
            .with_context(|| format!("Runtime {}/{}", args.namespace, args.runtime))?;
        let shadow = rt.status.map(|s| s.shadow).unwrap_or_default();
        if args.output == ReportFormat::Json {
            println!("{}", serde_json::to_string_pretty(&shadow)?);
            return Ok(ExitCode::SUCCESS);
        }
        if shadow.is_empty() {
            println!("no shadow versions were rendered for {}", args.runtime);
        }
        for s in &shadow {
            println!(
                "{} {} (channel {}, {}) vs applied {}: {}",
                s.plugin, s.version, s.channel, s.digest, s.current_version, s.result
            );
            for line in &s.diff {
                println!("    {line}");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
