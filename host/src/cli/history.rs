//! `tessera history RUNTIME`: the Shoots the host applied for a Runtime, and what changed
//! between two of them.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tessera::history::{self, Revision};

use super::ReportFormat;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The Runtime (its name is the runtime id).
    runtime: String,
    /// Namespace of the Runtime.
    #[arg(long, short, default_value = "default")]
    namespace: String,
    /// Show what changed from revision A to revision B (Runtime generation, plugin
    /// versions and digests, configurations, Shoot fields).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    diff: Option<Vec<i64>>,
    /// Control-plane kubeconfig [default: in-cluster, else $KUBECONFIG, else ~/.kube/config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Output format (JSON: the records themselves).
    #[arg(long, short, value_enum, default_value_t)]
    output: ReportFormat,
}

pub fn run(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = tessera::operator::client(args.kubeconfig.as_ref(), None).await?;
        let revisions = history::list(&client, &args.namespace, &args.runtime)
            .await
            .with_context(|| format!("history of Runtime {}/{}", args.namespace, args.runtime))?;
        match &args.diff {
            Some(pair) => diff(&revisions, pair[0], pair[1], args.output),
            None => list(&args.runtime, &revisions, args.output),
        }
    })
}

fn list(runtime: &str, revisions: &[Revision], output: ReportFormat) -> anyhow::Result<ExitCode> {
    if output == ReportFormat::Json {
        let records: Vec<serde_json::Value> = revisions.iter().map(as_json).collect();
        println!("{}", serde_json::to_string_pretty(&records)?);
        return Ok(ExitCode::SUCCESS);
    }
    if revisions.is_empty() {
        println!("no Shoot was recorded for Runtime {runtime}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("REVISION  GENERATION  OPERATION  SHOOT         APPLIED               PLUGINS");
    let mut before: Option<&Revision> = None;
    for r in revisions {
        let plugins = match before {
            None => format!("{} plugins", r.record.plugins.len()),
            Some(b) => {
                let changed = history::plugin_changes(&b.record.plugins, &r.record.plugins);
                if changed.is_empty() {
                    "unchanged".into()
                } else {
                    changed.join("; ")
                }
            }
        };
        println!(
            "{:<9} {:<11} {:<10} {:<13} {:<21} {plugins}",
            r.number,
            r.record.runtime_generation,
            format!("{:?}", r.record.operation),
            history::short(&r.record.shoot_hash),
            r.created.as_deref().unwrap_or("-"),
        );
        before = Some(r);
    }
    Ok(ExitCode::SUCCESS)
}

fn as_json(r: &Revision) -> serde_json::Value {
    serde_json::json!({"revision": r.number, "name": r.name, "created": r.created, "record": r.record})
}

fn diff(revisions: &[Revision], a: i64, b: i64, output: ReportFormat) -> anyhow::Result<ExitCode> {
    let find = |n: i64| {
        revisions.iter().find(|r| r.number == n).with_context(|| {
            let kept: Vec<String> = revisions.iter().map(|r| r.number.to_string()).collect();
            format!("no revision {n} (kept: {})", kept.join(", "))
        })
    };
    let (x, y) = (find(a)?, find(b)?);
    let lines = history::changes(&x.record, &y.record);
    if output == ReportFormat::Json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
    } else if lines.is_empty() {
        println!("revisions {a} and {b} applied the same Shoot with the same plugins");
    } else {
        println!("revision {a} → {b}:");
        for line in lines {
            println!("  {line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
