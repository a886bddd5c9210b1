//! The runtime cluster a RuntimeAccess may act in: that of the Runtime of its own
//! namespace, through the kubeconfig Secret Tessera wrote for that Runtime (its
//! RuntimeKubeconfig bound to it, the Secret controlled by that RuntimeKubeconfig) — never
//! a Secret someone else put under that name.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use crate::controllers::kubeconfig::{owns, unbound};
use crate::controllers::{Context, ReconcileError, labels, runtime_cluster};
use crate::crd::{Reason, Runtime, RuntimeKubeconfig};

/// Whether and how the Runtime's cluster can be reached.
pub(crate) enum Reach {
    /// Its client and the admin kubeconfig's text (for the server and CA it names).
    Cluster { client: Client, admin: String },
    /// Not now: why, as a reason and message.
    Wait(Reason, String),
    /// The Runtime does not exist or is being deleted: its cluster goes with it.
    Gone(String),
}

/// How to reach the cluster of Runtime `runtime` of `namespace`.
pub(crate) async fn reach(
    ctx: &Context,
    namespace: &str,
    runtime: &str,
) -> Result<Reach, ReconcileError> {
    let runtimes: Api<Runtime> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(rt) = runtimes.get_opt(runtime).await? else {
        return Ok(Reach::Gone(format!(
            "Runtime {namespace}/{runtime} does not exist"
        )));
    };
    if rt.metadata.deletion_timestamp.is_some() {
        return Ok(Reach::Gone(format!(
            "Runtime {namespace}/{runtime} is being deleted"
        )));
    }
    let pending = |why: String| Ok(Reach::Wait(Reason::KubeconfigPending, why));
    let kubeconfigs: Api<RuntimeKubeconfig> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(rkc) = kubeconfigs.get_opt(runtime).await? else {
        return pending(format!(
            "waiting for the kubeconfig of Runtime {namespace}/{runtime}"
        ));
    };
    if let Some(why) = unbound(&rkc, Some(&rt)) {
        return pending(format!("RuntimeKubeconfig {namespace}/{runtime}: {why}"));
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let name = labels::kubeconfig_secret(runtime);
    let secret = secrets.get_opt(&name).await?;
    let Some(secret) = secret.filter(|s| owns(&rkc, s)) else {
        return pending(format!(
            "Secret {namespace}/{name} is not (yet) the kubeconfig Tessera wrote for Runtime {runtime}"
        ));
    };
    let admin = secret.data.as_ref().and_then(|d| d.get("config"));
    let Some(admin) = admin.and_then(|b| String::from_utf8(b.0.clone()).ok()) else {
        return pending(format!("Secret {namespace}/{name} holds no kubeconfig"));
    };
    // From the Secret just read: reading it again for the client is a request per pass.
    match runtime_cluster::client_of(ctx, runtime, &secret).await {
        Ok(client) => Ok(Reach::Cluster { client, admin }),
        Err(e) => Ok(Reach::Wait(Reason::TargetUnreachable, e.to_string())),
    }
}

/// The Runtime a RuntimeAccess's objects are in (`status.runtime`, else the spec's).
pub(crate) fn runtime_of(access: &crate::crd::RuntimeAccess) -> String {
    access
        .status
        .as_ref()
        .and_then(|s| s.runtime.clone())
        .unwrap_or_else(|| access.spec.runtime.clone())
}
