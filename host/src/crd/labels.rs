//! Labels, annotations and finalizers Tessera puts on the objects it manages.

/// On Shoots, Secrets and RuntimeKubeconfigs: the runtime id they belong to.
pub const RUNTIME: &str = "tessera.dev/runtime";
/// On Shoots: the namespace of their Runtime (Shoots live in Gardener project namespaces).
pub const RUNTIME_NAMESPACE: &str = "tessera.dev/runtime-namespace";
/// On Shoots: the Runtime `metadata.generation` the Shoot was last rendered from.
pub const RUNTIME_GENERATION: &str = "tessera.dev/runtime-generation";
/// The Secret that holds a Runtime's kubeconfig.
pub fn kubeconfig_secret(runtime_id: &str) -> String {
    format!("kubeconfig-{runtime_id}")
}

/// On Runtimes, RuntimeKubeconfigs, RuntimeAccesses and ModuleSets when replicas shard
/// them (`tessera run --sharding`): the shard (a replica's identity) that reconciles it.
/// Only the leader sets it; each replica watches the objects labelled with its own.
pub const SHARD: &str = "tessera.dev/shard";
/// Set by the leader next to [`SHARD`] when the object is to move to another shard: its
/// shard stops working on it and removes both labels, and the leader then assigns it anew.
pub const DRAIN: &str = "tessera.dev/drain";

/// On kubeconfig Secrets, so module controllers can find them.
pub const KUBECONFIG: &str = "tessera.dev/kubeconfig";
/// On objects in runtime clusters that Tessera owns (and may delete).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "tessera";
/// On kubeconfig Secrets: when the kubeconfig was fetched (RFC 3339).
pub const LAST_SYNC: &str = "tessera.dev/last-sync";

/// Runtime annotation: patch the Shoot now even though the generation did not change.
/// Removed after use.
pub const FORCE_PATCH: &str = "tessera.dev/force-patch";
/// Runtime annotation: leave the Shoot alone (no patches) while set to "true".
pub const SUSPEND_PATCH: &str = "tessera.dev/suspend-patch";
/// KIM's Runtime annotations with the same meaning, honoured next to Tessera's so a landscape
/// taken over keeps its runbooks.
pub const KIM_FORCE_PATCH: &str = "operator.kyma-project.io/force-patch-reconciliation";
pub const KIM_SUSPEND_PATCH: &str = "operator.kyma-project.io/suspend-patch-reconciliation";
/// RuntimeKubeconfig annotation: fetch a new kubeconfig now. Removed after use.
pub const FORCE_ROTATION: &str = "tessera.dev/force-rotation";

/// What every finalizer of the host begins with.
pub const FINALIZER_PREFIX: &str = "tessera.dev/";
pub const RUNTIME_FINALIZER: &str = "tessera.dev/runtime";
pub const KUBECONFIG_FINALIZER: &str = "tessera.dev/kubeconfig";
pub const ACCESS_FINALIZER: &str = "tessera.dev/access";
/// The uid of the RuntimeAccess an object (in a runtime cluster, or its kubeconfig Secret)
/// was made for; only objects with it are ever changed or deleted for it.
pub const ACCESS_UID: &str = "tessera.dev/access-uid";
pub const PLUGIN_FINALIZER: &str = "tessera.dev/plugin";
pub const MODULESET_FINALIZER: &str = "tessera.dev/moduleset";
/// Plugin annotation prefix: `approve.tessera.dev/<version>: <digest>` lets a version whose
/// tag moved run that digest.
pub const APPROVE_PREFIX: &str = "approve.tessera.dev/";
/// ModuleSet annotation: apply module versions lower than the installed ones.
pub const MODULES_ALLOW_DOWNGRADE: &str = "modules.tessera.dev/allow-downgrade";

/// Runtime annotation: release channel of every registry plugin of its chain.
pub const CHANNEL: &str = "tessera.dev/channel";
/// Runtime annotation prefix: `channel.tessera.dev/<plugin>: <channel>` for one plugin.
pub const CHANNEL_PREFIX: &str = "channel.tessera.dev/";
/// Runtime annotation: accept lower plugin versions than the ones it was rendered with.
pub const ALLOW_DOWNGRADE: &str = "tessera.dev/allow-downgrade";

/// On every object a module applies: which module applied it (a label, so that watches can
/// select managed objects).
pub const MODULE: &str = "modules.tessera.dev/module";
/// On every object a module applies: `<namespace>/<name>` of the ModuleSet (an annotation:
/// it may be longer than a label value).
pub const MODULE_SET: &str = "modules.tessera.dev/set";
/// On a shared object: `<set namespace>/<set name>/<module>` of each module sharing it
/// besides its holder, comma-separated.
pub const SHARED_BY: &str = "modules.tessera.dev/shared-by";
/// On a shared object handed over: the field manager of the previous holder, so that the
/// new holder retires exactly its fields.
pub const EARLIER_HOLDER: &str = "modules.tessera.dev/earlier-holder";

/// On a RuntimeAccess's Secrets: which part of it they are (the token anchors carry
/// [`ACCESS_PART_ANCHOR`]).
pub const ACCESS_PART: &str = "tessera.dev/access-part";
pub const ACCESS_PART_ANCHOR: &str = "token-anchor";
/// On a RuntimeAccess's kubeconfig Secret: the Secret its token is bound to (the previous
/// token is kept until the next rotation).
pub const ACCESS_TOKEN_ANCHOR: &str = "tessera.dev/token-anchor";

/// KIM's labels, read and written where Tessera takes over KIM's objects or writes what KIM
/// wrote: the runtime id, `managed-by` (two label keys, one value), registry caches.
pub const KIM_RUNTIME_ID: &str = "kyma-project.io/runtime-id";
pub const KIM_OPERATOR_MANAGED_BY: &str = "operator.kyma-project.io/managed-by";
pub const KIM_RECONCILER_MANAGED_BY: &str = "reconciler.kyma-project.io/managed-by";
pub const KIM_MANAGED_BY_VALUE: &str = "infrastructure-manager";
pub const KIM_REGISTRY_CACHE_ID: &str = "kyma-project.io/registry-cache-id";
pub const KIM_REGISTRY_CACHE_NAME: &str = "kyma-project.io/registry-cache-name";
pub const KIM_REGISTRY_CACHE_NAMESPACE: &str = "kyma-project.io/registry-cache-namespace";
pub const KIM_DIRTY: &str = "kyma-project.io/dirty";

/// Whether an annotation map has `key: "true"`.
pub fn is_true(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    key: &str,
) -> bool {
    annotations.and_then(|a| a.get(key)).map(String::as_str) == Some("true")
}
