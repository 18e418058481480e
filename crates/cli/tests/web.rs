//! The browser view, tested in a real browser: `gaspard view` and the file
//! of `gaspard report --html` for traces of real programs, opened in
//! headless Chromium through chromedriver, their numbers compared with
//! `gaspard report --json`; the server's routes probed with raw requests;
//! markup in what a program names shown as text. Screenshots go to
//! target/web-screenshots/.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

mod common;
#[path = "web/webdriver.rs"]
mod webdriver;

use webdriver::{get, raw_request, Browser};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn screenshot(b: &Browser, name: &str) {
    b.screenshot(&workspace().join(format!("target/web-screenshots/{name}.png")));
}

/// `gaspard view TRACE` on a free port, ended on drop.
struct Viewer {
    child: Child,
    port: u16,
}

impl Viewer {
    fn start(trace: &Path) -> Viewer {
        Viewer::start_with(trace, &[])
    }
    fn start_with(trace: &Path, vars: &[(&str, &str)]) -> Viewer {
        Viewer::start_logged(trace, vars, None)
    }
    /// With its standard error written to `stderr`, if given.
    fn start_logged(trace: &Path, vars: &[(&str, &str)], stderr: Option<&Path>) -> Viewer {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gaspard"));
        cmd.envs(vars.iter().copied())
            .arg("view")
            .arg(trace)
            .stdout(Stdio::piped());
        if let Some(p) = stderr {
            cmd.stderr(std::fs::File::create(p).unwrap());
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("gaspard view: http://127.0.0.1:")
            .unwrap_or_else(|| panic!("gaspard view printed {line:?}"));
        let port = url.trim_end_matches('/').parse().unwrap();
        Viewer { child, port }
    }
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// examples/gasp/heat.c (four threads, one with more work) built against
/// libgaspard and run; its trace directory.
fn heat_trace(dir: &Path) -> PathBuf {
    let exe = common::compile_heat(dir);
    common::gaspard_run(dir, &[exe.to_str().unwrap(), "60"]).0
}

fn report_html(trace: &Path, html: &Path) -> Value {
    report_html_with(trace, html, &[], &[])
}

/// [`report_html`] with more arguments and environment variables.
fn report_html_with(trace: &Path, html: &Path, args: &[&str], vars: &[(&str, &str)]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("report")
        .arg(trace)
        .arg("--json")
        .arg("--html")
        .arg(html)
        .args(args)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.canonicalize().unwrap().display())
}

const READY: &str = "return document.body.dataset.ready === '1' && \
    document.getElementById('timeline').dataset.loaded !== undefined;";

/// What every view shows, compared with the report: findings, gauges, profiles.
fn check_common(b: &Browser, r: &Value) {
    let findings = b.eval("return document.querySelectorAll('#findings li.finding').length;");
    assert_eq!(findings, r["findings"].as_array().unwrap().len());
    let msgs = b.eval(
        "return [...document.querySelectorAll('#findings li.finding .msg')].map(e => e.textContent);",
    );
    for (m, f) in msgs
        .as_array()
        .unwrap()
        .iter()
        .zip(r["findings"].as_array().unwrap())
    {
        assert_eq!(m, &f["message"]);
    }
    let gauges = b.eval("return document.querySelectorAll('#gauges tr[data-row]').length;");
    assert_eq!(gauges, r["breakdown"].as_array().unwrap().len());
    // Profile per event: each name's count.
    let rows = b.eval(
        "return [...document.querySelectorAll('#profile-events tr')].slice(1).map(tr => \
         [...tr.children].map(td => td.dataset.value));",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), r["by_event"].as_array().unwrap().len());
    for e in r["by_event"].as_array().unwrap() {
        let row = rows
            .iter()
            .find(|row| row[0] == e["name"])
            .unwrap_or_else(|| panic!("no row for {}", e["name"]));
        assert_eq!(row[1].as_str().unwrap(), e["count"].to_string());
        assert_eq!(row[2].as_str().unwrap(), e["total_ns"].to_string());
    }
    // Load balance, waits and locks: a row per group, region, wait and
    // lock of the report, or a line saying there is none.
    let rows_of = |id: &str| {
        let v = b.eval(&format!(
            "const t = document.getElementById('{id}'); \
             return t.tagName === 'TABLE' ? [...t.querySelectorAll('tr')].slice(1).map(tr => \
             [...tr.children].map(td => td.dataset.value)) : t.className;"
        ));
        v.as_array().cloned().unwrap_or_else(|| {
            assert_eq!(v, "none", "#{id}");
            Vec::new()
        })
    };
    let balance = &r["balance"];
    let groups = b.eval("return document.querySelectorAll('#barrier-groups p.group').length;");
    assert_eq!(groups, balance["barriers"].as_array().unwrap().len());
    let regions = rows_of("regions");
    let expected = balance["regions"].as_array().unwrap();
    assert_eq!(regions.len(), expected.len());
    for x in expected {
        assert!(
            regions.iter().any(|row| row[0] == x["name"]
                && row[5] == x["slowest"]
                && row[4].as_str() == Some(&x["max_ns"].to_string())),
            "{x} not in {regions:?}"
        );
    }
    let waits = r["waits"].as_array().unwrap();
    let waited = waits.iter().filter(|w| w["wait_ns"] != 0).count();
    assert_eq!(rows_of("waits").len(), waited);
    assert_eq!(rows_of("locks").len(), r["locks"].as_array().unwrap().len());
}

/// Sorting a profile table by a column, by clicking its header.
fn check_sorting(b: &Browser) {
    b.click("#profile-events tr th:nth-child(2)");
    let counts = b.eval(
        "return [...document.querySelectorAll('#profile-events tr')].slice(1).map(tr => \
         Number(tr.children[1].dataset.value));",
    );
    let counts: Vec<u64> = counts
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    b.click("#profile-events tr th:nth-child(2)");
    let first = b.eval(
        "return Number(document.querySelector('#profile-events tr:nth-child(2)').children[1].dataset.value);",
    );
    assert_eq!(first.as_u64().unwrap(), *counts.iter().min().unwrap());
}

/// Clicking the first finding's "show in timeline" zooms to its place and
/// selects its event.
fn check_finding_click(b: &Browser, r: &Value, served: bool) {
    let place = b.eval("return window.gaspard.summary.finding_places[0];");
    assert!(place["event"].is_u64(), "the finding has no place: {place}");
    let span = r["findings"][0]["location"].clone();
    b.click("#findings li.finding button.place");
    b.wait_for(&format!(
        "const c = document.getElementById('timeline'); \
         return Number(c.dataset.t0) <= {t0} && Number(c.dataset.t1) >= {t1} && \
         document.getElementById('details').dataset.event === '{ev}' && \
         document.getElementById('details').dataset.row === '{row}';",
        t0 = place["t0"],
        t1 = place["t1"],
        ev = place["event"],
        row = place["row"],
    ));
    let shown = b.eval(
        "const c = document.getElementById('timeline'); \
         const s = window.gaspard.summary.span; \
         return [Number(c.dataset.t1) - Number(c.dataset.t0), s[1] - s[0]];",
    );
    // The place with half its length on each side (at least 1 us), within the run.
    let d = place["t1"].as_f64().unwrap() - place["t0"].as_f64().unwrap();
    let want = (d + 2.0 * (d * 0.5).max(1000.0)).min(shown[1].as_f64().unwrap());
    assert!(
        (shown[0].as_f64().unwrap() - want).abs() <= 2.0,
        "{shown} vs {want}"
    );
    let where_ = b.eval("return document.querySelector('#details .d-where').textContent;");
    let loc = format!(
        "{}:{}",
        span["file"].as_str().unwrap(),
        span["line"].as_u64().unwrap()
    );
    assert!(
        where_.as_str().unwrap().ends_with(&loc),
        "{where_} vs {loc}"
    );
    // The event's source line, from the program's own file (from the
    // server), or embedded in the file.
    let css = if served {
        "#details .d-source .hl"
    } else {
        "#details .d-line"
    };
    b.wait_for(&format!("return document.querySelector('{css}') !== null;"));
    let hl = b.eval(&format!(
        "return document.querySelector('{css}').textContent;"
    ));
    let src = std::fs::read_to_string(workspace().join("examples/gasp/heat.c")).unwrap();
    let line = src
        .lines()
        .nth(span["line"].as_u64().unwrap() as usize - 1)
        .unwrap();
    assert!(hl.as_str().unwrap().contains(line.trim()), "{hl} vs {line}");
    // The finding's source button shows that line too.
    b.click("#findings li.finding button.src");
    b.wait_for("return document.querySelector('#source-view .hl') !== null;");
    let hl = b.eval("return document.querySelector('#source-view .hl').textContent;");
    assert!(hl.as_str().unwrap().contains(line.trim()), "{hl} vs {line}");
}

/// Clicking on the timeline canvas where a span is drawn shows that span.
fn check_timeline_click(b: &Browser) {
    // The whole run: a window left zoomed by an earlier check can lie inside
    // one long span of a row, leaving nothing whole to click there.
    b.click("#zoom-reset");
    let (t0, t1) = shown(b);
    b.wait_for(&format!(
        "return document.getElementById('timeline').dataset.loaded === '{t0}-{t1}';"
    ));
    b.eval("document.getElementById('timeline').scrollIntoView(); return 0;");
    let target = b.eval(
        "const st = window.gaspard, c = document.getElementById('timeline'); \
         const r = c.getBoundingClientRect(); \
         const row = st.data.threads.length - 1, th = st.data.threads[row]; \
         let best = null; \
         for (const sp of th.spans) if (sp[3] === 0 && sp[0] >= st.t0 && sp[1] <= st.t1 && \
             (!best || sp[1] - sp[0] > best[1] - best[0])) best = sp; \
         if (!best) throw new Error('no whole span on the last row in ' + st.t0 + '..' + st.t1 + \
             ' (' + th.spans.length + ' spans)'); \
         const w = c.width - 190; \
         const x = r.left + 190 + ((best[0] + best[1]) / 2 - st.t0) / (st.t1 - st.t0) * w; \
         return [Math.round(x), Math.round(r.top + row * 46 + 7), row, best[6]];",
    );
    let t = target.as_array().unwrap();
    b.click_at(t[0].as_i64().unwrap(), t[1].as_i64().unwrap());
    b.wait_for(&format!(
        "const d = document.getElementById('details'); \
         return d.dataset.row === '{}' && d.dataset.event === '{}';",
        t[2], t[3]
    ));
}

/// The shown range of the timeline, as (t0, t1).
fn shown(b: &Browser) -> (f64, f64) {
    let v = b.eval(
        "const c = document.getElementById('timeline'); \
         return [Number(c.dataset.t0), Number(c.dataset.t1)];",
    );
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
}

/// The mouse wheel zooms in around the pointer, dragging pans, and the
/// view's data follows.
fn check_zoom_and_pan(b: &Browser) {
    b.click("#zoom-reset");
    b.eval("document.getElementById('timeline').scrollIntoView(); return 0;");
    let (t0, t1) = shown(b);
    let geo = b.eval(
        "const c = document.getElementById('timeline'), r = c.getBoundingClientRect(); \
         return [Math.round(r.left + 190 + (c.width - 190) / 2), Math.round(r.top + 20), c.width - 190];",
    );
    let (x, y, w) = (
        geo[0].as_i64().unwrap(),
        geo[1].as_i64().unwrap(),
        geo[2].as_f64().unwrap(),
    );
    let mid = |a: f64, b: f64| (a + b) / 2.0;
    for _ in 0..3 {
        b.wheel_at(x, y, -100);
    }
    let (z0, z1) = shown(b);
    // Three steps of 0.8 around the middle.
    let want = (t1 - t0) * 0.8f64.powi(3);
    assert!(
        ((z1 - z0) - want).abs() < want * 0.02,
        "{z0}..{z1}, want {want}"
    );
    assert!((mid(z0, z1) - mid(t0, t1)).abs() < (t1 - t0) * 0.01);
    // Drag right by 100 px: earlier times come into view.
    b.drag(x, y, 100);
    let (p0, p1) = shown(b);
    let dt = 100.0 / w * (z1 - z0);
    assert!((z0 - p0 - dt).abs() < dt * 0.1, "{p0} vs {z0} - {dt}");
    assert!(((p1 - p0) - (z1 - z0)).abs() < 2.0);
    b.wait_for(&format!(
        "return document.getElementById('timeline').dataset.loaded === '{}-{}';",
        p0, p1
    ));
    let spans_in_view = b.eval(
        "const st = window.gaspard; return st.data.t0 === st.t0 && st.data.t1 === st.t1 && \
         st.data.threads.every(t => t.spans.every(s => s[1] >= st.t0 && s[0] < st.t1));",
    );
    assert_eq!(spans_in_view, true);
}

#[test]
fn heat_in_the_browser_served_and_as_a_file() {
    let dir = common::tmpdir("web-heat");
    let trace = heat_trace(&dir);
    let html = dir.join("heat.html");
    let r = report_html(&trace, &html);
    assert!(!r["findings"].as_array().unwrap().is_empty());
    let size = std::fs::metadata(&html).unwrap().len();
    assert!(size < 2 << 20, "the HTML file has {size} bytes");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("http://") && !page.contains("https://"));
    // Its scripts run under a Content-Security-Policy with a nonce.
    assert!(page.contains(r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'nonce-"#));
    assert_eq!(page.matches("<script nonce=\"").count(), 1);

    let b = Browser::start(&dir.join("chromium"));
    let v = Viewer::start(&trace);
    b.goto(&v.url());
    b.wait_for(READY);
    check_common(&b, &r);
    check_zoom_and_pan(&b);
    check_timeline_click(&b);
    check_finding_click(&b, &r, true);
    screenshot(&b, "heat-served");
    check_sorting(&b);

    b.goto(&file_url(&html));
    b.wait_for(READY);
    check_common(&b, &r);
    check_zoom_and_pan(&b);
    check_timeline_click(&b);
    check_finding_click(&b, &r, false);
    screenshot(&b, "heat-file");
    // Kept when the test fails, for a look.
    drop((b, v));
    let _ = std::fs::remove_dir_all(&dir);
}

/// examples/caf/jacobi.f90 built by `caf` and run on 2 images; its trace
/// directory. The whole trace's reader recognises coarray operations in
/// its MPI calls, which the quick scan does not.
fn caf_trace(dir: &Path) -> PathBuf {
    let src = std::fs::read_to_string(common::workspace().join("examples/caf/jacobi.f90")).unwrap();
    let exe = common::compile_with(dir, "caf", "jacobi.f90", &src);
    let exe = exe.to_str().unwrap();
    common::gaspard_run(dir, &["cafrun", "-np", "2", "--oversubscribe", exe]).0
}

/// A few spans of every row of a timeline answer: (row, event).
fn some_spans(tl: &Value) -> Vec<(usize, u64)> {
    tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(row, th)| {
            let spans = th["spans"].as_array().unwrap();
            [0, spans.len() / 2, spans.len() - 1].map(|i| (row, spans[i][6].as_u64().unwrap()))
        })
        .collect()
}

/// The details of events, from the view.
fn details(port: u16, asked: &[(usize, u64)]) -> Vec<Value> {
    asked
        .iter()
        .map(|(row, event)| get_json(port, &format!("/api/event?row={row}&event={event}")))
        .collect()
}

/// Each span of a timeline answer, resolved, by (row, start, end, name,
/// callsite): its event number.
fn spans_by_place(core: &Value, tl: &Value) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for (row, th) in tl["threads"].as_array().unwrap().iter().enumerate() {
        for sp in th["spans"].as_array().unwrap() {
            let name = &core["names"][sp[4].as_u64().unwrap() as usize];
            let site = &core["sites"][sp[5].as_u64().unwrap() as usize];
            m.insert(
                format!("{row} {} {} {name} {site}", sp[0], sp[1]),
                sp[6].as_u64().unwrap(),
            );
        }
    }
    m
}

/// `gaspard view` of a trace whose whole reading adds to the quick scan
/// (Coarray Fortran: coarray operations recognised in MPI calls) shows the
/// quick scan's timeline at once, then the whole trace's with the report:
/// the same spans and the coarray operations; the details of an event are
/// read on demand from its process alone meanwhile, and are the whole
/// trace's; the page follows the change by itself.
#[test]
fn quick_timeline_first_then_the_whole_trace() {
    let dir = common::tmpdir("web-quick");
    let trace = caf_trace(&dir);
    let v = Viewer::start_with(&trace, &[("GASPARD_VIEW_DELAY_MS", "12000")]);
    let core_q: Value = serde_json::from_str(&get(v.port, "/api/core").text()).unwrap();
    assert_eq!(core_q["stage"], "quick");
    let span = core_q["span"].clone();
    let window = format!(
        "/api/timeline?t0={}&t1={}&width=900",
        span[0],
        span[1].as_u64().unwrap()
    );
    let tl_q: Value = serde_json::from_str(&get(v.port, &window).text()).unwrap();
    assert_eq!(tl_q["stage"], "quick");
    assert_eq!(get(v.port, "/api/summary").status, 503);
    let places_q = spans_by_place(&core_q, &tl_q);
    assert!(places_q.len() > 100, "{} spans", places_q.len());
    // Every fifth span, its details read on demand.
    let asked: Vec<(&String, u64)> = places_q.iter().step_by(5).map(|(k, &e)| (k, e)).collect();
    let row = |k: &str| k.split(' ').next().unwrap().parse::<usize>().unwrap();
    let details_q: Vec<Value> = asked
        .iter()
        .map(|(k, e)| get_json(v.port, &format!("/api/event?row={}&event={e}", row(k))))
        .collect();
    assert_eq!(
        get(v.port, "/api/event?row=0&event=99999999").status,
        404,
        "no such event"
    );

    let b = Browser::start(&dir.join("chromium"));
    b.goto(&v.url());
    b.wait_for(
        "const st = window.gaspard; return st.summary && st.summary.stage === 'quick' && \
         st.data && st.data.threads.length === 2 && \
         document.getElementById('timeline').dataset.loaded !== undefined;",
    );
    screenshot(&b, "quick-stage");
    check_timeline_click(&b);
    b.wait_for(
        "return document.querySelector('#details .d-args') !== null && \
                document.querySelector('#details .d-args').textContent.includes('kind');",
    );
    assert_eq!(
        b.eval("return window.gaspard.summary.stage;"),
        "quick",
        "details shown at the quick stage"
    );
    b.wait_for(READY);
    b.wait_for(
        "const st = window.gaspard; return st.summary.stage === 'full' && st.data.stage === 'full';",
    );
    check_timeline_click(&b);
    b.wait_for(
        "return document.querySelector('#details .d-args') !== null && \
                document.querySelector('#details .d-args').textContent.includes('kind');",
    );

    let core_f: Value = serde_json::from_str(&get(v.port, "/api/core").text()).unwrap();
    assert_eq!(core_f["stage"], "full");
    assert_eq!(core_f["span"], span, "the same time span");
    assert_eq!(core_f["rows"], core_q["rows"]);
    let tl_f: Value = serde_json::from_str(&get(v.port, &window).text()).unwrap();
    assert_eq!(tl_f["stage"], "full");
    let places_f = spans_by_place(&core_f, &tl_f);
    for k in places_q.keys() {
        assert!(
            places_f.contains_key(k),
            "the whole trace has the quick scan's span {k}"
        );
    }
    let added: Vec<&String> = places_f
        .keys()
        .filter(|k| !places_q.contains_key(*k))
        .collect();
    assert!(
        !added.is_empty() && added.iter().all(|k| k.contains("GASP_CAF_")),
        "coarray operations added: {added:?}"
    );
    // The details read on demand are the whole trace's (numbered there with
    // the coarray operations among them).
    for ((k, _), q) in asked.iter().zip(&details_q) {
        let e = places_f[*k];
        let f = get_json(v.port, &format!("/api/event?row={}&event={e}", row(k)));
        assert_eq!(&f, q, "{k}");
    }
    drop((b, v));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace whose quick scan gives the spans the whole trace would (GASP
/// heat) is not read whole: the view moves from the quick scan's timeline
/// to the full stage with the same timeline, its report computed one
/// process at a time (`gaspard report`'s), and an event's details read
/// from its process alone: those `gaspard dump` gives. The same for the
/// HTML file of a big trace.
#[test]
fn a_trace_the_quick_scan_gives_whole_is_not_read_whole() {
    let dir = common::tmpdir("web-whole");
    let trace = heat_trace(&dir);
    let r = common::report(&trace);
    let dump = common::events(&common::dump(&trace));
    let v = Viewer::start(&trace);
    wait_until("the summary", || get(v.port, "/api/summary").status == 200);
    let s = get_json(v.port, "/api/summary");
    assert_eq!(s["stage"], "full");
    assert!(s.get("note").is_none(), "{}", s["note"]);
    for key in ["findings", "by_event", "breakdown", "balance", "problems"] {
        assert_eq!(s[key], r[key], "{key}");
    }
    let tl = get_json(v.port, "/api/timeline?width=600");
    assert_eq!(tl["stage"], "full");
    let asked = some_spans(&tl);
    for ((row, event), d) in asked.iter().zip(details(v.port, &asked)) {
        let want = &dump[*row][*event as usize];
        for (k, x) in want.as_object().unwrap() {
            if k != "file" {
                assert_eq!(&d[k], x, "row {row}, event {event}: {k}");
            }
        }
        assert!(
            d["file"]
                .as_str()
                .unwrap()
                .ends_with("examples/gasp/heat.c"),
            "{d}"
        );
    }
    // Even with little memory: nothing to say, the report is the same.
    // (Opened from the view index the first view wrote, then full.)
    let small = Viewer::start_with(&trace, &[("GASPARD_VIEW_MEMORY", "1000")]);
    wait_until("the full stage", || {
        get(small.port, "/api/summary").status == 200
            && get_json(small.port, "/api/core")["stage"] == "full"
    });
    let s = get_json(small.port, "/api/summary");
    assert_eq!(s["stage"], "full");
    assert!(s.get("note").is_none(), "{}", s["note"]);
    assert_eq!(s["findings"], r["findings"]);
    drop((v, small));

    // `gaspard report --html` of a big trace (the threshold set low) whose
    // quick scan is its whole timeline: the same report, and a page
    // showing it, without the whole trace read.
    let html = dir.join("big.html");
    let rb = report_html_with(&trace, &html, &[], &[("GASPARD_VIEW_OVERVIEW_BYTES", "1")]);
    assert_eq!(rb, r);
    let b = Browser::start(&dir.join("chromium"));
    b.goto(&file_url(&html));
    b.wait_for(READY);
    check_common(&b, &r);
    check_zoom_and_pan(&b);
    check_timeline_click(&b);
    screenshot(&b, "big-file");
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

fn get_json(port: u16, path: &str) -> Value {
    let r = get(port, path);
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    serde_json::from_str(&r.text()).unwrap()
}

/// Waits (up to ten minutes, a hang otherwise) until `ready` is true.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    for _ in 0..6000 {
        if ready() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("still waiting for {what}");
}

/// Every thread's name and columns in a timeline answer.
fn columns(tl: &Value) -> Vec<Value> {
    tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|th| serde_json::json!([th["name"], th["cls"], th["busy"]]))
        .collect()
}

/// A summary without what depends on the stage shown.
fn without_stage(mut summary: Value) -> Value {
    summary.as_object_mut().unwrap().remove("stage");
    summary
}

/// The bytes of `path` once they differ from `old` (the view index has
/// been written anew).
fn rewritten(path: &Path, old: &[u8]) -> Vec<u8> {
    let mut now = Vec::new();
    wait_until(&format!("{} to be written", path.display()), || {
        now = std::fs::read(path).unwrap_or_default();
        now.starts_with(b"GVIX") && now != old
    });
    now
}

/// The view index: written by the first `gaspard view` of a trace (in the
/// trace directory), with the report once computed; the next one answers
/// from it at once (stage "index"): the same columns as the whole trace's
/// timeline and the same summary, the page showing both and then following
/// the quick scan and the whole trace by itself. Touching or lengthening a
/// stream file makes it out of date, a damaged one is said and rebuilt, and
/// a trace directory that cannot be written has its index in the cache
/// directory.
#[test]
fn view_index_opens_a_trace_again_at_once() {
    let dir = common::tmpdir("web-index");
    let trace = heat_trace(&dir);
    let cache = dir.join("cache");
    let cache_var = cache.to_str().unwrap().to_string();
    let held = [
        ("GASPARD_VIEW_DELAY_MS", "600000"),
        ("XDG_CACHE_HOME", cache_var.as_str()),
    ];
    let index = trace.join("view.gvi");
    let log = dir.join("stderr");
    let logged = || std::fs::read_to_string(&log).unwrap();

    // First open: the quick scan, then the whole trace and its report.
    let v = Viewer::start_with(&trace, &[("XDG_CACHE_HOME", cache_var.as_str())]);
    assert_eq!(get_json(v.port, "/api/core")["stage"], "quick");
    wait_until("the summary", || get(v.port, "/api/summary").status == 200);
    let core_f = get_json(v.port, "/api/core");
    assert_eq!(core_f["stage"], "full");
    let summary_f = get_json(v.port, "/api/summary");
    let span = core_f["span"].clone();
    let whole = format!("/api/timeline?t0={}&t1={}&width=900", span[0], span[1]);
    let tl_f = get_json(v.port, &whole);
    assert_eq!(tl_f["stage"], "full");
    // The index holds the report once it is written after it.
    wait_until("the index with the report", || {
        let b = std::fs::read(&index).unwrap_or_default();
        b.windows(16).any(|w| w == b"\"finding_places\"")
    });
    drop(v);
    let size = std::fs::metadata(&index).unwrap().len();
    assert!(size < 4 << 20, "the index has {size} bytes");
    // Nothing else of the view's in the trace directory; the trace reads
    // as before.
    let names: Vec<String> = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("gvi"))
        .collect();
    assert_eq!(names, ["view.gvi"]);
    assert!(!cache.exists(), "the trace directory could be written");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("report")
        .arg(&trace)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["events"], summary_f["events"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("view.gvi")
            && !String::from_utf8_lossy(&out.stderr).contains("view.gvi"),
        "gaspard report ignores the index"
    );

    // Second open, held at the index stage.
    let v = Viewer::start_logged(&trace, &held, Some(&log));
    let core_i = get_json(v.port, "/api/core");
    assert_eq!(core_i["stage"], "index");
    assert_eq!(core_i["span"], span);
    assert_eq!(core_i["rows"], core_f["rows"]);
    let tl_i = get_json(v.port, &whole);
    assert_eq!(tl_i["stage"], "index");
    assert_eq!(tl_i["coarse"], true);
    assert!(tl_f.get("coarse").is_none());
    assert_eq!(columns(&tl_i), columns(&tl_f), "the whole trace's columns");
    for th in tl_i["threads"].as_array().unwrap() {
        assert_eq!(th["complete"], false);
        assert!(th["spans"].as_array().unwrap().is_empty());
    }
    // Zoomed in past the pyramid's finest bins: columns still, from it.
    let (a, b) = (span[0].as_u64().unwrap(), span[1].as_u64().unwrap());
    let mid = a + (b - a) / 2;
    let zoom = get_json(
        v.port,
        &format!("/api/timeline?t0={mid}&t1={}&width=800", mid + 100),
    );
    assert_eq!(zoom["threads"].as_array().unwrap().len(), 4);
    let summary_i = get_json(v.port, "/api/summary");
    assert_eq!(summary_i["stage"], "index");
    assert_eq!(
        without_stage(summary_i),
        without_stage(summary_f.clone()),
        "the stored summary is the computed one"
    );
    assert_eq!(get(v.port, "/api/event?row=0&event=1").status, 503);
    assert_eq!(logged(), "", "a valid index is used without a word");
    // The page shows the report and the columns at once.
    let br = Browser::start(&dir.join("chromium"));
    br.goto(&v.url());
    br.wait_for(READY);
    br.wait_for(
        "const st = window.gaspard; return st.summary.stage === 'index' && \
         st.data && st.data.stage === 'index' && st.data.threads.length === 4;",
    );
    screenshot(&br, "index-stage");
    drop(v);

    // Unheld, the page follows the quick scan and the whole trace.
    let v = Viewer::start_with(&trace, &[("XDG_CACHE_HOME", cache_var.as_str())]);
    br.goto(&v.url());
    br.wait_for(READY);
    br.wait_for(
        "const st = window.gaspard; return st.summary.stage === 'full' && \
         st.data && st.data.stage === 'full' && st.report !== null;",
    );
    check_timeline_click(&br);
    drop((br, v));

    // A stream file touched: out of date, said, rebuilt from the quick scan.
    let stream = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "gst"))
        .unwrap();
    let old = std::fs::read(&index).unwrap();
    let f = std::fs::File::options().append(true).open(&stream).unwrap();
    f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
        .unwrap();
    drop(f);
    let v = Viewer::start_logged(&trace, &held, Some(&log));
    assert_eq!(get_json(v.port, "/api/core")["stage"], "quick");
    assert!(logged().contains("is out of date"), "{}", logged());
    let old = rewritten(&index, &old);
    drop(v);
    let v = Viewer::start_logged(&trace, &held, Some(&log));
    assert_eq!(get_json(v.port, "/api/core")["stage"], "index");
    // Rebuilt from the quick scan: no report yet.
    assert_eq!(get(v.port, "/api/summary").status, 503);
    drop(v);

    // A stream file lengthened (its time set back as it was).
    let before = std::fs::metadata(&stream).unwrap().modified().unwrap();
    let mut f = std::fs::File::options().append(true).open(&stream).unwrap();
    std::io::Write::write_all(&mut f, &[0u8; 16]).unwrap();
    f.set_modified(before).unwrap();
    drop(f);
    let v = Viewer::start_logged(&trace, &held, Some(&log));
    assert_eq!(get_json(v.port, "/api/core")["stage"], "quick");
    assert!(logged().contains("is out of date"), "{}", logged());
    let good = rewritten(&index, &old);
    drop(v);

    // Damaged: cut short, a bit flipped, another version, not one at all.
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 4;
    let mut version = good.clone();
    version[4] = 99;
    for bad in [
        good[..good.len() / 3].to_vec(),
        flipped,
        version,
        b"hello".to_vec(),
        Vec::new(),
    ] {
        std::fs::write(&index, &bad).unwrap();
        let v = Viewer::start_logged(&trace, &held, Some(&log));
        assert_eq!(get_json(v.port, "/api/core")["stage"], "quick");
        let said = logged();
        assert!(
            said.contains("cannot be used") && said.contains("it is rebuilt"),
            "{said}"
        );
        assert_eq!(said.lines().count(), 1, "{said}");
        rewritten(&index, &bad);
        drop(v);
        let v = Viewer::start_logged(&trace, &held, Some(&log));
        assert_eq!(get_json(v.port, "/api/core")["stage"], "index");
        drop(v);
    }

    // The trace directory cannot be written (a directory where the index
    // would go stops even root): the index goes to the cache directory.
    std::fs::remove_file(&index).unwrap();
    std::fs::create_dir(&index).unwrap();
    let mode = |m| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&trace, std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode(0o555);
    let v = Viewer::start_logged(&trace, &held, Some(&log));
    assert_eq!(get_json(v.port, "/api/core")["stage"], "quick");
    wait_until("the index in the cache directory", || {
        std::fs::read_dir(cache.join("gaspard")).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".gvi"))
        })
    });
    drop(v);
    let v = Viewer::start_logged(&trace, &held, Some(&log));
    assert_eq!(get_json(v.port, "/api/core")["stage"], "index");
    assert_eq!(logged(), "");
    drop(v);
    mode(0o755);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every span of a timeline answer, resolved with the names and callsites
/// of `tables` (the core, or the answer itself when it carries them), in
/// order, with whether each row is complete.
fn resolved_spans(tables: &Value, tl: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (row, th) in tl["threads"].as_array().unwrap().iter().enumerate() {
        out.push(format!("row {row} complete {}", th["complete"]));
        for sp in th["spans"].as_array().unwrap() {
            let name = &tables["names"][sp[4].as_u64().unwrap() as usize];
            let site = &tables["sites"][sp[5].as_u64().unwrap() as usize];
            out.push(format!(
                "{row} [{}, {}] class {} depth {} {name} {site} event {} peer {}",
                sp[0], sp[1], sp[2], sp[3], sp[6], sp[7]
            ));
        }
    }
    out
}

/// A big trace (here any trace, with `GASPARD_VIEW_OVERVIEW_BYTES=0`)
/// opens with an overview: every thread's columns over the whole run, from
/// every event, before the quick scan. They are the whole trace's but for
/// rounding at the edges of bins, whole run and a quarter of it; the page shows
/// them, then follows the quick scan and the whole trace by itself.
///
/// Meanwhile a window of the timeline is read from the chunks that hold it
/// (the overview marks where they are): its spans are the whole trace's,
/// the same names, callsites, lanes and event numbers, and their details
/// too; a window holding more events than `GASPARD_VIEW_WINDOW_EVENTS` is
/// answered with columns. The view index keeps where the chunks are, and a
/// trace opened again from it reads windows the same way.
#[test]
fn big_trace_opens_with_an_overview_first() {
    let dir = common::tmpdir("web-overview");
    let trace = heat_trace(&dir);
    let held = [
        ("GASPARD_VIEW_OVERVIEW_BYTES", "0"),
        ("GASPARD_VIEW_DELAY_MS", "600000"),
        ("GASPARD_VIEW_WINDOW_EVENTS", "1"),
    ];
    let v = Viewer::start_with(&trace, &held);
    let core_o = get_json(v.port, "/api/core");
    assert_eq!(core_o["stage"], "overview");
    let span = core_o["span"].clone();
    let (a, b) = (span[0].as_u64().unwrap(), span[1].as_u64().unwrap());
    let whole = format!("/api/timeline?t0={a}&t1={b}&width=900");
    // A quarter of the run: columns of about 27 of the finest bins.
    let zoomed = format!(
        "/api/timeline?t0={}&t1={}&width=300",
        a + (b - a) / 3,
        a + (b - a) / 3 + (b - a) / 4
    );
    let tl_o = get_json(v.port, &whole);
    let zoom_o = get_json(v.port, &zoomed);
    assert_eq!(tl_o["stage"], "overview");
    assert_eq!(tl_o["coarse"], true);
    for th in tl_o["threads"].as_array().unwrap() {
        assert_eq!(th["complete"], false);
        assert!(th["spans"].as_array().unwrap().is_empty());
    }
    assert_eq!(get(v.port, "/api/summary").status, 503);
    assert_eq!(get(v.port, "/api/event?row=0&event=1").status, 503);
    let br = Browser::start(&dir.join("chromium"));
    br.goto(&v.url());
    br.wait_for(
        "const st = window.gaspard; return st.summary && st.summary.stage === 'overview' && \
         st.data && st.data.stage === 'overview' && st.data.threads.length === 4 && \
         document.getElementById('trace-stats').textContent.includes('overview');",
    );
    screenshot(&br, "overview-stage");
    drop(v);

    // Windows read from the trace's chunks while the overview is shown.
    let narrow = format!(
        "/api/timeline?t0={}&t1={}&width=800",
        a + (b - a) * 3 / 5,
        a + (b - a) * 3 / 5 + (b - a) / 200
    );
    let asked = [&whole, &zoomed, &narrow];
    let v = Viewer::start_with(&trace, &held[..2]);
    let read: Vec<Value> = asked.iter().map(|p| get_json(v.port, p)).collect();
    for (path, tl) in asked.iter().zip(&read) {
        assert_eq!(tl["stage"], "overview", "{path}");
        assert_eq!(tl["exact"], true, "{path}");
        assert!(tl.get("coarse").is_none(), "{path}");
    }
    let spans = some_spans(&read[2]);
    let details_o = details(v.port, &spans);
    for ((row, event), d) in spans.iter().zip(&details_o) {
        let th = &read[2]["threads"][*row];
        let sp = th["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|sp| sp[6] == *event)
            .unwrap();
        assert_eq!(d["t_ns"], sp[0], "row {row} event {event}");
        assert_eq!(d["phase"], "START", "row {row} event {event}");
    }
    br.goto(&v.url());
    br.wait_for(
        "const st = window.gaspard; return st.summary && st.summary.stage === 'overview' && \
         st.data && st.data.exact === true;",
    );
    check_timeline_click(&br);
    br.wait_for(
        "const st = window.gaspard, d = document.getElementById('details'); \
         const sp = st.data.threads[Number(d.dataset.row)].spans.find((s) => s[6] === Number(d.dataset.event)); \
         const args = d.querySelector('.d-args'); \
         return sp && d.querySelector('.d-name').textContent === st.data.names[sp[4]] && \
           args !== null && args.textContent.startsWith('{');",
    );
    screenshot(&br, "overview-stage-window-read");
    drop((br, v));

    // Unheld: the quick scan, then the whole trace, by themselves.
    let v = Viewer::start_with(&trace, &held[..1]);
    wait_until("the whole trace", || {
        get_json(v.port, "/api/core")["stage"] == "full"
    });
    let core_f = get_json(v.port, "/api/core");
    assert_eq!(core_f["span"], span, "the same time span");
    assert_eq!(core_f["rows"], core_o["rows"], "the same threads");
    for (path, overview) in [(&whole, &tl_o), (&zoomed, &zoom_o)] {
        let full = get_json(v.port, path);
        assert_eq!(full["stage"], "full");
        let (o, f) = (columns(overview), columns(&full));
        assert_eq!(o.len(), f.len());
        let (mut busy, mut classes, mut n) = (0, 0, 0);
        for (o, f) in o.iter().zip(&f) {
            assert_eq!(o[0], f[0], "thread names");
            let (oc, fc) = (o[1].as_array().unwrap(), f[1].as_array().unwrap());
            let (ob, fb) = (o[2].as_array().unwrap(), f[2].as_array().unwrap());
            assert_eq!(ob.len(), fb.len());
            for x in 0..ob.len() {
                let (p, q) = (ob[x].as_i64().unwrap(), fb[x].as_i64().unwrap());
                assert!(
                    (p - q).abs() <= 4,
                    "{path}: {}: column {x}: busy {p} and {q}",
                    o[0]
                );
                busy += p;
                n += 1;
                if q >= 8 && oc[x] != fc[x] {
                    classes += 1;
                }
            }
        }
        assert!(busy > 0, "{path}: some time busy");
        assert!(
            classes * 50 <= n,
            "{path}: {classes} of {n} columns of another class"
        );
    }
    let full: Vec<Value> = asked.iter().map(|p| get_json(v.port, p)).collect();
    for ((path, o), f) in asked.iter().zip(&read).zip(&full) {
        let (o, f) = (resolved_spans(o, o), resolved_spans(&core_f, f));
        assert!(f.len() > 4, "{path}: spans in the whole trace's timeline");
        assert_eq!(o, f, "{path}: the window read is the whole trace's");
    }
    assert_eq!(details(v.port, &spans), details_o, "the same details");
    // The view index, written with the report, keeps where the chunks are.
    wait_until("the index with the report", || {
        let b = std::fs::read(trace.join("view.gvi")).unwrap_or_default();
        b.windows(16).any(|w| w == b"\"finding_places\"")
    });
    drop(v);
    let v = Viewer::start_with(&trace, &held[1..2]);
    assert_eq!(get_json(v.port, "/api/core")["stage"], "index");
    for ((path, f), o) in asked.iter().zip(&full).zip(&read) {
        let i = get_json(v.port, path);
        assert_eq!(i["stage"], "index");
        assert_eq!(i["exact"], true, "{path}");
        assert_eq!(columns(&i).len(), columns(o).len());
        assert_eq!(resolved_spans(&i, &i), resolved_spans(&core_f, f), "{path}");
    }
    assert_eq!(details(v.port, &spans), details_o, "the same details");
    drop(v);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace too big for the memory the view may use: the quick timeline
/// alone, and the summary says why, instead of the server being killed.
/// A trace too big for the memory available (`GASPARD_VIEW_MEMORY` set
/// low) whose whole reading would add to the quick scan (Coarray Fortran):
/// the view
/// keeps the quick scan's timeline and computes the report
/// one process at a time, the same as `gaspard report`'s; the page says so,
/// and so does an event's details. `gaspard report --low-memory --html`
/// writes the same views from a quick scan.
#[test]
fn too_big_for_memory_analysed_one_process_at_a_time() {
    let dir = common::tmpdir("web-memory");
    let trace = caf_trace(&dir);
    let html = dir.join("low.html");
    let r = report_html(&trace, &html);

    let v = Viewer::start_with(&trace, &[("GASPARD_VIEW_MEMORY", "1000")]);
    let tl: Value = serde_json::from_str(&get(v.port, "/api/timeline?width=300").text()).unwrap();
    assert_eq!(tl["stage"], "quick");
    assert_eq!(tl["threads"].as_array().unwrap().len(), 2);
    assert!(tl["threads"][0]["spans"].as_array().unwrap().len() > 10);
    wait_until("the summary", || get(v.port, "/api/summary").status == 200);
    let s = get_json(v.port, "/api/summary");
    assert_eq!(s["stage"], "quick");
    let note = s["note"].as_str().unwrap();
    assert!(
        note.contains("would take about") && note.contains("one process at a time"),
        "{note}"
    );
    for key in [
        "findings",
        "by_event",
        "by_thread",
        "breakdown",
        "balance",
        "communication",
        "waits",
        "locks",
        "problems",
    ] {
        assert_eq!(s[key], r[key], "{key}");
    }
    // Its process alone does not fit either (GASPARD_VIEW_MEMORY is 1 kB).
    let event = tl["threads"][0]["spans"][0][6].as_u64().unwrap();
    let ev = get(v.port, &format!("/api/event?row=0&event={event}"));
    assert_eq!(ev.status, 503, "{}", ev.text());
    assert!(
        ev.text().contains("alone") && ev.text().contains("would take about"),
        "{}",
        ev.text()
    );

    let b = Browser::start(&dir.join("chromium"));
    b.goto(&v.url());
    b.wait_for(READY);
    check_common(&b, &r);
    let shown_note =
        b.eval("const n = document.getElementById('note'); return n.hidden ? '' : n.textContent;");
    assert_eq!(shown_note.as_str().unwrap(), note);
    check_timeline_click(&b);
    // The details are asked for once the span is shown: waited for.
    b.wait_for(
        "const d = document.querySelector('#details .d-args'); \
         return d !== null && d.textContent.includes('its arguments are not shown: process');",
    );
    screenshot(&b, "too-big-served");

    // The HTML file of a report read one process at a time.
    let low = dir.join("low-memory.html");
    let rl = report_html_with(&trace, &low, &["--low-memory"], &[]);
    assert_eq!(rl, r, "the report read one process at a time");
    b.goto(&file_url(&low));
    b.wait_for(READY);
    check_common(&b, &r);
    check_zoom_and_pan(&b);
    check_timeline_click(&b);
    let shown_note = b.eval("return document.getElementById('note').textContent;");
    assert!(
        shown_note
            .as_str()
            .unwrap()
            .contains("one process at a time"),
        "{shown_note}"
    );
    screenshot(&b, "low-memory-file");
    drop((b, v));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mpi_matrix_and_block_map() {
    let dir = common::tmpdir("web-mpi");
    let exe = dir.join("rma_halo");
    let out = Command::new("mpicc")
        .arg("-g")
        .arg(workspace().join("examples/mpi/rma_halo.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "mpirun",
            "-np",
            "4",
            "--oversubscribe",
            exe.to_str().unwrap(),
            "10",
        ],
    );
    let html = dir.join("mpi.html");
    let r = report_html(&trace, &html);
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("blocks")
        .arg(&trace)
        .arg("--json")
        .output()
        .unwrap();
    let blocks: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &r["communication"][0];
    assert_eq!(m["model"], "MPI");
    assert_eq!(m["ranks"], 4);

    let b = Browser::start(&dir.join("chromium"));
    let v = Viewer::start(&trace);
    for (url, name) in [(v.url(), "mpi-served"), (file_url(&html), "mpi-file")] {
        b.goto(&url);
        b.wait_for(READY);
        check_common(&b, &r);
        // The matrix heat map: every cell, for operations, then for bytes.
        for metric in ["ops", "bytes"] {
            b.eval(&format!(
                "const s = document.getElementById('matrix-metric'); s.value = '{metric}'; \
                 s.dispatchEvent(new Event('change')); return 0;"
            ));
            let cells = b.eval(
                "return [...document.querySelectorAll('#matrix td')].map(td => \
                 [Number(td.dataset.from), Number(td.dataset.to), Number(td.textContent)]);",
            );
            let cells = cells.as_array().unwrap();
            assert_eq!(cells.len(), 16);
            for c in cells {
                let (i, j) = (
                    c[0].as_u64().unwrap() as usize,
                    c[1].as_u64().unwrap() as usize,
                );
                assert_eq!(c[2], m[metric][i][j], "{metric} {i}->{j}");
            }
        }
        // The block map of the first object at its first epoch with accesses.
        let epochs = blocks["epochs"].as_array().unwrap();
        let first = epochs
            .iter()
            .filter(|e| e["object"] == 0)
            .map(|e| e["epoch"].as_u64().unwrap())
            .min()
            .expect("accesses to object 0");
        let mut want: Vec<(u64, u64, &str)> = epochs
            .iter()
            .filter(|e| e["object"] == 0 && e["epoch"] == first)
            .map(|e| {
                let w = e["writers"].as_array().unwrap().len();
                let state = match w {
                    0 => "b-r",
                    1 => "b-w1",
                    _ => "b-wm",
                };
                (
                    e["home"].as_u64().unwrap(),
                    e["block"].as_u64().unwrap(),
                    state,
                )
            })
            .collect();
        want.sort();
        let shown = b.eval(
            "return [...document.querySelectorAll('#blocks .blk')].filter(c => \
             c.classList.length > 1).map(c => [Number(c.dataset.home), Number(c.dataset.block), \
             [...c.classList].find(k => k.startsWith('b-') && k !== 'b-fs')]);",
        );
        let mut got: Vec<(u64, u64, String)> = shown
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c[0].as_u64().unwrap(),
                    c[1].as_u64().unwrap(),
                    c[2].as_str().unwrap().to_string(),
                )
            })
            .collect();
        got.sort();
        let got: Vec<(u64, u64, &str)> = got.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
        assert_eq!(got, want);
        // Falsely shared blocks of the object are outlined, in every epoch.
        let fs: Vec<(u64, u64)> = r["blocks"]["false_sharing"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["object"] == 0)
            .map(|b| (b["home"].as_u64().unwrap(), b["block"].as_u64().unwrap()))
            .collect();
        let shown_fs = b.eval(
            "return [...document.querySelectorAll('#blocks .blk.b-fs')].map(c => \
             [Number(c.dataset.home), Number(c.dataset.block)]);",
        );
        let mut shown_fs: Vec<(u64, u64)> = shown_fs
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c[0].as_u64().unwrap(), c[1].as_u64().unwrap()))
            .collect();
        shown_fs.sort();
        assert_eq!(shown_fs, fs);
        // Communication arrows: puts to neighbours have their target row.
        let peers = b.eval(
            "return window.gaspard.data.threads.flatMap(t => t.spans).filter(s => s[7] >= 0).length;",
        );
        assert!(peers.as_u64().unwrap() > 0);
        screenshot(&b, name);
    }
    // Kept when the test fails, for a look.
    drop((b, v));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn view_serves_only_its_own_routes() {
    let dir = common::tmpdir("web-routes");
    let trace = heat_trace(&dir);
    let v = Viewer::start(&trace);
    let p = v.port;
    // The summary comes when the report is computed: "loading" until then.
    let t = std::time::Instant::now();
    loop {
        let r = get(p, "/api/summary");
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503);
        assert_eq!(r.text(), r#"{"loading":true}"#);
        assert!(t.elapsed().as_secs() < 60, "no summary");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Its own routes, each with its security headers.
    for path in [
        "/",
        "/app.js",
        "/app.css",
        "/api/core",
        "/api/summary",
        "/api/timeline?width=50",
    ] {
        let r = get(p, path);
        assert_eq!(r.status, 200, "{path}");
        let csp = r.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    // Nothing else, however the path is spelled.
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let first = passwd.lines().next().unwrap();
    for path in [
        "/../../etc/passwd",
        "/../../../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/..%2f..%2f..%2fetc%2fpasswd",
        "/app.js/../../etc/passwd",
        "//etc/passwd",
        "/etc/passwd",
        "/.%2e/.%2e/etc/passwd",
        "/%252e%252e/etc/passwd",
        "/api/source?file=/etc/passwd",
        "/api/source?file=%2Fetc%2Fpasswd",
        "/api/source?file=../../../../etc/passwd",
        "/api/source?file=..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/api/event?row=99999&event=0",
        "/api/event?row=a&event=b",
        "/api/timeline?t0=10&t1=5",
    ] {
        let r = get(p, path);
        assert!(
            matches!(r.status, 400 | 403 | 404),
            "{path}: {} {}",
            r.status,
            r.text()
        );
        assert!(!r.text().contains(first), "{path} served /etc/passwd");
    }
    // Extreme or nonsense numbers give an answer, not a crash.
    for path in [
        "/api/timeline?t0=18446744073709551614&t1=18446744073709551615&width=99999999",
        "/api/timeline?t0=0&t1=18446744073709551615&width=0",
        "/api/timeline?t0=abc&t1=-5&width=1e9",
    ] {
        let r = get(p, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["threads"].as_array().unwrap().len(), 4, "{path}");
    }
    // The program's own source, named by a callsite, is served.
    let heat = std::fs::canonicalize(workspace().join("examples/gasp/heat.c")).unwrap();
    let summary: Value = serde_json::from_slice(&get(p, "/api/summary").body).unwrap();
    let file = summary["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s[0].as_str())
        .find(|f| f.ends_with("heat.c"))
        .expect("a callsite in heat.c")
        .to_string();
    let enc: String = file.bytes().map(|b| format!("%{b:02X}")).collect();
    let r = get(p, &format!("/api/source?file={enc}"));
    assert_eq!(r.status, 200);
    let src: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(src["text"], std::fs::read_to_string(heat).unwrap());
    // Other methods, other hosts (DNS rebinding), no host.
    let r = raw_request(
        p,
        format!("POST /api/summary HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nContent-Length: 0\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(r.status, 405);
    let r = raw_request(
        p,
        b"GET /api/summary HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 403);
    let r = raw_request(p, b"GET /api/summary HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 403);
    // A garbage request gets an answer, and the server goes on.
    let r = raw_request(p, b"\x00\xff garbage\r\n\r\n");
    assert!(r.status >= 400);
    assert_eq!(get(p, "/api/summary").status, 200);
    // Only on the loopback interface.
    let out = Command::new("ss").args(["-ltn"]).output();
    if let Ok(out) = out {
        let text = String::from_utf8_lossy(&out.stdout);
        let listening: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&format!(":{p} ")))
            .collect();
        assert!(!listening.is_empty(), "{text}");
        assert!(
            listening.iter().all(|l| l.contains("127.0.0.1:")),
            "{listening:?}"
        );
    }
    // Kept when the test fails, for a look.
    drop(v);
    let _ = std::fs::remove_dir_all(&dir);
}

const MARKUP_PROGRAM: &str = r#"
#include <pupc.h>
static volatile double sink;
static void spin(int n) { for (int i = 0; i < n * 1000; i++) sink += i; }
int main(void) {
  unsigned a = pupc_create_event("<img src=x onerror=window.pwned=1>", "%d");
  unsigned b = pupc_create_event("<script>window.pwned=2</script>", NULL);
  unsigned c = pupc_create_event("\"quoted\" & <b>bold</b>", NULL);
  for (int i = 0; i < 5; i++) {
    pupc_event_start(a, i);
    spin(50);
    pupc_event_start(b);
    spin(20);
    pupc_event_end(b);
    pupc_event_atomic(c);
    pupc_event_end(a, i);
  }
  return 0;
}
"#;

#[test]
fn markup_from_the_program_stays_text() {
    let dir = common::tmpdir("web-markup");
    // The source file's name is markup too.
    let src = dir.join("<svg onload=window.pwned=3>.c");
    std::fs::write(&src, MARKUP_PROGRAM).unwrap();
    let exe = dir.join("markup");
    let lib = workspace().join("target/debug");
    let out = Command::new("cc")
        .args(["-O1", "-DGASPARD_PROFILE=1", "-I"])
        .arg(workspace().join("crates/gasp/include"))
        .arg(&src)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lgaspard")
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (trace, _) = common::gaspard_run(&dir, &[exe.to_str().unwrap()]);
    let html = dir.join("markup.html");
    let r = report_html(&trace, &html);
    let names: Vec<&str> = r["by_event"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for n in [
        "<img src=x onerror=window.pwned=1>",
        "<script>window.pwned=2</script>",
        "\"quoted\" & <b>bold</b>",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    // No raw markup from the program in the file's text.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<img") && !page.contains("<svg") && !page.contains("<b>"));
    assert_eq!(page.matches("<script").count(), 2);

    let b = Browser::start(&dir.join("chromium"));
    let v = Viewer::start(&trace);
    for (url, name) in [(v.url(), "markup-served"), (file_url(&html), "markup-file")] {
        b.goto(&url);
        b.wait_for(READY);
        // Click the widest span (an "<img ..." event) and show a finding's source.
        check_timeline_click(&b);
        let d = b.eval("return document.getElementById('details').innerText;");
        assert!(
            d.as_str()
                .unwrap()
                .contains("<img src=x onerror=window.pwned=1>"),
            "{d}"
        );
        let injected = b.eval(
            "return [document.querySelectorAll('img, svg, b, main script, section script').length, \
             window.pwned === undefined];",
        );
        assert_eq!(injected, serde_json::json!([0, true]), "{name}");
        let text = b.eval("return document.body.innerText;");
        let text = text.as_str().unwrap();
        for n in [
            "<img src=x onerror=window.pwned=1>",
            "<script>window.pwned=2</script>",
            "\"quoted\" & <b>bold</b>",
            "<svg onload=window.pwned=3>.c",
        ] {
            assert!(text.contains(n), "{name}: {n} not shown literally");
        }
        screenshot(&b, name);
    }
    // Kept when the test fails, for a look.
    drop((b, v));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clear_errors_for_bad_arguments() {
    let dir = common::tmpdir("web-errors");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gaspard"))
            .args(args)
            .output()
            .unwrap()
    };
    let missing = dir.join("no-such-trace");
    let out = run(&["view", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let trace = heat_trace(&dir);
    let html = dir.join("no-such-dir").join("x.html");
    let out = run(&[
        "report",
        trace.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write") && err.contains("x.html"),
        "{err}"
    );

    // A port already taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = run(&["view", trace.to_str().unwrap(), "--port", &port]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{err}"
    );
    // Kept when the test fails, for a look.
    let _ = std::fs::remove_dir_all(&dir);
}
