//! Kubernetes client errors in words. kube's own `Display` for an API error ends in a Rust
//! debug dump of the `Status`; conditions, Events and logs get this instead.

/// The status and message the API server gave, or why it could not be reached.
pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.message.is_empty() => format!("HTTP {} {}", s.code, s.reason),
        kube::Error::Api(s) => format!("HTTP {} {}: {}", s.code, s.reason, s.message),
        kube::Error::HyperError(e) => format!("cannot connect: {e}"),
        kube::Error::Service(e) => format!("cannot connect: {e}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_reads_as_status_and_message() {
        let status =
            kube::core::Status::failure("shoots.core.gardener.cloud not found", "NotFound")
                .with_code(404);
        let text = describe(&kube::Error::Api(Box::new(status)));
        assert_eq!(
            text,
            "HTTP 404 NotFound: shoots.core.gardener.cloud not found"
        );
        assert!(!text.contains("Status {"));
    }
}
