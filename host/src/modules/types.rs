//! The types the files of `modules/` share, at the bottom of their one-way order: who asks
//! (a module of a set) and what applying would do to an object.

use serde_json::Value;

/// Field managers that are Tessera's own modules.
pub(crate) const MODULE_MANAGER_PREFIX: &str = "tessera-module-";

/// The module asking.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner<'a> {
    /// `<namespace>/<name>` of the ModuleSet.
    pub(crate) set: &'a str,
    pub(crate) module: &'a str,
}

/// What applying would do to one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Not on the cluster yet: created as this (the API server's dry-run answer).
    Create(Value),
    /// On the cluster and different: `before` (live) would become `after`.
    Update {
        before: Value,
        after: Value,
    },
    Unchanged,
    /// Listed in the inventory, no longer wanted: deleted.
    Prune,
    /// Not checked with the API server, and why (its CRD is created by the same apply).
    Unchecked(String),
    /// Applying would be refused, and why.
    Refused(String),
}

impl Change {
    /// Live object and dry-run answer compared without the server's bookkeeping.
    pub(crate) fn between(before: Option<Value>, after: Value) -> Change {
        let after = comparable(after);
        match before.map(comparable) {
            None => Change::Create(after),
            Some(before) if before == after => Change::Unchanged,
            Some(before) => Change::Update { before, after },
        }
    }

    /// Whether applying would write or delete anything (or fail).
    pub fn changes_something(&self) -> bool {
        !matches!(self, Change::Unchanged)
    }
}

/// Without what the API server keeps for itself and the module never sets.
fn comparable(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in [
            "managedFields",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "uid",
            "selfLink",
        ] {
            meta.remove(field);
        }
    }
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bookkeeping_is_not_a_change() {
        let live = json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "7",
            "uid": "u", "managedFields": [{}], "creationTimestamp": "t"}, "data": {"k": "v"}});
        let same = json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "8"},
            "data": {"k": "v"}});
        assert_eq!(Change::between(Some(live.clone()), same), Change::Unchanged);
        let other = json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "w"}});
        assert!(matches!(
            Change::between(Some(live), other.clone()),
            Change::Update { .. }
        ));
        assert_eq!(Change::between(None, other.clone()), Change::Create(other));
    }
}
