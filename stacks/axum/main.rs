//! uds-lab's routes for Rust: one axum router on tokio, served on TCP
//! (APP_TCP_ADDR) and on the Unix socket (APP_UNIX_SOCKET) at once. Same
//! routes, limits and JSON errors as the Go app (services/app/routes.go); the
//! download routes are left out. A bad setting stops the start naming it,
//! before anything listens.

use std::future::IntoFuture;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::serve::ListenerExt;
use axum::Router;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpSocket, UnixListener};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

const MAX_BYTES: i64 = 16 << 20; // /bytes/:n, as the Go app
const MAX_SLEEP_MS: i64 = 10000; // /sleep/:ms
const MAX_CPU_ITERATIONS: i64 = 1000000; // /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
const MAX_ECHOED: usize = 100; // characters of a bad value or path echoed in an error
const BACKLOG: u32 = 1024; // each listener's accept queue (the kernel caps it at somaxconn)
// SIGTERM drains requests in flight for this long (compose gives 20 s).
const SHUTDOWN: Duration = Duration::from_secs(15);

static DRAINING: AtomicBool = AtomicBool::new(false);
// One payload built at start: byte i is (i % 255) + 1, the Go app's pattern.
// A route's answer is a slice of it (no copy).
static PAYLOAD: OnceLock<Bytes> = OnceLock::new();

fn fail(msg: String) -> ! {
    eprintln!("axum stack: {msg}");
    std::process::exit(2)
}

// ---- settings ----

struct Settings {
    host: String,
    port: u16,
    socket: PathBuf,
    mode: u32,
    gid: Option<u32>,
}

fn setting(name: &str, default: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => default.to_string(),
    }
}

/// The lab's one rule for the socket's mode (contract/socket-modes.json): read
/// and write for the owner (the app) and the group (nginx's), nothing for
/// others. The mode, or why it is refused.
fn socket_mode(s: &str) -> Result<u32, &'static str> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err("must be an octal permission such as 0660");
    }
    let m = match u32::from_str_radix(digits, 8) {
        Ok(m) if m <= 0o777 => m,
        _ => return Err("must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)"),
    };
    if m & 0o007 != 0 {
        return Err("must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID");
    }
    if m & 0o060 != 0o060 {
        return Err("must give the group read and write (nginx's group connects through it)");
    }
    if m & 0o600 != 0o600 {
        return Err("must give the owner read and write (connecting needs write permission)");
    }
    Ok(m)
}

fn read_settings() -> Settings {
    let tcp = setting("APP_TCP_ADDR", ":8080");
    let (host, port) = match tcp.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => match p.parse::<u16>() {
            Ok(port) if port > 0 => (h.trim_start_matches('[').trim_end_matches(']').to_string(), port),
            _ => fail(format!("APP_TCP_ADDR=\"{tcp}\": must be host:port or :port")),
        },
        _ => fail(format!("APP_TCP_ADDR=\"{tcp}\": must be host:port or :port")),
    };
    let mode_s = setting("APP_SOCKET_MODE", "0660");
    let mode = socket_mode(&mode_s).unwrap_or_else(|why| fail(format!("APP_SOCKET_MODE=\"{mode_s}\": {why}")));
    let gid = match std::env::var("APP_SOCKET_GID") {
        Ok(g) if !g.is_empty() => Some(
            g.parse::<u32>()
                .unwrap_or_else(|_| fail(format!("APP_SOCKET_GID=\"{g}\": must be a numeric group id"))),
        ),
        _ => None,
    };
    Settings { host, port, socket: setting("APP_UNIX_SOCKET", "/sock/app.sock").into(), mode, gid }
}

// ---- the routes ----

fn truncated(s: &str) -> String {
    match s.char_indices().nth(MAX_ECHOED) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

fn as_json(status: StatusCode, body: serde_json::Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body.to_string()).into_response()
}

fn error(status: StatusCode, msg: String) -> Response {
    as_json(status, json!({ "error": msg }))
}

/// Parses a path parameter as Go's strconv.ParseInt would, in [lo, hi].
fn int_param(name: &str, raw: &str, lo: i64, hi: i64) -> Result<i64, Response> {
    let bad = |msg: String| error(StatusCode::BAD_REQUEST, msg);
    let shown = serde_json::Value::from(truncated(raw)).to_string();
    let digits = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("parameter {name}={shown} is not an integer")));
    }
    let v = raw
        .parse::<i64>()
        .map_err(|_| bad(format!("parameter {name}={shown} is out of range: must be between {lo} and {hi}")))?;
    if v < 0 && lo >= 0 {
        return Err(bad(format!("parameter {name}={v} must not be negative")));
    }
    if v < lo {
        return Err(bad(format!("parameter {name}={v} is below the minimum {lo}")));
    }
    if v > hi {
        return Err(bad(format!("parameter {name}={v} exceeds the maximum {hi}")));
    }
    Ok(v)
}

/// The path as the Go app routes it: percent-decoded.
fn decoded(uri: &Uri) -> String {
    let raw = uri.path().as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if raw[i] == b'%' && i + 2 < raw.len() {
            if let (Some(h), Some(l)) = (hex(raw[i + 1]), hex(raw[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// GET and HEAD only (hyper sends no body for HEAD); anything else a JSON 405.
fn not_allowed(method: &Method, uri: &Uri) -> Option<Response> {
    if method == Method::GET || method == Method::HEAD {
        return None;
    }
    Some(error(StatusCode::METHOD_NOT_ALLOWED, format!("method {method} not allowed for {}", truncated(&decoded(uri)))))
}

/// The route's one parameter, or a JSON 400 (axum's own rejection is text).
fn param(p: Result<Path<String>, PathRejection>) -> Result<String, Response> {
    p.map(|Path(v)| v).map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))
}

async fn ping(method: Method, uri: Uri) -> Response {
    not_allowed(&method, &uri).unwrap_or_else(|| as_json(StatusCode::OK, json!({ "message": "pong" })))
}

async fn healthz(method: Method, uri: Uri) -> Response {
    not_allowed(&method, &uri).unwrap_or_else(|| as_json(StatusCode::OK, json!({ "status": "ok" })))
}

async fn readyz(method: Method, uri: Uri) -> Response {
    if let Some(r) = not_allowed(&method, &uri) {
        return r;
    }
    if DRAINING.load(Ordering::Relaxed) {
        return as_json(StatusCode::SERVICE_UNAVAILABLE, json!({ "status": "shutting down" }));
    }
    as_json(StatusCode::OK, json!({ "status": "ready" }))
}

async fn get_bytes(method: Method, uri: Uri, p: Result<Path<String>, PathRejection>) -> Response {
    if let Some(r) = not_allowed(&method, &uri) {
        return r;
    }
    let n = match param(p).and_then(|raw| int_param("n", &raw, 0, MAX_BYTES)) {
        Ok(n) => n as usize,
        Err(r) => return r,
    };
    let body = PAYLOAD.get().expect("payload built at start").slice(..n);
    ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
}

async fn sleep(method: Method, uri: Uri, p: Result<Path<String>, PathRejection>) -> Response {
    if let Some(r) = not_allowed(&method, &uri) {
        return r;
    }
    let ms = match param(p).and_then(|raw| int_param("ms", &raw, 0, MAX_SLEEP_MS)) {
        Ok(ms) => ms,
        Err(r) => return r,
    };
    // A client that goes away drops this future, and the timer with it.
    tokio::time::sleep(Duration::from_millis(ms as u64)).await;
    as_json(StatusCode::OK, json!({ "slept_ms": ms }))
}

async fn cpu(method: Method, uri: Uri, p: Result<Path<String>, PathRejection>) -> Response {
    if let Some(r) = not_allowed(&method, &uri) {
        return r;
    }
    let n = match param(p).and_then(|raw| int_param("iterations", &raw, 1, MAX_CPU_ITERATIONS)) {
        Ok(n) => n,
        Err(r) => return r,
    };
    // Off the async workers (tokio's blocking pool), as CPU-bound work runs
    // in a tokio app: the workers keep answering other requests meanwhile.
    let digest = tokio::task::spawn_blocking(move || {
        let mut state = [0u8; 32];
        for _ in 0..n {
            state = Sha256::digest(state).into();
        }
        state.iter().map(|b| format!("{b:02x}")).collect::<String>()
    })
    .await
    .expect("the digest's task");
    as_json(StatusCode::OK, json!({ "digest": digest, "iterations": n }))
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error(StatusCode::NOT_FOUND, format!("no route for {method} {}", truncated(&decoded(&uri))))
}

fn router() -> Router {
    // any(): the handlers answer other methods with the Go app's JSON 405
    // (axum's own 405 has no body).
    Router::new()
        .route("/ping", any(ping))
        .route("/bytes/{n}", any(get_bytes))
        .route("/sleep/{ms}", any(sleep))
        .route("/cpu/{iterations}", any(cpu))
        .route("/healthz", any(healthz))
        .route("/readyz", any(readyz))
        .fallback(not_found)
}

// ---- the listeners ----

async fn bind_tcp(host: &str, port: u16) -> std::io::Result<TcpListener> {
    let ip = if host.is_empty() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else {
        match host.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => match tokio::net::lookup_host((host, port)).await?.next() {
                Some(a) => a.ip(),
                None => return Err(std::io::Error::other(format!("{host}: no address"))),
            },
        }
    };
    let addr = SocketAddr::new(ip, port);
    let sock = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(BACKLOG)
}

/// A socket file left by a crash is removed; one a live process answers on, or
/// a file that is no socket, stops the start (as the Go app).
fn remove_stale(path: &FsPath) {
    let Ok(st) = std::fs::symlink_metadata(path) else { return };
    if !st.file_type().is_socket() {
        fail(format!("APP_UNIX_SOCKET=\"{}\": exists and is not a socket", path.display()));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        fail(format!("APP_UNIX_SOCKET=\"{}\": another process is listening on it", path.display()));
    }
    if let Err(e) = std::fs::remove_file(path) {
        fail(format!("APP_UNIX_SOCKET=\"{}\": cannot remove the stale socket: {e}", path.display()));
    }
}

/// The socket, born with the mode (bind() applies the umask: no moment with
/// another), its group the process's (in compose APP_GID, nginx workers') or
/// APP_SOCKET_GID. Returns it and its inode, so that the stop removes only
/// the file this process made.
fn bind_unix(s: &Settings) -> std::io::Result<(UnixListener, u64)> {
    remove_stale(&s.socket);
    // SAFETY: umask only swaps the process's mask; nothing else creates files yet.
    let old = unsafe { libc::umask((0o777 & !s.mode) as libc::mode_t) };
    let bound = std::os::unix::net::UnixListener::bind(&s.socket);
    unsafe { libc::umask(old) };
    let std_listener = bound?;
    if let Some(gid) = s.gid {
        std::os::unix::fs::chown(&s.socket, None, Some(gid))?;
    }
    let ino = std::fs::metadata(&s.socket)?.ino();
    // std's bind() listens with a backlog of its own: listen() again sets the lab's.
    // SAFETY: a valid listening socket's descriptor.
    if unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&std_listener), BACKLOG as libc::c_int) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    std_listener.set_nonblocking(true)?;
    Ok((UnixListener::from_std(std_listener)?, ino))
}

async fn run(s: Settings) -> i32 {
    let mut payload = vec![0u8; MAX_BYTES as usize];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = (i % 255) as u8 + 1;
    }
    PAYLOAD.set(Bytes::from(payload)).expect("set once");

    let tcp = bind_tcp(&s.host, s.port)
        .await
        .unwrap_or_else(|e| fail(format!("APP_TCP_ADDR: cannot listen on {}:{}: {e}", s.host, s.port)));
    let (unix, ino) =
        bind_unix(&s).unwrap_or_else(|e| fail(format!("APP_UNIX_SOCKET=\"{}\": {e}", s.socket.display())));
    eprintln!(
        "axum stack: listening on {}:{} and {} (mode {:o})",
        if s.host.is_empty() { "*" } else { &s.host },
        s.port,
        s.socket.display(),
        s.mode
    );

    // SIGTERM (Docker's stop) or SIGINT: both servers stop accepting, answer
    // the requests in flight, close idle kept connections, and return.
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let app = router();
    // TCP_NODELAY on every TCP connection (tokio leaves Nagle's algorithm on):
    // an answer written in parts would otherwise wait for the client's delayed ACK.
    let tcp = tcp.tap_io(|c| {
        let _ = c.set_nodelay(true);
    });
    let tcp_server =
        tokio::spawn(axum::serve(tcp, app.clone()).with_graceful_shutdown(stopped(stop_rx.clone())).into_future());
    let unix_server = tokio::spawn(axum::serve(unix, app).with_graceful_shutdown(stopped(stop_rx)).into_future());

    let sig = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    eprintln!("axum stack: {sig}: draining requests in flight");
    DRAINING.store(true, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    let code = match tokio::time::timeout(SHUTDOWN, async { (tcp_server.await, unix_server.await) }).await {
        Ok((Ok(Ok(())), Ok(Ok(())))) => 0,
        Ok(_) => 1,
        Err(_) => {
            eprintln!("axum stack: requests still in flight after {} s: exiting", SHUTDOWN.as_secs());
            1
        }
    };
    // The socket this process made goes with it (tokio leaves the file).
    if std::fs::metadata(&s.socket).map(|m| m.ino() == ino).unwrap_or(false) {
        let _ = std::fs::remove_file(&s.socket);
    }
    code
}

fn main() {
    let settings = read_settings();
    // TOKIO_WORKER_THREADS sets the workers (default: one per core).
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let code = runtime.block_on(run(settings));
    // Tasks of connections closed late would hold a runtime's drop: none is awaited.
    runtime.shutdown_timeout(Duration::from_millis(100));
    std::process::exit(code);
}
