//! The shared Node informer's list-watch when the Node watch is read in protobuf ([`WatchEncoding::Protobuf`]).
//!
//! It yields the events kube's `watcher` yields, so [`Informer::run`](super::Informer::run) and
//! `.default_backoff()` work unchanged: `Init`, one `InitApply` per Node of the list, `InitDone`, then `Apply` and
//! `Delete` from the watch. The list is JSON through kube's `Api` (pages of [`LIST_PAGE_SIZE`], decoded as
//! [`CachedNode`]); it happens once per start and per re-list. The watch, which carries every heartbeat of every
//! Node, asks for `application/vnd.kubernetes.protobuf;stream=watch` and is decoded by `protobuf.rs`.
//!
//! As kube's `watcher` (and client-go's reflector): bookmarks are asked for and only move the resourceVersion; the
//! server ends each watch after a timeout and the watch is re-opened from the last resourceVersion; an `ERROR`
//! event with 410 Gone (the resourceVersion was compacted) makes a new list. Where this differs from kube's
//! `watcher`: a watch that cannot start is followed by a new list (as client-go does) rather than a retried
//! watch, and a stream that breaks mid-frame is an error (a `WatchFailed`) before the watch is re-opened.
//!
//! [`WatchEncoding::Protobuf`]: super::WatchEncoding::Protobuf

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use http::header::{ACCEPT, ACCEPT_ENCODING, HeaderValue};
use http_body_util::{BodyDataStream, BodyExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, WatchParams};
use kube::runtime::watcher::{Error, Event};
use kube::{Api, Resource};

use super::protobuf::{self, DecodeError, Frames, ProtoEvent};
use super::{CachedNode, LIST_PAGE_SIZE};

/// The content type of the protobuf watch.
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// kube's and client-go's server-side watch timeout (client-go picks 5 to 10 minutes; kube 290 s).
pub(super) const WATCH_TIMEOUT_SECS: u32 = 290;

/// How long past the server's timeout a silent stream is waited for before it is taken for a dead connection.
const IDLE_GRACE: Duration = Duration::from_secs(30);

/// What the list-watch lists and watches.
#[derive(Clone)]
pub(super) struct NodeListWatch {
    /// The client of both the list and the watch.
    pub(super) client: kube::Client,
    /// A label selector for both.
    pub(super) selector: Option<String>,
    /// The server-side timeout of each watch.
    pub(super) timeout_secs: u32,
}

/// Where the list-watch is.
enum State {
    /// Nothing listed: the next step lists from the start.
    Empty,
    /// Listing: the next page's continue token, or the list's resourceVersion once the last page was read.
    Listing {
        continue_token: Option<String>,
        resource_version: Option<String>,
    },
    /// Listed or resumed at `resource_version`: the next step opens a watch.
    Listed { resource_version: String },
    /// Reading a watch.
    Watching {
        resource_version: String,
        body: BodyDataStream<kube::client::Body>,
        frames: Frames,
    },
}

/// One item of the list-watch.
type Step = kube::runtime::watcher::Result<Event<Node>>;

impl NodeListWatch {
    /// The endless list-watch (errors are items; wrap it in a backoff).
    pub(super) fn stream(self) -> BoxStream<'static, Step> {
        stream::unfold((self, State::Empty), |(lw, state)| async move {
            let (items, next) = lw.step(state).await;
            Some((stream::iter(items), (lw, next)))
        })
        .flatten()
        .boxed()
    }

    /// Advance by one request or one chunk of the watch body, returning what it produced.
    async fn step(&self, state: State) -> (VecDeque<Step>, State) {
        match state {
            State::Empty => (
                VecDeque::from([Ok(Event::Init)]),
                State::Listing {
                    continue_token: None,
                    resource_version: None,
                },
            ),
            State::Listing {
                continue_token: None,
                resource_version: Some(resource_version),
            } => (
                VecDeque::from([Ok(Event::InitDone)]),
                State::Listed { resource_version },
            ),
            State::Listing { continue_token, .. } => self.list_page(continue_token).await,
            State::Listed { resource_version } => self.open_watch(resource_version).await,
            State::Watching {
                resource_version,
                body,
                frames,
            } => self.read_watch(resource_version, body, frames).await,
        }
    }

    async fn list_page(&self, continue_token: Option<String>) -> (VecDeque<Step>, State) {
        let api: Api<CachedNode> = Api::all(self.client.clone());
        let mut params = ListParams::default().limit(LIST_PAGE_SIZE);
        if let Some(selector) = &self.selector {
            params = params.labels(selector);
        }
        params.continue_token = continue_token;
        match api.list(&params).await {
            Ok(list) => {
                let resource_version = list.metadata.resource_version.filter(|v| !v.is_empty());
                let continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
                if resource_version.is_none() && continue_token.is_none() {
                    return (
                        VecDeque::from([Err(Error::NoResourceVersion)]),
                        State::Empty,
                    );
                }
                let items = list
                    .items
                    .into_iter()
                    .map(|node| Ok(Event::InitApply(node.0)))
                    .collect();
                let next = State::Listing {
                    continue_token,
                    resource_version,
                };
                (items, next)
            }
            Err(err) => (
                VecDeque::from([Err(Error::InitialListFailed(err))]),
                State::Empty,
            ),
        }
    }

    async fn open_watch(&self, resource_version: String) -> (VecDeque<Step>, State) {
        match self.watch_request(&resource_version).await {
            Ok(body) => {
                tracing::debug!(kind = "Node", resource_version = %resource_version, encoding = "protobuf", "watch opened");
                let next = State::Watching {
                    resource_version,
                    body,
                    frames: Frames::default(),
                };
                (VecDeque::new(), next)
            }
            Err(err) => (
                VecDeque::from([Err(Error::WatchStartFailed(err))]),
                State::Empty,
            ),
        }
    }

    /// Start a watch from `resource_version`, returning its body or the server's refusal.
    async fn watch_request(
        &self,
        resource_version: &str,
    ) -> Result<BodyDataStream<kube::client::Body>, kube::Error> {
        let mut params = WatchParams::default().timeout(self.timeout_secs);
        if let Some(selector) = &self.selector {
            params = params.labels(selector);
        }
        let url = Node::url_path(&(), None);
        let mut request = kube::core::Request::new(url)
            .watch(&params, resource_version)
            .map_err(kube::Error::BuildRequest)?;
        let headers = request.headers_mut();
        headers.insert(ACCEPT, HeaderValue::from_static(PROTOBUF_WATCH));
        // one frame per event; the stream is never compressed (as kube's own watch requests)
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await?;
        if response.status().is_success() {
            return Ok(response.into_body().into_data_stream());
        }
        let code = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut status = protobuf::decode_status(body.clone())
            .or_else(|_| serde_json::from_slice::<kube::core::Status>(&body).map_err(|_| ()))
            .unwrap_or_default();
        if status.code == 0 {
            status.code = code;
        }
        Err(kube::Error::Api(status.boxed()))
    }

    async fn read_watch(
        &self,
        resource_version: String,
        mut body: BodyDataStream<kube::client::Body>,
        mut frames: Frames,
    ) -> (VecDeque<Step>, State) {
        let idle = Duration::from_secs(self.timeout_secs.into()) + IDLE_GRACE;
        let chunk = match tokio::time::timeout(idle, body.next()).await {
            Err(_elapsed) => {
                tracing::debug!(kind = "Node", resource_version = %resource_version, "watch idle past its timeout; re-opening it");
                return (VecDeque::new(), State::Listed { resource_version });
            }
            Ok(None) => {
                let items = match frames.finish() {
                    Ok(()) => VecDeque::new(),
                    Err(err) => VecDeque::from([Err(watch_failed(err))]),
                };
                return (items, State::Listed { resource_version });
            }
            Ok(Some(Err(err))) => {
                let err = Error::WatchFailed(kube::Error::Service(Box::new(err)));
                return (
                    VecDeque::from([Err(err)]),
                    State::Listed { resource_version },
                );
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        frames.push(&chunk);
        let mut items = VecDeque::new();
        let mut resource_version = resource_version;
        loop {
            let frame = match frames.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(err) => {
                    items.push_back(Err(watch_failed(err)));
                    return (items, State::Listed { resource_version });
                }
            };
            match apply_frame(frame, &mut resource_version) {
                Ok(Some(event)) => items.push_back(Ok(event)),
                Ok(None) => {}
                Err(FrameOutcome::Reopen(err)) => {
                    items.push_back(Err(err));
                    return (items, State::Listed { resource_version });
                }
                Err(FrameOutcome::Relist(err)) => {
                    items.push_back(Err(err));
                    return (items, State::Empty);
                }
            }
        }
        let next = State::Watching {
            resource_version,
            body,
            frames,
        };
        (items, next)
    }
}

/// Why a frame ended the watch.
enum FrameOutcome {
    /// Re-open the watch from the last resourceVersion.
    Reopen(Error),
    /// List again: 410 Gone, or an event without a resourceVersion.
    Relist(Error),
}

/// The event of one frame (none for a bookmark), moving `resource_version` along.
fn apply_frame(
    frame: Bytes,
    resource_version: &mut String,
) -> Result<Option<Event<Node>>, FrameOutcome> {
    let event = protobuf::decode_event(frame).map_err(|e| FrameOutcome::Reopen(watch_failed(e)))?;
    let (node, apply) = match event {
        ProtoEvent::Bookmark(version) => {
            if !version.is_empty() {
                *resource_version = version;
            }
            return Ok(None);
        }
        ProtoEvent::Error(status) if status.code == 410 => {
            return Err(FrameOutcome::Relist(Error::WatchError(Box::new(status))));
        }
        ProtoEvent::Error(status) => {
            return Err(FrameOutcome::Reopen(Error::WatchError(Box::new(status))));
        }
        ProtoEvent::Apply(node) => (node, true),
        ProtoEvent::Delete(node) => (node, false),
    };
    match node.metadata.resource_version.as_deref() {
        None | Some("") => Err(FrameOutcome::Relist(Error::NoResourceVersion)),
        Some(version) => {
            version.clone_into(resource_version);
            Ok(Some(if apply {
                Event::Apply(node)
            } else {
                Event::Delete(node)
            }))
        }
    }
}

fn watch_failed(err: DecodeError) -> Error {
    Error::WatchFailed(kube::Error::ReadEvents(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        err,
    )))
}

#[cfg(test)]
#[path = "protowatch/tests.rs"]
mod tests;
