//! Shared-memory segments that hold rings, doorbells and a user area.
//!
//! A segment is created exclusively with mode 0600 and its whole size reserved with
//! `fallocate`, so a full `/dev/shm` fails here with [`Error::NoSpace`] instead of killing a
//! process with SIGBUS on first touch. It starts with a header (magic, version, a layout tag
//! that changes whenever a shared structure's size does, sizes, the owner's identity) and a
//! table of ring descriptors; all references inside are offsets, never pointers. An attaching
//! process copies the header once and validates every field before it maps a single ring;
//! anything off is [`Error::SegmentMismatch`].
//!
//! The owner holds an exclusive `flock` on its (close-on-exec) descriptor for its lifetime and
//! records its pid and start time. The segment is stale when that lock is free or that process
//! is gone; [`Segment::create`] replaces a stale segment of the same name, and
//! [`Segment::remove_stale`] cleans one up. Both checks are needed: a child forked without exec
//! inherits the descriptor and keeps the lock held after the owner died.
//!
//! Anonymous segments (`memfd_create`) suit a parent that hands the descriptor to children.
//!
//! Why not the `shared_memory` crate: it leaks the segment when its owner crashes, does not
//! reserve space, and has had no release since 2022. This is a thin layer over `rustix`.

use crate::doorbell::{Doorbell, ParkMode};
use crate::error::{Error, Result};
use crate::liveness;
use crate::ring::{Consumer, Producer, RingConfig, RingControl, RingMemory};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use rustix::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// "CLASPSHM".
const MAGIC: [u8; 8] = *b"CLASPSHM";
/// Bumped on any change of the segment format.
pub const SEGMENT_VERSION: u32 = 4;
/// Most rings in one segment: a worker of 64 executors (the most it runs) has 4 416.
pub const MAX_RINGS: usize = 8192;
/// The memory this machine has available for new allocations (`MemAvailable` of
/// `/proc/meminfo`), in bytes; `None` where that cannot be read.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Most doorbells in one segment.
pub const MAX_DOORBELLS: usize = 4096;
/// Largest segment.
pub const MAX_SEGMENT_BYTES: u64 = 64 << 30;
/// Largest user area.
pub const MAX_USER_BYTES: usize = 1 << 30;
const LINE: usize = 128;
const PAGE: usize = 4096;
const STATE_READY: u32 = 0x5245_4459; // "READY"

/// Changes whenever the size of a structure shared through the segment changes, so two builds
/// that disagree on a layout refuse each other.
const LAYOUT_TAG: u64 = (size_of::<SegmentHeader>() as u64)
    | (size_of::<RingDesc>() as u64) << 16
    | (size_of::<RingControl>() as u64) << 32
    | (size_of::<Doorbell>() as u64) << 48;

#[repr(C)]
struct SegmentHeader {
    magic: [u8; 8],
    version: u32,
    header_bytes: u32,
    layout_tag: u64,
    total_bytes: u64,
    doorbell_count: u32,
    ring_count: u32,
    doorbells_offset: u64,
    descs_offset: u64,
    user_offset: u64,
    user_bytes: u64,
    owner_pid: u32,
    _pad: u32,
    owner_start_ticks: u64,
    /// `STATE_READY` once everything above and every structure is initialised (Release).
    state: AtomicU32,
}

const _: () = assert!(size_of::<SegmentHeader>() == 96);
const _: () = assert!(size_of::<RingDesc>() == 40);

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct RingDesc {
    control_offset: u64,
    data_offset: u64,
    capacity_bytes: u64,
    max_frame_bytes: u64,
    doorbell: u32,
    _pad: u32,
}

/// One ring of a segment: its limits and the index of the doorbell its consumer parks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSpec {
    /// Capacity and maximum frame length.
    pub config: RingConfig,
    /// Index of the consumer's doorbell in the segment.
    pub doorbell: usize,
}

/// What a segment holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentLayout {
    /// Number of doorbells.
    pub doorbells: usize,
    /// The rings.
    pub rings: Vec<RingSpec>,
    /// Bytes of a free area for the user (counters for an inspector, say), 128-aligned.
    pub user_bytes: usize,
    /// Which side of the park protocol pays for the fence, for every doorbell.
    pub park_mode: ParkMode,
}

struct Offsets {
    doorbells: usize,
    descs: usize,
    rings: Vec<(usize, usize)>,
    user: usize,
    total: usize,
}

impl SegmentLayout {
    fn validate(&self) -> Result<()> {
        if self.doorbells == 0 || self.doorbells > MAX_DOORBELLS {
            return Err(Error::InvalidConfig(format!(
                "{} doorbells; a segment has 1..={MAX_DOORBELLS}",
                self.doorbells
            )));
        }
        if self.rings.len() > MAX_RINGS {
            return Err(Error::InvalidConfig(format!(
                "{} rings; a segment has at most {MAX_RINGS}",
                self.rings.len()
            )));
        }
        if self.user_bytes > MAX_USER_BYTES {
            return Err(Error::InvalidConfig(format!(
                "user area of {} bytes exceeds {MAX_USER_BYTES}",
                self.user_bytes
            )));
        }
        for (i, r) in self.rings.iter().enumerate() {
            r.config
                .validate()
                .map_err(|e| Error::InvalidConfig(format!("ring {i}: {e}")))?;
            if r.doorbell >= self.doorbells {
                return Err(Error::InvalidConfig(format!(
                    "ring {i} uses doorbell {} of {}",
                    r.doorbell, self.doorbells
                )));
            }
        }
        let total = self.offsets().total as u64;
        if total > MAX_SEGMENT_BYTES {
            return Err(Error::InvalidConfig(format!(
                "segment of {total} bytes exceeds {MAX_SEGMENT_BYTES}"
            )));
        }
        Ok(())
    }

    fn offsets(&self) -> Offsets {
        let mut at = size_of::<SegmentHeader>().next_multiple_of(LINE);
        let doorbells = at;
        at += self.doorbells * size_of::<Doorbell>();
        let descs = at;
        at = (at + self.rings.len() * size_of::<RingDesc>()).next_multiple_of(LINE);
        let mut rings = Vec::with_capacity(self.rings.len());
        for r in &self.rings {
            let control = at;
            at = (at + size_of::<RingControl>()).next_multiple_of(LINE);
            rings.push((control, at));
            at += r.config.capacity_bytes;
        }
        let user = at.next_multiple_of(LINE);
        let total = (user + self.user_bytes).next_multiple_of(PAGE);
        Offsets {
            doorbells,
            descs,
            rings,
            user,
            total,
        }
    }
}

/// A mapping; unmapped when the last handle (segment or ring end) goes.
struct Mapping {
    base: *mut u8,
    len: usize,
    /// Keeps the descriptor (and, for an owner, its lock) open as long as the mapping lives.
    fd: OwnedFd,
    /// The name to unlink when the owner's mapping goes.
    unlink_on_drop: Option<String>,
}

// SAFETY: the mapping is plain shared memory; every access to it goes through atomics or
// through the ring protocol, which orders non-atomic accesses.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(name) = &self.unlink_on_drop {
            let _ = rustix::shm::unlink(name.as_str());
        }
        // SAFETY: `base` and `len` come from the successful mmap in `map`; nothing refers to
        // the mapping any more (every ring end holds an Arc to it).
        unsafe {
            let _ = rustix::mm::munmap(self.base.cast(), self.len);
        }
    }
}

fn map(fd: OwnedFd, len: usize, unlink_on_drop: Option<String>) -> Result<Mapping> {
    // SAFETY: a fresh shared mapping of `len` bytes of `fd`; the kernel picks the address, so
    // it aliases no Rust object.
    let base = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            &fd,
            0,
        )
    }
    .map_err(|e| Error::io(format!("mmap of {len} bytes"), e))?;
    Ok(Mapping {
        base: base.cast(),
        len,
        fd,
        unlink_on_drop,
    })
}

/// A mapped, validated segment.
#[derive(Clone)]
pub struct Segment {
    map: Arc<Mapping>,
    descs: Arc<[RingDesc]>,
    doorbells_offset: usize,
    doorbell_count: usize,
    user_offset: usize,
    user_bytes: usize,
    name: Option<String>,
}

fn shm_name(name: &str) -> Result<String> {
    let bare = name.strip_prefix('/').unwrap_or(name);
    if bare.is_empty() || bare.len() > 200 || bare.contains('/') || bare.contains('\0') {
        return Err(Error::InvalidConfig(format!(
            "segment name {name:?}: 1..=200 characters, no '/' except a leading one"
        )));
    }
    Ok(format!("/{bare}"))
}

impl Segment {
    /// Creates the named segment `name` (in `/dev/shm`), exclusively, mode 0600. A stale
    /// segment of that name (its owner died) is removed first; a live one is
    /// [`Error::Exists`]. The segment is unlinked when the creator's last handle drops.
    pub fn create(name: &str, layout: &SegmentLayout) -> Result<Segment> {
        layout.validate()?;
        let name = shm_name(name)?;
        let flags =
            rustix::shm::OFlags::CREATE | rustix::shm::OFlags::EXCL | rustix::shm::OFlags::RDWR;
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        let fd = match rustix::shm::open(name.as_str(), flags, mode) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::EXIST) => {
                if !Self::remove_stale(&name)? {
                    let owner_pid = Self::owner_of(&name).unwrap_or(0);
                    return Err(Error::Exists { name, owner_pid });
                }
                rustix::shm::open(name.as_str(), flags, mode)
                    .map_err(|e| Error::io(format!("shm_open {name}"), e))?
            }
            Err(e) => return Err(Error::io(format!("shm_open {name}"), e)),
        };
        // The owner's lock: held as long as this descriptor (close-on-exec) is open.
        if let Err(e) = rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            let _ = rustix::shm::unlink(name.as_str());
            return Err(Error::io(format!("flock {name}"), e));
        }
        match Self::init(fd, layout, Some(name.clone())) {
            Ok(seg) => Ok(seg),
            Err(e) => {
                let _ = rustix::shm::unlink(name.as_str());
                Err(e)
            }
        }
    }

    /// Creates an anonymous segment (memfd). Hand it to a child with
    /// [`inheritable_fd`](Self::inheritable_fd); the child calls [`attach_fd`](Self::attach_fd).
    pub fn create_anonymous(layout: &SegmentLayout) -> Result<Segment> {
        layout.validate()?;
        let fd = rustix::fs::memfd_create("clasp-segment", rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| Error::io("memfd_create", e))?;
        let _ = rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        Self::init(fd, layout, None)
    }

    fn init(fd: OwnedFd, layout: &SegmentLayout, name: Option<String>) -> Result<Segment> {
        let off = layout.offsets();
        // A memfd's pages are the machine's memory, which `fallocate` does not refuse: the
        // kernel's out-of-memory killer would end this process (or another) instead.
        if let Some(available) = available_memory_bytes()
            && off.total as u64 > available
        {
            return Err(Error::NoSpace {
                bytes: off.total as u64,
                source: std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!("the machine has {available} bytes of memory available"),
                ),
            });
        }
        rustix::fs::fallocate(
            &fd,
            rustix::fs::FallocateFlags::empty(),
            0,
            off.total as u64,
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOSPC => Error::NoSpace {
                bytes: off.total as u64,
                source: e.into(),
            },
            e => Error::io(format!("fallocate {} bytes", off.total), e),
        })?;
        let map = map(fd, off.total, name.clone())?;
        let (pid, start) = liveness::current_process();
        let base = map.base;
        // No other process uses the segment before `state` turns READY (attach refuses it).
        // SAFETY: a fresh, zeroed, page-aligned mapping of `off.total` bytes; every write stays
        // inside the offsets `offsets()` computed for it, aligned for the written type.
        unsafe {
            for i in 0..layout.doorbells {
                base.add(off.doorbells + i * size_of::<Doorbell>())
                    .cast::<Doorbell>()
                    .write(Doorbell::with_mode(layout.park_mode));
            }
            for (i, (spec, &(control, data))) in layout.rings.iter().zip(&off.rings).enumerate() {
                base.add(control)
                    .cast::<RingControl>()
                    .write(RingControl::with_mode(layout.park_mode));
                base.add(off.descs + i * size_of::<RingDesc>())
                    .cast::<RingDesc>()
                    .write(RingDesc {
                        control_offset: control as u64,
                        data_offset: data as u64,
                        capacity_bytes: spec.config.capacity_bytes as u64,
                        max_frame_bytes: spec.config.max_frame_bytes as u64,
                        doorbell: spec.doorbell as u32,
                        _pad: 0,
                    });
            }
            base.cast::<SegmentHeader>().write(SegmentHeader {
                magic: MAGIC,
                version: SEGMENT_VERSION,
                header_bytes: size_of::<SegmentHeader>() as u32,
                layout_tag: LAYOUT_TAG,
                total_bytes: off.total as u64,
                doorbell_count: layout.doorbells as u32,
                ring_count: layout.rings.len() as u32,
                doorbells_offset: off.doorbells as u64,
                descs_offset: off.descs as u64,
                user_offset: off.user as u64,
                user_bytes: layout.user_bytes as u64,
                owner_pid: pid,
                _pad: 0,
                owner_start_ticks: start,
                state: AtomicU32::new(0),
            });
            // SYNC: segment-ready — pairs with the Acquire load in `validate_mapping`.
            (*base.cast::<SegmentHeader>())
                .state
                .store(STATE_READY, Ordering::Release);
        }
        Self::validate_mapping(Arc::new(map), name)
    }

    /// Attaches to the named segment, validating its header.
    pub fn attach(name: &str) -> Result<Segment> {
        let name = shm_name(name)?;
        let fd = rustix::shm::open(
            name.as_str(),
            rustix::shm::OFlags::RDWR,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| Error::io(format!("shm_open {name}"), e))?;
        Self::attach_fd_named(fd, Some(name))
    }

    /// Attaches to a segment by descriptor (an anonymous segment inherited from a parent).
    pub fn attach_fd(fd: OwnedFd) -> Result<Segment> {
        Self::attach_fd_named(fd, None)
    }

    fn attach_fd_named(fd: OwnedFd, name: Option<String>) -> Result<Segment> {
        let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io("fstat of the segment", e))?;
        let len = stat.st_size as u64;
        if len < size_of::<SegmentHeader>() as u64 || len > MAX_SEGMENT_BYTES {
            return Err(Error::SegmentMismatch(format!(
                "size of {len} bytes cannot hold a segment"
            )));
        }
        let map = map(fd, len as usize, None)?;
        let display = name.clone();
        Self::validate_mapping(Arc::new(map), name).map_err(|e| match (e, display) {
            (Error::SegmentMismatch(m), Some(n)) => Error::SegmentMismatch(format!("{n}: {m}")),
            (e, _) => e,
        })
    }

    /// Reads the header once and checks every field against the mapping.
    fn validate_mapping(map: Arc<Mapping>, name: Option<String>) -> Result<Segment> {
        crate::doorbell::barrier::init();
        let mismatch = |m: String| Err(Error::SegmentMismatch(m));
        let base = map.base;
        // SAFETY: the mapping holds at least a header (checked by the callers); `state` is an
        // aligned atomic at offset < len.
        let header = unsafe { &*base.cast::<SegmentHeader>() };
        // SYNC: segment-ready — pairs with the Release store in `init`.
        if header.state.load(Ordering::Acquire) != STATE_READY {
            return mismatch(
                "not a ready segment (still being created, or not a clasp segment)".into(),
            );
        }
        // SAFETY: as above; a volatile copy, so each field is read once even though another
        // process could still write it.
        let h = unsafe { std::ptr::read_volatile(base.cast::<[u8; 96]>()) };
        let u32_at = |o: usize| u32::from_ne_bytes(h[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(h[o..o + 8].try_into().unwrap());
        if h[0..8] != MAGIC {
            return mismatch(format!("bad magic {:?}", &h[0..8]));
        }
        let version = u32_at(8);
        if version != SEGMENT_VERSION {
            return mismatch(format!(
                "version {version}, this build reads {SEGMENT_VERSION}"
            ));
        }
        if u32_at(12) as usize != size_of::<SegmentHeader>() || u64_at(16) != LAYOUT_TAG {
            return mismatch(format!(
                "layout tag {:#x} (header {} bytes), this build has {LAYOUT_TAG:#x}",
                u64_at(16),
                u32_at(12)
            ));
        }
        let total = u64_at(24);
        if total != map.len as u64 {
            return mismatch(format!(
                "header says {total} bytes, the segment has {}",
                map.len
            ));
        }
        let (doorbell_count, ring_count) = (u32_at(32) as usize, u32_at(36) as usize);
        let (doorbells_offset, descs_offset) = (u64_at(40) as usize, u64_at(48) as usize);
        let (user_offset, user_bytes) = (u64_at(56) as usize, u64_at(64) as usize);
        if doorbell_count == 0 || doorbell_count > MAX_DOORBELLS || ring_count > MAX_RINGS {
            return mismatch(format!("{doorbell_count} doorbells and {ring_count} rings"));
        }
        let len = map.len;
        let in_bounds = |off: usize, n: usize, align: usize| {
            off % align == 0 && off.checked_add(n).is_some_and(|end| end <= len)
        };
        if !in_bounds(
            doorbells_offset,
            doorbell_count * size_of::<Doorbell>(),
            LINE,
        ) || !in_bounds(descs_offset, ring_count * size_of::<RingDesc>(), 8)
            || !in_bounds(user_offset, user_bytes, LINE)
            || doorbells_offset < size_of::<SegmentHeader>()
        {
            return mismatch("a table or the user area lies outside the segment".into());
        }
        let mut descs = Vec::with_capacity(ring_count);
        let mut floor = descs_offset + ring_count * size_of::<RingDesc>();
        for i in 0..ring_count {
            // SAFETY: the descriptor table is in bounds and 8-aligned (checked above); a
            // volatile read copies each descriptor once.
            let d = unsafe {
                std::ptr::read_volatile(
                    base.add(descs_offset + i * size_of::<RingDesc>())
                        .cast::<RingDesc>(),
                )
            };
            let config = RingConfig {
                capacity_bytes: d.capacity_bytes.min(usize::MAX as u64) as usize,
                max_frame_bytes: d.max_frame_bytes.min(usize::MAX as u64) as usize,
            };
            if let Err(e) = config.validate() {
                return mismatch(format!("ring {i}: {e}"));
            }
            let (control, data) = (d.control_offset as usize, d.data_offset as usize);
            if control < floor
                || !in_bounds(control, size_of::<RingControl>(), LINE)
                || data < control + size_of::<RingControl>()
                || !in_bounds(data, config.capacity_bytes, LINE)
                || d.doorbell as usize >= doorbell_count
            {
                return mismatch(format!("ring {i}'s descriptor points outside its place"));
            }
            floor = data + config.capacity_bytes;
            descs.push(d);
        }
        Ok(Segment {
            map,
            descs: descs.into(),
            doorbells_offset,
            doorbell_count,
            user_offset,
            user_bytes,
            name,
        })
    }

    /// Whether the named segment's owner is gone: its lock is free, or its process (pid plus
    /// start time) no longer runs. `None` when there is no such segment.
    fn stale_owner(name: &str) -> Result<Option<(bool, u32)>> {
        let fd = match rustix::shm::open(name, rustix::shm::OFlags::RDWR, rustix::fs::Mode::empty())
        {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(Error::io(format!("shm_open {name}"), e)),
        };
        let owner = Self::read_owner(&fd);
        let lock_free =
            rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockShared).is_ok();
        let (pid, start) = owner.unwrap_or((0, 0));
        let process_gone = pid != 0 && !liveness::is_alive(pid, start);
        Ok(Some((lock_free || process_gone, pid)))
    }

    fn read_owner(fd: &OwnedFd) -> Option<(u32, u64)> {
        let stat = rustix::fs::fstat(fd).ok()?;
        if (stat.st_size as usize) < size_of::<SegmentHeader>() {
            return None;
        }
        let map = map(
            rustix::io::dup(fd.as_fd()).ok()?,
            size_of::<SegmentHeader>(),
            None,
        )
        .ok()?;
        // SAFETY: the mapping holds a whole header; `state` is an aligned atomic in it and the
        // owner fields are copied with a volatile read after it reads READY.
        unsafe {
            let header = &*map.base.cast::<SegmentHeader>();
            if header.state.load(Ordering::Acquire) != STATE_READY {
                return None;
            }
            let pid = std::ptr::read_volatile(&raw const header.owner_pid);
            let start = std::ptr::read_volatile(&raw const header.owner_start_ticks);
            Some((pid, start))
        }
    }

    fn owner_of(name: &str) -> Option<u32> {
        let fd =
            rustix::shm::open(name, rustix::shm::OFlags::RDWR, rustix::fs::Mode::empty()).ok()?;
        Self::read_owner(&fd).map(|(pid, _)| pid)
    }

    /// Removes the named segment if its owner died. Returns whether it removed one.
    pub fn remove_stale(name: &str) -> Result<bool> {
        let name = shm_name(name)?;
        match Self::stale_owner(&name)? {
            Some((true, _)) => match rustix::shm::unlink(name.as_str()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(true),
                Err(e) => Err(Error::io(format!("shm_unlink {name}"), e)),
            },
            _ => Ok(false),
        }
    }

    /// Whether the named segment exists and its owner is alive.
    pub fn owner_alive(name: &str) -> Result<bool> {
        Ok(matches!(
            Self::stale_owner(&shm_name(name)?)?,
            Some((false, _))
        ))
    }

    /// The segment's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The segment's size.
    pub fn len_bytes(&self) -> usize {
        self.map.len
    }

    /// A duplicate of the segment's descriptor without close-on-exec, for a child process to
    /// inherit and pass to [`attach_fd`](Self::attach_fd). Keep it until the child started.
    pub fn inheritable_fd(&self) -> Result<OwnedFd> {
        rustix::io::fcntl_dupfd_cloexec(&self.map.fd, 3)
            .and_then(|fd| rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty()).map(|()| fd))
            .map_err(|e| Error::io("dup of the segment descriptor", e))
    }

    /// Number of rings.
    pub fn ring_count(&self) -> usize {
        self.descs.len()
    }

    /// The limits of ring `ring`.
    pub fn ring_config(&self, ring: usize) -> Result<RingConfig> {
        let d = self.desc(ring)?;
        Ok(RingConfig {
            capacity_bytes: d.capacity_bytes as usize,
            max_frame_bytes: d.max_frame_bytes as usize,
        })
    }

    /// Bytes published and not yet released in ring `ring` (for inspectors and metrics).
    pub fn queued_bytes(&self, ring: usize) -> Result<u64> {
        Ok(self.ring_control(ring)?.queued_bytes())
    }

    /// The doorbell where ring `ring`'s producer waits for room (for inspectors and tests).
    pub fn space_doorbell(&self, ring: usize) -> Result<&Doorbell> {
        Ok(&self.ring_control(ring)?.space)
    }

    fn ring_control(&self, ring: usize) -> Result<&RingControl> {
        let d = *self.desc(ring)?;
        // SAFETY: the control block offset was validated in bounds and aligned; the mapping
        // lives as long as `self`.
        Ok(unsafe {
            &*self
                .map
                .base
                .add(d.control_offset as usize)
                .cast::<RingControl>()
        })
    }

    fn desc(&self, ring: usize) -> Result<&RingDesc> {
        self.descs.get(ring).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "ring {ring} of a segment with {}",
                self.descs.len()
            ))
        })
    }

    /// Doorbell `index`.
    pub fn doorbell(&self, index: usize) -> Result<&Doorbell> {
        if index >= self.doorbell_count {
            return Err(Error::InvalidConfig(format!(
                "doorbell {index} of a segment with {}",
                self.doorbell_count
            )));
        }
        // SAFETY: validated in bounds and 128-aligned; initialised before READY.
        Ok(unsafe {
            &*self
                .map
                .base
                .add(self.doorbells_offset + index * size_of::<Doorbell>())
                .cast()
        })
    }

    /// The user area: (start, length). Its contents are the user's to synchronise.
    pub fn user_area(&self) -> (*mut u8, usize) {
        // SAFETY: validated in bounds.
        (
            unsafe { self.map.base.add(self.user_offset) },
            self.user_bytes,
        )
    }

    fn ring_memory(&self, ring: usize) -> Result<ShmRing> {
        let d = *self.desc(ring)?;
        let base = self.map.base;
        // SAFETY: every offset was validated in bounds and aligned when the segment was mapped.
        unsafe {
            Ok(ShmRing {
                control: base.add(d.control_offset as usize).cast(),
                data: base.add(d.data_offset as usize),
                doorbell: self.doorbell(d.doorbell as usize)?,
                config: self.ring_config(ring)?,
                _map: self.map.clone(),
            })
        }
    }

    /// Claims one end of a ring for this process: free, or held by a dead process. One
    /// compare-and-swap of the packed (pid, start time) word: of two claimers, exactly one
    /// wins, and the loser sees the winner whole.
    fn claim(ring: usize, side: &'static str, holder: &AtomicU64) -> Result<()> {
        let (pid, start) = liveness::current_process();
        let me = liveness::pack(pid, start).ok_or_else(|| {
            Error::InvalidConfig(format!("pid {pid} does not fit a ring's holder word"))
        })?;
        loop {
            let current = holder.load(Ordering::Acquire);
            if current != 0 && liveness::holder_alive(current) {
                return Err(Error::EndpointTaken {
                    ring,
                    side,
                    pid: liveness::unpack(current).0,
                });
            }
            if holder
                .compare_exchange(current, me, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(());
            }
        }
    }

    /// The producer end of ring `ring`. Fails if a live process holds it.
    pub fn producer(&self, ring: usize) -> Result<Producer<ShmRing>> {
        let mem = self.ring_memory(ring)?;
        let line = &mem.control().producer;
        Self::claim(ring, "producer", &line.holder)?;
        // SAFETY: the claim above makes this the only producer (a dead holder cannot write).
        unsafe { Producer::new(mem) }
    }

    /// The consumer end of ring `ring`. Fails if a live process holds it.
    pub fn consumer(&self, ring: usize) -> Result<Consumer<ShmRing>> {
        let mem = self.ring_memory(ring)?;
        let line = &mem.control().consumer;
        Self::claim(ring, "consumer", &line.holder)?;
        // SAFETY: the claim above makes this the only consumer.
        unsafe { Consumer::new(mem) }
    }
}

/// One ring of a mapped segment; keeps the mapping alive.
pub struct ShmRing {
    control: *const RingControl,
    data: *mut u8,
    doorbell: *const Doorbell,
    config: RingConfig,
    _map: Arc<Mapping>,
}

// SAFETY: the pointers are addresses inside `_map`, which is Send + Sync and outlives them.
unsafe impl Send for ShmRing {}

// SAFETY: built only by `Segment::ring_memory` from validated offsets: the control block,
// doorbell and `capacity_bytes` of data (128-aligned, used by this ring only) are inside the
// mapping that `_map` keeps alive; the config was validated; `Segment::producer`/`consumer`
// claim each end for one holder.
unsafe impl RingMemory for ShmRing {
    #[inline]
    fn control(&self) -> &RingControl {
        // SAFETY: see the impl's safety comment.
        unsafe { &*self.control }
    }
    #[inline]
    fn doorbell(&self) -> &Doorbell {
        // SAFETY: see the impl's safety comment.
        unsafe { &*self.doorbell }
    }
    #[inline]
    fn config(&self) -> RingConfig {
        self.config
    }
    #[inline]
    fn header(&self, offset_bytes: usize) -> &AtomicU64 {
        debug_assert!(offset_bytes % 16 == 0 && offset_bytes < self.config.capacity_bytes);
        // SAFETY: a 16-aligned offset below the capacity is an aligned word inside the data.
        unsafe { &*self.data.add(offset_bytes).cast::<AtomicU64>() }
    }
    #[inline]
    fn data(&self) -> *mut u8 {
        self.data
    }
}
