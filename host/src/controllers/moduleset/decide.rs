//! What a ModuleSet pass decides, apart from the calls that carry it out: whether to look at
//! the set at all, the status and Events after each outcome (target unreachable, the modules
//! pass failed, the modules pass done, deletion finished), and when to look again. Every
//! function answers from the set, its last status and the outcome alone.

use std::time::Duration;

use crate::controllers::kit::{Note, Requeue};
use crate::crd::EventReason;
use crate::crd::{
    ConditionStatus, ConditionType, ModuleSet, ModuleSetStatus, Reason, ShadowOutcome,
    find_condition, set_condition,
};
use crate::modules::set::Notice;
use crate::modules::{ModuleReport, SetOutcome, State};

// The words of a ModuleSet's conditions.
const READY: ConditionType = ConditionType::Ready;
const TARGET_REACHABLE: ConditionType = ConditionType::TargetReachable;
const CONNECTED: Reason = Reason::Connected;
const TARGET_UNREACHABLE: Reason = Reason::TargetUnreachable;
const RECONCILE_FAILED: Reason = Reason::ReconcileFailed;
const MODULES_READY: Reason = Reason::ModulesReady;
const MODULE_ERROR: Reason = Reason::ModuleError;
const MODULE_WARNING: Reason = Reason::ModuleWarning;
const MODULES_DELETING: Reason = Reason::Deleting;
const MODULES_PROCESSING: Reason = Reason::ModulesProcessing;

/// What to do with a set before looking at its modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Being deleted without our finalizer: nothing of ours is left to clean up.
    Leave,
    /// Live: make sure our finalizer holds it until its modules are removed.
    HoldWithFinalizer,
    /// Being deleted with our finalizer: remove its modules.
    Proceed,
}

pub(crate) fn start(deleting: bool, has_finalizer: bool) -> Start {
    match (deleting, has_finalizer) {
        (true, false) => Start::Leave,
        (false, _) => Start::HoldWithFinalizer,
        (true, true) => Start::Proceed,
    }
}

fn deleting(set: &ModuleSet) -> bool {
    set.metadata.deletion_timestamp.is_some()
}

/// The state while something stands in the way: Error, or Deleting while the set is deleted.
fn stuck(set: &ModuleSet) -> State {
    if deleting(set) {
        State::Deleting
    } else {
        State::Error
    }
}

/// The status a pass starts from: the last one, for this generation.
fn current(set: &ModuleSet, old: &ModuleSetStatus) -> ModuleSetStatus {
    ModuleSetStatus {
        observed_generation: set.metadata.generation,
        ..old.clone()
    }
}

fn condition(
    set: &ModuleSet,
    status: &mut ModuleSetStatus,
    type_: ConditionType,
    ok: bool,
    reason: Reason,
    message: impl Into<String>,
) {
    let truth = if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let generation = set.metadata.generation;
    set_condition(
        &mut status.conditions,
        type_,
        truth,
        reason,
        message,
        generation,
    );
}

/// The target cannot be reached: both conditions say why; a Warning when that is news.
pub(crate) fn target_unreachable(
    set: &ModuleSet,
    old: &ModuleSetStatus,
    message: &str,
) -> (ModuleSetStatus, Vec<Note>) {
    let mut status = current(set, old);
    condition(
        set,
        &mut status,
        TARGET_REACHABLE,
        false,
        TARGET_UNREACHABLE,
        message,
    );
    condition(set, &mut status, READY, false, TARGET_UNREACHABLE, message);
    status.state = Some(stuck(set));
    let notes = if old.conditions != status.conditions {
        vec![Note::warning(EventReason::TargetUnreachable, message)]
    } else {
        Vec::new()
    };
    (status, notes)
}

/// The target answered: the status the modules pass starts from.
pub(crate) fn target_reached(
    set: &ModuleSet,
    old: &ModuleSetStatus,
    kubernetes_version: Option<&str>,
) -> ModuleSetStatus {
    let mut status = current(set, old);
    let message = format!("Kubernetes {}", kubernetes_version.unwrap_or("?"));
    condition(set, &mut status, TARGET_REACHABLE, true, CONNECTED, message);
    status
}

/// The modules pass failed as a whole (the target refused the inventory, say).
pub(crate) fn pass_failed(
    set: &ModuleSet,
    mut status: ModuleSetStatus,
    message: &str,
) -> ModuleSetStatus {
    condition(set, &mut status, READY, false, RECONCILE_FAILED, message);
    status.state = Some(stuck(set));
    status
}

/// Whether the pass removed the last module of a set being deleted: time to let it go.
pub(crate) fn deletion_finished(set: &ModuleSet, outcome: &SetOutcome) -> bool {
    deleting(set) && outcome.deleted
}

/// What to do with a set whose target cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unreached {
    /// An outage or a refusal: report it and retry (it heals by itself or needs a fix).
    Retry,
    /// Being deleted, and the target Secret is gone: wait this much longer for it.
    WaitForSecret(Duration),
    /// Being deleted, the Secret gone for the whole grace period: let the finalizer go.
    Release,
}

/// Whether a set whose target is unreachable (`gone`: its Secret does not exist) may stop
/// waiting for it: only while being deleted, and only after `grace` since the deletion
/// began, so that a Secret rotated or restored meanwhile still gets its modules removed.
pub(crate) fn unreached(
    set: &ModuleSet,
    gone: bool,
    now: jiff::Timestamp,
    grace: Duration,
) -> Unreached {
    let Some(since) = set.metadata.deletion_timestamp.as_ref() else {
        return Unreached::Retry;
    };
    if !gone {
        return Unreached::Retry;
    }
    // A deletion stamped ahead of this host's clock has waited nothing yet.
    let waited = Duration::try_from(now.duration_since(since.0)).unwrap_or_default();
    match grace.checked_sub(waited) {
        Some(left) if !left.is_zero() => Unreached::WaitForSecret(left),
        _ => Unreached::Release,
    }
}

/// The Event of a set let go without its target.
pub(crate) fn released_without_target(message: &str, grace: Duration) -> Note {
    Note::warning(
        EventReason::TargetGone,
        format!(
            "{message} for {}s of deletion (--module-target-gone-grace): finalizer released; objects of its modules on that cluster, if it still exists, are left behind",
            grace.as_secs()
        ),
    )
}

/// The Event of a set whose modules are all removed.
pub(crate) fn deleted() -> Note {
    Note::normal(
        EventReason::Deleted,
        "every module was removed from the target",
    )
}

/// The status after a modules pass, and the Events for what changed since `old`.
pub(crate) fn status_after(
    set: &ModuleSet,
    old: &ModuleSetStatus,
    mut status: ModuleSetStatus,
    outcome: &SetOutcome,
) -> (ModuleSetStatus, Vec<Note>) {
    let state = outcome.state.unwrap_or(State::Ready);
    status.summary = Some(summary(&outcome.modules));
    status.state = Some(state);
    let (ok, reason, message) = readiness(state, &outcome.modules);
    condition(set, &mut status, READY, ok, reason, message);
    let before: Vec<ModuleReport> = old
        .modules
        .iter()
        .chain(&old.mandatory_modules)
        .cloned()
        .collect();
    let mut notes = module_notes(&before, &outcome.modules);
    notes.extend(notice_notes(&before, &outcome.notices));
    let (mandatory, own) = outcome.modules.iter().cloned().partition(|m| m.mandatory);
    status.modules = own;
    status.mandatory_modules = mandatory;
    (status, notes)
}

/// `3/4 Ready`, for `kubectl get`.
pub(crate) fn summary(modules: &[ModuleReport]) -> String {
    let ready = modules.iter().filter(|m| m.state.counts_as_ready()).count();
    format!("{ready}/{} Ready", modules.len())
}

/// The Ready condition: true with every module Ready; else the set's state as the reason
/// and each module that is not Ready in the message.
pub(crate) fn readiness(state: State, modules: &[ModuleReport]) -> (bool, Reason, String) {
    let not_ready: Vec<String> = modules
        .iter()
        .filter(|m| !m.state.counts_as_ready())
        .map(|m| match &m.message {
            Some(message) => format!("{} is {}: {message}", m.name, m.state),
            None => format!("{} is {}", m.name, m.state),
        })
        .collect();
    if not_ready.is_empty() {
        return (true, MODULES_READY, "every module is Ready".into());
    }
    let reason = match state {
        State::Error => MODULE_ERROR,
        State::Warning => MODULE_WARNING,
        State::Deleting => MODULES_DELETING,
        _ => MODULES_PROCESSING,
    };
    (false, reason, not_ready.join("; "))
}

/// Events for modules that changed since the last status: a new or different error, a new
/// shadow comparison that differs or failed, a module that became Ready.
pub(crate) fn module_notes(before: &[ModuleReport], now: &[ModuleReport]) -> Vec<Note> {
    let mut notes = Vec::new();
    for m in now {
        let before = before.iter().find(|o| o.name == m.name);
        if !m.blocked_by.is_empty() && before.is_none_or(|b| b.blocked_by != m.blocked_by) {
            notes.push(Note::warning(
                EventReason::DeletionBlocked,
                format!(
                    "module {}: removal waits for custom resources it did not create: {}; delete them, or set customResourcePolicy: Ignore",
                    m.name,
                    m.blocked_by.join(", ")
                ),
            ));
        }
        if m.state == State::Error
            && before.is_none_or(|b| b.state != State::Error || b.message != m.message)
        {
            let message = m.message.as_deref().unwrap_or("");
            notes.push(Note::warning(
                EventReason::ModuleError,
                format!("module {}: {message}", m.name),
            ));
        }
        if let Some(shadow) = &m.shadow
            && shadow.result != ShadowOutcome::Same
            && before.and_then(|b| b.shadow.as_ref()) != Some(shadow)
        {
            let lines: Vec<&str> = shadow.diff.iter().take(3).map(String::as_str).collect();
            let text = format!(
                "module {}: shadow {} {}: {}",
                m.name,
                shadow.version,
                shadow.result.as_lower(),
                lines.join("; ")
            );
            notes.push(Note::normal(EventReason::ShadowDiff, text));
        }
        if m.state == State::Ready && before.is_some_and(|b| b.state != State::Ready) {
            let version = m.version.as_deref().unwrap_or("");
            let text = format!("module {} {version} is Ready", m.name);
            notes.push(Note::normal(EventReason::ModuleReady, text));
        }
    }
    notes
}

/// Events for the version moves and removals of the pass; a refused downgrade only when the
/// module was not already held back (Warning) before.
pub(crate) fn notice_notes(before: &[ModuleReport], notices: &[Notice]) -> Vec<Note> {
    let was_warning = |module: &str| {
        before
            .iter()
            .any(|m| m.name == module && m.state == State::Warning)
    };
    notices
        .iter()
        .filter_map(|notice| match notice {
            Notice::DowngradeRefused {
                module,
                offered,
                installed,
            } => (!was_warning(module)).then(|| {
                Note::warning(EventReason::DowngradeRefused,
                    format!("module {module}: the channel offers {offered}, lower than the installed {installed}; kept {installed}"),
                )
            }),
            Notice::Upgraded { module, from, to } => Some(Note::normal(EventReason::ModuleUpgraded,
                format!("module {module}: {from} → {to}"),
            )),
            Notice::Removed { module } => Some(Note::normal(EventReason::ModuleRemoved,
                format!("module {module} and its objects were removed"),
            )),
        })
        .collect()
}

/// The shortest time a module asked for, at most `resync` (`--requeue-modules`, the drift
/// safety net); with a module in Error, sooner
/// if the set's backoff says so, counting this as one more failure: failures on the target
/// are often transient (an admission webhook, a quota).
pub(crate) fn next_requeue(
    requested: Option<Duration>,
    resync: Duration,
    status: &ModuleSetStatus,
) -> Requeue {
    let after = requested.unwrap_or(resync).min(resync);
    if status.state != Some(State::Error) {
        return Requeue::After(after);
    }
    // The Ready condition names each failing module and why: that is the failure.
    let failure = find_condition(&status.conditions, READY)
        .map(|c| c.message.clone())
        .or_else(|| status.summary.clone())
        .unwrap_or_default();
    Requeue::Backoff {
        failure,
        at_most: Some(after),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::modules::set::ModuleShadow;

    const RESYNC: Duration = Duration::from_secs(600);

    fn set(deleting: bool) -> ModuleSet {
        let mut metadata = json!({"name": "main", "namespace": "team", "generation": 3});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": metadata,
            "spec": {},
        }))
        .expect("a valid ModuleSet")
    }

    fn module(name: &str, state: State, message: Option<&str>) -> ModuleReport {
        ModuleReport {
            name: name.into(),
            channel: None,
            version: Some("1.0.0".into()),
            pinned: false,
            mandatory: false,
            pending_upgrade: None,
            channel_version: None,
            digest: None,
            state,
            message: message.map(Into::into),
            objects: 0,
            blocked_by: Vec::new(),
            shadow: None,
        }
    }

    fn outcome(state: State, modules: Vec<ModuleReport>) -> SetOutcome {
        SetOutcome {
            state: Some(state),
            modules,
            ..SetOutcome::default()
        }
    }

    fn ready_condition(status: &ModuleSetStatus) -> (ConditionStatus, &str, &str) {
        let c = status
            .conditions
            .iter()
            .find(|c| c.is(READY))
            .expect("a Ready condition");
        (c.status, c.reason.as_str(), c.message.as_str())
    }

    fn reasons(notes: &[Note]) -> Vec<&str> {
        notes.iter().map(|n| n.reason.as_str()).collect()
    }

    fn shadow(result: ShadowOutcome) -> ModuleShadow {
        ModuleShadow {
            version: "1.1.0".into(),
            digest: "sha256:1".into(),
            result,
            diff: vec!["ConfigMap a/b.data.x".into()],
        }
    }

    #[test]
    fn a_set_being_deleted_without_our_finalizer_is_left_alone() {
        assert_eq!(start(true, false), Start::Leave);
    }

    #[test]
    fn a_live_set_is_held_with_our_finalizer() {
        assert_eq!(start(false, false), Start::HoldWithFinalizer);
        assert_eq!(start(false, true), Start::HoldWithFinalizer);
    }

    #[test]
    fn a_set_being_deleted_with_our_finalizer_has_its_modules_removed() {
        assert_eq!(start(true, true), Start::Proceed);
    }

    #[test]
    fn an_unreachable_target_fails_both_conditions_and_the_set() {
        let (status, _) = target_unreachable(&set(false), &ModuleSetStatus::default(), "gone");
        assert_eq!(status.state, Some(State::Error));
        assert_eq!(status.observed_generation, Some(3));
        for c in &status.conditions {
            assert_eq!(
                (c.status, c.reason.as_str(), c.message.as_str()),
                (ConditionStatus::False, TARGET_UNREACHABLE.as_str(), "gone"),
                "{}",
                c.type_
            );
        }
        assert_eq!(status.conditions.len(), 2);
    }

    #[test]
    fn an_unreachable_target_leaves_a_set_being_deleted_deleting() {
        let (status, _) = target_unreachable(&set(true), &ModuleSetStatus::default(), "gone");
        assert_eq!(status.state, Some(State::Deleting));
    }

    #[test]
    fn an_unreachable_target_is_announced_once() {
        let (first, notes) = target_unreachable(&set(false), &ModuleSetStatus::default(), "gone");
        assert_eq!(
            notes,
            [Note::warning(EventReason::TargetUnreachable, "gone")]
        );
        let (_, again) = target_unreachable(&set(false), &first, "gone");
        assert!(again.is_empty());
    }

    #[test]
    fn an_unreachable_target_for_another_reason_is_announced_again() {
        let (first, _) = target_unreachable(&set(false), &ModuleSetStatus::default(), "gone");
        let (_, notes) = target_unreachable(&set(false), &first, "refused");
        assert_eq!(
            notes,
            [Note::warning(EventReason::TargetUnreachable, "refused")]
        );
    }

    #[test]
    fn a_reached_target_names_its_kubernetes_version() {
        let status = target_reached(&set(false), &ModuleSetStatus::default(), Some("v1.31.2"));
        let c = &status.conditions[0];
        assert_eq!(
            (
                c.type_.as_str(),
                c.status,
                c.reason.as_str(),
                c.message.as_str()
            ),
            (
                TARGET_REACHABLE.as_str(),
                ConditionStatus::True,
                CONNECTED.as_str(),
                "Kubernetes v1.31.2"
            )
        );
    }

    #[test]
    fn a_reached_target_of_unknown_version_says_so() {
        let status = target_reached(&set(false), &ModuleSetStatus::default(), None);
        assert_eq!(status.conditions[0].message, "Kubernetes ?");
    }

    #[test]
    fn a_failed_modules_pass_is_not_ready_and_error() {
        let status = pass_failed(&set(false), ModuleSetStatus::default(), "inventory refused");
        assert_eq!(status.state, Some(State::Error));
        assert_eq!(
            ready_condition(&status),
            (
                ConditionStatus::False,
                RECONCILE_FAILED.as_str(),
                "inventory refused"
            )
        );
    }

    #[test]
    fn a_failed_modules_pass_leaves_a_set_being_deleted_deleting() {
        let status = pass_failed(&set(true), ModuleSetStatus::default(), "x");
        assert_eq!(status.state, Some(State::Deleting));
    }

    #[test]
    fn deletion_finishes_once_a_set_being_deleted_has_nothing_left() {
        let done = SetOutcome {
            deleted: true,
            ..SetOutcome::default()
        };
        assert!(deletion_finished(&set(true), &done));
        assert!(!deletion_finished(&set(true), &SetOutcome::default()));
        assert!(!deletion_finished(&set(false), &done));
    }

    #[test]
    fn every_module_ready_makes_the_set_ready() {
        let modules = vec![
            module("a", State::Ready, None),
            module("b", State::Ready, None),
        ];
        let (status, _) = status_after(
            &set(false),
            &ModuleSetStatus::default(),
            ModuleSetStatus::default(),
            &outcome(State::Ready, modules.clone()),
        );
        assert_eq!(status.state, Some(State::Ready));
        assert_eq!(status.summary.as_deref(), Some("2/2 Ready"));
        assert_eq!(status.modules, modules);
        assert_eq!(
            ready_condition(&status),
            (
                ConditionStatus::True,
                MODULES_READY.as_str(),
                "every module is Ready"
            )
        );
    }

    #[test]
    fn an_outcome_without_a_state_counts_as_ready() {
        let none = SetOutcome::default();
        let (status, _) = status_after(
            &set(false),
            &ModuleSetStatus::default(),
            ModuleSetStatus::default(),
            &none,
        );
        assert_eq!(status.state, Some(State::Ready));
        assert_eq!(status.summary.as_deref(), Some("0/0 Ready"));
    }

    #[test]
    fn the_summary_counts_ready_modules() {
        let modules = [
            module("a", State::Ready, None),
            module("b", State::Warning, None),
            module("c", State::Ready, None),
        ];
        assert_eq!(summary(&modules), "2/3 Ready");
    }

    #[test]
    fn modules_not_ready_are_named_in_the_ready_condition() {
        let modules = [
            module("a", State::Ready, None),
            module("b", State::Error, Some("boom")),
            module("c", State::Processing, None),
        ];
        let (ok, reason, message) = readiness(State::Error, &modules);
        assert!(!ok);
        assert_eq!(reason, MODULE_ERROR);
        assert_eq!(message, "b is Error: boom; c is Processing");
    }

    #[test]
    fn the_ready_reason_follows_the_sets_state() {
        let waiting = [module("a", State::Processing, None)];
        let reason = |state| readiness(state, &waiting).1;
        assert_eq!(reason(State::Warning), MODULE_WARNING);
        assert_eq!(reason(State::Deleting), MODULES_DELETING);
        assert_eq!(reason(State::Processing), MODULES_PROCESSING);
    }

    #[test]
    fn a_new_module_error_is_announced() {
        let now = [module("a", State::Error, Some("boom"))];
        let notes = module_notes(&[module("a", State::Ready, None)], &now);
        assert_eq!(
            notes,
            [Note::warning(EventReason::ModuleError, "module a: boom")]
        );
    }

    #[test]
    fn the_same_module_error_is_announced_once() {
        let now = [module("a", State::Error, Some("boom"))];
        assert!(module_notes(&now, &now).is_empty());
    }

    #[test]
    fn a_different_error_of_the_same_module_is_announced() {
        let before = [module("a", State::Error, Some("boom"))];
        let now = [module("a", State::Error, Some("bang"))];
        assert_eq!(reasons(&module_notes(&before, &now)), ["ModuleError"]);
    }

    #[test]
    fn a_module_becoming_ready_is_announced() {
        let before = [module("a", State::Processing, None)];
        let now = [module("a", State::Ready, None)];
        assert_eq!(
            module_notes(&before, &now),
            [Note::normal(
                EventReason::ModuleReady,
                "module a 1.0.0 is Ready"
            )]
        );
    }

    #[test]
    fn a_module_ready_from_its_first_pass_is_not_announced() {
        assert!(module_notes(&[], &[module("a", State::Ready, None)]).is_empty());
    }

    #[test]
    fn a_shadow_that_differs_is_announced_once() {
        let mut now = module("a", State::Processing, None);
        now.shadow = Some(shadow(ShadowOutcome::Differs));
        let notes = module_notes(&[], std::slice::from_ref(&now));
        assert_eq!(
            notes,
            [Note::normal(
                EventReason::ShadowDiff,
                "module a: shadow 1.1.0 differs: ConfigMap a/b.data.x"
            )]
        );
        assert!(module_notes(std::slice::from_ref(&now), &[now.clone()]).is_empty());
    }

    #[test]
    fn a_shadow_that_renders_the_same_is_not_announced() {
        let mut now = module("a", State::Processing, None);
        now.shadow = Some(shadow(ShadowOutcome::Same));
        assert!(module_notes(&[], &[now]).is_empty());
    }

    fn refused(module: &str) -> Notice {
        Notice::DowngradeRefused {
            module: module.into(),
            offered: "1.0.0".into(),
            installed: "1.1.0".into(),
        }
    }

    #[test]
    fn a_refused_downgrade_is_announced_when_the_module_was_not_held_back() {
        let before = [module("a", State::Ready, None)];
        assert_eq!(
            notice_notes(&before, &[refused("a")]),
            [Note::warning(
                EventReason::DowngradeRefused,
                "module a: the channel offers 1.0.0, lower than the installed 1.1.0; kept 1.1.0"
            )]
        );
    }

    #[test]
    fn a_refused_downgrade_of_a_module_already_held_back_is_not_announced_again() {
        let before = [module("a", State::Warning, None)];
        assert!(notice_notes(&before, &[refused("a")]).is_empty());
    }

    #[test]
    fn upgrades_and_removals_are_announced_in_order() {
        let notices = [
            Notice::Upgraded {
                module: "a".into(),
                from: "1.0.0".into(),
                to: "1.1.0".into(),
            },
            Notice::Removed { module: "b".into() },
        ];
        assert_eq!(
            notice_notes(&[], &notices),
            [
                Note::normal(EventReason::ModuleUpgraded, "module a: 1.0.0 → 1.1.0"),
                Note::normal(
                    EventReason::ModuleRemoved,
                    "module b and its objects were removed"
                ),
            ]
        );
    }

    #[test]
    fn module_events_come_before_version_events() {
        let mut o = outcome(State::Error, vec![module("a", State::Error, Some("x"))]);
        o.notices = vec![Notice::Removed { module: "b".into() }];
        let old = ModuleSetStatus::default();
        let (_, notes) = status_after(&set(false), &old, old.clone(), &o);
        assert_eq!(reasons(&notes), ["ModuleError", "ModuleRemoved"]);
    }

    fn with_state(state: State, summary: &str) -> ModuleSetStatus {
        ModuleSetStatus {
            state: Some(state),
            summary: Some(summary.into()),
            ..ModuleSetStatus::default()
        }
    }

    #[test]
    fn a_settled_set_is_looked_at_again_after_the_resync() {
        let requeue = next_requeue(None, RESYNC, &with_state(State::Ready, "1/1 Ready"));
        assert_eq!(requeue, Requeue::After(RESYNC));
    }

    #[test]
    fn a_module_asking_to_be_looked_at_sooner_is() {
        let requeue = next_requeue(
            Some(Duration::from_secs(5)),
            RESYNC,
            &with_state(State::Processing, "0/1 Ready"),
        );
        assert_eq!(requeue, Requeue::After(Duration::from_secs(5)));
    }

    #[test]
    fn a_module_asking_for_more_than_the_resync_gets_the_resync() {
        let requeue = next_requeue(
            Some(RESYNC * 2),
            RESYNC,
            &with_state(State::Warning, "0/1 Ready"),
        );
        assert_eq!(requeue, Requeue::After(RESYNC));
    }

    #[test]
    fn a_set_in_error_backs_off_as_a_failure_named_by_its_ready_message() {
        let mut status = with_state(State::Error, "1/2 Ready");
        let backoff = |failure: &str| Requeue::Backoff {
            failure: failure.into(),
            at_most: Some(RESYNC),
        };
        assert_eq!(next_requeue(None, RESYNC, &status), backoff("1/2 Ready"));
        condition(
            &set(false),
            &mut status,
            READY,
            false,
            MODULE_ERROR,
            "page is Error: HTTP 500",
        );
        assert_eq!(
            next_requeue(None, RESYNC, &status),
            backoff("page is Error: HTTP 500")
        );
    }

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn a_gone_target_is_waited_for_only_while_deleting_and_only_for_the_grace() {
        let grace = Duration::from_secs(600);
        let now: jiff::Timestamp = "2026-11-24T12:10:00Z".parse().unwrap();
        assert_eq!(unreached(&set(false), true, now, grace), Unreached::Retry);
        let deleting = |at: &str| {
            let mut s = set(true);
            s.metadata.deletion_timestamp = Some(Time(at.parse().unwrap()));
            s
        };
        let four_minutes = deleting("2026-11-24T12:06:00Z");
        assert_eq!(
            unreached(&four_minutes, false, now, grace),
            Unreached::Retry
        );
        assert_eq!(
            unreached(&four_minutes, true, now, grace),
            Unreached::WaitForSecret(Duration::from_secs(360))
        );
        assert_eq!(
            unreached(&deleting("2026-11-24T12:00:00Z"), true, now, grace),
            Unreached::Release
        );
        let ahead = deleting("2026-11-24T12:20:00Z");
        assert_eq!(
            unreached(&ahead, true, now, grace),
            Unreached::WaitForSecret(grace)
        );
    }
}
