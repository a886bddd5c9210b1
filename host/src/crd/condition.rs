use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `True`, `False` or `Unknown`, as in every Kubernetes condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A Kubernetes-style status condition (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase machine-readable reason, e.g. `ShootCreationPending`.
    pub reason: String,
    pub message: String,
    /// RFC 3339; changes only when `status` changes.
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Set a condition, keeping its transition time when only reason or message change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let message = message.into();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = crate::time::now_rfc3339();
            }
            existing.status = status;
            existing.reason = reason.to_string();
            existing.message = message;
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            last_transition_time: crate::time::now_rfc3339(),
            observed_generation: generation,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut c = Vec::new();
        set_condition(
            &mut c,
            "Provisioned",
            ConditionStatus::Unknown,
            "A",
            "a",
            Some(1),
        );
        c[0].last_transition_time = "then".into();
        set_condition(
            &mut c,
            "Provisioned",
            ConditionStatus::Unknown,
            "B",
            "b",
            Some(2),
        );
        assert_eq!(c[0].last_transition_time, "then");
        assert_eq!(c[0].reason, "B");
        set_condition(
            &mut c,
            "Provisioned",
            ConditionStatus::True,
            "C",
            "c",
            Some(2),
        );
        assert_ne!(c[0].last_transition_time, "then");
        assert_eq!(c.len(), 1);
    }
}
