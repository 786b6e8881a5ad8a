//! What the tests share: a real S3 server ([`s3`]) and a fault-injecting `ObjectStore`
//! ([`faulty`]).

pub mod faulty;
pub mod s3;
