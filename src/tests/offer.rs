//! `Store::offer`: a cache's refill is written unless the write would wait for the disk.

use std::time::Duration;

use super::{new_sim, open, options};
use crate::io::sim::SimConfig;
use crate::{Durability, Options};

fn opts() -> Options {
    options(Durability::Buffered)
        .write_buffer_size(64 << 10)
        .cache_capacity(0)
}

/// With the device holding every write, a writer's two buffers fill and its offers are dropped
/// (counted, nothing written, the key keeping what it had), while a put in their place would
/// wait; once the device takes writes again, offers are written. Every offer that said it was
/// written is read back, and every dropped one is absent, after a reopen too.
#[test]
fn offers_are_dropped_only_while_the_writer_waits_for_the_disk() {
    let sim = new_sim(SimConfig::default());
    let store = open(&sim, opts()).unwrap();
    store.put("kept", b"before").unwrap();
    let value = |i: u32| vec![(i % 251) as u8; 8 << 10];
    // An idle writer takes every offer.
    for i in 0..4u32 {
        assert!(
            store
                .offer(format!("idle/{i}"), value(i))
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(store.stats().offers_dropped, 0);
    // Released however the test ends.
    let _held = sim.hold_writes_guarded();
    // 64 KiB buffers of 8 KiB values: the buffer being filled takes seven or eight, the next
    // hand-off blocks the flush thread on the held device, the other buffer fills, and from
    // then on every offer must be dropped.
    // The offers run in a thread of their own, so that an offer waiting for the held device
    // fails the test (after 10 s) instead of hanging it.
    let (written, dropped) = std::thread::scope(|s| {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (store, value) = (&store, &value);
        let offers = s.spawn(move || {
            let (mut written, mut dropped) = (Vec::new(), Vec::new());
            for i in 0..64u32 {
                match store.offer(format!("held/{i}"), value(i)).unwrap() {
                    Some(_) => written.push(i),
                    None => dropped.push(i),
                }
            }
            done_tx.send(()).unwrap();
            (written, dropped)
        });
        if done_rx.recv_timeout(Duration::from_secs(10)).is_err() {
            sim.release_writes();
            panic!("an offer waited for the held device");
        }
        offers.join().unwrap()
    });
    assert!(
        !written.is_empty() && written.len() <= 17,
        "written while held: {written:?}"
    );
    assert!(dropped.len() >= 47, "dropped while held: {dropped:?}");
    // The writes before the drops are all visible; a dropped offer of an existing key leaves
    // its value.
    assert_eq!(store.offer("kept", value(1)).unwrap(), None);
    assert_eq!(store.get("kept").unwrap().unwrap(), b"before");
    for &i in &written {
        assert_eq!(store.get(format!("held/{i}")).unwrap().unwrap(), value(i));
    }
    for &i in &dropped {
        assert_eq!(store.get(format!("held/{i}")).unwrap(), None, "dropped {i}");
    }
    assert_eq!(store.stats().offers_dropped, dropped.len() as u64 + 1);
    // A put does not drop: it waits for the device.
    std::thread::scope(|s| {
        let putter = s.spawn(|| store.put("put/while-held", vec![1u8; 8 << 10]).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        assert!(!putter.is_finished(), "a put went through a held device");
        sim.release_writes();
        putter.join().unwrap();
    });
    // The writer caught up: offers are written again.
    store.flush().unwrap();
    for i in 0..8u32 {
        assert!(
            store
                .offer(format!("after/{i}"), value(i))
                .unwrap()
                .is_some()
        );
    }
    store.close().unwrap();
    let store = open(&sim, opts()).unwrap();
    for &i in &written {
        assert_eq!(store.get(format!("held/{i}")).unwrap().unwrap(), value(i));
    }
    for &i in &dropped {
        assert_eq!(store.get(format!("held/{i}")).unwrap(), None);
    }
    for i in 0..8u32 {
        assert_eq!(store.get(format!("after/{i}")).unwrap().unwrap(), value(i));
    }
    assert_eq!(store.get("kept").unwrap().unwrap(), b"before");
}

/// [`Admission::SecondOffer`](crate::Admission::SecondOffer): a store that has not evicted
/// writes every offer; once it has, an offer of a key not offered recently is turned away
/// (nothing written, counted) and the key's next offer is written; a put is never turned away;
/// the store remembers across a reopen that it has evicted (the catalog's watermark). A store
/// without a cap writes every offer.
#[test]
fn second_offer_admission_turns_away_a_key_seen_once_after_eviction() {
    let sim = new_sim(SimConfig::default());
    let opts = opts()
        .size_cap(Some(8 << 20))
        .admission(crate::Admission::SecondOffer);
    let store = open(&sim, opts.clone()).unwrap();
    let value = |i: u32| vec![(i % 251) as u8; 8 << 10];
    // Filling: every offer is written, until the store passes its cap and evicts.
    let mut i = 0u32;
    while store.stats().evicted_files == 0 {
        // (An offer may be dropped for a writer behind the simulated disk: counted apart.)
        store.offer(format!("fill/{i}"), value(i)).unwrap();
        i += 1;
        assert!(
            i < 4096,
            "no eviction after {i} offers of 8 KiB under an 8 MiB cap"
        );
    }
    assert_eq!(store.stats().offers_not_admitted, 0);
    assert!(store.stats().live_keys > 0);
    // Now a key must be offered twice. (Each offer below follows a flush, so that the writer
    // is idle and takes it if admitted.)
    store.flush().unwrap();
    assert_eq!(store.offer("new/1", value(1)).unwrap(), None);
    assert_eq!(store.get("new/1").unwrap(), None);
    assert_eq!(store.stats().offers_not_admitted, 1);
    store.flush().unwrap();
    assert!(store.offer("new/1", value(1)).unwrap().is_some());
    assert_eq!(store.get("new/1").unwrap().unwrap(), value(1));
    // A put is written the first time.
    store.put("put/1", value(2)).unwrap();
    assert_eq!(store.get("put/1").unwrap().unwrap(), value(2));
    assert_eq!(store.stats().offers_not_admitted, 1);
    // A key the store holds (a refill of an expired value, an overwrite) was admitted before:
    // its offer is written the first time.
    store.flush().unwrap();
    assert!(store.offer("put/1", value(4)).unwrap().is_some());
    assert_eq!(store.get("put/1").unwrap().unwrap(), value(4));
    assert_eq!(store.stats().offers_not_admitted, 1);
    store.close().unwrap();
    // After a reopen nothing has been evicted since open, but the catalog says it was.
    let store = open(&sim, opts).unwrap();
    assert_eq!(store.stats().evicted_files, 0);
    assert_eq!(store.offer("new/2", value(3)).unwrap(), None);
    assert_eq!(store.stats().offers_not_admitted, 1);
    assert!(store.offer("new/2", value(3)).unwrap().is_some());
    assert_eq!(store.get("new/2").unwrap().unwrap(), value(3));
    assert_eq!(store.get("new/1").unwrap().unwrap(), value(1));
    store.close().unwrap();
    // Without a cap nothing is ever turned away.
    let sim = new_sim(SimConfig::default());
    let store = open(&sim, opts_uncapped()).unwrap();
    for i in 0..1500u32 {
        // (An offer may still be dropped for a writer behind the simulated disk.)
        store.offer(format!("k/{i}"), value(i)).unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.live_keys + stats.offers_dropped, 1500);
    assert_eq!(stats.offers_not_admitted, 0);
}

fn opts_uncapped() -> Options {
    opts().admission(crate::Admission::SecondOffer)
}
