//! Gardener's admission and validation, run where the real API server runs them: as
//! admission webhooks the garden API server calls for every Shoot create, update, patch
//! (server-side apply included, after the merge) and delete, whoever sends it. The mutating
//! webhook is Gardener's ShootMutator and strategy defaulting, the validating one its
//! strategy validation and validating admission plugins (`rules`). Served over TLS with a
//! CA made at start; both configurations are (re)written then, pointing here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::Sim;
use super::rules::{self, Facts, Operation, Refusal, User};
use crate::certs::Ca;

/// Webhook names: the API server prefixes a refusal with `admission webhook "<name>" denied
/// the request: `.
const MUTATING: &str = "admission.shoots.core.gardener.cloud";
const VALIDATING: &str = "validation.shoots.core.gardener.cloud";

/// A TCP listener whose connections are TLS, for `axum::serve`.
/// A TCP listener whose connections are TLS (a failed handshake is skipped).
pub(crate) struct TlsListener {
    pub(crate) tcp: tokio::net::TcpListener,
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

pub(crate) fn tls_acceptor(
    serving: &crate::certs::Pair,
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs =
        CertificateDer::pem_slice_iter(serving.cert.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(serving.key.as_bytes())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Serve the webhooks on `ip` (any free port) and register them with the garden API server.
pub async fn serve(sim: Arc<Sim>, ip: std::net::IpAddr) -> anyhow::Result<()> {
    let ca = Ca::new("gardener-sim-webhook-ca").map_err(anyhow::Error::msg)?;
    let serving = ca
        .serving("gardener-sim", &[ip.to_string()])
        .map_err(anyhow::Error::msg)?;
    let tcp = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
    let addr = tcp.local_addr()?;
    let listener = TlsListener {
        tcp,
        acceptor: tls_acceptor(&serving)?,
    };
    let app = axum::Router::new()
        .route("/mutate", axum::routing::post(mutate))
        .route("/validate", axum::routing::post(validate))
        .with_state(sim.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    register(&sim.client, &format!("https://{addr}"), &ca.cert).await?;
    until_live(&sim.client).await
}

/// Wait until the API server calls the webhooks (it picks up new configurations a moment
/// later): a dry-run Shoot Gardener refuses must be refused by them.
async fn until_live(client: &kube::Client) -> anyhow::Result<()> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &super::resource("shoots"));
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
        "metadata": {"name": "gardener-sim-probe", "finalizers": ["gardener"]},
    }))?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    for _ in 0..100 {
        match api.create(&params, &probe).await {
            Err(kube::Error::Api(s)) if s.message.contains("admission webhook") => return Ok(()),
            _ => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    anyhow::bail!("the garden API server does not call the simulator's webhooks")
}

/// (Re)write both webhook configurations, pointing at `base`.
async fn register(client: &kube::Client, base: &str, ca: &str) -> anyhow::Result<()> {
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let hook = |name: &str, path: &str, operations: &[&str]| {
        json!({
            "name": name,
            "clientConfig": {"url": format!("{base}{path}"), "caBundle": bundle},
            "rules": [{
                "apiGroups": ["core.gardener.cloud"], "apiVersions": ["v1beta1"],
                "resources": ["shoots"], "operations": operations, "scope": "Namespaced",
            }],
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
        })
    };
    for (kind, plural, doc) in [
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            hook(MUTATING, "/mutate", &["CREATE", "UPDATE"]),
        ),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            hook(VALIDATING, "/validate", &["CREATE", "UPDATE", "DELETE"]),
        ),
    ] {
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "gardener-sim"}, "webhooks": [doc],
        });
        let params = PatchParams::apply("gardener-sim").force();
        api.patch("gardener-sim", &params, &Patch::Apply(&config))
            .await?;
    }
    Ok(())
}

/// One AdmissionReview request, as far as the rules need it.
struct Request {
    uid: Value,
    operation: Operation,
    namespace: String,
    name: String,
    object: Option<Value>,
    old: Option<Value>,
    user: User,
}

fn request(review: &Value) -> Option<Request> {
    let r = &review["request"];
    let operation = match r["operation"].as_str()? {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        _ => return None,
    };
    let some = |v: &Value| (!v.is_null()).then(|| v.clone());
    Some(Request {
        uid: r["uid"].clone(),
        operation,
        namespace: r["namespace"].as_str().unwrap_or_default().to_string(),
        name: r["name"].as_str().unwrap_or_default().to_string(),
        object: some(&r["object"]),
        old: some(&r["oldObject"]),
        user: User {
            name: r["userInfo"]["username"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            groups: r["userInfo"]["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.as_str().map(String::from))
                .collect(),
        },
    })
}

fn response(uid: &Value, result: Result<Option<Value>, Refusal>) -> Response {
    use base64::Engine as _;
    let mut response = json!({ "uid": uid, "allowed": true });
    match result {
        Ok(None) => {}
        Ok(Some(patch)) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(encoded);
        }
        Err(refusal) => {
            let causes: Vec<Value> = refusal
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            response["allowed"] = json!(false);
            response["status"] = json!({
                "status": "Failure", "code": refusal.code, "reason": refusal.reason,
                "message": refusal.message, "details": {"causes": causes},
            });
        }
    }
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response,
    });
    ([("content-type", "application/json")], review.to_string()).into_response()
}

fn malformed(review: &Value) -> Response {
    response(
        &review["request"]["uid"],
        Err(Refusal {
            code: 400,
            reason: "BadRequest",
            message: "the simulator could not read this AdmissionReview".into(),
            causes: Vec::new(),
            rules: Vec::new(),
        }),
    )
}

async fn mutate(State(sim): State<Arc<Sim>>, body: axum::body::Bytes) -> Response {
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(req) = request(&review) else {
        return malformed(&review);
    };
    let Some(original) = req.object.clone() else {
        return response(&req.uid, Ok(None));
    };
    let facts = facts(&sim, &req).await;
    let mut mutated = original.clone();
    let result = rules::mutate(
        req.operation,
        &mut mutated,
        req.old.as_ref(),
        &req.user,
        &facts,
    );
    if let Err(refusal) = &result {
        sim.refused(&req.name, &req.user.name, refusal);
    }
    response(&req.uid, result.map(|()| json_patch(&original, &mutated)))
}

async fn validate(State(sim): State<Arc<Sim>>, body: axum::body::Bytes) -> Response {
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(req) = request(&review) else {
        return malformed(&review);
    };
    let facts = facts(&sim, &req).await;
    let result = rules::validate(
        req.operation,
        req.object.as_ref(),
        req.old.as_ref(),
        &req.user,
        &facts,
    );
    if let Err(refusal) = &result {
        sim.refused(&req.name, &req.user.name, refusal);
    }
    response(&req.uid, result.map(|()| None))
}

/// A JSON patch taking `from` to `to`, replacing the top-level parts that differ (`None`:
/// nothing to change). `add` replaces a member that exists.
fn json_patch(from: &Value, to: &Value) -> Option<Value> {
    let mut ops = Vec::new();
    if from["metadata"]["annotations"] != to["metadata"]["annotations"] {
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": to["metadata"]["annotations"]}));
    }
    if from["spec"] != to["spec"] {
        ops.push(json!({"op": "add", "path": "/spec", "value": to["spec"]}));
    }
    (!ops.is_empty()).then_some(Value::Array(ops))
}

/// Look up what the rules need for `req`, as Gardener's admission plugins do (with
/// Gardener's own rights, not the caller's).
async fn facts(sim: &Sim, req: &Request) -> Facts {
    let needs = rules::needs(req.object.as_ref(), req.old.as_ref());
    let get = |resource: &'static str, name: String, namespace: Option<String>| {
        sim.garden_object(resource, namespace, name)
    };
    let mut facts = Facts {
        now: jiff::Timestamp::now(),
        project: project_of(sim, &req.namespace).await,
        cloud_profile: None,
        secret_bindings: BTreeMap::new(),
        credentials_bindings: BTreeMap::new(),
        config_maps: BTreeMap::new(),
        secrets: BTreeMap::new(),
        may_bind: may_bind(sim, req).await,
    };
    if let Some(name) = needs.cloud_profile {
        facts.cloud_profile = get("cloudprofiles", name, None).await;
    }
    let ns = Some(req.namespace.clone());
    for name in needs.secret_bindings {
        let found = get("secretbindings", name.clone(), ns.clone()).await;
        facts.secret_bindings.insert(name, found);
    }
    for name in needs.credentials_bindings {
        let found = get("credentialsbindings", name.clone(), ns.clone()).await;
        facts.credentials_bindings.insert(name, found);
    }
    for name in needs.config_maps {
        let found = get("configmaps", name.clone(), ns.clone()).await;
        facts.config_maps.insert(name, found);
    }
    for name in needs.secrets {
        let found = get("secrets", name.clone(), ns.clone()).await;
        facts.secrets.insert(name, found);
    }
    facts
}

/// The Project whose `spec.namespace` is `namespace`: its name and whether it is being
/// deleted.
async fn project_of(sim: &Sim, namespace: &str) -> Option<(String, bool)> {
    let api: Api<DynamicObject> = Api::all_with(sim.client.clone(), &super::resource("projects"));
    let projects = api.list(&Default::default()).await.ok()?;
    projects
        .items
        .into_iter()
        .find(|p| p.data["spec"]["namespace"] == namespace)
        .map(|p| {
            let deleting = p.metadata.deletion_timestamp.is_some();
            (p.metadata.name.unwrap_or_default(), deleting)
        })
}

/// Whether the requester may `update shoots/binding` (set `spec.seedName`).
async fn may_bind(sim: &Sim, req: &Request) -> bool {
    let binding = json!({
        "group": "core.gardener.cloud", "resource": "shoots", "subresource": "binding",
        "verb": "update", "namespace": req.namespace,
    });
    sim.allowed(&req.user.name, &req.user.groups, binding).await
}
