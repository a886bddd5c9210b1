use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use serde_json::json;

use super::binding;
use super::decide::{self, Refusal};
use crate::api;
use crate::controllers::kit::rotation::{Rotation, after_issue};
use crate::controllers::kit::{self, Controller, finalizer};
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{Runtime, RuntimeKubeconfig, RuntimeKubeconfigStatus};
use crate::gardener::gardener_failure;
use crate::gardener::{FIELD_MANAGER, request_admin_kubeconfig};
use crate::metrics::GardenerCall;
use crate::time::{format_rfc3339, now_rfc3339};

pub(crate) async fn reconcile(
    rkc: Arc<RuntimeKubeconfig>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    kit::guarded(
        Controller::Kubeconfig,
        rkc.as_ref(),
        &ctx,
        reconcile_inner(&rkc, &ctx),
    )
    .await
}

async fn reconcile_inner(rkc: &RuntimeKubeconfig, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = rkc.namespace().unwrap_or_default();
    let api: Api<RuntimeKubeconfig> = Api::namespaced(ctx.client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &rkc.spec.secret.namespace);
    if rkc.metadata.deletion_timestamp.is_some() {
        return release(rkc, ctx, &api, &secrets).await;
    }
    finalizer::add(&api, rkc, labels::KUBECONFIG_FINALIZER).await?;

    let runtimes: Api<Runtime> = Api::namespaced(ctx.client.clone(), &namespace);
    let runtime = runtimes.get_opt(&rkc.spec.runtime).await?;
    if let Some(why) = binding::unbound(rkc, runtime.as_ref()) {
        return refuse(ctx, &api, rkc, decide::not_bound(&why)).await;
    }
    let secret = secrets.get_opt(&rkc.spec.secret.name).await?;
    let kim = &ctx.config.kim;
    let foreign = |s: &&Secret| !binding::owns(rkc, s) && !binding::adoptable(rkc, s, kim);
    if let Some(foreign) = secret.as_ref().filter(foreign) {
        let refusal = decide::secret_not_owned(&namespace, &foreign.name_any());
        return refuse(ctx, &api, rkc, refusal).await;
    }
    let expiration = ctx.config.kubeconfig_expiration;
    let fraction = ctx.config.rotation_fraction;
    let mut held = decide::held(rkc, secret.as_ref());
    let fresh;
    let mut rkc = rkc;
    if decide::unrecorded(&held) {
        // The Secret is read fresh, the RuntimeKubeconfig came from the cache, which may
        // not have the status written with the Secret yet: judge by a fresh read.
        fresh = api.get(&rkc.name_any()).await?;
        rkc = &fresh;
        held = decide::held(rkc, secret.as_ref());
    }
    // Every pass exports the expiry on record, not only a rotation: a replica that took
    // this RuntimeKubeconfig over (a restart, a handover) would otherwise export nothing
    // until it rotates, and the alert on the expiry would miss rotations failing meanwhile.
    let at = held.expiry.map(|t| t.as_second());
    ctx.metrics
        .kubeconfig_expires(&namespace, &rkc.spec.runtime, at);
    let lifetime = decide::lifetime(&held, expiration);
    let now = jiff::Timestamp::now();
    if let Rotation::Wait(wait) = decide::rotation(&held, now, lifetime, fraction)
        && !decide::unrecorded(&held)
    {
        return Ok(Action::requeue(wait));
    }
    let granted = rotate(rkc, ctx, &api, &secrets, held.forced).await?;
    Ok(Action::requeue(after_issue(
        granted.min(expiration),
        fraction,
    )))
}

/// The RuntimeKubeconfig is being deleted: its own Secret goes with it, then let it go.
async fn release(
    rkc: &RuntimeKubeconfig,
    ctx: &Context,
    api: &Api<RuntimeKubeconfig>,
    secrets: &Api<Secret>,
) -> Result<Action, ReconcileError> {
    if finalizer::has(rkc, labels::KUBECONFIG_FINALIZER) {
        delete_own_secret(rkc, secrets).await?;
        finalizer::remove(api, rkc, labels::KUBECONFIG_FINALIZER).await?;
    }
    let namespace = rkc.namespace().unwrap_or_default();
    ctx.metrics
        .kubeconfig_expires(&namespace, &rkc.spec.runtime, None);
    Ok(Action::await_change())
}

/// Fetch a new admin kubeconfig from Gardener into the Secret, and record it; how long
/// Gardener granted it for.
async fn rotate(
    rkc: &RuntimeKubeconfig,
    ctx: &Context,
    api: &Api<RuntimeKubeconfig>,
    secrets: &Api<Secret>,
    forced: bool,
) -> Result<std::time::Duration, ReconcileError> {
    let name = rkc.name_any();
    let generation = rkc.metadata.generation;
    let status = rkc.status.clone().unwrap_or_default();
    let shoot = &rkc.spec.shoot;
    let expiration = ctx.config.kubeconfig_expiration.as_secs() as i64;
    let issued = match request_admin_kubeconfig(
        ctx.shoots.client(),
        &shoot.namespace,
        &shoot.name,
        expiration,
    )
    .await
    {
        Ok(issued) => issued,
        Err(error) => {
            let failure = gardener_failure(&error);
            ctx.metrics
                .gardener_failed(GardenerCall::AdminKubeconfig, failure);
            let failed = decide::fetch_failed(status, generation, &shoot.name, &error.to_string());
            write_status(api, &name, rkc, failed).await?;
            return Err(error.into());
        }
    };
    let synced = now_rfc3339();
    let secret_ref = &rkc.spec.secret;
    let doc = decide::secret_doc(rkc, issued.kubeconfig, &synced);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    secrets
        .patch(&secret_ref.name, &params, &Patch::Apply(&doc))
        .await?;
    let expiry = format_rfc3339(issued.expiry);
    tracing::info!(runtime = %rkc.spec.runtime, secret = %secret_ref.name, forced, expiry = %expiry, "kubeconfig written");
    if forced {
        // Done as asked: clear the request, so the next pass does not rotate again.
        let patch = json!({ "metadata": { "annotations": { labels::FORCE_ROTATION: null } } });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let namespace = rkc.namespace().unwrap_or_default();
    let at = Some(issued.expiry.as_second());
    ctx.metrics
        .kubeconfig_expires(&namespace, &rkc.spec.runtime, at);
    let status = decide::synced(status, generation, &secret_ref.name, synced, expiry);
    write_status(api, &name, rkc, status).await?;
    Ok(decide::granted(jiff::Timestamp::now(), issued.expiry))
}

/// Delete the kubeconfig Secret if it is the one `rkc` created (uid precondition).
async fn delete_own_secret(
    rkc: &RuntimeKubeconfig,
    secrets: &Api<Secret>,
) -> Result<(), ReconcileError> {
    let name = &rkc.spec.secret.name;
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(());
    };
    if !binding::owns(rkc, &secret) {
        tracing::warn!(runtime = %rkc.spec.runtime, secret = %name, "not deleting a Secret this RuntimeKubeconfig did not create");
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: secret.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match secrets.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(runtime = %rkc.spec.runtime, secret = %name, "kubeconfig Secret deleted");
            Ok(())
        }
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Say why `rkc` may not act, and look again with backoff: what it waits for (its
/// Runtime recording the Shoot, a takeover, a foreign Secret going) is not watched here.
async fn refuse(
    ctx: &Context,
    api: &Api<RuntimeKubeconfig>,
    rkc: &RuntimeKubeconfig,
    refusal: Refusal,
) -> Result<Action, ReconcileError> {
    let delay = kit::retry_later(ctx, &kit::key(rkc), &refusal.message);
    let status = rkc.status.clone().unwrap_or_default();
    let status = decide::refused(status, rkc.metadata.generation, refusal);
    write_status(api, &rkc.name_any(), rkc, status).await?;
    Ok(Action::requeue(delay))
}

async fn write_status(
    api: &Api<RuntimeKubeconfig>,
    name: &str,
    rkc: &RuntimeKubeconfig,
    status: RuntimeKubeconfigStatus,
) -> Result<(), ReconcileError> {
    if rkc.status.as_ref() == Some(&status) {
        return Ok(());
    }
    crate::crd::patch_status(api, name, &status).await?;
    Ok(())
}
