"""Write Tessera module reconcilers in Python.

A plugin is a class deriving from :class:`ModuleReconciler` with a ``reconcile`` method (and
optionally ``dependencies`` and ``delete``); ``export`` turns it into the component's export.
The SDK hides the JSON boundary of the WIT contract the way the Rust SDK does: configuration
and observed objects arrive as dicts, desired objects leave as dicts, errors are exceptions
naming the field at fault. Built into a component with componentize-py::

    componentize-py -d wit -w module-reconciler componentize app -o plugin.wasm

where ``app.py`` ends with ``ModuleReconcilerApi = export(MyPlugin)``.
"""

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

#: The contract version this SDK implements (``wit/tessera.wit``).
CONTRACT_VERSION = "0.1.0"

# Module states, as the ModuleSet reports them.
READY, PROCESSING, WARNING, ERROR, DELETING = "Ready", "Processing", "Warning", "Error", "Deleting"


class PluginError(Exception):
    """Refuse to answer: ``kind`` is ``invalid-input``, ``unsupported`` or ``internal``."""

    def __init__(self, kind: str, message: str, field: Optional[str] = None):
        super().__init__(message)
        self.kind, self.message, self.field = kind, message, field

    @staticmethod
    def invalid_input(field: str, message: str) -> "PluginError":
        """The input is wrong at ``field`` (e.g. ``config.replicas``)."""
        return PluginError("invalid-input", message, field)


@dataclass(frozen=True)
class Selector:
    """Objects to observe: one by name, or all matching a label selector."""

    api_version: str
    kind: str
    namespace: Optional[str] = None
    name: Optional[str] = None
    label_selector: Optional[str] = None


@dataclass
class ClusterFacts:
    kubernetes_version: Optional[str] = None
    provider: Optional[str] = None
    region: Optional[str] = None


@dataclass
class ModuleInput:
    module: str
    version: str
    config: Dict[str, Any]
    cluster: ClusterFacts
    observed: List[Tuple[Selector, List[Dict[str, Any]]]] = field(default_factory=list)

    def observed_for(self, selector: Selector) -> Optional[List[Dict[str, Any]]]:
        """The objects observed for ``selector``; ``None`` when not asked for yet."""
        for asked, objects in self.observed:
            if asked == selector:
                return objects
        return None


@dataclass
class ModuleOutput:
    desired: List[Dict[str, Any]] = field(default_factory=list)
    state: str = READY
    message: Optional[str] = None
    requeue_after_seconds: Optional[int] = None
    requirements: List[Selector] = field(default_factory=list)

    @staticmethod
    def ready(desired: List[Dict[str, Any]]) -> "ModuleOutput":
        return ModuleOutput(desired=desired)

    @staticmethod
    def processing(desired, message: str, seconds: int) -> "ModuleOutput":
        return ModuleOutput(desired, PROCESSING, message, seconds)

    @staticmethod
    def require(selectors: List[Selector]) -> "ModuleOutput":
        """Ask the host to observe ``selectors`` and call again."""
        return ModuleOutput(state=PROCESSING, requirements=list(selectors))


@dataclass
class DeleteOutput:
    remove: List[Selector] = field(default_factory=list)
    state: str = READY
    message: Optional[str] = None
    requirements: List[Selector] = field(default_factory=list)


class ModuleReconciler:
    """Subclass and set ``NAME``, ``VERSION`` and ``DESCRIPTION``."""

    NAME = "unnamed"
    VERSION = "0.1.0"
    DESCRIPTION = ""

    def dependencies(self, config: Dict[str, Any]) -> List[str]:
        return []

    def reconcile(self, input: ModuleInput) -> ModuleOutput:
        raise NotImplementedError

    def delete(self, input: ModuleInput) -> DeleteOutput:
        return DeleteOutput()


def parse_config(text: str) -> Dict[str, Any]:
    """The module's configuration; ``{}`` when empty; an error on ``config`` otherwise."""
    try:
        value = json.loads(text) if text.strip() not in ("", "null") else {}
    except ValueError as err:
        raise PluginError.invalid_input("config", f"not JSON: {err}")
    if not isinstance(value, dict):
        raise PluginError.invalid_input("config", "must be an object")
    return value


def export(plugin_class):
    """The class componentize-py exports as ``ModuleReconcilerApi``."""
    from ._boundary import adapter

    return adapter(plugin_class())
