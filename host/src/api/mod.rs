//! What a failed Kubernetes API request means, for the host's decisions: one reading of
//! the status codes, so that "already gone", "someone else wrote first" and "not allowed"
//! are told apart the same way everywhere.

/// The HTTP status of an error the API server answered, if it answered.
pub(crate) fn status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// 404: the object (or its kind) is not there.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    status(e) == Some(404)
}

/// 409: a conflict: an optimistic-concurrency or uid precondition failed, the object
/// already exists, or server-side apply found fields another manager owns.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    status(e) == Some(409)
}

/// 403: the credentials may not do this.
pub(crate) fn is_forbidden(e: &kube::Error) -> bool {
    status(e) == Some(403)
}

#[cfg(test)]
pub(crate) mod mock;

/// An error the API server answered with `code`, for tests.
#[cfg(test)]
pub(crate) fn answered(code: u16) -> kube::Error {
    kube::Error::Api(Box::new(
        kube::core::Status::failure("no", "Reason").with_code(code),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        answered(code)
    }

    #[test]
    fn codes_are_read_once() {
        assert!(is_not_found(&api(404)) && !is_not_found(&api(409)));
        assert!(is_conflict(&api(409)) && !is_conflict(&api(404)));
        assert!(is_forbidden(&api(403)) && !is_forbidden(&api(401)));
        assert_eq!(status(&kube::Error::Service("down".into())), None);
    }
}
