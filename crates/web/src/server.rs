//! A small HTTP server on 127.0.0.1 for [`View`]: its page, its two assets
//! and its JSON routes, nothing else. No path is ever mapped to a file: a
//! request names one of the fixed routes or gets 404; `/api/source` serves
//! only files the trace's callsites name.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::View;

/// The served page's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// A bound listener, ready to serve a view.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    view: Arc<View>,
}

impl Server {
    /// Binds 127.0.0.1:`port` (0: a free port).
    pub fn bind(view: Arc<View>, port: u16) -> std::io::Result<Server> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        Ok(Server { listener, view })
    }

    /// The address it listens on.
    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends, a thread per connection.
    pub fn run(self) -> std::io::Result<()> {
        let port = self.addr()?.port();
        for conn in self.listener.incoming() {
            let Ok(conn) = conn else { continue };
            let view = Arc::clone(&self.view);
            std::thread::spawn(move || {
                let _ = handle(&view, conn, port);
            });
        }
        Ok(())
    }
}

struct Response {
    status: &'static str,
    kind: &'static str,
    body: Vec<u8>,
}

fn text(status: &'static str, msg: &str) -> Response {
    Response {
        status,
        kind: "text/plain; charset=utf-8",
        body: msg.as_bytes().to_vec(),
    }
}

fn json_response(body: String) -> Response {
    Response {
        status: "200 OK",
        kind: "application/json",
        body: body.into_bytes(),
    }
}

fn handle(view: &View, conn: TcpStream, port: u16) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?).take(MAX_HEAD as u64);
    let mut head = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 || line == b"\r\n" || line == b"\n" {
            break;
        }
        head.extend_from_slice(&line);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.lines();
    let request = lines.next().unwrap_or("");
    let mut parts = request.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let host = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.trim().to_string());
    let resp = if method != "GET" && method != "HEAD" {
        text("405 Method Not Allowed", "only GET\n")
    } else if !host_allowed(host.as_deref(), port) {
        // A page of another site reaching this port through DNS rebinding
        // names another host.
        text("403 Forbidden", "wrong Host\n")
    } else {
        route(view, target)
    };
    let mut out = conn;
    write!(
        out,
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Content-Security-Policy: {CSP}\r\nX-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        resp.status,
        resp.kind,
        resp.body.len()
    )?;
    if method != "HEAD" {
        out.write_all(&resp.body)?;
    }
    out.flush()
}

fn host_allowed(host: Option<&str>, port: u16) -> bool {
    let Some(h) = host else { return false };
    [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "127.0.0.1".to_string(),
        "localhost".to_string(),
    ]
    .iter()
    .any(|ok| h.eq_ignore_ascii_case(ok))
}

/// The value of `key` in a query string, percent-decoded.
fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn num<T: std::str::FromStr>(query: &str, key: &str) -> Option<T> {
    param(query, key)?.parse().ok()
}

fn route(view: &View, target: &str) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/" | "/index.html" => Response {
            status: "200 OK",
            kind: "text/html; charset=utf-8",
            body: view.served_page().into_bytes(),
        },
        "/app.js" => Response {
            status: "200 OK",
            kind: "text/javascript; charset=utf-8",
            body: crate::APP_JS.as_bytes().to_vec(),
        },
        "/app.css" => Response {
            status: "200 OK",
            kind: "text/css; charset=utf-8",
            body: crate::APP_CSS.as_bytes().to_vec(),
        },
        "/api/core" => json_response(view.core_json()),
        "/api/summary" => match view.summary_json() {
            Some(s) => json_response(s),
            None if view.failure().is_some() => Response {
                status: "500 Internal Server Error",
                kind: "application/json",
                body: json!({"error": view.failure()}).to_string().into_bytes(),
            },
            None => Response {
                status: "503 Service Unavailable",
                kind: "application/json",
                body: b"{\"loading\":true}".to_vec(),
            },
        },
        "/api/timeline" => {
            let (a, b) = view.time_span();
            let t0 = num(query, "t0").unwrap_or(a);
            let t1 = num(query, "t1").unwrap_or(b);
            let width = num(query, "width").unwrap_or(1000usize);
            if t1 <= t0 {
                return text("400 Bad Request", "t1 must be after t0\n");
            }
            json_response(view.timeline_json(t0, t1, width))
        }
        "/api/event" => {
            let (Some(row), Some(event)) = (num(query, "row"), num(query, "event")) else {
                return text("400 Bad Request", "row and event are numbers\n");
            };
            match view.event_json(row, event) {
                Ok(v) => json_response(v.to_string()),
                Err(crate::Details::NotYet) => Response {
                    status: "503 Service Unavailable",
                    kind: "application/json",
                    body: b"{\"loading\":true}".to_vec(),
                },
                Err(crate::Details::Refused(why)) => Response {
                    status: "503 Service Unavailable",
                    kind: "application/json",
                    body: json!({ "error": why }).to_string().into_bytes(),
                },
                Err(crate::Details::NoSuch) => text("404 Not Found", "no such event\n"),
            }
        }
        "/api/source" => {
            let Some(file) = param(query, "file") else {
                return text("400 Bad Request", "file is missing\n");
            };
            match view.source(&file) {
                Some(src) => json_response(json!({"file": file, "text": src}).to_string()),
                None => text(
                    "404 Not Found",
                    "not a source file of this trace (or not readable)\n",
                ),
            }
        }
        _ => text("404 Not Found", "not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb+c"), "a/b c");
        assert_eq!(percent_decode("%2e%2E%2f"), "../");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn hosts() {
        assert!(host_allowed(Some("127.0.0.1:8080"), 8080));
        assert!(host_allowed(Some("localhost:8080"), 8080));
        assert!(!host_allowed(Some("evil.example:8080"), 8080));
        assert!(!host_allowed(None, 8080));
    }
}
