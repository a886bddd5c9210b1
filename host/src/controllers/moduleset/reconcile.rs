//! One pass over a ModuleSet: finalizer, target, the modules pass, status and Events.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::drift::Drift;
use super::targets::Targets;
use crate::controllers::kit::{self, Controller, Note, finalizer};
use crate::controllers::labels::{self, is_true};
use crate::controllers::{Context, ReconcileError};
use crate::crd::{ConditionStatus, ModuleSet, ModuleSetStatus, patch_status, set_condition};
use crate::modules::State;
use crate::modules::set::{Notice, SetRequest, reconcile_set};
use crate::modules::source::CatalogSource;

/// Re-check settled ModuleSets this often even without events (drift safety net).
const RESYNC: Duration = Duration::from_secs(600);
const STATUS_FIELDS: &[&str] = &[
    "observedGeneration",
    "state",
    "summary",
    "modules",
    "conditions",
];

/// What ModuleSet reconciles share.
pub struct ModuleContext {
    pub ctx: Arc<Context>,
    pub targets: Targets,
    pub drift: Arc<Drift>,
}

const STATES: [State; 5] = [
    State::Ready,
    State::Processing,
    State::Warning,
    State::Error,
    State::Deleting,
];

fn set_state_metric(ctx: &Context, ns: &str, name: &str, state: Option<State>) {
    for s in STATES {
        let labels = [ns, name, &s.to_string()];
        match state {
            Some(current) => ctx
                .metrics
                .moduleset_state
                .with_label_values(&labels)
                .set(i64::from(current == s)),
            None => {
                let _ = ctx.metrics.moduleset_state.remove_label_values(&labels);
            }
        }
    }
}

pub async fn reconcile(
    set: Arc<ModuleSet>,
    mctx: Arc<ModuleContext>,
) -> Result<Action, ReconcileError> {
    let pass = reconcile_set_object(set.clone(), mctx.clone());
    kit::guarded(Controller::ModuleSet, set.as_ref(), &mctx.ctx, pass).await
}

async fn reconcile_set_object(
    set: Arc<ModuleSet>,
    mctx: Arc<ModuleContext>,
) -> Result<Action, ReconcileError> {
    let ctx = &mctx.ctx;
    let name = set.name_any();
    let ns = set.namespace().unwrap_or_default();
    let api: Api<ModuleSet> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = set.metadata.deletion_timestamp.is_some();
    if deleting && !finalizer::has(set.as_ref(), labels::MODULESET_FINALIZER) {
        return Ok(Action::await_change());
    }
    if !deleting {
        finalizer::add(&api, set.as_ref(), labels::MODULESET_FINALIZER).await?;
    }
    // Until the Plugins present at start-up are resolved, "no such Plugin" would be a lie.
    if !ctx.initial_sync.is_done() {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    let old = set.status.clone().unwrap_or_default();
    let mut status = ModuleSetStatus {
        observed_generation: set.metadata.generation,
        conditions: old.conditions.clone(),
        ..old.clone()
    };
    let generation = set.metadata.generation;
    let target = match mctx.targets.get(&ns, set.spec.target.as_ref()).await {
        Ok(t) => t,
        Err(message) => {
            set_condition(
                &mut status.conditions,
                "TargetReachable",
                ConditionStatus::False,
                "TargetUnreachable",
                &message,
                generation,
            );
            set_condition(
                &mut status.conditions,
                "Ready",
                ConditionStatus::False,
                "TargetUnreachable",
                &message,
                generation,
            );
            status.state = Some(State::Error);
            if deleting {
                status.state = Some(State::Deleting);
            }
            write(&api, &name, &old, &status).await?;
            if old.conditions != status.conditions {
                event(
                    ctx,
                    &set,
                    EventType::Warning,
                    "TargetUnreachable",
                    message.clone(),
                )
                .await;
            }
            let delay = kit::retry_later(ctx, &kit::key(set.as_ref()), &message);
            return Ok(Action::requeue(delay));
        }
    };
    set_condition(
        &mut status.conditions,
        "TargetReachable",
        ConditionStatus::True,
        "Connected",
        format!(
            "Kubernetes {}",
            target.facts.kubernetes_version.as_deref().unwrap_or("?")
        ),
        generation,
    );
    let source = CatalogSource {
        catalog: ctx.renderer.resolver.catalog.clone(),
    };
    let request = SetRequest {
        set: format!("{ns}/{name}"),
        channel: set.spec.channel.as_deref(),
        modules: &set.spec.modules,
        deleting,
        allow_downgrade: is_true(
            set.metadata.annotations.as_ref(),
            labels::MODULES_ALLOW_DOWNGRADE,
        ),
    };
    let outcome = match reconcile_set(&target, &ctx.renderer.wasm, &source, &request).await {
        Ok(o) => o,
        Err(e) => {
            let message = e.to_string();
            set_condition(
                &mut status.conditions,
                "Ready",
                ConditionStatus::False,
                "ReconcileFailed",
                &message,
                generation,
            );
            status.state = Some(if deleting {
                State::Deleting
            } else {
                State::Error
            });
            write(&api, &name, &old, &status).await?;
            let delay = kit::retry_later(ctx, &kit::key(set.as_ref()), &message);
            return Ok(Action::requeue(delay));
        }
    };
    mctx.drift.track(&target, &outcome.applied).await;

    if deleting && outcome.deleted {
        set_state_metric(ctx, &ns, &name, None);
        event(
            ctx,
            &set,
            EventType::Normal,
            "Deleted",
            "every module was removed from the target".into(),
        )
        .await;
        finalizer::remove(&api, set.as_ref(), labels::MODULESET_FINALIZER).await?;
        return Ok(Action::await_change());
    }

    let state = outcome.state.unwrap_or(State::Ready);
    let ready = outcome
        .modules
        .iter()
        .filter(|m| m.state == State::Ready)
        .count();
    status.summary = Some(format!("{ready}/{} Ready", outcome.modules.len()));
    status.state = Some(state);
    let not_ready: Vec<String> = outcome
        .modules
        .iter()
        .filter(|m| m.state != State::Ready)
        .map(|m| {
            format!(
                "{} is {}{}",
                m.name,
                m.state,
                m.message
                    .as_ref()
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    if not_ready.is_empty() {
        set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::True,
            "ModulesReady",
            "every module is Ready",
            generation,
        );
    } else {
        let reason = match state {
            State::Error => "ModuleError",
            State::Warning => "ModuleWarning",
            State::Deleting => "Deleting",
            _ => "ModulesProcessing",
        };
        set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::False,
            reason,
            not_ready.join("; "),
            generation,
        );
    }
    // Events for state changes of single modules and for version moves.
    for m in &outcome.modules {
        let before = old.modules.iter().find(|o| o.name == m.name);
        if m.state == State::Error
            && before.is_none_or(|b| b.state != State::Error || b.message != m.message)
        {
            event(
                ctx,
                &set,
                EventType::Warning,
                "ModuleError",
                format!("module {}: {}", m.name, m.message.as_deref().unwrap_or("")),
            )
            .await;
        }
        if let Some(shadow) = &m.shadow
            && shadow.result != "Same"
            && before.and_then(|b| b.shadow.as_ref()) != Some(shadow)
        {
            let lines: Vec<&str> = shadow.diff.iter().take(3).map(String::as_str).collect();
            event(
                ctx,
                &set,
                EventType::Normal,
                "ShadowDiff",
                format!(
                    "module {}: shadow {} {}: {}",
                    m.name,
                    shadow.version,
                    shadow.result.to_lowercase(),
                    lines.join("; ")
                ),
            )
            .await;
        }
        if m.state == State::Ready && before.is_some_and(|b| b.state != State::Ready) {
            event(
                ctx,
                &set,
                EventType::Normal,
                "ModuleReady",
                format!(
                    "module {} {} is Ready",
                    m.name,
                    m.version.as_deref().unwrap_or("")
                ),
            )
            .await;
        }
    }
    status.modules = outcome.modules;
    for notice in outcome.notices {
        match notice {
            Notice::DowngradeRefused {
                module,
                offered,
                installed,
            } => {
                let was_warning = old
                    .modules
                    .iter()
                    .any(|m| m.name == module && m.state == State::Warning);
                if !was_warning {
                    event(ctx, &set, EventType::Warning, "DowngradeRefused", format!("module {module}: the channel offers {offered}, lower than the installed {installed}; kept {installed}")).await;
                }
            }
            Notice::Upgraded { module, from, to } => {
                event(
                    ctx,
                    &set,
                    EventType::Normal,
                    "ModuleUpgraded",
                    format!("module {module}: {from} → {to}"),
                )
                .await;
            }
            Notice::Removed { module } => {
                event(
                    ctx,
                    &set,
                    EventType::Normal,
                    "ModuleRemoved",
                    format!("module {module} and its objects were removed"),
                )
                .await;
            }
        }
    }
    write(&api, &name, &old, &status).await?;
    set_state_metric(ctx, &ns, &name, Some(state));
    let mut requeue = outcome.requeue.unwrap_or(RESYNC).min(RESYNC);
    if state == State::Error {
        // Failures are often transient on the target (an admission webhook, a quota): retry
        // with backoff, one log line per distinct failure.
        let message = status.summary.clone().unwrap_or_default();
        requeue = requeue.min(kit::retry_later(ctx, &kit::key(set.as_ref()), &message));
    }
    Ok(Action::requeue(requeue))
}

async fn write(
    api: &Api<ModuleSet>,
    name: &str,
    old: &ModuleSetStatus,
    status: &ModuleSetStatus,
) -> Result<(), ReconcileError> {
    if old != status {
        patch_status(api, name, status, STATUS_FIELDS).await?;
    }
    Ok(())
}

async fn event(
    ctx: &Context,
    set: &ModuleSet,
    type_: EventType,
    reason: &'static str,
    note: String,
) {
    let note = match type_ {
        EventType::Warning => Note::warning(reason, note),
        EventType::Normal => Note::normal(reason, note),
    };
    ctx.events
        .publish(&set.object_ref(&()), "Reconcile", vec![note])
        .await;
}
