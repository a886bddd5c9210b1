//! Replaying a recorded render (`tessera render --revision`): the components a revision
//! names, found by digest, run on the inputs it recorded, with the configurations it
//! hashed and the grants it lists, must produce the Shoot it applied — the same hash.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::ResourceExt;
use serde_json::Value;

use super::shoot_doc;
use crate::crd::{PluginStamp, Runtime};
use crate::grants::PathPattern;
use crate::history::{RenderRecord, short};
use crate::oci::{ContentStore, sha256_digest};
use crate::plugins::{ChainConfig, ChainStep, ShootChain, ShootIdentity, first_party_requests};
use crate::wasm::{CallError, Limits, LoadError, LoadedPlugin, WasmRuntime};

/// Where a replay looks for what the revision names by hash.
#[derive(Default)]
pub struct Sources<'a> {
    /// Directory of `.wasm` components (file plugins), matched by digest.
    pub plugin_dir: Option<&'a Path>,
    /// The host's content store: pulled components and the configurations it kept.
    pub store: Option<&'a ContentStore>,
    /// Configurations (and limits) given by hand, over the store's.
    pub config: Option<&'a ChainConfig>,
}

/// A replayed render.
#[derive(Debug)]
pub struct Replay {
    /// The Shoot the replay would apply, and its hash.
    pub shoot: Value,
    pub hash: String,
    /// Inputs that were not the recorded ones (a configuration given by hand that hashes
    /// differently).
    pub notes: Vec<String>,
}

/// Why a revision cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(
        "plugin {plugin} {version}: component {digest} is in neither the plugin directory nor the content store"
    )]
    NoComponent {
        plugin: String,
        version: String,
        digest: String,
    },
    #[error(
        "the revision names component {digest} for plugin {plugin}, but that component is plugin {found}: the record was altered"
    )]
    Altered {
        plugin: String,
        digest: String,
        found: String,
    },
    #[error(
        "the configuration of plugin {plugin} ({hash}) is not in the content store: pass --config with the configuration it ran with"
    )]
    NoConfig { plugin: String, hash: String },
    #[error("the revision's {what} does not read: {message}")]
    Unreadable { what: String, message: String },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Plugin(#[from] CallError),
}

/// Replay `record`: build its chain from `sources` and run it on the recorded inputs.
pub fn replay(
    rt: &WasmRuntime,
    record: &RenderRecord,
    sources: &Sources<'_>,
) -> Result<Replay, ReplayError> {
    let runtime = recorded_runtime(&record.runtime)?;
    let mut notes = Vec::new();
    let mut files = None;
    let mut steps = Vec::with_capacity(record.plugins.len());
    for stamp in &record.plugins {
        let plugin = component(rt, stamp, sources, &mut files)?;
        let (config, note) = configuration(record, &stamp.name, sources)?;
        notes.extend(note);
        steps.push(step(record, stamp, plugin, config, sources)?);
    }
    let chain = ShootChain { steps };
    // The binding as the Shoot was applied: a credentials binding when the project used them.
    let credentials = record.shoot["spec"]["credentialsBindingName"].is_string();
    let identity = ShootIdentity::of(&runtime.spec.inner, &project_of(record))
        .with_credentials_binding(credentials);
    let current = record.current.as_ref().map(Value::to_string);
    let output = chain.run(
        rt,
        &record.runtime.to_string(),
        &identity,
        &runtime.name_any(),
        current.as_deref(),
    )?;
    let shoot = shoot_doc::desired(&output.shoot, &runtime);
    Ok(Replay {
        hash: shoot_doc::hash(&shoot),
        shoot,
        notes,
    })
}

/// The Runtime as the chain saw it (the deletion time is text there, and not needed).
fn recorded_runtime(value: &Value) -> Result<Runtime, ReplayError> {
    let mut value = value.clone();
    if let Some(meta) = value
        .as_object_mut()
        .and_then(|v| v.get_mut("metadata"))
        .and_then(Value::as_object_mut)
    {
        meta.remove("deletionTimestamp");
    }
    serde_json::from_value(value).map_err(|e| ReplayError::Unreadable {
        what: "Runtime".into(),
        message: e.to_string(),
    })
}

/// The Gardener project, from the namespace (`garden-<project>`) of the applied Shoot.
fn project_of(record: &RenderRecord) -> String {
    let namespace = record.shoot["metadata"]["namespace"].as_str().unwrap_or("");
    namespace
        .strip_prefix("garden-")
        .unwrap_or(crate::plugins::DEFAULT_PROJECT)
        .to_string()
}

/// The component `stamp` names: from the store, else the plugin directory (by digest);
/// it must be the plugin the revision says it is.
fn component(
    rt: &WasmRuntime,
    stamp: &PluginStamp,
    sources: &Sources<'_>,
    files: &mut Option<BTreeMap<String, PathBuf>>,
) -> Result<Arc<LoadedPlugin>, ReplayError> {
    let source = format!("{}@{}", stamp.name, stamp.digest);
    let stored = sources.store.and_then(|s| s.get(&stamp.digest));
    let plugin = match stored {
        Some(bytes) => rt.load(&bytes, &source)?,
        None => {
            let files = files.get_or_insert_with(|| components_in(sources.plugin_dir));
            let Some(path) = files.get(&stamp.digest) else {
                return Err(ReplayError::NoComponent {
                    plugin: stamp.name.clone(),
                    version: stamp.version.clone(),
                    digest: stamp.digest.clone(),
                });
            };
            rt.load_file(path)?
        }
    };
    if plugin.name() != stamp.name {
        return Err(ReplayError::Altered {
            plugin: stamp.name.clone(),
            digest: stamp.digest.clone(),
            found: plugin.name().to_string(),
        });
    }
    let component_version = &plugin.info.version;
    if stamp.channel.is_none() && *component_version != stamp.version {
        return Err(ReplayError::Altered {
            plugin: stamp.name.clone(),
            digest: stamp.digest.clone(),
            found: format!(
                "{} {component_version}, not {}",
                plugin.name(),
                stamp.version
            ),
        });
    }
    Ok(plugin)
}

/// The `.wasm` files of `dir` by `sha256:` digest.
fn components_in(dir: Option<&Path>) -> BTreeMap<String, PathBuf> {
    let Some(entries) = dir.and_then(|d| std::fs::read_dir(d).ok()) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .filter_map(|p| Some((sha256_digest(&std::fs::read(&p).ok()?), p)))
        .collect()
}

/// The configuration `plugin` ran with: given by hand (noted when its hash differs), else
/// the one the host kept under the recorded hash.
fn configuration(
    record: &RenderRecord,
    plugin: &str,
    sources: &Sources<'_>,
) -> Result<(String, Option<String>), ReplayError> {
    let recorded = record
        .config_hashes
        .get(plugin)
        .cloned()
        .unwrap_or_default();
    let given = sources
        .config
        .and_then(|c| c.plugins.get(plugin))
        .and_then(|s| s.config.as_ref());
    if let Some(config) = given {
        let text = config.to_string();
        let hash = sha256_digest(text.as_bytes());
        let note = (hash != recorded).then(|| {
            format!(
                "the configuration of {plugin} given with --config ({}) is not the recorded one ({})",
                short(&hash),
                short(&recorded)
            )
        });
        return Ok((text, note));
    }
    if recorded == sha256_digest(b"{}") {
        return Ok(("{}".into(), None));
    }
    let kept = sources.store.and_then(|s| s.get(&recorded));
    match kept.and_then(|bytes| String::from_utf8(bytes).ok()) {
        Some(text) => Ok((text, None)),
        None => Err(ReplayError::NoConfig {
            plugin: plugin.to_string(),
            hash: recorded,
        }),
    }
}

/// One step of the replayed chain: the recorded grants (a revision written before grants
/// were recorded: the first-party requests), limits by hand or the defaults.
fn step(
    record: &RenderRecord,
    stamp: &PluginStamp,
    plugin: Arc<LoadedPlugin>,
    config: String,
    sources: &Sources<'_>,
) -> Result<ChainStep, ReplayError> {
    let paths = match record.grants.get(&stamp.name) {
        Some(paths) => paths
            .iter()
            .map(|p| p.parse::<PathPattern>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ReplayError::Unreadable {
                what: format!("grants of {}", stamp.name),
                message: e.to_string(),
            })?,
        None => first_party_requests(&stamp.name)
            .map(|r| r.grants.path_patterns())
            .unwrap_or_default(),
    };
    let limits = match sources.config {
        Some(c) => {
            let settings = c.plugins.get(&stamp.name).cloned().unwrap_or_default();
            settings.limits.apply(c.limits.apply(Limits::default()))
        }
        None => Limits::default(),
    };
    Ok(ChainStep {
        plugin,
        version: stamp.version.clone(),
        channel: stamp.channel.clone(),
        config,
        limits,
        paths: Arc::new(paths),
        memo_key: Default::default(),
        view: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Operation;
    use serde_json::json;

    fn record(config_hash: String) -> RenderRecord {
        RenderRecord {
            runtime_generation: 1,
            operation: Operation::Create,
            plugins: Vec::new(),
            config_hashes: BTreeMap::from([("dns".into(), config_hash)]),
            grants: BTreeMap::new(),
            shoot_hash: String::new(),
            runtime: Value::Null,
            current: None,
            shoot: json!({"metadata": {"namespace": "garden-team-a"}}),
        }
    }

    #[test]
    fn configurations_come_from_the_store_by_hash_or_are_given_and_compared() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let kept = store.put(br#"{"zone":"a"}"#).unwrap();
        let sources = Sources {
            store: Some(&store),
            ..Default::default()
        };
        let (text, note) = configuration(&record(kept.clone()), "dns", &sources).unwrap();
        assert_eq!((text.as_str(), note), (r#"{"zone":"a"}"#, None));
        let empty = sha256_digest(b"{}");
        assert_eq!(
            configuration(&record(empty), "dns", &sources).unwrap().0,
            "{}"
        );
        let missing = sha256_digest(b"elsewhere");
        let err = configuration(&record(missing), "dns", &sources).unwrap_err();
        assert!(
            err.to_string().contains("configuration of plugin dns"),
            "{err}"
        );

        let given: ChainConfig =
            serde_json::from_value(json!({"plugins": {"dns": {"config": {"zone": "b"}}}})).unwrap();
        let sources = Sources {
            config: Some(&given),
            store: Some(&store),
            ..Default::default()
        };
        let (text, note) = configuration(&record(kept), "dns", &sources).unwrap();
        assert_eq!(text, r#"{"zone":"b"}"#);
        assert!(note.unwrap().contains("is not the recorded one"));
        assert_eq!(project_of(&record(String::new())), "team-a");
    }
}
