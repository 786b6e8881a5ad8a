//! Durability::Buffered.

use super::*;

#[test]
fn buffered_writes_are_readable_before_flush_and_durable_after_it() {
    for mode in modes() {
        let opts = Options::default()
            .io_mode(mode)
            .durability(Durability::Buffered)
            .write_buffer_size(MIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let model = Model::from([
            (b"small".to_vec(), pattern(100, 1)),
            (b"medium".to_vec(), pattern(200_000, 2)),
            // Larger than the write buffer: part handed to the flush thread, part still buffered.
            (b"spanning".to_vec(), pattern(3 * MIB / 2, 3)),
        ]);
        put_all(&store, &model);
        store.put(b"gone", b"deleted before the flush").unwrap();
        assert!(store.delete(b"gone").unwrap());

        let check = |store: &Store, what: &str| {
            assert_contents(store, &model, what);
            for (key, value) in &model {
                assert_bytes_eq(&read_through_reader(store, key), value, what);
                let len = value.len() as u64;
                check_range(store, key, value, len / 3..len, what);
            }
            assert_eq!(store.get(b"gone").unwrap(), None, "{what}");
        };
        check(&store, &format!("{what} before flush"));
        store.flush().unwrap();
        check(&store, &format!("{what} after flush"));

        // Stop without closing: only what flush() made durable is there after reopening.
        store.simulate_crash();
        let store = fx.open();
        assert_eq!(
            store.recovery().recovered.len(),
            1,
            "{:?}",
            store.recovery()
        );
        check(&store, &format!("{what} after crash and reopen"));
    }
}

#[test]
fn buffered_writes_lost_in_a_crash_are_a_suffix() {
    const FLUSHED: usize = 10;
    const TOTAL: usize = 300;
    for mode in modes() {
        let opts = Options::default()
            .io_mode(mode)
            .durability(Durability::Buffered)
            .write_buffer_size(64 * KIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let value = |i: usize| pattern(1000 + i, i as u64);
        for i in 0..TOTAL {
            store.put(key(i), value(i)).unwrap();
            if i + 1 == FLUSHED {
                store.flush().unwrap();
            }
        }
        store.simulate_crash();

        let store = fx.open();
        let present: Vec<bool> = (0..TOTAL)
            .map(|i| store.contains(key(i)).unwrap())
            .collect();
        let kept = present.iter().position(|&p| !p).unwrap_or(TOTAL);
        assert!(
            kept >= FLUSHED,
            "{what}: flushed writes lost, only {kept} kept"
        );
        assert!(
            present[kept..].iter().all(|&p| !p),
            "{what}: writes after the first lost one survived: {present:?}"
        );
        for i in 0..kept {
            assert_bytes_eq(&get_present(&store, &key(i)), &value(i), &what);
        }
        assert_eq!(store.len(), kept, "{what}");
    }
}
