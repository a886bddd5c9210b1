//! Shoot metadata rules: the name (N1, N2) and the project membership checks of
//! ShootValidator (N3, N4).

use serde_json::Value;

use super::errors::{self, FieldError, SHOOT_KIND, invalid, required};
use super::gofmt::q;
use super::obj::{name, str_at};
use super::{Facts, Refusal};

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// A lowercase RFC 1123 label (the regexp `[a-z0-9]([-a-z0-9]*[a-z0-9])?`).
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || *c == b'-')
}

/// A lowercase RFC 1123 subdomain: dot-separated labels.
fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
}

/// apimachinery pkg/util/validation/validation.go `IsDNS1123Label`: the messages for `s`.
pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut msgs = Vec::new();
    if s.len() > 63 {
        msgs.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s) {
        msgs.push(match is_subdomain(s) {
            true => "must not contain dots".to_string(),
            false => format!(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{LABEL_FMT}')"
            ),
        });
    }
    msgs
}

/// gardener pkg/api/core/validation/utils.go `validateDNS1123Label`: one Invalid per message.
pub(crate) fn validate_dns1123_label(
    value: &str,
    path: &str,
    rule: &'static str,
) -> Vec<FieldError> {
    dns1123_label(value)
        .into_iter()
        .map(|m| invalid(path, q(value), m, rule))
        .collect()
}

/// apimachinery pkg/api/validation/generic.go `maskTrailingDash` (generateName prefixes).
fn mask_trailing_dash(s: &str) -> String {
    match s.len() > 1 && s.ends_with('-') {
        true => format!("{}a", &s[..s.len() - 2]),
        false => s.to_string(),
    }
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootWithOpts` →
/// apimachinery `ValidateObjectMeta(…, NameIsDNSLabel)`: `metadata.name` (and a
/// `generateName` prefix) must be DNS-1123 labels; one of them is required.
pub(crate) fn validate_name(shoot: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate = str_at(shoot, &["metadata", "generateName"]);
    if !generate.is_empty() {
        for m in dns1123_label(&mask_trailing_dash(generate)) {
            errs.push(invalid("metadata.generateName", q(generate), m, "N1"));
        }
    }
    match name(shoot) {
        "" => errs.push(required(
            "metadata.name",
            "name or generateName is required",
            "N1",
        )),
        n => errs.extend(validate_dns1123_label(n, "metadata.name", "N1")),
    }
    errs
}

/// gardener pkg/api/core/validation/utils.go `validateNameConsecutiveHyphens`: no `--`.
pub(crate) fn consecutive_hyphens(shoot: &Value) -> Vec<FieldError> {
    let n = name(shoot);
    match n.contains("--") {
        true => vec![invalid(
            "metadata.name",
            q(n),
            "name may not contain two consecutive hyphens",
            "N2",
        )],
        false => Vec::new(),
    }
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateProjectMembership` (CREATE):
/// project and shoot name together at most 21 characters (generateName: 16) → 422 (N3); the
/// project must not be marked for deletion → 403 (N4).
pub(crate) fn project_membership(
    shoot: &Value,
    project: &str,
    deleting: bool,
) -> Result<(), Refusal> {
    let n = name(shoot);
    let generate = str_at(shoot, &["metadata", "generateName"]);
    let detail = if n.is_empty() && !generate.is_empty() {
        (project.len() + generate.len() > 16).then(|| format!(
            "the length of the shoot generateName and the project name must not exceed 16 characters (project: {project}; shoot with generateName: {generate})"
        ))
    } else {
        (project.len() + n.len() > 21).then(|| format!(
            "the length of the shoot name and the project name must not exceed 21 characters (project: {project}; shoot: {n})"
        ))
    };
    if let Some(detail) = detail {
        let err = invalid("name", q(n), detail, "N3");
        return Err(errors::invalid_refusal(SHOOT_KIND, n, &[err]));
    }
    if deleting {
        let msg = format!(
            "cannot create shoot '{n}' in project '{project}' that is already marked for deletion"
        );
        return Err(errors::forbidden_refusal(n, &msg, vec!["N4"]));
    }
    Ok(())
}

/// The project of the Shoot's namespace, or ShootValidator's 500 when there is none
/// (gardener plugin/pkg/utils/project.go `ProjectForNamespaceFromLister`).
pub(crate) fn project(facts: &Facts) -> Result<(&str, bool), Refusal> {
    match &facts.project {
        Some((name, deleting)) => Ok((name.as_str(), *deleting)),
        None => Err(errors::internal(
            "could not find referenced project: Project.core.gardener.cloud \"<unknown>\" not found",
            vec!["PRJ"],
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use serde_json::json;

    #[test]
    fn n1_name_must_be_a_dns_label() {
        let r = refused(create(&with(shoot(), "/metadata/name", json!("My_Shoot"))));
        assert_eq!(r.code, 422);
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"My_Shoot\" is invalid: metadata.name: Invalid value: \"My_Shoot\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
        assert_eq!(r.causes[0].reason, "FieldValueInvalid");
        assert_eq!(r.causes[0].field, "metadata.name");
        assert_eq!(r.rules, vec!["N1"]);
        assert_eq!(
            create(&with(shoot(), "/metadata/name", json!("my-shoot1"))),
            Ok(())
        );
    }

    #[test]
    fn n2_no_consecutive_hyphens() {
        let r = refused(create(&with(shoot(), "/metadata/name", json!("a--b"))));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"a--b\" is invalid: metadata.name: Invalid value: \"a--b\": name may not contain two consecutive hyphens"
        );
        assert_eq!(r.rules, vec!["N2"]);
        assert_eq!(
            create(&with(shoot(), "/metadata/name", json!("a-b"))),
            Ok(())
        );
    }

    #[test]
    fn n3_project_and_shoot_name_at_most_21() {
        let long = "a-very-long-name-wxyz";
        let r = refused(create(&with(shoot(), "/metadata/name", json!(long))));
        assert_eq!(r.code, 422);
        assert_eq!(
            r.message,
            format!(
                "Shoot.core.gardener.cloud \"{long}\" is invalid: name: Invalid value: \"{long}\": the length of the shoot name and the project name must not exceed 21 characters (project: p; shoot: {long})"
            )
        );
        assert_eq!(r.rules, vec!["N3"]);
        assert_eq!(
            create(&with(
                shoot(),
                "/metadata/name",
                json!("a-very-long-name-xyz")
            )),
            Ok(())
        );
    }

    #[test]
    fn n4_project_being_deleted() {
        let mut f = facts();
        f.project = Some(("p".into(), true));
        let r = refused(super::super::validate(
            super::super::Operation::Create,
            Some(&shoot()),
            None,
            &user(),
            &f,
        ));
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: cannot create shoot 's' in project 'p' that is already marked for deletion"
        );
        assert_eq!(r.rules, vec!["N4"]);
    }
}
