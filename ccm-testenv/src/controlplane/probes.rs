//! Readiness probes of the servers, and reading their logs when they fail.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;

pub(super) async fn etcd_healthy(port: u16) -> bool {
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok(response)) => etcd_health_ok(&response),
        _ => false,
    }
}

/// Whether an HTTP response of etcd's `/health` endpoint reports a healthy member.
pub(super) fn etcd_health_ok(response: &str) -> bool {
    response.starts_with("HTTP/1.")
        && response.contains(" 200 ")
        && response.replace(' ', "").contains(r#""health":"true""#)
}

pub(super) async fn apiserver_ready(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    match tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await {
        Ok(Ok(body)) => body.trim() == "ok",
        _ => false,
    }
}

pub(super) fn is_port_conflict(err: &ControlPlaneError) -> bool {
    match err {
        ControlPlaneError::ServerExited { tail, .. } | ControlPlaneError::NotReady { tail, .. } => {
            tail.contains("address already in use")
        }
        _ => false,
    }
}

/// The last 30 lines of a log file (or a note that it cannot be read).
pub(crate) fn log_tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        }
        Err(err) => format!("(cannot read {}: {err})", path.display()),
    }
}
