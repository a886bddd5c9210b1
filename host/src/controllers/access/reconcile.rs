use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use serde_json::json;

use super::cluster::{self, Blocked};
use super::decide;
use crate::controllers::kit::{self, Controller, Note, finalizer};
use crate::controllers::{Context, ReconcileError, labels, runtime_cluster};
use crate::crd::{
    AccessState, ConditionStatus, ConditionType, EventReason, FIELD_MANAGER, Reason,
    RuntimeAccess, RuntimeAccessStatus, set_condition,
};
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

/// One status outcome: state, the Ready condition's status and reason, its message.
struct Outcome {
    state: AccessState,
    ready: ConditionStatus,
    reason: Reason,
    message: String,
}

fn outcome(state: AccessState, reason: Reason, message: impl Into<String>) -> Outcome {
    let ready = match state {
        AccessState::Ready => ConditionStatus::True,
        _ => ConditionStatus::False,
    };
    Outcome {
        state,
        ready,
        reason,
        message: message.into(),
    }
}

async fn reconcile_inner(access: &RuntimeAccess, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = access.namespace().unwrap_or_default();
    let api: Api<RuntimeAccess> = Api::namespaced(ctx.client.clone(), &namespace);
    if access.metadata.deletion_timestamp.is_some() {
        return release(access, ctx, &api).await;
    }
    finalizer::add(&api, access, labels::ACCESS_FINALIZER).await?;
    if let Err(invalid) = decide::validate(&access.spec) {
        let failed = outcome(AccessState::Failed, Reason::InvalidSpec, invalid.to_string());
        write_status(ctx, &api, access, failed, None).await?;
        return Ok(Action::await_change());
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let secret_name = decide::secret_name(access);
    let secret = secrets.get_opt(&secret_name).await?;
    if let Some(foreign) = secret.as_ref().filter(|s| !decide::ours(access, s.labels())) {
        let message = format!(
            "Secret {namespace}/{} exists and was not written for this RuntimeAccess; choose another spec.secretName",
            foreign.name_any()
        );
        let failed = outcome(AccessState::Failed, Reason::SecretNotOwned, message);
        write_status(ctx, &api, access, failed, None).await?;
        return Ok(Action::await_change());
    }
    let Some(admin) = admin_kubeconfig(ctx, &namespace, &access.spec.runtime).await? else {
        let message = format!(
            "waiting for the kubeconfig of Runtime {namespace}/{} (Secret {})",
            access.spec.runtime,
            labels::kubeconfig_secret(&access.spec.runtime)
        );
        return wait(ctx, &api, access, Reason::KubeconfigPending, message).await;
    };
    let client = runtime_cluster::client(ctx, &namespace, &access.spec.runtime).await?;
    let wanted = decide::wanted(access);
    match cluster::apply(access, &client, &wanted).await? {
        Ok(()) => {}
        Err(Blocked::NotOurs(what)) => {
            let message = format!("{what} exists in the runtime cluster and was not made for this RuntimeAccess; the host does not take it over");
            let failed = outcome(AccessState::Failed, Reason::ObjectNotOwned, message);
            write_status(ctx, &api, access, failed, None).await?;
            return Ok(Action::requeue(Duration::from_secs(300)));
        }
        Err(Blocked::NoNamespace(what)) => {
            return wait(ctx, &api, access, Reason::NamespaceMissing, what).await;
        }
    }
    cluster::prune(access, &client, &wanted).await?;
    let now = jiff::Timestamp::now();
    match decide::token_due(access, secret.is_some(), now, ctx.config.rotation_fraction) {
        Err(wait) => {
            let ready = outcome(AccessState::Ready, Reason::TokenIssued, ready_message(access));
            write_status(ctx, &api, access, ready, None).await?;
            Ok(Action::requeue(wait))
        }
        Ok(()) => rotate(access, ctx, &api, &client, &admin).await,
    }
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

/// The admin kubeconfig text of the Runtime's cluster, if its Secret is there.
async fn admin_kubeconfig(
    ctx: &Context,
    namespace: &str,
    runtime: &str,
) -> Result<Option<String>, ReconcileError> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(secret) = secrets.get_opt(&labels::kubeconfig_secret(runtime)).await? else {
        return Ok(None);
    };
    let bytes = secret.data.unwrap_or_default().remove("config");
    Ok(bytes.and_then(|b| String::from_utf8(b.0).ok()))
}

/// Issue a new token, write the kubeconfig Secret, then revoke the tokens before it.
async fn rotate(
    access: &RuntimeAccess,
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    client: &kube::Client,
    admin: &str,
) -> Result<Action, ReconcileError> {
    let fail = |message: String| ReconcileError::RuntimeCluster {
        runtime: access.spec.runtime.clone(),
        message,
    };
    let server = decide::server_of(admin).map_err(fail)?;
    let lifetime = decide::lifetime(&access.spec).unwrap_or(decide::DEFAULT_LIFETIME);
    let issued = cluster::issue(access, client, lifetime.as_secs() as i64).await?;
    if issued.token.is_empty() {
        return Err(fail("the TokenRequest API answered without a token".into()));
    }
    let sa = &access.spec.service_account;
    let user = format!("system:serviceaccount:{}:{}", sa.namespace, sa.name);
    let kubeconfig = decide::kubeconfig(&server, &user, &issued.token);
    let doc = decide::secret_doc(access, &kubeconfig, &issued.expiry);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &access.namespace().unwrap_or_default());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    secrets
        .patch(&decide::secret_name(access), &params, &Patch::Apply(&doc))
        .await?;
    let revoked = cluster::revoke_others(access, client, Some(&issued.anchor)).await?;
    tracing::info!(access = %access.name_any(), expiry = %issued.expiry, revoked, "access token issued");
    if access.annotations().contains_key(labels::FORCE_ROTATION) {
        let patch = json!({ "metadata": { "annotations": { labels::FORCE_ROTATION: null } } });
        api.patch(&access.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let ready = outcome(AccessState::Ready, Reason::TokenIssued, ready_message(access));
    let note = Note::normal(
        EventReason::TokenIssued,
        format!("{}; expires {}; {revoked} earlier token(s) revoked", ready_message(access), issued.expiry),
    );
    write_status(ctx, api, access, ready, Some((now_rfc3339(), issued.expiry, note))).await?;
    let renew = lifetime.mul_f64(ctx.config.rotation_fraction.clamp(0.1, 0.95));
    Ok(Action::requeue(renew))
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
    write_status(ctx, api, access, outcome(AccessState::Pending, reason, message), None).await?;
    Ok(Action::requeue(delay))
}

/// Being deleted: remove what was made in the runtime cluster (when it is still there) and
/// the kubeconfig Secret, then let go.
async fn release(
    access: &RuntimeAccess,
    ctx: &Context,
    api: &Api<RuntimeAccess>,
) -> Result<Action, ReconcileError> {
    if !finalizer::has(access, labels::ACCESS_FINALIZER) {
        return Ok(Action::await_change());
    }
    let namespace = access.namespace().unwrap_or_default();
    if admin_kubeconfig(ctx, &namespace, &access.spec.runtime).await?.is_some() {
        let client = runtime_cluster::client(ctx, &namespace, &access.spec.runtime).await?;
        let removed = cluster::prune(access, &client, &[]).await?;
        let revoked = cluster::revoke_others(access, &client, None).await?;
        tracing::info!(access = %access.name_any(), removed = removed.len(), revoked, "runtime cluster access removed");
    } else {
        tracing::info!(access = %access.name_any(), runtime = %access.spec.runtime, "the Runtime's cluster is gone: nothing to remove there");
    }
    delete_own_secret(access, ctx).await?;
    finalizer::remove(api, access, labels::ACCESS_FINALIZER).await?;
    Ok(Action::await_change())
}

async fn delete_own_secret(access: &RuntimeAccess, ctx: &Context) -> Result<(), ReconcileError> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &access.namespace().unwrap_or_default());
    let name = decide::secret_name(access);
    let Some(secret) = secrets.get_opt(&name).await? else {
        return Ok(());
    };
    if !decide::ours(access, secret.labels()) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: secret.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match secrets.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Write the status `outcome` says (with a new token's times and its Event).
async fn write_status(
    ctx: &Context,
    api: &Api<RuntimeAccess>,
    access: &RuntimeAccess,
    outcome: Outcome,
    issued: Option<(String, String, Note)>,
) -> Result<(), ReconcileError> {
    let before = access.status.clone().unwrap_or_default();
    let mut status = RuntimeAccessStatus {
        state: Some(outcome.state),
        observed_generation: access.metadata.generation,
        secret_name: before.secret_name.clone(),
        objects: decide::wanted(access).iter().map(decide::Wanted::label).collect(),
        ..before.clone()
    };
    let mut notes = Vec::new();
    if let Some((at, expiry, note)) = issued {
        status.issued = Some(at);
        status.expiry = Some(expiry);
        status.secret_name = Some(decide::secret_name(access));
        notes.push(note);
    }
    if outcome.state != AccessState::Ready {
        status.objects = before.objects.clone();
    }
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        outcome.ready,
        outcome.reason,
        &outcome.message,
        access.metadata.generation,
    );
    let changed_reason = !before.conditions.iter().any(|c| c.because(outcome.reason));
    if outcome.ready == ConditionStatus::False && changed_reason {
        notes.push(Note::warning(EventReason::AccessNotReady, outcome.message.clone()));
    }
    if before != status {
        let fields = ["state", "secretName", "issued", "expiry", "objects", "conditions", "observedGeneration"];
        crate::crd::patch_status(api, &access.name_any(), &status, &fields).await?;
    }
    if !notes.is_empty() {
        let reference = access.object_ref(&());
        ctx.events.publish(&reference, "Reconcile", notes).await;
    }
    Ok(())
}
