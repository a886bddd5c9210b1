//! The test Gardener, rule by rule, against the real garden API server: each rule refuses a
//! request that breaks it (so the rule is live), and the same request without the fault
//! goes through (so the refusal is the rule's). Rules and their Gardener sources:
//! `tests/src/gardener_sim/rules/`; what the simulator still does differently:
//! `tests/README.md`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tessera::gardener::shoot_resource;
use tessera_tests::env::ControlPlane;
use tessera_tests::gardener_sim::{Failure, Script, ShootScript};
use tessera_tests::probe::{client_for, eventually};
use tessera_tests::scenario;

use tessera_tests::Result;

const LIMIT: Duration = Duration::from_secs(60);
const PROJECT: &str = "garden-kyma-dev";

fn script() -> Script {
    let shoot = |f: fn(&mut ShootScript)| {
        let mut s = ShootScript::default();
        f(&mut s);
        s
    };
    let shoots = BTreeMap::from([
        // A deletion that fails for good with a code that allows force deletion.
        (
            "frozen".to_string(),
            shoot(|s| s.delete = vec![failed(&["ERR_CLEANUP_CLUSTER_RESOURCES"])]),
        ),
        // A deletion that fails with a code that does not.
        (
            "noforce".to_string(),
            shoot(|s| s.delete = vec![failed(&["ERR_INFRA_QUOTA_EXCEEDED"])]),
        ),
        // Gardener retries a retryable error by itself, gives up on a non-retryable one.
        (
            "flaky".to_string(),
            shoot(|s| s.create = vec![Failure::of(&["ERR_RETRYABLE_INFRA_DEPENDENCIES"])]),
        ),
        (
            "stuck".to_string(),
            shoot(|s| {
                s.create = vec![Failure::of(&["ERR_INFRA_QUOTA_EXCEEDED"])];
                s.reconcile = vec![Failure::of(&["ERR_CONFIGURATION_PROBLEM"])];
            }),
        ),
        (
            "shortlived".to_string(),
            shoot(|s| s.admin_kubeconfig_max_seconds = Some(4)),
        ),
        ("foreign".to_string(), shoot(|s| s.foreign_ca = true)),
    ]);
    Script {
        create_ms: 1000,
        reconcile_ms: 300,
        delete_ms: 300,
        shoots,
    }
}

fn failed(codes: &[&str]) -> Failure {
    let mut f = Failure::of(codes);
    f.state = Some("Failed".into());
    f
}

/// A Shoot Gardener accepts: AWS from the test garden's CloudProfile, partial versions
/// Gardener completes.
fn shoot(name: &str) -> Value {
    json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
        "metadata": {"name": name, "namespace": PROJECT},
        "spec": {
            "cloudProfile": {"kind": "CloudProfile", "name": "aws"},
            "region": "eu-central-1",
            "secretBindingName": "sap-aws-prod-01",
            "purpose": "evaluation",
            "kubernetes": {"version": "1.33"},
            "networking": {"type": "calico", "nodes": "10.250.0.0/16",
                "pods": "10.96.0.0/13", "services": "10.104.0.0/13"},
            "provider": {"type": "aws", "workers": [{
                "name": "worker", "minimum": 1, "maximum": 2, "maxSurge": 1, "maxUnavailable": 0,
                "machine": {"type": "m6i.large", "image": {"name": "gardenlinux", "version": "1592"}},
                "zones": ["eu-central-1a"],
            }]},
        },
    })
}

/// The worker of [`shoot`] with another maximum (a merge patch replaces the whole list).
fn worker_with_maximum(maximum: i64) -> Value {
    let mut worker = shoot("x")["spec"]["provider"]["workers"][0].clone();
    worker["maximum"] = json!(maximum);
    worker
}

fn object(doc: &Value) -> DynamicObject {
    serde_json::from_value(doc.clone()).expect("a Shoot object")
}

/// Shoots of the project as `client` sees them.
fn shoots(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), PROJECT, &shoot_resource())
}

/// The project's ServiceAccount, through the simulator (what hosts use).
async fn member(cp: &ControlPlane) -> Client {
    client_for(&cp.gardener_kubeconfig).await
}

/// An administrator of the garden, straight to its API server (Gardener's webhooks see it
/// all the same).
async fn admin(cp: &ControlPlane) -> Client {
    client_for(&cp.garden.kubeconfig).await
}

/// `result` is a refusal with HTTP `code` whose message contains every one of `words`.
fn refused<T: std::fmt::Debug>(result: kube::Result<T>, code: u16, words: &[&str]) -> Result {
    match result {
        Err(kube::Error::Api(s))
            if s.code == code && words.iter().all(|w| s.message.contains(w)) =>
        {
            Ok(())
        }
        Err(kube::Error::Api(s)) => Err(format!(
            "want {code} with {words:?}, got {} {}: {}",
            s.code, s.reason, s.message
        )),
        other => Err(format!(
            "want a {code} refusal with {words:?}, got {other:?}"
        )),
    }
}

fn accepted<T>(result: kube::Result<T>, what: &str) -> Result<T> {
    result.map_err(|e| format!("{what} should be accepted: {e}"))
}

async fn create(api: &Api<DynamicObject>, doc: &Value) -> kube::Result<DynamicObject> {
    api.create(&PostParams::default(), &object(doc)).await
}

async fn merge(api: &Api<DynamicObject>, name: &str, patch: Value) -> kube::Result<DynamicObject> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// Wait until Gardener's last operation on `name` is `state`.
async fn operation(
    api: &Api<DynamicObject>,
    name: &str,
    type_: &str,
    state: &str,
) -> Result<DynamicObject> {
    eventually(&format!("Shoot {name}: {type_} {state}"), LIMIT, || async {
        let shoot = api.get(name).await.ok()?;
        let op = &shoot.data["status"]["lastOperation"];
        (op["type"] == type_ && op["state"] == state).then_some(shoot)
    })
    .await
}

/// Server-side apply refuses fields Gardener does not have: `oidcConfig` left the API in
/// 2026-04 (the schema is generated from Gardener's Go types).
async fn unknown_fields_are_refused(cp: &ControlPlane) -> Result {
    let api = shoots(&member(cp).await);
    let mut doc = shoot("schema");
    doc["spec"]["kubernetes"]["kubeAPIServer"] = json!({"oidcConfig": {"clientID": "a"}});
    let apply = PatchParams::apply("test");
    let result = api.patch("schema", &apply, &Patch::Apply(&doc)).await;
    refused(result, 500, &["oidcConfig", "field not declared in schema"])?;
    accepted(
        api.patch("schema", &apply, &Patch::Apply(&shoot("schema")))
            .await,
        "the Shoot without it",
    )?;
    Ok(())
}

/// Gardener completes partial versions from the CloudProfile: the newest *supported*
/// Kubernetes 1.33 and the newest non-preview gardenlinux 1592; a full version stays.
async fn versions_are_defaulted(cp: &ControlPlane) -> Result {
    let api = shoots(&member(cp).await);
    let made = accepted(
        create(&api, &shoot("defaults")).await,
        "a Shoot with partial versions",
    )?;
    let spec = &made.data["spec"];
    if spec["kubernetes"]["version"] != "1.33.5"
        || spec["provider"]["workers"][0]["machine"]["image"]["version"] != "1592.10.0"
    {
        return Err(format!("defaulted: {}", spec));
    }
    let mut exact = shoot("exact");
    exact["spec"]["kubernetes"]["version"] = json!("1.33.2");
    let made = accepted(create(&api, &exact).await, "an exact version")?;
    if made.data["spec"]["kubernetes"]["version"] != "1.33.2" {
        return Err(format!(
            "exact version changed: {}",
            made.data["spec"]["kubernetes"]
        ));
    }
    let mut unknown = shoot("noversion");
    unknown["spec"]["kubernetes"]["version"] = json!("1.29");
    refused(
        create(&api, &unknown).await,
        403,
        &["couldn't find a suitable version for 1.29"],
    )
}

/// Fields Gardener never lets change, and the version rules.
async fn immutable_fields_and_versions(cp: &ControlPlane) -> Result {
    let api = shoots(&member(cp).await);
    accepted(create(&api, &shoot("immutable")).await, "the Shoot")?;
    for (patch, words) in [
        (
            json!({"spec": {"region": "eu-west-1"}}),
            vec!["spec.region", "field is immutable"],
        ),
        (
            json!({"spec": {"provider": {"type": "gcp"}}}),
            vec!["spec.provider.type", "field is immutable"],
        ),
        (
            json!({"spec": {"networking": {"pods": "10.128.0.0/13"}}}),
            vec!["spec.networking.pods", "field is immutable"],
        ),
        (
            json!({"spec": {"secretBindingName": "sap-gcp-prod-01"}}),
            vec!["spec.secretBindingName", "field is immutable"],
        ),
        (
            json!({"spec": {"kubernetes": {"version": "1.32.9"}}}),
            vec!["kubernetes version downgrade is not supported"],
        ),
        (
            json!({"spec": {"kubernetes": {"version": "1.35.0"}}}),
            vec!["kubernetes version upgrade cannot skip a minor version"],
        ),
    ] {
        refused(merge(&api, "immutable", patch.clone()).await, 422, &words)
            .map_err(|e| format!("{patch}: {e}"))?;
    }
    // From 1.34 secret bindings are refused: the upgrade has to move to a credentials
    // binding of the same Secret, the one change of binding Gardener allows.
    let upgrade = json!({"spec": {"kubernetes": {"version": "1.34"}}});
    refused(
        merge(&api, "immutable", upgrade).await,
        422,
        &["for Kubernetes versions >= 1.34, secretBindingName field is no longer supported"],
    )?;
    // A minor upgrade, moving to the credentials binding, and a changed node network are
    // allowed.
    let upgrade = json!({"spec": {"kubernetes": {"version": "1.34"}, "networking": {"nodes": "10.251.0.0/16"},
        "secretBindingName": null, "credentialsBindingName": "aws-credentials"}});
    let upgraded = accepted(
        merge(&api, "immutable", upgrade).await,
        "an upgrade to 1.34",
    )?;
    match upgraded.data["spec"]["kubernetes"]["version"].as_str() {
        Some("1.34.2") => Ok(()),
        other => Err(format!("1.34 defaulted to {other:?}")),
    }
}

/// Deletion needs the confirmation annotation; once deletion started the spec is frozen
/// (metadata may change); force deletion only while deleting and after one of five codes.
async fn deletion_rules(cp: &ControlPlane) -> Result {
    let api = shoots(&member(cp).await);
    for name in ["frozen", "noforce"] {
        accepted(create(&api, &shoot(name)).await, "the Shoot")?;
        operation(&api, name, "Create", "Succeeded").await?;
    }
    let force = json!({"metadata": {"annotations": {"confirmation.gardener.cloud/force-deletion": "true"}}});
    refused(
        merge(&api, "frozen", force.clone()).await,
        422,
        &["force-deletion annotation cannot be set when Shoot deletionTimestamp is nil"],
    )?;
    refused(
        api.delete("frozen", &DeleteParams::default()).await,
        403,
        &["must have a \"confirmation.gardener.cloud/deletion\" annotation to delete"],
    )?;
    for name in ["frozen", "noforce"] {
        let confirm =
            json!({"metadata": {"annotations": {"confirmation.gardener.cloud/deletion": "true"}}});
        accepted(merge(&api, name, confirm).await, "the confirmation")?;
        accepted(
            api.delete(name, &DeleteParams::default()).await,
            "a confirmed deletion",
        )?;
        operation(&api, name, "Delete", "Failed").await?;
    }
    let spec = json!({"spec": {"provider": {"workers": [worker_with_maximum(3)]}}});
    refused(
        merge(&api, "frozen", spec).await,
        422,
        &["cannot update shoot spec if deletion timestamp is set"],
    )?;
    accepted(
        merge(
            &api,
            "frozen",
            json!({"metadata": {"labels": {"note": "metadata-may-change"}}}),
        )
        .await,
        "a label",
    )?;
    refused(
        merge(&api, "noforce", force.clone()).await,
        422,
        &["does not contain one of these error codes"],
    )?;
    accepted(
        merge(&api, "frozen", force).await,
        "force deletion after ERR_CLEANUP_CLUSTER_RESOURCES",
    )?;
    eventually("the force-deleted Shoot to be gone", LIMIT, || async {
        api.get_opt("frozen").await.ok()?.is_none().then_some(())
    })
    .await
}

/// Objects a Shoot names must exist: its credentials binding and its structured
/// authentication ConfigMap (gardener plugin/pkg/global/resourcereferencemanager).
async fn references_must_exist(cp: &ControlPlane) -> Result {
    let client = member(cp).await;
    let api = shoots(&client);
    let mut doc = shoot("refs");
    doc["spec"]["secretBindingName"] = json!("missing-binding");
    refused(
        create(&api, &doc).await,
        403,
        &["secretbinding.core.gardener.cloud \"missing-binding\" not found"],
    )?;
    let mut doc = shoot("refs");
    doc["spec"]["kubernetes"]["kubeAPIServer"] =
        json!({"structuredAuthentication": {"configMapName": "auth-refs"}});
    refused(
        create(&api, &doc).await,
        403,
        &["failed to resolve structured authentication config map reference"],
    )?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), PROJECT);
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "auth-refs"}, "data": {"config.yaml": "{}"}}),
    )
    .unwrap();
    accepted(
        config_maps.create(&PostParams::default(), &cm).await,
        "the ConfigMap",
    )?;
    accepted(
        create(&api, &doc).await,
        "the Shoot once its ConfigMap exists",
    )
    .map(drop)
}

/// Shoot names, finalizers, seeds and the CloudProfile's offer.
async fn names_seeds_and_offer(cp: &ControlPlane) -> Result {
    let api = shoots(&member(cp).await);
    refused(
        create(&api, &shoot("much-too-long-name")).await,
        422,
        &["must not exceed 21 characters"],
    )?;
    let mut doc = shoot("fin");
    doc["metadata"]["finalizers"] = json!(["gardener"]);
    refused(
        create(&api, &doc).await,
        422,
        &["finalizer \"gardener\" cannot be added on creation"],
    )?;
    let mut doc = shoot("seeded");
    doc["spec"]["seedName"] = json!("aws-eu1");
    refused(
        create(&api, &doc).await,
        403,
        &["is not allowed to set .spec.seedName"],
    )?;
    let mut doc = shoot("offer");
    doc["spec"]["region"] = json!("mars-1");
    refused(
        create(&api, &doc).await,
        403,
        &["spec.region: Unsupported value: \"mars-1\""],
    )?;
    let mut doc = shoot("offer");
    doc["spec"]["provider"]["workers"][0]["machine"]["type"] = json!("m1.tiny");
    refused(
        create(&api, &doc).await,
        403,
        &["machine.type: Unsupported value: \"m1.tiny\""],
    )?;
    let mut doc = shoot("offer");
    doc["spec"]["provider"]["workers"][0]["zones"] = json!(["eu-west-1a"]);
    refused(
        create(&api, &doc).await,
        403,
        &["zones[0]: Unsupported value: \"eu-west-1a\""],
    )?;
    accepted(
        create(&api, &shoot("offer")).await,
        "what the CloudProfile offers",
    )
    .map(drop)
}

/// A project member has Gardener's rights in its project namespace and none elsewhere:
/// the garden API server itself enforces them, with the caller's own credentials.
async fn project_rights(cp: &ControlPlane) -> Result {
    let client = member(cp).await;
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &shoot_resource());
    refused(
        all.list(&ListParams::default()).await,
        403,
        &["cannot list resource \"shoots\""],
    )?;
    accepted(
        shoots(&client).list(&ListParams::default()).await,
        "listing the project's Shoots",
    )?;
    let namespaces: Api<Namespace> = Api::all(admin(cp).await);
    let other: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "garden-other"}})).unwrap();
    let _ = namespaces.create(&PostParams::default(), &other).await;
    let elsewhere: Api<DynamicObject> =
        Api::namespaced_with(client, "garden-other", &shoot_resource());
    let mut doc = shoot("elsewhere");
    doc["metadata"]["namespace"] = json!("garden-other");
    refused(
        create(&elsewhere, &doc).await,
        403,
        &["cannot create resource \"shoots\""],
    )
}

/// `POST shoots/<name>/adminkubeconfig` as Gardener answers it.
async fn request_kubeconfig(client: &Client, shoot: &str, seconds: i64) -> kube::Result<Value> {
    let body = json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1", "kind": "AdminKubeconfigRequest",
        "spec": {"expirationSeconds": seconds},
    });
    let request = http::Request::post(format!(
        "/apis/core.gardener.cloud/v1beta1/namespaces/{PROJECT}/shoots/{shoot}/adminkubeconfig"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&body).unwrap())
    .unwrap();
    client.request(request).await
}

async fn client_of(response: &Value) -> Result<Client> {
    use base64::Engine as _;
    let text = response["status"]["kubeconfig"]
        .as_str()
        .ok_or("no kubeconfig")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| e.to_string())?;
    let kc = Kubeconfig::from_yaml(std::str::from_utf8(&bytes).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// An error and its causes, one line.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(e), |e| e.source())
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

/// Admin kubeconfigs: at least 600 s, lowered to Gardener's maximum, only once the Shoot
/// advertises its API server, and only for who may create them.
async fn admin_kubeconfig_bounds(cp: &ControlPlane) -> Result {
    let client = member(cp).await;
    let api = shoots(&client);
    accepted(create(&api, &shoot("kc")).await, "the Shoot")?;
    refused(
        request_kubeconfig(&client, "kc", 3600).await,
        422,
        &["no suitable advertised address"],
    )?;
    operation(&api, "kc", "Create", "Succeeded").await?;
    refused(
        request_kubeconfig(&client, "kc", 599).await,
        422,
        &["may not specify a duration less than 10 minutes"],
    )?;
    let granted = accepted(request_kubeconfig(&client, "kc", 7 * 86400).await, "a week")?;
    let expiry: jiff::Timestamp = granted["status"]["expirationTimestamp"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .map_err(|e| format!("{e}"))?;
    let lifetime = expiry.duration_since(jiff::Timestamp::now()).as_secs();
    if !(86_000..=86_400).contains(&lifetime) {
        return Err(format!(
            "a week should be lowered to Gardener's maximum of 24 h, got {lifetime} s"
        ));
    }
    let runtime = client_of(&granted).await?;
    accepted(
        Api::<Namespace>::all(runtime)
            .list(&ListParams::default())
            .await,
        "the runtime cluster with a verified certificate",
    )?;
    // A token that is no one's is refused.
    let stranger = kube::Client::try_from({
        let mut config = kube::Config::new(cp.sim_url.parse().map_err(|e| format!("{e}"))?);
        config.auth_info.token = Some("no-such-token".to_string().into());
        config
    })
    .map_err(|e| e.to_string())?;
    refused(
        request_kubeconfig(&stranger, "kc", 600).await,
        401,
        &["Unauthorized"],
    )
}

/// The credential of an admin kubeconfig: the cluster's CA (a cluster presenting a
/// certificate of another CA is refused by clients) and a client certificate that really
/// expires.
async fn admin_kubeconfig_credentials(cp: &ControlPlane) -> Result {
    let client = member(cp).await;
    let api = shoots(&client);
    for name in ["shortlived", "foreign"] {
        accepted(create(&api, &shoot(name)).await, "the Shoot")?;
    }
    for name in ["shortlived", "foreign"] {
        operation(&api, name, "Create", "Succeeded").await?;
    }
    let foreign = client_of(&accepted(
        request_kubeconfig(&client, "foreign", 600).await,
        "foreign",
    )?)
    .await?;
    match Api::<Namespace>::all(foreign)
        .list(&ListParams::default())
        .await
    {
        Err(e) if causes(&e).contains("invalid peer certificate") => {}
        other => {
            return Err(format!(
                "a cluster whose certificate another CA signed must be refused, got {other:?}"
            ));
        }
    }
    let short = client_of(&accepted(
        request_kubeconfig(&client, "shortlived", 600).await,
        "short",
    )?)
    .await?;
    let listed = Api::<Namespace>::all(short.clone());
    accepted(
        listed.list(&ListParams::default()).await,
        "a fresh credential",
    )?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    refused(
        listed.list(&ListParams::default()).await,
        401,
        &["Unauthorized"],
    )
}

/// The gardenlet's outcomes: a retryable error is retried by Gardener itself (`Error`), a
/// non-retryable one ends `Failed` until asked to `retry`; a failed Reconcile likewise.
async fn operations_fail_as_scripted(cp: &ControlPlane) -> Result {
    let api = shoots(&member(cp).await);
    for name in ["flaky", "stuck"] {
        accepted(create(&api, &shoot(name)).await, "the Shoot")?;
    }
    let error = operation(&api, "flaky", "Create", "Error").await?;
    let description = error.data["status"]["lastOperation"]["description"]
        .as_str()
        .unwrap_or_default();
    if !description.ends_with(" Operation will be retried.")
        || error.data["status"]["lastErrors"][0]["codes"][0] != "ERR_RETRYABLE_INFRA_DEPENDENCIES"
    {
        return Err(format!("an Error: {}", error.data["status"]));
    }
    operation(&api, "flaky", "Create", "Succeeded").await?;
    operation(&api, "stuck", "Create", "Failed").await?;
    accepted(
        merge(
            &api,
            "stuck",
            json!({"metadata": {"annotations": {"gardener.cloud/operation": "retry"}}}),
        )
        .await,
        "retry",
    )?;
    operation(&api, "stuck", "Create", "Succeeded").await?;
    let bump = json!({"spec": {"provider": {"workers": [worker_with_maximum(3)]}}});
    accepted(merge(&api, "stuck", bump).await, "a change")?;
    let failed = operation(&api, "stuck", "Reconcile", "Failed").await?;
    match failed.annotations().get("gardener.cloud/operation") {
        None => Ok(()),
        Some(op) => Err(format!("the retry annotation should be gone, found {op}")),
    }
}

/// The expected Shoots of the examples are what Gardener accepts (dry run, as the project's
/// ServiceAccount, with the structured-authentication ConfigMaps they name).
async fn example_shoots_pass_gardener(cp: &ControlPlane) -> Result {
    let client = member(cp).await;
    let api = shoots(&client);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), PROJECT);
    let dir = tessera_tests::workspace().join("examples/expected");
    for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let doc: Value =
            serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(name) =
            doc["spec"]["kubernetes"]["kubeAPIServer"]["structuredAuthentication"]["configMapName"]
                .as_str()
        {
            let cm: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": name}, "data": {"config.yaml": "{}"}}),
            )
            .unwrap();
            let _ = config_maps.create(&PostParams::default(), &cm).await;
        }
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let params = PatchParams::apply("examples").dry_run();
        api.patch(&name, &params, &Patch::Apply(&doc))
            .await
            .map_err(|e| format!("{}: Gardener refuses it: {e}", path.display()))?;
    }
    Ok(())
}

fn main() {
    let sim = std::path::PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    tessera_tests::scenarios::run(
        &sim,
        &script(),
        vec![
            scenario!(unknown_fields_are_refused),
            scenario!(versions_are_defaulted),
            scenario!(immutable_fields_and_versions),
            scenario!(deletion_rules),
            scenario!(references_must_exist),
            scenario!(names_seeds_and_offer),
            scenario!(project_rights),
            scenario!(admin_kubeconfig_bounds),
            scenario!(admin_kubeconfig_credentials),
            scenario!(operations_fail_as_scripted),
            scenario!(example_shoots_pass_gardener),
        ],
    )
}
