//! Deletion: the frozen spec (D1), deletion confirmation (D2, `confirmed-by`), deletion
//! during Migrate/Restore (D4), force deletion (F1–F3) and the `gardener` finalizer (F4, F5).

use serde_json::Value;

use super::errors::{self, FieldError, forbidden};
use super::gofmt::{json, parse_bool};
use super::obj::{
    annotation, at, deleting, finalizers, list, name, remove_annotation, set_annotation, str_at,
};
use super::{FORCE_DELETION_CODES, Operation, Refusal, User};

const CONFIRMATION: &str = "confirmation.gardener.cloud/deletion";
const CONFIRMED_BY: &str = "deletion.gardener.cloud/confirmed-by";
const FORCE_DELETION: &str = "confirmation.gardener.cloud/force-deletion";
const FORCE_PATH: &str = "metadata.annotations[confirmation.gardener.cloud/force-deletion]";
/// go-test/deep `MaxDiff`.
const MAX_DIFFS: usize = 10;

/// JSON equality as apimachinery `Semantic.DeepEqual` sees it: absent = `null`, and a
/// `null` list equals an empty one.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys())
            .all(|k| same(member(x, k), member(y, k))),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Array(x), Value::Null) | (Value::Null, Value::Array(x)) => x.is_empty(),
        _ => a == b,
    }
}

/// `map[key]`, `null` when absent.
fn member<'a>(map: &'a serde_json::Map<String, Value>, key: &str) -> &'a Value {
    map.get(key).unwrap_or(&Value::Null)
}

/// How go-test/deep prints a value: strings bare, nil as `<nil pointer>`.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "<nil pointer>".into(),
        Value::String(s) => s.clone(),
        other => json(other),
    }
}

/// The differences between `a` and `b` under `path`, as `path: a != b`, at most 10.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if out.len() >= MAX_DIFFS || same(a, b) {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff(&format!("{path}.{k}"), member(x, k), member(y, k), out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let (p, q) = (
                    x.get(i).unwrap_or(&Value::Null),
                    y.get(i).unwrap_or(&Value::Null),
                );
                diff(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push(format!("{path}: {} != {}", show(a), show(b))),
    }
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpecUpdate` (D1): once the
/// deletion timestamp is set the spec is frozen. Gardener lists the changes with go-test/deep
/// and Go field names of its internal types (`Kubernetes.Version: 1.33.6 != 1.33.5`); we
/// cannot reproduce those and print JSON paths (`spec.kubernetes.version: 1.33.6 != 1.33.5`)
/// instead — the one deliberate difference from Gardener's messages.
pub(crate) fn spec_frozen(new: &Value, old: &Value) -> Option<FieldError> {
    if !deleting(new) || same(&new["spec"], &old["spec"]) {
        return None;
    }
    let mut changes = Vec::new();
    diff("spec", &new["spec"], &old["spec"], &mut changes);
    let detail = format!(
        "cannot update shoot spec if deletion timestamp is set. Requested changes: {}",
        changes.join(",")
    );
    Some(forbidden("spec", detail, "D1"))
}

/// gardener pkg/utils/gardener/deletion_confirmation.go `CheckIfDeletionIsConfirmed`: the
/// annotation parses (`strconv.ParseBool`) as true.
fn deletion_confirmed(obj: &Value) -> bool {
    annotation(obj, CONFIRMATION).and_then(parse_bool) == Some(true)
}

/// gardener plugin/pkg/global/deletionconfirmation/admission.go `Validate` (D2): a DELETE needs
/// `confirmation.gardener.cloud/deletion` = true (dual approval is not simulated).
pub(crate) fn confirm_deletion(shoot: &Value) -> Result<(), Refusal> {
    if deletion_confirmed(shoot) {
        return Ok(());
    }
    let msg = format!("must have a \"{CONFIRMATION}\" annotation to delete");
    Err(errors::forbidden_refusal(name(shoot), &msg, vec!["D2"]))
}

/// gardener plugin/pkg/global/deletionconfirmation/admission.go `Admit`: maintain
/// `deletion.gardener.cloud/confirmed-by` — the requester when the confirmation appears,
/// kept while it stays, removed without it.
pub(crate) fn admit_confirmation(op: Operation, new: &mut Value, old: Option<&Value>, user: &User) {
    let now_confirmed = deletion_confirmed(new);
    let was = match (op, old) {
        (Operation::Update, Some(old)) => Some(old),
        _ => None,
    };
    match (now_confirmed, was) {
        (false, _) => remove_annotation(new, CONFIRMED_BY),
        (true, Some(old)) if deletion_confirmed(old) => {
            let by = annotation(old, CONFIRMED_BY).unwrap_or("").to_string();
            set_annotation(new, CONFIRMED_BY, &by);
        }
        (true, _) => set_annotation(new, CONFIRMED_BY, &user.name),
    }
}

/// gardener pkg/api/core/helper/shoot.go `ShootNeedsForceDeletion`.
fn needs_force_deletion(shoot: Option<&Value>) -> bool {
    shoot
        .and_then(|s| annotation(s, FORCE_DELETION))
        .and_then(parse_bool)
        == Some(true)
}

/// gardener pkg/api/core/validation/shoot.go `ValidateForceDeletion`: once set it stays (F3);
/// newly set it needs the deletion timestamp (F1) and one of five error codes in
/// `status.lastErrors` (F2). `status`: the Shoot's status (empty on create).
pub(crate) fn force_deletion(new: &Value, old: Option<&Value>, status: &Value) -> Vec<FieldError> {
    let (was, is) = (needs_force_deletion(old), needs_force_deletion(Some(new)));
    if was && !is {
        return vec![forbidden(
            FORCE_PATH,
            "force-deletion annotation cannot be removed once set",
            "F3",
        )];
    }
    let mut errs = Vec::new();
    if is && !was {
        if !deleting(new) {
            let msg = "force-deletion annotation cannot be set when Shoot deletionTimestamp is nil";
            errs.push(forbidden(FORCE_PATH, msg, "F1"));
        }
        let coded = list(status, &["lastErrors"]).iter().any(|e| {
            list(e, &["codes"]).iter().any(|c| {
                c.as_str()
                    .is_some_and(|c| FORCE_DELETION_CODES.contains(&c))
            })
        });
        if !coded {
            let msg = format!(
                "force-deletion annotation cannot be set when Shoot status does not contain one of these error codes: [{}]",
                FORCE_DELETION_CODES.join(" ")
            );
            errs.push(forbidden(FORCE_PATH, msg, "F2"));
        }
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateFinalizersOnCreation` (F5): neither
/// `gardener` nor `gardener.cloud/reference-protection` on create.
pub(crate) fn finalizers_on_creation(shoot: &Value) -> Vec<FieldError> {
    finalizers(shoot)
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(**f, "gardener" | "gardener.cloud/reference-protection"))
        .map(|(i, f)| {
            let msg = format!("finalizer \"{f}\" cannot be added on creation");
            forbidden(&format!("metadata.finalizers[{i}]"), msg, "F5")
        })
        .collect()
}

/// gardener plugin/pkg/global/finalizerremoval/admission.go `Validate`/`shootDeletionSucceeded`
/// (F4): the `gardener` finalizer may go only once the deletion succeeded (`Delete`,
/// `Succeeded`, progress 100), or if there is no lastOperation. (Gardener also lets it go
/// while `status.technicalID` is empty; its gardenlet sets that together with the first
/// lastOperation — reconciler.go `updateShootStatusOperationStart` — and the simulator's
/// driver does not write it, so that condition is left out.)
pub(crate) fn finalizer_removal(new: &Value, old: &Value) -> Result<(), Refusal> {
    let removed = finalizers(old).contains(&"gardener") && !finalizers(new).contains(&"gardener");
    let op = at(old, &["status", "lastOperation"]);
    let succeeded = op.is_null()
        || (op["type"] == "Delete" && op["state"] == "Succeeded" && op["progress"] == 100);
    if !removed || succeeded {
        return Ok(());
    }
    let msg = "finalizer \"gardener\" cannot be removed because shoot deletion has not completed successfully yet";
    Err(errors::forbidden_refusal(name(new), msg, vec!["F4"]))
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateDeletion` (D4): no DELETE during a
/// Migrate operation, or a Restore that has not succeeded.
pub(crate) fn validate_deletion(shoot: &Value) -> Result<(), Refusal> {
    let op = at(shoot, &["status", "lastOperation"]);
    let (kind, state) = (str_at(op, &["type"]), str_at(op, &["state"]));
    let blocked =
        !op.is_null() && (kind == "Migrate" || (kind == "Restore" && state != "Succeeded"));
    if !blocked {
        return Ok(());
    }
    let msg =
        format!("cannot mark shoot for deletion during {kind} operation that is in state {state}");
    Err(errors::forbidden_refusal(name(shoot), &msg, vec!["D4"]))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Operation, validate};
    use serde_json::json;

    fn deleting(v: serde_json::Value) -> serde_json::Value {
        with(
            v,
            "/metadata/deletionTimestamp",
            json!("2026-06-01T00:00:00Z"),
        )
    }

    fn delete(shoot: &serde_json::Value) -> Result<(), super::super::Refusal> {
        validate(Operation::Delete, None, Some(shoot), &user(), &facts())
    }

    #[test]
    fn d1_spec_frozen_while_deleting() {
        let old = deleting(shoot());
        let new = with(old.clone(), "/spec/kubernetes/version", json!("1.34.0"));
        let new = with(new, "/spec/provider/workers/0/maximum", json!(4));
        let r = refused(update(&new, &old));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"s\" is invalid: spec: Forbidden: cannot update shoot spec if deletion timestamp is set. Requested changes: spec.kubernetes.version: 1.34.0 != 1.34.1,spec.provider.workers[0].maximum: 4 != 3"
        );
        assert_eq!(r.rules, vec!["D1"]);
        let annotated = with(old.clone(), "/metadata/annotations/foo", json!("bar"));
        assert_eq!(update(&annotated, &old), Ok(()));
    }

    #[test]
    fn d2_deletion_needs_confirmation() {
        let r = refused(delete(&shoot()));
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: must have a \"confirmation.gardener.cloud/deletion\" annotation to delete"
        );
        assert_eq!(r.rules, vec!["D2"]);
        let no = with(
            shoot(),
            "/metadata/annotations/confirmation.gardener.cloud~1deletion",
            json!("false"),
        );
        assert!(delete(&no).is_err());
        let confirmed = json!({"confirmation.gardener.cloud/deletion": "T"});
        assert_eq!(
            delete(&with(shoot(), "/metadata/annotations", confirmed)),
            Ok(())
        );
    }

    #[test]
    fn d4_no_deletion_during_migrate() {
        let s = with(
            shoot(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/deletion": "true"}),
        );
        let s = with(
            s,
            "/status/lastOperation",
            json!({"type": "Migrate", "state": "Processing"}),
        );
        let r = refused(delete(&s));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: cannot mark shoot for deletion during Migrate operation that is in state Processing"
        );
    }

    #[test]
    fn confirmed_by_is_maintained() {
        let mut s = with(
            shoot(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/deletion": "true"}),
        );
        super::admit_confirmation(Operation::Create, &mut s, None, &user());
        assert_eq!(
            s["metadata"]["annotations"]["deletion.gardener.cloud/confirmed-by"],
            "alice"
        );
        let mut next = s.clone();
        let bob = super::super::User {
            name: "bob".into(),
            groups: vec![],
        };
        super::admit_confirmation(Operation::Update, &mut next, Some(&s), &bob);
        assert_eq!(
            next["metadata"]["annotations"]["deletion.gardener.cloud/confirmed-by"],
            "alice"
        );
        let mut off = with(
            next.clone(),
            "/metadata/annotations/confirmation.gardener.cloud~1deletion",
            json!("no"),
        );
        super::admit_confirmation(Operation::Update, &mut off, Some(&next), &bob);
        assert!(
            off["metadata"]["annotations"]
                .get("deletion.gardener.cloud/confirmed-by")
                .is_none()
        );
    }

    #[test]
    fn f1_f2_force_deletion_on_create() {
        let s = with(
            shoot(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/force-deletion": "1"}),
        );
        let r = refused(create(&s));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"s\" is invalid: [metadata.annotations[confirmation.gardener.cloud/force-deletion]: Forbidden: force-deletion annotation cannot be set when Shoot deletionTimestamp is nil, metadata.annotations[confirmation.gardener.cloud/force-deletion]: Forbidden: force-deletion annotation cannot be set when Shoot status does not contain one of these error codes: [ERR_CLEANUP_CLUSTER_RESOURCES ERR_CONFIGURATION_PROBLEM ERR_INFRA_DEPENDENCIES ERR_INFRA_UNAUTHENTICATED ERR_INFRA_UNAUTHORIZED]]"
        );
        assert_eq!(r.rules, vec!["F1", "F2"]);
    }

    #[test]
    fn f2_f3_force_deletion_on_update() {
        let old = deleting(with(
            shoot(),
            "/status/lastErrors",
            json!([{"description": "x", "codes": ["ERR_INFRA_UNAUTHORIZED"]}]),
        ));
        let new = with(
            old.clone(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/force-deletion": "true"}),
        );
        assert_eq!(update(&new, &old), Ok(()));
        let r = refused(update(&old, &new));
        assert!(
            r.message
                .ends_with("Forbidden: force-deletion annotation cannot be removed once set")
        );
        assert_eq!(r.rules, vec!["F3"]);
        let plain = deleting(shoot());
        let new = with(
            plain.clone(),
            "/metadata/annotations",
            json!({"confirmation.gardener.cloud/force-deletion": "true"}),
        );
        assert_eq!(refused(update(&new, &plain)).rules, vec!["F2"]);
    }

    #[test]
    fn f4_gardener_finalizer_stays_until_deleted() {
        let old = with(shoot(), "/metadata/finalizers", json!(["gardener"]));
        let old = with(
            old,
            "/status",
            json!({"technicalID": "shoot--p--s",
            "lastOperation": {"type": "Delete", "state": "Processing", "progress": 50}}),
        );
        let new = with(old.clone(), "/metadata/finalizers", json!([]));
        let r = refused(update(&new, &old));
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: finalizer \"gardener\" cannot be removed because shoot deletion has not completed successfully yet"
        );
        let done = with(
            old.clone(),
            "/status/lastOperation",
            json!({"type": "Delete", "state": "Succeeded", "progress": 100}),
        );
        let new = with(done.clone(), "/metadata/finalizers", json!([]));
        assert_eq!(update(&new, &done), Ok(()));
        let fresh = with(shoot(), "/metadata/finalizers", json!(["gardener"]));
        let new = with(fresh.clone(), "/metadata/finalizers", json!([]));
        assert_eq!(update(&new, &fresh), Ok(()));
    }

    #[test]
    fn f5_no_gardener_finalizer_on_create() {
        let s = with(shoot(), "/metadata/finalizers", json!(["foo", "gardener"]));
        let r = refused(create(&s));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"s\" is invalid: metadata.finalizers[1]: Forbidden: finalizer \"gardener\" cannot be added on creation"
        );
        assert_eq!(
            create(&with(shoot(), "/metadata/finalizers", json!(["foo"]))),
            Ok(())
        );
    }
}
