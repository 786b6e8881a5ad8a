//! Compile tests, run by `cargo test --doc`: a result that must not be dropped does not compile
//! when dropped under `#![deny(unused_must_use)]`. Each `compile_fail` case below is the
//! compiling one with one line added, so that it fails for that line only.

/// The results used: this compiles (and runs).
///
/// ```
/// #![deny(unused_must_use)]
/// use std::io::Write;
/// use podstore::{Batch, Options, Store};
/// fn main() -> podstore::Result<()> {
///     let dir = tempfile::tempdir().unwrap();
///     let opts = Options::default();
///     let opts = opts.durability(podstore::Durability::Sync);
///     let store = Store::open_with(dir.path(), opts)?;
///     let mut writer = store.writer("z")?;
///     writer.write_all(b"v").unwrap();
///     writer.finish()?;
///     assert!(store.verify()?.is_clean());
///     assert_eq!(store.keys().count(), 1);
///     let mut batch = Batch::new();
///     batch.put("a", "1").delete("z"); // `&mut Batch`: chaining is optional
///     store.write(&batch)?;
///     Ok(())
/// }
/// ```
///
/// `store.verify()?;` drops the report, and with it any damage found:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn main() -> podstore::Result<()> {
///     let dir = tempfile::tempdir().unwrap();
///     let store = podstore::Store::open(dir.path())?;
///     store.verify()?;
///     Ok(())
/// }
/// ```
///
/// `store.writer("z")?;` stores nothing:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn main() -> podstore::Result<()> {
///     let dir = tempfile::tempdir().unwrap();
///     let store = podstore::Store::open(dir.path())?;
///     store.writer("z")?;
///     Ok(())
/// }
/// ```
///
/// An option set on a copy that is dropped is lost:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn main() {
///     let opts = podstore::Options::default();
///     opts.clone().read_only(true);
///     let _ = opts;
/// }
/// ```
///
/// Keys listed and never iterated:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn main() -> podstore::Result<()> {
///     let dir = tempfile::tempdir().unwrap();
///     let store = podstore::Store::open(dir.path())?;
///     store.keys();
///     Ok(())
/// }
/// ```
///
/// A batch made and dropped:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn main() {
///     podstore::Batch::new();
/// }
/// ```
pub struct MustUse;
