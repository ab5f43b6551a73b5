//! Names for code addresses, for the report: `dladdr` first (the dynamic symbol
//! table), then the object file's own `.symtab` (static functions and programs not
//! linked with `-rdynamic` have their names only there, unless stripped). Files are
//! read with raw system calls (the runtime never calls its own exports), and each
//! object's function symbols are read once per [`Names`].

use std::collections::HashMap;

use crate::base::sys;

/// Function symbols of one object: (start, size, name), sorted by start; addresses are
/// the file's own (link-time) virtual addresses.
type Functions = Vec<(usize, usize, String)>;

/// A cache of objects' symbol tables for one report.
#[derive(Default)]
pub struct Names {
    objects: HashMap<String, Functions>,
}

impl Names {
    /// `symbol+0xOFF (object)`, or `object+0xOFF` without a symbol anywhere, or the bare
    /// address. `addr` is a return address or a code address plus one: the lookup is
    /// for `addr - 1`, the offset shown is from the symbol to `addr - 1`.
    pub fn name_of(&mut self, addr: usize) -> String {
        if addr == 0 {
            return "?".into();
        }
        let at = addr - 1;
        // SAFETY: dladdr only reads the loader's tables; `info` is a valid out-parameter.
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::dladdr(at as *const libc::c_void, &mut info) } == 0 || info.dli_fname.is_null() {
            return format!("{at:#x}");
        }
        // SAFETY: dladdr's strings are NUL-terminated and owned by the loader.
        let path = unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
        let object = path.rsplit('/').next().unwrap_or("").to_string();
        if !info.dli_sname.is_null() {
            // SAFETY: as above.
            let sym = unsafe { core::ffi::CStr::from_ptr(info.dli_sname) }.to_string_lossy();
            return format!("{sym}+{:#x} ({object})", at - info.dli_saddr as usize);
        }
        let base = info.dli_fbase as usize;
        let file_path = if path.is_empty() || !path.contains('/') { "/proc/self/exe".to_string() } else { path.clone() };
        let functions = self.objects.entry(file_path.clone()).or_insert_with(|| read_functions(&file_path).unwrap_or_default());
        // A position-dependent executable is linked at its load address (bias 0).
        let bias = if functions.first().is_some_and(|f| f.0 >= base) { 0 } else { base };
        let vaddr = at - bias;
        let i = functions.partition_point(|f| f.0 <= vaddr);
        match i.checked_sub(1).map(|k| &functions[k]) {
            Some((start, size, name)) if vaddr < start + (*size).max(1) => format!("{name}+{:#x} ({object})", vaddr - start),
            _ => format!("{object}+{:#x}", at - base),
        }
    }
}

/// Reads exactly `buf.len()` bytes at `off` of `fd`.
fn pread_exact(fd: i32, off: u64, buf: &mut [u8]) -> Option<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = sys::pread64(fd, &mut buf[done..], off + done as u64);
        if n <= 0 {
            return None;
        }
        done += n as usize;
    }
    Some(())
}

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes([b[o], b[o + 1]]) as usize
}
fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default()) as usize
}
fn u64_at(b: &[u8], o: usize) -> usize {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default()) as usize
}

/// The function symbols of the ELF64 little-endian file at `path`, from `.symtab`.
/// (A transient descriptor, for a stall report's symbols: see `metrics::write_file`.)
fn read_functions(path: &str) -> Option<Functions> {
    let fd = crate::base::own_fds::open_read(path.as_bytes())?;
    let r = read_functions_fd(fd);
    crate::base::own_fds::close(fd);
    r
}

fn read_functions_fd(fd: i32) -> Option<Functions> {
    let mut eh = [0u8; 64];
    pread_exact(fd, 0, &mut eh)?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let (shoff, shentsize, shnum) = (u64_at(&eh, 0x28), u16_at(&eh, 0x3a), u16_at(&eh, 0x3c));
    if shentsize < 64 || shnum == 0 || shnum > 65_535 {
        return None;
    }
    let mut sh = vec![0u8; shentsize * shnum];
    pread_exact(fd, shoff as u64, &mut sh)?;
    let section = |i: usize| &sh[i * shentsize..(i + 1) * shentsize];
    // SHT_SYMTAB = 2; its sh_link is the string table.
    let symtab = (0..shnum).map(section).find(|s| u32_at(s, 4) == 2)?;
    let (sym_off, sym_size, link, entsize) =
        (u64_at(symtab, 0x18), u64_at(symtab, 0x20), u32_at(symtab, 0x28), u64_at(symtab, 0x38));
    if link >= shnum || entsize < 24 || sym_size > (256 << 20) {
        return None;
    }
    let strtab = section(link);
    let (str_off, str_size) = (u64_at(strtab, 0x18), u64_at(strtab, 0x20));
    if str_size > (256 << 20) {
        return None;
    }
    let mut syms = vec![0u8; sym_size];
    pread_exact(fd, sym_off as u64, &mut syms)?;
    let mut strs = vec![0u8; str_size];
    pread_exact(fd, str_off as u64, &mut strs)?;
    let mut out = Functions::new();
    for s in syms.chunks_exact(entsize) {
        // STT_FUNC = 2 in the low nibble of st_info; a defined symbol has st_shndx != 0.
        if s[4] & 0xf != 2 || u16_at(s, 6) == 0 {
            continue;
        }
        let (name_off, value, size) = (u32_at(s, 0), u64_at(s, 8), u64_at(s, 16));
        let Some(rest) = strs.get(name_off..) else { continue };
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        out.push((value, size, String::from_utf8_lossy(&rest[..end]).into_owned()));
    }
    out.sort_by_key(|f| f.0);
    Some(out)
}
