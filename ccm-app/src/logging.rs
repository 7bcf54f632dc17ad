//! Structured logs with `tracing-subscriber`: `-v N` mapped to a level, `--logging-format=text|json`, written to
//! standard error (as klog does), or split with `--log-json-split-stream` / `--log-text-split-stream` (info to
//! standard output, warnings and errors to standard error).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::MakeWriterExt;

use crate::options::{CcmOptions, LogFormat};

/// Dependencies that are noisy at debug level; kept at `warn` unless `-v` is 8 or more.
const QUIET_TARGETS: &[&str] = &[
    "hyper",
    "hyper_util",
    "rustls",
    "tower",
    "h2",
    "tokio_rustls",
];

/// The `EnvFilter` directive for klog verbosity `v`: 0-3 → `info`, 4-5 → `debug`, 6 and above → `trace`; below 8
/// the HTTP and TLS libraries stay at `warn`.
pub fn filter_directive(verbosity: u8) -> String {
    let level = match verbosity {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    };
    let mut directive = level.to_owned();
    if verbosity < 8 {
        for target in QUIET_TARGETS {
            directive.push_str(&format!(",{target}=warn"));
        }
    }
    directive
}

/// Install the global subscriber of `-v`, `--logging-format` and the split-stream flag of that format. `RUST_LOG`,
/// when set and valid, replaces the `-v` mapping. Returns `false` if a subscriber was already installed (for example
/// by a test harness or the vendor's `main`), which is kept.
pub fn init(options: &CcmOptions) -> bool {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let split_stream = match options.logging_format {
        LogFormat::Json => options.log_json_split_stream,
        LogFormat::Text => options.log_text_split_stream,
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(filter_directive(options.verbosity)));
    let writer = if split_stream {
        BoxMakeWriter::new(split(std::io::stdout, std::io::stderr))
    } else {
        BoxMakeWriter::new(std::io::stderr)
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(!split_stream && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer);
    let result = match options.logging_format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    result.is_ok()
}

/// Go's split stream: info, debug and trace lines to `out`, warnings and errors to `err`.
fn split<O, E>(out: O, err: E) -> impl for<'a> MakeWriter<'a> + Send + Sync + 'static
where
    O: for<'a> MakeWriter<'a> + Send + Sync + 'static,
    E: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    err.with_max_level(tracing::Level::WARN)
        .and(out.with_min_level(tracing::Level::INFO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    #[test]
    fn split_stream_sends_info_out_and_errors_err() {
        let (out, err) = (Buffer::default(), Buffer::default());
        let (o, e) = (out.clone(), err.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(split(move || o.clone(), move || e.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("an info line");
            tracing::debug!("a debug line");
            tracing::warn!("a warning");
            tracing::error!("an error");
        });
        let (out, err) = (out.text(), err.text());
        assert!(
            out.contains("an info line") && out.contains("a debug line"),
            "{out}"
        );
        assert!(
            !out.contains("a warning") && !out.contains("an error"),
            "{out}"
        );
        assert!(
            err.contains("a warning") && err.contains("an error"),
            "{err}"
        );
        assert!(!err.contains("an info line"), "{err}");
    }

    #[test]
    fn verbosity_mapping() {
        for v in 0..=3 {
            assert!(filter_directive(v).starts_with("info,"), "{v}");
        }
        for v in 4..=5 {
            assert!(filter_directive(v).starts_with("debug,"), "{v}");
        }
        for v in 6..=7 {
            assert!(filter_directive(v).starts_with("trace,"), "{v}");
            assert!(filter_directive(v).contains("hyper=warn"), "{v}");
        }
        assert_eq!(filter_directive(8), "trace");
        assert_eq!(filter_directive(u8::MAX), "trace");
        for v in [0, 4, 6, 8] {
            EnvFilter::try_new(filter_directive(v)).expect("valid directive");
        }
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_filter_directive() {
        assert_eq!(
            crate::logging::filter_directive(2),
            "info,hyper=warn,hyper_util=warn,rustls=warn,tower=warn,h2=warn,tokio_rustls=warn"
        );
        assert_eq!(crate::logging::filter_directive(9), "trace");
    }
}
