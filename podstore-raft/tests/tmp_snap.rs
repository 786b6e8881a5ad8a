#[test]
fn snap() {
    let dir = tempfile::tempdir().unwrap();
    let s = podstore::Store::open_with(dir.path().join("a"), podstore::Options::default().durability(podstore::Durability::Buffered)).unwrap();
    for i in 0..50u32 { s.put(format!("k{i}"), vec![1u8; 200]).unwrap(); }
    eprintln!("flush");
    s.flush().unwrap();
    eprintln!("checkpoint");
    s.checkpoint(dir.path().join("cp")).unwrap();
    eprintln!("open");
    let c = podstore::Store::open(dir.path().join("cp")).unwrap();
    eprintln!("close");
    c.close().unwrap();
    eprintln!("done");
}
