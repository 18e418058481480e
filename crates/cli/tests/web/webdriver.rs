//! A W3C WebDriver client for the tests: headless Chromium through
//! chromedriver, spoken to over plain HTTP/1.1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

/// An HTTP response: status, headers (lower-case names) and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends `raw` (a whole request) to 127.0.0.1:`port` and reads the response.
pub fn raw_request(port: u16, raw: &[u8]) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(raw).unwrap();
    // Read by the response's own framing: a server may keep the connection open.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        if let Some(head) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let h = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
            let len = h
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            match len {
                Some(n) if buf.len() >= head + 4 + n => break,
                None if h.contains("chunked") && buf.ends_with(b"0\r\n\r\n") => break,
                _ => {}
            }
        }
        let n = s.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    parse(&buf)
}

fn parse(buf: &[u8]) -> Response {
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(buf)));
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = buf[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let size =
                usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
            rest = &rest[eol + 2 + size + 2..];
        }
        body = out;
    }
    Response {
        status,
        headers,
        body,
    }
}

/// A GET of `path` from 127.0.0.1:`port` as a browser on that origin sends it.
pub fn get(port: u16, path: &str) -> Response {
    raw_request(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One headless Chromium session; closed (and chromedriver ended) on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile in `profile`.
    pub fn start(profile: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is needed (Debian package chromium-driver)");
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
        };
        let t = Instant::now();
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                let r = b.call("GET", "/status", None);
                if r["value"]["ready"] == true {
                    break;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,1600",
                    format!("--user-data-dir={}", profile.display()),
                ]
            }
        }}});
        let r = b.call("POST", "/session", Some(&caps));
        b.session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {r}"))
            .to_string();
        b
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        );
        let r = raw_request(self.port, req.as_bytes());
        serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", r.text()))
    }

    fn session_call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let v = self.call(method, &format!("/session/{}{path}", self.session), body);
        if let Some(err) = v["value"]["error"].as_str() {
            panic!("WebDriver {path}: {err}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.session_call("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub fn eval(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// Waits until `script` returns true (up to 30 s).
    pub fn wait_for(&self, script: &str) {
        let t = Instant::now();
        loop {
            if self.eval(script) == json!(true) {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "timed out waiting for: {script}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The element the CSS selector finds first.
    pub fn find(&self, css: &str) -> String {
        let v = self.session_call(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| panic!("no element {css}"))
            .to_string()
    }

    /// Clicks the element the CSS selector finds.
    pub fn click(&self, css: &str) {
        let id = self.find(css);
        self.session_call("POST", &format!("/element/{id}/click"), Some(&json!({})));
    }

    /// Clicks at (x, y) CSS pixels from the top left corner of the viewport.
    pub fn click_at(&self, x: i64, y: i64) {
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [
                {"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x, "y": y},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerUp", "button": 0}
            ]
        }]});
        self.session_call("POST", "/actions", Some(&actions));
        self.session_call("DELETE", "/actions", None);
    }

    /// Turns the mouse wheel by `dy` at (x, y) of the viewport.
    pub fn wheel_at(&self, x: i64, y: i64, dy: i64) {
        let actions = json!({"actions": [{
            "type": "wheel", "id": "wheel",
            "actions": [{"type": "scroll", "origin": "viewport", "x": x, "y": y,
                         "deltaX": 0, "deltaY": dy, "duration": 0}]
        }]});
        self.session_call("POST", "/actions", Some(&actions));
        self.session_call("DELETE", "/actions", None);
    }

    /// Drags with the left button from (x, y) by `dx` pixels.
    pub fn drag(&self, x: i64, y: i64, dx: i64) {
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [
                {"type": "pointerMove", "duration": 0, "origin": "viewport", "x": x, "y": y},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerMove", "duration": 100, "origin": "viewport", "x": x + dx / 2, "y": y},
                {"type": "pointerMove", "duration": 100, "origin": "viewport", "x": x + dx, "y": y},
                {"type": "pointerUp", "button": 0}
            ]
        }]});
        self.session_call("POST", "/actions", Some(&actions));
        self.session_call("DELETE", "/actions", None);
    }

    /// Saves a screenshot of the page as PNG.
    pub fn screenshot(&self, file: &Path) {
        let v = self.session_call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("screenshot data"))
            .expect("base64 screenshot");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.call("DELETE", &format!("/session/{}", self.session), None)
            }));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
