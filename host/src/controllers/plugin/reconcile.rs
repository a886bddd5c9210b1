//! One pass over a Plugin: resolve and load every version, publish the channels, write
//! status. The acting half: every decision is made in `spec`, `versions` and `decide`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::decide::{self, ChannelPlan};
use super::spec::validate;
use super::versions;
use crate::controllers::kit::{self, Note, finalizer};
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{Plugin, PluginStatus, PluginVersion, ResolvedVersion};
use crate::plugins::{ChannelEntry, Fetcher, PluginEntry, Resolved};
use crate::wasm::PluginKind;

pub(crate) async fn reconcile_plugin(
    plugin: Arc<Plugin>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let api: Api<Plugin> = Api::all(ctx.client.clone());
    if plugin.metadata.deletion_timestamp.is_some() {
        return forget(&plugin, &ctx, &api).await;
    }
    if ctx.leads() {
        finalizer::add(&api, plugin.as_ref(), labels::PLUGIN_FINALIZER).await?;
    }
    let Some(fetcher) = ctx.fetcher.clone() else {
        return Ok(Action::await_change());
    };
    let old = plugin.status.clone().unwrap_or_default();
    let mut status = PluginStatus {
        observed_generation: plugin.metadata.generation,
        conditions: old.conditions.clone(),
        ..Default::default()
    };
    let kind = match validate(&plugin.spec) {
        Ok(kind) => kind,
        Err(message) => return refuse_spec(&plugin, &ctx, &api, &old, status, message).await,
    };
    let pass = Pass {
        plugin: &plugin,
        old: &old,
        fetcher: &fetcher,
        kind,
        previous: ctx.renderer.resolver.catalog.get(&plugin.name_any()).ok(),
    };
    let versions = pass.resolve_all().await;
    status.versions = versions.statuses;
    let mut events = versions.events;
    let problems = publish(&pass, &ctx, versions.loaded, &mut status, &mut events);
    let ready = decide::ready_condition(&status.channels, &status.versions, &problems);
    record_ready(&mut status, &old, &ready, &mut events);
    write_status(&ctx, &api, &plugin.name_any(), &old, &status).await?;
    done(&plugin, &ctx, events).await;
    let failure = status.last_error.as_deref().unwrap_or_default();
    let resync = ctx.config.plugin_resync;
    let requeue = decide::next_requeue(
        versions.deferred,
        versions.transient,
        &ready,
        failure,
        resync,
    );
    Ok(requeue.action(&ctx, &kit::key(plugin.as_ref())))
}

/// The Plugin is being deleted: out of the catalog and the metrics, then let it go.
async fn forget(
    plugin: &Plugin,
    ctx: &Context,
    api: &Api<Plugin>,
) -> Result<Action, ReconcileError> {
    let name = plugin.name_any();
    ctx.renderer.resolver.catalog.remove(&name);
    for c in &plugin.spec.channels {
        ctx.metrics.channel_ready(&name, &c.name, None);
    }
    if ctx.leads() {
        finalizer::remove(api, plugin, labels::PLUGIN_FINALIZER).await?;
    }
    tracing::info!(plugin = %name, "plugin removed");
    Ok(Action::await_change())
}

/// The spec cannot be acted on: say why in the catalog and the status, and wait for an edit.
async fn refuse_spec(
    plugin: &Plugin,
    ctx: &Context,
    api: &Api<Plugin>,
    old: &PluginStatus,
    mut status: PluginStatus,
    message: String,
) -> Result<Action, ReconcileError> {
    let name = plugin.name_any();
    ctx.renderer
        .resolver
        .catalog
        .set_error(&name, message.clone());
    decide::invalid_spec_condition(message.clone())
        .set(&mut status.conditions, plugin.metadata.generation);
    status.last_error = Some(message);
    write_status(ctx, api, &name, old, &status).await?;
    ctx.initial_sync.done(&name);
    Ok(Action::await_change())
}

/// Plan the channels over what loaded, publish them to the catalog, and record channels,
/// summary, grants and configuration in `status`. Returns what keeps channels from running
/// as specified.
fn publish(
    pass: &Pass<'_>,
    ctx: &Context,
    loaded: BTreeMap<String, Resolved>,
    status: &mut PluginStatus,
    events: &mut Vec<Note>,
) -> Vec<String> {
    let plugin = pass.plugin;
    let name = plugin.name_any();
    let generation = plugin.metadata.generation;
    let kept = pass.kept_channels();
    let plan = decide::channel_plan(&plugin.spec.channels, &loaded, &kept, &status.versions);
    for c in &plan.statuses {
        ctx.metrics.channel_ready(&name, &c.name, Some(c.ready));
    }
    let ChannelPlan {
        runs,
        errors,
        statuses,
        problems,
    } = plan;
    let channels: BTreeMap<String, ChannelEntry> = runs
        .into_iter()
        .map(|(channel, run)| {
            let entry = ChannelEntry {
                current: run.current,
                shadow: run.shadow,
                allow_downgrade: run.allow_downgrade,
            };
            (channel, entry)
        })
        .collect();
    status.summary = Some(decide::summary(&statuses));
    status.channels = statuses;
    let grants = decide::grant_status(&plugin.spec, &channels);
    decide::granted_condition(&grants).set(&mut status.conditions, generation);
    status.grants = Some(grants);
    let catalog = &ctx.renderer.resolver.catalog;
    catalog.publish(&name, entry(plugin, pass.kind, loaded, channels, errors));
    // Asked after publishing: a refusal counts only against the configuration just published.
    let refused = catalog.refused_config(&name);
    let (config, note) = decide::config_condition(pass.old, refused.as_deref());
    config.set(&mut status.conditions, generation);
    events.extend(note);
    problems
}

fn entry(
    plugin: &Plugin,
    kind: PluginKind,
    versions: BTreeMap<String, Resolved>,
    channels: BTreeMap<String, ChannelEntry>,
    channel_errors: BTreeMap<String, String>,
) -> PluginEntry {
    PluginEntry {
        kind,
        config: plugin.spec.config.clone(),
        limits: plugin.spec.limits.unwrap_or_default(),
        grants: plugin.spec.grants.clone().unwrap_or_default(),
        locked_config: plugin.spec.locked_config.clone(),
        module_set_selector: plugin.spec.module_set_selector.clone(),
        mandatory: plugin.spec.mandatory.clone(),
        downtime: (plugin.spec.versions.iter())
            .filter(|v| v.requires_downtime)
            .map(|v| v.version.clone())
            .collect(),
        versions,
        channels,
        channel_errors,
    }
}

/// Set `Ready` and `lastError`; a new error becomes a warning Event.
fn record_ready(
    status: &mut PluginStatus,
    old: &PluginStatus,
    ready: &decide::Verdict,
    events: &mut Vec<Note>,
) {
    status.last_error = decide::last_error(ready);
    ready
        .clone()
        .set(&mut status.conditions, status.observed_generation);
    events.extend(decide::error_note(
        old.last_error.as_deref(),
        status.last_error.as_deref(),
    ));
}

/// After the status is written: the Events, and this Plugin counts as seen once.
async fn done(plugin: &Plugin, ctx: &Context, events: Vec<Note>) {
    if ctx.leads() {
        ctx.events
            .publish(&plugin.object_ref(&()), "Resolve", events)
            .await;
    }
    ctx.initial_sync.done(&plugin.name_any());
}

/// What one pass works from.
struct Pass<'a> {
    plugin: &'a Plugin,
    old: &'a PluginStatus,
    fetcher: &'a Fetcher,
    kind: PluginKind,
    /// What the catalog holds from the last pass; `None` on this host's first.
    previous: Option<Arc<PluginEntry>>,
}

/// What resolving every version found.
#[derive(Default)]
struct Versions {
    loaded: BTreeMap<String, Resolved>,
    statuses: Vec<ResolvedVersion>,
    events: Vec<Note>,
    /// A failure that may heal by itself (registry unreachable, timeout).
    transient: bool,
    /// A pinned digest was served from the store without asking the registry.
    deferred: bool,
}

impl Pass<'_> {
    async fn resolve_all(&self) -> Versions {
        let mut out = Versions::default();
        for v in &self.plugin.spec.versions {
            let mut st = versions::version_status(v);
            if let Some(resolved) = self.resolve(v, &mut st, &mut out).await {
                st = versions::loaded_status(st, &resolved);
                out.loaded.insert(v.version.clone(), resolved);
            }
            out.statuses.push(st);
        }
        out
    }

    /// Resolve, pin and load `v`, recording what happened in `st` and `out`.
    async fn resolve(
        &self,
        v: &PluginVersion,
        st: &mut ResolvedVersion,
        out: &mut Versions,
    ) -> Option<Resolved> {
        let pinned = versions::pinned_digest(self.old, v);
        let digest = self.digest(v, pinned.as_deref(), st, out).await?;
        let digest = versions::pin_digest(
            self.plugin,
            self.old,
            v,
            pinned.as_deref(),
            digest,
            st,
            &mut out.events,
        );
        st.digest = Some(digest.clone());
        let previous = self
            .previous
            .as_ref()
            .and_then(|p| p.versions.get(&v.version));
        if let Some(r) = versions::reusable(previous, &digest, &v.reference, self.require()) {
            return Some(r);
        }
        self.load(v, &digest, st, out).await
    }

    /// The digest the tag of `v` names now (or the pin, on a first pass or a registry down).
    async fn digest(
        &self,
        v: &PluginVersion,
        pinned: Option<&str>,
        st: &mut ResolvedVersion,
        out: &mut Versions,
    ) -> Option<String> {
        let first_pass = self.previous.is_none();
        if let Some(p) =
            versions::stored_pin(pinned, first_pass, |p| self.fetcher.store.contains(p))
        {
            out.deferred = true;
            return Some(p.to_string());
        }
        match self.fetcher.resolve(&v.reference).await {
            Ok(digest) => Some(digest),
            Err(err) => {
                out.transient |= err.is_transient();
                let (digest, error) = versions::unresolved(pinned, &err.to_string());
                st.error = Some(error);
                digest
            }
        }
    }

    /// Fetch, verify and compile `digest` of `v`.
    async fn load(
        &self,
        v: &PluginVersion,
        digest: &str,
        st: &mut ResolvedVersion,
        out: &mut Versions,
    ) -> Option<Resolved> {
        let name = self.plugin.name_any();
        let fetched = self
            .fetcher
            .fetch(&v.reference, digest, self.kind, self.require());
        match fetched.await {
            Ok(f) => {
                tracing::info!(plugin = %name, version = %v.version, digest = %f.component_digest, verified_by = f.verified_by.as_deref().unwrap_or("unsigned"), "plugin version loaded");
                Some(Resolved {
                    version: v.version.clone(),
                    reference: v.reference.clone(),
                    manifest_digest: f.manifest_digest,
                    component_digest: f.component_digest,
                    verified_by: f.verified_by,
                    loaded: f.loaded,
                })
            }
            Err(err) => {
                out.transient |= err.is_transient();
                tracing::warn!(plugin = %name, version = %v.version, error = %err, "plugin version refused");
                st.error = Some(err.to_string());
                None
            }
        }
    }

    /// What each channel ran after the last pass, to keep running when its version fails.
    fn kept_channels(&self) -> BTreeMap<String, Resolved> {
        let Some(previous) = &self.previous else {
            return BTreeMap::new();
        };
        let channels = previous.channels.iter();
        channels
            .map(|(name, entry)| (name.clone(), entry.current.clone()))
            .collect()
    }

    /// Whether every version must carry a verified signature.
    fn require(&self) -> bool {
        let verification = self.plugin.spec.verification.as_ref();
        verification.is_some_and(|v| v.required)
    }
}

/// Write `status` if it changed and this host [`Context::leads`].
async fn write_status(
    ctx: &Context,
    api: &Api<Plugin>,
    name: &str,
    old: &PluginStatus,
    status: &PluginStatus,
) -> Result<(), ReconcileError> {
    if old == status || !ctx.leads() {
        return Ok(());
    }
    crate::crd::patch_status(api, name, status).await?;
    Ok(())
}
