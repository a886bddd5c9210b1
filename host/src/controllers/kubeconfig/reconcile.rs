use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::binding;
use crate::controllers::kit::{self, Controller, finalizer};
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{
    ConditionStatus, KubeconfigState, Runtime, RuntimeKubeconfig, RuntimeKubeconfigStatus,
    set_condition,
};
use crate::gardener::{FIELD_MANAGER, request_admin_kubeconfig};
use crate::time::{format_rfc3339, now_rfc3339, parse_rfc3339};

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
    let name = rkc.name_any();
    let namespace = rkc.namespace().unwrap_or_default();
    let api: Api<RuntimeKubeconfig> = Api::namespaced(ctx.client.clone(), &namespace);
    let secret_ref = &rkc.spec.secret;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &secret_ref.namespace);

    if rkc.metadata.deletion_timestamp.is_some() {
        if finalizer::has(rkc, labels::KUBECONFIG_FINALIZER) {
            delete_own_secret(rkc, &secrets).await?;
            finalizer::remove(&api, rkc, labels::KUBECONFIG_FINALIZER).await?;
        }
        let _ = ctx
            .metrics
            .kubeconfig_expiry
            .remove_label_values(&[&namespace, &rkc.spec.runtime]);
        return Ok(Action::await_change());
    }
    finalizer::add(&api, rkc, labels::KUBECONFIG_FINALIZER).await?;

    let runtimes: Api<Runtime> = Api::namespaced(ctx.client.clone(), &namespace);
    let runtime = runtimes.get_opt(&rkc.spec.runtime).await?;
    if let Some(why) = binding::unbound(rkc, runtime.as_ref()) {
        return refuse(
            &api,
            rkc,
            "NotBound",
            format!("refused: {why}; nothing is fetched or written"),
        )
        .await;
    }
    let expiration = ctx.config.kubeconfig_expiration;
    let rotate_after = expiration.mul_f64(ctx.config.rotation_fraction.clamp(0.01, 1.0));
    let secret = secrets.get_opt(&secret_ref.name).await?;
    if let Some(foreign) = secret.as_ref().filter(|s| !binding::owns(rkc, s)) {
        let name = foreign.name_any();
        return refuse(&api, rkc, "SecretNotOwned", format!(
            "Secret {namespace}/{name} exists and was not created for this RuntimeKubeconfig; it is left as it is"
        )).await;
    }
    let last_sync = secret
        .as_ref()
        .and_then(|s| parse_rfc3339(s.annotations().get(labels::LAST_SYNC).map(String::as_str)));
    let forced = labels::is_true(rkc.metadata.annotations.as_ref(), labels::FORCE_ROTATION);
    let has_key = secret
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .is_some_and(|d| d.contains_key(&secret_ref.key));
    let now = jiff::Timestamp::now();
    let age = last_sync.map(|t| now.duration_since(t).unsigned_abs());
    let due = match age {
        Some(age) => age >= rotate_after,
        None => true,
    };
    let mut status = rkc.status.clone().unwrap_or_default();
    let generation = rkc.metadata.generation;

    if !(due || forced || !has_key) {
        // Fresh: come back when it is due.
        let wait = rotate_after.saturating_sub(age.unwrap_or_default());
        return Ok(Action::requeue(wait.max(Duration::from_secs(1))));
    }

    let shoot = &rkc.spec.shoot;
    let issued = match request_admin_kubeconfig(
        ctx.shoots.client(),
        &shoot.namespace,
        &shoot.name,
        expiration.as_secs() as i64,
    )
    .await
    {
        Ok(issued) => issued,
        Err(error) => {
            set_condition(
                &mut status.conditions,
                "Ready",
                ConditionStatus::False,
                "FetchFailed",
                format!("admin kubeconfig for Shoot {}: {error}", shoot.name),
                generation,
            );
            if status.state != Some(KubeconfigState::Ready) {
                status.state = Some(KubeconfigState::Failed);
            }
            write_status(&api, &name, rkc, status).await?;
            return Err(error.into());
        }
    };
    let synced = now_rfc3339();
    let owner = rkc.controller_owner_ref(&()).expect("named object");
    let mut data = BTreeMap::new();
    data.insert(
        secret_ref.key.clone(),
        ByteString(issued.kubeconfig.into_bytes()),
    );
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_ref.name,
            "namespace": secret_ref.namespace,
            "labels": {
                labels::RUNTIME: rkc.spec.runtime,
                labels::KUBECONFIG: "true",
            },
            "annotations": { labels::LAST_SYNC: synced },
            "ownerReferences": [owner],
        },
        "type": "Opaque",
        "data": data,
    });
    secrets
        .patch(
            &secret_ref.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&doc),
        )
        .await?;
    tracing::info!(
        runtime = %rkc.spec.runtime,
        secret = %secret_ref.name,
        forced,
        expiry = %format_rfc3339(issued.expiry),
        "kubeconfig written"
    );
    if forced {
        let patch = json!({ "metadata": { "annotations": { labels::FORCE_ROTATION: null } } });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    ctx.metrics
        .kubeconfig_expiry
        .with_label_values(&[namespace.as_str(), rkc.spec.runtime.as_str()])
        .set(issued.expiry.as_second());
    status.state = Some(KubeconfigState::Ready);
    status.last_sync = Some(synced);
    status.expiry = Some(format_rfc3339(issued.expiry));
    status.observed_generation = generation;
    set_condition(
        &mut status.conditions,
        "Ready",
        ConditionStatus::True,
        "KubeconfigSynced",
        format!("Secret {} holds a kubeconfig", secret_ref.name),
        generation,
    );
    write_status(&api, &name, rkc, status).await?;
    Ok(Action::requeue(rotate_after.max(Duration::from_secs(1))))
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
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Record why `rkc` does nothing, and wait for it (or its Runtime) to change.
async fn refuse(
    api: &Api<RuntimeKubeconfig>,
    rkc: &RuntimeKubeconfig,
    reason: &str,
    message: String,
) -> Result<Action, ReconcileError> {
    let mut status = rkc.status.clone().unwrap_or_default();
    status.state = Some(KubeconfigState::Failed);
    status.observed_generation = rkc.metadata.generation;
    set_condition(
        &mut status.conditions,
        "Ready",
        ConditionStatus::False,
        reason,
        message,
        rkc.metadata.generation,
    );
    write_status(api, &rkc.name_any(), rkc, status).await?;
    Ok(Action::await_change())
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
    crate::crd::patch_status(
        api,
        name,
        &status,
        &[
            "state",
            "lastSync",
            "expiry",
            "conditions",
            "observedGeneration",
        ],
    )
    .await?;
    Ok(())
}
