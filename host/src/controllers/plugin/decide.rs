//! The Plugin controller's decisions over what one pass resolved: what each channel runs
//! (a channel whose version failed keeps its last good one), the summary, the conditions
//! and when to come back. Pure; `reconcile.rs` publishes and writes what these decide.
//!
//! Every condition type and reason the controller writes is spelled here.

use std::collections::BTreeMap;
use std::time::Duration;

use super::versions::Runnable;
use crate::controllers::kit::{Note, Requeue};
use crate::crd::EventReason;
use crate::crd::{
    ChannelStatus, Condition, ConditionStatus, ConditionType, GrantStatus, PluginChannel,
    PluginSpec, PluginStatus, Reason, ResolvedVersion, set_condition,
};
use crate::grants::Grants;
use crate::plugins::ChannelEntry;

/// A condition to set: type, status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) type_: ConditionType,
    pub(crate) status: ConditionStatus,
    pub(crate) reason: Reason,
    pub(crate) message: String,
}

impl Verdict {
    pub(crate) fn set(self, conditions: &mut Vec<Condition>, generation: Option<i64>) {
        set_condition(
            conditions,
            self.type_,
            self.status,
            self.reason,
            self.message,
            generation,
        );
    }
}

/// What one channel runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Channel<R> {
    pub(crate) current: R,
    pub(crate) shadow: Option<R>,
    pub(crate) allow_downgrade: bool,
}

/// What every channel runs, and what the status says about it.
#[derive(Debug, PartialEq)]
pub(crate) struct ChannelPlan<R> {
    /// Channels with something to run.
    pub(crate) runs: BTreeMap<String, Channel<R>>,
    /// Channels with nothing to run, and why.
    pub(crate) errors: BTreeMap<String, String>,
    pub(crate) statuses: Vec<ChannelStatus>,
    /// `channel <name>: <why>` for every channel that is not as specified.
    pub(crate) problems: Vec<String>,
}

/// Plan every channel of the spec over the versions that loaded this pass (`versions`),
/// what each channel ran before (`kept`) and why versions failed (`version_status`).
pub(crate) fn channel_plan<R: Runnable>(
    channels: &[PluginChannel],
    versions: &BTreeMap<String, R>,
    kept: &BTreeMap<String, R>,
    version_status: &[ResolvedVersion],
) -> ChannelPlan<R> {
    let mut plan = ChannelPlan {
        runs: BTreeMap::new(),
        errors: BTreeMap::new(),
        statuses: Vec::new(),
        problems: Vec::new(),
    };
    for c in channels {
        let (status, run) = plan_channel(c, versions, kept.get(&c.name), version_status);
        if let Some(message) = &status.message {
            plan.problems.push(format!("channel {}: {message}", c.name));
        }
        match run {
            Some(run) => {
                plan.runs.insert(c.name.clone(), run);
            }
            None => {
                let why = status.message.clone().unwrap_or_default();
                plan.errors.insert(c.name.clone(), why);
            }
        }
        plan.statuses.push(status);
    }
    plan
}

/// One channel: its version if it loaded, else what it ran before (a broken release never
/// takes running Runtimes down with it); its shadow only if that loaded.
fn plan_channel<R: Runnable>(
    c: &PluginChannel,
    versions: &BTreeMap<String, R>,
    kept: Option<&R>,
    version_status: &[ResolvedVersion],
) -> (ChannelStatus, Option<Channel<R>>) {
    let mut messages = Vec::new();
    let current = match versions.get(&c.version) {
        Some(r) => Some(r.clone()),
        None => {
            let err = version_error(version_status, &c.version);
            messages.push(match kept {
                Some(k) => format!(
                    "version {} unusable, still running {}: {err}",
                    c.version,
                    k.version()
                ),
                None => format!("version {}: {err}", c.version),
            });
            kept.cloned()
        }
    };
    let shadow = c.shadow.as_ref().and_then(|v| {
        let loaded = versions.get(v).cloned();
        if loaded.is_none() {
            let err = version_error(version_status, v);
            messages.push(format!("shadow version {v}: {err}"));
        }
        loaded
    });
    let status = ChannelStatus {
        name: c.name.clone(),
        version: c.version.clone(),
        shadow_version: c.shadow.clone(),
        ready: current.as_ref().is_some_and(|r| r.version() == c.version)
            && (c.shadow.is_none() || shadow.is_some()),
        component_digest: current.as_ref().map(|r| r.component_digest().to_string()),
        shadow_digest: shadow.as_ref().map(|r| r.component_digest().to_string()),
        message: (!messages.is_empty()).then(|| messages.join("; ")),
    };
    let run = current.map(|current| Channel {
        current,
        shadow,
        allow_downgrade: c.allow_downgrade,
    });
    (status, run)
}

/// Why `version` did not load, as its status line says.
fn version_error(version_status: &[ResolvedVersion], version: &str) -> String {
    version_status
        .iter()
        .find(|s| s.version == version)
        .and_then(|s| s.error.clone())
        .unwrap_or_else(|| format!("version {version} did not load"))
}

/// `stable=1.2.0 canary=1.3.0!(shadow 1.4.0)`: `!` marks a channel not running as specified.
pub(crate) fn summary(channels: &[ChannelStatus]) -> String {
    channels
        .iter()
        .map(|c| {
            let mark = if c.ready { "" } else { "!" };
            match &c.shadow_version {
                Some(s) => format!("{}={}{mark}(shadow {s})", c.name, c.version),
                None => format!("{}={}{mark}", c.name, c.version),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the versions channels run request, against `spec.grants`.
pub(crate) fn grant_status(
    spec: &PluginSpec,
    channels: &BTreeMap<String, ChannelEntry>,
) -> GrantStatus {
    let mut requested = Grants::default();
    for entry in channels.values() {
        let runs = std::iter::once(&entry.current).chain(entry.shadow.as_ref());
        for resolved in runs {
            if let Some(r) = resolved.loaded.requests() {
                requested.write.extend(r.grants.write.iter().cloned());
                requested.read.extend(r.grants.read.iter().cloned());
                requested
                    .shoot_paths
                    .extend(r.grants.shoot_paths.iter().cloned());
            }
        }
    }
    requested.write.dedup();
    requested.read.dedup();
    requested.shoot_paths.sort();
    requested.shoot_paths.dedup();
    let granted = spec.grants.clone().unwrap_or_default();
    GrantStatus {
        not_granted: granted.missing(&requested),
        requested: (!requested.is_empty()).then_some(requested),
    }
}

/// `Granted`: whether `spec.grants` covers what the running versions request. A plugin
/// granted less still runs; it fails where it needs what it lacks.
pub(crate) fn granted_condition(grants: &GrantStatus) -> Verdict {
    if grants.not_granted.is_empty() {
        Verdict {
            type_: ConditionType::Granted,
            status: ConditionStatus::True,
            reason: Reason::AsRequested,
            message: "spec.grants covers what the plugin requests".to_string(),
        }
    } else {
        Verdict {
            type_: ConditionType::Granted,
            status: ConditionStatus::False,
            reason: Reason::NotGranted,
            message: format!(
                "the plugin requests more than spec.grants grants (it fails where it needs them): {}",
                grants.not_granted.join("; ")
            ),
        }
    }
}

/// The `Ready` reason of a Plugin whose every version resolved and loaded.
const RESOLVED: Reason = Reason::Resolved;

/// `Ready`: false while a channel does not run as specified; true with errors while some
/// version failed that no channel needs to run; else resolved.
pub(crate) fn ready_condition(
    channels: &[ChannelStatus],
    versions: &[ResolvedVersion],
    problems: &[String],
) -> Verdict {
    let version_problems: Vec<String> = versions
        .iter()
        .filter_map(|v| Some(format!("version {}: {}", v.version, v.error.as_ref()?)))
        .collect();
    let (status, reason, message) = if !channels.iter().all(|c| c.ready) {
        (
            ConditionStatus::False,
            Reason::ChannelUnavailable,
            problems.join("; "),
        )
    } else if !version_problems.is_empty() {
        (
            ConditionStatus::True,
            Reason::ResolvedWithErrors,
            version_problems.join("; "),
        )
    } else {
        (
            ConditionStatus::True,
            RESOLVED,
            "every channel runs its version".to_string(),
        )
    };
    Verdict {
        type_: ConditionType::Ready,
        status,
        reason,
        message,
    }
}

/// `Ready` for a spec that cannot be acted on at all.
pub(crate) fn invalid_spec_condition(message: String) -> Verdict {
    Verdict {
        type_: ConditionType::Ready,
        status: ConditionStatus::False,
        reason: Reason::InvalidSpec,
        message,
    }
}

/// `status.lastError`: the `Ready` message unless everything resolved.
pub(crate) fn last_error(ready: &Verdict) -> Option<String> {
    (ready.reason != RESOLVED).then(|| ready.message.clone())
}

/// A warning Event when the last error changed to a new one (not when it cleared).
pub(crate) fn error_note(old: Option<&str>, new: Option<&str>) -> Option<Note> {
    let new = new?;
    (old != Some(new)).then(|| Note::warning(EventReason::PluginError, new.to_string()))
}

/// `ConfigAccepted`: whether a render refused `spec.config` as it is now. The Runtimes
/// using the plugin wait (they are not at fault); the Plugin is where the fix goes. A
/// warning Event goes out when the refusal is new or says something new.
pub(crate) fn config_condition(
    old: &PluginStatus,
    refused: Option<&str>,
) -> (Verdict, Option<Note>) {
    let verdict = match refused {
        Some(why) => Verdict {
            type_: ConditionType::ConfigAccepted,
            status: ConditionStatus::False,
            reason: Reason::InvalidConfig,
            message: format!(
                "a render refused spec.config; Runtimes using this plugin wait until it changes: {why}"
            ),
        },
        None => Verdict {
            type_: ConditionType::ConfigAccepted,
            status: ConditionStatus::True,
            reason: Reason::NotRefused,
            message: "no render refused spec.config".to_string(),
        },
    };
    let was = old.conditions.iter().find(|c| c.is(verdict.type_));
    let note = (refused.is_some() && was.is_none_or(|c| c.message != verdict.message))
        .then(|| Note::warning(EventReason::InvalidConfig, verdict.message.clone()));
    (verdict, note)
}

/// When to reconcile a Plugin again: right away when pinned digests were served from the
/// store unchecked (re-resolve the tags); backing off, as for `failure`, when something
/// failed; after the `resync` period when all is well.
pub(crate) fn next_requeue(
    deferred: bool,
    transient: bool,
    ready: &Verdict,
    failure: &str,
    resync: Duration,
) -> Requeue {
    if deferred {
        Requeue::After(Duration::from_millis(500))
    } else if transient || ready.reason != RESOLVED {
        Requeue::Backoff {
            failure: failure.to_string(),
            at_most: None,
        }
    } else {
        Requeue::After(resync)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::plugin::versions::tests::Ran;

    fn channel(name: &str, version: &str, shadow: Option<&str>) -> PluginChannel {
        PluginChannel {
            name: name.into(),
            version: version.into(),
            shadow: shadow.map(str::to_string),
            allow_downgrade: false,
        }
    }

    fn loaded(versions: &[&str]) -> BTreeMap<String, Ran> {
        versions
            .iter()
            .map(|v| (v.to_string(), Ran::new(v)))
            .collect()
    }

    fn failed(version: &str, error: &str) -> ResolvedVersion {
        ResolvedVersion {
            version: version.into(),
            error: Some(error.into()),
            ..Default::default()
        }
    }

    fn ready_channel(name: &str, version: &str) -> ChannelStatus {
        ChannelStatus {
            name: name.into(),
            version: version.into(),
            ready: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_channel_runs_its_version_once_it_loaded() {
        let plan = channel_plan(
            &[channel("stable", "1.0.0", None)],
            &loaded(&["1.0.0"]),
            &BTreeMap::new(),
            &[],
        );
        assert_eq!(plan.runs["stable"].current, Ran::new("1.0.0"));
        let status = &plan.statuses[0];
        assert!(status.ready);
        assert_eq!(status.component_digest.as_deref(), Some("sha256:c-1.0.0"));
        assert_eq!(status.message, None);
        assert!(plan.problems.is_empty() && plan.errors.is_empty());
    }

    #[test]
    fn a_channel_whose_version_failed_keeps_its_last_good_version() {
        let kept = BTreeMap::from([("stable".to_string(), Ran::new("1.0.0"))]);
        let plan = channel_plan(
            &[channel("stable", "1.1.0", None)],
            &loaded(&[]),
            &kept,
            &[failed("1.1.0", "signature verification failed: no key")],
        );
        assert_eq!(plan.runs["stable"].current, Ran::new("1.0.0"));
        let status = &plan.statuses[0];
        assert!(!status.ready, "it does not run the version it names");
        assert_eq!(status.component_digest.as_deref(), Some("sha256:c-1.0.0"));
        assert_eq!(
            status.message.as_deref(),
            Some(
                "version 1.1.0 unusable, still running 1.0.0: signature verification failed: no key"
            )
        );
        assert_eq!(
            plan.problems,
            [
                "channel stable: version 1.1.0 unusable, still running 1.0.0: signature verification failed: no key"
            ]
        );
        assert!(plan.errors.is_empty());
    }

    #[test]
    fn a_channel_that_never_ran_a_version_is_an_error() {
        let plan = channel_plan(
            &[channel("stable", "1.1.0", None)],
            &loaded(&[]),
            &BTreeMap::new(),
            &[failed("1.1.0", "manifest unknown")],
        );
        assert!(plan.runs.is_empty());
        assert_eq!(plan.errors["stable"], "version 1.1.0: manifest unknown");
        assert_eq!(plan.statuses[0].component_digest, None);
    }

    #[test]
    fn a_version_without_a_recorded_error_did_not_load() {
        let plan = channel_plan(
            &[channel("stable", "1.1.0", None)],
            &loaded(&[]),
            &BTreeMap::new(),
            &[],
        );
        assert_eq!(
            plan.errors["stable"],
            "version 1.1.0: version 1.1.0 did not load"
        );
    }

    #[test]
    fn a_failed_shadow_keeps_the_channel_running_but_not_ready() {
        let plan = channel_plan(
            &[channel("canary", "1.0.0", Some("2.0.0"))],
            &loaded(&["1.0.0"]),
            &BTreeMap::new(),
            &[failed("2.0.0", "compile error")],
        );
        let run = &plan.runs["canary"];
        assert_eq!(run.current, Ran::new("1.0.0"));
        assert_eq!(run.shadow, None);
        let status = &plan.statuses[0];
        assert!(!status.ready);
        assert_eq!(status.shadow_digest, None);
        assert_eq!(
            status.message.as_deref(),
            Some("shadow version 2.0.0: compile error")
        );
    }

    #[test]
    fn a_loaded_shadow_runs_beside_the_channel() {
        let plan = channel_plan(
            &[channel("canary", "1.0.0", Some("2.0.0"))],
            &loaded(&["1.0.0", "2.0.0"]),
            &BTreeMap::new(),
            &[],
        );
        assert_eq!(plan.runs["canary"].shadow, Some(Ran::new("2.0.0")));
        assert!(plan.statuses[0].ready);
        assert_eq!(
            plan.statuses[0].shadow_digest.as_deref(),
            Some("sha256:c-2.0.0")
        );
    }

    #[test]
    fn the_summary_marks_channels_not_running_as_specified() {
        let mut canary = ready_channel("canary", "1.1.0");
        canary.ready = false;
        canary.shadow_version = Some("2.0.0".into());
        let line = summary(&[ready_channel("stable", "1.0.0"), canary]);
        assert_eq!(line, "stable=1.0.0 canary=1.1.0!(shadow 2.0.0)");
    }

    #[test]
    fn ready_is_false_while_a_channel_is_unavailable() {
        let mut stable = ready_channel("stable", "1.1.0");
        stable.ready = false;
        let problems = ["channel stable: version 1.1.0: gone".to_string()];
        let ready = ready_condition(&[stable], &[failed("1.1.0", "gone")], &problems);
        assert_eq!(ready.type_, ConditionType::Ready);
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, Reason::ChannelUnavailable);
        assert_eq!(ready.message, "channel stable: version 1.1.0: gone");
    }

    #[test]
    fn ready_with_errors_when_only_unused_versions_failed() {
        let ready = ready_condition(
            &[ready_channel("stable", "1.0.0")],
            &[failed("0.9.0", "manifest unknown")],
            &[],
        );
        assert_eq!(ready.status, ConditionStatus::True);
        assert_eq!(ready.reason, Reason::ResolvedWithErrors);
        assert_eq!(ready.message, "version 0.9.0: manifest unknown");
        assert_eq!(
            last_error(&ready).as_deref(),
            Some("version 0.9.0: manifest unknown")
        );
    }

    #[test]
    fn ready_and_resolved_when_everything_loaded() {
        let ready = ready_condition(&[ready_channel("stable", "1.0.0")], &[], &[]);
        assert_eq!(ready.status, ConditionStatus::True);
        assert_eq!(ready.reason, Reason::Resolved);
        assert_eq!(ready.message, "every channel runs its version");
        assert_eq!(last_error(&ready), None);
    }

    #[test]
    fn an_invalid_spec_is_not_ready() {
        let ready = invalid_spec_condition("spec.kind: bad".into());
        assert_eq!(
            (ready.type_, ready.status, ready.reason),
            (
                ConditionType::Ready,
                ConditionStatus::False,
                Reason::InvalidSpec
            )
        );
        assert_eq!(last_error(&ready).as_deref(), Some("spec.kind: bad"));
    }

    #[test]
    fn granted_when_spec_grants_cover_the_requests() {
        let granted = granted_condition(&GrantStatus::default());
        assert_eq!(
            (granted.type_, granted.status, granted.reason),
            (
                ConditionType::Granted,
                ConditionStatus::True,
                Reason::AsRequested
            )
        );
    }

    #[test]
    fn not_granted_names_what_is_missing() {
        let grants = GrantStatus {
            not_granted: vec!["spec.provider.workers".into(), "write ConfigMap".into()],
            ..Default::default()
        };
        let granted = granted_condition(&grants);
        assert_eq!(granted.status, ConditionStatus::False);
        assert_eq!(granted.reason, Reason::NotGranted);
        assert!(
            granted
                .message
                .ends_with(": spec.provider.workers; write ConfigMap"),
            "{}",
            granted.message
        );
    }

    #[test]
    fn a_new_error_is_an_event_but_a_repeated_or_cleared_one_is_not() {
        let note = error_note(None, Some("boom")).expect("new error");
        assert!(note.warning);
        assert_eq!(
            (note.reason, note.text.as_str()),
            (EventReason::PluginError, "boom")
        );
        assert_eq!(error_note(Some("boom"), Some("boom")), None);
        assert_eq!(error_note(Some("boom"), None), None);
        assert!(error_note(Some("boom"), Some("bang")).is_some());
    }

    fn with_config_condition(message: &str) -> PluginStatus {
        let mut status = PluginStatus::default();
        set_condition(
            &mut status.conditions,
            ConditionType::ConfigAccepted,
            ConditionStatus::False,
            Reason::InvalidConfig,
            message,
            None,
        );
        status
    }

    #[test]
    fn a_refused_config_is_invalid_config_with_a_warning() {
        let (verdict, note) = config_condition(&PluginStatus::default(), Some("missing key x"));
        assert_eq!(
            (verdict.type_, verdict.status, verdict.reason),
            (
                ConditionType::ConfigAccepted,
                ConditionStatus::False,
                Reason::InvalidConfig
            )
        );
        assert_eq!(
            verdict.message,
            "a render refused spec.config; Runtimes using this plugin wait until it changes: missing key x"
        );
        let note = note.expect("a warning Event");
        assert_eq!(
            (note.warning, note.reason),
            (true, EventReason::InvalidConfig)
        );
    }

    #[test]
    fn the_same_refusal_again_publishes_no_event() {
        let (first, _) = config_condition(&PluginStatus::default(), Some("missing key x"));
        let old = with_config_condition(&first.message);
        let (_, note) = config_condition(&old, Some("missing key x"));
        assert_eq!(note, None);
    }

    #[test]
    fn an_accepted_config_is_not_refused() {
        let old = with_config_condition("refused before");
        let (verdict, note) = config_condition(&old, None);
        assert_eq!(
            (verdict.status, verdict.reason),
            (ConditionStatus::True, Reason::NotRefused)
        );
        assert_eq!(note, None);
    }

    fn resolved() -> Verdict {
        ready_condition(&[], &[], &[])
    }

    const RESYNC: Duration = Duration::from_secs(60);

    fn backoff(failure: &str) -> Requeue {
        Requeue::Backoff {
            failure: failure.into(),
            at_most: None,
        }
    }

    #[test]
    fn a_pass_served_from_the_store_comes_back_in_half_a_second() {
        assert_eq!(
            next_requeue(true, true, &resolved(), "", RESYNC),
            Requeue::After(Duration::from_millis(500))
        );
    }

    #[test]
    fn a_transient_failure_backs_off_as_that_failure() {
        let requeue = next_requeue(false, true, &resolved(), "registry down", RESYNC);
        assert_eq!(requeue, backoff("registry down"));
    }

    #[test]
    fn a_plugin_not_fully_resolved_backs_off() {
        let with_errors = ready_condition(&[], &[failed("0.9.0", "gone")], &[]);
        let requeue = next_requeue(false, false, &with_errors, "gone", RESYNC);
        assert_eq!(requeue, backoff("gone"));
    }

    #[test]
    fn a_resolved_plugin_waits_for_the_resync() {
        let requeue = next_requeue(false, false, &resolved(), "", RESYNC);
        assert_eq!(requeue, Requeue::After(RESYNC));
    }
}
