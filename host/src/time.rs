//! Wall-clock helpers; timestamps in status are RFC 3339 strings.

/// Now, RFC 3339 in UTC with second precision (as Kubernetes writes `metav1.Time`).
pub fn now_rfc3339() -> String {
    format_rfc3339(jiff::Timestamp::now())
}

pub fn format_rfc3339(ts: jiff::Timestamp) -> String {
    ts.round(jiff::Unit::Second)
        .unwrap_or(ts)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Parse an RFC 3339 timestamp; `None` when absent or malformed.
pub fn parse_rfc3339(text: Option<&str>) -> Option<jiff::Timestamp> {
    text?.parse().ok()
}
