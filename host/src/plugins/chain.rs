//! A shoot-extension chain: each plugin gets the Runtime and the previous plugin's draft.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::crd::PluginStamp;

use std::sync::LazyLock;

use serde_json::Value;
use tessera_sdk::Operation;
use tessera_sdk::glue::{RawExtendInput, RawExtendOutput};

use super::catalog::first_party_requests;
use super::config::{ChainConfig, PluginSettings};
use super::identity::ShootIdentity;
use super::memo::{DraftCache, Key, Memo, key_of};
use crate::grants::{
    IDENTITY_PATHS, PathPattern, Segment, ShootView, display_path, first_change, touches,
};
use crate::wasm::{CallContext, CallError, Failure, Limits, LoadError, LoadedPlugin, WasmRuntime};

static IDENTITY: LazyLock<Vec<PathPattern>> = LazyLock::new(|| {
    IDENTITY_PATHS
        .iter()
        .map(|p| p.parse().expect("identity paths parse"))
        .collect()
});

/// One configured step.
#[derive(Debug, Clone)]
pub struct ChainStep {
    pub plugin: Arc<LoadedPlugin>,
    /// The version recorded for this step: the Plugin resource's for registry steps, the
    /// component's own otherwise.
    pub version: String,
    /// Release channel of a registry step.
    pub channel: Option<String>,
    /// The plugin's configuration as JSON text (what the plugin receives).
    pub config: String,
    pub limits: Limits,
    /// The Shoot paths the operator granted it.
    pub paths: Arc<Vec<PathPattern>>,
    /// Hash of everything above that decides the step's output ([`ChainStep::key`]),
    /// computed once: build a new step instead of changing the fields of this one.
    pub memo_key: std::sync::OnceLock<Key>,
    /// The part of the Shoot the step sees ([`ChainStep::view`]).
    pub view: std::sync::OnceLock<ShootView>,
}

impl ChainStep {
    /// What of the Shoot this step sees and returns: its granted paths and the identity.
    pub fn view(&self) -> &ShootView {
        self.view.get_or_init(|| ShootView::of(&self.paths))
    }

    /// What decides this step's output besides its input: component, configuration,
    /// limits (an output over budget fails) and grants (a refused change fails).
    pub fn key(&self) -> &Key {
        self.memo_key.get_or_init(|| {
            let rules = format!("{:?}{:?}", self.limits, self.paths);
            key_of(&[
                self.plugin.inspection.digest.as_bytes(),
                self.config.as_bytes(),
                rules.as_bytes(),
            ])
        })
    }

    /// Refuse a draft that changes what this step was not granted, or the identity
    /// (public so that the benchmark can time it alone).
    pub fn check(&self, before: &Value, after: &Value) -> Result<(), CallError> {
        let free = |path: &[Segment]| {
            self.paths.iter().any(|p| p.covers(path))
                && !IDENTITY.iter().any(|id| touches(path, id))
        };
        let Some(path) = first_change(before, after, &free) else {
            return Ok(());
        };
        let cause = if IDENTITY.iter().any(|id| touches(&path, id)) {
            Failure::Identity {
                path: display_path(&path),
            }
        } else {
            let path = display_path(&path);
            Failure::NotGranted(format!(
                "not granted to set {path}; grant it with shootPaths: [{path:?}] (or a path above it)"
            ))
        };
        Err(CallError {
            plugin: self.plugin.info.name.clone(),
            version: self.plugin.info.version.clone(),
            cause,
        })
    }
}

/// The Shoot paths a file step is granted: the configuration's, else, for a first-party
/// plugin from the plugin directory, what it declares.
fn file_step_paths(name: &str, settings: &PluginSettings) -> Vec<PathPattern> {
    match &settings.grants {
        Some(grants) => grants.path_patterns(),
        None if settings.file.is_none() => first_party_requests(name)
            .map(|r| r.grants.path_patterns())
            .unwrap_or_default(),
        None => Vec::new(),
    }
}

/// An ordered list of loaded, configured shoot extensions.
#[derive(Debug, Clone)]
pub struct ShootChain {
    pub steps: Vec<ChainStep>,
}

/// The result of running a chain.
#[derive(Debug, Clone)]
pub struct ChainOutput {
    pub shoot: serde_json::Value,
    /// (plugin, warning)
    pub warnings: Vec<(String, String)>,
    /// What ran, step by step: plugin, version, component digest, channel.
    pub stamps: Vec<PluginStamp>,
    /// (plugin, wall time of its call), in order; steps taken from the cache are absent.
    pub timings: Vec<(String, std::time::Duration)>,
    /// Steps whose draft came from the cache instead of a plugin call.
    pub cached_steps: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(
        "plugin {name}: no component at {path} (build the first-party plugins with `cargo xtask build-plugins`, or pass --plugins DIR)"
    )]
    NotFound { name: String, path: PathBuf },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(
        "plugin file {path} says its name is {found:?}, but the chain lists it as {expected:?}"
    )]
    NameMismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Call(#[from] CallError),
    #[error(
        "plugin {name}: the configuration takes it from a registry (source: registry); only `tessera run` resolves Plugin resources — give this command a `file:` for it"
    )]
    FromRegistry { name: String },
}

/// Load one step from its file (`settings.file`, else `<plugin_dir>/<name>.wasm`).
pub(crate) fn file_step(
    rt: &WasmRuntime,
    config: &ChainConfig,
    plugin_dir: &Path,
    name: &str,
    settings: &PluginSettings,
    defaults: Limits,
) -> Result<ChainStep, ChainError> {
    let path = match &settings.file {
        Some(file) => config
            .base_dir
            .as_deref()
            .unwrap_or(Path::new("."))
            .join(file),
        None => plugin_dir.join(format!("{name}.wasm")),
    };
    if !path.is_file() {
        return Err(ChainError::NotFound {
            name: name.to_string(),
            path,
        });
    }
    let plugin = rt.load_file(&path)?;
    if plugin.name() != name {
        return Err(ChainError::NameMismatch {
            path,
            expected: name.to_string(),
            found: plugin.name().to_string(),
        });
    }
    Ok(ChainStep {
        version: plugin.info.version.clone(),
        channel: None,
        plugin,
        config: settings
            .config
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "{}".to_string()),
        limits: settings.limits.apply(defaults),
        paths: Arc::new(file_step_paths(name, settings)),
        memo_key: Default::default(),
        view: Default::default(),
    })
}

impl ShootChain {
    /// What each step runs: plugin, version, `sha256:` component digest, channel.
    pub fn stamps(&self) -> Vec<PluginStamp> {
        self.steps
            .iter()
            .map(|s| PluginStamp {
                name: s.plugin.name().to_string(),
                version: s.version.clone(),
                digest: format!("sha256:{}", s.plugin.inspection.digest),
                channel: s.channel.clone(),
            })
            .collect()
    }

    /// Load every plugin the configuration names from `plugin_dir` (or its `file`).
    pub fn load(
        rt: &WasmRuntime,
        config: &ChainConfig,
        plugin_dir: &Path,
    ) -> Result<Self, ChainError> {
        let defaults = config.limits.apply(Limits::default());
        let mut steps = Vec::new();
        for name in config.order() {
            let settings = config.plugins.get(&name).cloned().unwrap_or_default();
            if settings.source.unwrap_or(config.source) == super::config::Source::Registry
                && settings.file.is_none()
            {
                return Err(ChainError::FromRegistry { name });
            }
            steps.push(file_step(
                rt, config, plugin_dir, &name, &settings, defaults,
            )?);
        }
        Ok(Self { steps })
    }

    /// Run the chain for the Shoot `identity`. `runtime` and `current` are JSON
    /// documents. Each plugin's draft is checked against its grants before the next runs.
    pub fn run(
        &self,
        rt: &WasmRuntime,
        runtime: &str,
        identity: &ShootIdentity,
        runtime_id: &str,
        current: Option<&str>,
    ) -> Result<ChainOutput, CallError> {
        self.run_memo(rt, None, runtime, identity, runtime_id, current)
    }

    /// [`ShootChain::run`], starting after the last step whose draft `memo` holds and
    /// remembering the drafts of the steps it runs.
    pub fn run_memo(
        &self,
        rt: &WasmRuntime,
        memo: Option<&DraftCache>,
        runtime: &str,
        identity: &ShootIdentity,
        runtime_id: &str,
        current: Option<&str>,
    ) -> Result<ChainOutput, CallError> {
        let call = Call::new(rt, runtime, runtime_id, current);
        let keys =
            memo.map(|_| self.keys(runtime, identity, call.operation, call.current.as_ref()));
        let (start, mut shoot, mut warnings) = match (memo, &keys) {
            (Some(memo), Some(keys)) => resume(memo, keys),
            _ => None,
        }
        .and_then(|(done, hit)| Some((done, hit.shoot()?, hit.warnings.clone())))
        .unwrap_or_else(|| (0, identity.draft(), Vec::new()));
        let mut timings = Vec::with_capacity(self.steps.len() - start);
        for (index, step) in self.steps.iter().enumerate().skip(start) {
            let started = std::time::Instant::now();
            let output = call.step(step, &mut shoot)?;
            let name = step.plugin.name();
            timings.push((name.to_string(), started.elapsed()));
            warnings.extend(output.warnings.into_iter().map(|w| (name.to_string(), w)));
            if let (Some(memo), Some(keys)) = (memo, &keys) {
                memo.put(keys[index + 1], Memo::new(&shoot, warnings.clone()));
            }
        }
        Ok(ChainOutput {
            shoot,
            warnings,
            timings,
            stamps: self.stamps(),
            cached_steps: start,
        })
    }

    /// The exact input step `name` gets in this render (its view of the draft the steps
    /// before it made, and of the current Shoot) and its answer, for a golden case:
    /// `tessera render --record`. `None` when no step is called `name`; an error of a step
    /// before it ends the render as usual.
    pub fn record_step(
        &self,
        rt: &WasmRuntime,
        runtime: &str,
        identity: &ShootIdentity,
        runtime_id: &str,
        current: Option<&str>,
        name: &str,
    ) -> Result<Option<RecordedStep>, CallError> {
        let call = Call::new(rt, runtime, runtime_id, current);
        let mut shoot = identity.draft();
        for step in &self.steps {
            if step.plugin.name() == name {
                let (_, input) = call.input(step, &shoot);
                let answer = step
                    .plugin
                    .extend_parsed(rt, input.clone(), &step.limits, &call.ctx)
                    .map(|(output, _)| output);
                return Ok(Some(RecordedStep { input, answer }));
            }
            call.step(step, &mut shoot)?;
        }
        Ok(None)
    }

    /// `keys[0]` names the render's input, `keys[i]` the draft after `i` steps. A step is
    /// keyed by its view of the current Shoot, not the whole Shoot: Gardener's status and
    /// bookkeeping change all the time, and no plugin sees them.
    fn keys(
        &self,
        runtime: &str,
        identity: &ShootIdentity,
        operation: Operation,
        current: Option<&Value>,
    ) -> Vec<Key> {
        // The identity decides the first draft (`ShootIdentity::draft`).
        let binding = format!("{:?}", identity.binding);
        let operation = format!("{operation:?}");
        let mut keys = Vec::with_capacity(self.steps.len() + 1);
        keys.push(key_of(&[
            runtime.as_bytes(),
            identity.name.as_bytes(),
            identity.namespace.as_bytes(),
            binding.as_bytes(),
            operation.as_bytes(),
        ]));
        for step in &self.steps {
            let previous = *keys.last().expect("one key at least");
            let seen = current.map(|c| step.view().project(c).to_string());
            let seen = seen.as_deref().unwrap_or_default().as_bytes();
            keys.push(key_of(&[&previous, step.key(), seen]));
        }
        keys
    }
}

/// What every step of one render gets.
struct Call<'a> {
    rt: &'a WasmRuntime,
    runtime: &'a str,
    operation: Operation,
    current: Option<Value>,
    ctx: CallContext,
}

impl Call<'_> {
    /// Run `step` on the part of `shoot` it sees, check what it returned against its
    /// grants, and put that back into `shoot`.
    fn step(&self, step: &ChainStep, shoot: &mut Value) -> Result<RawExtendOutput, CallError> {
        let view = step.view();
        let (seen, input) = self.input(step, shoot);
        let (output, mut returned) =
            step.plugin
                .extend_parsed(self.rt, input, &step.limits, &self.ctx)?;
        view.prune(&mut returned);
        step.check(&seen, &returned)?;
        view.merge(shoot, returned);
        Ok(output)
    }
}

impl<'a> Call<'a> {
    /// A render of `runtime` (JSON): a patch of `current` (JSON) when there is one.
    fn new(rt: &'a WasmRuntime, runtime: &'a str, runtime_id: &str, current: Option<&str>) -> Self {
        Self {
            rt,
            runtime,
            operation: match current {
                Some(_) => Operation::Patch,
                None => Operation::Create,
            },
            current: current.and_then(|c| serde_json::from_str(c).ok()),
            ctx: CallContext {
                runtime_id: runtime_id.to_string(),
            },
        }
    }

    /// What `step` is given: its view of `shoot` (also returned as a value, to check its
    /// answer against) and of the current Shoot, with its configuration.
    fn input(&self, step: &ChainStep, shoot: &Value) -> (Value, RawExtendInput) {
        let view = step.view();
        let seen = view.project(shoot);
        let input = RawExtendInput {
            runtime: self.runtime.to_string(),
            draft: seen.to_string(),
            operation: self.operation,
            current_shoot: self.current.as_ref().map(|c| view.project(c).to_string()),
            config: step.config.clone(),
        };
        (seen, input)
    }
}

/// One step's input and answer in a render ([`ShootChain::record_step`]).
#[derive(Debug)]
pub struct RecordedStep {
    pub input: RawExtendInput,
    pub answer: Result<RawExtendOutput, CallError>,
}

/// The furthest step whose draft `memo` holds: (steps done, the draft and warnings so far).
fn resume(memo: &DraftCache, keys: &[Key]) -> Option<(usize, Arc<Memo>)> {
    (1..keys.len()).rev().find_map(|done| {
        let hit = memo.get(&keys[done])?;
        // The steps before stay as fresh as this one: a rollout of any of them needs them.
        memo.touch(&keys[1..done]);
        Some((done, hit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::EngineOptions;

    #[test]
    fn registry_steps_are_refused_where_only_files_run() {
        let rt = WasmRuntime::new(EngineOptions {
            cache_dir: None,
            pooling: false,
            ..EngineOptions::default()
        })
        .unwrap();
        let config: ChainConfig =
            serde_saphyr::from_str("chain: [dns]\nplugins:\n  dns: {source: registry}\n").unwrap();
        let err = ShootChain::load(&rt, &config, Path::new("/nonexistent")).unwrap_err();
        assert!(err.to_string().contains("plugin dns"), "{err}");
        assert!(err.to_string().contains("source: registry"), "{err}");
    }
}
