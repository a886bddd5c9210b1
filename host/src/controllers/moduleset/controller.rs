use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use super::drift::Drift;
use super::reconcile::{ModuleContext, reconcile};
use super::targets::{TargetRules, Targets};
use crate::controllers::kit;
use crate::controllers::runtime::tokio_stream_of;
use crate::controllers::{Context, ReconcileError};
use crate::crd::ModuleSet;

/// Run the ModuleSet controller until shutdown.
pub(crate) async fn run(ctx: Arc<Context>) {
    let sets: Api<ModuleSet> = match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let (drift, drifted) = Drift::new(ctx.metrics.clone());
    let catalog = tokio_stream_of(ctx.renderer.resolver.catalog.subscribe());
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
        ctx,
    });
    Controller::new(sets, watcher::Config::default().any_semantic())
        .with_config(
            kube::runtime::controller::Config::default().concurrency(mctx.ctx.config.workers),
        )
        .reconcile_all_on(catalog)
        .reconcile_on(drifted)
        .shutdown_on_signal()
        .run(reconcile, error_policy, mctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

fn error_policy(set: Arc<ModuleSet>, error: &ReconcileError, ctx: Arc<ModuleContext>) -> Action {
    kit::error_policy(kit::Controller::ModuleSet, set.as_ref(), error, &ctx.ctx)
}
