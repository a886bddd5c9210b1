use thiserror::Error;

/// What went wrong talking to a registry or checking an artifact.
#[derive(Debug, Error)]
pub enum OciError {
    #[error("{reference}: not a valid OCI reference: {message}")]
    BadReference { reference: String, message: String },
    #[error("{reference}: {message}")]
    Registry { reference: String, message: String },
    #[error("{reference}: not found in the registry")]
    NotFound { reference: String },
    #[error(
        "{reference}: content does not match its digest (expected {expected}, got {actual}); the registry or something between returned tampered bytes"
    )]
    DigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error(
        "{reference}: {size} bytes, more than the {limit} bytes a plugin may take (--max-plugin-size)"
    )]
    TooLarge {
        reference: String,
        size: u64,
        limit: u64,
    },
    #[error("{reference}: not a Wasm plugin artifact: {message}")]
    NotAPlugin { reference: String, message: String },
    #[error("signature of {reference}: {message}")]
    Signature { reference: String, message: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl OciError {
    pub(crate) fn io(path: &std::path::Path, err: impl std::fmt::Display) -> Self {
        Self::Io {
            path: path.display().to_string(),
            message: err.to_string(),
        }
    }
}
