fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let t0 = std::time::Instant::now();
    let q = gaspard_analyze::scan::scan(std::path::Path::new(&dir)).unwrap();
    let t1 = t0.elapsed();
    let tl = gaspard_web::timeline::Timeline::from_quick(q);
    eprintln!(
        "scan {:?} timeline {:?} rows {}",
        t1,
        t0.elapsed() - t1,
        tl.threads.len()
    );
}
