//! The images `./x test` and `./x demo --in-pod` load onto the test node. They hold the
//! test build's own `tessera` (glibc, debug info stripped) with the shared libraries it
//! links, in the release image's layout (plugins, CA roots, user 65532, the same paths). So
//! a CI run compiles the host once, for its tests and its images; the static release build
//! (`./x image`) is left to the release and to whoever wants it locally.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{Inputs, MOZILLA_CERTS};

/// A host binary to pack, the version it must report, and the image's name
/// (`<target>/<name>.tar`).
pub(crate) struct TestImage<'a> {
    pub(crate) binary: &'a Path,
    pub(crate) version: &'a str,
    pub(crate) name: &'a str,
}

/// Pack each image and return the tars' paths; the first is also packed a second time from
/// copies of its inputs and must come out the same (the release image's check).
pub(crate) fn test_images(images: &[TestImage]) -> Result<Vec<PathBuf>> {
    let meta = crate::metadata()?;
    let target_dir = crate::target_dir(&meta)?;
    // Built already: this only collects the components (cargo finds nothing to do).
    let plugins = crate::build_components(
        &meta,
        "plugins",
        &target_dir.join("plugins"),
        "tessera-plugin-",
    )?;
    let source = super::host_package(&meta)?["repository"]
        .as_str()
        .context("the host crate names no repository")?
        .to_string();
    let dir = target_dir.join("test-image");
    let mut tars = Vec::new();
    for (i, image) in images.iter().enumerate() {
        let work = dir.join(image.name);
        let mut inputs = inputs_of(image, &work)?;
        inputs.plugins = plugins.clone();
        inputs.source = source.clone();
        let tar = target_dir.join(format!("{}.tar", image.name));
        let packed = super::write(&inputs, &work.join("layout"), &tar)?;
        if i == 0 {
            super::check_reproducible(&inputs, &packed, &dir.join("check"))?;
        }
        tars.push(tar);
    }
    Ok(tars)
}

/// The stripped binary, its libraries and the rest of the image's inputs.
fn inputs_of(image: &TestImage, work: &Path) -> Result<Inputs> {
    std::fs::create_dir_all(work)?;
    let binary = work.join("tessera");
    // Line tables make the test build's binary hundreds of MiB; the pods need none of it.
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&binary)
        .arg(image.binary)
        .status()
        .context("run strip (binutils)")?;
    if !status.success() {
        bail!("strip {} failed with {status}", image.binary.display());
    }
    let said = super::check_version(&binary, image.version)?;
    let libraries = libraries(&binary)?;
    eprintln!(
        "{}: {said}, {} shared libraries",
        image.binary.display(),
        libraries.len()
    );
    Ok(Inputs {
        binary,
        libraries,
        plugins: Vec::new(),
        certs: super::mozilla_certs(Path::new(MOZILLA_CERTS))?,
        version: image.version.to_string(),
        revision: super::revision()?,
        source: String::new(),
        created: super::created()?,
    })
}

/// The shared libraries and the loader `ldd` names, each at the path the binary asks for.
fn libraries(binary: &Path) -> Result<Vec<(String, PathBuf)>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("run ldd")?;
    if !out.status.success() {
        bail!("ldd {} failed with {}", binary.display(), out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if let Some(line) = text.lines().find(|l| l.contains("not found")) {
        bail!("ldd {}: {}", binary.display(), line.trim());
    }
    let libraries = parse_ldd(&text);
    if !libraries.iter().any(|(path, _)| path.contains("ld-linux")) {
        bail!("ldd {} named no dynamic loader", binary.display());
    }
    Ok(libraries)
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2
/// (0x…)` give their paths; the vDSO (no file) is left out.
fn parse_ldd(text: &str) -> Vec<(String, PathBuf)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            let inside = path.strip_prefix('/')?;
            Some((inside.to_string(), PathBuf::from(path)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_libraries_at_their_paths_without_the_vdso() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        let paths: Vec<String> = parse_ldd(out).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "lib/x86_64-linux-gnu/libgcc_s.so.1",
                "lib/x86_64-linux-gnu/libc.so.6",
                "lib64/ld-linux-x86-64.so.2"
            ]
        );
    }
}
