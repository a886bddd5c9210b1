use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::cluster::{self, Blocked};
use super::decide::{self, Outcome};
use super::reach::{Reach, reach, runtime_of};
use crate::api;
use crate::controllers::kit::{self, Controller, Note, finalizer};
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{EventReason, FIELD_MANAGER, KubeconfigState, Reason, RuntimeAccess};
use crate::time::now_rfc3339;

pub(crate) async fn reconcile(
    access: Arc<RuntimeAccess>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    kit::guarded(
        Controller::Access,
        access.as_ref(),
        &ctx,
        reconcile_inner(&access, &ctx),
    )
    .await
}

fn outcome(state: KubeconfigState, reason: Reason, message: impl Into<String>) -> Outcome {
    Outcome {
        state,
        reason,
        message: message.into(),
    }
}

async fn reconcile_inner(cached: &RuntimeAccess, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = cached.namespace().unwrap_or_default();
    let api: Api<RuntimeAccess> = Api::namespaced(ctx.client.clone(), &namespace);
    // Decide from the object as stored: the cache may not show the status the pass before
    // this one wrote, and a token is never issued twice for one need.
    let Some(access) = api.get_opt(&cached.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let access = &access;
    if access.metadata.deletion_timestamp.is_some() {
        return release(access, ctx, &api).await;
    }
    finalizer::add(&api, access, labels::ACCESS_FINALIZER).await?;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let secret = secrets.get_opt(&decide::secret_name(access)).await?;
    if let Some(failed) = refused(access, secret.as_ref()) {
        write_status(ctx, &api, access, failed, None).await?;
        return Ok(Action::await_change());
    }
    let (client, admin) = match reach(ctx, &namespace, &access.spec.runtime).await? {
        Reach::Cluster { client, admin } => (client, admin),
        Reach::Wait(reason, why) => return wait(ctx, &api, access, reason, why).await,
        Reach::Gone(why) => return wait(ctx, &api, access, Reason::KubeconfigPending, why).await,
    };
    let pinned = pin_runtime(&api, access).await?;
    let access = pinned.as_ref().unwrap_or(access);
    let wanted = decide::wanted(access);
    if let Err(blocked) = cluster::apply(access, &client, &wanted).await? {
        return blocked_by(ctx, &api, access, blocked).await;
    }
    cluster::prune(access, &client, &wanted).await?;
    let now = jiff::Timestamp::now();
    match decide::token_due(access, secret.is_some(), now, ctx.config.rotation_fraction) {
        Err(wait) => {
            publish_expiry(
                ctx,
                access,
                access.status.as_ref().and_then(|s| s.expiry.as_deref()),
            );
            let ready = outcome(
                KubeconfigState::Ready,
                Reason::TokenIssued,
                ready_message(access),
            );
            write_status(ctx, &api, access, ready, None).await?;
            Ok(Action::requeue(wait))
        }
        Ok(()) => rotate(access, ctx, &api, &client, &admin, secret.as_ref()).await,
    }
}

/// The runtime cluster would not take the objects as wanted: say why.
async fn blocked_by(
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    access: &RuntimeAccess,
    blocked: Blocked,
) -> Result<Action, ReconcileError> {
    let (reason, message) = match blocked {
        Blocked::NoNamespace(what) => {
            return wait(ctx, api, access, Reason::NamespaceMissing, what).await;
        }
        Blocked::NotOurs(what) => (
            Reason::ObjectNotOwned,
            format!(
                "{what} exists in the runtime cluster and was not made for this RuntimeAccess; the host does not take it over"
            ),
        ),
        Blocked::Refused(what) => (Reason::InvalidSpec, what),
    };
    write_status(
        ctx,
        api,
        access,
        outcome(KubeconfigState::Failed, reason, message),
        None,
    )
    .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Record the Runtime whose cluster the objects go to before any is made there, so that
/// `spec.runtime` cannot move them (and deletion knows where to look).
async fn pin_runtime(
    api: &Api<RuntimeAccess>,
    access: &RuntimeAccess,
) -> Result<Option<RuntimeAccess>, ReconcileError> {
    if access.status.as_ref().is_some_and(|s| s.runtime.is_some()) {
        return Ok(None);
    }
    let mut pinned = access.clone();
    let status = pinned.status.get_or_insert_with(Default::default);
    status.runtime = Some(access.spec.runtime.clone());
    let status = status.clone();
    crate::crd::patch_status(api, &access.name_any(), &status).await?;
    Ok(Some(pinned))
}

/// Why `access` cannot be carried out as written: an invalid spec, or a Secret of its name
/// that is someone else's.
fn refused(access: &RuntimeAccess, secret: Option<&Secret>) -> Option<Outcome> {
    if let Err(invalid) = decide::validate(access) {
        let message = invalid.to_string();
        return Some(outcome(
            KubeconfigState::Failed,
            Reason::InvalidSpec,
            message,
        ));
    }
    let foreign = secret.filter(|s| !decide::owns_secret(access, s))?;
    let message = format!(
        "Secret {}/{} exists and was not written for this RuntimeAccess; choose another spec.secretName",
        access.namespace().unwrap_or_default(),
        foreign.name_any()
    );
    Some(outcome(
        KubeconfigState::Failed,
        Reason::SecretNotOwned,
        message,
    ))
}

fn ready_message(access: &RuntimeAccess) -> String {
    let sa = &access.spec.service_account;
    format!(
        "kubeconfig of ServiceAccount {}/{} in Secret {}",
        sa.namespace,
        sa.name,
        decide::secret_name(access)
    )
}

/// Issue a new token, write the kubeconfig Secret (`secret`: as read at the start of the
/// pass), then revoke the tokens before it.
async fn rotate(
    access: &RuntimeAccess,
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    client: &kube::Client,
    admin: &str,
    secret: Option<&Secret>,
) -> Result<Action, ReconcileError> {
    let fail = |message: String| ReconcileError::RuntimeCluster {
        runtime: access.spec.runtime.clone(),
        message,
    };
    let server = decide::server_of(admin).map_err(fail)?;
    let lifetime = decide::lifetime(&access.spec).unwrap_or(decide::DEFAULT_LIFETIME);
    let issued = cluster::issue(access, client, lifetime.as_secs() as i64).await?;
    if let Some(why) = unusable(&issued) {
        cluster::revoke(access, client, &issued).await?;
        return Err(fail(why));
    }
    if let Err(e) = write_kubeconfig(access, ctx, &server, &issued, secret).await {
        cluster::revoke(access, client, &issued).await?;
        return Err(e);
    }
    let keep = decide::kept_anchors(access, secret, &issued.anchor);
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    let revoked = cluster::revoke_others(access, client, &keep).await?;
    delete_secrets(access, ctx, Some(&decide::secret_name(access))).await?;
    tracing::info!(access = %access.name_any(), expiry = %issued.expiry, revoked, "access token issued");
    after_issue(access, ctx, api, &issued.expiry).await?;
    let now = jiff::Timestamp::now();
    let renew = decide::renew_after(&issued.expiry, now, lifetime, ctx.config.rotation_fraction);
    let ready = outcome(
        KubeconfigState::Ready,
        Reason::TokenIssued,
        ready_message(access),
    );
    let note = Note::normal(
        EventReason::TokenIssued,
        format!(
            "{}; expires {}; {revoked} earlier token(s) revoked",
            ready_message(access),
            issued.expiry
        ),
    );
    write_status(
        ctx,
        api,
        access,
        ready,
        Some((now_rfc3339(), issued.expiry, note)),
    )
    .await?;
    Ok(Action::requeue(renew))
}

/// Why an issued token cannot be handed out: none, or one that expires within a minute
/// (renewing it would loop).
fn unusable(issued: &cluster::Issued) -> Option<String> {
    if issued.token.is_empty() {
        return Some("the TokenRequest API answered without a token".into());
    }
    let soon = jiff::Timestamp::now() + Duration::from_secs(60);
    match crate::time::parse_rfc3339(Some(&issued.expiry)) {
        Some(expiry) if expiry > soon => None,
        _ => Some(format!(
            "the TokenRequest API issued a token expiring at {:?}",
            issued.expiry
        )),
    }
}

/// Write the kubeconfig of `issued` to the control-plane Secret. Only the Secret checked
/// at the start of the pass is written: none is created (a Secret someone made since is
/// not taken over: 409, and the next pass refuses it), an existing one is applied with its
/// resourceVersion as a precondition.
async fn write_kubeconfig(
    access: &RuntimeAccess,
    ctx: &Context,
    server: &decide::Server,
    issued: &cluster::Issued,
    checked: Option<&Secret>,
) -> Result<(), ReconcileError> {
    let sa = &access.spec.service_account;
    let user = format!("system:serviceaccount:{}:{}", sa.namespace, sa.name);
    let kubeconfig = decide::kubeconfig(server, &user, &issued.token);
    let mut secret = decide::secret_doc(access, &kubeconfig, &issued.expiry, &issued.anchor);
    let namespace = access.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    match checked.and_then(|s| s.resource_version()) {
        None => {
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            secrets.create(&params, &secret).await?;
        }
        Some(version) => {
            secret.metadata.resource_version = Some(version);
            let params = PatchParams::apply(FIELD_MANAGER).force();
            secrets
                .patch(
                    &decide::secret_name(access),
                    &params,
                    &Patch::Apply(&secret),
                )
                .await?;
        }
    }
    Ok(())
}

/// A token was issued: publish its expiry, and clear a rotation request (done as asked).
async fn after_issue(
    access: &RuntimeAccess,
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    expiry: &str,
) -> Result<(), ReconcileError> {
    publish_expiry(ctx, access, Some(expiry));
    if labels::is_true(access.metadata.annotations.as_ref(), labels::FORCE_ROTATION) {
        let patch = json!({ "metadata": { "annotations": { labels::FORCE_ROTATION: null } } });
        let params = PatchParams::default();
        api.patch(&access.name_any(), &params, &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// The token's expiry as a metric (also after a restart, from status).
fn publish_expiry(ctx: &Context, access: &RuntimeAccess, expiry: Option<&str>) {
    let Some(expiry) = crate::time::parse_rfc3339(expiry) else {
        return;
    };
    let namespace = access.namespace().unwrap_or_default();
    let at = Some(expiry.as_second());
    ctx.metrics
        .access_expires(&namespace, &access.name_any(), at);
}

/// Not there yet (the Runtime's kubeconfig, a namespace): say so, come back with backoff.
async fn wait(
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    access: &RuntimeAccess,
    reason: Reason,
    message: String,
) -> Result<Action, ReconcileError> {
    let delay = kit::retry_later(ctx, &kit::key(access), &message);
    write_status(
        ctx,
        api,
        access,
        outcome(KubeconfigState::Pending, reason, message),
        None,
    )
    .await?;
    Ok(Action::requeue(delay))
}

/// Being deleted: remove what was made in the runtime cluster and the kubeconfig Secret,
/// then let go. An unreachable cluster is retried (an outage heals); a Runtime that is gone
/// or being deleted takes its cluster with it, so there is nothing left to remove there.
async fn release(
    access: &RuntimeAccess,
    ctx: &Context,
    api: &Api<RuntimeAccess>,
) -> Result<Action, ReconcileError> {
    if !finalizer::has(access, labels::ACCESS_FINALIZER) {
        return Ok(Action::await_change());
    }
    let namespace = access.namespace().unwrap_or_default();
    let runtime = runtime_of(access);
    match reach(ctx, &namespace, &runtime).await? {
        Reach::Cluster { client, .. } => {
            let removed = cluster::prune(access, &client, &[]).await?;
            let revoked = cluster::revoke_others(access, &client, &[]).await?;
            tracing::info!(access = %access.name_any(), removed = removed.len(), revoked, "runtime cluster access removed");
        }
        // The Runtime lives: its cluster does too, and what was made there must go first.
        Reach::Wait(_, message) => {
            return Err(ReconcileError::RuntimeCluster { runtime, message });
        }
        Reach::Gone(why) => {
            tracing::info!(access = %access.name_any(), %runtime, reason = %why, "nothing to remove in the runtime cluster");
        }
    }
    delete_secrets(access, ctx, None).await?;
    finalizer::remove(api, access, labels::ACCESS_FINALIZER).await?;
    ctx.metrics
        .access_expires(&namespace, &access.name_any(), None);
    Ok(Action::await_change())
}

/// Delete the control-plane Secrets written for `access` (its uid label), but `keep`: the
/// one a changed `spec.secretName` left behind, or all of them on deletion.
async fn delete_secrets(
    access: &RuntimeAccess,
    ctx: &Context,
    keep: Option<&str>,
) -> Result<(), ReconcileError> {
    let namespace = access.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let selector = format!(
        "{}={}",
        labels::ACCESS_UID,
        access.uid().unwrap_or_default()
    );
    let listed = secrets
        .list(&ListParams::default().labels(&selector))
        .await?;
    for secret in listed {
        let name = secret.name_any();
        if Some(name.as_str()) == keep || !decide::owns_secret(access, &secret) {
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: secret.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match secrets.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(access = %access.name_any(), secret = %name, "kubeconfig Secret deleted")
            }
            Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Write the status `outcome` says (with a new token's times and its Event); a Warning
/// when the Ready condition turns False for a new reason.
async fn write_status(
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    access: &RuntimeAccess,
    outcome: Outcome,
    issued: Option<(String, String, Note)>,
) -> Result<(), ReconcileError> {
    let before = access.status.clone().unwrap_or_default();
    let mut notes = Vec::new();
    let times = issued.map(|(at, expiry, note)| {
        notes.push(note);
        (at, expiry)
    });
    let status = decide::status_after(access, &outcome, times);
    let new_reason = !before.conditions.iter().any(|c| c.because(outcome.reason));
    if outcome.state != KubeconfigState::Ready && new_reason {
        notes.push(Note::warning(EventReason::AccessNotReady, outcome.message));
    }
    if before != status {
        crate::crd::patch_status(api, &access.name_any(), &status).await?;
    }
    if !notes.is_empty() {
        let reference = access.object_ref(&());
        ctx.events.publish(&reference, "Reconcile", notes).await;
    }
    Ok(())
}
