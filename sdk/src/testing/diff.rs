use similar::TextDiff;

/// Render a JSON value as YAML for humans (stable key order).
pub fn to_yaml(value: &serde_json::Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| format!("{value:#}"))
}

/// A unified diff of two documents rendered as YAML; expected is `-`, actual is `+`.
pub fn yaml_diff(expected: &serde_json::Value, actual: &serde_json::Value) -> String {
    let (expected, actual) = (to_yaml(expected), to_yaml(actual));
    TextDiff::from_lines(&expected, &actual)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}
