//! An AWS endpoint that accepts connections and never answers: the SDK's attempt timeout fires, and the provider
//! reports it as a timeout (`ErrorKind::Timeout`, which the cloud-call budget reads as congestion), not as an
//! unknown failure.

use std::time::Duration;

use aws_sdk_ec2::config::{Credentials, Region};
use ccm_core::{ErrorKind, InstancesV2};
use ccm_provider_aws::AwsCloud;
use ccm_provider_aws::config::{self, clients};
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use kube::api::ObjectMeta;
use tokio::net::TcpListener;

#[tokio::test]
async fn a_cloud_that_never_answers_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    // Accept every connection and hold it open without a byte of answer.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let sdk = config::loader(Duration::from_millis(300))
        .endpoint_url(endpoint)
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "tests"))
        .load()
        .await;
    let cloud = AwsCloud::new(clients(&sdk, &[]), "kubernetes", "silent");
    let node = Node {
        metadata: ObjectMeta {
            name: Some("ip-10-0-1-4.eu-west-1.compute.internal".into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some("aws:///eu-west-1a/i-0123456789abcdef0".into()),
            ..Default::default()
        }),
        ..Default::default()
    };

    let err = cloud.instance_exists(&node).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    let text = err.to_string();
    assert!(text.contains("i-0123456789abcdef0"), "{text}");
    assert!(text.contains("request timeout"), "{text}");

    let err = cloud
        .instance_shutdown_bulk(std::slice::from_ref(&node))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "a bulk call too: {err}");
    silent.abort();
}
