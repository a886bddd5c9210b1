//! The deterministic OCI packer behind `./x image`: files in, an OCI image layout out.
//!
//! Nothing here reads the clock, the file system or the environment, so the same entries
//! and config always give the same bytes and the same manifest digest: tar entries are
//! sorted by path with one fixed mtime and fixed owners, gzip has no mtime or file name,
//! and JSON objects are written with their keys sorted.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The tag of an image-layout entry, per the image-layout spec.
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// One file or directory of the image's only layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to `/`, without a leading or trailing slash.
    pub path: String,
    pub mode: u32,
    /// uid and gid (the image has one group per user).
    pub owner: u64,
    /// `None` for a directory.
    pub data: Option<Vec<u8>>,
}

impl Entry {
    pub fn dir(path: &str, mode: u32, owner: u64) -> Self {
        Self {
            path: path.to_string(),
            mode,
            owner,
            data: None,
        }
    }

    pub fn file(path: &str, mode: u32, data: Vec<u8>) -> Self {
        Self {
            path: path.to_string(),
            mode,
            owner: 0,
            data: Some(data),
        }
    }
}

/// What goes into the image config besides the layer.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seconds since the epoch: the config's `created` and every tar entry's mtime.
    pub created: i64,
    pub user: String,
    pub entrypoint: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
    pub labels: BTreeMap<String, String>,
    /// The layout's tag (`org.opencontainers.image.ref.name` in index.json).
    pub ref_name: String,
}

/// A content-addressed blob.
#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: String,
    pub bytes: Vec<u8>,
}

impl Blob {
    fn new(bytes: Vec<u8>) -> Self {
        Self {
            digest: sha256_digest(&bytes),
            bytes,
        }
    }

    fn descriptor(&self, media_type: &str) -> Value {
        json!({"mediaType": media_type, "digest": self.digest, "size": self.bytes.len()})
    }
}

/// A packed image: its blobs (layer, config, manifest) and the layout's index.json.
#[derive(Debug, Clone)]
pub struct Image {
    pub layer: Blob,
    /// Size of the uncompressed layer (its digest is the config's diff_id).
    pub layer_tar_size: usize,
    pub config: Blob,
    pub manifest: Blob,
    pub index: Vec<u8>,
    /// Every entry's mtime, reused for the layout's own files.
    mtime: i64,
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Pack `entries` (parents are added as root-owned 0755 directories) into an image.
pub fn pack(entries: &[Entry], config: &Config) -> Result<Image> {
    let tar = tar_bytes(&with_parents(entries)?, config.created)?;
    let diff_id = sha256_digest(&tar);
    let layer = Blob::new(gzip(&tar)?);
    let config_blob = Blob::new(canonical_json(&config_json(config, &diff_id)?));
    let manifest = Blob::new(canonical_json(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": config_blob.descriptor(CONFIG_MEDIA_TYPE),
        "layers": [layer.descriptor(LAYER_MEDIA_TYPE)],
    })));
    let annotations = BTreeMap::from([(REF_NAME_ANNOTATION.to_string(), config.ref_name.clone())]);
    let index = index_json(&manifest, &annotations);
    Ok(Image {
        layer,
        layer_tar_size: tar.len(),
        config: config_blob,
        manifest,
        index,
        mtime: config.created,
    })
}

/// An index.json naming the image's manifest, with these annotations on its descriptor.
pub fn index_json(manifest: &Blob, annotations: &BTreeMap<String, String>) -> Vec<u8> {
    let mut descriptor = manifest.descriptor(MANIFEST_MEDIA_TYPE);
    descriptor["platform"] = json!({"architecture": "amd64", "os": "linux"});
    descriptor["annotations"] = json!(annotations);
    canonical_json(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [descriptor],
    }))
}

fn config_json(config: &Config, diff_id: &str) -> Result<Value> {
    let created = rfc3339(config.created)?;
    Ok(json!({
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": config.user,
            "Entrypoint": config.entrypoint,
            "Env": config.env,
            "WorkingDir": config.working_dir,
            "Labels": config.labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "./x image"}],
    }))
}

impl Image {
    /// The layout's files: `oci-layout`, `index.json` and `blobs/sha256/<hex>`.
    pub fn layout_entries(&self) -> Vec<Entry> {
        let mut entries = vec![
            Entry::file(
                "oci-layout",
                0o644,
                br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
            ),
            Entry::file("index.json", 0o644, self.index.clone()),
        ];
        for blob in [&self.layer, &self.config, &self.manifest] {
            let hex = blob.digest.trim_start_matches("sha256:");
            entries.push(Entry::file(
                &format!("blobs/sha256/{hex}"),
                0o644,
                blob.bytes.clone(),
            ));
        }
        entries
    }

    /// The layout as one tar (what `ctr images import` reads).
    pub fn layout_tar(&self) -> Result<Vec<u8>> {
        tar_bytes(&with_parents(&self.layout_entries())?, self.mtime)
    }
}

/// Add missing parent directories, refuse duplicates, sort by path (parents sort first,
/// being prefixes of their children).
fn with_parents(entries: &[Entry]) -> Result<Vec<Entry>> {
    let mut all: BTreeMap<String, Entry> = BTreeMap::new();
    for entry in entries {
        if entry.path.is_empty() || entry.path.starts_with('/') || entry.path.ends_with('/') {
            bail!(
                "{:?}: paths are relative, without a trailing slash",
                entry.path
            );
        }
        if all.insert(entry.path.clone(), entry.clone()).is_some() {
            bail!("{} is listed twice", entry.path);
        }
    }
    for entry in entries {
        let mut path = entry.path.as_str();
        while let Some((parent, _)) = path.rsplit_once('/') {
            all.entry(parent.to_string())
                .or_insert_with(|| Entry::dir(parent, 0o755, 0));
            path = parent;
        }
    }
    for entry in all.values() {
        if let Some((parent, _)) = entry.path.rsplit_once('/')
            && all[parent].data.is_some()
        {
            bail!("{} is inside the file {parent}", entry.path);
        }
    }
    Ok(all.into_values().collect())
}

/// A POSIX (ustar) tar of `entries` in their order, every entry with mtime `mtime`.
fn tar_bytes(entries: &[Entry], mtime: i64) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        header.set_path(&entry.path)?;
        header.set_mode(entry.mode);
        header.set_uid(entry.owner);
        header.set_gid(entry.owner);
        let name = if entry.owner == 0 { "root" } else { "tessera" };
        header.set_username(name)?;
        header.set_groupname(name)?;
        header.set_mtime(u64::try_from(mtime).context("mtime before 1970")?);
        let data = entry.data.as_deref().unwrap_or_default();
        header.set_entry_type(match entry.data {
            Some(_) => tar::EntryType::Regular,
            None => tar::EntryType::Directory,
        });
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder
            .append(&header, data)
            .with_context(|| format!("tar {}", entry.path))?;
    }
    Ok(builder.into_inner()?)
}

/// gzip without a file name and with mtime 0, so the bytes depend on the content only.
fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::default());
    encoder.write_all(data)?;
    Ok(encoder.finish()?)
}

/// JSON with every object's keys sorted and no white space, whatever serde_json's
/// `preserve_order` feature (another crate may turn it on) makes of `Value`'s maps.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out.into_bytes()
}

/// `2025-01-31T12:00:00Z` for seconds since the epoch (UTC; days to a civil date after
/// Howard Hinnant's `civil_from_days`).
pub fn rfc3339(epoch: i64) -> Result<String> {
    if epoch < 0 {
        bail!("timestamp {epoch} is before 1970");
    }
    let (days, secs) = (epoch / 86_400, epoch % 86_400);
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Ok(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    ))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn config() -> Config {
        Config {
            created: 1_700_000_000,
            user: "65532:65532".into(),
            entrypoint: vec!["/usr/local/bin/tessera".into()],
            env: vec!["PATH=/usr/local/bin".into()],
            working_dir: "/".into(),
            labels: BTreeMap::from([
                ("org.opencontainers.image.version".into(), "1.2.3".into()),
                ("org.opencontainers.image.revision".into(), "abc".into()),
            ]),
            ref_name: "1.2.3".into(),
        }
    }

    fn entries() -> Vec<Entry> {
        vec![
            Entry::file("usr/local/bin/tessera", 0o755, b"\x7fELF binary".to_vec()),
            Entry::file(
                "etc/passwd",
                0o644,
                b"tessera:x:65532:65532::/:/x\n".to_vec(),
            ),
            Entry::dir("tmp", 0o1777, 0),
            Entry::dir("var/lib/tessera", 0o755, 65532),
            Entry::file("usr/lib/tessera/plugins/b.wasm", 0o644, b"b".to_vec()),
            Entry::file("usr/lib/tessera/plugins/a.wasm", 0o644, b"a".to_vec()),
        ]
    }

    /// (path, mode, uid, gid, mtime, user name, directory?, data) of every tar entry.
    type Row = (String, u32, u64, u64, u64, String, bool, Vec<u8>);

    fn untar(tar: &[u8]) -> Vec<Row> {
        let mut archive = tar::Archive::new(tar);
        let mut rows = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            rows.push((
                entry.path().unwrap().display().to_string(),
                header.mode().unwrap(),
                header.uid().unwrap(),
                header.gid().unwrap(),
                header.mtime().unwrap(),
                header.username().unwrap().unwrap().to_string(),
                header.entry_type().is_dir(),
                data,
            ));
        }
        rows
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn same_inputs_in_any_order_give_the_same_bytes() {
        let first = pack(&entries(), &config()).unwrap();
        let mut shuffled = entries();
        shuffled.reverse();
        let second = pack(&shuffled, &config()).unwrap();
        assert_eq!(first.manifest.digest, second.manifest.digest);
        assert_eq!(first.index, second.index);
        assert_eq!(first.layout_tar().unwrap(), second.layout_tar().unwrap());
    }

    #[test]
    fn any_change_changes_the_manifest_digest() {
        let base = pack(&entries(), &config()).unwrap();
        let mut changed = entries();
        changed[0].data = Some(b"\x7fELF binarY".to_vec());
        let content = pack(&changed, &config()).unwrap();
        assert_ne!(base.layer.digest, content.layer.digest);
        assert_ne!(base.manifest.digest, content.manifest.digest);
        let mut mode = entries();
        mode[0].mode = 0o700;
        assert_ne!(
            base.manifest.digest,
            pack(&mode, &config()).unwrap().manifest.digest
        );
        let mut relabelled = config();
        relabelled
            .labels
            .insert("org.opencontainers.image.revision".into(), "abd".into());
        let label = pack(&entries(), &relabelled).unwrap();
        assert_eq!(base.layer.digest, label.layer.digest);
        assert_ne!(base.manifest.digest, label.manifest.digest);
    }

    #[test]
    fn the_layer_is_sorted_with_fixed_owners_modes_and_mtime() {
        let image = pack(&entries(), &config()).unwrap();
        let tar = gunzip(&image.layer.bytes);
        assert_eq!(tar.len(), image.layer_tar_size);
        let rows = untar(&tar);
        let paths: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            paths,
            [
                "etc",
                "etc/passwd",
                "tmp",
                "usr",
                "usr/lib",
                "usr/lib/tessera",
                "usr/lib/tessera/plugins",
                "usr/lib/tessera/plugins/a.wasm",
                "usr/lib/tessera/plugins/b.wasm",
                "usr/local",
                "usr/local/bin",
                "usr/local/bin/tessera",
                "var",
                "var/lib",
                "var/lib/tessera",
            ]
        );
        let row = |path: &str| rows.iter().find(|r| r.0 == path).unwrap().clone();
        let binary = row("usr/local/bin/tessera");
        assert_eq!(
            (binary.1, binary.2, binary.3, binary.6),
            (0o755, 0, 0, false)
        );
        assert_eq!(binary.7, b"\x7fELF binary");
        assert_eq!(row("tmp").1, 0o1777);
        assert_eq!(row("usr/lib").1, 0o755);
        let home = row("var/lib/tessera");
        assert_eq!(
            (home.2, home.3, home.5.as_str(), home.6),
            (65532, 65532, "tessera", true)
        );
        assert!(rows.iter().all(|r| r.4 == 1_700_000_000));
        assert!(rows.iter().filter(|r| r.2 == 0).all(|r| r.5 == "root"));
    }

    #[test]
    fn gzip_header_has_no_mtime_and_no_file_name() {
        let image = pack(&entries(), &config()).unwrap();
        // Magic, deflate, no flags (no FNAME), mtime 0, no extra flags, OS "unknown".
        assert_eq!(
            image.layer.bytes[..10],
            [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]
        );
    }

    #[test]
    fn config_manifest_and_index_point_at_each_other() {
        let image = pack(&entries(), &config()).unwrap();
        let config: Value = serde_json::from_slice(&image.config.bytes).unwrap();
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(
            config["config"]["Entrypoint"],
            json!(["/usr/local/bin/tessera"])
        );
        assert_eq!(config["config"]["WorkingDir"], "/");
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.version"],
            "1.2.3"
        );
        assert_eq!(config["created"], "2023-11-14T22:13:20Z");
        let diff_id = sha256_digest(&gunzip(&image.layer.bytes));
        assert_eq!(config["rootfs"]["diff_ids"], json!([diff_id]));
        let manifest: Value = serde_json::from_slice(&image.manifest.bytes).unwrap();
        assert_eq!(manifest["config"]["digest"], image.config.digest.as_str());
        assert_eq!(manifest["config"]["size"], image.config.bytes.len());
        assert_eq!(manifest["layers"][0]["digest"], image.layer.digest.as_str());
        assert_eq!(manifest["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
        let index: Value = serde_json::from_slice(&image.index).unwrap();
        assert_eq!(
            index["manifests"][0]["digest"],
            image.manifest.digest.as_str()
        );
        assert_eq!(
            index["manifests"][0]["annotations"][REF_NAME_ANNOTATION],
            "1.2.3"
        );
        assert_eq!(image.manifest.digest, sha256_digest(&image.manifest.bytes));
    }

    #[test]
    fn the_layout_tar_holds_the_layout_files() {
        let image = pack(&entries(), &config()).unwrap();
        let rows = untar(&image.layout_tar().unwrap());
        let files: Vec<&str> = rows.iter().filter(|r| !r.6).map(|r| r.0.as_str()).collect();
        let mut blobs: Vec<String> = [&image.layer, &image.config, &image.manifest]
            .iter()
            .map(|b| format!("blobs/sha256/{}", &b.digest[7..]))
            .collect();
        blobs.sort();
        let mut expected: Vec<&str> = blobs.iter().map(String::as_str).collect();
        expected.extend(["index.json", "oci-layout"]);
        assert_eq!(files, expected);
        let index = rows.iter().find(|r| r.0 == "index.json").unwrap();
        assert_eq!(index.7, image.index);
    }

    #[test]
    fn bad_entry_lists_are_refused() {
        let mut twice = entries();
        twice.push(Entry::dir("tmp", 0o755, 0));
        assert!(pack(&twice, &config()).is_err());
        let mut under_file = entries();
        under_file.push(Entry::file("etc/passwd/x", 0o644, vec![]));
        assert!(pack(&under_file, &config()).is_err());
        let mut absolute = entries();
        absolute.push(Entry::file("/etc/group", 0o644, vec![]));
        assert!(pack(&absolute, &config()).is_err());
    }

    #[test]
    fn json_keys_are_sorted_at_every_level() {
        let value = json!({"b": 1, "a": {"d": [{"z": 1, "y": "é\""}], "c": null}});
        assert_eq!(
            String::from_utf8(canonical_json(&value)).unwrap(),
            r#"{"a":{"c":null,"d":[{"y":"é\"","z":1}]},"b":1}"#
        );
    }

    #[test]
    fn timestamps_are_utc_rfc3339() {
        assert_eq!(rfc3339(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400).unwrap(), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_735_689_599).unwrap(), "2024-12-31T23:59:59Z");
        assert_eq!(rfc3339(4_107_542_400).unwrap(), "2100-03-01T00:00:00Z");
        assert!(rfc3339(-1).is_err());
    }
}
