use std::time::Instant;
fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(200_000);
    let dir = std::path::Path::new("/work/bench-hot/closet-dir");
    let _ = std::fs::remove_dir_all(dir);
    let store = podstore::Store::open_with(dir, podstore::Options::default().durability(podstore::Durability::Buffered)).unwrap();
    let v = vec![7u8; 1000];
    for i in 0..n { store.put(format!("user{i:012}"), &v).unwrap(); }
    store.flush().unwrap();
    std::thread::scope(|s| for t in 0..8 { let store = &store; s.spawn(move || {
        for r in 0..3 { for i in (t..n).step_by(8) { let _ = r; store.get(format!("user{i:012}")).unwrap(); } }
    }); });
    let st = store.stats();
    println!("cache {} MiB of {} MiB, hits {}", st.cache_bytes >> 20, st.cache_capacity >> 20, st.cache_hits);
    let t = Instant::now();
    store.close().unwrap();
    println!("close {:?}", t.elapsed());
    let _ = std::fs::remove_dir_all(dir);
}
