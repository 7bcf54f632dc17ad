//! The framing and the decoding of hand-built frames; `protowatch/tests.rs` compares the decoder with the JSON
//! one on Nodes from a real API server.

use super::*;

/// `k8s\0` + `runtime.Unknown` around `message`, as the API server wraps every object.
fn enveloped(message: &impl Message) -> Bytes {
    let unknown = PbUnknown {
        raw: Some(message.encode_to_vec().into()),
    };
    let mut raw = MAGIC.to_vec();
    raw.extend(unknown.encode_to_vec());
    raw.into()
}

fn event_bytes(kind: &str, object: &impl Message) -> Vec<u8> {
    PbWatchEvent {
        type_: Some(kind.into()),
        object: Some(PbRawExtension {
            raw: Some(enveloped(object)),
        }),
    }
    .encode_to_vec()
}

fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(payload.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

fn node_named(name: &str, rv: &str) -> PbNode {
    PbNode {
        metadata: Some(PbObjectMeta {
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn all_frames(frames: &mut Frames) -> Vec<Bytes> {
    std::iter::from_fn(|| frames.next_frame().unwrap()).collect()
}

#[test]
fn a_frame_split_across_chunks_comes_out_whole() {
    let payload = event_bytes("ADDED", &node_named("a", "1"));
    let bytes = framed(&payload);
    for split in 0..bytes.len() {
        let mut frames = Frames::default();
        frames.push(&bytes[..split]);
        assert_eq!(frames.next_frame().unwrap(), None, "split at {split}");
        frames.push(&bytes[split..]);
        assert_eq!(frames.next_frame().unwrap().as_deref(), Some(&payload[..]));
        assert_eq!(frames.next_frame().unwrap(), None);
        frames.finish().unwrap();
    }
    // one byte at a time
    let mut frames = Frames::default();
    let mut seen = Vec::new();
    for byte in &bytes {
        frames.push(std::slice::from_ref(byte));
        seen.extend(all_frames(&mut frames));
    }
    assert_eq!(seen.len(), 1);
}

#[test]
fn several_frames_in_one_chunk_come_out_in_order() {
    let payloads: Vec<Vec<u8>> = (1..=3)
        .map(|i| event_bytes("MODIFIED", &node_named("a", &i.to_string())))
        .collect();
    let mut chunk: Vec<u8> = payloads.iter().flat_map(|p| framed(p)).collect();
    // and half of a fourth
    let fourth = framed(&event_bytes("DELETED", &node_named("a", "4")));
    chunk.extend_from_slice(&fourth[..5]);
    let mut frames = Frames::default();
    frames.push(&chunk);
    let got = all_frames(&mut frames);
    assert_eq!(got.len(), 3);
    for (frame, payload) in got.iter().zip(&payloads) {
        assert_eq!(&frame[..], &payload[..]);
    }
    assert!(matches!(frames.finish(), Err(DecodeError::Truncated(5))));
    frames.push(&fourth[5..]);
    let last = all_frames(&mut frames).pop().unwrap();
    let ProtoEvent::Delete(node) = decode_event(last).unwrap() else {
        panic!("a delete");
    };
    assert_eq!(node.metadata.resource_version.as_deref(), Some("4"));
    frames.finish().unwrap();
    // an empty frame is a frame (and an empty event, which names no type)
    frames.push(&[0, 0, 0, 0]);
    let empty = frames.next_frame().unwrap().unwrap();
    assert!(matches!(decode_event(empty), Err(DecodeError::UnknownType(t)) if t.is_empty()));
}

#[test]
fn a_truncated_stream_is_an_error() {
    let bytes = framed(&event_bytes("ADDED", &node_named("a", "1")));
    let mut frames = Frames::default();
    frames.push(&bytes[..bytes.len() - 1]);
    assert_eq!(frames.next_frame().unwrap(), None);
    let err = frames.finish().unwrap_err();
    assert!(matches!(err, DecodeError::Truncated(n) if n == bytes.len() - 1));
    assert!(err.to_string().contains("re-opened"), "{err}");
    // a length prefix cut short too
    let mut frames = Frames::default();
    frames.push(&[0, 0]);
    assert_eq!(frames.next_frame().unwrap(), None);
    assert!(frames.finish().is_err());
}

#[test]
fn a_length_above_the_cap_is_an_error_before_anything_is_reserved() {
    for length in [MAX_FRAME_BYTES + 1, u32::MAX as usize] {
        let mut frames = Frames::default();
        frames.push(&u32::try_from(length).unwrap().to_be_bytes());
        frames.push(b"abc");
        assert!(matches!(frames.next_frame(), Err(DecodeError::FrameTooLarge(l)) if l == length));
        assert!(
            frames.buffer.capacity() < 1024,
            "{}",
            frames.buffer.capacity()
        );
    }
    // the cap itself is allowed (and waits for its bytes)
    let mut frames = Frames::default();
    frames.push(&u32::try_from(MAX_FRAME_BYTES).unwrap().to_be_bytes());
    assert_eq!(frames.next_frame().unwrap(), None);
}

#[test]
fn bookmarks_errors_and_garbage_decode_as_such() {
    let bookmark = PbNodeMetaOnly {
        metadata: Some(PbResourceVersion {
            resource_version: Some("42".into()),
        }),
    };
    assert_eq!(
        decode_event(event_bytes("BOOKMARK", &bookmark).into()).unwrap(),
        ProtoEvent::Bookmark("42".into())
    );
    let gone = PbStatus {
        status: Some("Failure".into()),
        message: Some("too old resource version: 1 (2)".into()),
        reason: Some("Expired".into()),
        code: Some(410),
    };
    let ProtoEvent::Error(status) = decode_event(event_bytes("ERROR", &gone).into()).unwrap()
    else {
        panic!("an error event");
    };
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    assert!(status.is_failure());
    // no magic, broken protobuf, an unknown type: errors, never panics
    let mut no_magic = event_bytes("ADDED", &node_named("a", "1"));
    let at = no_magic.windows(4).position(|w| w == MAGIC).unwrap();
    no_magic[at] = b'x';
    assert!(matches!(
        decode_event(no_magic.into()),
        Err(DecodeError::NoMagic)
    ));
    assert!(matches!(
        decode_event(Bytes::from_static(&[0x0a, 0xff])),
        Err(DecodeError::Message { .. })
    ));
    assert!(matches!(
        decode_event(event_bytes("RENAMED", &node_named("a", "1")).into()),
        Err(DecodeError::UnknownType(t)) if t == "RENAMED"
    ));
}

#[test]
fn go_zero_values_read_as_json_omits_them() {
    let node = PbNode {
        metadata: Some(PbObjectMeta {
            name: Some("n".into()),
            namespace: Some(String::new()),
            generation: Some(0),
            deletion_grace_period_seconds: Some(0),
            creation_timestamp: Some(PbTime { seconds: None }),
            deletion_timestamp: Some(PbTime {
                seconds: Some(1_700_000_000),
            }),
            ..Default::default()
        }),
        spec: Some(PbNodeSpec {
            pod_cidr: Some(String::new()),
            unschedulable: Some(false),
            taints: vec![PbTaint {
                key: Some("k".into()),
                value: Some(String::new()),
                effect: Some("NoSchedule".into()),
                time_added: None,
            }],
            ..Default::default()
        }),
        status: Some(PbNodeStatus::default()),
    };
    let decoded = decode_node(enveloped(&node)).unwrap();
    let json = serde_json::to_value(&decoded).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n", "deletionGracePeriodSeconds": 0, "deletionTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {},
        })
    );
    let out_of_range = PbNode {
        metadata: Some(PbObjectMeta {
            creation_timestamp: Some(PbTime {
                seconds: Some(i64::MAX),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        decode_node(enveloped(&out_of_range)),
        Err(DecodeError::Time(i64::MAX))
    ));
}
