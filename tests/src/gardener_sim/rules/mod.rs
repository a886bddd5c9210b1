//! Gardener's Shoot API rules, as pure functions over Shoot JSON: the mutating admission
//! (ShootMutator, DeletionConfirmation.Admit, the strategy's SyncCloudProfileFields), the
//! strategy validation (`ValidateShoot`, `ValidateShootUpdate`) and the validating admission
//! plugins (ResourceReferenceManager, ShootValidator, DeletionConfirmation,
//! FinalizerRemoval), each refusing a request with the status Gardener answers.
//!
//! Source: gardener/gardener at the commit of [`GARDENER_PIN`]. Every rule function names
//! the Gardener file and function it follows. What Gardener's apiserver does before admission
//! (decoding, v1beta1 defaulting) is not redone here; where a rule depends on a v1beta1
//! default, an absent field is read as that default.

mod admin_kubeconfig;
mod cloud_profile;
mod deletion;
mod errors;
mod gofmt;
mod maintenance;
mod meta;
mod mutator;
mod networking;
mod obj;
mod operation;
mod references;
mod scheduling;
mod spec;
mod status;
mod validator;
mod versions;
mod workers;

use std::collections::BTreeMap;

use serde_json::Value;

pub use status::{
    failed_attempt, flow_failure_description, start_description, success_description,
};

/// The pinned Gardener commit: the 40-hex commit of `tests/kube/gardener.pin`
/// (`gardener/gardener <commit>`).
pub const GARDENER_PIN: &str = pin_commit(include_str!("../../../kube/gardener.pin"));

/// The last whitespace-separated word of the pin file.
const fn pin_commit(file: &'static str) -> &'static str {
    let trimmed = file.trim_ascii();
    let bytes = trimmed.as_bytes();
    let mut i = bytes.len();
    while i > 0 && !bytes[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    trimmed.split_at(i).1
}

/// §4: the five error codes that allow force deletion (`errorCodesAllowingForceDeletion`),
/// in the order Gardener's message lists them.
pub const FORCE_DELETION_CODES: [&str; 5] = [
    "ERR_CLEANUP_CLUSTER_RESOURCES",
    "ERR_CONFIGURATION_PROBLEM",
    "ERR_INFRA_DEPENDENCIES",
    "ERR_INFRA_UNAUTHENTICATED",
    "ERR_INFRA_UNAUTHORIZED",
];

/// The admission operation of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// The requesting user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// A refusal as the Gardener API server would answer it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 422, 403, 500 or 400.
    pub code: u16,
    /// `Invalid`, `Forbidden`, `InternalError`, `BadRequest`, or `""` (a plain Go error: 500).
    pub reason: &'static str,
    /// The full message exactly as Gardener formats it.
    pub message: String,
    /// For 422: `details.causes` (`reason`, `message` = the error body, `field`).
    pub causes: Vec<Cause>,
    /// The ids of the rules that fired (the spec's summary table, e.g. `R2`, `K4`, `F2`).
    pub rules: Vec<&'static str>,
}

/// One `details.causes[]` entry of a 422.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

/// What the admission handler looked up for one request (it calls [`needs`] first).
#[derive(Clone, Debug)]
pub struct Facts {
    pub now: jiff::Timestamp,
    /// The Project whose `spec.namespace` is the Shoot's namespace: (name, being deleted).
    pub project: Option<(String, bool)>,
    /// The referenced CloudProfile (full JSON), `None` if missing. A NamespacedCloudProfile
    /// reference counts as missing.
    pub cloud_profile: Option<Value>,
    /// SecretBindings by name (`None`: does not exist), for the names [`needs`] listed.
    pub secret_bindings: BTreeMap<String, Option<Value>>,
    /// CredentialsBindings by name (`None`: does not exist).
    pub credentials_bindings: BTreeMap<String, Option<Value>>,
    /// ConfigMaps in the Shoot's namespace by name (`None`: does not exist).
    pub config_maps: BTreeMap<String, Option<Value>>,
    /// Secrets in the Shoot's namespace by name (`None`: does not exist).
    pub secrets: BTreeMap<String, Option<Value>>,
    /// The requesting user may `update shoots/binding` in the namespace.
    pub may_bind: bool,
}

/// What to look up for a request: the referenced CloudProfile, bindings and ConfigMaps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub cloud_profile: Option<String>,
    pub secret_bindings: Vec<String>,
    pub credentials_bindings: Vec<String>,
    pub config_maps: Vec<String>,
    pub secrets: Vec<String>,
}

/// What to look up for a request on `new` (`old` for a DELETE): the CloudProfile (only a
/// `CloudProfile` reference), the SecretBinding/CredentialsBinding and the
/// `structuredAuthentication` ConfigMap it names, and the Secrets and ConfigMaps of
/// `spec.resources`.
pub fn needs(new: Option<&Value>, old: Option<&Value>) -> Needs {
    let Some(shoot) = new.or(old) else {
        return Needs::default();
    };
    let named = |path: &[&str]| -> Vec<String> {
        obj::opt_str(shoot, path)
            .filter(|s| !s.is_empty())
            .map(|s| vec![s.to_string()])
            .unwrap_or_default()
    };
    let auth = [
        "spec",
        "kubernetes",
        "kubeAPIServer",
        "structuredAuthentication",
        "configMapName",
    ];
    let mut config_maps = named(&auth);
    config_maps.extend(references::resource_names(shoot, "ConfigMap"));
    Needs {
        cloud_profile: cloud_profile::reference(shoot)
            .filter(|(kind, _)| kind == "CloudProfile")
            .map(|(_, name)| name),
        secret_bindings: named(&["spec", "secretBindingName"]),
        credentials_bindings: named(&["spec", "credentialsBindingName"]),
        config_maps,
        secrets: references::resource_names(shoot, "Secret"),
    }
}

/// Mutating admission and strategy mutations, in Gardener's order: ShootMutator (Kubernetes
/// version defaulting of `spec.kubernetes.version` and `workers[].kubernetes.version`,
/// machine image defaulting, `gardener.cloud/created-by`, CP4, CP5), DeletionConfirmation
/// `Admit` (`deletion.gardener.cloud/confirmed-by`), `SyncCloudProfileFields`. Mutates `new`
/// in place; `Err`: the request is refused (403/500 as Gardener).
pub fn mutate(
    op: Operation,
    new: &mut Value,
    old: Option<&Value>,
    user: &User,
    facts: &Facts,
) -> Result<(), Refusal> {
    if op == Operation::Delete {
        return Ok(());
    }
    let old = old.filter(|_| op == Operation::Update);
    if op == Operation::Create && facts.project.is_none() {
        return Err(no_project(new));
    }
    mutator::admit(op, new, old, user, facts)?;
    deletion::admit_confirmation(op, new, old, user);
    cloud_profile::sync_fields(new, old);
    Ok(())
}

/// gardener plugin/pkg/shoot/tolerationrestriction/admission.go `Validate` (after
/// ResourceReferenceManager, before ShootValidator): the namespace must belong to a Project.
fn project_exists(shoot: &Value, facts: &Facts) -> Result<(), Refusal> {
    match facts.project {
        Some(_) => Ok(()),
        None => Err(no_project(shoot)),
    }
}

/// gardener plugin/pkg/shoot/tolerationrestriction/admission.go `Admit` (CREATE, before
/// ShootMutator) and `Validate`: a namespace without a Project → 403 wrapping the lister's
/// 500.
fn no_project(shoot: &Value) -> Refusal {
    let err = "Internal error occurred: could not find referenced project: Project.core.gardener.cloud \"<unknown>\" not found";
    errors::forbidden_refusal(obj::name(shoot), err, vec!["PRJ"])
}

/// Strategy validation (`ValidateShoot`/`ValidateShootUpdate` with `ValidateForceDeletion`,
/// `ValidateFinalizersOnCreation`: one 422 aggregating all field errors), then the
/// validating admission plugins in Gardener's order: ResourceReferenceManager,
/// ShootTolerationRestriction (only its project lookup), ShootValidator (project membership
/// N3 as 422, scheduling, then the CloudProfile constraints as one 403),
/// DeletionConfirmation (DELETE), FinalizerRemoval (UPDATE). The first failing stage wins.
/// For a DELETE, `new` is `None` and `old` is the stored object.
pub fn validate(
    op: Operation,
    new: Option<&Value>,
    old: Option<&Value>,
    user: &User,
    facts: &Facts,
) -> Result<(), Refusal> {
    match (op, new, old) {
        (Operation::Create, Some(new), _) => validate_create(new, user, facts),
        (Operation::Update, Some(new), Some(old)) => validate_update(new, old, user, facts),
        (Operation::Delete, _, Some(old)) => {
            validator::validate(op, old, Some(old), user, facts)?;
            deletion::confirm_deletion(old)
        }
        _ => Err(errors::bad_request(
            "could not convert resource into Shoot object",
        )),
    }
}

/// CREATE: strategy `Validate`, ResourceReferenceManager, ShootValidator.
fn validate_create(new: &Value, user: &User, facts: &Facts) -> Result<(), Refusal> {
    let errs = spec::strategy_create(new);
    if !errs.is_empty() {
        return Err(errors::invalid_refusal(
            errors::SHOOT_KIND,
            obj::name(new),
            &errs,
        ));
    }
    references::ensure_shoot_references(Operation::Create, new, None, facts)?;
    project_exists(new, facts)?;
    validator::validate(Operation::Create, new, None, user, facts)
}

/// UPDATE: strategy `ValidateUpdate`, ResourceReferenceManager, ShootValidator,
/// FinalizerRemoval.
fn validate_update(new: &Value, old: &Value, user: &User, facts: &Facts) -> Result<(), Refusal> {
    let errs = spec::strategy_update(new, old);
    if !errs.is_empty() {
        return Err(errors::invalid_refusal(
            errors::SHOOT_KIND,
            obj::name(new),
            &errs,
        ));
    }
    references::ensure_shoot_references(Operation::Update, new, Some(old), facts)?;
    project_exists(new, facts)?;
    validator::validate(Operation::Update, new, Some(old), user, facts)?;
    deletion::finalizer_removal(new, old)
}

/// AdminKubeconfigRequest: AK1 (`spec.expirationSeconds` defaults to 3600; below 600 → 422
/// as Gardener), then silently capped at `max_seconds`. Returns the granted seconds.
pub fn admin_kubeconfig_seconds(request: &Value, max_seconds: i64) -> Result<i64, Refusal> {
    admin_kubeconfig::seconds(request, max_seconds)
}

/// AK2: the kube-apiserver addresses of `status.advertisedAddresses` (`external`,
/// `internal`, `wildcard-tls-seed-bound`, `unmanaged`, in status order) as (name,
/// `https://<host>`); 422 as Gardener when there is none.
pub fn admin_kubeconfig_addresses(shoot: &Value) -> Result<Vec<(String, String)>, Refusal> {
    admin_kubeconfig::addresses(shoot)
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn a_valid_shoot_passes_every_stage() {
        let mut s = shoot();
        assert_eq!(
            mutate(Operation::Create, &mut s, None, &user(), &facts()),
            Ok(())
        );
        let created_by = json!({"gardener.cloud/created-by": "alice"});
        assert_eq!(s, with(shoot(), "/metadata/annotations", created_by));
        assert_eq!(create(&s), Ok(()));
        assert_eq!(update(&s, &s), Ok(()));
        let confirmed = with(
            s.clone(),
            "/metadata/annotations/confirmation.gardener.cloud~1deletion",
            json!("true"),
        );
        assert_eq!(update(&confirmed, &s), Ok(()));
        assert_eq!(
            validate(Operation::Delete, None, Some(&confirmed), &user(), &facts()),
            Ok(())
        );
    }

    #[test]
    fn needs_names_the_references() {
        let s = with(
            shoot(),
            "/spec/kubernetes/kubeAPIServer/structuredAuthentication/configMapName",
            json!("oidc"),
        );
        let n = needs(Some(&s), None);
        assert_eq!(n.cloud_profile.as_deref(), Some("aws"));
        assert_eq!(n.credentials_bindings, vec!["cb".to_string()]);
        assert!(n.secret_bindings.is_empty());
        assert_eq!(n.config_maps, vec!["oidc".to_string()]);
        let namespaced = with(
            shoot(),
            "/spec/cloudProfile/kind",
            json!("NamespacedCloudProfile"),
        );
        assert_eq!(needs(None, Some(&namespaced)).cloud_profile, None);
    }

    #[test]
    fn a_create_without_project_is_refused_before_the_mutator() {
        let mut f = facts();
        f.project = None;
        let r = mutate(Operation::Create, &mut shoot(), None, &user(), &f).unwrap_err();
        assert_eq!(r.code, 403);
        assert!(r.message.ends_with(
            "could not find referenced project: Project.core.gardener.cloud \"<unknown>\" not found"
        ));
    }

    #[test]
    fn pin_is_a_commit() {
        assert_eq!(super::GARDENER_PIN.len(), 40);
        assert!(super::GARDENER_PIN.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
