//! `getcpu` through the vDSO, without a system call.
//!
//! The I/O layer asks for the calling worker's CPU on every direct wait on a TCP or
//! UDP socket (`io::peer_cpu`): as a system call that was one of the few calls a
//! preloaded statement makes beyond the native client's (docs/RESULTS.md#tpcc-client-syscalls).
//! The kernel maps its vDSO into every process and exports `__vdso_getcpu` there on
//! x86_64 (it reads the CPU number with `RDPID` or from the per-CPU segment limit); we
//! find it in the vDSO's own ELF symbol table, located by `getauxval(AT_SYSINFO_EHDR)`.
//! Reading memory only (no loader lock, no allocation, no TLS), so the module's rules
//! hold. Where there is none (aarch64's vDSO has no `getcpu`, a kernel booted with
//! `vdso=0`, a vDSO without `DT_HASH`), [`getcpu`] is the system call as before.

use core::sync::atomic::{AtomicUsize, Ordering};

/// The vDSO's getcpu: `long getcpu(unsigned *cpu, unsigned *node, void *cache)`.
type VdsoGetcpu = unsafe extern "C" fn(*mut u32, *mut u32, *mut core::ffi::c_void) -> libc::c_long;

/// 0: not looked up yet; 1: none; anything else: its address.
static GETCPU: AtomicUsize = AtomicUsize::new(0);
const NONE: usize = 1;

/// The CPU the calling OS thread runs on (see [`super::getcpu`]), through the vDSO
/// where it has `getcpu`, else the system call.
#[inline]
pub fn getcpu() -> i32 {
    let mut f = GETCPU.load(Ordering::Acquire);
    if f == 0 {
        f = lookup().unwrap_or(NONE);
        GETCPU.store(f, Ordering::Release);
    }
    if f == NONE {
        return super::getcpu_syscall();
    }
    let mut cpu: u32 = 0;
    // SAFETY: `f` is the vDSO's `__vdso_getcpu` (found by [`lookup`]), whose C prototype is
    // `VdsoGetcpu`; it writes one u32, and the node and cache pointers may be null.
    let r = unsafe {
        let f: VdsoGetcpu = core::mem::transmute(f);
        f(&mut cpu, core::ptr::null_mut(), core::ptr::null_mut())
    };
    if r < 0 {
        -1
    } else {
        cpu as i32
    }
}

/// The symbol the vDSO exports `getcpu` under on this architecture.
#[cfg(target_arch = "x86_64")]
const SYMBOL: &[u8] = b"__vdso_getcpu";
#[cfg(not(target_arch = "x86_64"))]
const SYMBOL: &[u8] = b"";

// The ELF constants and offsets read below (elf(5)), for 64-bit objects.
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: i64 = 0;
const DT_HASH: i64 = 4;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const STT_FUNC: u8 = 2;
const SYM_SIZE: usize = 24;

/// Finds [`SYMBOL`] in the vDSO's dynamic symbol table: its address, or `None`.
#[cold]
fn lookup() -> Option<usize> {
    if SYMBOL.is_empty() {
        return None;
    }
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
    if base == 0 {
        return None;
    }
    // SAFETY: `base` is the start of the vDSO image the kernel mapped into this process
    // (readable for the process's lifetime), a complete ELF object; every read below
    // follows its own headers and stays inside it.
    unsafe { find_symbol(base) }
}

/// A `T` read from address `a`, unaligned.
///
/// # Safety
/// `a` is readable for `size_of::<T>()` bytes.
#[inline]
unsafe fn rd<T: Copy>(a: usize) -> T {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::read_unaligned(a as *const T) }
}

/// # Safety
/// `base` is the start of a mapped, well-formed 64-bit ELF shared object: every
/// address read below comes from its own headers and lies inside it.
unsafe fn find_symbol(base: usize) -> Option<usize> {
    // SAFETY: the ELF header's identification and the program header table's place.
    let (magic, class, phoff, phentsize, phnum) = unsafe {
        (
            rd::<u32>(base),
            rd::<u8>(base + 4),
            rd::<u64>(base + 32) as usize,
            rd::<u16>(base + 54) as usize,
            rd::<u16>(base + 56) as usize,
        )
    };
    if magic != u32::from_le_bytes(*b"\x7fELF") || class != 2 {
        return None; // not ELF, or not 64-bit
    }
    let (mut load_bias, mut dynamic) = (None, None);
    for i in 0..phnum {
        let ph = base + phoff + i * phentsize;
        // SAFETY: program header `i` (p_type, p_offset, p_vaddr).
        let (kind, offset, vaddr) = unsafe { (rd::<u32>(ph), rd::<u64>(ph + 8) as usize, rd::<u64>(ph + 16) as usize) };
        match kind {
            PT_LOAD if load_bias.is_none() => load_bias = Some((base + offset).wrapping_sub(vaddr)),
            PT_DYNAMIC => dynamic = Some(base + offset),
            _ => {}
        }
    }
    let (bias, mut d) = (load_bias?, dynamic?);
    let (mut hash, mut strtab, mut symtab) = (None, None, None);
    loop {
        // SAFETY: one entry of the dynamic section (d_tag, d_val), which DT_NULL ends.
        let (tag, val) = unsafe { (rd::<i64>(d), rd::<u64>(d + 8) as usize) };
        match tag {
            DT_NULL => break,
            DT_HASH => hash = Some(bias.wrapping_add(val)),
            DT_STRTAB => strtab = Some(bias.wrapping_add(val)),
            DT_SYMTAB => symtab = Some(bias.wrapping_add(val)),
            _ => {}
        }
        d += 16;
    }
    let (hash, strtab, symtab) = (hash?, strtab?, symtab?);
    // SAFETY: DT_HASH's second word, nchain: the number of symbols.
    let count = unsafe { rd::<u32>(hash + 4) } as usize;
    for i in 0..count {
        let sym = symtab + i * SYM_SIZE;
        // SAFETY: symbol `i` (st_name, st_info, st_shndx, st_value).
        let (name, info, shndx, value) =
            unsafe { (rd::<u32>(sym) as usize, rd::<u8>(sym + 4), rd::<u16>(sym + 6), rd::<u64>(sym + 8) as usize) };
        if info & 0xf != STT_FUNC || shndx == 0 || value == 0 {
            continue;
        }
        // SAFETY: the name is a NUL-terminated string in the string table.
        let s = unsafe { core::ffi::CStr::from_ptr((strtab + name) as *const libc::c_char) };
        if s.to_bytes() == SYMBOL {
            return Some(bias.wrapping_add(value));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    /// Pinned to one CPU, the vDSO's answer is the system call's (and on x86_64 the
    /// vDSO has it: no silent fallback).
    #[test]
    fn vdso_getcpu_agrees_with_the_system_call() {
        let cpu = super::super::getcpu_syscall();
        assert!(cpu >= 0);
        // SAFETY: all-zero is a valid (empty) cpu_set_t; CPU_SET writes inside it.
        let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        // SAFETY: a valid set of its own size, for the calling thread.
        assert_eq!(unsafe { libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) }, 0);
        for _ in 0..100 {
            assert_eq!(super::getcpu(), super::super::getcpu_syscall());
        }
        #[cfg(target_arch = "x86_64")]
        assert!(super::lookup().is_some(), "no __vdso_getcpu found");
    }
}
