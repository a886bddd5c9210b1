#!/usr/bin/env python3
# Generates tests/kube/gardener-crds.yaml: structural apiextensions.k8s.io/v1 CustomResourceDefinitions
# for the Gardener resources Tessera's tests serve from a plain kube-apiserver (1.20) instead of
# Gardener's aggregated API server: Shoot, CloudProfile, SecretBinding, Project, Seed (core.gardener.cloud)
# and CredentialsBinding (security.gardener.cloud).
#
# It reads Gardener's Go API types (pkg/apis/core/v1beta1, pkg/apis/security/v1alpha1 and whatever
# they reference) at the commit pinned in tests/kube/gardener.pin, follows the json tags (names,
# `,inline` embeds, `-`), pointers, slices, maps and named types, and turns the list markers and
# patch-merge tags into the server-side-apply list semantics an aggregated server would publish.
# The names, scope, short names, categories and status subresource come from Gardener's registry
# (pkg/apiserver/registry). Types of other modules (Kubernetes) are transcribed by hand below.
# The schemas say which fields exist and their types, nothing more: no descriptions, no
# validation (Gardener's validation lives elsewhere), `required` only for list-map keys, and
# `nullable` where Go would decode null (pointers, slices, maps).
#
# Run (Python 3.11, standard library and git only; no checkout needed, a bare mirror will do):
#     tests/kube/gen-gardener-crds.py GARDENER_GIT_DIR            # rewrites gardener-crds.yaml
#     tests/kube/gen-gardener-crds.py GARDENER_GIT_DIR --check    # fails if it is out of date
# GARDENER_GIT_DIR is a clone or mirror of github.com/gardener/gardener holding the pinned commit;
# files are read with `git -C GARDENER_GIT_DIR show COMMIT:PATH`.
# The output is committed; rerun the script after moving the pin and commit both together.
import argparse
import copy
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN_FILE = HERE / "gardener.pin"
DEFAULT_OUT = HERE / "gardener-crds.yaml"
MODULE = "github.com/gardener/gardener"

# (API package, kind, registry package holding its storage), in output order.
RESOURCES = [
    ("pkg/apis/core/v1beta1", "Shoot", "pkg/apiserver/registry/core/shoot"),
    ("pkg/apis/core/v1beta1", "CloudProfile", "pkg/apiserver/registry/core/cloudprofile"),
    ("pkg/apis/core/v1beta1", "SecretBinding", "pkg/apiserver/registry/core/secretbinding"),
    ("pkg/apis/core/v1beta1", "Project", "pkg/apiserver/registry/core/project"),
    ("pkg/apis/core/v1beta1", "Seed", "pkg/apiserver/registry/core/seed"),
    ("pkg/apis/security/v1alpha1", "CredentialsBinding", "pkg/apiserver/registry/security/credentialsbinding"),
]

# ---------------------------------------------------------------------------------------------
# Types from outside Gardener, mapped by hand.
#
# Types with their own JSON encoding get a schema directly.
# An untyped x-kubernetes-preserve-unknown-fields keeps any JSON value, nested objects included.
ANY_JSON = {"x-kubernetes-preserve-unknown-fields": True}
# Quantities and IntOrStrings would be `x-kubernetes-int-or-string: true`, but kube-apiserver 1.20
# cannot build the server-side-apply model of a CRD that has one anywhere ("error building openapi
# models ... has invalid property: anyOf", kubernetes/kubernetes#90902): apply then runs without
# a schema for the whole resource, so unknown fields are dropped instead of refused and every list
# is atomic. Untyped preserve-unknown-fields keeps apply typed, at the price of not checking that
# these few leaves hold an integer or a string.
INT_OR_STRING = ANY_JSON
META = "k8s.io/apimachinery/pkg/apis/meta/v1"
SCHEMAS = {
    (META, "Time"): {"type": "string", "format": "date-time"},
    (META, "MicroTime"): {"type": "string", "format": "date-time"},
    (META, "Duration"): {"type": "string"},
    (META, "ObjectMeta"): {"type": "object"},  # only at the root: the API server owns its schema
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): INT_OR_STRING,
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): INT_OR_STRING,
    # Any JSON value (in practice an object with apiVersion/kind), kept as it is.
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"): ANY_JSON,
    ("k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", "JSON"): ANY_JSON,
}

# Plain structs, transcribed from upstream Kubernetes (k8s.io/api and k8s.io/apimachinery as of
# the v0.3x releases Gardener builds with; only the types Gardener's resources reference), with
# the markers that matter for the schema. Parsed like Gardener's own source.
K8S_SOURCES = {
    META: """
type TypeMeta struct {
	Kind string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// +structType=atomic
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// +listType=atomic
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

type LabelSelectorRequirement struct {
	Key string `json:"key" patchStrategy:"merge" patchMergeKey:"key"`
	Operator LabelSelectorOperator `json:"operator"`
	// +listType=atomic
	Values []string `json:"values,omitempty"`
}

type LabelSelectorOperator string
""",
    "k8s.io/api/core/v1": """
import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// +structType=atomic
type ObjectReference struct {
	Kind string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name string `json:"name,omitempty"`
	UID types.UID `json:"uid,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	FieldPath string `json:"fieldPath,omitempty"`
}

// +structType=atomic
type SecretReference struct {
	Name string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

type Taint struct {
	Key string `json:"key"`
	Value string `json:"value,omitempty"`
	Effect TaintEffect `json:"effect"`
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

type TaintEffect string

type Toleration struct {
	Key string `json:"key,omitempty"`
	Operator TolerationOperator `json:"operator,omitempty"`
	Value string `json:"value,omitempty"`
	Effect TaintEffect `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

type TolerationOperator string

type ResourceList map[ResourceName]resource.Quantity

type ResourceName string

type ServiceExternalTrafficPolicy string
""",
    "k8s.io/api/autoscaling/v1": """
// +structType=atomic
type CrossVersionObjectReference struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	APIVersion string `json:"apiVersion,omitempty"`
}
""",
    "k8s.io/api/rbac/v1": """
// +structType=atomic
type Subject struct {
	Kind string `json:"kind"`
	APIGroup string `json:"apiGroup,omitempty"`
	Name string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}
""",
    "k8s.io/apimachinery/pkg/types": """
type UID string
""",
}

# Go's predeclared types (as kube-openapi maps them).
BUILTINS = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "float32": {"type": "number", "format": "float"},
    "float64": {"type": "number", "format": "double"},
    **{t: {"type": "integer", "format": "int32"} for t in ("int", "int8", "int16", "int32", "uint", "uint8", "uint16", "byte")},
    **{t: {"type": "integer", "format": "int64"} for t in ("int64", "uint32", "uint64")},
}


# ---------------------------------------------------------------------------------------------
# Reading the pinned commit.
def read_pin():
    words = PIN_FILE.read_text().split()
    if len(words) != 2 or words[0] != "gardener/gardener" or not re.fullmatch(r"[0-9a-f]{40}", words[1]):
        sys.exit(f"{PIN_FILE}: expected one line `gardener/gardener <40-hex commit>`")
    return words[1]


class Repo:
    def __init__(self, git_dir, commit):
        self.git_dir, self.commit = git_dir, commit
        if self._git("cat-file", "-t", f"{commit}^{{commit}}", check=False) is None:
            sys.exit(f"{git_dir}: commit {commit} not found (fetch it first)")

    def _git(self, *args, check=True):
        run = subprocess.run(["git", "-C", str(self.git_dir), *args], capture_output=True, text=True)
        if run.returncode != 0:
            if check:
                sys.exit(f"git {' '.join(args)}: {run.stderr.strip()}")
            return None
        return run.stdout

    def show(self, path):
        return self._git("show", f"{self.commit}:{path}")

    def ls(self, directory):
        return self._git("ls-tree", "--name-only", self.commit, directory.rstrip("/") + "/").split()


# ---------------------------------------------------------------------------------------------
# A small Go reader: enough of the syntax for API type declarations.
@dataclass
class Field:
    name: str  # Go name ("" for an embedded field)
    type: tuple  # see parse_type
    tags: dict
    markers: list

    @property
    def embedded(self):
        return self.name == ""


@dataclass
class TypeDecl:
    name: str
    markers: list
    fields: list | None = None  # a struct
    type: tuple | None = None  # any other type: its underlying type


@dataclass
class Package:
    path: str
    types: dict = field(default_factory=dict)
    marshal_fields: dict = field(default_factory=dict)  # type -> the field its MarshalJSON encodes


def split_lines(text):
    """(code, comment) per source line: the code with its strings, the text of a `//` comment
    (None if there is none). Block comments are dropped."""
    lines, code, comment, state, i = [], [], None, "code", 0

    def end_line():
        nonlocal code, comment
        lines.append(("".join(code).rstrip(), comment.strip() if comment is not None else None))
        code, comment = [], None

    while i < len(text):
        c, two = text[i], text[i : i + 2]
        if c == "\n" and state in ("code", "line", "block", "`"):
            end_line()
            state = "code" if state == "line" else state
        elif state == "line":
            comment += c
        elif state == "block":
            if two == "*/":
                state, i = "code", i + 1
        elif state in ('"', "'", "`"):  # inside a literal
            code.append(c)
            if c == "\\" and state != "`":
                code.append(text[i + 1])
                i += 1
            elif c == state:
                state = "code"
        elif two == "//":
            state, comment, i = "line", "", i + 1
        elif two == "/*":
            state, i = "block", i + 1
        else:
            code.append(c)
            state = c if c in ('"', "'", "`") else "code"
        i += 1
    end_line()
    return lines


def parse_markers(comments):
    """`+key=value` lines of a doc comment as (key, value) pairs (value None without `=`)."""
    found = []
    for line in comments:
        if line.startswith("+"):
            key, _, value = line[1:].partition("=")
            found.append((key.strip(), value.strip() if _ else None))
    return found


def has_marker(markers, key):
    return any(k == key for k, _ in markers)


def marker(markers, key):
    values = [v for k, v in markers if k == key]
    return values[-1] if values else None


def parse_tags(text):
    return dict(re.findall(r'(\w+):"((?:[^"\\]|\\.)*)"', text or ""))


class FileParser:
    """Collects the type declarations of one Go file into a Package."""

    def __init__(self, pkg, text):
        self.pkg, self.lines, self.i = pkg, split_lines(text), 0
        self.imports = {}
        self.doc, self.prev_doc = [], []  # the comment block before a line, and the one before that

    def parse(self):
        while self.i < len(self.lines):
            code, comment = self.lines[self.i]
            self.i += 1
            if not code:
                self.note_comment(comment)
                continue
            markers = parse_markers(self.prev_doc + self.doc)
            self.doc, self.prev_doc = [], []
            self.statement(code, markers)

    def note_comment(self, comment):
        if comment is not None:
            self.doc.append(comment)
        elif self.doc:  # a blank line ends a comment block
            self.prev_doc, self.doc = self.doc, []

    def statement(self, code, markers):
        if code.startswith("import"):
            self.parse_imports(code)
        elif code == "type (":
            self.parse_type_group()
        elif code.startswith("type "):
            self.parse_type_spec(code[5:], markers)
        elif m := re.match(r"func \(\w+ \*?(\w+)\) MarshalJSON\(", code):
            self.parse_marshal(m.group(1))

    def parse_imports(self, code):
        specs = [code[6:]] if code != "import (" else self.group_lines()
        for spec in specs:
            if m := re.fullmatch(r'\s*(\w+)?\s*"([^"]+)"\s*', spec):
                path = m.group(2)
                self.imports[m.group(1) or path.rsplit("/", 1)[-1]] = path

    def group_lines(self):
        """The code lines of a parenthesised group, up to its `)`."""
        out = []
        while self.lines[self.i][0].strip() != ")":
            out.append(self.lines[self.i][0])
            self.i += 1
        self.i += 1
        return out

    def parse_type_group(self):
        while (line := self.lines[self.i])[0].strip() != ")":
            self.i += 1
            if not line[0]:
                self.note_comment(line[1])
                continue
            markers = parse_markers(self.prev_doc + self.doc)
            self.doc, self.prev_doc = [], []
            self.parse_type_spec(line[0], markers)
        self.i += 1

    def parse_type_spec(self, spec, markers):
        name, rest = re.match(r"(\w+)\s*=?\s*(.*)", spec.strip()).groups()
        decl = TypeDecl(name, markers)
        if rest == "struct {":
            decl.fields = self.parse_struct_body(name)
        elif rest in ("struct{}", "struct {}"):
            decl.fields = []
        else:
            decl.type = self.parse_type(rest)
        self.pkg.types[name] = decl

    def parse_struct_body(self, struct_name):
        fields, doc = [], []
        while (line := self.lines[self.i])[0].strip() != "}":
            self.i += 1
            code, comment = line[0].strip(), line[1]
            if not code:
                doc = doc + [comment] if comment is not None else []
                continue
            if code.endswith("{"):
                raise SystemExit(f"{self.pkg.path}.{struct_name}: nested struct literals are not supported: {code}")
            fields.extend(self.parse_field(code, parse_markers(doc)))
            doc = []
        self.i += 1
        return fields

    def parse_field(self, code, markers):
        code, _, tag = code.partition("`")
        tags = parse_tags(tag)
        names, _, type_text = code.strip().rpartition(" ")
        if not names:  # embedded: `pkg.Type` or `*Type`
            return [Field("", self.parse_type(type_text), tags, markers)]
        names = [n.strip() for n in names.split(",")]
        if not all(re.fullmatch(r"\w+", n) for n in names):
            raise SystemExit(f"{self.pkg.path}: cannot read field `{code}`")
        return [Field(n, self.parse_type(type_text), tags, markers) for n in names]

    def parse_type(self, text):
        """A type expression as a tuple: ("ptr", t), ("slice", t), ("map", k, v), ("builtin", name),
        ("named", package path, name), ("any",)."""
        text = text.strip()
        if text.startswith("*"):
            return ("ptr", self.parse_type(text[1:]))
        if m := re.match(r"\[\w*\](.+)", text):
            return ("slice", self.parse_type(m.group(1)))
        if text.startswith("map["):
            key, value = split_map(text)
            return ("map", self.parse_type(key), self.parse_type(value))
        if text in ("interface{}", "any"):
            return ("any",)
        if m := re.fullmatch(r"(\w+)\.(\w+)", text):
            if m.group(1) not in self.imports:
                raise SystemExit(f"{self.pkg.path}: unknown package {m.group(1)} in {text}")
            return ("named", self.imports[m.group(1)], m.group(2))
        if text in BUILTINS:
            return ("builtin", text)
        if re.fullmatch(r"\w+", text):
            return ("named", self.pkg.path, text)
        raise SystemExit(f"{self.pkg.path}: cannot read type `{text}`")

    def parse_marshal(self, type_name):
        """Note which field a custom MarshalJSON encodes (`json.Marshal(x.Field)`)."""
        body = []
        while self.lines[self.i][0] != "}":
            body.append(self.lines[self.i][0])
            self.i += 1
        m = re.search(r"json\.Marshal\(\w+\.(\w+)\)", "\n".join(body))
        self.pkg.marshal_fields[type_name] = m.group(1) if m else None


def split_map(text):
    """`map[K]V` -> (K, V), brackets in K balanced."""
    depth = 0
    for i, c in enumerate(text):
        depth += {"[": 1, "]": -1}.get(c, 0)
        if c == "]" and depth == 0:
            return text[4:i], text[i + 1 :]
    raise SystemExit(f"cannot read map type `{text}`")


class Loader:
    """Packages by import path: Gardener's from git, Kubernetes' from K8S_SOURCES."""

    def __init__(self, repo):
        self.repo, self.packages = repo, {}

    def package(self, path):
        if path not in self.packages:
            self.packages[path] = self.load(path)
        return self.packages[path]

    def load(self, path):
        pkg = Package(path)
        for text in self.sources(path):
            FileParser(pkg, text).parse()
        return pkg

    def sources(self, path):
        if path in K8S_SOURCES:
            return [K8S_SOURCES[path]]
        if not path.startswith(MODULE + "/"):
            raise SystemExit(f"no schema for package {path}: add its types to K8S_SOURCES or SCHEMAS")
        directory = path[len(MODULE) + 1 :]
        names = [n for n in self.repo.ls(directory) if is_api_source(n)]
        return [self.repo.show(n) for n in names]

    def decl(self, path, name):
        pkg = self.package(path)
        if name not in pkg.types:
            raise SystemExit(f"type {path}.{name} not found: add it to K8S_SOURCES or SCHEMAS")
        return pkg.types[name]


def is_api_source(name):
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".go") and not base.endswith("_test.go") and not base.startswith(("zz_generated", "generated"))


# ---------------------------------------------------------------------------------------------
# From Go types to OpenAPI v3 schemas.
class SchemaBuilder:
    def __init__(self, loader):
        self.loader, self.expanding = loader, []
        self.external = set()  # the hand-mapped types used, for the report

    def schema(self, t, path):
        kind = t[0]
        if kind == "ptr":
            return self.schema(t[1], path)
        if kind == "builtin":
            return dict(BUILTINS[t[1]])
        if kind == "any":
            return dict(ANY_JSON)
        if kind == "slice":
            return self.slice_schema(t[1], path)
        if kind == "map":
            return self.map_schema(t[1], t[2], path)
        return self.named_schema(t[1], t[2], path)

    def slice_schema(self, item, path):
        if item in (("builtin", "byte"), ("builtin", "uint8")):
            return {"type": "string", "format": "byte"}
        return {"type": "array", "items": self.schema(item, path + "[]")}

    def map_schema(self, key, value, path):
        if self.schema(key, path).get("type") != "string":
            raise SystemExit(f"{path}: map keys must be strings in JSON")
        return {"type": "object", "additionalProperties": self.schema(value, path + "{}")}

    def named_schema(self, pkg, name, path):
        if (pkg, name) in SCHEMAS:
            return self.hand_mapped(pkg, name, path)
        if not pkg.startswith(MODULE + "/"):
            self.external.add(f"{pkg}.{name}")
        if (pkg, name) in self.expanding:  # a recursive type: keep whatever is there
            return dict(ANY_JSON)
        decl = self.loader.decl(pkg, name)
        self.expanding.append((pkg, name))
        try:
            s = self.decl_schema(pkg, decl, path)
        finally:
            self.expanding.pop()
        apply_markers(s, decl.markers, {}, path)
        return s

    def hand_mapped(self, pkg, name, path):
        if name == "ObjectMeta" and path.count(".") != 1:
            raise SystemExit(f"{path}: ObjectMeta below the root needs a real schema")
        self.external.add(f"{pkg}.{name}")
        return copy.deepcopy(SCHEMAS[(pkg, name)])

    def decl_schema(self, pkg, decl, path):
        marshal = self.loader.package(pkg).marshal_fields
        if decl.name in marshal:  # encoded as one of its fields
            return self.schema(marshalled_field(pkg, decl, marshal[decl.name]).type, path)
        if decl.fields is None:
            return self.schema(decl.type, path)
        properties = self.properties(decl, path)
        s = {"type": "object"}
        if properties:
            s["properties"] = dict(sorted(properties.items()))
        return s

    def properties(self, decl, path):
        """JSON properties of a struct; its own fields win over those of inlined embeds."""
        inlined, own = {}, {}
        for f in decl.fields:
            name, inline = json_name(f)
            if inline:
                inlined.update(self.inline_properties(f, path))
            elif name is not None:
                own[name] = self.field_schema(f, f"{path}.{name}")
        return inlined | own

    def inline_properties(self, f, path):
        s = self.schema(f.type, path)
        if s.get("type") != "object" or "additionalProperties" in s:
            raise SystemExit(f"{path}: cannot inline {f.type}, not a struct")
        return s.get("properties", {})

    def field_schema(self, f, path):
        s = self.schema(f.type, path)
        apply_markers(s, f.markers, f.tags, path)
        # Go decodes `null` into a nil pointer, slice or map: Gardener accepts it. The 1.20 API
        # server also writes `null` where server-side apply removes such a field of an object
        # type, and would refuse its own result without this.
        if f.type[0] in ("ptr", "slice", "map") and "type" in s:
            s["nullable"] = True
        return s


def marshalled_field(pkg, decl, go_name):
    for f in decl.fields or []:
        if (f.name or f.type[-1]) == go_name:
            return f
    raise SystemExit(f"{pkg}.{decl.name} has its own MarshalJSON; map it by hand in SCHEMAS")


def json_name(f):
    """(property name or None to skip, whether the field is inlined), as encoding/json does it:
    an embedded struct without a name in its tag (`json:",inline"`) is inlined."""
    tag = f.tags.get("json")
    if tag == "-":
        return None, False
    name = (tag or "").split(",")[0]
    if f.embedded:
        return (name, False) if name else (None, True)
    if not f.name[0].isupper():  # unexported
        return None, False
    return name or f.name, False


def list_semantics(markers, tags):
    """(list type, map keys) from +listType/+listMapKey markers or a patch-merge struct tag,
    the way an aggregated server's OpenAPI turns into server-side-apply types."""
    list_type, keys = marker(markers, "listType"), [v for k, v in markers if k == "listMapKey"]
    if list_type is None and "merge" in tags.get("patchStrategy", "").split(","):
        key = tags.get("patchMergeKey")
        list_type, keys = ("map", [key]) if key else ("set", [])
    return list_type, keys


def apply_markers(s, markers, tags, path):
    """x-kubernetes-list-type/-list-map-keys/-map-type from a field's or a type's markers."""
    if s.get("type") == "array":
        list_type, keys = list_semantics(markers, tags)
        if list_type:
            set_list_type(s, list_type, keys, path)
    elif s.get("type") == "object":
        map_type = marker(markers, "structType") or marker(markers, "mapType")
        if map_type:
            s["x-kubernetes-map-type"] = map_type


def set_list_type(s, list_type, keys, path):
    item = s["items"]
    if list_type == "set" and item.get("type") in ("object", "array"):
        raise SystemExit(f"{path}: a set of objects or lists is not supported")
    s["x-kubernetes-list-type"] = list_type
    if list_type != "map":
        return
    missing = [k for k in keys if k not in item.get("properties", {})]
    if not keys or missing:
        raise SystemExit(f"{path}: list-map keys {keys} are not all item properties")
    s["x-kubernetes-list-map-keys"] = keys
    for k in keys:
        item["properties"][k].pop("nullable", None)
    # The API server wants list-map keys required (or defaulted).
    item["required"] = [k for k in sorted(set(item.get("required", [])) | set(keys))]


# ---------------------------------------------------------------------------------------------
# Names, scope and subresources from Gardener's registry.
@dataclass
class Resource:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: str
    short_names: list
    categories: list
    status: bool


def string_list_method(source, method):
    m = re.search(r"func \(\w+ \*REST\) " + method + r"\(\) \[\]string \{\s*return \[\]string\{([^}]*)\}", source)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


def registry_resource(repo, loader, api_dir, kind, registry_dir):
    group = re.search(r"\+groupName=(\S+)", repo.show(f"{api_dir}/doc.go")).group(1)
    storage = repo.show(f"{registry_dir}/storage/storage.go")
    plural = re.search(r'DefaultQualifiedResource:\s*\w+\.Resource\("(\w+)"\)', storage).group(1)
    singular = re.search(r'SingularQualifiedResource:\s*\w+\.Resource\("(\w+)"\)', storage).group(1)
    rest_dir = registry_dir.rsplit("/", 1)[0] + "/rest"
    rest = "".join(repo.show(p) for p in repo.ls(rest_dir) if is_api_source(p))
    decl = loader.decl(f"{MODULE}/{api_dir}", kind)
    return Resource(
        group=group,
        version=api_dir.rsplit("/", 1)[-1],
        kind=kind,
        plural=plural,
        singular=singular,
        scope="Cluster" if has_marker(decl.markers, "genclient:nonNamespaced") else "Namespaced",
        short_names=string_list_method(storage, "ShortNames"),
        categories=string_list_method(storage, "Categories"),
        status=f'storage["{plural}/status"]' in rest,
    )


def crd(res, schema):
    names = {"plural": res.plural, "singular": res.singular, "kind": res.kind}
    if res.short_names:
        names["shortNames"] = res.short_names
    if res.categories:
        names["categories"] = res.categories
    version = {"name": res.version, "served": True, "storage": True}
    if res.status:
        version["subresources"] = {"status": {}}
    version["schema"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{res.plural}.{res.group}"},
        "spec": {"group": res.group, "scope": res.scope, "names": names, "versions": [version]},
    }


# ---------------------------------------------------------------------------------------------
# YAML out (block style, leaves in flow style to keep the file short).
RESERVED = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}


def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    plain = re.fullmatch(r"[A-Za-z_/][\w./-]*", v) and v.lower() not in RESERVED
    return v if plain else json.dumps(v)


def is_leaf(v):
    return not isinstance(v, (dict, list)) or all(not isinstance(x, (dict, list)) for x in (v.values() if isinstance(v, dict) else v))


def flow(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{scalar(k)}: {scalar(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(scalar(x) for x in v) + "]"
    return scalar(v)


def yaml_mapping(d, indent):
    lines, pad = [], " " * indent
    for k, v in d.items():
        if is_leaf(v):
            lines.append(f"{pad}{scalar(k)}: {flow(v)}")
        else:
            lines.append(f"{pad}{scalar(k)}:")
            lines += yaml_mapping(v, indent + 2) if isinstance(v, dict) else yaml_sequence(v, indent)
    return lines


def yaml_sequence(items, indent):
    lines, pad = [], " " * indent
    for item in items:
        if is_leaf(item) and not isinstance(item, dict):
            lines.append(f"{pad}- {flow(item)}")
            continue
        if not isinstance(item, dict):
            raise SystemExit("nested lists are not supported in the YAML writer")
        sub = yaml_mapping(item, indent + 2)
        lines += [f"{pad}- {sub[0].lstrip()}"] + sub[1:]
    return lines


def render(commit, crds):
    header = [
        f"# Generated by tests/kube/gen-gardener-crds.py from gardener/gardener@{commit}",
        "# (pkg/apis/core/v1beta1, pkg/apis/security/v1alpha1); do not edit, rerun the script.",
        "# The Gardener resources the simulator serves from a plain kube-apiserver. Gardener's real",
        "# API is an aggregated server; these structural schemas know its fields and their types (so",
        "# the API server prunes or refuses what Gardener does not have), not its validation.",
    ]
    docs = ["\n".join(yaml_mapping(c, 0)) for c in crds]
    return "\n".join(header) + "\n" + "\n---\n".join(docs) + "\n"


# ---------------------------------------------------------------------------------------------
def generate(repo):
    loader = Loader(repo)
    builder = SchemaBuilder(loader)
    crds = []
    for api_dir, kind, registry_dir in RESOURCES:
        res = registry_resource(repo, loader, api_dir, kind, registry_dir)
        schema = builder.named_schema(f"{MODULE}/{api_dir}", kind, kind)
        crds.append(crd(res, schema))
    return crds, sorted(builder.external)


def main():
    parser = argparse.ArgumentParser(description="Generate structural CRDs for Gardener's API types.")
    parser.add_argument("gardener_git_dir", help="clone or (bare) mirror of github.com/gardener/gardener")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    parser.add_argument("--check", action="store_true", help="fail if --out is not up to date")
    parser.add_argument("--list-external", action="store_true", help="print the hand-mapped types used")
    args = parser.parse_args()
    commit = read_pin()
    crds, external = generate(Repo(args.gardener_git_dir, commit))
    text = render(commit, crds)
    if args.list_external:
        print("\n".join(external), file=sys.stderr)
    if args.check:
        if not args.out.exists() or args.out.read_text() != text:
            sys.exit(f"{args.out} is out of date: rerun {Path(__file__).name}")
        return
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(crds)} CRDs, gardener/gardener@{commit[:12]})", file=sys.stderr)


if __name__ == "__main__":
    main()
