use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `True`, `False` or `Unknown`, as in every Kubernetes condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A Kubernetes-style status condition (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase machine-readable reason, e.g. `ShootCreationPending`.
    pub reason: String,
    pub message: String,
    /// RFC 3339; changes only when `status` changes.
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// An enum of CamelCase words with their text, so that condition types and reasons are
/// named once and misspellings do not compile.
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $name {
            /// Every word, for documentation and tests.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The word as written in status.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => stringify!($variant)),*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

words! {
    /// The condition types the host writes.
    ConditionType {
        // Runtime
        Provisioned,
        Configured,
        KubeconfigReady,
        OidcConfigured,
        AdministratorsConfigured,
        KymaSystemNSCreated,
        Deprovisioned,
        PluginsAvailable,
        PluginVersions,
        GardenerReachable,
        RegistryCacheConfigured,
        // Plugin, RuntimeKubeconfig, ModuleSet
        Ready,
        Granted,
        ConfigAccepted,
        TargetReachable,
    }
}

words! {
    /// The reasons of the host's conditions.
    Reason {
        // Runtime: Gardener's progress
        ShootCreationPending,
        ShootCreationCompleted,
        ShootUpdatePending,
        ShootReady,
        ShootNotOurs,
        ShootNameTaken,
        TakeoverDisabled,
        ShootIdentityChanged,
        ShootDeletionPending,
        ShootDeletionFailing,
        ShootForceDeletion,
        ShootDeleted,
        GardenerError,
        GardenerErrorRetrying,
        GardenerErrorFatal,
        GardenerUnavailable,
        ShootRejected,
        ShootWatchFailed,
        SeedNotFound,
        // Runtime: rendering
        InvalidRuntime,
        PluginRejected,
        PluginNotGranted,
        PluginFailed,
        PluginTimedOut,
        PluginConfigInvalid,
        PluginUnavailable,
        HostBusy,
        AsChannelsSay,
        DowngradeRefused,
        Recovered,
        // Runtime: cluster preparation
        KubeconfigPending,
        KubeconfigDeletionPending,
        KubeconfigSynced,
        KubeconfigReady,
        OidcConfigured,
        AdministratorsConfigured,
        KymaSystemNSCreated,
        ConfigurationCompleted,
        RuntimeClusterFailed,
        RegistryCacheConfigured,
        RegistryCacheGardenClusterConfigurationFailed,
        // Plugin
        Resolved,
        ResolvedWithErrors,
        ChannelUnavailable,
        InvalidSpec,
        InvalidConfig,
        NotRefused,
        AsRequested,
        NotGranted,
        // RuntimeKubeconfig
        NotBound,
        SecretNotOwned,
        FetchFailed,
        // RuntimeAccess
        TokenIssued,
        ObjectNotOwned,
        NamespaceMissing,
        // ModuleSet
        Connected,
        TargetUnreachable,
        ReconcileFailed,
        ModulesReady,
        ModuleError,
        ModuleWarning,
        Deleting,
        ModulesProcessing,
    }
}

words! {
    /// The reasons of the Events the host publishes.
    EventReason {
        // Runtime
        StateChanged,
        Failed,
        Retrying,
        ShootCreated,
        ShootPatched,
        ShootTakenOver,
        ShootDeleting,
        ShootForceDeleting,
        ShadowDiff,
        DowngradeRefused,
        PluginWarning,
        // Plugin
        DigestChanged,
        DigestPending,
        PluginError,
        InvalidConfig,
        // ModuleSet
        TargetUnreachable,
        ModuleError,
        ModuleReady,
        ModuleUpgraded,
        ModuleRemoved,
        Deleted,
        TargetGone,
        DeletionBlocked,
        // RuntimeAccess
        TokenIssued,
        AccessNotReady,
    }
}

/// What a condition's type or reason can be given as while callers move to the enums.
pub trait Word {
    fn word(&self) -> &str;
}

impl Word for ConditionType {
    fn word(&self) -> &str {
        self.as_str()
    }
}

impl Word for Reason {
    fn word(&self) -> &str {
        self.as_str()
    }
}

impl Condition {
    /// Whether this is a condition of type `type_`.
    pub fn is(&self, type_: ConditionType) -> bool {
        self.type_ == type_.as_str()
    }

    /// Whether its reason is `reason`.
    pub fn because(&self, reason: Reason) -> bool {
        self.reason == reason.as_str()
    }
}

/// The condition of type `type_`, if set.
pub fn find_condition(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.is(type_))
}

/// Set a condition, keeping its transition time when only reason or message change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: impl Word,
    status: ConditionStatus,
    reason: impl Word,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let (type_, reason) = (type_.word(), reason.word());
    let message = message.into();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = crate::time::now_rfc3339();
            }
            existing.status = status;
            existing.reason = reason.to_string();
            existing.message = message;
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            last_transition_time: crate::time::now_rfc3339(),
            observed_generation: generation,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut c = Vec::new();
        set_condition(
            &mut c,
            ConditionType::Provisioned,
            ConditionStatus::Unknown,
            Reason::ShootCreationPending,
            "a",
            Some(1),
        );
        c[0].last_transition_time = "then".into();
        set_condition(
            &mut c,
            ConditionType::Provisioned,
            ConditionStatus::Unknown,
            Reason::ShootCreationCompleted,
            "b",
            Some(2),
        );
        assert_eq!(c[0].last_transition_time, "then");
        assert!(c[0].because(Reason::ShootCreationCompleted));
        set_condition(
            &mut c,
            ConditionType::Provisioned,
            ConditionStatus::True,
            Reason::ShootReady,
            "c",
            Some(2),
        );
        assert_ne!(c[0].last_transition_time, "then");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn words_are_unique_camel_case() {
        for words in [
            ConditionType::ALL
                .iter()
                .map(|w| w.as_str())
                .collect::<Vec<_>>(),
            Reason::ALL.iter().map(|w| w.as_str()).collect(),
        ] {
            let unique: std::collections::BTreeSet<_> = words.iter().collect();
            assert_eq!(unique.len(), words.len());
            assert!(
                words
                    .iter()
                    .all(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
            );
        }
    }
}
