"""The WIT boundary: converts between componentize-py's generated types and the SDK's."""

import json

from wit_world import exports
from wit_world.exports import module_reconciler_api as api
from wit_world.imports import types
from wit_world.types import Err

from . import (
    CONTRACT_VERSION,
    ClusterFacts,
    ModuleInput,
    PluginError,
    Selector,
    parse_config,
)

_STATES = {
    "Ready": api.ModuleState.READY,
    "Processing": api.ModuleState.PROCESSING,
    "Warning": api.ModuleState.WARNING,
    "Error": api.ModuleState.ERROR,
    "Deleting": api.ModuleState.DELETING,
}
_KINDS = {
    "invalid-input": types.ErrorKind.INVALID_INPUT,
    "unsupported": types.ErrorKind.UNSUPPORTED,
    "internal": types.ErrorKind.INTERNAL,
}


def _selector_in(s) -> Selector:
    return Selector(s.api_version, s.kind, s.namespace, s.name, s.label_selector)


def _selector_out(s: Selector):
    return api.ObjectSelector(s.api_version, s.kind, s.namespace, s.name, s.label_selector)


def _input(raw) -> ModuleInput:
    facts = raw.cluster
    return ModuleInput(
        module=raw.module,
        version=raw.version,
        config=parse_config(raw.config),
        cluster=ClusterFacts(facts.kubernetes_version, facts.provider, facts.region),
        observed=[
            (_selector_in(o.selector), [json.loads(x) for x in o.objects]) for o in raw.observed
        ],
    )


def _failed(err: Exception):
    if isinstance(err, PluginError):
        return Err(types.PluginError(_KINDS.get(err.kind, types.ErrorKind.INTERNAL), err.message, err.field))
    return Err(types.PluginError(types.ErrorKind.INTERNAL, f"{type(err).__name__}: {err}", None))


def adapter(plugin):
    """An instance of the generated protocol that calls ``plugin``."""

    class ModuleReconcilerApi(exports.ModuleReconcilerApi):
        def info(self):
            return types.PluginInfo(plugin.NAME, plugin.VERSION, CONTRACT_VERSION, plugin.DESCRIPTION)

        def dependencies(self, config):
            try:
                return list(plugin.dependencies(parse_config(config)))
            except Exception:
                return []  # the reconcile call reports the error with its field

        def reconcile(self, input):
            try:
                out = plugin.reconcile(_input(input))
            except Exception as err:
                raise _failed(err)
            return api.ReconcileOutput(
                [json.dumps(o, separators=(",", ":")) for o in out.desired],
                _STATES[out.state],
                out.message,
                out.requeue_after_seconds,
                [_selector_out(s) for s in out.requirements],
            )

        def delete(self, input):
            try:
                out = plugin.delete(_input(input))
            except Exception as err:
                raise _failed(err)
            return api.DeleteOutput(
                [_selector_out(s) for s in out.remove],
                _STATES[out.state],
                out.message,
                [_selector_out(s) for s in out.requirements],
            )

    return ModuleReconcilerApi
