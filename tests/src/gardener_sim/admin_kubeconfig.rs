//! `POST …/shoots/{name}/adminkubeconfig`, as Gardener answers it
//! (gardener pkg/apiserver/registry/core/shoot/storage/kubeconfig.go `Create`,
//! admin_kubeconfig.go, pkg/api/authentication/validation): the caller is authenticated and
//! authorized like any request (verb `create` on `shoots/adminkubeconfig`), the lifetime is
//! at least 600 s and at most the configured maximum, the Shoot must have advertised an API
//! server address, and the kubeconfig holds the cluster's CA and a client certificate of
//! the cluster's client CA (CN `gardener.cloud:admin:<user>`) expiring when
//! `status.expirationTimestamp` says.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use k8s_openapi::api::authentication::v1::TokenReview;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::Sim;
use super::proxy::status;
use super::rules::{self, Refusal};

fn refusal(r: Refusal) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": r.message, "reason": r.reason, "code": r.code,
    });
    let code = StatusCode::from_u16(r.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The request's bearer token.
fn bearer(request: &Request) -> Option<String> {
    let header = request.headers().get("authorization")?.to_str().ok()?;
    header.strip_prefix("Bearer ").map(String::from)
}

/// The user behind `token` (a TokenReview, as the API server does).
async fn authenticate(sim: &Sim, token: Option<String>) -> Option<(String, Vec<String>)> {
    let token = token?;
    let review: TokenReview =
        serde_json::from_value(json!({ "spec": { "token": token } })).expect("a TokenReview");
    let api: Api<TokenReview> = Api::all(sim.client.clone());
    let status = api
        .create(&PostParams::default(), &review)
        .await
        .ok()?
        .status?;
    let user = status.user.filter(|_| status.authenticated == Some(true))?;
    Some((user.username?, user.groups.unwrap_or_default()))
}

pub(super) async fn handle(sim: &Sim, ns: &str, name: &str, request: Request) -> Response {
    let token = bearer(&request);
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let Some(user) = authenticate(sim, token).await else {
        return status(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized".into(),
        );
    };
    let create = json!({
        "group": "core.gardener.cloud", "resource": "shoots", "subresource": "adminkubeconfig",
        "verb": "create", "namespace": ns, "name": name,
    });
    if !sim.allowed(&user.0, &user.1, create).await {
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!(
                "shoots.core.gardener.cloud \"{name}\" is forbidden: User \"{}\" cannot create resource \"shoots/adminkubeconfig\" in API group \"core.gardener.cloud\" in the namespace \"{ns}\"",
                user.0
            ),
        );
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let max = sim
        .script()
        .shoots
        .get(name)
        .and_then(|s| s.admin_kubeconfig_max_seconds)
        .unwrap_or(sim.config.admin_kubeconfig_max_seconds);
    let seconds = match rules::admin_kubeconfig_seconds(&body, max) {
        Ok(s) => s,
        Err(r) => return refusal(r),
    };
    let Some(shoot) = sim
        .garden_object("shoots", Some(ns.into()), name.into())
        .await
    else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("shoots.core.gardener.cloud \"{name}\" not found"),
        );
    };
    let addresses = match rules::admin_kubeconfig_addresses(&shoot) {
        Ok(a) => a,
        Err(r) => return refusal(r),
    };
    // gardener admin_kubeconfig.go: who may list Secrets everywhere is a Gardener admin.
    let list_secrets = json!({"group": "", "resource": "secrets", "verb": "list"});
    let group = match sim.allowed(&user.0, &user.1, list_secrets).await {
        true => "gardener.cloud:system:admins",
        false => "gardener.cloud:project:admins",
    };
    issue(sim, ns, name, &user.0, group, &addresses, seconds)
}

/// The AdminKubeconfigRequest answer: a kubeconfig with one cluster and context per
/// address and one user, a client certificate valid for `seconds`.
fn issue(
    sim: &Sim,
    ns: &str,
    name: &str,
    user: &str,
    group: &str,
    addresses: &[(String, String)],
    seconds: i64,
) -> Response {
    let expiry = jiff::Timestamp::now().as_second() + seconds;
    let cn = format!("gardener.cloud:admin:{user}");
    let pair = match sim.client_ca.client(&cn, &[group], expiry) {
        Ok(p) => p,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e),
    };
    let ca = match sim.script().shoots.get(name).is_some_and(|s| s.foreign_ca) {
        // A cluster presenting a certificate of another CA than the kubeconfig names.
        true => crate::certs::Ca::new("another-ca").map(|c| c.cert),
        false => std::fs::read_to_string(&sim.config.runtime_ca).map_err(|e| e.to_string()),
    };
    let ca = match ca {
        Ok(ca) => ca,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e),
    };
    let kubeconfig = kubeconfig(ns, name, addresses, &ca, &pair);
    let expiry = jiff::Timestamp::from_second(expiry).expect("a timestamp");
    let body = json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1",
        "kind": "AdminKubeconfigRequest",
        "spec": { "expirationSeconds": seconds },
        "status": {
            "kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig),
            "expirationTimestamp": expiry.to_string(),
        },
    });
    (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Gardener's kubeconfig shape: clusters and contexts `<ns>--<shoot>-<address name>`, one
/// user named after the first.
fn kubeconfig(
    ns: &str,
    shoot: &str,
    addresses: &[(String, String)],
    ca: &str,
    pair: &crate::certs::Pair,
) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let names: Vec<String> = addresses
        .iter()
        .map(|(n, _)| format!("{ns}--{shoot}-{n}"))
        .collect();
    let user = names.first().cloned().unwrap_or_default();
    let clusters: Vec<Value> = names
        .iter()
        .zip(addresses)
        .map(|(n, (_, url))| json!({"name": n, "cluster": {"server": url, "certificate-authority-data": b64(ca)}}))
        .collect();
    let contexts: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "context": {"cluster": n, "user": user}}))
        .collect();
    let doc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": clusters, "contexts": contexts,
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(&pair.cert), "client-key-data": b64(&pair.key),
        }}],
        "preferences": {},
    });
    serde_saphyr::to_string(&doc).unwrap_or_else(|_| doc.to_string())
}
