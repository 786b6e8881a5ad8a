//! The error type's conversions and messages.

use super::*;
use io::ErrorKind as K;

#[test]
fn each_error_becomes_an_io_error_of_its_kind_that_keeps_it() {
    let path = || PathBuf::from("/s");
    let corrupt = Corruption::Truncated {
        needed: 8,
        available: 2,
    };
    let cases = [
        (
            Error::io("read", None, io::Error::from(K::PermissionDenied)),
            K::PermissionDenied,
        ),
        (
            Error::io("read", None, io::Error::from(K::UnexpectedEof)),
            K::UnexpectedEof,
        ),
        (Error::StorageFull { path: None }, K::StorageFull),
        // ENOSPC from the kernel is StorageFull on the way in, and on the way out.
        (
            Error::io("write", None, io::Error::from_raw_os_error(libc_enospc())),
            K::StorageFull,
        ),
        (
            Error::Corruption {
                file: FileKind::Log,
                segment: 1,
                offset: 0,
                kind: corrupt.clone(),
            },
            K::InvalidData,
        ),
        (
            Error::Damaged {
                dir: path(),
                files: Vec::new(),
            },
            K::InvalidData,
        ),
        (Error::EmptyKey, K::InvalidInput),
        (Error::KeyTooLarge { len: 9, max: 8 }, K::InvalidInput),
        (Error::ValueTooLarge { len: 9, max: 8 }, K::InvalidInput),
        (
            Error::OutOfRange {
                key: b"k".to_vec(),
                start: 5,
                end: 2,
                len: 9,
            },
            K::InvalidInput,
        ),
        (Error::InvalidOptions("x"), K::InvalidInput),
        (Error::Locked { path: path() }, K::ResourceBusy),
        (
            Error::StoreChanged {
                path: path(),
                attempts: 3,
            },
            K::ResourceBusy,
        ),
        (Error::NotFound { path: path() }, K::NotFound),
        (
            Error::ForeignFiles {
                path: path(),
                names: vec!["a".into()],
                total: 1,
            },
            K::AlreadyExists,
        ),
        (Error::DirectIoUnsupported { path: path() }, K::Unsupported),
        (Error::ReadOnly, K::ReadOnlyFilesystem),
        (
            Error::FileIdOutOfRange {
                path: Some(path()),
                id: 1 << 41,
            },
            K::InvalidData,
        ),
        (Error::FileIdOutOfRange { path: None, id: 1 }, K::Other),
        (Error::Poisoned, K::Other),
    ];
    for (error, kind) in cases {
        let message = error.to_string();
        let variant = std::mem::discriminant(&error);
        let io: io::Error = error.into();
        assert_eq!(io.kind(), kind, "{message}");
        // The message is the podstore error's, and the error itself is inside.
        assert_eq!(io.to_string(), message);
        let back = io.into_inner().unwrap().downcast::<Error>().unwrap();
        assert_eq!(std::mem::discriminant(&*back), variant, "{message}");
    }
}

#[test]
fn question_mark_turns_an_error_into_an_io_error() {
    fn read_it() -> io::Result<()> {
        Err(Error::NotFound {
            path: PathBuf::from("/nowhere"),
        })?;
        Ok(())
    }
    let e = read_it().unwrap_err();
    assert_eq!(e.kind(), K::NotFound);
    assert!(e.to_string().contains("/nowhere"), "{e}");
}
