//! The OCI image layout, written directly: a tar layer, the image config, the manifest and the index, each
//! a blob named by its sha256 digest (OCI image spec 1.1, "image layout"). Pure functions; the caller writes
//! the files.
//!
//! The layer is an uncompressed tar (`application/vnd.oci.image.layer.v1.tar`), every entry owned by root
//! with mode bits as given and the modification time fixed, in the order given: the same inputs give the
//! same digests.

use anyhow::bail;
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};

/// Media type of the image index (`index.json`).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// Media type of the image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of the image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of an uncompressed tar layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
/// The annotation naming an image in an index (the tag).
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// The tar block size.
const BLOCK: usize = 512;

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    let hash = digest(&SHA256, data);
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash.as_ref() {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// One entry of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory (path without a trailing `/`).
    Dir {
        /// Path inside the image, relative (`etc/ssl`).
        path: String,
        /// Permission bits.
        mode: u32,
    },
    /// A regular file.
    File {
        /// Path inside the image, relative (`etc/passwd`).
        path: String,
        /// Permission bits.
        mode: u32,
        /// Contents.
        data: Vec<u8>,
    },
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Entry::Dir { path, .. } | Entry::File { path, .. } => path,
        }
    }
}

/// Writes `value` as an octal field of `field.len()` bytes: zero-padded digits and a NUL.
fn octal(field: &mut [u8], value: u64) -> anyhow::Result<()> {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    if text.len() > digits {
        bail!("{value} does not fit a {digits}-digit tar field");
    }
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
    Ok(())
}

/// The 512-byte ustar header of `entry`, whose contents are `size` bytes long, modified at `mtime`.
fn header(entry: &Entry, size: u64, mtime: u64) -> anyhow::Result<[u8; BLOCK]> {
    let (name, mode, type_flag) = match entry {
        Entry::Dir { path, mode } => (format!("{path}/"), *mode, b'5'),
        Entry::File { path, mode, .. } => (path.clone(), *mode, b'0'),
    };
    if name.is_empty() || name.starts_with('/') || name.split('/').any(|part| part == "..") {
        bail!("tar entry {name:?}: paths must be relative and stay inside the image");
    }
    let mut block = [0u8; BLOCK];
    // ustar splits long names into a prefix (155 bytes) and a name (100 bytes) at a `/`.
    let (prefix, base) = if name.len() <= 100 {
        ("", name.as_str())
    } else {
        let trimmed = name.trim_end_matches('/');
        match trimmed.rfind('/') {
            Some(at) if at <= 155 && name.len() - at - 1 <= 100 => (&name[..at], &name[at + 1..]),
            _ => bail!("tar entry {name:?}: the path is too long for a ustar header"),
        }
    };
    block[..base.len()].copy_from_slice(base.as_bytes());
    octal(&mut block[100..108], u64::from(mode & 0o7777))?;
    octal(&mut block[108..116], 0)?; // uid
    octal(&mut block[116..124], 0)?; // gid
    octal(&mut block[124..136], size)?;
    octal(&mut block[136..148], mtime)?;
    block[156] = type_flag;
    block[257..263].copy_from_slice(b"ustar\0");
    block[263..265].copy_from_slice(b"00");
    block[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    // The checksum is computed with its own field as spaces, then written as 6 digits, NUL, space.
    block[148..156].copy_from_slice(b"        ");
    let sum: u64 = block.iter().map(|b| u64::from(*b)).sum();
    octal(&mut block[148..155], sum)?;
    block[155] = b' ';
    Ok(block)
}

/// A tar archive of `entries` in the given order, every entry modified at `mtime` (seconds since the epoch).
///
/// # Errors
/// A path that is absolute, leaves the image (`..`), appears twice or is too long for ustar.
pub fn tar(entries: &[Entry], mtime: u64) -> anyhow::Result<Vec<u8>> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for entry in entries {
        if !seen.insert(entry.path()) {
            bail!("tar entry {:?} appears twice", entry.path());
        }
        let data: &[u8] = match entry {
            Entry::Dir { .. } => &[],
            Entry::File { data, .. } => data,
        };
        out.extend_from_slice(&header(entry, data.len() as u64, mtime)?);
        out.extend_from_slice(data);
        let padding = (BLOCK - data.len() % BLOCK) % BLOCK;
        out.extend(std::iter::repeat_n(0u8, padding));
    }
    // Two zero blocks end the archive.
    out.extend(std::iter::repeat_n(0u8, 2 * BLOCK));
    Ok(out)
}

/// What goes into the image config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageConfig {
    /// GOARCH-style architecture (`amd64`, `arm64`).
    pub architecture: String,
    /// `uid:gid` the process runs as.
    pub user: String,
    /// The entrypoint.
    pub entrypoint: Vec<String>,
    /// `NAME=value` environment.
    pub env: Vec<String>,
    /// OCI annotations/labels (`org.opencontainers.image.*`).
    pub labels: Vec<(String, String)>,
}

/// A blob: its bytes and descriptor fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The bytes.
    pub data: Vec<u8>,
    /// `sha256:<hex>`.
    pub digest: String,
}

impl Blob {
    fn new(data: Vec<u8>) -> Self {
        let digest = sha256_digest(&data);
        Blob { data, digest }
    }

    fn descriptor(&self, media_type: &str) -> Value {
        json!({"mediaType": media_type, "digest": self.digest, "size": self.data.len()})
    }

    /// The file name under `blobs/sha256/`.
    pub fn file_name(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }
}

/// The files of an image layout: the blobs (layer, config, manifest) and `index.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Layer, config and manifest blobs.
    pub blobs: Vec<Blob>,
    /// The digest of the manifest: the image digest.
    pub manifest_digest: String,
    /// The contents of `index.json`.
    pub index: Vec<u8>,
}

/// The contents of the `oci-layout` file.
pub const OCI_LAYOUT_FILE: &str = "{\"imageLayoutVersion\":\"1.0.0\"}";

fn to_bytes(value: &Value) -> Vec<u8> {
    // serde_json writes object keys in sorted order (no `preserve_order`): stable bytes, stable digests.
    serde_json::to_vec(value).unwrap_or_default()
}

/// An image of one layer: the layer blob, the config, the manifest, and the index tagging it `tag`.
pub fn layout(layer: Vec<u8>, config: &ImageConfig, tag: &str) -> Layout {
    let layer = Blob::new(layer);
    let labels: serde_json::Map<String, Value> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    let config_blob = Blob::new(to_bytes(&json!({
        "architecture": config.architecture,
        "os": "linux",
        "config": {
            "User": config.user,
            "Entrypoint": config.entrypoint,
            "Env": config.env,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
        "history": [{"created_by": "cargo xtask image"}],
    })));
    let manifest = Blob::new(to_bytes(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": config_blob.descriptor(CONFIG_MEDIA_TYPE),
        "layers": [layer.descriptor(LAYER_MEDIA_TYPE)],
        "annotations": labels,
    })));
    let mut manifest_descriptor = manifest.descriptor(MANIFEST_MEDIA_TYPE);
    manifest_descriptor["annotations"] = json!({ REF_NAME_ANNOTATION: tag });
    manifest_descriptor["platform"] = json!({"architecture": config.architecture, "os": "linux"});
    let index = to_bytes(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [manifest_descriptor],
    }));
    let manifest_digest = manifest.digest.clone();
    Layout {
        blobs: vec![layer, config_blob, manifest],
        manifest_digest,
        index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_known_values() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn field(block: &[u8], range: std::ops::Range<usize>) -> String {
        String::from_utf8_lossy(&block[range])
            .trim_end_matches(['\0', ' '])
            .to_owned()
    }

    #[test]
    fn tar_headers_follow_ustar() {
        let entries = vec![
            Entry::Dir {
                path: "etc".into(),
                mode: 0o755,
            },
            Entry::File {
                path: "etc/passwd".into(),
                mode: 0o644,
                data: b"root:x:0:0::/:\n".to_vec(),
            },
        ];
        let archive = tar(&entries, 1).expect("tar");
        // dir header, file header, one data block, two end blocks
        assert_eq!(archive.len(), 5 * BLOCK);
        let dir = &archive[..BLOCK];
        assert_eq!(field(dir, 0..100), "etc/");
        assert_eq!(dir[156], b'5');
        assert_eq!(field(dir, 100..108), "0000755");
        let file = &archive[BLOCK..2 * BLOCK];
        assert_eq!(field(file, 0..100), "etc/passwd");
        assert_eq!(file[156], b'0');
        assert_eq!(field(file, 124..136), "00000000017"); // 15 bytes
        assert_eq!(field(file, 136..148), "00000000001");
        assert_eq!(&file[257..263], b"ustar\0");
        // The checksum: the sum of the header bytes with the checksum field as spaces.
        let mut copy = file.to_vec();
        copy[148..156].copy_from_slice(b"        ");
        let sum: u64 = copy.iter().map(|b| u64::from(*b)).sum();
        assert_eq!(field(file, 148..155), format!("{sum:06o}"));
        assert_eq!(&archive[2 * BLOCK..2 * BLOCK + 15], b"root:x:0:0::/:\n");
        assert!(archive[2 * BLOCK + 15..].iter().all(|b| *b == 0));
    }

    #[test]
    fn long_paths_use_the_prefix_field() {
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(90));
        let entries = vec![Entry::File {
            path: long.clone(),
            mode: 0o644,
            data: Vec::new(),
        }];
        let archive = tar(&entries, 0).expect("tar");
        assert_eq!(field(&archive, 0..100), "f".repeat(90));
        assert_eq!(field(&archive, 345..500), "d".repeat(120));
        let too_long = vec![Entry::File {
            path: "x".repeat(300),
            mode: 0o644,
            data: Vec::new(),
        }];
        assert!(tar(&too_long, 0).is_err());
    }

    #[test]
    fn bad_paths_are_refused() {
        for path in ["/etc/passwd", "../x", "a/../../b", ""] {
            let entries = vec![Entry::File {
                path: path.into(),
                mode: 0o644,
                data: Vec::new(),
            }];
            let err = tar(&entries, 0).expect_err(path);
            assert!(err.to_string().contains("relative"), "{err}");
        }
        let twice = vec![
            Entry::Dir {
                path: "etc".into(),
                mode: 0o755,
            },
            Entry::Dir {
                path: "etc".into(),
                mode: 0o755,
            },
        ];
        assert!(tar(&twice, 0).unwrap_err().to_string().contains("twice"));
    }

    #[test]
    fn octal_fields_refuse_overflow() {
        let mut field = [0u8; 8];
        octal(&mut field, 0o7777777).expect("fits");
        assert_eq!(&field, b"7777777\0");
        assert!(octal(&mut field, 0o10000000).is_err());
    }

    fn config() -> ImageConfig {
        ImageConfig {
            architecture: "amd64".into(),
            user: "65532:65532".into(),
            entrypoint: vec!["/usr/local/bin/reference-ccm".into()],
            env: vec!["PATH=/usr/local/bin".into()],
            labels: vec![("org.opencontainers.image.version".into(), "0.1.0".into())],
        }
    }

    #[test]
    fn the_layout_links_every_blob_by_digest() {
        let layer = tar(
            &[Entry::Dir {
                path: "etc".into(),
                mode: 0o755,
            }],
            0,
        )
        .expect("tar");
        let image = layout(layer.clone(), &config(), "0.1.0");
        let [layer_blob, config_blob, manifest] = &image.blobs[..] else {
            panic!("three blobs");
        };
        for blob in &image.blobs {
            assert_eq!(blob.digest, sha256_digest(&blob.data));
            assert_eq!(blob.file_name().len(), 64);
        }
        assert_eq!(layer_blob.data, layer);
        assert_eq!(image.manifest_digest, manifest.digest);

        let manifest: Value = serde_json::from_slice(&manifest.data).expect("json");
        assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
        assert_eq!(manifest["config"]["digest"], config_blob.digest);
        assert_eq!(manifest["config"]["size"], config_blob.data.len());
        assert_eq!(manifest["layers"][0]["digest"], layer_blob.digest);
        assert_eq!(manifest["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);

        let config: Value = serde_json::from_slice(&config_blob.data).expect("json");
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(config["rootfs"]["diff_ids"][0], layer_blob.digest);
        assert_eq!(config["os"], "linux");

        let index: Value = serde_json::from_slice(&image.index).expect("json");
        assert_eq!(index["manifests"][0]["digest"], image.manifest_digest);
        assert_eq!(
            index["manifests"][0]["annotations"][REF_NAME_ANNOTATION],
            "0.1.0"
        );
    }

    #[test]
    fn the_same_inputs_give_the_same_digest() {
        let entries = [Entry::File {
            path: "a".into(),
            mode: 0o644,
            data: b"x".to_vec(),
        }];
        let first = layout(tar(&entries, 0).expect("tar"), &config(), "t");
        let second = layout(tar(&entries, 0).expect("tar"), &config(), "t");
        assert_eq!(first, second);
        let other = layout(tar(&entries, 1).expect("tar"), &config(), "t");
        assert_ne!(first.manifest_digest, other.manifest_digest);
    }
}
