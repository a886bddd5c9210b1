//! `./x image`: the container image, built without a container engine.
//!
//! A static `tessera` (release, `x86_64-unknown-linux-musl`), the first-party plugin
//! components, Mozilla's CA roots and a passwd/group for the non-root user 65532 go into one
//! gzip layer; `pack` turns that into an OCI image layout (`<target>/image/`) and its tar
//! (`<target>/tessera-image.tar`, for `ctr images import`). The manifest digest is printed.
//! `--push REF` pushes it with the host's own registry client (`tessera plugin load`);
//! `--check-reproducible` packs a second time from copies of the inputs and compares.

mod pack;
mod test_image;

pub(crate) use test_image::{TestImage, test_images};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use pack::{Entry, Image};

const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";
/// The user and group the chart runs as (`runAsUser`/`runAsGroup`).
const UID: u64 = 65532;
const BINARY_PATH: &str = "usr/local/bin/tessera";
/// The chart's `--plugins=/usr/lib/tessera/plugins`.
const PLUGINS_PATH: &str = "usr/lib/tessera/plugins";
/// Where rustls-native-certs (kube's and reqwest's roots) looks first.
const CA_BUNDLE_PATH: &str = "etc/ssl/certs/ca-certificates.crt";
/// Debian's copy of Mozilla's roots. Not /etc/ssl/certs/ca-certificates.crt: that one also
/// holds whatever the build machine added (a proxy's CA) and must not ship.
const MOZILLA_CERTS: &str = "/usr/share/ca-certificates/mozilla";
/// The chart's default `image.repository`: `ctr images import` names the image
/// `<this>:<version>`, which is what the chart runs unless told otherwise.
const REPOSITORY: &str = "ghcr.io/tessera-dev/tessera";
/// Annotation `tessera plugin load` pushes an index entry to.
const PUSH_REFERENCE_ANNOTATION: &str = "dev.tessera.reference";

struct Options {
    push: Option<String>,
    check_reproducible: bool,
}

fn parse(args: &[&str]) -> Result<Options> {
    let mut options = Options {
        push: None,
        check_reproducible: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "--push" => {
                let reference = args.next().context("--push needs REGISTRY/REPO:TAG")?;
                options.push = Some(reference.to_string());
            }
            "--check-reproducible" => options.check_reproducible = true,
            other => bail!(
                "unknown argument {other:?} (usage: ./x image [--push REGISTRY/REPO:TAG] [--check-reproducible])"
            ),
        }
    }
    Ok(options)
}

/// Everything the image is made of, built and located but not yet read.
#[derive(Clone)]
struct Inputs {
    binary: PathBuf,
    /// Shared libraries a dynamically linked binary needs: (path in the image, file here).
    /// None for the release image's static binary.
    libraries: Vec<(String, PathBuf)>,
    plugins: Vec<PathBuf>,
    certs: Vec<PathBuf>,
    version: String,
    /// `git rev-parse HEAD`, with `-dirty` when tracked files changed.
    revision: String,
    source: String,
    /// SOURCE_DATE_EPOCH, else the commit time.
    created: i64,
}

pub fn image(args: &[&str]) -> Result<()> {
    let options = parse(args)?;
    let meta = crate::metadata()?;
    let target_dir = crate::target_dir(&meta)?;
    let (inputs, image, layout) = make(&meta, &target_dir)?;
    if options.check_reproducible {
        check_reproducible(&inputs, &image, &target_dir.join("image-check"))?;
    }
    if let Some(reference) = &options.push {
        push(&inputs.binary, &image, &layout, reference)?;
    }
    println!("{}", image.manifest.digest);
    Ok(())
}

/// Build the inputs, pack them, write `<target>/image/` and `<target>/tessera-image.tar`.
fn make(meta: &serde_json::Value, target_dir: &Path) -> Result<(Inputs, Image, PathBuf)> {
    let inputs = build(meta, target_dir)?;
    let layout = target_dir.join("image");
    let image = write(&inputs, &layout, &target_dir.join("tessera-image.tar"))?;
    Ok((inputs, image, layout))
}

/// Pack `inputs`; write the layout to `layout` and its tar to `tar`.
fn write(inputs: &Inputs, layout: &Path, tar: &Path) -> Result<Image> {
    let image = assemble(inputs)?;
    write_layout(&image, layout)?;
    let tar_bytes = image.layout_tar()?;
    std::fs::write(tar, &tar_bytes).with_context(|| format!("write {}", tar.display()))?;
    eprintln!(
        "image {} {} {}: layer {} (uncompressed {}), {} plugins\n  layout {}\n  tar    {} ({})",
        inputs.version,
        inputs.revision,
        image.manifest.digest,
        mib(image.layer.bytes.len()),
        mib(image.layer_tar_size),
        inputs.plugins.len(),
        layout.display(),
        tar.display(),
        mib(tar_bytes.len()),
    );
    Ok(image)
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Build the plugins and the static host, check the host, and find the rest.
fn build(meta: &serde_json::Value, target_dir: &Path) -> Result<Inputs> {
    crate::ensure_tool("xtask/ensure-musl.sh")?;
    let plugins = crate::build_components(
        meta,
        "plugins",
        &target_dir.join("plugins"),
        "tessera-plugin-",
    )?;
    let mut cmd = crate::cargo();
    cmd.args(["build", "--release", "--locked", "-p", "tessera", "--bin"]);
    cmd.args(["tessera", "--target", MUSL_TARGET]);
    // It dates the image, not the build: ring's build script watches it and would rebuild.
    cmd.env_remove("SOURCE_DATE_EPOCH");
    crate::run(cmd)?;
    let binary = target_dir.join(MUSL_TARGET).join("release").join("tessera");
    let package = host_package(meta)?;
    let version = package["version"].as_str().context("version")?.to_string();
    check_binary(&binary, &version)?;
    Ok(Inputs {
        binary,
        libraries: Vec::new(),
        plugins,
        certs: mozilla_certs(Path::new(MOZILLA_CERTS))?,
        version,
        revision: revision()?,
        source: package["repository"]
            .as_str()
            .context("the host crate names no repository")?
            .to_string(),
        created: created()?,
    })
}

fn host_package(meta: &serde_json::Value) -> Result<&serde_json::Value> {
    meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "tessera")
        .context("no package tessera in cargo metadata")
}

/// The image has no dynamic loader and no libc: the binary must be static, and run.
fn check_binary(binary: &Path, version: &str) -> Result<()> {
    let bytes = std::fs::read(binary).with_context(|| format!("read {}", binary.display()))?;
    check_static(&bytes).with_context(|| binary.display().to_string())?;
    let said = check_version(binary, version)?;
    eprintln!("{}: static, {said}", binary.display());
    Ok(())
}

/// The binary runs and says `version` in `--version`; returns what it said.
fn check_version(binary: &Path, version: &str) -> Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("run {} --version", binary.display()))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || said.rsplit(' ').next() != Some(version) {
        bail!(
            "{} --version said {said:?} ({}), expected version {version}",
            binary.display(),
            out.status
        );
    }
    Ok(said)
}

/// An x86-64 ELF file without a program interpreter (PT_INTERP), i.e. one the kernel runs
/// without a dynamic loader (static or static-pie).
fn check_static(elf: &[u8]) -> Result<()> {
    const PT_INTERP: u32 = 3;
    const EM_X86_64: u16 = 62;
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    // 64-bit (class 2), little-endian (data 1).
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") || u16_at(18) != Some(EM_X86_64) {
        bail!("not an x86-64 ELF executable");
    }
    let (Some(phoff), Some(size), Some(count)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        bail!("truncated ELF header");
    };
    for i in 0..usize::from(count) {
        let at = usize::try_from(phoff)? + i * usize::from(size);
        let kind = elf
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .context("truncated program headers")?;
        if kind == PT_INTERP {
            bail!("dynamically linked: it needs a program interpreter the image does not have");
        }
    }
    Ok(())
}

/// The `.crt` files of Debian's Mozilla roots, sorted (the bundle's order).
fn mozilla_certs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "{}: the image's CA roots come from Debian's ca-certificates package",
            dir.display()
        )
    })?;
    let mut certs = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "crt") {
            certs.push(path);
        }
    }
    if certs.is_empty() {
        bail!("no .crt files in {}", dir.display());
    }
    certs.sort();
    Ok(certs)
}

fn git(args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(crate::root())
        .output()
        .with_context(|| format!("git {args:?}"))?;
    if !out.status.success() {
        bail!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

fn revision() -> Result<String> {
    let head = git(&["rev-parse", "HEAD"])?;
    // Untracked files are left out: they reach the build only through a tracked change.
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    Ok(if dirty { format!("{head}-dirty") } else { head })
}

fn created() -> Result<i64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(epoch) => epoch
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH={epoch:?}")),
        Err(_) => Ok(git(&["log", "-1", "--format=%ct", "HEAD"])?.parse()?),
    }
}

/// Read the inputs and pack them.
fn assemble(inputs: &Inputs) -> Result<Image> {
    let read =
        |path: &Path| std::fs::read(path).with_context(|| format!("read {}", path.display()));
    let mut entries = vec![Entry::file(BINARY_PATH, 0o755, read(&inputs.binary)?)];
    for (path, file) in &inputs.libraries {
        entries.push(Entry::file(path, 0o755, read(file)?));
    }
    for plugin in &inputs.plugins {
        let name = plugin.file_name().context("plugin file name")?;
        let path = format!("{PLUGINS_PATH}/{}", name.to_string_lossy());
        entries.push(Entry::file(&path, 0o644, read(plugin)?));
    }
    let mut bundle = Vec::new();
    for cert in &inputs.certs {
        bundle.extend(read(cert)?);
        if !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
    }
    entries.push(Entry::file(CA_BUNDLE_PATH, 0o644, bundle));
    entries.extend(system_files());
    let labels = BTreeMap::from([
        ("org.opencontainers.image.version", &inputs.version),
        ("org.opencontainers.image.revision", &inputs.revision),
        ("org.opencontainers.image.source", &inputs.source),
    ]);
    let config = pack::Config {
        created: inputs.created,
        user: format!("{UID}:{UID}"),
        entrypoint: vec![format!("/{BINARY_PATH}")],
        env: vec!["PATH=/usr/local/bin".into()],
        working_dir: "/".into(),
        labels: labels
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ref_name: format!("{REPOSITORY}:{}", inputs.version),
    };
    pack::pack(&entries, &config)
}

/// The user, and the directories the host writes to when run without the chart's volumes
/// (the chart mounts emptyDirs on them over a read-only root).
fn system_files() -> Vec<Entry> {
    vec![
        Entry::file(
            "etc/passwd",
            0o644,
            format!("root:x:0:0:root:/root:/sbin/nologin\ntessera:x:{UID}:{UID}:tessera:/var/lib/tessera:/sbin/nologin\n").into_bytes(),
        ),
        Entry::file(
            "etc/group",
            0o644,
            format!("root:x:0:\ntessera:x:{UID}:\n").into_bytes(),
        ),
        Entry::dir("tmp", 0o1777, 0),
        Entry::dir("var/cache/tessera", 0o755, UID),
        Entry::dir("var/lib/tessera", 0o755, UID),
        Entry::dir("var/lib/tessera/plugins", 0o755, UID),
    ]
}

/// Replace `dir` with the image's layout.
fn write_layout(image: &Image, dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    for entry in image.layout_entries() {
        let path = dir.join(&entry.path);
        std::fs::create_dir_all(path.parent().expect("inside dir"))?;
        let data = entry.data.expect("the layout lists files only");
        std::fs::write(&path, data).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// Pack again from copies of every input (other paths, new mtimes, another directory
/// order) and require the same bytes.
fn check_reproducible(inputs: &Inputs, first: &Image, scratch: &Path) -> Result<()> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch)?;
    }
    let copy = |from: &Path, to: &Path| -> Result<PathBuf> {
        std::fs::create_dir_all(to)?;
        let dest = to.join(from.file_name().context("file name")?);
        std::fs::copy(from, &dest).with_context(|| format!("copy {}", from.display()))?;
        Ok(dest)
    };
    let mut copied = inputs.clone();
    copied.binary = copy(&inputs.binary, &scratch.join("bin"))?;
    for (i, (_, file)) in copied.libraries.iter_mut().enumerate() {
        *file = copy(file, &scratch.join(format!("lib{i}")))?;
    }
    // Copied in reverse, so a directory listing in creation order would differ.
    copied.plugins = (inputs.plugins.iter().rev())
        .map(|p| copy(p, &scratch.join("plugins")))
        .collect::<Result<Vec<_>>>()?;
    copied.plugins.reverse();
    for cert in inputs.certs.iter().rev() {
        copy(cert, &scratch.join("certs"))?;
    }
    copied.certs = mozilla_certs(&scratch.join("certs"))?;
    let second = assemble(&copied)?;
    std::fs::remove_dir_all(scratch)?;
    eprintln!(
        "first pack  {}\nsecond pack {}",
        first.manifest.digest, second.manifest.digest
    );
    if first.manifest.digest != second.manifest.digest
        || first.layout_tar()? != second.layout_tar()?
    {
        bail!("the image is not reproducible: two packs of the same inputs differ");
    }
    eprintln!("reproducible: both packs are byte for byte the same");
    Ok(())
}

/// Push with the host's registry client: `tessera plugin load` pushes every blob of an
/// image layout and then the manifest bytes unchanged (so the digest stays), to the
/// reference in each index entry's `dev.tessera.reference`, with the host's credential
/// handling (Docker config, TESSERA_REGISTRY_USERNAME/PASSWORD) and plain HTTP for
/// loopback registries.
fn push(binary: &Path, image: &Image, layout: &Path, reference: &str) -> Result<()> {
    let dir = layout.with_file_name("image-push");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::copy(layout.join("oci-layout"), dir.join("oci-layout"))?;
    std::os::unix::fs::symlink(layout.join("blobs"), dir.join("blobs"))?;
    let annotations = BTreeMap::from([
        (pack::REF_NAME_ANNOTATION.to_string(), reference.to_string()),
        (PUSH_REFERENCE_ANNOTATION.to_string(), reference.to_string()),
    ]);
    std::fs::write(
        dir.join("index.json"),
        pack::index_json(&image.manifest, &annotations),
    )?;
    let mut cmd = Command::new(binary);
    // No precompiled-plugin cache (and so no cache key) for a command that compiles nothing.
    cmd.args(["--no-cache", "plugin", "load"]).arg(&dir);
    eprintln!("+ {cmd:?}");
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("run {cmd:?}"))?;
    let said = String::from_utf8_lossy(&out.stdout);
    eprint!("{said}");
    if !out.status.success() {
        bail!("pushing {reference} failed ({})", out.status);
    }
    if !said.contains(&image.manifest.digest) {
        bail!(
            "the registry was sent another manifest than {}",
            image.manifest.digest
        );
    }
    eprintln!("pushed {reference}@{}", image.manifest.digest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-byte ELF64 header for x86-64 with `phdrs` program header types after it.
    fn elf(phdrs: &[u32]) -> Vec<u8> {
        let mut bytes = vec![0u8; 64];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[18..20].copy_from_slice(&62u16.to_le_bytes());
        bytes[32..40].copy_from_slice(&64u64.to_le_bytes());
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
        bytes[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for kind in phdrs {
            let mut phdr = vec![0u8; 56];
            phdr[..4].copy_from_slice(&kind.to_le_bytes());
            bytes.extend(phdr);
        }
        bytes
    }

    #[test]
    fn a_program_interpreter_means_not_static() {
        // PT_LOAD, PT_DYNAMIC, PT_GNU_STACK: static-pie.
        check_static(&elf(&[1, 2, 0x6474_e551])).unwrap();
        // PT_PHDR, PT_INTERP, PT_LOAD: needs ld.so.
        assert!(check_static(&elf(&[6, 3, 1])).is_err());
        assert!(check_static(&elf(&[1])[..60]).is_err());
        let mut truncated = elf(&[1, 3]);
        truncated.truncate(64 + 56 + 2);
        assert!(check_static(&truncated).is_err());
        assert!(check_static(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn this_dynamically_linked_test_binary_is_not_static() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        if cfg!(all(
            target_os = "linux",
            target_env = "gnu",
            target_arch = "x86_64"
        )) {
            assert!(check_static(&exe).is_err());
        }
    }

    #[test]
    fn the_image_files_give_the_user_65532_and_writable_dirs() {
        let files = system_files();
        let passwd = files.iter().find(|e| e.path == "etc/passwd").unwrap();
        let passwd = String::from_utf8(passwd.data.clone().unwrap()).unwrap();
        assert!(passwd.contains("\ntessera:x:65532:65532:"));
        let owned: Vec<&str> = files
            .iter()
            .filter(|e| e.owner == UID)
            .map(|e| e.path.as_str())
            .collect();
        assert_eq!(
            owned,
            [
                "var/cache/tessera",
                "var/lib/tessera",
                "var/lib/tessera/plugins"
            ]
        );
    }

    /// The chart runs `<image.repository>:<appVersion>` by default: that must be the name
    /// the image's layout gives it.
    #[test]
    fn the_chart_defaults_name_this_image() {
        let chart = crate::root().join("charts/tessera");
        let values = std::fs::read_to_string(chart.join("values.yaml")).unwrap();
        assert!(
            values.contains(&format!("\n  repository: {REPOSITORY}\n")),
            "values.yaml image.repository is not {REPOSITORY}"
        );
        let chart_yaml = std::fs::read_to_string(chart.join("Chart.yaml")).unwrap();
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            chart_yaml.contains(&format!("\nappVersion: \"{version}\"")),
            "Chart.yaml appVersion is not the crate version {version}"
        );
    }

    #[test]
    fn arguments() {
        let options =
            parse(&["--push", "127.0.0.1:5000/tessera:1", "--check-reproducible"]).unwrap();
        assert_eq!(options.push.as_deref(), Some("127.0.0.1:5000/tessera:1"));
        assert!(options.check_reproducible);
        assert!(parse(&["--push"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }
}
