use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::drift::Drift;
use super::reconcile::{ModuleContext, reconcile};
use super::targets::{TargetRules, Targets};
use super::turns::Turns;
use crate::controllers::kit;
use crate::controllers::{Context, ReconcileError};
use crate::crd::ModuleSet;
use crate::modules::ModuleReport;
use crate::modules::set::woken_by;

/// Run the ModuleSet controller until shutdown.
pub(crate) async fn run(ctx: Arc<Context>) {
    let sets: Api<ModuleSet> = match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let (drift, drifted) = Drift::new(ctx.metrics.clone());
    let drifted = futures::stream::unfold(drifted, |mut rx| async move {
        let next = rx.recv().await?;
        Some((next, rx))
    });
    let mctx = Arc::new(ModuleContext {
        targets: Targets::new(
            ctx.client.clone(),
            ctx.fence.clone(),
            ctx.clusters.clone(),
            TargetRules {
                secrets: ctx.config.module_targets.clone(),
                local_namespaces: ctx.config.local_module_namespaces.clone(),
                kubeconfigs: ctx.config.kubeconfigs.clone(),
            },
        ),
        drift,
        turns: Turns::new(ctx.config.module_target_concurrency),
        ctx,
    });
    let watch_ctx = mctx.ctx.clone();
    let sweeper = tokio::spawn(sweep_targets(mctx.clone())).abort_handle();
    let controller = kit::controller(
        sets,
        kit::shard::selected(&mctx.ctx, watcher::Config::default().any_semantic()),
        kit::Wake::OnIntent,
    );
    let catalog = catalog_changes(&mctx.ctx, controller.store());
    controller
        .with_config(
            kube::runtime::controller::Config::default().concurrency(mctx.ctx.config.workers),
        )
        .reconcile_on(catalog)
        .reconcile_on(drifted)
        .shutdown_on_signal()
        .run(reconcile, error_policy, mctx)
        .for_each(|outcome| kit::run_outcome(&watch_ctx, kit::Controller::ModuleSet, outcome))
        .await;
    sweeper.abort();
}

/// How often idle targets are looked for and the target gauges set.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Drop the targets (and their drift watches) idle for `--target-idle`, and count what is
/// left for `tessera_module_targets` and `tessera_drift_watches`.
async fn sweep_targets(mctx: Arc<ModuleContext>) {
    let every = mctx.ctx.config.target_idle.map_or(SWEEP_EVERY, |idle| {
        (idle / 2).clamp(std::time::Duration::from_millis(500), SWEEP_EVERY)
    });
    let mut every = tokio::time::interval(every);
    loop {
        every.tick().await;
        let left = match mctx.ctx.config.target_idle {
            Some(idle) => {
                let (servers, left) = mctx.targets.sweep(idle);
                if !servers.is_empty() {
                    tracing::debug!(clusters = servers.len(), "dropped idle target clusters");
                }
                for server in &servers {
                    mctx.drift.forget(server);
                }
                left
            }
            None => mctx.targets.len(),
        };
        mctx.ctx
            .metrics
            .set_module_targets(left, mctx.drift.watches());
    }
}

/// The sets a catalog change concerns: a module runs the changed plugin on a changed
/// channel, or one that left the set is still being removed with it.
fn catalog_changes(
    ctx: &Context,
    store: Store<ModuleSet>,
) -> impl futures::Stream<Item = ObjectRef<ModuleSet>> + Send + 'static {
    let catalog = ctx.renderer.resolver.catalog.clone();
    kit::catalog_wakes(ctx, kit::Controller::ModuleSet, store, move |set, wake| {
        let reported: Vec<ModuleReport> = set
            .status
            .iter()
            .flat_map(|s| s.modules.iter().chain(&s.mandatory_modules))
            .cloned()
            .collect();
        // A Plugin that is (or just became) mandatory concerns every set.
        let mandatory = catalog
            .mandatory()
            .iter()
            .any(|(m, _)| wake.touches_plugin(m));
        mandatory
            || woken_by(
                &set.spec.modules,
                set.spec.channel.as_deref(),
                &reported,
                wake,
            )
    })
}

fn error_policy(set: Arc<ModuleSet>, error: &ReconcileError, ctx: Arc<ModuleContext>) -> Action {
    kit::error_policy(kit::Controller::ModuleSet, set.as_ref(), error, &ctx.ctx)
}
