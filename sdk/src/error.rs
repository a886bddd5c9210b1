//! The error a plugin returns; it ends up in the Runtime's conditions.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Mirrors the WIT `error-kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The input is wrong; retrying won't help until it changes.
    InvalidInput,
    /// The input asks for something this plugin does not do.
    Unsupported,
    /// A bug or broken invariant in the plugin.
    Internal,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::InvalidInput => "invalid-input",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Internal => "internal",
        })
    }
}

/// Mirrors the WIT `plugin-error`: a kind, a sentence, and the input field at fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl PluginError {
    /// The input is wrong at `field`.
    pub fn invalid_input(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::InvalidInput,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// The input at `field` asks for something this plugin does not support.
    pub fn unsupported(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Unsupported,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// Something went wrong inside the plugin.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Internal,
            message: message.into(),
            field: None,
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} ({}): {}", field, self.kind, self.message),
            None => write!(f, "{}: {}", self.kind, self.message),
        }
    }
}

impl std::error::Error for PluginError {}
