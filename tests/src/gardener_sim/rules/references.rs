//! ResourceReferenceManager for Shoots (gardener
//! plugin/pkg/global/resourcereferencemanager/admission.go `ensureShootReferences`), items 1
//! (CloudProfile), 3 (SecretBinding), 4 (CredentialsBinding), 9 (structured
//! authentication ConfigMap) and `ensureResourceReferences` for `spec.resources` of kind
//! Secret and ConfigMap (existence; Gardener also checks that the requester may read them,
//! which a project member may). Every failure is a 403.

use std::collections::BTreeMap;

use serde_json::Value;

use super::cloud_profile::{reference, spec_of};
use super::errors::forbidden_refusal;
use super::gofmt::q;
use super::obj::{at, deleting, name, opt_str};
use super::{Facts, Operation, Refusal};

/// A named object the facts say exists.
fn exists(found: &BTreeMap<String, Option<Value>>, n: &str) -> bool {
    matches!(found.get(n), Some(Some(_)))
}

/// gardener plugin/pkg/global/resourcereferencemanager/admission.go `Validate`/
/// `ensureShootReferences`: skipped for DELETE, for updates while deleting and for updates
/// that leave the spec alone; else the references that changed must resolve.
pub(crate) fn ensure_shoot_references(
    op: Operation,
    shoot: &Value,
    old: Option<&Value>,
    facts: &Facts,
) -> Result<(), Refusal> {
    if op == Operation::Delete || (op == Operation::Update && deleting(shoot)) {
        return Ok(());
    }
    if old.is_some_and(|o| o["spec"] == shoot["spec"]) {
        return Ok(());
    }
    let fail =
        |msg: String, rule: &'static str| Err(forbidden_refusal(name(shoot), &msg, vec![rule]));
    if reference(shoot).is_some()
        && let Err(e) = spec_of(shoot, facts)
    {
        return fail(
            format!("could not find cloudProfileSpec from the shoot cloudProfile reference: {e}"),
            "CP5",
        );
    }
    let old_spec = old.map(|o| &o["spec"]).unwrap_or(&Value::Null);
    let bindings = [
        (
            "secretBindingName",
            &facts.secret_bindings,
            "secretbinding.core.gardener.cloud",
        ),
        (
            "credentialsBindingName",
            &facts.credentials_bindings,
            "credentialsbinding.security.gardener.cloud",
        ),
    ];
    for (key, found, resource) in bindings {
        let Some(n) = opt_str(shoot, &["spec", key]) else {
            continue;
        };
        if old_spec[key].as_str() != Some(n) && !exists(found, n) {
            return fail(format!("{resource} {} not found", q(n)), "B6");
        }
    }
    let path = ["kubernetes", "kubeAPIServer", "structuredAuthentication"];
    let auth = at(&shoot["spec"], &path);
    if !auth.is_null() && auth != at(old_spec, &path) {
        let cm = opt_str(auth, &["configMapName"]).unwrap_or("");
        if !exists(&facts.config_maps, cm) {
            let msg = format!(
                "failed to resolve structured authentication config map reference: configmaps {} not found",
                q(cm)
            );
            return fail(msg, "RR*");
        }
    }
    if let Some(msg) = unresolved_resource(shoot, old_spec, facts) {
        return fail(msg, "RR-resources");
    }
    Ok(())
}

/// The names `spec.resources` of `shoot` refers to with `kind` (API version v1).
pub(crate) fn resource_names(shoot: &Value, kind: &str) -> Vec<String> {
    shoot["spec"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["resourceRef"]["apiVersion"] == "v1" && r["resourceRef"]["kind"] == kind)
        .filter_map(|r| r["resourceRef"]["name"].as_str().map(String::from))
        .collect()
}

/// gardener admission.go `ensureResourceReferences`: when `spec.resources` changed, each
/// reference must resolve (`lookupResource`); the first one that does not, in Gardener's
/// words.
fn unresolved_resource(shoot: &Value, old_spec: &Value, facts: &Facts) -> Option<String> {
    let resources = &shoot["spec"]["resources"];
    if *resources == old_spec["resources"] || resources.is_null() {
        return None;
    }
    resources.as_array()?.iter().find_map(|r| {
        let target = &r["resourceRef"];
        let (found, plural) = match (target["apiVersion"].as_str(), target["kind"].as_str()) {
            (Some("v1"), Some("Secret")) => (&facts.secrets, "secrets"),
            (Some("v1"), Some("ConfigMap")) => (&facts.config_maps, "configmaps"),
            _ => return None,
        };
        let n = target["name"].as_str().unwrap_or("");
        (!exists(found, n)).then(|| {
            let name = r["name"].as_str().unwrap_or("");
            format!(
                "failed to resolve resource reference {}: {plural} {} not found",
                q(name),
                q(n)
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Operation, validate};
    use serde_json::json;

    #[test]
    fn a_resource_reference_must_resolve_when_the_resources_change() {
        let reference = json!([{"name": "reg-cache-1",
            "resourceRef": {"apiVersion": "v1", "kind": "Secret", "name": "reg-cache-1"}}]);
        let s = with(shoot(), "/spec/resources", reference);
        let r = refused(create(&s));
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: failed to resolve resource reference \"reg-cache-1\": secrets \"reg-cache-1\" not found"
        );
        let mut f = facts();
        f.secrets.insert("reg-cache-1".into(), Some(json!({})));
        assert_eq!(
            validate(Operation::Create, Some(&s), None, &user(), &f),
            Ok(())
        );
        let same = validate(Operation::Update, Some(&s), Some(&s), &user(), &facts());
        assert_eq!(same, Ok(()), "unchanged references are not looked up again");
    }

    #[test]
    fn b6_binding_must_exist() {
        let s = with(shoot(), "/spec/credentialsBindingName", json!("nope"));
        let r = refused(create(&s));
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: credentialsbinding.security.gardener.cloud \"nope\" not found"
        );
        assert_eq!(r.rules, vec!["B6"]);
        let old = with(shoot(), "/spec/kubernetes/version", json!("1.33.5"));
        let old = with(old, "/spec/secretBindingName", json!("sb"));
        let old = without(old, "/spec/credentialsBindingName");
        let r = refused(
            super::ensure_shoot_references(Operation::Create, &old, None, &facts()).map(|_| ()),
        );
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: secretbinding.core.gardener.cloud \"sb\" not found"
        );
    }

    #[test]
    fn structured_authentication_config_map_must_exist() {
        let s = with(
            shoot(),
            "/spec/kubernetes/kubeAPIServer/structuredAuthentication",
            json!({"configMapName": "oidc"}),
        );
        let r = refused(create(&s));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: failed to resolve structured authentication config map reference: configmaps \"oidc\" not found"
        );
        let mut f = facts();
        f.config_maps
            .insert("oidc".into(), Some(json!({"data": {"config.yaml": "x"}})));
        assert_eq!(
            validate(Operation::Create, Some(&s), None, &user(), &f),
            Ok(())
        );
        assert_eq!(update(&s, &s), Ok(()));
    }

    #[test]
    fn profile_reference_must_resolve() {
        let mut f = facts();
        f.cloud_profile = None;
        let r = refused(super::ensure_shoot_references(
            Operation::Create,
            &shoot(),
            None,
            &f,
        ));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: could not find cloudProfileSpec from the shoot cloudProfile reference: cloudprofile.core.gardener.cloud \"aws\" not found"
        );
    }
}
