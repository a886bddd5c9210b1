//! `tessera render --revision N --of RUNTIME`: replay a recorded render and say whether it
//! reproduces the recorded Shoot.

use std::process::ExitCode;

use anyhow::Context;
use tessera::controllers::replay::{Sources, replay};
use tessera::history;
use tessera::oci::ContentStore;
use tessera::plugins::{ChainConfig, default_plugin_dir};
use tessera::wasm::WasmRuntime;

use super::registry::default_store_dir;
use super::render::RenderArgs;

pub fn run(rt: &WasmRuntime, number: i64, args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let name = args
        .of
        .clone()
        .context("--of RUNTIME is required with --revision")?;
    let record = recorded(args, &name, number)?;
    let config = match &args.config {
        Some(path) => Some(ChainConfig::from_file(path)?),
        None => None,
    };
    let store_dir = args.plugin_store.clone().unwrap_or_else(default_store_dir);
    let store = ContentStore::open(&store_dir)?;
    let plugin_dir = args.plugins.clone().or_else(default_plugin_dir);
    let sources = Sources {
        plugin_dir: plugin_dir.as_deref(),
        store: Some(&store),
        config: config.as_ref(),
    };
    let what = format!("revision {number} of Runtime {}/{name}", args.namespace);
    let replayed = replay(rt, &record, &sources).with_context(|| format!("replay of {what}"))?;
    for note in &replayed.notes {
        eprintln!("note: {note}");
    }
    args.output.print(&replayed.shoot)?;
    if replayed.hash == record.shoot_hash {
        eprintln!("{what} reproduced: {}", replayed.hash);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "{what} NOT reproduced: recorded {}, replay {}",
        record.shoot_hash, replayed.hash
    );
    for line in tessera::plugins::shadow::diff(&record.shoot, &replayed.shoot) {
        eprintln!("  {line}");
    }
    Ok(ExitCode::FAILURE)
}

/// Revision `number` of Runtime `name`, read from the control plane.
fn recorded(args: &RenderArgs, name: &str, number: i64) -> anyhow::Result<history::RenderRecord> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let revisions = runtime.block_on(async {
        let client = tessera::operator::client(args.kubeconfig.as_ref(), None).await?;
        history::list(&client, &args.namespace, name)
            .await
            .with_context(|| format!("history of Runtime {}/{name}", args.namespace))
    })?;
    let kept: Vec<String> = revisions.iter().map(|r| r.number.to_string()).collect();
    let mut found: Vec<history::Revision> = revisions
        .into_iter()
        .filter(|r| r.number == number)
        .collect();
    if found.len() > 1 {
        let names: Vec<String> = found.iter().map(|r| r.name.clone()).collect();
        anyhow::bail!(
            "revision {number} is recorded twice ({}): the history was altered",
            names.join(", ")
        );
    }
    found
        .pop()
        .map(|r| r.record)
        .with_context(|| format!("no revision {number} (kept: {})", kept.join(", ")))
}
