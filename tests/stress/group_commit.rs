//! Group commit caps.

use super::*;

#[test]
fn group_commit_caps_keep_working() {
    const THREADS: usize = 16;
    const PUTS: usize = 60;
    const KEYS_PER_THREAD: usize = 20;
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .segment_size(1 << 20)
        .max_group_records(3)
        .max_group_bytes(16 * KIB as u64)
        // The crash below must find the active segment unsealed: a background compaction that
        // sealed a mostly dead active segment just before it (the overwrites here make it so)
        // left nothing to recover, and the check of that failed now and then under load.
        .background_compaction(false);
    let fx = Fixture::new(opts);
    let store = Arc::new(fx.open());
    let writers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let mut rng = XorShift::new(0xCA95_0000 + thread as u64);
                let mut last: HashMap<usize, ValueId> = HashMap::new();
                for counter in 1..=PUTS {
                    let key = thread * KEYS_PER_THREAD + rng.below(KEYS_PER_THREAD);
                    // Some values alone exceed the group's byte cap.
                    let len = match rng.below(100) {
                        0..85 => rng.in_range(MIN_VALUE_LEN..8 * KIB),
                        _ => rng.in_range(16 * KIB..48 * KIB),
                    };
                    let id = ValueId {
                        key,
                        thread,
                        counter,
                        len,
                    };
                    let name = key_name(key);
                    store.put(&name, id.bytes()).expect("put");
                    // Only this thread writes this key: it reads back what it wrote.
                    let got = store.get(&name).expect("get").expect("own key present");
                    assert_eq!(decode_value(key, &got), Ok(id), "read own write");
                    last.insert(key, id);
                }
                last
            })
        })
        .collect();
    let expected: BTreeMap<usize, ValueId> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer thread panicked"))
        .collect();
    let keys = THREADS * KEYS_PER_THREAD;
    let before = read_contents(&store, keys, "after the writers");
    assert_eq!(decode_contents(&before, "after the writers"), expected);

    let store = reopen(
        &fx,
        Arc::into_inner(store).expect("writers are done"),
        Ending::Crash,
    );
    assert!(
        !store.recovery().recovered.is_empty(),
        "the crash left an unsealed segment to recover: {:?}",
        store.recovery()
    );
    let after = read_contents(&store, keys, "after crash and reopen");
    assert_eq!(
        decode_contents(&after, "after crash and reopen"),
        expected,
        "every acknowledged put survives the crash"
    );
    store.close().expect("close");
}
