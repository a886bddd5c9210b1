//! Switching a KIM landscape to Tessera: four Runtimes, one per provider, with OIDC, an API
//! server ACL (aws, azure), audit logs (one with KIM's experimental policy), external DNS,
//! credentials bindings and a registry cache with credentials (aws: KIM's garden copy of the
//! runtime cluster's Secret), whose Shoots are the ones KIM's own conversion makes
//! (`tests/kim/shoot-*.yaml`, each field citing the KIM function that sets it — not
//! Tessera's render), applied by field manager `kim` with KIM's structured-authentication
//! ConfigMaps. Tessera runs with KIM's landscape configuration (`tests/kim/landscape.yaml`).
//!
//! Without `--takeover-kim` every Runtime is refused naming the flag; with it every Runtime
//! becomes Ready without a single Shoot write and with KIM's objects kept; then one
//! Runtime's worker maximum changes and exactly that Shoot is patched.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use tessera_tests::probe::eventually;

use super::{ControlPlane, LIMIT, Result, RuntimeState, Scenario, condition};

const PROVIDERS: [&str; 4] = ["aws", "azure", "gcp", "openstack"];
const PROJECT: &str = "garden-kyma-dev";

/// One provider's Runtime and the Shoot KIM made for it.
struct Seeded {
    runtime: Value,
    shoot: String,
    /// uids of the Shoot and its ConfigMap as KIM created them.
    uids: [String; 2],
}

impl Seeded {
    fn id(&self) -> &str {
        self.runtime["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
    }
}

pub(super) async fn kim_landscape(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-kimland").await;
    audit_policies(&s).await?;
    let cache_copy = kim_cache_credentials(&s).await?;
    let info_uid = kim_provisioning_info(&s).await?;
    let mut landscape = Vec::new();
    for provider in PROVIDERS {
        landscape.push(seed(&s, provider).await?);
    }
    let writes_before = writes(cp, &landscape);
    let config = tessera_tests::workspace().join("tests/kim/landscape.yaml");
    let config = config.display().to_string();

    let refused = s.host("a", &["--config", &config]);
    for seeded in &landscape {
        s.create(&seeded.runtime).await?;
    }
    for seeded in &landscape {
        let rt = s
            .wait_state(seeded.id(), RuntimeState::Failed, &refused)
            .await?;
        refused_naming_the_flag(&rt).map_err(|e| format!("{}: {e}", seeded.id()))?;
    }
    drop(refused);

    let kim_oidc = kim_openid_connect(&s).await?;
    let takeover = [
        "--config",
        &config,
        "--takeover-kim",
        "--kim-runtime-namespace",
        "t-kimland",
        "--registry-cache-credentials",
        "--kyma-provisioning-info",
        "--runtime-namespace",
        "kyma-system",
    ];
    let host = s.host("b", &takeover);
    for seeded in &landscape {
        s.wait_state(seeded.id(), RuntimeState::Ready, &host)
            .await?;
    }
    let after = writes(cp, &landscape);
    if after != writes_before {
        return Err(format!(
            "Shoots were written on takeover: {writes_before:?} → {after:?}; host log:\n{}",
            host.logs()
        ));
    }
    for seeded in &landscape {
        kept(&s, seeded).await?;
        s.no_refusals(&seeded.shoot)?;
    }
    oidc_adopted(&s, &landscape, &kim_oidc).await?;
    cache_copy_adopted(&s, &landscape[0], &cache_copy).await?;
    one_change_one_patch(&s, cp, &landscape, after).await?;
    provisioning_info_taken_over(&s, &landscape[0], &info_uid).await?;
    // That patch's reconcile read the runtime cluster's Secret: equal data, same copy.
    cache_copy_adopted(&s, &landscape[0], &cache_copy).await
}

/// KIM's `kyma-system/kyma-provisioning-info` in the (shared) runtime cluster, applied by
/// field manager `kim` with KIM's label. Its uid.
async fn kim_provisioning_info(s: &Scenario<'_>) -> Result<String> {
    let api: Api<ConfigMap> = Api::namespaced(s.runtime_client.clone(), "kyma-system");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kyma-provisioning-info", "namespace": "kyma-system",
            "labels": {"reconciler.kyma-project.io/managed-by": "infrastructure-manager"}},
        "data": {"details": "workerPools:\n  kyma:\n    name: old\n"}});
    let applied = api
        .patch(
            "kyma-provisioning-info",
            &PatchParams::apply("kim").force(),
            &Patch::Apply(&cm),
        )
        .await
        .map_err(|e| format!("apply KIM's kyma-provisioning-info: {e}"))?;
    Ok(applied.uid().unwrap_or_default())
}

/// After the aws patch, KIM's ConfigMap (same object) holds what KIM's
/// `ToKymaProvisioningInfo` makes of the aws Runtime (`tests/kim/provisioning-info-aws.yaml`).
async fn provisioning_info_taken_over(s: &Scenario<'_>, aws: &Seeded, uid: &str) -> Result {
    let dir = tessera_tests::workspace().join("tests/kim");
    let read = |name: &str| -> Result<Value> {
        let text = std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}"))?;
        serde_saphyr::from_str(&text).map_err(|e| format!("{name}: {e}"))
    };
    let mut expected = read("provisioning-info-aws.yaml")?;
    expected["infrastructureConfig"] =
        read("shoot-aws.yaml")?["spec"]["provider"]["infrastructureConfig"].clone();
    let api: Api<ConfigMap> = Api::namespaced(s.runtime_client.clone(), "kyma-system");
    let found = eventually(
        "kyma-provisioning-info of the aws Runtime",
        LIMIT,
        || async {
            let cm = api.get("kyma-provisioning-info").await.ok()?;
            let text = cm.data.as_ref()?.get("details")?.clone();
            let details: Value = serde_saphyr::from_str(&text).ok()?;
            (details["runtimeID"] == aws.id()
                && details["workerPools"]["kyma"]["autoScalerMax"] == 11)
                .then_some((cm, details))
        },
    )
    .await?;
    let (cm, mut details) = found;
    if cm.uid().as_deref() != Some(uid) {
        return Err("KIM's kyma-provisioning-info was replaced, not taken over".into());
    }
    let stamped = details
        .as_object_mut()
        .and_then(|d| d.remove("lastReconcileTime"))
        .is_some_and(|t| {
            t.as_str()
                .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
        });
    if !stamped || details != expected {
        return Err(format!(
            "kyma-provisioning-info differs from KIM's:\n{}",
            tessera_sdk::testing::yaml_diff(&expected, &details)
        ));
    }
    Ok(())
}

const CACHE_COPY: &str = "reg-cache-7d1e9a40-5b2c-4f3d-9e8a-1c2b3d4e5f60";
const CACHE_UID: &str = "0f6c1d2e-3b4a-4c5d-8e9f-a0b1c2d3e4f5";

/// The aws Runtime's registry cache credentials as KIM keeps them: Secret
/// `kyma-system/dockerhub-credentials` in the runtime cluster and its garden copy as
/// `GardenSecretSyncer.newGardenSecret` makes it (immutable, KIM's labels and annotations).
/// The copy's uid.
async fn kim_cache_credentials(s: &Scenario<'_>) -> Result<String> {
    let data = json!({"username": "cm9ib3Q=", "password": "czNjcjN0"});
    let namespaces: Api<Namespace> = Api::all(s.runtime_client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "kyma-system"}}))
        .map_err(|e| e.to_string())?;
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(format!("create kyma-system: {e}")),
    }
    let skr: Api<Secret> = Api::namespaced(s.runtime_client.clone(), "kyma-system");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "dockerhub-credentials"}, "data": data,
    }))
    .map_err(|e| e.to_string())?;
    skr.create(&PostParams::default(), &secret)
        .await
        .map_err(|e| format!("create the runtime cluster's cache Secret: {e}"))?;
    let copy: Secret = serde_json::from_value(json!({
        "metadata": {"name": CACHE_COPY, "namespace": PROJECT,
            "labels": {"kyma-project.io/runtime-id": "6f7d2b8a-7a1c-4f6e-9f5b-2d1c0e4b9a10",
                "kyma-project.io/registry-cache-id": CACHE_UID,
                "app.kubernetes.io/managed-by": "infrastructure-manager"},
            "annotations": {"kyma-project.io/registry-cache-name": "dockerhub",
                "kyma-project.io/registry-cache-namespace": "kyma-system"}},
        "immutable": true,
        "data": data,
    }))
    .map_err(|e| e.to_string())?;
    let garden: Api<Secret> = Api::namespaced(s.client.clone(), PROJECT);
    let created = garden
        .create(&PostParams::default(), &copy)
        .await
        .map_err(|e| format!("create KIM's garden copy: {e}"))?;
    Ok(created.uid().unwrap_or_default())
}

/// KIM's garden copy is the Runtime's copy: kept (same uid), the only one, still named by
/// the Shoot, and `RegistryCacheConfigured` says so.
async fn cache_copy_adopted(s: &Scenario<'_>, aws: &Seeded, uid: &str) -> Result {
    let garden: Api<Secret> = Api::namespaced(s.client.clone(), PROJECT);
    let selector = format!("kyma-project.io/runtime-id={}", aws.id());
    let copies = garden
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(|e| e.to_string())?;
    let found: Vec<(String, String)> = copies
        .items
        .iter()
        .map(|c| (c.name_any(), c.uid().unwrap_or_default()))
        .collect();
    if found != [(CACHE_COPY.to_string(), uid.to_string())] {
        return Err(format!(
            "KIM's registry cache copy not kept as the only one: {found:?}"
        ));
    }
    let shoot = s
        .shoots()
        .get(&aws.shoot)
        .await
        .map_err(|e| e.to_string())?;
    let named = shoot.data["spec"]["resources"]
        .as_array()
        .is_some_and(|r| r.iter().any(|r| r["name"] == CACHE_COPY));
    if !named {
        return Err(format!(
            "the Shoot no longer names {CACHE_COPY}: {}",
            shoot.data["spec"]
        ));
    }
    let rt = s
        .runtimes()
        .get(aws.id())
        .await
        .map_err(|e| e.to_string())?;
    match condition(&rt, "RegistryCacheConfigured") {
        Some(c) if c.status == tessera::crd::ConditionStatus::True => Ok(()),
        other => Err(format!("RegistryCacheConfigured: {other:?}")),
    }
}

/// The aws Runtime's worker maximum changes: its Shoot is patched (with Tessera's labels,
/// KIM's fields handed over), the others are not written.
async fn one_change_one_patch(
    s: &Scenario<'_>,
    cp: &ControlPlane,
    landscape: &[Seeded],
    before: BTreeMap<String, u64>,
) -> Result {
    let aws = &landscape[0];
    let mut workers = aws.runtime["spec"]["shoot"]["provider"]["workers"].clone();
    workers[0]["maximum"] = json!(11);
    let patch = json!({"spec": {"shoot": {"provider": {"workers": workers}}}});
    s.runtimes()
        .patch(aws.id(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    let patched = eventually("the aws Shoot patched", LIMIT, || async {
        let shoot = s.shoots().get(&aws.shoot).await.ok()?;
        (shoot.data["spec"]["provider"]["workers"][0]["maximum"] == 11).then_some(shoot)
    })
    .await?;
    handed_to_tessera(&patched, aws.id())?;
    let after = writes(cp, landscape);
    for seeded in &landscape[1..] {
        if after[&seeded.shoot] != before[&seeded.shoot] {
            return Err(format!(
                "Shoot {} was written too: {before:?} → {after:?}",
                seeded.shoot
            ));
        }
    }
    if after[&aws.shoot] == before[&aws.shoot] {
        return Err("the aws Shoot's write was not counted".into());
    }
    for seeded in landscape {
        s.no_refusals(&seeded.shoot)?;
    }
    Ok(())
}

/// Make `shoot` as KIM does: a plain Create (no field manager: `manager`, which also owns
/// Gardener's defaults), then server-side apply as `kim` (its patches). Its uid.
pub(super) async fn create_as_kim(s: &Scenario<'_>, shoot: &Value) -> Result<String> {
    let name = shoot["metadata"]["name"].as_str().unwrap_or_default();
    let object: DynamicObject = serde_json::from_value(shoot.clone()).map_err(|e| e.to_string())?;
    let create = PostParams {
        field_manager: Some("manager".into()),
        ..PostParams::default()
    };
    s.shoots()
        .create(&create, &object)
        .await
        .map_err(|e| format!("create KIM's Shoot {name}: {e}"))?;
    let applied = s
        .shoots()
        .patch(
            name,
            &PatchParams::apply("kim").force(),
            &Patch::Apply(shoot),
        )
        .await
        .map_err(|e| format!("apply KIM's Shoot {name}: {e}"))?;
    Ok(applied.uid().unwrap_or_default())
}

/// A Runtime whose Shoot KIM made, refused while takeover is off: the condition names the
/// flag.
pub(super) fn refused_naming_the_flag(rt: &tessera::crd::Runtime) -> Result {
    let provisioned = condition(rt, "Provisioned").ok_or("no Provisioned condition")?;
    if provisioned.reason != "TakeoverDisabled" || !provisioned.message.contains("--takeover-kim") {
        return Err(format!("refusal does not name the flag: {provisioned:?}"));
    }
    Ok(())
}

/// A taken-over Shoot after Tessera's first patch: Tessera's labels for Runtime `id`, KIM's
/// applied fields handed over (`kim` owns nothing), KIM's create entry (Gardener's
/// defaults) left as it was.
pub(super) fn handed_to_tessera(patched: &DynamicObject, id: &str) -> Result {
    if patched
        .labels()
        .get("tessera.dev/runtime")
        .map(String::as_str)
        != Some(id)
    {
        return Err(format!(
            "patched Shoot lacks Tessera's labels: {:?}",
            patched.labels()
        ));
    }
    let fields = patched.managed_fields();
    let kim_owns: Vec<_> = fields
        .iter()
        .filter(|f| f.manager.as_deref() == Some("kim"))
        .collect();
    if !kim_owns.is_empty() {
        return Err(format!(
            "KIM still owns fields of the patched Shoot: {kim_owns:?}"
        ));
    }
    let create_kept = fields.iter().any(|f| {
        f.manager.as_deref() == Some("manager") && f.operation.as_deref() == Some("Update")
    });
    if !create_kept {
        return Err(format!("KIM's create entry was handed over: {fields:?}"));
    }
    Ok(())
}

/// Seed what KIM made for `provider`: its structured-authentication ConfigMap and its Shoot,
/// created by Gardener. The Runtime comes back in the test's namespace.
async fn seed(s: &Scenario<'_>, provider: &str) -> Result<Seeded> {
    let dir = tessera_tests::workspace().join("tests/kim");
    let read = |name: String| -> Result<Value> {
        let text = std::fs::read_to_string(dir.join(&name)).map_err(|e| format!("{name}: {e}"))?;
        serde_saphyr::from_str(&text).map_err(|e| format!("{name}: {e}"))
    };
    let mut runtime = read(format!("runtime-{provider}.yaml"))?;
    runtime["metadata"]["namespace"] = json!(s.ns);
    if let Some(meta) = runtime["metadata"].as_object_mut() {
        meta.remove("generation");
    }
    let shoot = read(format!("shoot-{provider}.yaml"))?;
    let name = shoot["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let cm_name =
        shoot["spec"]["kubernetes"]["kubeAPIServer"]["structuredAuthentication"]["configMapName"]
            .as_str()
            .ok_or("KIM's Shoot names no structured-authentication ConfigMap")?;
    let oidc = &runtime["spec"]["shoot"]["kubernetes"]["kubeAPIServer"]["oidcConfig"];
    let cm_uid = kim_config_map(s, cm_name, oidc).await?;
    let shoot_uid = create_as_kim(s, &shoot).await?;
    eventually(&format!("KIM's Shoot {name} created"), LIMIT, || async {
        let live = s.shoots().get(&name).await.ok()?;
        let op = &live.data["status"]["lastOperation"];
        (op["type"] == "Create" && op["state"] == "Succeeded").then_some(())
    })
    .await
    .map_err(|e| {
        let live = futures::executor::block_on(s.shoots().get(&name));
        let status = live
            .map(|l| l.data["status"].to_string())
            .unwrap_or_default();
        format!("{e}; status: {status}")
    })?;
    Ok(Seeded {
        runtime,
        shoot: name,
        uids: [shoot_uid, cm_uid],
    })
}

/// The audit policies an operator keeps in the project for KIM (`auditLogging.policyConfigMapName`
/// and KIM's `experimental-audit-policy`; Gardener's gardenlet needs them to reconcile) and
/// the audit log tenants' Secrets (`auditlog.config` `secretName`; Gardener refuses a Shoot
/// whose `spec.resources` name a Secret that does not exist).
async fn audit_policies(s: &Scenario<'_>) -> Result {
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), PROJECT);
    for suffix in ["", "-azure", "-gcp", "-openstack"] {
        let name = format!("auditlog-secret{suffix}");
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": PROJECT},
            "stringData": {"clientID": "auditlog", "clientSecret": "s3cr3t"},
        }))
        .map_err(|e| e.to_string())?;
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(format!("create audit log Secret {name}: {e}")),
        }
    }
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), PROJECT);
    let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";
    for name in ["policy-config-map", "experimental-audit-policy"] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": PROJECT},
            "data": {"policy": policy},
        }))
        .map_err(|e| e.to_string())?;
        match api.create(&PostParams::default(), &cm).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(format!("create audit policy {name}: {e}")),
        }
    }
    Ok(())
}

/// The ConfigMap as KIM's `CreateOrUpdateStructuredAuthConfigMap` writes it (no labels):
/// `toAuthenticationConfiguration` of the Runtime's `oidcConfig`, one JWT authenticator,
/// the username prefix verbatim, the groups prefix `""` when unset, marshalled by
/// `sigs.k8s.io/yaml` (keys sorted).
pub(super) async fn kim_config_map(s: &Scenario<'_>, name: &str, oidc: &Value) -> Result<String> {
    let text = |key: &str| oidc[key].as_str().unwrap_or_default().to_string();
    let config = format!(
        "apiVersion: apiserver.config.k8s.io/v1beta1\njwt:\n- claimMappings:\n    groups:\n      claim: {}\n      prefix: \"{}\"\n    username:\n      claim: {}\n      prefix: \"{}\"\n  issuer:\n    audiences:\n    - {}\n    url: {}\nkind: AuthenticationConfiguration\n",
        text("groupsClaim"),
        text("groupsPrefix"),
        text("usernameClaim"),
        text("usernamePrefix"),
        text("clientID"),
        text("issuerURL"),
    );
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), PROJECT);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": PROJECT},
        "data": {"config.yaml": config},
    }))
    .map_err(|e| e.to_string())?;
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .map_err(|e| format!("create KIM's ConfigMap {name}: {e}"))?;
    Ok(created.uid().unwrap_or_default())
}

/// KIM's Shoot and ConfigMap are the same objects (nothing deleted and recreated), the
/// ConfigMap now labelled as the Runtime's.
async fn kept(s: &Scenario<'_>, seeded: &Seeded) -> Result {
    let shoot = s
        .shoots()
        .get(&seeded.shoot)
        .await
        .map_err(|e| e.to_string())?;
    let cm_name = shoot.data["spec"]["kubernetes"]["kubeAPIServer"]["structuredAuthentication"]
        ["configMapName"]
        .as_str()
        .unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), PROJECT);
    let cm = api.get(cm_name).await.map_err(|e| e.to_string())?;
    let found = [
        shoot.uid().unwrap_or_default(),
        cm.uid().unwrap_or_default(),
    ];
    if found != seeded.uids {
        return Err(format!(
            "{}: KIM's Shoot or ConfigMap was replaced: {:?} → {found:?}",
            seeded.id(),
            seeded.uids
        ));
    }
    if cm.labels().get("tessera.dev/runtime").map(String::as_str) != Some(seeded.id()) {
        return Err(format!(
            "ConfigMap {cm_name} not taken over: {:?}",
            cm.labels()
        ));
    }
    Ok(())
}

fn openid_connects(s: &Scenario<'_>) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("authentication.gardener.cloud", "v1alpha1", "OpenIDConnect"),
        "openidconnects",
    );
    Api::all_with(s.runtime_client.clone(), &resource)
}

/// KIM's `kyma-oidc-0` in the runtime cluster, as `createOpenIDConnectResource` makes it
/// from `cluster.defaultSharedIASTenant` for a Runtime without `additionalOidcConfig`. Its uid.
async fn kim_openid_connect(s: &Scenario<'_>) -> Result<String> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1", "kind": "OpenIDConnect",
        "metadata": {"name": "kyma-oidc-0",
            "labels": {"operator.kyma-project.io/managed-by": "infrastructure-manager"}},
        "spec": {"clientID": "test-clientID", "groupsClaim": "test-group",
            "issuerURL": "test-issuer-url", "jwks": {}, "supportedSigningAlgs": ["test-alg"],
            "usernameClaim": "test-username-claim", "usernamePrefix": "-"},
    }))
    .map_err(|e| e.to_string())?;
    let created = openid_connects(s)
        .create(&PostParams::default(), &object)
        .await
        .map_err(|e| format!("create KIM's OpenIDConnect: {e}"))?;
    Ok(created.uid().unwrap_or_default())
}

/// Every Runtime trusts the landscape's default tenant; KIM's object was adopted by one of
/// them (same uid, Tessera's labels), not deleted and recreated. (The four Runtimes share
/// one test runtime cluster; in a landscape each has its own `kyma-oidc-0`.)
async fn oidc_adopted(s: &Scenario<'_>, landscape: &[Seeded], kim_uid: &str) -> Result {
    let api = openid_connects(s);
    let kim = api
        .get("kyma-oidc-0")
        .await
        .map_err(|e| format!("KIM's OpenIDConnect: {e}"))?;
    let adopter = kim
        .labels()
        .get("tessera.dev/runtime")
        .cloned()
        .unwrap_or_default();
    if kim.uid().as_deref() != Some(kim_uid) || !landscape.iter().any(|l| l.id() == adopter) {
        return Err(format!(
            "kyma-oidc-0 not adopted in place: {:?}",
            kim.metadata
        ));
    }
    for seeded in landscape.iter().filter(|l| l.id() != adopter) {
        let name = format!("tessera-oidc-{}-0", seeded.id());
        let own = api.get(&name).await.map_err(|e| format!("{name}: {e}"))?;
        if own.data["spec"]["issuerURL"] != "test-issuer-url" {
            return Err(format!(
                "{name} is not the default tenant: {:?}",
                own.data["spec"]
            ));
        }
    }
    Ok(())
}

/// Writes of each landscape Shoot the test Gardener counted (subresources not included).
fn writes(cp: &ControlPlane, landscape: &[Seeded]) -> BTreeMap<String, u64> {
    let stats = cp.sim_stats();
    landscape
        .iter()
        .map(|s| {
            let count = stats["byObject"][format!("shoot/{}", s.shoot)]["objectWrites"]
                .as_u64()
                .unwrap_or(0);
            (s.shoot.clone(), count)
        })
        .collect()
}
