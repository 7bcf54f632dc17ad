//! Faults the emulator cannot make: an AWS SDK interceptor that replaces the next answer with a real AWS error
//! document (EC2's `<Response><Errors>` or ELBv2's `<ErrorResponse>`, with AWS's status code), so the error goes
//! through the SDK's own deserializer and the provider's translation exactly as one from AWS.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError as SmithyBoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use ccm_conformance::ErrorInjector;
use ccm_core::intercept::Operation;
use ccm_core::{BoxError, ErrorKind};

/// A failure AWS answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `RequestLimitExceeded` (EC2, 503) / `Throttling` (ELBv2, 400).
    Throttling,
    /// `InvalidInstanceID.NotFound` (EC2, 400) / `LoadBalancerNotFound` (ELBv2, 400).
    NotFound,
    /// `DependencyViolation` (EC2, 400) / `ResourceInUse` (ELBv2, 400).
    InUse,
    /// `InternalError` (EC2, 500) / `InternalFailure` (ELBv2, 500).
    Internal,
}

/// The API whose error format an interceptor writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// EC2's query protocol: `<Response><Errors><Error>`.
    Ec2,
    /// ELBv2's query protocol: `<ErrorResponse><Error>`.
    Elbv2,
}

/// The armed faults, shared by the interceptors of both clients: the next answer of either takes the first.
#[derive(Debug, Clone, Default)]
pub struct FaultQueue {
    armed: Arc<Mutex<VecDeque<Fault>>>,
    /// How many answers were replaced.
    pub injected: Arc<Mutex<Vec<(Api, Fault)>>>,
    /// How many answers went through (replaced or not).
    pub answers: Arc<Mutex<usize>>,
}

impl FaultQueue {
    /// The next answer (of either API) is `fault`.
    pub fn arm(&self, fault: Fault) {
        self.armed.lock().unwrap().push_back(fault);
    }

    /// The interceptor of one client.
    pub fn interceptor(&self, api: Api) -> AwsErrorDocuments {
        AwsErrorDocuments {
            queue: self.clone(),
            api,
        }
    }
}

/// The interceptor (one per client).
#[derive(Debug, Clone)]
pub struct AwsErrorDocuments {
    queue: FaultQueue,
    api: Api,
}

/// AWS's status, code and message for a fault of an API.
pub fn document(api: Api, fault: Fault) -> (u16, &'static str, &'static str) {
    match (api, fault) {
        (Api::Ec2, Fault::Throttling) => (503, "RequestLimitExceeded", "Request limit exceeded."),
        (Api::Elbv2, Fault::Throttling) => (400, "Throttling", "Rate exceeded"),
        (Api::Ec2, Fault::NotFound) => (
            400,
            "InvalidInstanceID.NotFound",
            "The instance ID 'i-0123456789abcdef0' does not exist",
        ),
        (Api::Elbv2, Fault::NotFound) => (
            400,
            "LoadBalancerNotFound",
            "One or more load balancers not found",
        ),
        (Api::Ec2, Fault::InUse) => (
            400,
            "DependencyViolation",
            "resource has a dependent object",
        ),
        (Api::Elbv2, Fault::InUse) => (
            400,
            "ResourceInUse",
            "Target group is currently in use by a listener",
        ),
        (Api::Ec2, Fault::Internal) => (500, "InternalError", "An internal error has occurred"),
        (Api::Elbv2, Fault::Internal) => {
            (500, "InternalFailure", "The request processing has failed")
        }
    }
}

fn body(api: Api, code: &str, message: &str) -> String {
    match api {
        Api::Ec2 => format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
             <Message>{message}</Message></Error></Errors><RequestID>ccm-injected-0001</RequestID></Response>"
        ),
        Api::Elbv2 => format!(
            "<ErrorResponse xmlns=\"http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/\"><Error>\
             <Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
             <RequestId>ccm-injected-0001</RequestId></ErrorResponse>"
        ),
    }
}

impl Intercept for AwsErrorDocuments {
    fn name(&self) -> &'static str {
        "ccm-aws-error-documents"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), SmithyBoxError> {
        *self.queue.answers.lock().unwrap() += 1;
        let Some(fault) = self.queue.armed.lock().unwrap().pop_front() else {
            return Ok(());
        };
        self.queue.injected.lock().unwrap().push((self.api, fault));
        let (status, code, message) = document(self.api, fault);
        let response = context.response_mut();
        *response.status_mut() = StatusCode::try_from(status)?;
        let headers = response.headers_mut();
        headers.remove("content-length");
        headers.insert("content-type", "text/xml");
        *response.body_mut() = SdkBody::from(body(self.api, code, message));
        Ok(())
    }
}

/// The conformance suite's error injector over a [`FaultQueue`].
pub struct Injector(pub FaultQueue);

#[async_trait]
impl ErrorInjector for Injector {
    async fn fail_next(&self, operation: Operation, kind: ErrorKind) -> Result<bool, BoxError> {
        use Operation as O;
        let fault = match (operation, kind) {
            (_, ErrorKind::Throttled) => Fault::Throttling,
            (
                O::InstanceMetadata | O::InstanceExists | O::InstanceShutdown,
                ErrorKind::InstanceNotFound,
            ) => Fault::NotFound,
            (
                O::EnsureLoadBalancer | O::UpdateLoadBalancer | O::EnsureLoadBalancerDeleted,
                ErrorKind::Retry,
            ) => Fault::InUse,
            // AWS has no "not implemented" answer for these calls.
            _ => return Ok(false),
        };
        self.0.arm(fault);
        Ok(true)
    }
}
