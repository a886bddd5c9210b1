//! Plugin chains: which plugins run, in which order, with which configuration and limits;
//! and plugins from OCI registries: fetching, the catalog of channels, per-Runtime chains.

pub mod catalog;
pub mod chain;
pub mod channels;
pub mod config;
pub mod fetch;
pub mod identity;
pub mod memo;
pub mod shadow;
pub mod template;

pub use catalog::{FIRST_PARTY, FIRST_PARTY_MODULES, default_plugin_dir, first_party_requests};
pub use chain::{ChainError, ChainOutput, ChainStep, ShootChain};
pub use channels::{
    Catalog, CatalogChange, CatalogWake, ChangedChannels, ChannelEntry, PluginEntry, Resolved,
};
pub use config::{ChainConfig, LimitsOverride, ModuleSettings, PluginSettings, Source};
pub use fetch::{FetchError, Fetched, Fetcher};
pub use identity::{Binding, DEFAULT_PROJECT, ShootIdentity};
pub use memo::DraftCache;
pub use template::{ChainTemplate, ChannelChoice, ResolvedChain, Shadow, Unavailable};
