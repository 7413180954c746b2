//! Listening and stopping: the gRPC server (both services, on TCP or a unix socket), the
//! HTTP status server, and the two-step stop (graceful, then abort).

use std::path::PathBuf;
use std::sync::Arc;

use engine::Shutdown;
use memory_budget::Budget;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::codegen::http;

use crate::config::{Config, Listen};
use crate::cuzk::CuzkService;
use crate::daemon::{detect_budget, Daemon};
use crate::frontend::Frontend;
use crate::pinion::PinionService;
use crate::proto::cuzk::v1::proving_engine_server::ProvingEngineServer;
use crate::proto::pinion::v1::pinion_server::PinionServer;
use crate::DaemonError;

/// How far a stop has gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// Serving.
    Running,
    /// Take nothing new; let running jobs finish.
    Graceful,
    /// Take nothing new; cancel running jobs.
    Abort,
}

/// A started daemon: its servers run on the tokio runtime that started them.
#[derive(Debug)]
pub struct Server {
    daemon: Arc<Daemon>,
    grpc_addr: Listen,
    status_addr: Option<std::net::SocketAddr>,
    stop: watch::Sender<Stop>,
    /// Runs the stop: see [`Server::wait`].
    supervisor: JoinHandle<Result<(), DaemonError>>,
}

/// Rewrites the codes tonic gives client faults it detects itself, before any handler
/// runs: a message over the size limit (tonic: OUT_OF_RANGE) is RESOURCE_EXHAUSTED, bytes
/// that do not decode (tonic: INTERNAL) are INVALID_ARGUMENT. The daemon's own handlers
/// never answer those two codes, so only tonic's answers are touched.
fn client_fault_codes<B>(mut response: http::Response<B>) -> http::Response<B> {
    let Some(status) = response.extensions().get::<tonic::Status>() else {
        return response;
    };
    let message = status.message();
    let code = match status.code() {
        tonic::Code::OutOfRange if message.contains("message length too large") => {
            tonic::Code::ResourceExhausted
        }
        tonic::Code::Internal
            if message.starts_with("failed to decode Protobuf message")
                || message.starts_with("protocol error")
                || message.starts_with("Unexpected EOF") =>
        {
            tonic::Code::InvalidArgument
        }
        _ => return response,
    };
    response
        .headers_mut()
        .insert("grpc-status", http::HeaderValue::from(code as i32));
    response
}

/// Binds a unix socket: a stale file from a dead daemon is replaced, a live one refused.
fn bind_unix(path: &std::path::Path) -> Result<tokio::net::UnixListener, DaemonError> {
    let listen_err = |source| DaemonError::Listen {
        addr: format!("unix://{}", path.display()),
        source,
    };
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(listen_err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process serves this socket",
            )));
        }
        std::fs::remove_file(path).map_err(listen_err)?;
    }
    tokio::net::UnixListener::bind(path).map_err(listen_err)
}

impl Server {
    /// Installs the metrics recorder, sizes the budget (the configured one, or `budget`
    /// when given: tests), starts the engine and both servers. Must run inside a tokio
    /// runtime.
    pub async fn start(
        config: Config,
        frontend: Arc<dyn Frontend>,
        budget: Option<Budget>,
    ) -> Result<Server, DaemonError> {
        let metrics = crate::metrics::install()?;
        let budget = match budget {
            Some(b) => b,
            None => detect_budget(&config)?,
        };
        let max = config.max_message_bytes;
        let listen = config.listen.clone();
        let status_listen = config.status_listen;
        // Bind before the engine starts, so a taken address fails fast.
        enum Bound {
            Tcp(tokio::net::TcpListener),
            Unix(tokio::net::UnixListener, PathBuf),
        }
        let bound = match &listen {
            Listen::Tcp(a) => {
                Bound::Tcp(tokio::net::TcpListener::bind(a).await.map_err(|source| {
                    DaemonError::Listen {
                        addr: a.to_string(),
                        source,
                    }
                })?)
            }
            Listen::Unix(p) => Bound::Unix(bind_unix(p)?, p.clone()),
        };
        let http_listener = match status_listen {
            Some(a) => Some(tokio::net::TcpListener::bind(a).await.map_err(|source| {
                DaemonError::Listen {
                    addr: a.to_string(),
                    source,
                }
            })?),
            None => None,
        };
        let daemon = Daemon::start(config, frontend, budget, metrics)?;
        let (stop, stop_rx) = watch::channel(Stop::Running);

        let cuzk = ProvingEngineServer::new(CuzkService::new(Arc::clone(&daemon)))
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let pinion = PinionServer::new(PinionService::new(Arc::clone(&daemon)))
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let router = tonic::transport::Server::builder()
            .layer(tower::util::MapResponseLayer::new(
                client_fault_codes::<tonic::body::Body>,
            ))
            .add_service(cuzk)
            .add_service(pinion);
        // The gRPC server stops once every job has ended (set by the supervisor): until
        // then clients can still await their jobs; new jobs are refused meanwhile.
        let (drained, mut drained_rx) = watch::channel(false);
        let stopping = async move {
            let _ = drained_rx.wait_for(|d| *d).await;
        };
        let (grpc_addr, unix_socket, grpc) = match bound {
            Bound::Tcp(l) => {
                let addr = l.local_addr().map_err(|source| DaemonError::Listen {
                    addr: listen.to_string(),
                    source,
                })?;
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(l);
                let task = tokio::spawn(async move {
                    router
                        .serve_with_incoming_shutdown(incoming, stopping)
                        .await
                        .map_err(|e| DaemonError::Internal(format!("grpc server: {e}")))
                });
                (Listen::Tcp(addr), None, task)
            }
            Bound::Unix(l, path) => {
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(l);
                let task = tokio::spawn(async move {
                    router
                        .serve_with_incoming_shutdown(incoming, stopping)
                        .await
                        .map_err(|e| DaemonError::Internal(format!("grpc server: {e}")))
                });
                (Listen::Unix(path.clone()), Some(path), task)
            }
        };
        let (status_addr, http) = match http_listener {
            Some(l) => {
                let addr = l.local_addr().ok();
                let app = crate::http::router(Arc::clone(&daemon));
                // The status server outlives the gRPC one: it reports the stop.
                let done = wait_for(stop_rx.clone(), Stop::Abort);
                let task = tokio::spawn(async move {
                    axum::serve(l, app)
                        .with_graceful_shutdown(done)
                        .await
                        .map_err(|e| DaemonError::Internal(format!("status server: {e}")))
                });
                (addr, Some(task))
            }
            None => (None, None),
        };
        let supervisor = tokio::spawn(supervise(
            Arc::clone(&daemon),
            stop.clone(),
            drained,
            grpc,
            http,
            unix_socket,
        ));
        Ok(Server {
            daemon,
            grpc_addr,
            status_addr,
            stop,
            supervisor,
        })
    }

    /// The gRPC address (with the port the system chose for port 0).
    pub fn grpc_addr(&self) -> &Listen {
        &self.grpc_addr
    }

    /// The HTTP status address, when on.
    pub fn status_addr(&self) -> Option<std::net::SocketAddr> {
        self.status_addr
    }

    /// The daemon.
    pub fn daemon(&self) -> &Arc<Daemon> {
        &self.daemon
    }

    /// Asks the server to stop (a later, stronger request escalates: graceful, then
    /// abort).
    pub fn stop(&self, how: Stop) {
        self.stop.send_if_modified(|s| {
            if how > *s {
                *s = how;
                true
            } else {
                false
            }
        });
    }

    /// A handle that can ask for stops from elsewhere (a signal task).
    pub fn stopper(&self) -> watch::Sender<Stop> {
        self.stop.clone()
    }

    /// Waits until the server has stopped (see [`Server::stop`]): it takes no new work,
    /// lets running jobs finish (or cancels them once an abort is asked for), answers the
    /// open calls, stops the status server and removes the unix socket.
    pub async fn wait(self) -> Result<(), DaemonError> {
        self.supervisor
            .await
            .map_err(|e| DaemonError::Internal(format!("server task: {e}")))?
    }
}

/// Carries a stop out, whether or not anyone waits for the server.
async fn supervise(
    daemon: Arc<Daemon>,
    stop: watch::Sender<Stop>,
    drained: watch::Sender<bool>,
    grpc: JoinHandle<Result<(), DaemonError>>,
    http: Option<JoinHandle<Result<(), DaemonError>>>,
    unix_socket: Option<PathBuf>,
) -> Result<(), DaemonError> {
    let rx = stop.subscribe();
    wait_for(rx.clone(), Stop::Graceful).await;
    let graceful = {
        let d = Arc::clone(&daemon);
        tokio::spawn(async move { d.shutdown(Shutdown::Graceful).await })
    };
    let abort = {
        let d = Arc::clone(&daemon);
        tokio::spawn(async move {
            wait_for(rx, Stop::Abort).await;
            d.shutdown(Shutdown::Abort).await;
        })
    };
    let _ = graceful.await;
    // Every job has ended and open awaits have their answers: the gRPC server stops
    // taking connections and finishes the calls in flight.
    drained.send_replace(true);
    let grpc_result = grpc
        .await
        .map_err(|e| DaemonError::Internal(format!("grpc server task: {e}")))
        .and_then(|r| r);
    abort.abort();
    // The status server stops last.
    stop.send_replace(Stop::Abort);
    if let Some(h) = http {
        let _ = h.await;
    }
    if let Some(p) = unix_socket {
        let _ = std::fs::remove_file(p);
    }
    grpc_result
}

/// Resolves once the stop level reaches `level`.
async fn wait_for(mut rx: watch::Receiver<Stop>, level: Stop) {
    // An error means the sender is gone: nobody can ask for a stop any more, so this
    // server stops now.
    let _ = rx.wait_for(|s| *s >= level).await;
}

/// Turns SIGTERM and SIGINT into stops: the first is `first` (graceful, or abort for
/// `--abort`), the second aborts.
pub fn stop_on_signals(
    stop: watch::Sender<Stop>,
    first: Stop,
) -> Result<JoinHandle<()>, DaemonError> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| DaemonError::Start(format!("cannot watch SIGTERM: {e}")))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| DaemonError::Start(format!("cannot watch SIGINT: {e}")))?;
    Ok(tokio::spawn(async move {
        let mut next = first.max(Stop::Graceful);
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            stop.send_if_modified(|s| {
                if next > *s {
                    *s = next;
                    true
                } else {
                    false
                }
            });
            if next == Stop::Abort {
                return;
            }
            next = Stop::Abort;
        }
    }))
}
