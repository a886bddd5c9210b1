//! Rendering shared by create, patch and shadow renders: resolve the Runtime's chain, run
//! it, run the shadow versions next to it, turn plugin errors into `Failed`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use serde_json::Value;

use super::super::machine::{Machine, Transition};
use super::super::shoot_doc;
use crate::controllers::kit;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{ConditionStatus, ShadowOutcome, ShadowResult};
use crate::crd::{ConditionType, Reason};
use crate::crd::{EventReason, Runtime};
use crate::history::{Operation, RenderRecord};
use crate::plugins::{ChainOutput, ChainStep, ChannelChoice, ResolvedChain, Unavailable};
use crate::wasm::{CallError, Failure, Fault};

/// Most diff lines kept per shadow result.
const MAX_DIFF_LINES: usize = 40;

/// The channels a Runtime asks for, from its annotations.
pub(crate) fn channel_choice(runtime: &Runtime) -> ChannelChoice {
    let annotations = runtime.metadata.annotations.clone().unwrap_or_default();
    ChannelChoice {
        all: annotations.get(labels::CHANNEL).cloned(),
        per_plugin: annotations
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.strip_prefix(labels::CHANNEL_PREFIX)?.to_string(),
                    v.clone(),
                ))
            })
            .collect(),
        allow_downgrade: labels::is_true(Some(&annotations), labels::ALLOW_DOWNGRADE),
    }
}

/// The Runtime's chain for this reconcile (resolved once), with its conditions.
pub(crate) fn resolve(m: &mut Machine) -> Result<Arc<ResolvedChain>, Unavailable> {
    if let Some(chain) = &m.chain {
        return Ok(chain.clone());
    }
    let resolver = m.ctx.renderer.resolver.clone();
    let applied = m.status.plugins.clone();
    let result =
        resolver
            .template
            .resolve(&resolver.catalog, &channel_choice(&m.runtime), &applied);
    if !resolver.template.uses_registry() {
        let chain = Arc::new(result?);
        m.chain = Some(chain.clone());
        return Ok(chain);
    }
    let chain = match result {
        Ok(chain) => Arc::new(chain),
        Err(err) => {
            m.condition(
                ConditionType::PluginsAvailable,
                ConditionStatus::False,
                Reason::PluginUnavailable,
                err.message.clone(),
            );
            return Err(err);
        }
    };
    m.condition(
        ConditionType::PluginsAvailable,
        ConditionStatus::True,
        Reason::Resolved,
        "every registry plugin of the chain is available".to_string(),
    );
    if chain.held_back.is_empty() {
        m.condition(
            ConditionType::PluginVersions,
            ConditionStatus::True,
            Reason::AsChannelsSay,
            "every plugin runs its channel's version".to_string(),
        );
    } else {
        let message = chain
            .held_back
            .iter()
            .map(|h| {
                format!(
                    "{} channel {} offers {}, lower than the applied {}; keeping {} (allowDowngrade on the channel or tessera.dev/allow-downgrade permits it)",
                    h.plugin, h.channel, h.refused, h.kept, h.kept
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let already = m.status.conditions.iter().any(|c| {
            c.is(ConditionType::PluginVersions)
                && c.because(Reason::DowngradeRefused)
                && c.message == message
        });
        if !already {
            m.event(
                EventType::Warning,
                EventReason::DowngradeRefused,
                message.clone(),
            );
        }
        m.condition(
            ConditionType::PluginVersions,
            ConditionStatus::False,
            Reason::DowngradeRefused,
            message,
        );
    }
    m.chain = Some(chain.clone());
    Ok(chain)
}

/// Stop and come back later: a registry plugin of the chain is not available yet.
pub(crate) fn wait_for_plugins(m: &Machine, err: &Unavailable) -> Transition {
    let why = format!("waiting for plugin {}: {}", err.plugin, err.message);
    let delay = kit::retry_later(&m.ctx, &kit::key(m.runtime.as_ref()), &why);
    Transition::Stop(Action::requeue(delay))
}

/// The Runtime the chain renders: as written, its registry caches naming the project
/// copies of their credentials (`crate::render::caches::resolve`).
fn runtime_for_plugins(m: &Machine) -> String {
    let text = shoot_doc::runtime_json(&m.runtime);
    if m.runtime.spec.inner.image_registry_cache.is_none() {
        return text;
    }
    let mut runtime: Value = serde_json::from_str(&text).unwrap_or_default();
    crate::render::caches::resolve(&mut runtime, &m.cache_secrets);
    runtime.to_string()
}

/// The Shoot to apply and the chain output it came from, or the transition to take
/// instead (`Failed`, or waiting for a plugin).
pub(crate) async fn render(
    m: &mut Machine,
    current: Option<&DynamicObject>,
) -> Result<Result<(Value, ChainOutput), Transition>, ReconcileError> {
    let chain = match resolve(m) {
        Ok(chain) => chain,
        Err(err) => return Ok(Err(wait_for_plugins(m, &err))),
    };
    let runtime_json = runtime_for_plugins(m);
    let current_json = current.map(shoot_doc::current_json);
    let result = m
        .ctx
        .renderer
        .render(
            chain.chain.clone(),
            runtime_json.clone(),
            m.identity(),
            m.id(),
            current_json.clone(),
            &m.ctx.metrics,
        )
        .await
        .map_err(|e| ReconcileError::Join(e.to_string()))?;
    match result {
        Ok(output) => {
            m.waited_for(
                ConditionType::PluginsAvailable,
                "every plugin of the chain answered",
            );
            for (plugin, warning) in &output.warnings {
                tracing::info!(runtime = %m.id(), plugin, warning, "plugin warning");
                let note = format!("plugin {plugin}: {warning}");
                m.event(EventType::Warning, EventReason::PluginWarning, note);
            }
            let desired = shoot_doc::desired(&output.shoot, &m.runtime);
            render_shadows(m, &chain, &output, runtime_json, current_json).await?;
            Ok(Ok((desired, output)))
        }
        Err(error) => Ok(Err(plugin_failed(m, &error))),
    }
}

/// Why a render failed, as the Runtime reports it, and whether retrying can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RenderFailure {
    /// The Runtime must change: `Failed`.
    Fail(Reason),
    /// Someone else must act (the plugin, its configuration) or nobody (a timeout): wait
    /// with backoff; a catalog change wakes the Runtime at once.
    Wait(Reason),
}

/// Deterministic failures fail the Runtime; the plugin's own faults and transient ones
/// make it wait, because editing the Runtime would not help.
pub(crate) fn classify(error: &CallError) -> RenderFailure {
    match error.fault() {
        Fault::Input if error.field().is_some() => RenderFailure::Fail(Reason::InvalidRuntime),
        Fault::Input => RenderFailure::Fail(Reason::PluginRejected),
        Fault::Grant => RenderFailure::Fail(Reason::PluginNotGranted),
        Fault::Config => RenderFailure::Wait(Reason::PluginConfigInvalid),
        Fault::Plugin => RenderFailure::Wait(Reason::PluginFailed),
        Fault::Transient if matches!(error.cause, Failure::Busy { .. }) => {
            RenderFailure::Wait(Reason::HostBusy)
        }
        Fault::Transient => RenderFailure::Wait(Reason::PluginTimedOut),
    }
}

fn plugin_failed(m: &mut Machine, error: &CallError) -> Transition {
    m.ctx.metrics.plugin_failed(&error.plugin, error.fault());
    let message = match error.field() {
        Some(field) => format!("{error} (field {field})"),
        None => error.to_string(),
    };
    let reason = match classify(error) {
        RenderFailure::Fail(reason) => return m.fail(reason, message),
        RenderFailure::Wait(reason) => reason,
    };
    let resolver = &m.ctx.renderer.resolver;
    if reason == Reason::PluginConfigInvalid
        && let Some(owner) = resolver.template.config_owner(&error.plugin)
    {
        resolver.catalog.refuse_config(owner, &message);
    }
    m.wait_retrying(ConditionType::PluginsAvailable, reason, message)
}

/// Render with each shadow version and record how its Shoot differs from the real one.
async fn render_shadows(
    m: &mut Machine,
    chain: &ResolvedChain,
    output: &ChainOutput,
    runtime_json: String,
    current_json: Option<String>,
) -> Result<(), ReconcileError> {
    let mut results = Vec::with_capacity(chain.shadows.len());
    for shadow in &chain.shadows {
        let shadow_output = m
            .ctx
            .renderer
            .render(
                chain.with_shadow(shadow),
                runtime_json.clone(),
                m.identity(),
                m.id(),
                current_json.clone(),
                &m.ctx.metrics,
            )
            .await
            .map_err(|e| ReconcileError::Join(e.to_string()))?;
        let entry = shadow_result(chain, shadow, output, shadow_output);
        m.ctx
            .metrics
            .shadow_rendered(&entry.plugin, &entry.version, entry.result);
        if !m.status.shadow.contains(&entry)
            && let Some((type_, note)) = shadow_note(&entry)
        {
            m.event(type_, EventReason::ShadowDiff, note);
        }
        results.push(entry);
    }
    m.status.shadow = results;
    Ok(())
}

/// How the shadow render of `shadow` compares with the applied `output` (diff capped).
fn shadow_result(
    chain: &ResolvedChain,
    shadow: &crate::plugins::template::Shadow,
    output: &ChainOutput,
    rendered: Result<ChainOutput, CallError>,
) -> ShadowResult {
    let current_step = &chain.chain.steps[shadow.index];
    let (result, diff) = match rendered {
        Ok(out) => {
            let lines = crate::plugins::shadow::diff(&output.shoot, &out.shoot);
            (ShadowOutcome::of(&lines), lines)
        }
        Err(err) => (ShadowOutcome::Failed, vec![err.to_string()]),
    };
    let total = diff.len();
    let mut diff: Vec<String> = diff.into_iter().take(MAX_DIFF_LINES).collect();
    if total > MAX_DIFF_LINES {
        diff.push(format!("… {} more", total - MAX_DIFF_LINES));
    }
    ShadowResult {
        plugin: current_step.plugin.name().to_string(),
        channel: shadow.channel.clone(),
        version: shadow.step.version.clone(),
        digest: shadow.digest.clone(),
        current_version: current_step.version.clone(),
        result,
        diff,
    }
}

/// The Event a new shadow result is worth: none when it renders the same.
fn shadow_note(entry: &ShadowResult) -> Option<(EventType, String)> {
    let type_ = match entry.result {
        ShadowOutcome::Same => return None,
        ShadowOutcome::Differs => EventType::Normal,
        ShadowOutcome::Failed => EventType::Warning,
    };
    let note = format!(
        "shadow {} {} (channel {}) vs applied {}: {}",
        entry.plugin,
        entry.version,
        entry.channel,
        entry.current_version,
        entry.diff.join("; ")
    );
    Some((type_, note))
}

/// Remember what produced the applied Shoot.
pub(crate) fn record_applied(m: &mut Machine, desired: &Value, output: &ChainOutput) {
    m.status.plugins = output.stamps.clone();
    m.status.contract_version = m
        .chain
        .as_ref()
        .and_then(|c| c.chain.steps.first())
        .map(|s| s.plugin.info.contract_version.clone());
    m.status.shoot_hash = Some(shoot_doc::hash(desired));
}

/// What the render history records of `desired`, applied by `operation` starting from
/// `current`: the inputs exactly as the chain was given them (JSON text, parsed back). Each
/// configuration goes to the host's content store under its hash, where `tessera render
/// --revision` finds it; the revision itself holds only the hash.
pub(crate) fn history_record(
    m: &Machine,
    operation: Operation,
    current: Option<&DynamicObject>,
    desired: &Value,
    output: &ChainOutput,
) -> RenderRecord {
    let parsed = |text: String| serde_json::from_str(&text).unwrap_or(Value::Null);
    let steps: Vec<&ChainStep> = m.chain.iter().flat_map(|c| c.chain.steps.iter()).collect();
    let mut config_hashes = BTreeMap::new();
    let mut grants = BTreeMap::new();
    for step in steps {
        let name = step.plugin.info.name.clone();
        config_hashes.insert(name.clone(), keep_config(m, &step.config));
        grants.insert(name, step.paths.iter().map(|p| p.to_string()).collect());
    }
    RenderRecord {
        runtime_generation: m.generation(),
        operation,
        plugins: output.stamps.clone(),
        config_hashes,
        grants,
        shoot_hash: shoot_doc::hash(desired),
        runtime: parsed(runtime_for_plugins(m)),
        current: current.map(|c| parsed(shoot_doc::current_json(c))),
        shoot: desired.clone(),
    }
}

/// `sha256:` of a step's configuration, kept in the content store (best effort: a replay
/// can be given the configuration instead).
fn keep_config(m: &Machine, config: &str) -> String {
    let Some(fetcher) = &m.ctx.fetcher else {
        return crate::oci::sha256_digest(config.as_bytes());
    };
    match fetcher.store.put(config.as_bytes()) {
        Ok(digest) => digest,
        Err(error) => {
            tracing::warn!(runtime = %m.id(), %error, "cannot keep a plugin configuration for replays");
            crate::oci::sha256_digest(config.as_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tessera_sdk::{ErrorKind, PluginError};

    fn error(cause: Failure) -> CallError {
        CallError {
            plugin: "provider".into(),
            version: "1.0.0".into(),
            cause,
        }
    }

    fn refused(kind: ErrorKind, field: Option<&str>) -> CallError {
        error(Failure::Plugin(PluginError {
            kind,
            message: "no".into(),
            field: field.map(str::to_string),
        }))
    }

    #[test]
    fn an_invalid_runtime_fails_the_runtime() {
        let e = refused(ErrorKind::InvalidInput, Some("spec.shoot.networking.nodes"));
        assert_eq!(classify(&e), RenderFailure::Fail(Reason::InvalidRuntime));
        let e = refused(ErrorKind::Unsupported, None);
        assert_eq!(classify(&e), RenderFailure::Fail(Reason::PluginRejected));
    }

    #[test]
    fn a_refused_plugin_configuration_waits_for_the_plugin() {
        let e = refused(ErrorKind::InvalidInput, Some("config.mode"));
        assert_eq!(
            classify(&e),
            RenderFailure::Wait(Reason::PluginConfigInvalid)
        );
        // A Runtime field that merely starts with the letters is the Runtime's.
        let e = refused(ErrorKind::InvalidInput, Some("configuration"));
        assert_eq!(classify(&e), RenderFailure::Fail(Reason::InvalidRuntime));
    }

    #[test]
    fn timeouts_and_busy_sandboxes_wait_and_retry() {
        let e = error(Failure::Timeout {
            budget: Duration::from_millis(200),
        });
        assert_eq!(classify(&e), RenderFailure::Wait(Reason::PluginTimedOut));
        let e = error(Failure::Busy {
            detail: "all slots in use".into(),
        });
        assert_eq!(classify(&e), RenderFailure::Wait(Reason::HostBusy));
    }

    #[test]
    fn a_plugin_bug_waits_for_a_new_plugin_version() {
        let trap = error(Failure::Trap {
            message: "unreachable".into(),
            panic: None,
        });
        assert_eq!(classify(&trap), RenderFailure::Wait(Reason::PluginFailed));
        let internal = refused(ErrorKind::Internal, Some("spec.shoot"));
        assert_eq!(
            classify(&internal),
            RenderFailure::Wait(Reason::PluginFailed)
        );
    }

    #[test]
    fn what_a_plugin_was_not_granted_fails_the_runtime() {
        let e = error(Failure::NotGranted("spec.purpose".into()));
        assert_eq!(classify(&e), RenderFailure::Fail(Reason::PluginNotGranted));
    }
}
