//! Independent writes in one log entry ([`Request::Many`]): the client's coalesced writes.
//!
//! One entry instead of one per write: one Raft proposal, one log record on each node, one
//! apply, where a client's concurrent writes would each pay their own. Each write keeps its
//! own answer (and its request id, if it has one), as if it had an entry of its own; only its
//! version is shared: every write of the entry is numbered with the entry's log index. That is
//! why two writes of one `Many` may not name the same key: the second is refused, so a
//! version still names one value of a key.

use std::collections::HashSet;
use std::io;

use super::Writes;
use crate::{Request, Response};

impl Writes<'_> {
    /// Applies each of `writes` on its own, in order (see the module docs).
    pub(super) fn apply_many(&mut self, writes: &[Request]) -> io::Result<Response> {
        // The keys named so far, borrowed from the entry (applied by reference: no copy).
        let mut named: HashSet<&[u8]> = HashSet::with_capacity(writes.len());
        let mut out = Vec::with_capacity(writes.len());
        for write in writes {
            // (A `Many`, or a request id on one, has no key: refused here, so a `Many` under a
            // request id holds no other `Many`.)
            let refused = match write.key() {
                None => Some(
                    "only puts and deletes, under a request id or not, go in a Many".to_string(),
                ),
                Some(key) if !named.insert(key) => Some(format!(
                    "{} named by an earlier write of the same entry",
                    key.escape_ascii()
                )),
                Some(_) => None,
            };
            out.push(match refused {
                Some(e) => Response::Rejected(e),
                None => self.apply(write)?,
            });
        }
        Ok(Response::Many(out))
    }
}

#[cfg(test)]
mod tests {
    use openraft::RaftTypeConfig;
    use openraft::alias::{EntryOf, LogIdOf};
    use openraft::entry::RaftEntry;
    use openraft::vote::RaftLeaderIdExt;

    use crate::state_machine::{StateMachine, apply_entries};
    use crate::{Expect, Op, Request, RequestId, Response, TypeConfig};

    fn entry(index: u64, request: Request) -> EntryOf<TypeConfig> {
        let log_id = LogIdOf::<TypeConfig>::new(
            <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(1, 1),
            index,
        );
        EntryOf::<TypeConfig>::new_normal(log_id, request)
    }

    fn put(key: &str, value: &str) -> Request {
        Request::Put {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        }
    }

    fn once(seq: u64, request: Request) -> Request {
        Request::Once {
            id: RequestId { client: 7, seq },
            request: Box::new(request),
        }
    }

    fn apply(sm: &StateMachine, entries: Vec<EntryOf<TypeConfig>>) -> Vec<Response> {
        apply_entries(&sm.store(), entries).unwrap()
    }

    fn read(sm: &StateMachine, key: &str) -> Option<(String, u64)> {
        let v = sm.get_versioned(key.as_bytes()).unwrap();
        v.map(|(v, version)| (String::from_utf8(v.to_vec()).unwrap(), version))
    }

    /// Each write of a `Many` answers on its own: a failed condition, a key named twice or a
    /// write that may not be in one refuses that write only; those that write take the entry's
    /// index as their version; a request id in one is remembered as in an entry of its own.
    #[test]
    fn each_write_of_a_many_is_applied_or_refused_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let sm = StateMachine::open(dir.path().join("sm"), dir.path().join("snapshots")).unwrap();
        let many = Request::Many(
            vec![
                put("a", "a1"),
                Request::PutIf {
                    key: b"b".to_vec(),
                    value: b"b1".to_vec(),
                    expect: Expect::Version(99),
                },
                put("a", "a2"),
                once(1, put("c", "c1")),
                Request::Delete {
                    key: b"zz".to_vec(),
                },
                Request::Batch(vec![Op::Put {
                    key: b"d".to_vec(),
                    value: b"d1".to_vec(),
                }]),
                Request::Many(vec![put("e", "e1")].into()),
                once(2, Request::Many(vec![put("f", "f1")].into())),
                put("", "empty key"),
            ]
            .into(),
        );
        let answers = apply(&sm, vec![entry(1, put("b", "b0")), entry(2, many)]);
        let Response::Many(each) = &answers[1] else {
            panic!("{answers:?}");
        };
        assert_eq!(each.len(), 9, "{each:?}");
        assert_eq!(each[0], Response::Done);
        assert_eq!(each[1], Response::ConditionFailed { current: Some(1) });
        assert_eq!(each[3], Response::Done);
        assert_eq!(each[4], Response::Existed(false));
        for i in [2, 5, 6, 7, 8] {
            assert!(
                matches!(each[i], Response::Rejected(_)),
                "{i}: {:?}",
                each[i]
            );
        }
        assert_eq!(read(&sm, "a"), Some(("a1".into(), 2)));
        assert_eq!(read(&sm, "b"), Some(("b0".into(), 1)));
        assert_eq!(read(&sm, "c"), Some(("c1".into(), 2)));
        for key in ["d", "e", "f"] {
            assert_eq!(read(&sm, key), None, "{key}");
        }

        // A retry of the whole request (an answer lost): the write under a request id
        // answers its first outcome, at its first index; the others apply again.
        let again = Request::Many(
            vec![
                once(1, put("c", "c1")),
                Request::PutIf {
                    key: b"a".to_vec(),
                    value: b"a3".to_vec(),
                    expect: Expect::Version(2),
                },
            ]
            .into(),
        );
        let answers = apply(&sm, vec![entry(3, again)]);
        assert_eq!(
            answers,
            [Response::Many(vec![
                Response::Replayed {
                    index: 2,
                    response: Box::new(Response::Done)
                },
                Response::Done,
            ])]
        );
        assert_eq!(read(&sm, "a"), Some(("a3".into(), 3)));
        assert_eq!(read(&sm, "c"), Some(("c1".into(), 2)));
    }

    /// A `Many` is shared in memory (`Arc<[Request]>`) but encoded as the `Vec<Request>` it
    /// was: its variant's index, then the writes as a sequence. Logs and request bodies written
    /// either way read the same.
    #[test]
    fn a_many_is_encoded_as_a_sequence_of_its_writes() {
        let writes = vec![put("a", "a1"), once(7, put("b", "b1"))];
        let bytes = crate::encode(&Request::Many(writes.clone().into())).unwrap();
        let tag = crate::encode(&Request::Many(Vec::new().into())).unwrap()[0];
        let mut expected = vec![tag];
        expected.extend(crate::encode(&writes).unwrap());
        assert_eq!(bytes, expected);
        let back: Request = crate::decode(&bytes).unwrap();
        assert_eq!(back, Request::Many(writes.into()));
    }
}
