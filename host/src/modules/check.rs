//! The grant check of an answer as a whole: every object parsed, keyed, labelled as the
//! module's and checked against the write grant before anything is written; one refused
//! object refuses the answer.

use std::collections::HashSet;

use serde_json::Value;

use super::apply;
use super::error::ModuleError;
use super::inventory::ObjectKey;
use super::run::ModuleRun;
use crate::grants::{Access, ObjectRef, Scope};

/// An answer's objects, checked and keyed, and as the plugin returned them.
pub(crate) type Checked = (Vec<(ObjectKey, Value)>, Vec<Value>);

/// The scope of `key` when the cluster does not serve its kind yet: from a CRD of the same
/// answer, else from whether it names a namespace.
fn batch_scope(key: &ObjectKey, objects: &[Value]) -> bool {
    objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .find(|o| o["spec"]["group"] == key.group() && o["spec"]["names"]["kind"] == key.kind)
        .map_or(key.namespace.is_some(), |crd| {
            crd["spec"]["scope"] != "Cluster"
        })
}

impl ModuleRun<'_> {
    /// Parse, key and label every object of an answer and check each against the write
    /// grant: one refused object refuses the whole answer.
    pub(crate) async fn check_answer(
        &self,
        desired: &[String],
    ) -> Result<Result<Checked, String>, ModuleError> {
        let mut values = Vec::with_capacity(desired.len());
        for (i, json) in desired.iter().enumerate() {
            match serde_json::from_str::<Value>(json) {
                Ok(v) => values.push(v),
                Err(e) => {
                    return Ok(Err(format!(
                        "{}: desired[{i}] is not JSON: {e}",
                        self.plugin()
                    )));
                }
            }
        }
        let mut prepared = Vec::with_capacity(values.len());
        let mut seen = HashSet::new();
        for value in &values {
            let (mut key, object) = match apply::prepare(value.clone(), self.set, self.module) {
                Ok(p) => p,
                Err(e) => return Ok(Err(e.to_string())),
            };
            let namespaced = match self.target.kind(&key.api_version, &key.kind).await? {
                Some(kind) => kind.namespaced,
                None => batch_scope(&key, &values),
            };
            if !namespaced {
                key.namespace = None;
            }
            if let Err(why) = self.check_write(&key, namespaced) {
                return Ok(Err(why));
            }
            if !seen.insert(key.clone()) {
                return Ok(Err(format!("{}: {key} is returned twice", self.plugin())));
            }
            prepared.push((key, object));
        }
        apply::order(&mut prepared);
        Ok(Ok((prepared, values)))
    }

    fn check_write(&self, key: &ObjectKey, namespaced: bool) -> Result<(), String> {
        let scope = match (namespaced, key.namespace.as_deref()) {
            (false, _) => Scope::Cluster,
            (true, Some(ns)) => Scope::Namespace(ns),
            // Refused later by the apply itself ("set metadata.namespace").
            (true, None) => return Ok(()),
        };
        let object = ObjectRef {
            group: key.group(),
            kind: &key.kind,
            scope,
            name: Some(&key.name),
        };
        self.candidate
            .grants
            .allows(Access::Write, &object)
            .map_err(|refusal| {
                format!(
                    "{}: {refusal}; nothing of this answer was applied",
                    self.plugin()
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scope_of_kinds_a_crd_of_the_same_answer_defines() {
        let crd = json!({"kind": "CustomResourceDefinition", "spec": {
            "group": "example.com", "scope": "Cluster", "names": {"kind": "Widget"}}});
        let key = |ns: Option<&str>| ObjectKey {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            namespace: ns.map(str::to_string),
            name: "w".into(),
        };
        assert!(!batch_scope(&key(Some("a")), std::slice::from_ref(&crd)));
        assert!(batch_scope(&key(Some("a")), &[]));
        assert!(!batch_scope(&key(None), &[]));
    }
}
