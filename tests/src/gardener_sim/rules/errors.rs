//! Field errors and refusals, formatted as `k8s.io/apimachinery` v0.36 formats them
//! (`pkg/util/validation/field/errors.go`, `pkg/util/errors/errors.go`,
//! `pkg/api/errors/errors.go`).

use super::gofmt::q;
use super::{Cause, Refusal};

/// `Shoot.core.gardener.cloud`: the group kind `apierrors.NewInvalid` names.
pub(crate) const SHOOT_KIND: &str = "Shoot.core.gardener.cloud";
/// `shoots.core.gardener.cloud`: the group resource `admission.NewForbidden` names.
pub(crate) const SHOOTS: &str = "shoots.core.gardener.cloud";

/// `field.ErrorType`, as far as Gardener's Shoot rules use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Required,
    Forbidden,
    Invalid,
    NotSupported,
    Duplicate,
    TooLong,
}

impl Kind {
    /// apimachinery field/errors.go `ErrorType.String`.
    fn title(self) -> &'static str {
        match self {
            Kind::Required => "Required value",
            Kind::Forbidden => "Forbidden",
            Kind::Invalid => "Invalid value",
            Kind::NotSupported => "Unsupported value",
            Kind::Duplicate => "Duplicate value",
            Kind::TooLong => "Too long",
        }
    }

    /// apimachinery field/errors.go: the `ErrorType` constants (the `reason` of a cause).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Kind::Required => "FieldValueRequired",
            Kind::Forbidden => "FieldValueForbidden",
            Kind::Invalid => "FieldValueInvalid",
            Kind::NotSupported => "FieldValueNotSupported",
            Kind::Duplicate => "FieldValueDuplicate",
            Kind::TooLong => "FieldValueTooLong",
        }
    }
}

/// One `field.Error`; `value` is already rendered as apimachinery renders bad values
/// (`gofmt::q` for Go strings, `gofmt::json` for everything JSON-marshalled).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldError {
    pub kind: Kind,
    pub field: String,
    pub value: String,
    pub detail: String,
    /// The rule id (the spec's summary table) this error belongs to.
    pub rule: &'static str,
}

impl FieldError {
    /// apimachinery field/errors.go `Error.ErrorBody`.
    pub(crate) fn body(&self) -> String {
        let mut s = match self.kind {
            Kind::Required | Kind::Forbidden | Kind::TooLong => self.kind.title().to_string(),
            _ => format!("{}: {}", self.kind.title(), self.value),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// apimachinery field/errors.go `Error.Error`: `<field>: <body>`.
    pub(crate) fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// A `field.Error` of `kind`.
fn new(kind: Kind, field: &str, value: String, detail: String, rule: &'static str) -> FieldError {
    FieldError {
        kind,
        field: field.to_string(),
        value,
        detail,
        rule,
    }
}

/// apimachinery `field.Required`.
pub(crate) fn required(field: &str, detail: &str, rule: &'static str) -> FieldError {
    new(Kind::Required, field, String::new(), detail.into(), rule)
}

/// apimachinery `field.Forbidden`.
pub(crate) fn forbidden(field: &str, detail: impl Into<String>, rule: &'static str) -> FieldError {
    new(Kind::Forbidden, field, String::new(), detail.into(), rule)
}

/// apimachinery `field.Invalid` (`value` rendered by the caller).
pub(crate) fn invalid(
    field: &str,
    value: String,
    detail: impl Into<String>,
    rule: &'static str,
) -> FieldError {
    new(Kind::Invalid, field, value, detail.into(), rule)
}

/// apimachinery `field.NotSupported`: `supported values: "a", "b"` (nothing if empty).
pub(crate) fn not_supported<S: AsRef<str>>(
    field: &str,
    value: String,
    values: &[S],
    rule: &'static str,
) -> FieldError {
    let detail = match values.is_empty() {
        true => String::new(),
        false => {
            let quoted: Vec<String> = values.iter().map(|v| q(v.as_ref())).collect();
            format!("supported values: {}", quoted.join(", "))
        }
    };
    new(Kind::NotSupported, field, value, detail, rule)
}

/// apimachinery `field.Duplicate`.
pub(crate) fn duplicate(field: &str, value: String, rule: &'static str) -> FieldError {
    new(Kind::Duplicate, field, value, String::new(), rule)
}

/// apimachinery `field.TooLong`: `may not be more than <n> bytes`.
pub(crate) fn too_long(field: &str, max: u64, rule: &'static str) -> FieldError {
    let unit = if max == 1 { "byte" } else { "bytes" };
    let detail = format!("may not be more than {max} {unit}");
    new(Kind::TooLong, field, String::new(), detail, rule)
}

/// apimachinery `ErrorList.ToAggregate().Error()`: duplicates (by message) dropped, one
/// error as is, several as `[e1, e2]`.
pub(crate) fn aggregate(messages: impl IntoIterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for m in messages {
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    match seen.len() {
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// The rule ids of `errs`, each once, in order.
pub(crate) fn rules_of(errs: &[FieldError]) -> Vec<&'static str> {
    let mut rules = Vec::new();
    for e in errs {
        if !rules.contains(&e.rule) {
            rules.push(e.rule);
        }
    }
    rules
}

/// apimachinery `apierrors.NewInvalid(groupKind, name, errs)`: 422 with one cause per error.
pub(crate) fn invalid_refusal(group_kind: &str, name: &str, errs: &[FieldError]) -> Refusal {
    let agg = aggregate(errs.iter().map(FieldError::message));
    Refusal {
        code: 422,
        reason: "Invalid",
        message: format!("{group_kind} {} is invalid: {agg}", q(name)),
        causes: errs
            .iter()
            .map(|e| Cause {
                reason: e.kind.reason(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect(),
        rules: rules_of(errs),
    }
}

/// apiserver `admission.NewForbidden(a, err)` → apimachinery `apierrors.NewForbidden`:
/// `shoots.core.gardener.cloud "<name>" is forbidden: <err>` (no name part if empty).
pub(crate) fn forbidden_refusal(name: &str, err: &str, rules: Vec<&'static str>) -> Refusal {
    let message = match name.is_empty() {
        true => format!("{SHOOTS} is forbidden: {err}"),
        false => format!("{SHOOTS} {} is forbidden: {err}", q(name)),
    };
    Refusal {
        code: 403,
        reason: "Forbidden",
        message,
        causes: Vec::new(),
        rules,
    }
}

/// `admission.NewForbidden(a, errs.ToAggregate())`: one 403 for several field errors.
pub(crate) fn forbidden_fields(name: &str, errs: &[FieldError]) -> Refusal {
    let agg = aggregate(errs.iter().map(FieldError::message));
    forbidden_refusal(name, &agg, rules_of(errs))
}

/// apimachinery `apierrors.NewInternalError(err)`: 500 `Internal error occurred: <err>`.
pub(crate) fn internal(err: &str, rules: Vec<&'static str>) -> Refusal {
    Refusal {
        code: 500,
        reason: "InternalError",
        message: format!("Internal error occurred: {err}"),
        causes: Vec::new(),
        rules,
    }
}

/// A plain Go `error` returned by an admission plugin: 500, no reason, the error verbatim.
pub(crate) fn plain(err: &str, rules: Vec<&'static str>) -> Refusal {
    Refusal {
        code: 500,
        reason: "",
        message: err.to_string(),
        causes: Vec::new(),
        rules,
    }
}

/// apimachinery `apierrors.NewBadRequest(msg)`: 400.
pub(crate) fn bad_request(msg: &str) -> Refusal {
    Refusal {
        code: 400,
        reason: "BadRequest",
        message: msg.to_string(),
        causes: Vec::new(),
        rules: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_as_apimachinery_renders_them() {
        let e = invalid("spec.region", q("b"), "field is immutable", "R2");
        assert_eq!(
            e.message(),
            r#"spec.region: Invalid value: "b": field is immutable"#
        );
        let e = required("spec.region", "must specify a region", "R1");
        assert_eq!(e.body(), "Required value: must specify a region");
        let e = not_supported("k", q("x"), &["a", "b"], "CP2");
        assert_eq!(
            e.body(),
            r#"Unsupported value: "x": supported values: "a", "b""#
        );
        let e = not_supported::<&str>("k", q("x"), &[], "CP2");
        assert_eq!(e.body(), r#"Unsupported value: "x""#);
        assert_eq!(
            too_long("n", 15, "W").body(),
            "Too long: may not be more than 15 bytes"
        );
        assert_eq!(
            too_long("n", 1, "W").body(),
            "Too long: may not be more than 1 byte"
        );
    }

    #[test]
    fn aggregate_dedupes_and_brackets() {
        assert_eq!(aggregate(["a".to_string()]), "a");
        assert_eq!(aggregate(["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(["a".into(), "b".into(), "a".into()]), "[a, b]");
    }

    #[test]
    fn forbidden_without_name() {
        let r = forbidden_refusal("", "boom", vec![]);
        assert_eq!(r.message, "shoots.core.gardener.cloud is forbidden: boom");
        assert_eq!(r.code, 403);
    }
}
