//! Plugin chains: which plugins run, in which order, with which configuration and limits.

pub mod catalog;
pub mod chain;
pub mod config;

pub use catalog::{FIRST_PARTY, default_plugin_dir};
pub use chain::{ChainError, ChainOutput, ShootChain};
pub use config::{ChainConfig, LimitsOverride, PluginSettings};
