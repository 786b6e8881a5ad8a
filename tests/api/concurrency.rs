//! Concurrency.

use super::*;

#[test]
fn concurrent_writers_read_their_own_writes() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 40;
    let key_of = |t: usize, i: usize| format!("thread-{t}/key-{i}").into_bytes();
    let value_of = |t: usize, i: usize| {
        let n = t * PER_THREAD + i;
        pattern(n * 1009 % 20_000, n as u64)
    };
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = Arc::new(fx.open());
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = Arc::clone(&store);
                let what = what.clone();
                thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let (key, value) = (key_of(t, i), value_of(t, i));
                        store.put(&key, &value).unwrap();
                        assert_bytes_eq(&get_present(&store, &key), &value, &what);
                        let half = value.len() as u64 / 2;
                        check_range(&store, &key, &value, half.., &what);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer thread panicked");
        }
        let model: Model = (0..THREADS)
            .flat_map(|t| (0..PER_THREAD).map(move |i| (key_of(t, i), value_of(t, i))))
            .collect();
        assert_contents(&store, &model, &what);

        let store = Arc::into_inner(store).expect("threads are done");
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

#[test]
fn range_reads_run_while_other_keys_are_written() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 25;
    const MIN_READS: usize = 200;
    let hot = Arc::new(pattern(300_000, 99));
    let value_of = |w: usize, i: usize| pattern(20_000 + (w * PER_WRITER + i) * 1500, i as u64);
    for opts in configs() {
        // Small buffers and segments: the writers hand off buffers and roll segments while
        // the reader reads.
        let opts = opts.segment_size(1 << 20).write_buffer_size(64 * KIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = Arc::new(fx.open());
        store.put(b"hot", &hot[..]).unwrap();
        let done = Arc::new(AtomicBool::new(false));

        let reader = {
            let (store, hot, done, what) = (store.clone(), hot.clone(), done.clone(), what.clone());
            thread::spawn(move || {
                let mut rng = XorShift::new(7);
                let mut reads = 0;
                while !done.load(Ordering::Acquire) || reads < MIN_READS {
                    let start = rng.below(hot.len() + 1);
                    let end = start + rng.below(hot.len() - start + 1);
                    let got = store.get_range(b"hot", start as u64..end as u64).unwrap();
                    let got = got.expect("hot key present");
                    assert_bytes_eq(&got, &hot[start..end], &format!("{what} {start}..{end}"));
                    reads += 1;
                }
                reads
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = store.clone();
                thread::spawn(move || {
                    for i in 0..PER_WRITER {
                        store.put(key(w * PER_WRITER + i), value_of(w, i)).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer thread panicked");
        }
        done.store(true, Ordering::Release);
        let reads = reader.join().expect("reader thread panicked");
        assert!(reads >= MIN_READS);

        let mut model: Model = (0..WRITERS)
            .flat_map(|w| (0..PER_WRITER).map(move |i| (key(w * PER_WRITER + i), value_of(w, i))))
            .collect();
        model.insert(b"hot".to_vec(), hot.to_vec());
        assert_contents(&store, &model, &what);
        let store = fx.reopen(Arc::into_inner(store).expect("threads are done"));
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}
