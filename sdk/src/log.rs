//! Logging through the host's only import. The host tags each line with the plugin's name
//! and version and the runtime id; plugins just say what happened.

/// Log levels, mirroring the WIT `log-level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Send one log line to the host (natively: to stderr when `TESSERA_PLUGIN_LOG` is set).
pub fn log(level: Level, message: &str) {
    #[cfg(target_family = "wasm")]
    crate::wasm::log(level, message);
    #[cfg(not(target_family = "wasm"))]
    if std::env::var_os("TESSERA_PLUGIN_LOG").is_some() {
        eprintln!("[{level:?}] {message}");
    }
}

pub fn debug(message: &str) {
    log(Level::Debug, message)
}

pub fn info(message: &str) {
    log(Level::Info, message)
}

pub fn warn(message: &str) {
    log(Level::Warn, message)
}
