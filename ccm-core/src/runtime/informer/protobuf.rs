//! The Node watch's protobuf stream, decoded into the Node the cache keeps.
//!
//! What the API server sends for `Accept: application/vnd.kubernetes.protobuf;stream=watch` (read from a real
//! kube-apiserver 1.36):
//!
//! - the body is a sequence of frames, each a 4-byte big-endian length and then that many bytes ([`Frames`]);
//! - a frame is a bare `metav1.WatchEvent` message {1: type, 2: object (`runtime.RawExtension` {1: raw})};
//! - the raw object is the `k8s\0` magic and a `runtime.Unknown` {1: typeMeta, 2: raw}, whose raw bytes are the
//!   `v1.Node` (or, for an `ERROR` event, the `metav1.Status`) message.
//!
//! A failed request's body is the same `k8s\0` + `runtime.Unknown` envelope around a `Status` ([`decode_status`]).
//!
//! The messages below are partial: they declare only what the cache keeps (the table on `strip_node`) with the
//! field numbers of Kubernetes' `generated.proto` files, so prost skips `managedFields`, images, capacity and the
//! rest without building them. They fill `strip.rs`'s wire shapes, which make the cached Node: one conversion
//! for both encodings. Go's protobuf encoding writes empty strings, `false` and `0` for non-pointer fields that
//! JSON omits (`omitempty`); they are read as absent, as the JSON decoder sees them. A `metav1.Time` is read as Go
//! reads it: whole seconds (Go drops `nanos`), and an empty message is the zero time (JSON's `null`).

use std::collections::BTreeMap;

use bytes::{Buf, Bytes, BytesMut};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::core::Status;
use kube::core::response::StatusSummary;
use prost::Message;

use super::strip::{WireMeta, WireNode, WireNodeInfo, WireNodeSpec, WireNodeStatus};

/// The largest frame accepted: far above any object the API server stores (etcd's request limit is 1.5 MiB), and
/// low enough that a corrupt length never makes the decoder reserve gigabytes.
pub(super) const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The magic that starts a protobuf-encoded Kubernetes object.
const MAGIC: &[u8] = b"k8s\0";

/// What went wrong reading the protobuf stream.
#[derive(Debug, thiserror::Error)]
pub(super) enum DecodeError {
    /// A frame announced more bytes than [`MAX_FRAME_BYTES`].
    #[error(
        "a watch frame of {0} bytes is larger than the {MAX_FRAME_BYTES}-byte limit; the stream is re-opened"
    )]
    FrameTooLarge(usize),
    /// The stream ended inside a frame.
    #[error("the watch stream ended {0} bytes into an unfinished frame; the stream is re-opened")]
    Truncated(usize),
    /// An object did not start with the `k8s\0` magic.
    #[error("a protobuf object lacks the k8s magic prefix; is the server answering protobuf?")]
    NoMagic,
    /// A message did not decode.
    #[error("could not decode a protobuf {what}: {source}")]
    Message {
        /// Which message.
        what: &'static str,
        /// prost's error.
        #[source]
        source: prost::DecodeError,
    },
    /// A timestamp was outside the range of a date.
    #[error("a timestamp of {0} seconds is out of range")]
    Time(i64),
    /// A watch event of a type the API does not define.
    #[error("a watch event of unknown type {0:?}")]
    UnknownType(String),
}

/// Splits a byte stream into length-prefixed frames. Push chunks as they arrive, then take frames until `None`.
#[derive(Debug, Default)]
pub(super) struct Frames {
    buffer: BytesMut,
}

impl Frames {
    /// Append a chunk of the body.
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole frame, `None` until one is complete, or an error for a length above the limit (checked before
    /// anything is reserved).
    pub(super) fn next_frame(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let Some(prefix) = self.buffer.first_chunk::<4>() else {
            return Ok(None);
        };
        let length = u32::from_be_bytes(*prefix) as usize;
        if length > MAX_FRAME_BYTES {
            return Err(DecodeError::FrameTooLarge(length));
        }
        if self.buffer.len() < 4 + length {
            self.buffer.reserve(4 + length - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(4);
        Ok(Some(self.buffer.split_to(length).freeze()))
    }

    /// Check that the stream ended between frames.
    pub(super) fn finish(&self) -> Result<(), DecodeError> {
        match self.buffer.len() {
            0 => Ok(()),
            partial => Err(DecodeError::Truncated(partial)),
        }
    }
}

/// One decoded watch event.
#[derive(Debug, PartialEq)]
pub(super) enum ProtoEvent {
    /// `ADDED` or `MODIFIED`: the cached Node.
    Apply(Node),
    /// `DELETED`: the Node's last state.
    Delete(Node),
    /// `BOOKMARK`: the resourceVersion the stream has reached.
    Bookmark(String),
    /// `ERROR`: the server's Status (410 Gone when the resourceVersion is too old).
    Error(Status),
}

/// Decode one frame of the Node watch.
pub(super) fn decode_event(frame: Bytes) -> Result<ProtoEvent, DecodeError> {
    let event = PbWatchEvent::decode(frame).map_err(message("WatchEvent"))?;
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    let kind = event.type_.unwrap_or_default();
    match kind.as_str() {
        "ADDED" | "MODIFIED" => Ok(ProtoEvent::Apply(decode_node(raw)?)),
        "DELETED" => Ok(ProtoEvent::Delete(decode_node(raw)?)),
        "BOOKMARK" => {
            let node = PbNodeMetaOnly::decode(unwrap_unknown(raw)?).map_err(message("Node"))?;
            Ok(ProtoEvent::Bookmark(
                node.metadata
                    .and_then(|m| m.resource_version)
                    .unwrap_or_default(),
            ))
        }
        "ERROR" => decode_status(raw).map(ProtoEvent::Error),
        _ => Err(DecodeError::UnknownType(kind)),
    }
}

/// Decode a `k8s\0`-prefixed `Status` (an `ERROR` event's object, or a failed request's body).
pub(super) fn decode_status(raw: Bytes) -> Result<Status, DecodeError> {
    let status = PbStatus::decode(unwrap_unknown(raw)?).map_err(message("Status"))?;
    Ok(Status {
        status: match status.status.as_deref() {
            Some("Success") => Some(StatusSummary::Success),
            Some("Failure") => Some(StatusSummary::Failure),
            _ => None,
        },
        code: status
            .code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or_default(),
        message: status.message.unwrap_or_default(),
        reason: status.reason.unwrap_or_default(),
        metadata: None,
        details: None,
    })
}

/// Decode a `k8s\0`-prefixed `v1.Node` into the Node the cache keeps.
pub(super) fn decode_node(raw: Bytes) -> Result<Node, DecodeError> {
    let node = PbNode::decode(unwrap_unknown(raw)?).map_err(message("Node"))?;
    Ok(WireNode {
        metadata: node.metadata.map(PbObjectMeta::into_wire).transpose()?,
        spec: node.spec.map(PbNodeSpec::into_wire).transpose()?,
        status: node.status.map(PbNodeStatus::into_wire).transpose()?,
    }
    .into_node())
}

/// The raw bytes inside the `k8s\0` + `runtime.Unknown` envelope.
fn unwrap_unknown(mut raw: Bytes) -> Result<Bytes, DecodeError> {
    if !raw.starts_with(MAGIC) {
        return Err(DecodeError::NoMagic);
    }
    raw.advance(MAGIC.len());
    let unknown = PbUnknown::decode(raw).map_err(message("runtime.Unknown"))?;
    Ok(unknown.raw.unwrap_or_default())
}

fn message(what: &'static str) -> impl Fn(prost::DecodeError) -> DecodeError {
    move |source| DecodeError::Message { what, source }
}

/// An `omitempty` string: empty is absent.
fn text(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// An `omitempty` list: empty is absent.
fn some<T>(value: Vec<T>) -> Option<Vec<T>> {
    (!value.is_empty()).then_some(value)
}

/// An `omitempty` map: empty is absent.
fn some_map(value: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!value.is_empty()).then_some(value)
}

/// A `metav1.Time` as Go reads it: whole seconds; an empty message is the zero time (absent).
fn time(value: Option<PbTime>) -> Result<Option<Time>, DecodeError> {
    match value.and_then(|t| t.seconds) {
        None => Ok(None),
        Some(seconds) => Timestamp::from_second(seconds)
            .map(|t| Some(Time(t)))
            .map_err(|_| DecodeError::Time(seconds)),
    }
}

#[derive(Clone, PartialEq, Message)]
struct PbWatchEvent {
    #[prost(string, optional, tag = "1")]
    type_: Option<String>,
    #[prost(message, optional, tag = "2")]
    object: Option<PbRawExtension>,
}

#[derive(Clone, PartialEq, Message)]
struct PbRawExtension {
    #[prost(bytes = "bytes", optional, tag = "1")]
    raw: Option<Bytes>,
}

/// `runtime.Unknown` without its typeMeta (the watch's kind is known) and encodings.
#[derive(Clone, PartialEq, Message)]
struct PbUnknown {
    #[prost(bytes = "bytes", optional, tag = "2")]
    raw: Option<Bytes>,
}

#[derive(Clone, PartialEq, Message)]
struct PbStatus {
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(string, optional, tag = "3")]
    message: Option<String>,
    #[prost(string, optional, tag = "4")]
    reason: Option<String>,
    #[prost(int32, optional, tag = "6")]
    code: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct PbTime {
    #[prost(int64, optional, tag = "1")]
    seconds: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct PbNode {
    #[prost(message, optional, tag = "1")]
    metadata: Option<PbObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PbNodeSpec>,
    #[prost(message, optional, tag = "3")]
    status: Option<PbNodeStatus>,
}

/// A bookmark's Node: only its resourceVersion matters.
#[derive(Clone, PartialEq, Message)]
struct PbNodeMetaOnly {
    #[prost(message, optional, tag = "1")]
    metadata: Option<PbResourceVersion>,
}

#[derive(Clone, PartialEq, Message)]
struct PbResourceVersion {
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
}

/// `ObjectMeta` without `managedFields` (17).
#[derive(Clone, PartialEq, Message)]
struct PbObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "4")]
    self_link: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    generation: Option<i64>,
    #[prost(message, optional, tag = "8")]
    creation_timestamp: Option<PbTime>,
    #[prost(message, optional, tag = "9")]
    deletion_timestamp: Option<PbTime>,
    #[prost(int64, optional, tag = "10")]
    deletion_grace_period_seconds: Option<i64>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    owner_references: Vec<PbOwnerReference>,
    #[prost(string, repeated, tag = "14")]
    finalizers: Vec<String>,
}

impl PbObjectMeta {
    fn into_wire(self) -> Result<WireMeta, DecodeError> {
        Ok(WireMeta {
            annotations: some_map(self.annotations),
            creation_timestamp: time(self.creation_timestamp)?,
            // a pointer in Go: 0 is a value
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            deletion_timestamp: time(self.deletion_timestamp)?,
            finalizers: some(self.finalizers),
            generate_name: text(self.generate_name),
            generation: self.generation.filter(|g| *g != 0),
            labels: some_map(self.labels),
            name: text(self.name),
            namespace: text(self.namespace),
            owner_references: some(
                self.owner_references
                    .into_iter()
                    .map(PbOwnerReference::into_api)
                    .collect(),
            ),
            resource_version: text(self.resource_version),
            self_link: text(self.self_link),
            uid: text(self.uid),
        })
    }
}

#[derive(Clone, PartialEq, Message)]
struct PbOwnerReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    api_version: Option<String>,
    #[prost(bool, optional, tag = "6")]
    controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    block_owner_deletion: Option<bool>,
}

impl PbOwnerReference {
    fn into_api(self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.unwrap_or_default(),
            block_owner_deletion: self.block_owner_deletion,
            controller: self.controller,
            kind: self.kind.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            uid: self.uid.unwrap_or_default(),
        }
    }
}

/// `NodeSpec` without `externalID` (2) and `configSource` (6).
#[derive(Clone, PartialEq, Message)]
struct PbNodeSpec {
    #[prost(string, optional, tag = "1")]
    pod_cidr: Option<String>,
    #[prost(string, optional, tag = "3")]
    provider_id: Option<String>,
    #[prost(bool, optional, tag = "4")]
    unschedulable: Option<bool>,
    #[prost(message, repeated, tag = "5")]
    taints: Vec<PbTaint>,
    #[prost(string, repeated, tag = "7")]
    pod_cidrs: Vec<String>,
}

impl PbNodeSpec {
    fn into_wire(self) -> Result<WireNodeSpec, DecodeError> {
        let taints = self
            .taints
            .into_iter()
            .map(PbTaint::into_api)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WireNodeSpec {
            pod_cidr: text(self.pod_cidr),
            pod_cidrs: some(self.pod_cidrs),
            provider_id: text(self.provider_id),
            taints: some(taints),
            unschedulable: self.unschedulable.filter(|u| *u),
        })
    }
}

#[derive(Clone, PartialEq, Message)]
struct PbTaint {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
    #[prost(string, optional, tag = "3")]
    effect: Option<String>,
    #[prost(message, optional, tag = "4")]
    time_added: Option<PbTime>,
}

impl PbTaint {
    fn into_api(self) -> Result<Taint, DecodeError> {
        Ok(Taint {
            effect: self.effect.unwrap_or_default(),
            key: self.key.unwrap_or_default(),
            time_added: time(self.time_added)?,
            value: text(self.value),
        })
    }
}

/// `NodeStatus` with only `conditions` (4), `addresses` (5) and `nodeInfo` (7).
#[derive(Clone, PartialEq, Message)]
struct PbNodeStatus {
    #[prost(message, repeated, tag = "4")]
    conditions: Vec<PbNodeCondition>,
    #[prost(message, repeated, tag = "5")]
    addresses: Vec<PbNodeAddress>,
    #[prost(message, optional, tag = "7")]
    node_info: Option<PbNodeSystemInfo>,
}

impl PbNodeStatus {
    fn into_wire(self) -> Result<WireNodeStatus, DecodeError> {
        let conditions = self
            .conditions
            .into_iter()
            .map(PbNodeCondition::into_api)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WireNodeStatus {
            addresses: some(
                self.addresses
                    .into_iter()
                    .map(|a| NodeAddress {
                        address: a.address.unwrap_or_default(),
                        type_: a.type_.unwrap_or_default(),
                    })
                    .collect(),
            ),
            conditions: some(conditions),
            node_info: self.node_info.map(|info| WireNodeInfo {
                architecture: info.architecture.unwrap_or_default(),
                boot_id: info.boot_id.unwrap_or_default(),
                machine_id: info.machine_id.unwrap_or_default(),
                operating_system: info.operating_system.unwrap_or_default(),
                system_uuid: info.system_uuid.unwrap_or_default(),
            }),
        })
    }
}

#[derive(Clone, PartialEq, Message)]
struct PbNodeCondition {
    #[prost(string, optional, tag = "1")]
    type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(message, optional, tag = "3")]
    last_heartbeat_time: Option<PbTime>,
    #[prost(message, optional, tag = "4")]
    last_transition_time: Option<PbTime>,
    #[prost(string, optional, tag = "5")]
    reason: Option<String>,
    #[prost(string, optional, tag = "6")]
    message: Option<String>,
}

impl PbNodeCondition {
    fn into_api(self) -> Result<NodeCondition, DecodeError> {
        Ok(NodeCondition {
            last_heartbeat_time: time(self.last_heartbeat_time)?,
            last_transition_time: time(self.last_transition_time)?,
            message: text(self.message),
            reason: text(self.reason),
            status: self.status.unwrap_or_default(),
            type_: self.type_.unwrap_or_default(),
        })
    }
}

#[derive(Clone, PartialEq, Message)]
struct PbNodeAddress {
    #[prost(string, optional, tag = "1")]
    type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    address: Option<String>,
}

/// `NodeSystemInfo`'s identity fields only.
#[derive(Clone, PartialEq, Message)]
struct PbNodeSystemInfo {
    #[prost(string, optional, tag = "1")]
    machine_id: Option<String>,
    #[prost(string, optional, tag = "2")]
    system_uuid: Option<String>,
    #[prost(string, optional, tag = "3")]
    boot_id: Option<String>,
    #[prost(string, optional, tag = "9")]
    operating_system: Option<String>,
    #[prost(string, optional, tag = "10")]
    architecture: Option<String>,
}

#[cfg(test)]
#[path = "protobuf/tests.rs"]
mod tests;
