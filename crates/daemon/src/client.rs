//! Connecting to a daemon: `HOST:PORT`, `http://HOST:PORT` or `unix:///PATH`.

use tonic::transport::{Channel, Endpoint, Uri};

use crate::proto::cuzk::v1::proving_engine_client::ProvingEngineClient;
use crate::proto::pinion::v1::pinion_client::PinionClient;
use crate::DaemonError;

/// A channel to the daemon at `addr`.
pub async fn connect(addr: &str) -> Result<Channel, DaemonError> {
    let bad = |reason: String| DaemonError::invalid("addr", reason);
    if let Some(path) = addr.strip_prefix("unix://") {
        let path = std::path::PathBuf::from(path);
        // The URI is not used: the connector dials the socket.
        let endpoint = Endpoint::try_from("http://[::1]:1").map_err(|e| bad(e.to_string()))?;
        return endpoint
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                }
            }))
            .await
            .map_err(|e| DaemonError::Listen {
                addr: addr.to_string(),
                source: std::io::Error::other(error_chain(&e)),
            });
    }
    let uri = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    Endpoint::from_shared(uri)
        .map_err(|e| bad(format!("{addr:?}: {e}")))?
        .connect()
        .await
        .map_err(|e| DaemonError::Listen {
            addr: addr.to_string(),
            source: std::io::Error::other(error_chain(&e)),
        })
}

/// The error and its causes on one line (tonic's transport error says little alone).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
    }
    s
}

/// A `pinion.v1` client with message limits of `max_message_bytes`.
pub fn pinion_client(channel: Channel, max_message_bytes: usize) -> PinionClient<Channel> {
    PinionClient::new(channel)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes)
}

/// A `cuzk.v1` client with message limits of `max_message_bytes`.
pub fn cuzk_client(channel: Channel, max_message_bytes: usize) -> ProvingEngineClient<Channel> {
    ProvingEngineClient::new(channel)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes)
}
