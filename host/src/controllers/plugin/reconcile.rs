//! One pass over a Plugin: resolve and load every version, publish the channels, write
//! status. A version that fails keeps the channel on its last good version, so a broken
//! release never takes running Runtimes down with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::controllers::kit::{self, Note, finalizer};
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{
    ChannelStatus, ConditionStatus, GrantStatus, Plugin, PluginSpec, PluginStatus, PluginVersion,
    ResolvedVersion, UpdatePolicy, set_condition,
};
use crate::grants::Grants;
use crate::plugins::{ChannelEntry, PluginEntry, Resolved};
use crate::wasm::PluginKind;

fn kind_of(spec: &PluginSpec) -> Result<PluginKind, String> {
    match spec.kind.as_str() {
        "shoot-extension" => Ok(PluginKind::ShootExtension),
        "module-reconciler" => Ok(PluginKind::ModuleReconciler),
        other => Err(format!(
            "spec.kind: {other:?} is neither shoot-extension nor module-reconciler"
        )),
    }
}

/// What a version's pinned digest becomes when its tag resolved to another.
#[derive(Debug, PartialEq, Eq)]
enum Pin {
    /// Nothing moved (or nothing was pinned yet: the first resolution pins).
    Keep,
    /// Follow the tag.
    Move { from: String },
    /// Keep running the pinned digest; the new one waits for approval.
    Hold { pinned: String },
}

/// A moved tag is followed only when the Plugin opts into automatic updates or an operator
/// approved exactly that digest; otherwise the fleet keeps what it runs.
fn next_pin(pinned: Option<&str>, resolved: &str, automatic: bool, approved: Option<&str>) -> Pin {
    match pinned {
        None => Pin::Keep,
        Some(p) if p == resolved => Pin::Keep,
        Some(p) if automatic || approved == Some(resolved) => Pin::Move {
            from: p.to_string(),
        },
        Some(p) => Pin::Hold {
            pinned: p.to_string(),
        },
    }
}

/// The digest version `v` runs: the resolved one, unless the tag moved under a pinned
/// digest that nobody approved (and the Plugin does not update automatically); then the
/// pinned one, with the new one pending in `st`.
fn pin_digest(
    plugin: &Plugin,
    old: &PluginStatus,
    v: &PluginVersion,
    pinned: Option<&str>,
    resolved: String,
    st: &mut ResolvedVersion,
    events: &mut Vec<Note>,
) -> String {
    let automatic = plugin.spec.update_policy == Some(UpdatePolicy::Automatic);
    let approved = approval(plugin, &v.version);
    match next_pin(pinned, &resolved, automatic, approved.as_deref()) {
        Pin::Keep => resolved,
        Pin::Move { from } => {
            let note = format!(
                "version {} ({}) moved from {from} to {resolved}",
                v.version, v.reference
            );
            events.push(Note::normal("DigestChanged", note));
            resolved
        }
        Pin::Hold { pinned } => {
            let was_pending = old.versions.iter().any(|o| {
                o.version == v.version && o.pending_digest.as_deref() == Some(resolved.as_str())
            });
            if !was_pending {
                let note = format!(
                    "version {} ({}) moved to {resolved}; still running {pinned} until an operator approves it (annotation {}{}: {resolved}, or spec.updatePolicy: Automatic)",
                    v.version,
                    v.reference,
                    labels::APPROVE_PREFIX,
                    v.version
                );
                events.push(Note::warning("DigestPending", note));
            }
            st.pending_digest = Some(resolved);
            pinned
        }
    }
}

/// The digest an operator approved for `version` (annotation `approve.tessera.dev/<version>`).
fn approval(plugin: &Plugin, version: &str) -> Option<String> {
    let key = format!("{}{version}", labels::APPROVE_PREFIX);
    plugin.annotations().get(&key).cloned()
}

/// Problems in the spec itself, named by field.
fn validate(spec: &PluginSpec) -> Result<PluginKind, String> {
    let kind = kind_of(spec)?;
    let mut seen = BTreeSet::new();
    for (i, v) in spec.versions.iter().enumerate() {
        if !seen.insert(v.version.as_str()) {
            return Err(format!(
                "spec.versions[{i}].version: {} is listed twice",
                v.version
            ));
        }
        crate::oci::parse_reference(&v.reference)
            .map_err(|e| format!("spec.versions[{i}].ref: {e}"))?;
    }
    let mut channels = BTreeSet::new();
    for (i, c) in spec.channels.iter().enumerate() {
        if !channels.insert(c.name.as_str()) {
            return Err(format!(
                "spec.channels[{i}].name: {} is listed twice",
                c.name
            ));
        }
        if !seen.contains(c.version.as_str()) {
            return Err(format!(
                "spec.channels[{i}].version: {} is not in spec.versions",
                c.version
            ));
        }
        if let Some(shadow) = &c.shadow
            && !seen.contains(shadow.as_str())
        {
            return Err(format!(
                "spec.channels[{i}].shadow: {shadow} is not in spec.versions"
            ));
        }
    }
    if let Some(grants) = &spec.grants {
        grants.validate("spec.grants")?;
        let wrong = match kind {
            PluginKind::ShootExtension if !(grants.write.is_empty() && grants.read.is_empty()) => {
                Some("write/read: a shoot extension writes and reads no objects; grant shootPaths")
            }
            PluginKind::ModuleReconciler if !grants.shoot_paths.is_empty() => {
                Some("shootPaths: a module reconciler sets no Shoot paths; grant write/read")
            }
            _ => None,
        };
        if let Some(why) = wrong {
            return Err(format!("spec.grants.{why}"));
        }
    }
    Ok(kind)
}

/// What the versions channels run request, against `spec.grants`.
fn grant_status(spec: &PluginSpec, channels: &BTreeMap<String, ChannelEntry>) -> GrantStatus {
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

pub(crate) async fn reconcile_plugin(
    plugin: Arc<Plugin>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let name = plugin.name_any();
    let api: Api<Plugin> = Api::all(ctx.client.clone());
    let catalog = ctx.renderer.resolver.catalog.clone();
    if plugin.metadata.deletion_timestamp.is_some() {
        catalog.remove(&name);
        for c in &plugin.spec.channels {
            let _ = ctx
                .metrics
                .plugin_channel_ready
                .remove_label_values(&[name.as_str(), c.name.as_str()]);
        }
        finalizer::remove(&api, plugin.as_ref(), labels::PLUGIN_FINALIZER).await?;
        tracing::info!(plugin = %name, "plugin removed");
        return Ok(Action::await_change());
    }
    finalizer::add(&api, plugin.as_ref(), labels::PLUGIN_FINALIZER).await?;
    let Some(fetcher) = ctx.fetcher.clone() else {
        return Ok(Action::await_change());
    };

    let old = plugin.status.clone().unwrap_or_default();
    let mut status = PluginStatus {
        observed_generation: plugin.metadata.generation,
        conditions: old.conditions.clone(),
        ..Default::default()
    };
    let mut events = Vec::new();
    let kind = match validate(&plugin.spec) {
        Ok(kind) => kind,
        Err(message) => {
            catalog.set_error(&name, message.clone());
            set_condition(
                &mut status.conditions,
                "Ready",
                ConditionStatus::False,
                "InvalidSpec",
                message.clone(),
                plugin.metadata.generation,
            );
            status.last_error = Some(message);
            write_status(&api, &name, &old, &status).await?;
            ctx.initial_sync.done(&name);
            return Ok(Action::await_change());
        }
    };
    let previous = catalog.get(&name).ok();
    let require = plugin
        .spec
        .verification
        .as_ref()
        .is_some_and(|v| v.required);
    let mut transient = false;
    // On this host's first pass, pinned digests whose bytes are in the store are used as
    // they are, so a restarted host serves at once; tags are re-resolved right after.
    let first_pass = previous.is_none();
    let mut deferred = false;
    let mut versions: BTreeMap<String, Resolved> = BTreeMap::new();
    for v in &plugin.spec.versions {
        let pinned = old
            .versions
            .iter()
            .find(|s| s.version == v.version && s.reference == v.reference)
            .and_then(|s| s.digest.clone());
        let mut st = ResolvedVersion {
            version: v.version.clone(),
            reference: v.reference.clone(),
            ..Default::default()
        };
        let stored_pin = pinned
            .as_ref()
            .filter(|p| first_pass && fetcher.store.contains(p));
        let resolved_digest = match stored_pin {
            Some(p) => {
                deferred = true;
                Ok(p.clone())
            }
            None => fetcher.resolve(&v.reference).await,
        };
        let digest = match resolved_digest {
            Ok(digest) => digest,
            Err(err) => {
                transient |= err.is_transient();
                match &pinned {
                    // Registry down: the pinned digest still names the right bytes.
                    Some(p) => {
                        st.error = Some(format!(
                            "cannot resolve the reference now, using the pinned digest: {err}"
                        ));
                        p.clone()
                    }
                    None => {
                        st.error = Some(err.to_string());
                        status.versions.push(st);
                        continue;
                    }
                }
            }
        };
        let digest = pin_digest(
            &plugin,
            &old,
            v,
            pinned.as_deref(),
            digest,
            &mut st,
            &mut events,
        );
        st.digest = Some(digest.clone());
        let reuse = previous
            .as_ref()
            .and_then(|p| p.versions.get(&v.version))
            .filter(|r| {
                r.manifest_digest == digest
                    && r.reference == v.reference
                    && (!require || r.verified_by.is_some())
            })
            .cloned();
        let resolved = match reuse {
            Some(r) => r,
            None => match fetcher.fetch(&v.reference, &digest, kind, require).await {
                Ok(f) => {
                    tracing::info!(plugin = %name, version = %v.version, digest = %f.component_digest, verified_by = ?f.verified_by, "plugin version loaded");
                    Resolved {
                        version: v.version.clone(),
                        reference: v.reference.clone(),
                        manifest_digest: f.manifest_digest,
                        component_digest: f.component_digest,
                        verified_by: f.verified_by,
                        loaded: f.loaded,
                    }
                }
                Err(err) => {
                    transient |= err.is_transient();
                    tracing::warn!(plugin = %name, version = %v.version, error = %err, "plugin version refused");
                    st.error = Some(err.to_string());
                    status.versions.push(st);
                    continue;
                }
            },
        };
        st.component_digest = Some(resolved.component_digest.clone());
        st.verified_by = resolved.verified_by.clone();
        versions.insert(v.version.clone(), resolved);
        status.versions.push(st);
    }

    let version_error = |version: &str| {
        status
            .versions
            .iter()
            .find(|s| s.version == version)
            .and_then(|s| s.error.clone())
            .unwrap_or_else(|| format!("version {version} did not load"))
    };
    let mut channels = BTreeMap::new();
    let mut channel_errors = BTreeMap::new();
    let mut channel_status = Vec::new();
    let mut problems = Vec::new();
    for c in &plugin.spec.channels {
        let mut cs = ChannelStatus {
            name: c.name.clone(),
            version: c.version.clone(),
            shadow_version: c.shadow.clone(),
            ..Default::default()
        };
        let mut messages = Vec::new();
        let current = match versions.get(&c.version) {
            Some(r) => Some(r.clone()),
            None => {
                let err = version_error(&c.version);
                let kept = previous
                    .as_ref()
                    .and_then(|p| p.channels.get(&c.name))
                    .map(|e| e.current.clone());
                match &kept {
                    Some(k) => messages.push(format!(
                        "version {} unusable, still running {}: {err}",
                        c.version, k.version
                    )),
                    None => messages.push(format!("version {}: {err}", c.version)),
                }
                kept
            }
        };
        let shadow = match &c.shadow {
            Some(v) => match versions.get(v) {
                Some(r) => Some(r.clone()),
                None => {
                    messages.push(format!("shadow version {v}: {}", version_error(v)));
                    None
                }
            },
            None => None,
        };
        cs.ready = current.as_ref().is_some_and(|r| r.version == c.version)
            && (c.shadow.is_none() || shadow.is_some());
        cs.component_digest = current.as_ref().map(|r| r.component_digest.clone());
        cs.shadow_digest = shadow.as_ref().map(|r| r.component_digest.clone());
        if !messages.is_empty() {
            cs.message = Some(messages.join("; "));
            problems.push(format!("channel {}: {}", c.name, messages.join("; ")));
        }
        ctx.metrics
            .plugin_channel_ready
            .with_label_values(&[name.as_str(), c.name.as_str()])
            .set(i64::from(cs.ready));
        match current {
            Some(current) => {
                channels.insert(
                    c.name.clone(),
                    ChannelEntry {
                        current,
                        shadow,
                        allow_downgrade: c.allow_downgrade,
                    },
                );
            }
            None => {
                channel_errors.insert(c.name.clone(), cs.message.clone().unwrap_or_default());
            }
        }
        channel_status.push(cs);
    }
    status.summary = Some(
        channel_status
            .iter()
            .map(|c| {
                let mark = if c.ready { "" } else { "!" };
                match &c.shadow_version {
                    Some(s) => format!("{}={}{mark}(shadow {s})", c.name, c.version),
                    None => format!("{}={}{mark}", c.name, c.version),
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
    );
    status.channels = channel_status;
    let grants = grant_status(&plugin.spec, &channels);
    set_condition(
        &mut status.conditions,
        "Granted",
        if grants.not_granted.is_empty() {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        if grants.not_granted.is_empty() {
            "AsRequested"
        } else {
            "NotGranted"
        },
        if grants.not_granted.is_empty() {
            "spec.grants covers what the plugin requests".to_string()
        } else {
            format!(
                "the plugin requests more than spec.grants grants (it fails where it needs them): {}",
                grants.not_granted.join("; ")
            )
        },
        plugin.metadata.generation,
    );
    status.grants = Some(grants);
    catalog.publish(
        &name,
        PluginEntry {
            kind,
            config: plugin.spec.config.clone(),
            limits: plugin.spec.limits.unwrap_or_default(),
            grants: plugin.spec.grants.clone().unwrap_or_default(),
            locked_config: plugin.spec.locked_config.clone(),
            versions,
            channels,
            channel_errors,
        },
    );
    config_condition(
        &mut status,
        &old,
        catalog.refused_config(&name),
        &mut events,
    );
    let version_problems: Vec<String> = status
        .versions
        .iter()
        .filter_map(|v| Some(format!("version {}: {}", v.version, v.error.as_ref()?)))
        .collect();
    let all_ready = status.channels.iter().all(|c| c.ready);
    let (cond, reason, message) = if !all_ready {
        (
            ConditionStatus::False,
            "ChannelUnavailable",
            problems.join("; "),
        )
    } else if !version_problems.is_empty() {
        (
            ConditionStatus::True,
            "ResolvedWithErrors",
            version_problems.join("; "),
        )
    } else {
        (
            ConditionStatus::True,
            "Resolved",
            "every channel runs its version".to_string(),
        )
    };
    set_condition(
        &mut status.conditions,
        "Ready",
        cond,
        reason,
        message.clone(),
        plugin.metadata.generation,
    );
    status.last_error = (reason != "Resolved").then_some(message.clone());
    if old.last_error != status.last_error
        && let Some(error) = &status.last_error
    {
        events.push(Note::warning("PluginError", error.clone()));
    }
    write_status(&api, &name, &old, &status).await?;
    ctx.events
        .publish(&plugin.object_ref(&()), "Resolve", events)
        .await;
    ctx.initial_sync.done(&name);
    if deferred {
        return Ok(Action::requeue(std::time::Duration::from_millis(500)));
    }
    Ok(Action::requeue(if transient || reason != "Resolved" {
        let why = status.last_error.clone().unwrap_or_default();
        kit::retry_later(&ctx, &kit::key(plugin.as_ref()), &why)
    } else {
        ctx.config.plugin_resync
    }))
}

/// `ConfigAccepted`: whether a render refused `spec.config` as it is now. The Runtimes
/// using the plugin wait (they are not at fault); the Plugin is where the fix goes.
fn config_condition(
    status: &mut PluginStatus,
    old: &PluginStatus,
    refused: Option<String>,
    events: &mut Vec<Note>,
) {
    let generation = status.observed_generation;
    let (cond, reason, message) = match &refused {
        Some(why) => (
            ConditionStatus::False,
            "InvalidConfig",
            format!(
                "a render refused spec.config; Runtimes using this plugin wait until it changes: {why}"
            ),
        ),
        None => (
            ConditionStatus::True,
            "NotRefused",
            "no render refused spec.config".to_string(),
        ),
    };
    let was = old.conditions.iter().find(|c| c.type_ == "ConfigAccepted");
    if refused.is_some() && was.is_none_or(|c| c.message != message) {
        events.push(Note::warning("InvalidConfig", message.clone()));
    }
    set_condition(
        &mut status.conditions,
        "ConfigAccepted",
        cond,
        reason,
        message,
        generation,
    );
}

async fn write_status(
    api: &Api<Plugin>,
    name: &str,
    old: &PluginStatus,
    status: &PluginStatus,
) -> Result<(), ReconcileError> {
    if old == status {
        return Ok(());
    }
    crate::crd::patch_status(
        api,
        name,
        status,
        &[
            "observedGeneration",
            "conditions",
            "versions",
            "channels",
            "summary",
            "lastError",
            "grants",
        ],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_tags_wait_for_approval() {
        assert_eq!(next_pin(None, "sha256:b", false, None), Pin::Keep);
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:a", false, None),
            Pin::Keep
        );
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", false, None),
            Pin::Hold {
                pinned: "sha256:a".into()
            }
        );
        // Approving another digest approves nothing.
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", false, Some("sha256:c")),
            Pin::Hold {
                pinned: "sha256:a".into()
            }
        );
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", false, Some("sha256:b")),
            Pin::Move {
                from: "sha256:a".into()
            }
        );
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", true, None),
            Pin::Move {
                from: "sha256:a".into()
            }
        );
    }
}
