//! The watch of Shoots that wakes Runtimes and fills the Shoot cache
//! (`gardener::ShootCache`), from which settled Runtimes are judged. It runs on its own, with its own backoff: were
//! it one of the controller's watches, each of its failures would pause every trigger of the
//! controller (kube-runtime backs off the merged trigger stream), so new Runtimes would wait
//! for Gardener's side to come back. It watches the project namespace only: a Gardener
//! project member has no rights elsewhere.
//!
//! A failure is reported once (log cap, metrics, `/readyz`, the Runtimes' `GardenerReachable`
//! condition); the watch then waits as the error policy says and starts over with a fresh
//! list, so that its recovery is seen (kube's watcher resumes a failed watch silently).

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use crate::controllers::{Context, kit, labels};
use crate::crd::Runtime;
use crate::gardener::shoot_resource;
use crate::gardener::{GardenerFailure, gardener_failure};
use crate::metrics::{Dependency, GardenerCall};

type Events = BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>;

/// The Runtimes whose Shoots changed.
/// With KIM takeover on, every Shoot of the project is watched: one KIM made carries no
/// Tessera label until Tessera first writes it, and leads back to the Runtimes (of
/// `runtimes`) named by its runtime-id annotation.
pub(crate) fn shoot_changes(
    ctx: Arc<Context>,
    runtimes: Store<Runtime>,
) -> impl futures::Stream<Item = ObjectRef<Runtime>> + Send {
    let namespace =
        crate::plugins::identity::project_namespace(&ctx.renderer.resolver.template.project);
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.shoots.client().clone(), &namespace, &shoot_resource());
    let selector = match &ctx.config.namespace {
        Some(ns) => format!("{}={ns}", labels::RUNTIME_NAMESPACE),
        None => labels::RUNTIME.to_string(),
    };
    let config = match ctx.config.kim.enabled {
        true => watcher::Config::default().any_semantic(),
        false => watcher::Config::default().labels(&selector).any_semantic(),
    };
    let events = watcher::watcher(api.clone(), config.clone()).boxed();
    let watch = Watch {
        key: format!("watch/Shoot/{namespace}"),
        ctx,
        namespace,
        api,
        config,
        events,
        runtimes,
        pending: Vec::new(),
        listed: None,
    };
    futures::stream::unfold(watch, |mut watch| async move {
        let runtime = watch.next().await?;
        Some((runtime, watch))
    })
}

struct Watch {
    ctx: Arc<Context>,
    namespace: String,
    /// The retry state's key (backoff, log cap).
    key: String,
    api: Api<DynamicObject>,
    config: watcher::Config,
    events: Events,
    /// The controller's Runtimes, to find those a KIM Shoot names.
    runtimes: Store<Runtime>,
    /// Runtimes found and not yet handed out.
    pending: Vec<ObjectRef<Runtime>>,
    /// While a list runs: the Runtimes whose Shoots it named so far.
    listed: Option<std::collections::HashSet<ObjectRef<Runtime>>>,
}

impl Watch {
    /// The next Runtime to wake; `None` when the watch ends.
    async fn next(&mut self) -> Option<ObjectRef<Runtime>> {
        loop {
            if let Some(runtime) = self.pending.pop() {
                return Some(runtime);
            }
            let event = self.events.next().await?;
            if let Ok(event) = &event {
                self.ctx.shoots.cache().apply(event);
            }
            match event {
                Ok(watcher::Event::Apply(s) | watcher::Event::Delete(s)) => {
                    self.pending = self.runtimes_of(&s)
                }
                Ok(watcher::Event::InitApply(s)) => {
                    self.pending = self.runtimes_of(&s);
                    let listed = self.listed.get_or_insert_with(Default::default);
                    listed.extend(self.pending.iter().cloned());
                }
                Ok(watcher::Event::InitDone) => {
                    self.works();
                    self.pending = self.unlisted();
                }
                Ok(watcher::Event::Init) => self.listed = Some(Default::default()),
                // The resource version expired: routine, a fresh list follows at once.
                Err(watcher::Error::WatchError(s)) if s.code == 410 => self.restart(),
                Err(e) => {
                    self.failed(&e).await;
                    self.restart();
                }
            }
        }
    }

    /// After a list: the Runtimes whose Shoot it did not name. A Shoot deleted while the
    /// watch was down sends no event; its Runtime (waiting for the deletion, a requeue
    /// away) is woken here instead.
    fn unlisted(&mut self) -> Vec<ObjectRef<Runtime>> {
        let listed = self.listed.take().unwrap_or_default();
        self.runtimes
            .state()
            .iter()
            .map(|r| ObjectRef::from_obj(r.as_ref()))
            .filter(|r| !listed.contains(r))
            .collect()
    }

    fn restart(&mut self) {
        self.ctx.shoots.cache().lost();
        self.events = watcher::watcher(self.api.clone(), self.config.clone()).boxed();
    }

    /// A list went through: the watch works (again).
    fn works(&self) {
        let ctx = &self.ctx;
        if ctx.shoot_watch.lock().expect("watch lock").take().is_some() {
            tracing::info!(namespace = %self.namespace, "the watch of Shoots works again");
        }
        ctx.metrics.dependencies.up(Dependency::Gardener);
        ctx.retries.succeeded(&self.key, std::time::Instant::now());
    }

    /// Report `e` (Runtimes see it from now on) and wait as the error policy says.
    async fn failed(&mut self, e: &watcher::Error) {
        let ctx = &self.ctx;
        let message = watch_failure(ctx, &self.namespace, e);
        *ctx.shoot_watch.lock().expect("watch lock") = Some(message.clone());
        ctx.metrics
            .dependencies
            .down(Dependency::Gardener, &message);
        ctx.metrics
            .gardener_failed(GardenerCall::Watch, failure_kind(e));
        tokio::time::sleep(kit::retry_later(ctx, &self.key, &message)).await;
    }
}

impl Watch {
    /// The Runtimes a Shoot belongs to: its labels lead back to one; a KIM Shoot's
    /// runtime-id annotation to those of that name (in the namespace the host serves).
    fn runtimes_of(&self, shoot: &DynamicObject) -> Vec<ObjectRef<Runtime>> {
        if let Some(runtime) = labelled_runtime(shoot) {
            return vec![runtime];
        }
        let kim = &self.ctx.config.kim;
        let Some(id) = kim
            .enabled
            .then(|| shoot.annotations().get(&kim.runtime_id_annotation))
            .flatten()
        else {
            return Vec::new();
        };
        self.runtimes
            .state()
            .iter()
            .filter(|r| r.name_any() == *id)
            .map(|r| ObjectRef::from_obj(r.as_ref()))
            .collect()
    }
}

/// The Runtime a Shoot's Tessera labels name.
fn labelled_runtime(shoot: &DynamicObject) -> Option<ObjectRef<Runtime>> {
    let labels = shoot.metadata.labels.as_ref()?;
    let id = labels.get(labels::RUNTIME)?;
    let ns = labels.get(labels::RUNTIME_NAMESPACE)?;
    Some(ObjectRef::<Runtime>::new(id).within(ns))
}

/// The failure of the Shoot watch in words: a refusal names the rights it lacks.
fn watch_failure(ctx: &Context, namespace: &str, e: &watcher::Error) -> String {
    let detail = crate::report::watch_error(e);
    match failure_kind(e) {
        GardenerFailure::Rejected => format!(
            "the watch of Shoots in {namespace} at {} is refused: {detail}; the host needs `list` and `watch` on shoots.core.gardener.cloud in {namespace} (a project member has them); Shoot progress is only polled meanwhile",
            ctx.shoots.url()
        ),
        GardenerFailure::Down => format!(
            "the watch of Shoots in {namespace} at {} failed: {detail}; Shoot progress is only polled meanwhile",
            ctx.shoots.url()
        ),
    }
}

fn failure_kind(e: &watcher::Error) -> GardenerFailure {
    use watcher::Error as W;
    match e {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => gardener_failure(e),
        W::WatchError(s) => gardener_failure(&kube::Error::Api(s.clone())),
        W::NoResourceVersion => GardenerFailure::Down,
    }
}
