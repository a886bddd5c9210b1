//! Small helpers first-party plugins share: IPv4 CIDR arithmetic, version ordering, JSON
//! merge patches and "did you mean" suggestions for misspelt field names.

use std::cmp::Ordering;
use std::fmt;

/// An IPv4 network in CIDR notation. Gardener node, pod and service ranges are IPv4 here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// Network address, host bits cleared.
    pub addr: u32,
    pub prefix: u8,
}

impl Cidr {
    /// Parse `a.b.c.d/n`; host bits must be zero, as Gardener requires.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (ip, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not a CIDR (expected a.b.c.d/n)"))?;
        let ip: std::net::Ipv4Addr = ip
            .parse()
            .map_err(|_| format!("{text:?} is not a CIDR: {ip:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("{text:?} is not a CIDR: prefix must be 0-32"))?;
        let addr = u32::from(ip);
        let cidr = Self { addr, prefix };
        if addr & !cidr.mask() != 0 {
            return Err(format!(
                "{text:?} has host bits set; did you mean {}?",
                Cidr {
                    addr: addr & cidr.mask(),
                    prefix
                }
            ));
        }
        Ok(cidr)
    }

    fn mask(&self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix)
        }
    }

    /// Number of addresses, as u64 so that /0 fits.
    pub fn size(&self) -> u64 {
        1u64 << (32 - self.prefix)
    }

    /// The last address of the block.
    pub fn last(&self) -> u32 {
        (self.addr as u64 + self.size() - 1) as u32
    }

    /// True when `other` lies completely inside `self`.
    pub fn contains(&self, other: &Cidr) -> bool {
        other.addr >= self.addr && other.last() <= self.last()
    }

    /// True when the two blocks share any address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.addr <= other.last() && other.addr <= self.last()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", std::net::Ipv4Addr::from(self.addr), self.prefix)
    }
}

/// Order dotted versions numerically (`1.30.10` > `1.30.9`); a `v` prefix is ignored and
/// non-numeric parts compare as text, so `1577.1.0` and `gardenlinux` versions work.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |v: &str| -> Vec<String> {
        v.trim_start_matches('v')
            .split(['.', '-', '+'])
            .map(str::to_string)
            .collect()
    };
    let (pa, pb) = (parts(a), parts(b));
    for i in 0..pa.len().max(pb.len()) {
        let (x, y) = (pa.get(i), pb.get(i));
        let ord = match (x, y) {
            (Some(x), Some(y)) => match (x.parse::<u64>(), y.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                _ => x.cmp(y),
            },
            (Some(_), None) => Ordering::Greater,
            (None, Some(_)) => Ordering::Less,
            (None, None) => Ordering::Equal,
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// Go's `time.Duration` text, as Gardener's API stores `metav1.Duration` fields.
pub mod go_duration {
    /// Whole seconds of a Go duration made of `h`, `m` and `s` parts (what
    /// `time.ParseDuration` accepts for these; `30d` is refused as Go refuses it).
    pub fn seconds(text: &str) -> Option<u64> {
        let mut total = 0u64;
        let mut number = String::new();
        for c in text.chars() {
            match c {
                '0'..='9' => number.push(c),
                'h' | 'm' | 's' => {
                    let n: u64 = number.parse().ok()?;
                    number.clear();
                    let unit = match c {
                        'h' => 3600,
                        'm' => 60,
                        _ => 1,
                    };
                    total = total.checked_add(n.checked_mul(unit)?)?;
                }
                _ => return None,
            }
        }
        number
            .is_empty()
            .then_some(total)
            .filter(|_| !text.is_empty())
    }

    /// Whole seconds as Go's `Duration.String` writes them: `720h0m0s`, `15m0s`, `30s`.
    pub fn text(seconds: u64) -> String {
        let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
        match (h, m) {
            (0, 0) => format!("{s}s"),
            (0, _) => format!("{m}m{s}s"),
            _ => format!("{h}h{m}m{s}s"),
        }
    }
}

/// Apply an RFC 7386 JSON merge patch: objects merge, `null` removes, anything else replaces.
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let target = target.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The name among `candidates` that `word` most likely misspells, if one is close enough
/// (at most a third of the letters differ, at least one letter in common place).
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| {
            (
                edit_distance(&word.to_ascii_lowercase(), &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance over characters where swapping two neighbours counts as one edit (optimal
/// string alignment): `chian` is one typo away from `chain`. Field names are short, so the
/// full table costs nothing.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// `unknown field; did you mean <closest>?` (or without the suggestion), the one wording
/// for a field the schema does not have.
pub fn unknown_field_message<'a>(field: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    match did_you_mean(field, known) {
        Some(close) => format!("unknown field; did you mean {close}?"),
        None => "unknown field".to_string(),
    }
}

/// Serde's `unknown field `x`, expected one of `a`, `b`` (or `expected `a``, or `there
/// are no fields`) as the unknown field and our wording; `None` for any other message.
pub fn reword_unknown_field(serde_message: &str) -> Option<(String, String)> {
    let rest = serde_message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    Some((field.to_string(), unknown_field_message(field, known)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `Duration.String` drops leading zero units (`time/time.go`).
    #[test]
    fn go_durations_read_and_written_as_go_does() {
        assert_eq!(go_duration::text(15 * 60), "15m0s");
        assert_eq!(go_duration::text(720 * 3600), "720h0m0s");
        assert_eq!(go_duration::text(30), "30s");
        assert_eq!(go_duration::text(3600 + 1), "1h0m1s");
        assert_eq!(go_duration::seconds("1h30m"), Some(5400));
        assert_eq!(go_duration::seconds("15m"), Some(900));
        assert_eq!(go_duration::seconds("30d"), None);
        assert_eq!(go_duration::seconds("15"), None);
        assert_eq!(go_duration::seconds(""), None);
        assert_eq!(
            go_duration::seconds("99999999999999999999h"),
            None,
            "overflow"
        );
        assert_eq!(go_duration::seconds("9999999999999999h"), None, "overflow");
    }

    #[test]
    fn cidr_parse_and_overlap() {
        let nodes = Cidr::parse("10.250.0.0/16").unwrap();
        let pods = Cidr::parse("100.64.0.0/12").unwrap();
        let inner = Cidr::parse("10.250.8.0/21").unwrap();
        assert!(!nodes.overlaps(&pods));
        assert!(nodes.overlaps(&inner) && nodes.contains(&inner));
        assert!(!inner.contains(&nodes));
        assert_eq!(nodes.to_string(), "10.250.0.0/16");
        assert!(
            Cidr::parse("10.250.0.1/16")
                .unwrap_err()
                .contains("10.250.0.0/16")
        );
        assert!(Cidr::parse("10.250.0.0").is_err());
        assert!(Cidr::parse("10.250.0.0/33").is_err());
    }

    #[test]
    fn versions_order_numerically() {
        assert_eq!(compare_versions("1.30.10", "1.30.9"), Ordering::Greater);
        assert_eq!(compare_versions("v1.31", "1.31.0"), Ordering::Less);
        assert_eq!(compare_versions("1592.1.0", "1592.1.0"), Ordering::Equal);
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut doc = serde_json::json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge_patch(
            &mut doc,
            &serde_json::json!({"a": {"b": null, "e": 3}, "d": [2]}),
        );
        assert_eq!(doc, serde_json::json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }

    #[test]
    fn did_you_mean_suggests_only_close_names() {
        let fields = ["name", "channel", "config", "managed", "adopt"];
        assert_eq!(did_you_mean("confg", fields), Some("config"));
        assert_eq!(did_you_mean("Chanel", fields), Some("channel"));
        assert_eq!(
            did_you_mean("maxumum", ["minimum", "maximum"]),
            Some("maximum")
        );
        assert_eq!(did_you_mean("replicas", fields), None);
        assert_eq!(did_you_mean("x", fields), None);
        assert_eq!(did_you_mean("chian", ["chain", "channel"]), Some("chain"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("chian", "chain"), 1);
    }

    #[test]
    fn serde_unknown_field_messages_are_reworded() {
        assert_eq!(
            reword_unknown_field(
                "unknown field `confg`, expected one of `name`, `channel`, `config`"
            ),
            Some(("confg".into(), "unknown field; did you mean config?".into()))
        );
        assert_eq!(
            reword_unknown_field("unknown field `zzz`, expected `required`"),
            Some(("zzz".into(), "unknown field".into()))
        );
        assert_eq!(
            reword_unknown_field("unknown field `a`, there are no fields"),
            Some(("a".into(), "unknown field".into()))
        );
        assert_eq!(reword_unknown_field("missing field `name`"), None);
    }
}
