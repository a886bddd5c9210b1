//! Shoot path grants: what a shoot extension changed in the draft, and whether it may.
//!
//! A path is a list of segments: object keys, and for arrays whose elements are objects
//! with a unique `name`, `type` or `key`, one segment per element (`[name=cpu-worker-0]`),
//! so that plugins sharing an array (`spec.extensions`) each own their own elements. Other
//! arrays, and a reordered keyed array, change as one value.
//!
//! Written form: `spec.provider.workers`, `metadata.annotations["example.com/owner"]` (keys
//! with characters other than letters, digits, `-` and `_` are quoted),
//! `spec.extensions[type=shoot-dns-service]`. In a pattern, `*` matches any characters
//! within one segment, and a pattern covers everything below it.

use std::fmt;
use std::ops::ControlFlow;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::pattern::glob;

/// The Shoot's identity: pinned by the host from the Runtime and the installation's
/// configuration, never granted to a plugin.
pub const IDENTITY_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.secretBindingName",
    "spec.credentialsBindingName",
    "spec.seedName",
];

/// Fields that identify the elements of an array of objects, in order of preference.
const ITEM_KEYS: &[&str] = &["name", "type", "key"];

/// One step into a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object key.
    Key(String),
    /// The element of an array whose `field` is `value`.
    Item { field: String, value: String },
}

fn plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Key(key) if plain(key) || key == "*" => write!(f, ".{key}"),
            Segment::Key(key) => write!(f, "[{}]", quoted(key)),
            Segment::Item { field, value } if plain(value) || value.contains('*') => {
                write!(f, "[{field}={value}]")
            }
            Segment::Item { field, value } => write!(f, "[{field}={}]", quoted(value)),
        }
    }
}

/// A path in its written form.
pub fn display_path(path: &[Segment]) -> String {
    let text: String = path.iter().map(Segment::to_string).collect();
    text.strip_prefix('.').unwrap_or(&text).to_string()
}

/// A path pattern that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{pattern:?} is not a path ({why}); write e.g. spec.provider.workers or metadata.annotations[\"example.com/key\"]"
)]
pub struct PathError {
    pattern: String,
    why: &'static str,
}

/// A granted path (or the identity), compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern(Vec<Segment>);

impl FromStr for PathPattern {
    type Err = PathError;

    fn from_str(text: &str) -> Result<Self, PathError> {
        let fail = |why| PathError {
            pattern: text.to_string(),
            why,
        };
        let mut segments = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(inner) = rest.strip_prefix('[') {
                let (segment, after) = bracket(inner).ok_or_else(|| fail("unclosed [ ]"))?;
                segments.push(segment);
                rest = after;
            } else {
                let body = rest.strip_prefix('.').unwrap_or(rest);
                if !segments.is_empty() && body.len() == rest.len() {
                    return Err(fail("segments are separated by ."));
                }
                let end = body.find(['.', '[']).unwrap_or(body.len());
                if end == 0 {
                    return Err(fail("empty segment"));
                }
                segments.push(Segment::Key(body[..end].to_string()));
                rest = &body[end..];
            }
        }
        if segments.is_empty() {
            return Err(fail("empty"));
        }
        Ok(Self(segments))
    }
}

/// `"key"]…` or `field=value]…` after a `[`.
fn bracket(inner: &str) -> Option<(Segment, &str)> {
    if inner.starts_with('"') {
        let (key, after) = json_string(inner)?;
        return Some((Segment::Key(key), after.strip_prefix(']')?));
    }
    let (field, value) = inner.split_once('=')?;
    if value.starts_with('"') {
        let (value, after) = json_string(value)?;
        let item = Segment::Item {
            field: field.to_string(),
            value,
        };
        return Some((item, after.strip_prefix(']')?));
    }
    let end = value.find(']')?;
    let item = Segment::Item {
        field: field.to_string(),
        value: value[..end].to_string(),
    };
    Some((item, &value[end + 1..]))
}

/// A JSON string at the start of `text`, and what follows it.
fn json_string(text: &str) -> Option<(String, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => {
                let value = serde_json::from_str(&text[..=i]).ok()?;
                return Some((value, &text[i + 1..]));
            }
            _ => escaped = false,
        }
    }
    None
}

fn segment_matches(pattern: &Segment, segment: &Segment) -> bool {
    match (pattern, segment) {
        (Segment::Key(p), _) if p == "*" => true,
        (Segment::Key(p), Segment::Key(k)) => glob(p, k),
        (
            Segment::Item {
                field: pf,
                value: pv,
            },
            Segment::Item { field, value },
        ) => pf == field && glob(pv, value),
        _ => false,
    }
}

impl PathPattern {
    /// The pattern's segments.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Whether a change at `path` is within this pattern.
    pub fn covers(&self, path: &[Segment]) -> bool {
        self.0.len() <= path.len() && self.0.iter().zip(path).all(|(p, s)| segment_matches(p, s))
    }

    /// Whether every path `other` covers is covered by this one (for requested vs granted).
    pub fn covers_pattern(&self, other: &PathPattern) -> bool {
        self.covers(&other.0)
    }

    /// The identity path this pattern lies at or below, if any (such a grant could never
    /// be used). A pattern above one (`spec`) is fine: identity paths are refused to every
    /// plugin whatever it was granted.
    pub fn identity(&self) -> Option<&'static str> {
        IDENTITY_PATHS.iter().copied().find(|id| {
            let id: PathPattern = id.parse().expect("identity paths parse");
            id.covers(&self.0)
        })
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&display_path(&self.0))
    }
}

/// Whether a change at `path` reaches what `pattern` covers: the path is inside it, or it
/// replaced a parent of it (e.g. all of `spec`).
pub fn touches(path: &[Segment], pattern: &PathPattern) -> bool {
    pattern.covers(path)
        || (path.len() < pattern.0.len()
            && path
                .iter()
                .zip(&pattern.0)
                .all(|(s, p)| segment_matches(p, s)))
}

/// Every path at which `after` differs from `before`: added, removed and changed leaves.
#[cfg(test)]
fn changed_paths(before: &Value, after: &Value) -> Vec<Vec<Segment>> {
    let mut out = Vec::new();
    let mut found = |path: &[Segment]| {
        out.push(path.to_vec());
        ControlFlow::Continue(())
    };
    let _ = Walk {
        path: Vec::new(),
        free: &|_| false,
        found: &mut found,
    }
    .value(Some(before), Some(after));
    out
}

/// The first path (in document order) at which `after` differs from `before`, leaving out
/// the subtrees `free` says may change. Runs after every plugin call: skipping what is
/// granted and stopping at the first refusal keeps it cheap.
pub fn first_change(
    before: &Value,
    after: &Value,
    free: &dyn Fn(&[Segment]) -> bool,
) -> Option<Vec<Segment>> {
    let mut first = None;
    let mut found = |path: &[Segment]| {
        first = Some(path.to_vec());
        ControlFlow::Break(())
    };
    let _ = Walk {
        path: Vec::new(),
        free,
        found: &mut found,
    }
    .value(Some(before), Some(after));
    first
}

/// One comparison of two documents; `found` hears of each changed path, in order.
struct Walk<'f> {
    path: Vec<Segment>,
    free: &'f dyn Fn(&[Segment]) -> bool,
    found: &'f mut dyn FnMut(&[Segment]) -> ControlFlow<()>,
}

impl Walk<'_> {
    fn value(&mut self, a: Option<&Value>, b: Option<&Value>) -> ControlFlow<()> {
        // Equal first: most subtrees did not change, and `free` matches patterns.
        if a == b || (!self.path.is_empty() && (self.free)(&self.path)) {
            return ControlFlow::Continue(());
        }
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => self.maps(Some(x), Some(y)),
            (None, Some(Value::Object(y))) => self.maps(None, Some(y)),
            (Some(Value::Object(x)), None) => self.maps(Some(x), None),
            (Some(Value::Array(x)), Some(Value::Array(y))) => self.arrays(x, y),
            (None, Some(Value::Array(y))) => self.arrays(&[], y),
            (Some(Value::Array(x)), None) => self.arrays(x, &[]),
            _ => (self.found)(&self.path),
        }
    }

    fn maps(
        &mut self,
        a: Option<&Map<String, Value>>,
        b: Option<&Map<String, Value>>,
    ) -> ControlFlow<()> {
        let keys = a.into_iter().flat_map(|m| m.keys());
        let added = b
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|k| a.is_none_or(|a| !a.contains_key(*k)));
        for key in keys.chain(added) {
            self.path.push(Segment::Key(key.clone()));
            let flow = self.value(a.and_then(|m| m.get(key)), b.and_then(|m| m.get(key)));
            self.path.pop();
            flow?;
        }
        if a.is_none_or(Map::is_empty) && b.is_none_or(Map::is_empty) {
            // An empty object appeared or disappeared: no leaf below it says so.
            return (self.found)(&self.path);
        }
        ControlFlow::Continue(())
    }

    fn arrays(&mut self, x: &[Value], y: &[Value]) -> ControlFlow<()> {
        let Some(field) = item_key(x, y) else {
            return (self.found)(&self.path);
        };
        let id = |v: &Value| v[field].as_str().unwrap_or_default().to_string();
        let kept = |from: &[Value], other: &[Value]| -> Vec<String> {
            from.iter()
                .map(id)
                .filter(|k| other.iter().any(|v| id(v) == *k))
                .collect()
        };
        if kept(x, y) != kept(y, x) {
            // Reordered: the order is the array's, not an element's.
            return (self.found)(&self.path);
        }
        let ids: Vec<String> = x
            .iter()
            .map(id)
            .chain(y.iter().map(id).filter(|k| !x.iter().any(|v| id(v) == *k)))
            .collect();
        for key in ids {
            let before = x.iter().find(|v| id(v) == key);
            let after = y.iter().find(|v| id(v) == key);
            self.path.push(Segment::Item {
                field: field.to_string(),
                value: key,
            });
            let flow = if before.is_some() && after.is_some() {
                self.value(before, after)
            } else if (self.free)(&self.path) {
                ControlFlow::Continue(())
            } else {
                // A whole element came or went: one change at the element.
                (self.found)(&self.path)
            };
            self.path.pop();
            flow?;
        }
        ControlFlow::Continue(())
    }
}

/// The field that identifies each element of both arrays, if there is one.
fn item_key(x: &[Value], y: &[Value]) -> Option<&'static str> {
    ITEM_KEYS.iter().copied().find(|field| {
        let unique = |items: &[Value]| {
            let mut seen = std::collections::HashSet::new();
            items
                .iter()
                .all(|v| v[field].as_str().is_some_and(|s| seen.insert(s)))
        };
        !(x.is_empty() && y.is_empty()) && unique(x) && unique(y)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(a: Value, b: Value) -> Vec<String> {
        changed_paths(&a, &b)
            .iter()
            .map(|p| display_path(p))
            .collect()
    }

    fn pattern(text: &str) -> PathPattern {
        text.parse().unwrap()
    }

    #[test]
    fn leaves_that_changed() {
        let a = json!({"spec": {"region": "eu", "gone": 1, "same": {"x": 1}}});
        let b = json!({"spec": {"region": "us", "same": {"x": 1}, "new": {"deep": {"y": 2}}}});
        assert_eq!(paths(a, b), ["spec.gone", "spec.region", "spec.new.deep.y"]);
        let a = json!({"metadata": {"annotations": {"kyma-project.io/x": "1"}}});
        let b = json!({"metadata": {"annotations": {"kyma-project.io/x": "2"}}});
        assert_eq!(
            paths(a, b),
            [r#"metadata.annotations["kyma-project.io/x"]"#]
        );
        assert_eq!(paths(json!({}), json!({"spec": {}})), ["spec"]);
    }

    #[test]
    fn keyed_arrays_change_per_element() {
        let a = json!({"spec": {"extensions": [{"type": "dns", "x": 1}, {"type": "cert"}]}});
        let b = json!({"spec": {"extensions": [{"type": "dns", "x": 2}, {"type": "cert"}, {"type": "audit", "p": {}}]}});
        assert_eq!(
            paths(a.clone(), b),
            ["spec.extensions[type=dns].x", "spec.extensions[type=audit]"]
        );
        let reordered =
            json!({"spec": {"extensions": [{"type": "cert"}, {"type": "dns", "x": 1}]}});
        assert_eq!(paths(a, reordered), ["spec.extensions"]);
        let plain = paths(json!({"zones": ["a"]}), json!({"zones": ["a", "b"]}));
        assert_eq!(plain, ["zones"]);
    }

    #[test]
    fn patterns_parse_print_and_cover() {
        for text in [
            "spec.provider.workers",
            r#"metadata.annotations["example.com/*"]"#,
            "spec.extensions[type=shoot-dns-service].providerConfig",
            r#"spec.resources[name="a b"]"#,
        ] {
            assert_eq!(pattern(text).to_string(), text);
        }
        let p = pattern(r#"metadata.annotations["kyma-project.io/*"]"#);
        let path = |v: Value| changed_paths(&json!({}), &v).remove(0);
        assert!(p.covers(&path(
            json!({"metadata": {"annotations": {"kyma-project.io/a": "1"}}})
        )));
        assert!(!p.covers(&path(
            json!({"metadata": {"annotations": {"other.io/a": "1"}}})
        )));
        assert!(
            pattern("spec.extensions[type=dns]")
                .covers(&path(json!({"spec": {"extensions": [{"type": "dns"}]}})))
        );
        assert!(
            pattern("spec.*.workers").covers(&path(json!({"spec": {"provider": {"workers": 1}}})))
        );
        assert!("spec..x".parse::<PathPattern>().is_err());
        assert!("spec[x".parse::<PathPattern>().is_err());
    }

    #[test]
    fn first_change_skips_what_is_free() {
        let a = json!({"spec": {"provider": {"type": "aws"}, "region": "eu", "seedName": "s1"}});
        let b = json!({"spec": {"provider": {"type": "gcp"}, "region": "eu", "seedName": "s2"}});
        let provider = pattern("spec.provider");
        let free = |p: &[Segment]| provider.covers(p);
        let first = first_change(&a, &b, &free).map(|p| display_path(&p));
        assert_eq!(first.as_deref(), Some("spec.seedName"));
        let spec = pattern("spec");
        let free = |p: &[Segment]| spec.covers(p);
        assert_eq!(first_change(&a, &b, &free), None);
        let nothing = |_: &[Segment]| false;
        let first = first_change(&a, &b, &nothing).map(|p| display_path(&p));
        assert_eq!(first.as_deref(), Some("spec.provider.type"));
        assert_eq!(first_change(&a, &a, &nothing), None);
    }

    #[test]
    fn identity_grants_and_changes() {
        assert_eq!(
            pattern("spec.secretBindingName").identity(),
            Some("spec.secretBindingName")
        );
        assert_eq!(pattern("metadata.name").identity(), Some("metadata.name"));
        assert_eq!(pattern("metadata").identity(), None);
        assert_eq!(pattern("metadata.labels").identity(), None);
        // A change that replaced all of `spec` reaches the seed.
        let seed = pattern("spec.seedName");
        assert!(touches(&[Segment::Key("spec".into())], &seed));
        assert!(!touches(&[Segment::Key("status".into())], &seed));
    }
}
