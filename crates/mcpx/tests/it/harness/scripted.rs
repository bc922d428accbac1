//! A scripted HTTP/1.1 server for the hostile-server tests: each request is answered by
//! the test's function, and every request is recorded (method, path, headers, body), so
//! a test can show what reached a server and what did not. One thread per connection;
//! the listener stops when the server is dropped. It serves on TCP, or on a unix
//! socket in the daemon's place ([`Scripted::start_unix`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A request as it arrived.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path and query.
    pub target: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Request {
    /// The path, without the query (or the origin, when the target has one: the
    /// daemon's client sends `http://localhost/v1/...`).
    pub fn path(&self) -> &str {
        let target = self.target.split('?').next().unwrap_or_default();
        match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        }
    }
}

/// An answer: status, headers, body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

/// An answer's body.
pub enum Body {
    /// All of it, with its length.
    Full(String),
    /// The start of a stream that stays open until the peer goes (SSE).
    Stream(String),
}

impl Answer {
    /// A JSON answer.
    pub fn json(status: u16, body: serde_json::Value) -> Answer {
        Answer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Full(body.to_string()),
        }
    }

    /// An empty answer with `status` and `headers`.
    pub fn status(status: u16, headers: &[(&str, &str)]) -> Answer {
        Answer {
            status,
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: Body::Full(String::new()),
        }
    }

    /// An SSE stream that sends `events` and stays open.
    pub fn sse(events: &str) -> Answer {
        Answer {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: Body::Stream(events.to_owned()),
        }
    }
}

type Handler = dyn Fn(&Request, &str) -> Answer + Send + Sync;

/// A running scripted server.
pub struct Scripted {
    /// `http://<ip>:<port>`.
    pub origin: String,
    seen: Arc<Mutex<Vec<Request>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    addr: std::net::SocketAddr,
}

impl Scripted {
    /// Serves on `ip` (any free port); `handler` gets each request and the server's
    /// own origin.
    pub fn start(ip: &str, handler: impl Fn(&Request, &str) -> Answer + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let origin = format!("http://{addr}");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        accept(move || listener.accept().map(|(c, _)| c), stop.clone(), seen.clone(), handler, origin.clone());
        Scripted { origin, seen, stop, addr }
    }

    /// Serves on the unix socket `path` (as the daemon would, on its socket); `handler`
    /// gets each request and `unix:<path>` as the origin. The listener thread ends
    /// with the test's process.
    pub fn start_unix(
        path: &std::path::Path,
        handler: impl Fn(&Request, &str) -> Answer + Send + Sync + 'static,
    ) -> Scripted {
        let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
        let origin = format!("unix:{}", path.display());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        accept(move || listener.accept().map(|(c, _)| c), stop.clone(), seen.clone(), handler, origin.clone());
        // No TCP listener to wake: `addr` is unused for a unix socket.
        Scripted { origin, seen, stop, addr: std::net::SocketAddr::from(([0, 0, 0, 0], 0)) }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if self.addr.port() != 0 {
            let _ = TcpStream::connect(self.addr);
        }
    }
}

/// A connection the scripted server answers on: TCP, or a unix socket.
trait Conn: std::io::Read + Write + Send + Sized + 'static {
    fn again(&self) -> std::io::Result<Self>;
    fn read_deadline(&self, after: Option<std::time::Duration>);
}

impl Conn for TcpStream {
    fn again(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn read_deadline(&self, after: Option<std::time::Duration>) {
        let _ = self.set_read_timeout(after);
    }
}

impl Conn for std::os::unix::net::UnixStream {
    fn again(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn read_deadline(&self, after: Option<std::time::Duration>) {
        let _ = self.set_read_timeout(after);
    }
}

/// Accepts connections with `next` on a thread of its own, until `stop` is set, and
/// answers each on a thread of its own (a read deadline of 30 s, none while a stream
/// is held open).
fn accept<C: Conn>(
    mut next: impl FnMut() -> std::io::Result<C> + Send + 'static,
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<Mutex<Vec<Request>>>,
    handler: Arc<Handler>,
    origin: String,
) {
    std::thread::spawn(move || {
        loop {
            let conn = next();
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let Ok(conn) = conn else { continue };
            let (seen, handler, origin) = (seen.clone(), handler.clone(), origin.clone());
            std::thread::spawn(move || {
                conn.read_deadline(Some(std::time::Duration::from_secs(30)));
                let Ok(reader) = conn.again() else { return };
                serve(BufReader::new(reader), conn, &seen, &*handler, &origin, |c| c.read_deadline(None));
            });
        }
    });
}

/// Answers the requests of one connection (`reader` reads it, `conn` writes it);
/// `untimed` takes the read deadline off before a stream is held open.
fn serve<R: BufRead, C: Write>(
    mut reader: R,
    mut conn: C,
    seen: &Mutex<Vec<Request>>,
    handler: &Handler,
    origin: &str,
    untimed: impl Fn(&C),
) {
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) =
            (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request = Request { method, target, headers, body: String::from_utf8_lossy(&body).into_owned() };
        seen.lock().unwrap().push(request.clone());
        let answer = handler(&request, origin);
        let mut head = format!("HTTP/1.1 {} X\r\n", answer.status);
        for (k, v) in &answer.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        match &answer.body {
            Body::Full(body) => {
                head.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
                if conn.write_all(head.as_bytes()).is_err() {
                    return;
                }
            }
            Body::Stream(events) => {
                head.push_str("cache-control: no-cache\r\n\r\n");
                head.push_str(events);
                let _ = conn.write_all(head.as_bytes());
                // The stream stays open until the peer goes.
                let mut rest = [0u8; 1];
                untimed(&conn);
                let _ = reader.read(&mut rest);
                return;
            }
        }
    }
}
