//! Errors in words for the people who read them (terminal, logs, conditions). Some library
//! errors carry Rust debug output in their `Display`: kube's API error prints the whole
//! `Status` struct (`ApiError: … (Status { status: Some(Failure), … })`).

use std::error::Error;

/// A Kubernetes client error in words: for an API error the server's message, HTTP code
/// and reason, without the `Status` dump kube appends.
pub fn kube_error(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", status.reason)
            };
            let message = if status.message.is_empty() {
                "the API server refused the request"
            } else {
                status.message.as_str()
            };
            format!("{message} (HTTP {}{reason})", status.code)
        }
        // With its causes: "client error (Connect)" alone hides a certificate refused.
        kube::Error::HyperError(e) => format!("cannot connect: {}", chain(e)),
        kube::Error::Service(e) if crate::fence::refused(err) => e.to_string(),
        kube::Error::Service(e) => format!("cannot connect: {}", chain(e.as_ref())),
        other => other.to_string(),
    }
}

/// The HTTP status of a watch failure, when the API server answered.
pub fn watch_status(e: &kube::runtime::watcher::Error) -> Option<u16> {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(kube::Error::Api(s))
        | W::WatchStartFailed(kube::Error::Api(s))
        | W::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        W::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// A watch failure in words.
pub fn watch_error(e: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => kube_error(e),
        W::WatchError(s) => format!("{} (HTTP {} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

/// An error and its causes as one line, `outer: inner: innermost`: a cause whose text the
/// message before it already quotes is left out, and kube API errors are put in words
/// wherever they appear.
pub fn chain<'a>(err: &'a (dyn Error + 'static)) -> String {
    let mut causes: Vec<&'a (dyn Error + 'static)> =
        std::iter::successors(Some(err), |e| Error::source(*e)).collect();
    // Below a kube API error is only its `Status` again.
    if let Some(at) = causes
        .iter()
        .position(|e| matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(_))))
    {
        causes.truncate(at + 1);
    }
    let reworded: Vec<(String, String)> = causes
        .iter()
        .filter_map(|e| e.downcast_ref::<kube::Error>())
        .filter(|k| matches!(k, kube::Error::Api(_)))
        .map(|k| (k.to_string(), kube_error(k)))
        .collect();
    let mut parts: Vec<String> = Vec::new();
    for cause in &causes {
        let mut text = cause.to_string();
        if parts.last().is_some_and(|p| p.contains(&text)) {
            continue;
        }
        for (raw, words) in &reworded {
            text = text.replace(raw, words);
        }
        if parts.last().is_some_and(|p| p.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code: 404,
            message: "runtimes.tessera.dev \"rt\" not found".into(),
            reason: "NotFound".into(),
            ..Default::default()
        }))
    }

    #[derive(Debug, thiserror::Error)]
    #[error("Kubernetes API of the target: {0}")]
    struct Quoting(#[from] kube::Error);

    #[test]
    fn kube_api_errors_are_words_without_the_status_dump() {
        assert!(
            not_found().to_string().contains("Status {"),
            "kube's own text"
        );
        assert_eq!(
            kube_error(&not_found()),
            "runtimes.tessera.dev \"rt\" not found (HTTP 404 NotFound)"
        );
        let outer = anyhow::Error::new(not_found()).context("Runtime default/rt");
        assert_eq!(
            chain(outer.as_ref()),
            "Runtime default/rt: runtimes.tessera.dev \"rt\" not found (HTTP 404 NotFound)"
        );
        // A wrapper that quotes its cause: said once, in words.
        let quoting = Quoting(not_found());
        assert_eq!(
            chain(&quoting),
            "Kubernetes API of the target: runtimes.tessera.dev \"rt\" not found (HTTP 404 NotFound)"
        );
    }
}
