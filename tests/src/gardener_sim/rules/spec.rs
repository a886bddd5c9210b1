//! The strategy validation of Shoots: `ValidateShoot` (create), `ValidateShootUpdate`
//! (update) and the spec rules they apply (gardener pkg/api/core/validation/shoot.go).

use serde_json::Value;

use super::errors::{FieldError, forbidden, invalid, not_supported, required};
use super::gofmt::{duration_string, json, json_opt_str, json_str, parse_duration, q};
use super::obj::{at, k8s_version, opt_str, str_at, workers};
use super::versions::{Op, Semver, at_least, compare};
use super::{deletion, maintenance, meta, networking, operation, workers as pools};

const WORKERLESS: &str = "this field should not be set for workerless Shoot clusters";

/// gardener pkg/apiserver/registry/core/shoot/strategy.go `Validate`: `ValidateShoot`,
/// `ValidateForceDeletion(shoot, nil)`, `ValidateFinalizersOnCreation`,
/// `ValidateInPlaceUpdateStrategyOnCreation`.
pub(crate) fn strategy_create(shoot: &Value) -> Vec<FieldError> {
    let mut errs = validate_shoot(shoot);
    errs.extend(deletion::force_deletion(shoot, None, &Value::Null));
    errs.extend(deletion::finalizers_on_creation(shoot));
    errs.extend(pools::in_place_on_creation(shoot));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootUpdate`: the spec transitions,
/// the whole `ValidateShootWithOpts(new)` again, and `ValidateForceDeletion(new, old)` (the
/// status is the stored one: the strategy copies it).
pub(crate) fn strategy_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_spec_update(new, old);
    errs.extend(validate_shoot(new));
    errs.extend(deletion::force_deletion(new, Some(old), &old["status"]));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootWithOpts`: metadata, operation
/// annotations, spec.
fn validate_shoot(shoot: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_name(shoot);
    errs.extend(meta::consecutive_hyphens(shoot));
    errs.extend(operation::validate(shoot));
    errs.extend(validate_spec(shoot));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpec`, in Gardener's order.
fn validate_spec(shoot: &Value) -> Vec<FieldError> {
    let mut errs = cloud_profile_reference(shoot);
    errs.extend(provider(shoot));
    errs.extend(kubernetes(shoot));
    errs.extend(networking::validate(shoot));
    errs.extend(maintenance::validate(shoot));
    errs.extend(region_and_bindings(shoot));
    errs.extend(seed_purpose_scheduler(shoot));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateCloudProfileReference` (CP3, CP1,
/// CP2): `cloudProfileName` is forbidden from 1.34; a reference (`cloudProfile`, else
/// `cloudProfileName`) with a name is required; its kind must be known.
pub(crate) fn cloud_profile_reference(shoot: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let version = k8s_version(shoot);
    let name = opt_str(shoot, &["spec", "cloudProfileName"]);
    if !version.is_empty() && at_least(version, 1, 34) && name.is_some_and(|n| !n.is_empty()) {
        errs.push(forbidden(
            "spec.cloudProfileName",
            "for Kubernetes version >= 1.34, cloudProfileName field is no longer supported, use spec.cloudProfile.name instead",
            "CP3",
        ));
    }
    let reference = at(shoot, &["spec", "cloudProfile"]);
    let (kind, ref_name) = match (reference.is_null(), name) {
        (false, _) => (str_at(reference, &["kind"]), str_at(reference, &["name"])),
        (true, Some(n)) => ("CloudProfile", n),
        (true, None) => ("", ""),
    };
    if ref_name.is_empty() {
        errs.push(required(
            "spec.cloudProfile.name",
            "must specify a cloud profile",
            "CP1",
        ));
        return errs;
    }
    if kind != "CloudProfile" && kind != "NamespacedCloudProfile" {
        let values = ["CloudProfile", "NamespacedCloudProfile"];
        errs.push(not_supported(
            "spec.cloudProfile.kind",
            q(kind),
            &values,
            "CP2",
        ));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateProvider`: a provider type (P1) that is
/// a DNS label; worker pools (or, workerless, no worker-only settings).
fn provider(shoot: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let provider_type = str_at(shoot, &["spec", "provider", "type"]);
    match provider_type.is_empty() {
        true => errs.push(required(
            "spec.provider.type",
            "must specify a provider type",
            "P1",
        )),
        false => errs.extend(meta::validate_dns1123_label(
            provider_type,
            "spec.provider.type",
            "P1",
        )),
    }
    if workers(shoot).is_empty() {
        for key in [
            "infrastructureConfig",
            "controlPlaneConfig",
            "workersSettings",
        ] {
            if !at(shoot, &["spec", "provider", key]).is_null() {
                errs.push(forbidden(&format!("spec.provider.{key}"), WORKERLESS, "W*"));
            }
        }
    } else {
        errs.extend(pools::validate(shoot));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateKubernetes`: a version is required
/// (K1; only reachable without a CloudProfile, ShootMutator defaults `""`), then the
/// kube-apiserver settings.
fn kubernetes(shoot: &Value) -> Vec<FieldError> {
    if k8s_version(shoot).is_empty() {
        let msg = "kubernetes version must not be empty";
        return vec![required("spec.kubernetes.version", msg, "K1")];
    }
    let kas = at(shoot, &["spec", "kubernetes", "kubeAPIServer"]);
    let mut errs = structured_authentication(kas);
    errs.extend(max_token_expiration(kas));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateKubeAPIServer`: `structuredAuthentication`
/// needs its feature gate (if set explicitly) and a `configMapName` (Forbidden, not Required).
fn structured_authentication(kas: &Value) -> Vec<FieldError> {
    let auth = &kas["structuredAuthentication"];
    if auth.is_null() {
        return Vec::new();
    }
    let path = "spec.kubernetes.kubeAPIServer.structuredAuthentication";
    let mut errs = Vec::new();
    if kas["featureGates"]["StructuredAuthenticationConfiguration"] == false {
        let msg = "requires feature gate StructuredAuthenticationConfiguration to be enabled";
        errs.push(forbidden(path, msg, "KA1"));
    }
    if str_at(auth, &["configMapName"]).is_empty() {
        errs.push(forbidden(
            &format!("{path}.configMapName"),
            "must provide a name",
            "KA1",
        ));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateKubeAPIServer`:
/// `serviceAccountConfig.maxTokenExpiration` is not negative and 0 or within 720h..2160h.
fn max_token_expiration(kas: &Value) -> Vec<FieldError> {
    let Some(raw) = opt_str(kas, &["serviceAccountConfig", "maxTokenExpiration"]) else {
        return Vec::new();
    };
    let Some(ns) = parse_duration(raw) else {
        return Vec::new();
    };
    let path = "spec.kubernetes.kubeAPIServer.serviceAccountConfig.maxTokenExpiration";
    let hour = 3_600_000_000_000_i64;
    let mut errs = Vec::new();
    if ns < 0 {
        let value = json_str(&duration_string(ns));
        errs.push(invalid(path, value, "can not be negative", "KA2"));
    }
    if ns > 0 && ns < 720 * hour {
        errs.push(forbidden(path, "must be at least 720h (30d)", "KA2"));
    }
    if ns > 2160 * hour {
        errs.push(forbidden(path, "must be at most 2160h (90d)", "KA2"));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpec`: a region (R1); with
/// workers a SecretBinding or CredentialsBinding but not both (B1, B2), no
/// `secretBindingName` from 1.34 (B3); workerless: neither.
fn region_and_bindings(shoot: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if str_at(shoot, &["spec", "region"]).is_empty() {
        errs.push(required("spec.region", "must specify a region", "R1"));
    }
    let sb = opt_str(shoot, &["spec", "secretBindingName"]);
    let cb = opt_str(shoot, &["spec", "credentialsBindingName"]);
    if workers(shoot).is_empty() {
        if !at(shoot, &["spec", "secretBindingName"]).is_null() {
            errs.push(forbidden("spec.secretBindingName", WORKERLESS, "B1"));
        }
        if !at(shoot, &["spec", "credentialsBindingName"]).is_null() {
            errs.push(forbidden("spec.credentialsBindingName", WORKERLESS, "B1"));
        }
        return errs;
    }
    let (sb_set, cb_set) = (
        sb.is_some_and(|s| !s.is_empty()),
        cb.is_some_and(|s| !s.is_empty()),
    );
    if !sb_set && !cb_set {
        let msg = "must be set when credentialsBindingName is not";
        errs.push(required("spec.secretBindingName", msg, "B1"));
    } else if sb_set && cb_set {
        let msg = "is incompatible with credentialsBindingName";
        errs.push(forbidden("spec.secretBindingName", msg, "B2"));
    }
    let version = k8s_version(shoot);
    if sb_set && !version.is_empty() && at_least(version, 1, 34) {
        let msg = "for Kubernetes versions >= 1.34, secretBindingName field is no longer supported, use spec.credentialsBindingName instead";
        errs.push(forbidden("spec.secretBindingName", msg, "B3"));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpec`: `seedName` not `""`
/// (S4), a known purpose (`infrastructure` only in `garden`), a DNS-label `schedulerName`.
fn seed_purpose_scheduler(shoot: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if opt_str(shoot, &["spec", "seedName"]) == Some("") {
        let msg = "seed name must not be empty when providing the key";
        errs.push(invalid("spec.seedName", json_str(""), msg, "S4"));
    }
    if let Some(purpose) = opt_str(shoot, &["spec", "purpose"]) {
        let mut allowed = vec!["development", "evaluation", "production", "testing"];
        if str_at(shoot, &["metadata", "namespace"]) == "garden" {
            allowed.insert(1, "infrastructure");
            allowed.sort_unstable();
        }
        if !allowed.contains(&purpose) {
            errs.push(not_supported(
                "spec.purpose",
                json_str(purpose),
                &allowed,
                "PU1",
            ));
        }
    }
    if let Some(scheduler) = opt_str(shoot, &["spec", "schedulerName"]) {
        errs.extend(meta::validate_dns1123_label(
            scheduler,
            "spec.schedulerName",
            "SC1",
        ));
    }
    errs
}

/// apimachinery `ValidateImmutableField`: Invalid `field is immutable` with the new value.
pub(crate) fn immutable(
    new: &Value,
    old: &Value,
    path: &str,
    value: String,
    rule: &'static str,
) -> Option<FieldError> {
    (new != old).then(|| invalid(path, value, "field is immutable", rule))
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpecUpdate`, in Gardener's order.
fn validate_spec_update(new: &Value, old: &Value) -> Vec<FieldError> {
    if let Some(frozen) = deletion::spec_frozen(new, old) {
        return vec![frozen];
    }
    let (n, o) = (&new["spec"], &old["spec"]);
    let mut errs = Vec::new();
    errs.extend(immutable(
        &n["region"],
        &o["region"],
        "spec.region",
        q(str_at(n, &["region"])),
        "R2",
    ));
    errs.extend(cloud_profile_reference(new));
    errs.extend(binding_updates(n, o));
    let path = "spec.kubernetes.version";
    errs.extend(kubernetes_version_update(
        k8s_version(new),
        k8s_version(old),
        false,
        path,
    ));
    let (new_has, old_has) = (!workers(new).is_empty(), !workers(old).is_empty());
    if new_has != old_has {
        let msg = match old_has {
            true => "cannot switch from a Shoot with workers to a workerless Shoot",
            false => "cannot switch from a workerless Shoot to a Shoot with workers",
        };
        errs.push(forbidden("spec.provider.workers", msg, "W*"));
        return errs;
    }
    errs.extend(pools::provider_update(new, old));
    errs.extend(pools::versions_update(new, old));
    errs.extend(networking::validate_update(new, old));
    errs.extend(scheduler_update(n, o));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpecUpdate`: a
/// `credentialsBindingName` cannot be unset (B4); `secretBindingName` is immutable except
/// when migrating to a CredentialsBinding (B5).
fn binding_updates(n: &Value, o: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let new_cb = opt_str(n, &["credentialsBindingName"]).unwrap_or("");
    if !o["credentialsBindingName"].is_null() && new_cb.is_empty() {
        errs.push(forbidden(
            "spec.credentialsBindingName",
            "the field cannot be unset",
            "B4",
        ));
    }
    let migration =
        !o["secretBindingName"].is_null() && n["secretBindingName"].is_null() && !new_cb.is_empty();
    if !migration {
        let (new_sb, old_sb) = (&n["secretBindingName"], &o["secretBindingName"]);
        errs.extend(immutable(
            new_sb,
            old_sb,
            "spec.secretBindingName",
            json_opt_str(new_sb),
            "B5",
        ));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpecUpdate`: `schedulerName` may
/// only change from unset to `default-scheduler`.
fn scheduler_update(n: &Value, o: &Value) -> Option<FieldError> {
    let (new, old) = (&n["schedulerName"], &o["schedulerName"]);
    let allowed = old.is_null() && new.as_str() == Some("default-scheduler");
    (new != old && !allowed)
        .then(|| invalid("spec.schedulerName", json(new), "field is immutable", "SC1"))
}

/// gardener pkg/api/core/validation/shoot.go `ValidateKubernetesVersionUpdate`: no downgrade
/// (K4); unless `skip_minor`, no upgrade by two or more minors (K5).
pub(crate) fn kubernetes_version_update(
    new: &str,
    old: &str,
    skip_minor: bool,
    path: &str,
) -> Vec<FieldError> {
    if new.is_empty() {
        let msg = "cannot validate kubernetes version upgrade because it is unset";
        return vec![invalid(path, q(new), msg, "K4")];
    }
    let mut errs = Vec::new();
    match compare(new, Op::Lt, old) {
        Err(e) => errs.push(invalid(path, q(new), e, "K4")),
        Ok(true) => errs.push(forbidden(
            path,
            "kubernetes version downgrade is not supported",
            "K4",
        )),
        Ok(false) => {}
    }
    if skip_minor {
        return errs;
    }
    let next = match Semver::parse(old) {
        Ok(o) => o.inc_minor().inc_minor(),
        Err(e) => {
            errs.push(invalid(path, q(old), e, "K5"));
            return errs;
        }
    };
    match compare(new, Op::Ge, &next.to_string()) {
        Err(e) => errs.push(invalid(path, q(new), e, "K5")),
        Ok(true) => errs.push(forbidden(
            path,
            "kubernetes version upgrade cannot skip a minor version",
            "K5",
        )),
        Ok(false) => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use serde_json::{Value, json};

    fn msg(r: &super::super::Refusal) -> &str {
        r.message
            .strip_prefix("Shoot.core.gardener.cloud \"s\" is invalid: ")
            .unwrap_or(&r.message)
    }

    #[test]
    fn r1_region_required() {
        let r = refused(create(&with(shoot(), "/spec/region", json!(""))));
        assert_eq!(r.code, 422);
        assert_eq!(
            msg(&r),
            "spec.region: Required value: must specify a region"
        );
        assert_eq!(r.causes[0].reason, "FieldValueRequired");
        assert_eq!(r.rules, vec!["R1"]);
    }

    #[test]
    fn r2_region_immutable() {
        let new = with(shoot(), "/spec/region", json!("us-east-1"));
        let new = with(new, "/spec/provider/workers/0/zones", json!([]));
        let r = refused(update(&new, &shoot()));
        assert_eq!(
            msg(&r),
            "spec.region: Invalid value: \"us-east-1\": field is immutable"
        );
        assert_eq!(r.rules, vec!["R2"]);
        assert_eq!(update(&shoot(), &shoot()), Ok(()));
    }

    #[test]
    fn p1_p2_provider_type() {
        let r = refused(create(&with(shoot(), "/spec/provider/type", json!(""))));
        assert_eq!(
            msg(&r),
            "spec.provider.type: Required value: must specify a provider type"
        );
        let new = with(shoot(), "/spec/provider/type", json!("gcp"));
        let r = refused(update(&new, &shoot()));
        assert_eq!(
            msg(&r),
            "spec.provider.type: Invalid value: \"gcp\": field is immutable"
        );
        assert_eq!(r.rules, vec!["P2"]);
    }

    #[test]
    fn cp1_cp2_cp3_cloud_profile_reference() {
        let no_ref = super::super::testing::without(shoot(), "/spec/cloudProfile");
        let errs = super::cloud_profile_reference(&no_ref);
        assert_eq!(
            errs[0].message(),
            "spec.cloudProfile.name: Required value: must specify a cloud profile"
        );
        let bad_kind = with(shoot(), "/spec/cloudProfile/kind", json!("Foo"));
        let errs = super::cloud_profile_reference(&bad_kind);
        assert_eq!(
            errs[0].message(),
            "spec.cloudProfile.kind: Unsupported value: \"Foo\": supported values: \"CloudProfile\", \"NamespacedCloudProfile\""
        );
        let both = with(shoot(), "/spec/cloudProfileName", json!("aws"));
        let r = refused(update(&both, &shoot()));
        assert_eq!(
            msg(&r),
            "spec.cloudProfileName: Forbidden: for Kubernetes version >= 1.34, cloudProfileName field is no longer supported, use spec.cloudProfile.name instead"
        );
        assert_eq!(r.rules, vec!["CP3"]);
        assert!(super::cloud_profile_reference(&shoot()).is_empty());
    }

    #[test]
    fn b1_b2_b3_bindings() {
        let none = super::super::testing::without(shoot(), "/spec/credentialsBindingName");
        let r = refused(create(&none));
        assert_eq!(
            msg(&r),
            "spec.secretBindingName: Required value: must be set when credentialsBindingName is not"
        );
        let both = with(shoot(), "/spec/secretBindingName", json!("sb"));
        let r = refused(create(&both));
        assert_eq!(
            msg(&r),
            "[spec.secretBindingName: Forbidden: is incompatible with credentialsBindingName, spec.secretBindingName: Forbidden: for Kubernetes versions >= 1.34, secretBindingName field is no longer supported, use spec.credentialsBindingName instead]"
        );
        assert_eq!(r.rules, vec!["B2", "B3"]);
    }

    #[test]
    fn b4_b5_binding_updates() {
        let unset = with(shoot(), "/spec/credentialsBindingName", Value::Null);
        let r = refused(update(&unset, &shoot()));
        assert!(
            msg(&r).starts_with(
                "[spec.credentialsBindingName: Forbidden: the field cannot be unset, "
            )
        );
        let old = with(shoot(), "/spec/kubernetes/version", json!("1.33.5"));
        let old = with(old, "/spec/secretBindingName", json!("sb"));
        let old = super::super::testing::without(old, "/spec/credentialsBindingName");
        let new = with(old.clone(), "/spec/secretBindingName", json!("sb2"));
        let errs = super::binding_updates(&new["spec"], &old["spec"]);
        assert_eq!(
            errs[0].message(),
            "spec.secretBindingName: Invalid value: \"sb2\": field is immutable"
        );
        let migrated = with(old.clone(), "/spec/secretBindingName", Value::Null);
        let migrated = with(migrated, "/spec/credentialsBindingName", json!("cb"));
        assert!(super::binding_updates(&migrated["spec"], &old["spec"]).is_empty());
    }

    #[test]
    fn k1_version_required_without_profile() {
        let errs = super::kubernetes(&with(shoot(), "/spec/kubernetes/version", json!("")));
        assert_eq!(
            errs[0].message(),
            "spec.kubernetes.version: Required value: kubernetes version must not be empty"
        );
        assert!(super::kubernetes(&shoot()).is_empty());
    }

    #[test]
    fn k4_k5_version_updates() {
        let p = "spec.kubernetes.version";
        let e = super::kubernetes_version_update("1.33.4", "1.33.5", false, p);
        assert_eq!(
            e[0].message(),
            "spec.kubernetes.version: Forbidden: kubernetes version downgrade is not supported"
        );
        let e = super::kubernetes_version_update("1.33", "1.33.5", false, p);
        assert_eq!(e[0].rule, "K4");
        let e = super::kubernetes_version_update("1.34.0", "1.32.7", false, p);
        assert_eq!(
            e[0].message(),
            "spec.kubernetes.version: Forbidden: kubernetes version upgrade cannot skip a minor version"
        );
        assert!(super::kubernetes_version_update("1.33.0", "1.32.7", false, p).is_empty());
        assert!(super::kubernetes_version_update("1.34.0", "1.32.7", true, p).is_empty());
        let old = with(shoot(), "/spec/kubernetes/version", json!("1.34.1"));
        let new = with(shoot(), "/spec/kubernetes/version", json!("1.34.0"));
        let r = refused(update(&new, &old));
        // The pool without its own version compares the control plane's versions too.
        assert_eq!(
            msg(&r),
            "[spec.kubernetes.version: Forbidden: kubernetes version downgrade is not supported, spec.provider.workers[0].kubernetes.version: Forbidden: kubernetes version downgrade is not supported]"
        );
        assert_eq!(r.rules, vec!["K4"]);
    }

    #[test]
    fn s4_seed_name_not_empty() {
        let r = refused(create(&with(shoot(), "/spec/seedName", json!(""))));
        assert_eq!(
            msg(&r),
            "spec.seedName: Invalid value: \"\": seed name must not be empty when providing the key"
        );
        assert_eq!(r.rules, vec!["S4"]);
    }

    #[test]
    fn purpose_must_be_known() {
        let r = refused(create(&with(
            shoot(),
            "/spec/purpose",
            json!("infrastructure"),
        )));
        assert_eq!(
            msg(&r),
            "spec.purpose: Unsupported value: \"infrastructure\": supported values: \"development\", \"evaluation\", \"production\", \"testing\""
        );
        let garden = with(shoot(), "/metadata/namespace", json!("garden"));
        assert!(
            super::seed_purpose_scheduler(&with(garden, "/spec/purpose", json!("infrastructure")))
                .is_empty()
        );
    }

    #[test]
    fn structured_authentication_and_token_expiration() {
        let s = with(
            shoot(),
            "/spec/kubernetes/kubeAPIServer/structuredAuthentication",
            json!({}),
        );
        let errs = super::kubernetes(&s);
        assert_eq!(
            errs[0].message(),
            "spec.kubernetes.kubeAPIServer.structuredAuthentication.configMapName: Forbidden: must provide a name"
        );
        let p = "/spec/kubernetes/kubeAPIServer/serviceAccountConfig/maxTokenExpiration";
        let e = super::kubernetes(&with(shoot(), p, json!("1h")));
        assert_eq!(
            e[0].message(),
            "spec.kubernetes.kubeAPIServer.serviceAccountConfig.maxTokenExpiration: Forbidden: must be at least 720h (30d)"
        );
        let e = super::kubernetes(&with(shoot(), p, json!("2161h")));
        assert_eq!(e[0].body(), "Forbidden: must be at most 2160h (90d)");
        let e = super::kubernetes(&with(shoot(), p, json!("-1h")));
        assert_eq!(
            e[0].body(),
            "Invalid value: \"-1h0m0s\": can not be negative"
        );
        assert!(super::kubernetes(&with(shoot(), p, json!("720h"))).is_empty());
        assert!(super::kubernetes(&with(shoot(), p, json!("0s"))).is_empty());
    }
}
