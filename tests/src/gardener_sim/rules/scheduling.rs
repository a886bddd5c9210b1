//! ShootValidator `validateScheduling` (S1–S3, S5). Only the main resource is simulated (no
//! `shoots/binding` subresource) and Seeds are not: a named seed is taken to exist, and the
//! seed-dependent checks (taints, capacity, selectors, rescheduling) do not run.

use serde_json::Value;

use super::errors::forbidden_refusal;
use super::obj::{at, name, opt_str, str_at};
use super::{Facts, Operation, Refusal, User};

/// gardener plugin/pkg/shoot/validator/admission.go `validateScheduling`: on create a
/// `seedName` needs `update shoots/binding` (S1); on update it cannot be unset (S3) nor changed
/// outside the binding subresource (S2); the spec cannot change while the Shoot waits for a
/// migration to a new seed or is being migrated/restored (S5).
pub(crate) fn validate(
    op: Operation,
    shoot: &Value,
    old: Option<&Value>,
    user: &User,
    facts: &Facts,
) -> Result<(), Refusal> {
    let new_seed = opt_str(shoot, &["spec", "seedName"]);
    let old_seed = old.and_then(|o| opt_str(o, &["spec", "seedName"]));
    let n = name(shoot);
    match op {
        Operation::Delete => return Ok(()),
        Operation::Create if old_seed.is_none() && new_seed.is_some() && !facts.may_bind => {
            let msg = format!(
                "user \"{}\" is not allowed to set .spec.seedName for \"shoots\"",
                user.name
            );
            return Err(forbidden_refusal(n, &msg, vec!["S1"]));
        }
        Operation::Update => match (old_seed, new_seed) {
            (Some(o), None) => {
                let msg =
                    format!("spec.seedName is already set to '{o}' and cannot be changed to 'nil'");
                return Err(forbidden_refusal(n, &msg, vec!["S3"]));
            }
            (o, Some(s)) if o != Some(s) => {
                let msg = format!(
                    "spec.seedName '{}' cannot be changed to '{s}' by patching the shoot, please use the shoots/binding subresource",
                    o.unwrap_or("nil")
                );
                return Err(forbidden_refusal(n, &msg, vec!["S2"]));
            }
            _ => {}
        },
        Operation::Create => {}
    }
    let spec_changed = old.is_none_or(|o| o["spec"] != shoot["spec"]);
    match spec_changed {
        true => frozen_by_migration(shoot),
        false => Ok(()),
    }
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateScheduling` with `wasShootRescheduledToNewSeed` /
/// `isShootInMigrationOrRestorePhase` (S5): no spec change while rescheduled or migrating.
fn frozen_by_migration(shoot: &Value) -> Result<(), Refusal> {
    let op = at(shoot, &["status", "lastOperation"]);
    if op.is_null() {
        return Ok(());
    }
    let (kind, state) = (str_at(op, &["type"]), str_at(op, &["state"]));
    let spec_seed = opt_str(shoot, &["spec", "seedName"]);
    let status_seed = opt_str(shoot, &["status", "seedName"]);
    let msg = if kind != "Migrate"
        && spec_seed.is_some()
        && status_seed.is_some()
        && spec_seed != status_seed
    {
        "shoot spec cannot be changed because shoot has been rescheduled to a new seed".to_string()
    } else if kind == "Migrate" || (kind == "Restore" && state != "Succeeded") {
        format!("cannot change shoot spec during {kind} operation that is in state {state}")
    } else {
        return Ok(());
    };
    Err(forbidden_refusal(name(shoot), &msg, vec!["S5"]))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Operation, validate};
    use serde_json::json;

    #[test]
    fn s1_seed_name_needs_binding_permission() {
        let s = with(shoot(), "/spec/seedName", json!("seed-1"));
        let r = refused(create(&s));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: user \"alice\" is not allowed to set .spec.seedName for \"shoots\""
        );
        assert_eq!(r.rules, vec!["S1"]);
        let mut f = facts();
        f.may_bind = true;
        assert_eq!(
            validate(Operation::Create, Some(&s), None, &user(), &f),
            Ok(())
        );
    }

    #[test]
    fn s2_s3_seed_name_changes() {
        let old = with(shoot(), "/spec/seedName", json!("seed-1"));
        let new = with(shoot(), "/spec/seedName", json!("seed-2"));
        let r = refused(update(&new, &old));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: spec.seedName 'seed-1' cannot be changed to 'seed-2' by patching the shoot, please use the shoots/binding subresource"
        );
        let r = refused(update(&new, &shoot()));
        assert!(r.message.ends_with("spec.seedName 'nil' cannot be changed to 'seed-2' by patching the shoot, please use the shoots/binding subresource"));
        let r = refused(update(&shoot(), &old));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: spec.seedName is already set to 'seed-1' and cannot be changed to 'nil'"
        );
        assert_eq!(r.rules, vec!["S3"]);
        let relabeled = with(old.clone(), "/metadata/labels", json!({"a": "b"}));
        assert_eq!(update(&relabeled, &old), Ok(()));
    }
}
