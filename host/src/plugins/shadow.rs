//! A compact diff of two rendered Shoots, for shadow rollouts: one line per changed leaf,
//! with its path.

use serde_json::Value;

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(79).collect::<String>())
    } else {
        text
    }
}

/// `path.key`, the key escaped: keys come from plugin output and end up in status.
fn join(path: &str, key: &str) -> String {
    let key = crate::wasm::text::escape(key);
    if path.is_empty() {
        key.into_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                walk(&join(path, key), x.get(key), y.get(key), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                walk(&format!("{path}[{i}]"), x.get(i), y.get(i), out);
            }
        }
        (Some(x), Some(y)) if x == y => {}
        (Some(x), Some(y)) => out.push(format!("~ {path}: {} → {}", short(x), short(y))),
        (None, Some(y)) => out.push(format!("+ {path}: {}", short(y))),
        (Some(x), None) => out.push(format!("- {path}: {}", short(x))),
        (None, None) => {}
    }
}

/// Lines describing how `shadow` differs from `current` (empty when equal).
pub fn diff(current: &Value, shadow: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("", Some(current), Some(shadow), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_of_changed_leaves() {
        let a = json!({"spec": {"region": "eu", "workers": [{"max": 3}], "gone": true}});
        let b = json!({"spec": {"region": "us", "workers": [{"max": 3}, {"max": 1}]}});
        assert_eq!(
            diff(&a, &b),
            vec![
                "- spec.gone: true",
                "~ spec.region: \"eu\" → \"us\"",
                "+ spec.workers[1]: {\"max\":1}",
            ]
        );
        assert!(diff(&a, &a).is_empty());
    }
}
