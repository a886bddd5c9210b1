//! Whose an object on the target is, decided from its labels, annotations, uid and field
//! managers: what the apply path takes over (nothing foreign unless the set says so) and
//! what prune, `remove` and custom-resource cleanup may delete (only this module's own).

use serde_json::Value;

use super::labels;
use super::sharing;
use super::types::Owner;

/// Whose an object is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Whose {
    /// This module of this set made it (labels agree and, when recorded, the uid does).
    Ours,
    /// Another module or set of Tessera holds it, and this module shares it (a shareable
    /// object listing it among its sharers: see [`sharing`]).
    Sharing,
    /// Another module or set of Tessera manages it.
    Tessera { set: String, module: String },
    /// Tessera did not make it; these are its field managers.
    Foreign { managers: Vec<String> },
}

impl Whose {
    /// Why the object is not taken over, for a module's message.
    pub(crate) fn refusal(&self) -> String {
        match self {
            Whose::Ours | Whose::Sharing => String::new(),
            Whose::Tessera { set, module } => format!(
                "exists and belongs to module {module} of ModuleSet {set}; not taken over"
            ),
            Whose::Foreign { managers } if managers.is_empty() => {
                "exists and was not created by this module; not taken over (set adopt: true on the module to take it over)".into()
            }
            Whose::Foreign { managers } => format!(
                "exists and was not created by this module (field managers: {}); not taken over (set adopt: true on the module to take it over)",
                managers.join(", ")
            ),
        }
    }
}

/// Whose `object` (as the API server returned it) is, for `owner`; `recorded` is the uid
/// the inventory lists for it, if any.
pub(crate) fn whose(object: &Value, owner: Owner<'_>, recorded: Option<&str>) -> Whose {
    let meta = &object["metadata"];
    let module = meta["labels"][labels::MODULE].as_str();
    let set = meta["annotations"][labels::MODULE_SET].as_str();
    let uid = meta["uid"].as_str();
    match module {
        Some(m) if m == owner.module && set == Some(owner.set) => {
            if recorded.is_none_or(|r| Some(r) == uid) {
                Whose::Ours
            } else {
                Whose::Foreign {
                    managers: managers(object),
                }
            }
        }
        Some(_) if sharing::shareable_object(object) && sharing::listed(object, owner) => {
            Whose::Sharing
        }
        Some(m) => Whose::Tessera {
            set: set.unwrap_or("?").to_string(),
            module: m.to_string(),
        },
        None => Whose::Foreign {
            managers: managers(object),
        },
    }
}

fn managers(object: &Value) -> Vec<String> {
    let mut out: Vec<String> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The field managers a server-side apply conflict names (`conflict with "kubectl-edit"`).
pub(crate) fn conflicting_managers(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find("with \"") {
        rest = &rest[at + "with \"".len()..];
        if let Some(end) = rest.find('"') {
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether an API error says the object is not the one whose uid was sent: 409 "uid
/// mismatch" when it is gone, 422 "metadata.uid … immutable" when another object of the
/// same name replaced it (what Kubernetes 1.20 answers).
pub(crate) fn is_uid_mismatch(code: u16, message: &str) -> bool {
    (code == 409 && message.contains("uid mismatch"))
        || (code == 422 && message.contains("metadata.uid"))
}

/// Whether an API error is a server-side apply conflict with another field manager.
pub(crate) fn is_field_conflict(code: u16, message: &str) -> bool {
    code == 409 && message.contains("conflict")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OWNER: Owner<'static> = Owner {
        set: "ns/main",
        module: "dashboard",
    };

    fn object(module: Option<&str>, set: Option<&str>, uid: &str) -> Value {
        json!({"metadata": {
            "uid": uid,
            "labels": module.map(|m| json!({labels::MODULE: m})),
            "annotations": set.map(|s| json!({labels::MODULE_SET: s})),
            "managedFields": [{"manager": "kubectl-edit"}, {"manager": "kubectl-create"}],
        }})
    }

    #[test]
    fn labels_and_uid_decide() {
        let ours = object(Some("dashboard"), Some("ns/main"), "u1");
        assert_eq!(whose(&ours, OWNER, None), Whose::Ours);
        assert_eq!(whose(&ours, OWNER, Some("u1")), Whose::Ours);
        // Labelled as ours, but not the object the inventory recorded: not deleted.
        assert!(matches!(
            whose(&ours, OWNER, Some("u0")),
            Whose::Foreign { .. }
        ));
        let other = object(Some("telemetry"), Some("ns/main"), "u2");
        assert_eq!(
            whose(&other, OWNER, None),
            Whose::Tessera {
                set: "ns/main".into(),
                module: "telemetry".into()
            }
        );
        let other_set = object(Some("dashboard"), Some("ns/other"), "u3");
        assert!(matches!(
            whose(&other_set, OWNER, None),
            Whose::Tessera { .. }
        ));
        let mut shared = other.clone();
        shared["metadata"]["annotations"][labels::SHARED_BY] =
            "ns/b/telemetry,ns/main/dashboard".into();
        // Listed on a kind modules do not share (a plugin wrote the annotation): not shared.
        shared["apiVersion"] = "v1".into();
        shared["kind"] = "ConfigMap".into();
        shared["metadata"]["name"] = "c".into();
        assert!(matches!(whose(&shared, OWNER, None), Whose::Tessera { .. }));
        shared["apiVersion"] = "apiextensions.k8s.io/v1".into();
        shared["kind"] = "CustomResourceDefinition".into();
        assert_eq!(whose(&shared, OWNER, Some("u9")), Whose::Sharing);
        let foreign = object(None, None, "u4");
        let w = whose(&foreign, OWNER, None);
        assert_eq!(
            w,
            Whose::Foreign {
                managers: vec!["kubectl-create".into(), "kubectl-edit".into()]
            }
        );
        assert!(
            w.refusal().contains("kubectl-create, kubectl-edit"),
            "{}",
            w.refusal()
        );
    }

    #[test]
    fn conflict_messages_name_managers() {
        let one =
            r#"Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.title"#;
        assert_eq!(conflicting_managers(one), ["kubectl-patch"]);
        let two = "Apply failed with 2 conflicts: conflicts with \"tessera-module-a\" using v1:\n- .data.x\nconflicts with \"kubectl-edit\" using v1:\n- .data.y";
        assert_eq!(
            conflicting_managers(two),
            ["kubectl-edit", "tessera-module-a"]
        );
        assert!(is_field_conflict(409, one));
        assert!(!is_uid_mismatch(409, one));
        let gone = "Operation cannot be fulfilled on configmaps \"x\": uid mismatch: the provided object specified uid 1, and no existing object was found";
        assert!(is_uid_mismatch(409, gone));
        let replaced =
            r#"ConfigMap "c1" is invalid: metadata.uid: Invalid value: "1": field is immutable"#;
        assert!(is_uid_mismatch(422, replaced));
    }
}
