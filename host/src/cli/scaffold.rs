//! `tessera plugin new`: a plugin crate that builds and passes its golden cases, natively
//! (`cargo test`) and on the Wasm build (`tessera plugin test`), right away.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::ValueEnum;

/// Which world the new plugin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NewKind {
    /// One step of the Runtime → Shoot chain.
    ShootExtension,
    /// Renders a module's objects on a target cluster.
    ModuleReconciler,
}

const MODULE_LIB: &str = include_str!("scaffold/module_lib.rs.in");
const MODULE_REQUESTS: &str = include_str!("scaffold/module_requests.yaml");
const MODULE_CASES: [(&str, &str); 2] = [
    (
        "renders.yaml",
        include_str!("scaffold/module_case_renders.yaml"),
    ),
    (
        "greeting-required.yaml",
        include_str!("scaffold/module_case_error.yaml"),
    ),
];
const MODULE_SCHEMA: &str = include_str!("scaffold/module_config.schema.json");
const SHOOT_LIB: &str = include_str!("scaffold/shoot_lib.rs.in");
const SHOOT_SCHEMA: &str = include_str!("scaffold/shoot_config.schema.json");
const SHOOT_REQUESTS: &str = include_str!("scaffold/shoot_requests.yaml");
const SHOOT_CASES: [(&str, &str); 2] = [
    (
        "labels-the-shoot.yaml",
        include_str!("scaffold/shoot_case_renders.yaml"),
    ),
    (
        "team-required.yaml",
        include_str!("scaffold/shoot_case_error.yaml"),
    ),
];
/// The Runtime the shoot-extension cases read (outside `cases/`, which holds only cases).
const RUNTIME: &str = include_str!("../../../examples/runtime-aws.yaml");
const PYTHON_APP: &str = include_str!("scaffold/python_app.py.in");
const PYTHON_README: &str = include_str!("scaffold/python_README.md.in");
const PYTHON_FILES: [(&str, &str); 5] = [
    (
        "cases/renders.yaml",
        include_str!("scaffold/python_case_renders.yaml"),
    ),
    (
        "cases/greeting-required.yaml",
        include_str!("scaffold/module_case_error.yaml"),
    ),
    ("wit/tessera.wit", include_str!("../../../wit/tessera.wit")),
    (
        "tessera_sdk/__init__.py",
        include_str!("../../../sdk/python/tessera_sdk/__init__.py"),
    ),
    (
        "tessera_sdk/_boundary.py",
        include_str!("../../../sdk/python/tessera_sdk/_boundary.py"),
    ),
];
const CARGO_TOML: &str = include_str!("scaffold/Cargo.toml.in");
const STANDALONE_TOML: &str = include_str!("scaffold/standalone.toml.in");
const README: &str = include_str!("scaffold/README.md.in");
/// A module's README walks it on to a cluster (`tests/tests/scaffold.rs` runs its blocks).
const MODULE_README: &str = include_str!("scaffold/module_README.md.in");
const MODULE_SET: &str = include_str!("scaffold/module_moduleset.yaml");
const LINKER_CONFIG: &str = "[target.wasm32-unknown-unknown]\nlinker = \"wasm-component-ld\"\n";
const TOOLCHAIN: &str = include_str!("../../../rust-toolchain.toml");

/// The language of the new plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// A crate using the Rust SDK.
    #[default]
    Rust,
    /// A Python project built by componentize-py (module reconcilers only).
    Python,
}

/// Where the SDK comes from.
enum Sdk {
    /// The crate is a member of a Tessera checkout's workspace (`plugins/NAME`).
    Workspace,
    /// A standalone crate using the SDK at this path, with the checkout's `Cargo.lock` (the
    /// versions the SDK is tested with) when there is one.
    Path { sdk: PathBuf, lock: Option<PathBuf> },
}

/// `tessera plugin new NAME`: write the crate into `dir` (default `./NAME`).
pub fn new_plugin(
    name: &str,
    kind: NewKind,
    lang: Lang,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
) -> anyhow::Result<()> {
    check_name(name)?;
    if lang == Lang::Python && kind != NewKind::ModuleReconciler {
        bail!("Python plugins are module reconcilers: use --kind module-reconciler");
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists()
        && dir
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!("{} exists and is not empty", dir.display());
    }
    std::fs::create_dir_all(dir.join("cases"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    if lang == Lang::Python {
        write_python(&dir, name)?;
        println!(
            "created the Python module reconciler `{name}` in {}",
            dir.display()
        );
        println!("next: see {}", dir.join("README.md").display());
        return Ok(());
    }
    let source = sdk_source(&dir, sdk)?;
    write_files(&dir, name, kind, &source)?;
    print_next_steps(&dir, name, kind, &source);
    Ok(())
}

/// A Python project: the app, its cases, the contract and a copy of the Python SDK.
fn write_python(dir: &Path, name: &str) -> anyhow::Result<()> {
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{Type}}", &type_name(name))
    };
    let mut files = vec![
        ("app.py", fill(PYTHON_APP)),
        ("README.md", fill(PYTHON_README)),
        (".gitignore", "*.wasm\n__pycache__/\n.venv/\n".to_string()),
    ];
    files.extend(PYTHON_FILES.iter().map(|(path, text)| (*path, fill(text))));
    write_all(dir, files.into_iter().map(|(p, t)| (PathBuf::from(p), t)))
}

fn write_all(dir: &Path, files: impl IntoIterator<Item = (PathBuf, String)>) -> anyhow::Result<()> {
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Lower-case letters, digits and dashes: the name is also the crate's and the module's.
fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        bail!(
            "NAME {name:?}: use lower-case letters, digits and dashes (at most 40), starting with a letter"
        );
    }
    Ok(())
}

/// `my-plugin` → `MyPlugin`.
fn type_name(name: &str) -> String {
    name.split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut chars = p.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
                .collect::<String>()
        })
        .collect()
}

/// The Tessera checkout `dir` lies in: a directory with a workspace `Cargo.toml` and the SDK.
fn checkout_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().skip(1).find_map(|d| {
        let sdk = std::fs::read_to_string(d.join("sdk/Cargo.toml")).ok()?;
        let root = std::fs::read_to_string(d.join("Cargo.toml")).ok()?;
        (sdk.contains("name = \"tessera-sdk\"") && root.contains("[workspace]"))
            .then(|| d.to_path_buf())
    })
}

fn sdk_source(dir: &Path, sdk: Option<PathBuf>) -> anyhow::Result<Sdk> {
    let checkout = checkout_of(dir);
    if sdk.is_none()
        && let Some(root) = &checkout
        && dir.parent() == Some(root.join("plugins").as_path())
    {
        return Ok(Sdk::Workspace);
    }
    let sdk = match sdk {
        Some(path) => path,
        None => match &checkout {
            Some(root) => root.join("sdk"),
            None => bail!(
                "{} is outside a Tessera checkout: pass --sdk PATH (the checkout's sdk/ directory)",
                dir.display()
            ),
        },
    };
    let sdk = sdk
        .canonicalize()
        .with_context(|| format!("--sdk {}", sdk.display()))?;
    if !sdk.join("Cargo.toml").is_file() {
        bail!("--sdk {}: no Cargo.toml there", sdk.display());
    }
    let lock = sdk
        .parent()
        .map(|p| p.join("Cargo.lock"))
        .filter(|p| p.is_file());
    Ok(Sdk::Path { sdk, lock })
}

fn write_files(dir: &Path, name: &str, kind: NewKind, source: &Sdk) -> anyhow::Result<()> {
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{Type}}", &type_name(name))
            .replace("{{kind}}", kind_words(kind))
            .replace("{{lib}}", &lib_name(name))
    };
    let (lib, requests, schema, cases): (&str, &str, &str, &[(&str, &str)]) = match kind {
        NewKind::ShootExtension => (SHOOT_LIB, SHOOT_REQUESTS, SHOOT_SCHEMA, &SHOOT_CASES),
        NewKind::ModuleReconciler => (MODULE_LIB, MODULE_REQUESTS, MODULE_SCHEMA, &MODULE_CASES),
    };
    let readme = match kind {
        NewKind::ShootExtension => README,
        NewKind::ModuleReconciler => MODULE_README,
    };
    let mut files = vec![
        (PathBuf::from("Cargo.toml"), fill(&cargo_toml(source))),
        (PathBuf::from("src/lib.rs"), fill(lib)),
        (PathBuf::from("requests.yaml"), fill(requests)),
        (PathBuf::from("config.schema.json"), fill(schema)),
        (PathBuf::from("README.md"), fill(readme)),
    ];
    if kind == NewKind::ModuleReconciler {
        files.push(("moduleset.yaml".into(), fill(MODULE_SET)));
    }
    files.extend(
        cases
            .iter()
            .map(|(file, text)| (Path::new("cases").join(file), fill(text))),
    );
    if kind == NewKind::ShootExtension {
        files.push(("runtime.yaml".into(), RUNTIME.into()));
    }
    if let Sdk::Path { lock, .. } = source {
        files.push((".cargo/config.toml".into(), LINKER_CONFIG.into()));
        files.push(("rust-toolchain.toml".into(), TOOLCHAIN.into()));
        files.push((".gitignore".into(), "/target\n/.tessera-dev\n".into()));
        if let Some(lock) = lock {
            files.push(("Cargo.lock".into(), std::fs::read_to_string(lock)?));
        }
    }
    write_all(dir, files)
}

fn cargo_toml(source: &Sdk) -> String {
    let (sdk, standalone) = match source {
        Sdk::Workspace => ("workspace = true".to_string(), String::new()),
        Sdk::Path { sdk, .. } => (
            format!("path = {:?}", sdk.display().to_string()),
            STANDALONE_TOML.to_string(),
        ),
    };
    CARGO_TOML.replace("{{sdk}}", &sdk) + &standalone
}

fn kind_words(kind: NewKind) -> &'static str {
    match kind {
        NewKind::ShootExtension => "shoot extension",
        NewKind::ModuleReconciler => "module reconciler",
    }
}

/// The crate's library name, which names its `.wasm`.
fn lib_name(name: &str) -> String {
    format!("tessera_plugin_{}", name.replace('-', "_"))
}

fn print_next_steps(dir: &Path, name: &str, kind: NewKind, source: &Sdk) {
    let target = match source {
        Sdk::Workspace => "<workspace target dir>",
        Sdk::Path { .. } => "target",
    };
    println!(
        "created the {} `{name}` in {}",
        kind_words(kind),
        dir.display()
    );
    println!("next:");
    println!("  cd {}", dir.display());
    println!("  cargo test                     # the golden cases in cases/, natively");
    println!("  cargo build --target wasm32-unknown-unknown --profile plugin");
    println!(
        "  tessera plugin test {target}/wasm32-unknown-unknown/plugin/{}.wasm --cases cases",
        lib_name(name)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_types_and_bad_names_are_refused() {
        assert_eq!(type_name("my-first-plugin"), "MyFirstPlugin");
        assert_eq!(lib_name("my-plugin"), "tessera_plugin_my_plugin");
        assert!(check_name("my-plugin2").is_ok());
        for bad in ["", "My", "1x", "a_b", "x-", "a b", &"a".repeat(41)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_standalone_crate_needs_the_sdk_and_gets_its_own_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let err = new_plugin(
            "p",
            NewKind::ModuleReconciler,
            Lang::Rust,
            Some(dir.clone()),
            None,
        );
        assert!(err.unwrap_err().to_string().contains("--sdk"));
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
        let dir = tmp.path().join("q");
        new_plugin(
            "q",
            NewKind::ModuleReconciler,
            Lang::Rust,
            Some(dir.clone()),
            Some(sdk),
        )
        .unwrap();
        let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(toml.contains("[workspace]") && toml.contains("tessera-sdk = { path"));
        assert!(dir.join("cases/renders.yaml").is_file() && dir.join("Cargo.lock").is_file());
        let again = new_plugin("q", NewKind::ModuleReconciler, Lang::Rust, Some(dir), None);
        assert!(again.unwrap_err().to_string().contains("not empty"));
    }

    #[test]
    fn inside_a_checkouts_plugins_directory_the_crate_joins_the_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("sdk")).unwrap();
        std::fs::create_dir_all(root.join("plugins")).unwrap();
        std::fs::write(
            root.join("Cargo.toml"),
            "[workspace]\nmembers = [\"plugins/*\"]\n",
        )
        .unwrap();
        std::fs::write(
            root.join("sdk/Cargo.toml"),
            "[package]\nname = \"tessera-sdk\"\n",
        )
        .unwrap();
        let dir = root.join("plugins/greeter");
        new_plugin(
            "greeter",
            NewKind::ShootExtension,
            Lang::Rust,
            Some(dir.clone()),
            None,
        )
        .unwrap();
        let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(
            toml.contains("tessera-sdk = { workspace = true }"),
            "{toml}"
        );
        assert!(!toml.contains("[workspace]"), "{toml}");
        assert!(!dir.join(".cargo").exists() && dir.join("runtime.yaml").is_file());
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("pub struct Greeter;") && !lib.contains("{{"),
            "{lib}"
        );
    }

    #[test]
    fn a_python_project_is_a_module_reconciler_with_its_contract_and_sdk() {
        let tmp = tempfile::tempdir().unwrap();
        let err = new_plugin(
            "x",
            NewKind::ShootExtension,
            Lang::Python,
            Some(tmp.path().join("x")),
            None,
        );
        assert!(err.unwrap_err().to_string().contains("module-reconciler"));
        let dir = tmp.path().join("y");
        new_plugin(
            "my-py",
            NewKind::ModuleReconciler,
            Lang::Python,
            Some(dir.clone()),
            None,
        )
        .unwrap();
        let app = std::fs::read_to_string(dir.join("app.py")).unwrap();
        assert!(
            app.contains("class MyPy(") && app.contains("NAME = \"my-py\"") && !app.contains("{{")
        );
        for file in [
            "wit/tessera.wit",
            "tessera_sdk/__init__.py",
            "cases/renders.yaml",
        ] {
            assert!(dir.join(file).is_file(), "{file}");
        }
    }
}
