//! Go's formatting of the values Gardener puts into its messages: `strconv.Quote` (`%q`),
//! `encoding/json.Marshal`, `strconv.ParseBool`/`ParseUint`, `time.Duration`.

use serde_json::Value;

/// Go `strconv.Quote` (what `%q` prints for a string).
pub(crate) fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => match c as u32 {
                n @ 0..=0xffff => out.push_str(&format!("\\u{n:04x}")),
                n => out.push_str(&format!("\\U{n:08x}")),
            },
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go `encoding/json` string encoding (HTML-safe: `<`, `>`, `&` escaped).
pub(crate) fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go `json.Marshal` of a value decoded from JSON: compact, object keys sorted (Go maps),
/// strings HTML-escaped.
pub(crate) fn json(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        Value::String(s) => json_str(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(json).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", json_str(k), json(&map[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
    }
}

/// Go `json.Marshal` of a `*string`: `"x"` or `null`.
pub(crate) fn json_opt_str(v: &Value) -> String {
    match v.as_str() {
        Some(s) => json_str(s),
        None => "null".into(),
    }
}

/// Go `strconv.ParseBool`: `None` for anything it refuses.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go `strconv.ParseUint(s, 10, 64)`, with Go's error message.
pub(crate) fn parse_uint(s: &str) -> Result<u64, String> {
    let err = |what: &str| format!("strconv.ParseUint: parsing {}: {what}", q(s));
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err("invalid syntax"));
    }
    s.parse::<u64>().map_err(|_| err("value out of range"))
}

const NS_PER: [(&str, i128); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("", 0),
];

/// Go `time.ParseDuration` (nanoseconds); `None` where Go returns an error.
pub(crate) fn parse_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let (ns, tail) = duration_component(rest)?;
        total += ns;
        rest = tail;
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).ok()
}

/// One `<number>[.<fraction>]<unit>` of a Go duration.
fn duration_component(s: &str) -> Option<(i128, &str)> {
    let int_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (int, mut rest) = s.split_at(int_end);
    let mut frac = "";
    if let Some(r) = rest.strip_prefix('.') {
        let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        frac = &r[..end];
        rest = &r[end..];
    }
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let unit_end = rest
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (unit, tail) = rest.split_at(unit_end);
    let per = NS_PER.iter().find(|(u, _)| *u == unit && !u.is_empty())?.1;
    let mut ns: i128 = if int.is_empty() {
        0
    } else {
        int.parse::<i128>().ok()? * per
    };
    let mut scale = per;
    for d in frac.bytes().take(30) {
        scale /= 10;
        ns += i128::from(d - b'0') * scale;
    }
    Some((ns, tail))
}

/// Go `time.Duration.String`, e.g. `6h0m0s`, `30m0s`, `1.5s`, `200ms`.
pub(crate) fn duration_string(ns: i64) -> String {
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let body = if u < 1_000_000_000 {
        small_duration(u)
    } else {
        let mut s = frac(u, 9);
        s = format!("{}{s}s", (u / 1_000_000_000) % 60);
        let mins = u / 60_000_000_000;
        if mins > 0 {
            s = format!("{}m{s}", mins % 60);
            let hours = mins / 60;
            if hours > 0 {
                s = format!("{hours}h{s}");
            }
        }
        s
    };
    if neg { format!("-{body}") } else { body }
}

/// Go `Duration.format` below one second: `0s`, `<n>ns`, `<n>µs`, `<n>ms`.
fn small_duration(u: u64) -> String {
    let (prec, unit) = match u {
        0 => return "0s".into(),
        1..1_000 => (0, "ns"),
        1_000..1_000_000 => (3, "µs"),
        _ => (6, "ms"),
    };
    let whole = u / 10u64.pow(prec);
    format!("{whole}{}{unit}", frac(u, prec))
}

/// Go `fmtFrac`: `.123` for the last `prec` digits, trailing zeros (and the dot) dropped.
fn frac(v: u64, prec: u32) -> String {
    if prec == 0 {
        return String::new();
    }
    let digits = format!("{:0width$}", v % 10u64.pow(prec), width = prec as usize);
    let trimmed = digits.trim_end_matches('0');
    match trimmed.is_empty() {
        true => String::new(),
        false => format!(".{trimmed}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json as j;

    #[test]
    fn quote_and_json() {
        assert_eq!(q("a\"b\n"), r#""a\"b\n""#);
        assert_eq!(json_str("<a>&"), r#""\u003ca\u003e\u0026""#);
        assert_eq!(
            json(&j!({"b": 1, "a": [true, null, "x"]})),
            r#"{"a":[true,null,"x"],"b":1}"#
        );
        assert_eq!(json_opt_str(&Value::Null), "null");
    }

    #[test]
    fn parse_bool_and_uint() {
        assert_eq!(parse_bool("True"), Some(true));
        assert_eq!(parse_bool("yes"), None);
        assert_eq!(parse_uint("33"), Ok(33));
        assert_eq!(
            parse_uint("x"),
            Err(r#"strconv.ParseUint: parsing "x": invalid syntax"#.to_string())
        );
        assert!(
            parse_uint("99999999999999999999")
                .unwrap_err()
                .ends_with("value out of range")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("720h"), Some(720 * 3_600_000_000_000));
        assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration("-1m"), Some(-60_000_000_000));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(duration_string(6 * 3_600_000_000_000), "6h0m0s");
        assert_eq!(duration_string(30 * 60_000_000_000), "30m0s");
        assert_eq!(duration_string(1_500_000_000), "1.5s");
        assert_eq!(duration_string(200_000_000), "200ms");
        assert_eq!(duration_string(0), "0s");
        assert_eq!(duration_string(-60_000_000_000), "-1m0s");
    }
}
