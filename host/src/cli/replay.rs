//! `tessera render --revision N --of RUNTIME`: replay a recorded render and say whether it
//! reproduces the recorded Shoot.

use std::process::ExitCode;

use anyhow::Context;
use kube::Api;
use tessera::controllers::replay::{Sources, replay};
use tessera::crd::Plugin;
use tessera::history;
use tessera::oci::{ContentStore, NoProgress, Registry, parse_reference};
use tessera::plugins::{ChainConfig, default_plugin_dir};
use tessera::wasm::WasmRuntime;

use super::registry::default_store_dir;
use super::render::RenderArgs;

pub fn run(rt: &WasmRuntime, number: i64, args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let name = args
        .of
        .clone()
        .context("--of RUNTIME is required with --revision")?;
    let store_dir = args.plugin_store.clone().unwrap_or_else(default_store_dir);
    let store = ContentStore::open(&store_dir)?;
    let (record, pulled) = recorded(args, &name, number, &store)?;
    for note in &pulled {
        eprintln!("note: {note}");
    }
    let config = match &args.config {
        Some(path) => Some(ChainConfig::from_file(path)?),
        None => None,
    };
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

/// Revision `number` of Runtime `name`, read from the control plane, with the components
/// of its registry plugins the store lacked pulled into `store` (what was pulled, in words).
fn recorded(
    args: &RenderArgs,
    name: &str,
    number: i64,
    store: &ContentStore,
) -> anyhow::Result<(history::RenderRecord, Vec<String>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = tessera::operator::client(args.kubeconfig.as_ref(), None).await?;
        let revisions = history::list(&client, &args.namespace, name)
            .await
            .with_context(|| format!("history of Runtime {}/{name}", args.namespace))?;
        let record = revision(revisions, number)?;
        // Several registries may be asked: credentials must name theirs.
        args.registry.check_scoped().map_err(anyhow::Error::msg)?;
        let registry = args.registry.registry();
        let pulled = pull_missing(&client, &registry, store, &record).await;
        Ok((record, pulled))
    })
}

/// Revision `number` among `revisions`: exactly one.
fn revision(
    revisions: Vec<history::Revision>,
    number: i64,
) -> anyhow::Result<history::RenderRecord> {
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

/// The components of `record`'s registry plugins (those with a channel) the store lacks,
/// pulled from the registry: any `Plugin` resource listing a usable version whose component
/// has the recorded digest gives a reference and manifest digest to try (the digest names
/// the content; the layer pulled must have it). Nothing here fails the replay: what could
/// not be pulled is said, and the replay then looks in `--plugins` and reports what is
/// missing.
async fn pull_missing(
    client: &kube::Client,
    registry: &Registry,
    store: &ContentStore,
    record: &history::RenderRecord,
) -> Vec<String> {
    let missing: Vec<_> = record
        .plugins
        .iter()
        .filter(|p| p.channel.is_some() && store.get(&p.digest).is_none())
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let plugins = match Api::<Plugin>::all(client.clone())
        .list(&Default::default())
        .await
    {
        Ok(list) => list.items,
        Err(e) => return vec![format!("cannot list Plugin resources to pull from: {e}")],
    };
    let versions: Vec<_> = plugins
        .iter()
        .flat_map(|p| p.status.iter().flat_map(|s| &s.versions))
        .filter(|v| v.error.is_none())
        .collect();
    let mut said = Vec::new();
    for stamp in missing {
        let sources = versions.iter().filter_map(|v| {
            let manifest = v.digest.as_ref()?;
            (v.component_digest.as_deref() == Some(stamp.digest.as_str()))
                .then_some((&v.reference, manifest))
        });
        let what = format!("{} {} ({})", stamp.name, stamp.version, stamp.digest);
        let mut failures = Vec::new();
        for (reference, manifest) in sources {
            match pull_component(registry, store, reference, manifest, &stamp.digest).await {
                Ok(()) => {
                    said.push(format!("pulled {what} from {reference}@{manifest}"));
                    failures.clear();
                    break;
                }
                Err(e) => failures.push(format!("{reference}@{manifest}: {e:#}")),
            }
        }
        if !failures.is_empty() {
            said.push(format!("could not pull {what}: {}", failures.join("; ")));
        }
    }
    said
}

/// Pull the component of `reference`@`manifest` into `store`; it must be `component`.
async fn pull_component(
    registry: &Registry,
    store: &ContentStore,
    reference: &str,
    manifest: &str,
    component: &str,
) -> anyhow::Result<()> {
    let parsed = parse_reference(reference)?;
    let artifact = registry.pull_artifact(&parsed, manifest).await?;
    if artifact.component_digest() != component {
        anyhow::bail!(
            "{reference}@{manifest} holds component {}, not the recorded {component}",
            artifact.component_digest()
        );
    }
    let pinned = parsed.clone_with_digest(manifest.to_string());
    let bytes = registry
        .pull_blob(&pinned, &artifact.layer, &NoProgress)
        .await?;
    store.put(&bytes)?;
    Ok(())
}
