//! ShootValidator (gardener plugin/pkg/shoot/validator/admission.go `Validate`): lookups
//! that end the request (500), the project and scheduling checks, then the CloudProfile
//! constraints as one 403. (Seeds are not simulated.)

use serde_json::Value;

use super::cloud_profile::{self, Ctx, missing};
use super::errors::{self, FieldError};
use super::gofmt::q;
use super::obj::{k8s_version, list, name, opt_str};
use super::{Facts, Operation, Refusal, User, deletion, meta, networking, scheduling};

/// gardener plugin/pkg/shoot/validator/admission.go `Validate`: a referenced binding, or the 500 when it is missing.
fn binding<'f>(
    shoot: &Value,
    key: &str,
    found: &'f std::collections::BTreeMap<String, Option<Value>>,
    what: &str,
    resource: &str,
) -> Result<Option<&'f Value>, Refusal> {
    let Some(n) = opt_str(shoot, &["spec", key]) else {
        return Ok(None);
    };
    match found.get(n) {
        Some(Some(b)) => Ok(Some(b)),
        _ => Err(errors::internal(
            &format!(
                "could not find referenced {what}: {resource} {} not found",
                q(n)
            ),
            vec!["B6"],
        )),
    }
}

/// gardener plugin/pkg/shoot/validator/admission.go `Validate`. `shoot` is the new object
/// (for a DELETE the stored one), `old` the stored one (`None` on create).
pub(crate) fn validate(
    op: Operation,
    shoot: &Value,
    old: Option<&Value>,
    user: &User,
    facts: &Facts,
) -> Result<(), Refusal> {
    if op == Operation::Update
        && old.is_some_and(|o| o["spec"] == shoot["spec"] && o["metadata"] == shoot["metadata"])
    {
        return Ok(());
    }
    let profile = match cloud_profile::spec_of(shoot, facts) {
        Err(e) => return Err(missing(&e)),
        Ok(None) => return Ok(()),
        Ok(Some(p)) => p,
    };
    if op != Operation::Delete {
        cloud_profile::validate_changes(shoot, old)?;
    }
    let (project, project_deleting) = meta::project(facts)?;
    let sb = binding(
        shoot,
        "secretBindingName",
        &facts.secret_bindings,
        "secret binding",
        "secretbinding.core.gardener.cloud",
    )?;
    let cb = binding(
        shoot,
        "credentialsBindingName",
        &facts.credentials_bindings,
        "credentials binding",
        "credentialsbinding.security.gardener.cloud",
    )?;
    if op == Operation::Create {
        meta::project_membership(shoot, project, project_deleting)?;
    }
    scheduling::validate(op, shoot, old, user, facts)?;
    if op == Operation::Delete {
        return deletion::validate_deletion(shoot);
    }
    let ctx = Ctx {
        op,
        profile,
        shoot,
        old,
        now: facts.now,
    };
    let errs = field_errors(&ctx, sb, cb);
    match errs.is_empty() {
        true => Ok(()),
        false => Err(errors::forbidden_fields(name(shoot), &errs)),
    }
}

/// The field checks of `Validate`, in Gardener's order: networks, Kubernetes version,
/// region, provider (type, then the pools).
fn field_errors(ctx: &Ctx, sb: Option<&Value>, cb: Option<&Value>) -> Vec<FieldError> {
    let mut errs = networking::overlaps(ctx.shoot);
    let versions = list(ctx.profile, &["kubernetes", "versions"]);
    let old_version = ctx.old.map(k8s_version).unwrap_or("");
    let active_only = ctx.op == Operation::Create;
    let path = "spec.kubernetes.version";
    errs.extend(cloud_profile::version_constraint(
        versions,
        k8s_version(ctx.shoot),
        old_version,
        active_only,
        path,
        ctx.now,
    ));
    errs.extend(cloud_profile::region(ctx.profile, ctx.shoot, ctx.old));
    match cloud_profile::provider_type(ctx.profile, ctx.shoot, sb, cb) {
        Some(e) => errs.push(e),
        None => errs.extend(cloud_profile::provider(ctx)),
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Operation, validate};
    use serde_json::json;

    #[test]
    fn missing_project() {
        let mut f = facts();
        f.project = None;
        let r = refused(validate(
            Operation::Create,
            Some(&shoot()),
            None,
            &user(),
            &f,
        ));
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: Internal error occurred: could not find referenced project: Project.core.gardener.cloud \"<unknown>\" not found"
        );
        let s = with(
            shoot(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/deletion": "true"}),
        );
        let r = refused(validate(Operation::Delete, None, Some(&s), &user(), &f));
        assert_eq!((r.code, r.reason), (500, "InternalError"));
        assert_eq!(
            r.message,
            "Internal error occurred: could not find referenced project: Project.core.gardener.cloud \"<unknown>\" not found"
        );
    }

    #[test]
    fn missing_profile_blocks_deletion() {
        let mut f = facts();
        f.cloud_profile = None;
        let s = with(
            shoot(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/deletion": "true"}),
        );
        let r = refused(validate(Operation::Delete, None, Some(&s), &user(), &f));
        assert_eq!(
            r.message,
            "Internal error occurred: could not find referenced cloud profile: cloudprofile.core.gardener.cloud \"aws\" not found"
        );
    }

    #[test]
    fn unchanged_update_passes() {
        assert_eq!(update(&shoot(), &shoot()), Ok(()));
    }
}
