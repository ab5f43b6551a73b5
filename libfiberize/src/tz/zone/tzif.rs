//! Finding the zone file glibc reads for the current `TZ`, reading it with raw system
//! calls, and parsing it (TZif, RFC 8536) into a [`Zone`] the way glibc's
//! `__tzfile_read` accepts it.

use super::*;
use crate::base::config;
use crate::base::sys;

const MAX_FILE: usize = 1 << 20;
const AT_SECURE: libc::c_ulong = 23;

pub(super) fn find_or_load() -> *const Zone {
    // SAFETY: getauxval has no preconditions.
    if unsafe { libc::getauxval(AT_SECURE) } != 0 {
        return core::ptr::null();
    }
    let mut path = [0u8; 4096];
    let Some(len) = zone_path(&mut path) else { return core::ptr::null() };
    let Some(fd) = open(&path[..=len]) else { return core::ptr::null() };
    let z = load(fd);
    close(fd);
    z
}

/// The file glibc's tzset reads for the current TZ, NUL-terminated in `buf`;
/// returns its length without the NUL. None when glibc reads no file for it.
fn zone_path(buf: &mut [u8; 4096]) -> Option<usize> {
    let tz: &[u8] = match config::env_str(b"TZ\0") {
        None => b"/etc/localtime",
        Some(b"") => b"Universal",
        Some(v) => v.strip_prefix(b":").unwrap_or(v),
    };
    if tz.is_empty() {
        return None;
    }
    let mut n = 0;
    let mut put = |part: &[u8]| -> Option<()> {
        let end = n + part.len();
        if end >= buf.len() || part.contains(&0) {
            return None;
        }
        buf[n..end].copy_from_slice(part);
        n = end;
        Some(())
    };
    if tz[0] != b'/' {
        let dir: &[u8] = match config::env_str(b"TZDIR\0") {
            Some(d) if !d.is_empty() => d,
            _ => b"/usr/share/zoneinfo",
        };
        put(dir)?;
        put(b"/")?;
    }
    put(tz)?;
    buf[n] = 0;
    Some(n)
}

/// Opens a zone file for the length of its read, at the lowest free number: glibc's
/// own `localtime` opens it there natively too, so a program thread that opens a file
/// meanwhile gets the number it would get natively beside glibc's read. Opened and
/// closed with the program's closes kept out (`own_fds::runtime_alone`).
fn open(path_nul: &[u8]) -> Option<usize> {
    crate::base::own_fds::open_nul(path_nul, libc::O_RDONLY).map(|fd| fd as usize)
}

fn close(fd: usize) {
    crate::base::own_fds::close(fd as i32);
}

fn load(fd: usize) -> *const Zone {
    // SAFETY: all-zero is a valid struct stat; fstat fills it.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    if sys::fstat(fd as i32, &mut st) != 0 {
        return core::ptr::null();
    }
    let ident = Ident { dev: st.st_dev, ino: st.st_ino, size: st.st_size, mtime: st.st_mtime, mtime_ns: st.st_mtime_nsec };
    let cur = ACTIVE.load(Acquire);
    // SAFETY: zones are never freed.
    if !cur.is_null() && unsafe { (*cur).ident } == ident {
        return cur;
    }
    let mut free_slot = None;
    for (i, slot) in ZONES.iter().enumerate() {
        let z = slot.load(Acquire);
        if z.is_null() {
            free_slot.get_or_insert(i);
        // SAFETY: zones are never freed.
        } else if unsafe { (*z).ident } == ident {
            // SAFETY: as above.
            return if unsafe { (*z).bad.load(Relaxed) } { core::ptr::null() } else { z };
        }
    }
    let Some(slot) = free_slot else { return core::ptr::null() };
    if st.st_size <= 0 || st.st_size as usize > MAX_FILE {
        return core::ptr::null();
    }
    let mut data = vec![0u8; st.st_size as usize];
    let mut got = 0;
    while got < data.len() {
        let n = sys::read(fd as i32, &mut data[got..]);
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n <= 0 {
            return core::ptr::null();
        }
        got += n as usize;
    }
    let Some(z) = parse(&data, ident) else { return core::ptr::null() };
    let z = Box::into_raw(Box::new(z));
    ZONES[slot].store(z, Release);
    z
}

fn be32(d: &[u8], at: usize) -> Option<i64> {
    let b = d.get(at..at + 4)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64)
}

fn be64(d: &[u8], at: usize) -> Option<i64> {
    let b = d.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(i64::from_be_bytes(a))
}

/// Parses a TZif file (RFC 8536) the way glibc's `__tzfile_read` accepts it, and
/// refuses whatever the cache does not handle (version 1, leap seconds, unsorted
/// transitions, names not inside the name table).
fn parse(d: &[u8], ident: Ident) -> Option<Zone> {
    struct Counts {
        isut: usize,
        isstd: usize,
        leap: usize,
        time: usize,
        typ: usize,
        chr: usize,
    }
    let counts = |at: usize| -> Option<Counts> {
        if d.get(at..at + 4)? != b"TZif" {
            return None;
        }
        let c = |i: usize| be32(d, at + 20 + 4 * i).and_then(|v| usize::try_from(v as u32).ok());
        Some(Counts { isut: c(0)?, isstd: c(1)?, leap: c(2)?, time: c(3)?, typ: c(4)?, chr: c(5)? })
    };
    let v1 = counts(0)?;
    if *d.get(4)? == 0 {
        return None; // version 1: 32-bit data only
    }
    let skip = v1.time * 5 + v1.typ * 6 + v1.chr + v1.leap * 8 + v1.isstd + v1.isut;
    let h2 = 44 + skip;
    let c = counts(h2)?;
    if c.isstd > c.typ || c.isut > c.typ || c.leap != 0 || c.typ == 0 || c.typ > 256 {
        return None;
    }
    let mut at = h2 + 44;
    let mut trans = Vec::with_capacity(c.time);
    for i in 0..c.time {
        trans.push(be64(d, at + 8 * i)?);
    }
    at += 8 * c.time;
    let idx: Vec<u8> = d.get(at..at + c.time)?.to_vec();
    at += c.time;
    let mut types = Vec::with_capacity(c.typ);
    for i in 0..c.typ {
        let p = at + 6 * i;
        let isdst = *d.get(p + 4)?;
        let name = *d.get(p + 5)? as usize;
        if isdst > 1 || name >= c.chr {
            return None;
        }
        types.push(TType { utoff: be32(d, p)?, isdst: isdst as c_int, name });
    }
    at += 6 * c.typ;
    let chars: Vec<u8> = d.get(at..at + c.chr)?.to_vec();
    at += c.chr + c.isstd + c.isut; // no leap records (checked above)
                                    // Footer: "\n<POSIX TZ>\n"; glibc ignores an empty one.
    if *d.get(at)? != b'\n' || *d.last()? != b'\n' || d.len() < at + 2 {
        return None;
    }
    let has_spec = d.len() > at + 2;
    if idx.iter().any(|&i| i as usize >= c.typ)
        || trans.windows(2).any(|w| w[0] >= w[1])
        || types.iter().any(|t| !chars[t.name..].contains(&0))
        || !chars.contains(&0)
    {
        return None;
    }
    // daylight and timezone as glibc computes them: the last standard-time type
    // transitioned to gives timezone; daylight if any DST type comes after it, or
    // failing that, before it.
    let (mut daylight, stdoff) = (0, if trans.is_empty() { types[0].utoff } else { 0 });
    let mut stdoff = stdoff;
    if !trans.is_empty() {
        let mut i = trans.len();
        let mut found = None;
        while i > 0 {
            i -= 1;
            let t = types[idx[i] as usize];
            if t.isdst == 0 {
                stdoff = t.utoff;
                found = Some(i);
                break;
            }
            daylight = 1;
        }
        if let Some(mut j) = found {
            while j > 0 && daylight == 0 {
                j -= 1;
                daylight = types[idx[j] as usize].isdst;
            }
        }
    }
    let entries = (0..=trans.len())
        .map(|_| Entry {
            state: AtomicU8::new(E_UNKNOWN),
            zone: AtomicUsize::new(0),
            tzname0: AtomicUsize::new(0),
            tzname1: AtomicUsize::new(0),
        })
        .collect();
    Some(Zone {
        ident,
        trans: trans.into_boxed_slice(),
        idx: idx.into_boxed_slice(),
        types: types.into_boxed_slice(),
        chars: chars.into_boxed_slice(),
        has_spec,
        daylight,
        timezone: -stdoff,
        entries,
        bad: AtomicBool::new(false),
        hint: Hint(AtomicUsize::new(0)),
    })
}
