//! What a controller author writes against, in one import: `use ccm_core::runtime::prelude::*;`.
//!
//! - the descriptor the runtime starts a controller from ([`ControllerDescriptor`]) and what its init function
//!   receives ([`ControllerContext`], with [`ControllerContext::controller`] to start the builder);
//! - the builder ([`Controller`]) and its most common key mapping ([`added_or_updated`]);
//! - what a reconcile reads and answers: the caches ([`Informer`], [`InformerEvent`], [`Store`]) and [`Action`];
//! - Events ([`EventRecorder`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ccm_core::runtime::prelude::*;
//! use k8s_openapi::api::core::v1::Node;
//!
//! async fn reconcile(node: Arc<Node>, _ctx: Arc<()>) -> Result<Action, std::io::Error> {
//!     println!("{:?}", node.metadata.name);
//!     Ok(Action::Done)
//! }
//!
//! let printer = ControllerDescriptor::new("node-printer", |ctx: &ControllerContext| {
//!     let nodes = ctx.informers.nodes();
//!     let controller = ctx.controller("node-printer", "printer").watches(nodes, added_or_updated);
//!     Ok(Some(controller.boxed_objects(nodes, Arc::new(()), reconcile)))
//! })
//! .disabled_by_default();
//! ```

pub use crate::runtime::builder::{Controller, added_or_updated};
pub use crate::runtime::controller::{ControllerContext, ControllerDescriptor};
pub use crate::runtime::events::EventRecorder;
pub use crate::runtime::informer::{Informer, InformerEvent, Store};
pub use crate::runtime::workers::Action;
