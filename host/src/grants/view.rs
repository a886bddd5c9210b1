//! The part of a Shoot a shoot extension sees: what it may set, and the identity. A plugin
//! can change nothing else (the grant check refuses it), so the host sends it only those
//! subtrees of the draft and of the current Shoot, and takes back only those. Less to copy,
//! parse and serialize on both sides, less to compare, and a plugin reads no more of the
//! Shoot than the operator granted it to write.
//!
//! Each granted path contributes its object keys above the first array selector or
//! wildcard: `spec.extensions[type=x]` gives `spec.extensions` (the whole array, so the
//! grant check still sees the other elements), `metadata.annotations["a/*"]` gives
//! `metadata.annotations`.

use serde_json::{Map, Value};

use super::paths::{IDENTITY_PATHS, PathPattern, Segment};

/// Always visible: what says what the document is.
const ALWAYS: &[&str] = &["apiVersion", "kind"];

/// Subtrees of a Shoot, as object key paths; `None`: the whole document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShootView {
    subtrees: Option<Vec<Vec<String>>>,
}

/// The object keys of `pattern` above its first selector or wildcard.
fn plain_prefix(pattern: &PathPattern) -> Vec<String> {
    pattern
        .segments()
        .iter()
        .map_while(|s| match s {
            Segment::Key(key) if !key.contains('*') => Some(key.clone()),
            _ => None,
        })
        .collect()
}

impl ShootView {
    /// The view of a plugin granted `paths`.
    pub fn of(paths: &[PathPattern]) -> Self {
        let identity = IDENTITY_PATHS
            .iter()
            .chain(ALWAYS)
            .map(|p| p.parse::<PathPattern>().expect("identity paths parse"));
        let mut subtrees: Vec<Vec<String>> = paths
            .iter()
            .cloned()
            .chain(identity)
            .map(|p| plain_prefix(&p))
            .collect();
        if subtrees.iter().any(Vec::is_empty) {
            return Self { subtrees: None };
        }
        subtrees.sort();
        subtrees.dedup();
        // A subtree inside another one is already in it.
        let all = subtrees.clone();
        subtrees.retain(|s| !all.iter().any(|o| o.len() < s.len() && s.starts_with(o)));
        Self {
            subtrees: Some(subtrees),
        }
    }

    /// The parts of `doc` in view (the document itself when the view is everything).
    pub fn project(&self, doc: &Value) -> Value {
        let Some(subtrees) = &self.subtrees else {
            return doc.clone();
        };
        let mut out = Value::Object(Map::new());
        for path in subtrees {
            if let Some(value) = get(doc, path) {
                set(&mut out, path, value.clone());
            }
        }
        out
    }

    /// Drop empty objects above the subtrees in view from what a plugin returned: its typed
    /// model writes `spec: {}` or leaves out `metadata.annotations: {}` whatever it saw,
    /// and only the subtrees are taken back, so such an object is no change.
    pub fn prune(&self, returned: &mut Value) {
        let Some(subtrees) = &self.subtrees else {
            return;
        };
        for path in subtrees {
            for depth in (1..path.len()).rev() {
                let above = &path[..depth];
                if get(returned, above).is_some_and(|v| v.as_object().is_some_and(Map::is_empty)) {
                    remove(returned, above);
                }
            }
        }
    }

    /// Put what the plugin returned (`seen`, a projected document) back into `doc`: every
    /// subtree in view is replaced, or removed when `seen` lacks it.
    pub fn merge(&self, doc: &mut Value, seen: Value) {
        let Some(subtrees) = &self.subtrees else {
            *doc = seen;
            return;
        };
        for path in subtrees {
            match get(&seen, path) {
                Some(value) => set(doc, path, value.clone()),
                None => remove(doc, path),
            }
        }
    }
}

fn get<'v>(doc: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(doc, |v, key| v.get(key))
}

/// Set `path` to `value`, creating objects on the way (a non-object on the way is replaced:
/// the view only ever holds objects above its subtrees).
fn set(doc: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        *doc = value;
        return;
    };
    let mut node = doc;
    for key in parents {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        node = node
            .as_object_mut()
            .expect("an object")
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    node.as_object_mut()
        .expect("an object")
        .insert(last.clone(), value);
}

fn remove(doc: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = doc;
    for key in parents {
        match node.get_mut(key) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let Some(map) = node.as_object_mut() {
        map.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn view(paths: &[&str]) -> ShootView {
        let paths: Vec<PathPattern> = paths.iter().map(|p| p.parse().unwrap()).collect();
        ShootView::of(&paths)
    }

    fn draft() -> Value {
        json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "s", "namespace": "garden-p", "labels": {"a": "1"},
                         "annotations": {"x/y": "1"}},
            "spec": {"region": "eu", "provider": {"type": "aws"},
                     "extensions": [{"type": "dns"}, {"type": "audit"}]}
        })
    }

    #[test]
    fn a_plugin_sees_its_grants_and_the_identity() {
        let seen = view(&[
            "spec.extensions[type=audit]",
            "metadata.annotations[\"x/*\"]",
        ])
        .project(&draft());
        assert_eq!(
            seen,
            json!({
                "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
                "metadata": {"name": "s", "namespace": "garden-p", "annotations": {"x/y": "1"}},
                "spec": {"extensions": [{"type": "dns"}, {"type": "audit"}]}
            })
        );
    }

    #[test]
    fn what_comes_back_replaces_only_the_subtrees_in_view() {
        let v = view(&["spec.provider", "spec.dns"]);
        let mut doc = draft();
        let mut seen = v.project(&doc);
        seen["spec"]["provider"] = json!({"type": "gcp"});
        seen["spec"]["dns"] = json!({"domain": "d"});
        // Outside the view: ignored here, refused by the grant check before.
        seen["spec"]["region"] = json!("us");
        v.merge(&mut doc, seen);
        assert_eq!(doc["spec"]["provider"], json!({"type": "gcp"}));
        assert_eq!(doc["spec"]["dns"], json!({"domain": "d"}));
        assert_eq!(doc["spec"]["region"], json!("eu"));
        assert_eq!(doc["metadata"]["labels"], json!({"a": "1"}));
    }

    #[test]
    fn a_subtree_the_plugin_dropped_is_removed() {
        let v = view(&["metadata.labels"]);
        let mut doc = draft();
        let mut seen = v.project(&doc);
        seen["metadata"].as_object_mut().unwrap().remove("labels");
        v.merge(&mut doc, seen);
        assert!(doc["metadata"].get("labels").is_none());
        assert_eq!(doc["metadata"]["name"], "s");
    }

    #[test]
    fn empty_objects_above_the_view_are_no_change() {
        let v = view(&["spec.dns", "metadata.annotations[\"x/y\"]"]);
        let mut returned = json!({
            "metadata": {"name": "s", "annotations": {}},
            "spec": {}, "status": {}
        });
        v.prune(&mut returned);
        assert_eq!(returned, json!({"metadata": {"name": "s"}, "status": {}}));
    }

    #[test]
    fn a_grant_at_the_root_shows_everything() {
        assert_eq!(view(&["*"]).project(&draft()), draft());
        assert_eq!(view(&["[name=x]"]).project(&draft()), draft());
    }
}
