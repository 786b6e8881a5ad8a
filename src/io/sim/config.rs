//! What a test asks of the simulator: the kinds of calls ([`OpKind`]), when to crash
//! ([`CrashOn`]) and what a crash keeps ([`Survival`]), the faults to inject ([`Fault`]), the
//! device's shape ([`SimConfig`]), and the seeded generator that makes a crash reproducible
//! ([`Rng`]).

/// The kinds of calls through the seam, for counting, crashes and faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// open of an existing file.
    Open,
    /// creation of a new file.
    Create,
    /// pread.
    Read,
    /// a batch of preads issued together (`read_each`), counted once; each of its reads is
    /// counted as a `Read` too.
    ReadEach,
    /// pwrite.
    Write,
    /// fdatasync.
    Sync,
    /// ftruncate.
    SetLen,
    /// fstat.
    Len,
    /// unlink.
    Remove,
    /// rename.
    Rename,
    /// fsync of a directory.
    SyncDir,
    /// listing of a directory.
    List,
    /// the directory lock.
    Lock,
    /// the direct-I/O probe.
    Probe,
    /// mkdir -p.
    CreateDir,
}

impl OpKind {
    /// Whether the call changes the file system.
    pub fn mutates(self) -> bool {
        matches!(
            self,
            OpKind::Create
                | OpKind::Write
                | OpKind::Sync
                | OpKind::SetLen
                | OpKind::Remove
                | OpKind::Rename
                | OpKind::SyncDir
        )
    }
}

/// Which calls count towards a crash point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashOn {
    /// Every call that changes the file system.
    Mutation,
    /// fdatasync and directory fsync only.
    Sync,
}

/// What survives a crash of the pending (unsynced) operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Survival {
    /// Nothing: only what was synced.
    DropAll,
    /// The first k pending operations, in issue order (k random, 0 to all).
    Prefix,
    /// Every pending operation, but the last write is torn: only a random prefix of its
    /// sectors (a multiple of `tear_align` bytes, 512 or 4096) reaches the disk.
    TearLast {
        /// Granularity of the tear.
        tear_align: usize,
    },
    /// Each sector of each pending write, and each pending truncation and directory operation,
    /// survives or not at random, independently: the device reorders freely.
    RandomSectors,
}

impl Survival {
    /// Every mode, for tests that pick one.
    pub const ALL: [Survival; 5] = [
        Survival::DropAll,
        Survival::Prefix,
        Survival::TearLast { tear_align: 512 },
        Survival::TearLast { tear_align: 4096 },
        Survival::RandomSectors,
    ];
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultError {
    /// EIO.
    Eio,
    /// ENOSPC.
    Enospc,
    /// A short transfer: a read or write moves only part of its bytes (aligned to the direct
    /// I/O block where that applies) and succeeds. Other calls are not affected.
    Short,
}

/// One injected fault: the `nth` call (counting from 0) of kind `kind` fails with `error`;
/// with `sticky`, every later call of that kind too, until [`Sim::clear_faults`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The kind of call.
    pub kind: OpKind,
    /// Which one.
    pub nth: u64,
    /// What it returns.
    pub error: FaultError,
    /// And all later ones.
    pub sticky: bool,
}

/// Shape of the simulated device and file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// O_DIRECT works.
    pub direct: bool,
    /// Direct-I/O offset and length alignment (statx DIOALIGN).
    pub dio_align: u32,
    /// File system block size.
    pub fs_block: u32,
    /// Direct-I/O memory alignment.
    pub mem_align: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            direct: true,
            dio_align: 512,
            fs_block: 4096,
            mem_align: 512,
        }
    }
}

/// A small deterministic generator (xorshift64*), so that a crash is reproducible from a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next_u64() & (1 << 40) != 0
    }
}
