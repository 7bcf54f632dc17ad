//! The OCI image layout: a tar layer (the `tar` crate), the image config, the manifest and the index
//! ([`oci_spec`]), each a blob named by its sha256 digest (OCI image spec 1.1, "image layout"). Pure
//! functions; the caller writes the files.
//!
//! The layer is an uncompressed ustar archive (`application/vnd.oci.image.layer.v1.tar`), every entry owned by
//! root with mode bits as given and the modification time fixed, in the order given; the JSON documents are
//! written with their object keys sorted. The same inputs give the same digests.

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr as _;

use anyhow::{Context as _, bail};
use oci_spec::image::{
    ANNOTATION_REF_NAME, Arch, ConfigBuilder, Descriptor, DescriptorBuilder, HistoryBuilder,
    ImageConfigurationBuilder, ImageIndexBuilder, ImageManifestBuilder, MediaType,
    OciLayoutBuilder, Os, PlatformBuilder, RootFsBuilder, Sha256Digest,
};
use ring::digest::{SHA256, digest};
use serde::Serialize;

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

/// A tar archive of `entries` in the given order, every entry owned by root and modified at `mtime`
/// (seconds since the epoch).
///
/// # Errors
/// A path that is absolute, leaves the image (`..`), appears twice or is too long for ustar.
pub fn tar(entries: &[Entry], mtime: u64) -> anyhow::Result<Vec<u8>> {
    let mut seen = BTreeSet::new();
    let mut archive = tar::Builder::new(Vec::new());
    for entry in entries {
        let path = entry.path();
        if path.is_empty() || path.starts_with('/') || path.split('/').any(|part| part == "..") {
            bail!("tar entry {path:?}: paths must be relative and stay inside the image");
        }
        if !seen.insert(path) {
            bail!("tar entry {path:?} appears twice");
        }
        let (kind, mode, data): (_, _, &[u8]) = match entry {
            Entry::Dir { mode, .. } => (tar::EntryType::Directory, *mode, &[]),
            Entry::File { mode, data, .. } => (tar::EntryType::Regular, *mode, data),
        };
        let mut header = tar::Header::new_ustar();
        header
            .set_path(path)
            .with_context(|| format!("tar entry {path:?}"))?;
        header.set_entry_type(kind);
        header.set_mode(mode & 0o7777);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(mtime);
        header.set_size(data.len() as u64);
        header.set_cksum();
        archive
            .append(&header, data)
            .with_context(|| format!("tar entry {path:?}"))?;
    }
    archive.into_inner().context("finishing the tar archive")
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

/// A blob: its bytes and digest.
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

    fn descriptor(&self, media_type: MediaType) -> anyhow::Result<DescriptorBuilder> {
        let digest = Sha256Digest::from_str(self.file_name())
            .with_context(|| format!("digest {}", self.digest))?;
        Ok(DescriptorBuilder::default()
            .media_type(media_type)
            .digest(digest)
            .size(self.data.len() as u64))
    }

    /// The file name under `blobs/sha256/`.
    pub fn file_name(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }
}

/// The files of an image layout: the blobs (layer, config, manifest), `index.json` and `oci-layout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Layer, config and manifest blobs.
    pub blobs: Vec<Blob>,
    /// The digest of the manifest: the image digest.
    pub manifest_digest: String,
    /// The contents of `index.json`.
    pub index: Vec<u8>,
    /// The contents of `oci-layout`.
    pub oci_layout: Vec<u8>,
}

/// `document` as JSON with every object's keys sorted (the documents hold hash maps): stable bytes, stable
/// digests.
fn to_bytes(document: &impl Serialize) -> anyhow::Result<Vec<u8>> {
    let mut value = serde_json::to_value(document).context("serializing an OCI document")?;
    sort_keys(&mut value);
    serde_json::to_vec(&value).context("serializing an OCI document")
}

fn sort_keys(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// An image of one layer: the layer blob, the config, the manifest, and the index tagging it `tag`.
///
/// # Errors
/// If a document cannot be built (a bug: every field is set here).
pub fn layout(layer: Vec<u8>, config: &ImageConfig, tag: &str) -> anyhow::Result<Layout> {
    let layer = Blob::new(layer);
    let labels: HashMap<String, String> = config.labels.iter().cloned().collect();
    let architecture = Arch::from(config.architecture.as_str());
    let image_config = ImageConfigurationBuilder::default()
        .architecture(architecture.clone())
        .os(Os::Linux)
        .config(
            ConfigBuilder::default()
                .user(config.user.clone())
                .entrypoint(config.entrypoint.clone())
                .env(config.env.clone())
                .labels(labels.clone())
                .build()?,
        )
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![layer.digest.clone()])
                .build()?,
        )
        .history(vec![
            HistoryBuilder::default()
                .created_by("cargo xtask image")
                .build()?,
        ])
        .build()?;
    let config_blob = Blob::new(to_bytes(&image_config)?);
    let manifest = ImageManifestBuilder::default()
        .schema_version(2_u32)
        .media_type(MediaType::ImageManifest)
        .config(config_blob.descriptor(MediaType::ImageConfig)?.build()?)
        .layers(vec![layer.descriptor(MediaType::ImageLayer)?.build()?])
        .annotations(labels)
        .build()?;
    let manifest = Blob::new(to_bytes(&manifest)?);
    let manifest_descriptor: Descriptor = manifest
        .descriptor(MediaType::ImageManifest)?
        .annotations(HashMap::from([(
            ANNOTATION_REF_NAME.to_owned(),
            tag.to_owned(),
        )]))
        .platform(
            PlatformBuilder::default()
                .architecture(architecture)
                .os(Os::Linux)
                .build()?,
        )
        .build()?;
    let index = ImageIndexBuilder::default()
        .schema_version(2_u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest_descriptor])
        .build()?;
    let oci_layout = OciLayoutBuilder::default()
        .image_layout_version("1.0.0")
        .build()?;
    let manifest_digest = manifest.digest.clone();
    Ok(Layout {
        blobs: vec![layer, config_blob, manifest],
        manifest_digest,
        index: to_bytes(&index)?,
        oci_layout: to_bytes(&oci_layout)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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

    /// (path, type, mode, uid, gid, mtime, contents) of every entry, read back with the tar crate.
    type Read = (String, tar::EntryType, u32, u64, u64, u64, Vec<u8>);

    fn read_back(archive: &[u8]) -> Vec<Read> {
        let mut reader = tar::Archive::new(archive);
        reader
            .entries()
            .expect("entries")
            .map(|entry| {
                let mut entry = entry.expect("entry");
                let header = entry.header().clone();
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut data).expect("data");
                (
                    entry.path().expect("path").display().to_string(),
                    header.entry_type(),
                    header.mode().expect("mode"),
                    header.uid().expect("uid"),
                    header.gid().expect("gid"),
                    header.mtime().expect("mtime"),
                    data,
                )
            })
            .collect()
    }

    #[test]
    fn the_layer_is_ustar_owned_by_root_in_the_given_order() {
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
        // dir header, file header, one data block, the end of the archive
        assert_eq!(archive.len() % 512, 0);
        assert_eq!(&archive[257..263], b"ustar\0", "a ustar header");
        let read = read_back(&archive);
        assert_eq!(
            read,
            [
                (
                    "etc".to_owned(),
                    tar::EntryType::Directory,
                    0o755,
                    0,
                    0,
                    1,
                    Vec::new()
                ),
                (
                    "etc/passwd".to_owned(),
                    tar::EntryType::Regular,
                    0o644,
                    0,
                    0,
                    1,
                    b"root:x:0:0::/:\n".to_vec()
                ),
            ]
        );
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
        assert_eq!(read_back(&archive)[0].0, long);
        assert_eq!(read_back(&archive).len(), 1, "no extension entry");
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

    fn config() -> ImageConfig {
        ImageConfig {
            architecture: "amd64".into(),
            user: "65532:65532".into(),
            entrypoint: vec!["/usr/local/bin/reference-ccm".into()],
            env: vec!["PATH=/usr/local/bin".into()],
            labels: vec![
                ("org.opencontainers.image.version".into(), "0.1.0".into()),
                (
                    "org.opencontainers.image.title".into(),
                    "reference-ccm".into(),
                ),
            ],
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
        let image = layout(layer.clone(), &config(), "0.1.0").expect("layout");
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
        assert_eq!(manifest["schemaVersion"], 2);
        assert_eq!(
            manifest["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        assert_eq!(manifest["config"]["digest"], config_blob.digest);
        assert_eq!(manifest["config"]["size"], config_blob.data.len());
        assert_eq!(
            manifest["config"]["mediaType"],
            "application/vnd.oci.image.config.v1+json"
        );
        assert_eq!(manifest["layers"][0]["digest"], layer_blob.digest);
        assert_eq!(
            manifest["layers"][0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar"
        );
        assert_eq!(
            manifest["annotations"]["org.opencontainers.image.version"],
            "0.1.0"
        );

        let config: Value = serde_json::from_slice(&config_blob.data).expect("json");
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(
            config["config"]["Entrypoint"][0],
            "/usr/local/bin/reference-ccm"
        );
        assert_eq!(config["config"]["Env"][0], "PATH=/usr/local/bin");
        assert_eq!(config["rootfs"]["type"], "layers");
        assert_eq!(config["rootfs"]["diff_ids"][0], layer_blob.digest);
        assert_eq!(config["os"], "linux");
        assert_eq!(config["architecture"], "amd64");

        let index: Value = serde_json::from_slice(&image.index).expect("json");
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["manifests"][0]["digest"], image.manifest_digest);
        assert_eq!(
            index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
            "0.1.0"
        );
        assert_eq!(index["manifests"][0]["platform"]["architecture"], "amd64");
        assert_eq!(index["manifests"][0]["platform"]["os"], "linux");

        let oci_layout: Value = serde_json::from_slice(&image.oci_layout).expect("json");
        assert_eq!(oci_layout["imageLayoutVersion"], "1.0.0");
    }

    #[test]
    fn the_same_inputs_give_the_same_digest() {
        let entries = [Entry::File {
            path: "a".into(),
            mode: 0o644,
            data: b"x".to_vec(),
        }];
        let first = layout(tar(&entries, 0).expect("tar"), &config(), "t").expect("layout");
        // Hash maps iterate in a new order in every process and map: the bytes must not follow it.
        for _ in 0..20 {
            let again = layout(tar(&entries, 0).expect("tar"), &config(), "t").expect("layout");
            assert_eq!(first, again);
        }
        let other = layout(tar(&entries, 1).expect("tar"), &config(), "t").expect("layout");
        assert_ne!(first.manifest_digest, other.manifest_digest);
    }
}
