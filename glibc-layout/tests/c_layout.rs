//! Compares the crate with the real glibc: a C program built against the system
//! headers prints sizes, alignments, field offsets and the raw bytes of every static
//! initializer and of objects made by the real `pthread_*_init` functions; every value
//! is compared with the crate's constants and offsets.

use std::collections::BTreeMap;
use std::process::Command;

use glibc_layout::*;
use memoffset::offset_of;

const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <sched.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

static void hex(const char *key, const void *p, size_t n) {
    printf("bytes.%s ", key);
    for (size_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)p)[i]);
    printf("\n");
}
static void check(const char *what, int rc) { if (rc) printf("error.%s %d\n", what, rc); }

#define T(t) printf("size.%s %zu\nalign.%s %zu\n", #t, sizeof(t), #t, _Alignof(t))
#define OFF(t, name, f) printf("off.%s.%s %zu\n", name, #f, offsetof(t, __data.f))

static void mutex_with(const char *name, int type, int robust, int proto, int pshared) {
    pthread_mutexattr_t a; pthread_mutex_t m;
    memset(&m, 0xa5, sizeof m);
    check(name, pthread_mutexattr_init(&a));
    if (type >= 0) check(name, pthread_mutexattr_settype(&a, type));
    if (robust) check(name, pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST));
    if (proto) check(name, pthread_mutexattr_setprotocol(&a, proto));
    if (pshared) check(name, pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    check(name, pthread_mutex_init(&m, &a));
    hex(name, &m, sizeof m);
    check(name, pthread_mutex_destroy(&m));
}

static void cond_with(const char *name, int clock, int pshared) {
    pthread_condattr_t a; pthread_cond_t c;
    memset(&c, 0xa5, sizeof c);
    check(name, pthread_condattr_init(&a));
    if (clock >= 0) check(name, pthread_condattr_setclock(&a, clock));
    if (pshared) check(name, pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    check(name, pthread_cond_init(&c, &a));
    hex(name, &c, sizeof c);
}

static void rwlock_with(const char *name, int kind, int pshared) {
    pthread_rwlockattr_t a; pthread_rwlock_t l;
    memset(&l, 0xa5, sizeof l);
    check(name, pthread_rwlockattr_init(&a));
    if (kind >= 0) check(name, pthread_rwlockattr_setkind_np(&a, kind));
    if (pshared) check(name, pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    check(name, pthread_rwlock_init(&l, &a));
    hex(name, &l, sizeof l);
}

int main(void) {
    T(pthread_mutex_t); T(pthread_cond_t); T(pthread_rwlock_t);
    T(pthread_mutexattr_t); T(pthread_condattr_t); T(pthread_rwlockattr_t);
    T(pthread_barrier_t); T(pthread_barrierattr_t); T(sem_t);
    T(pthread_once_t); T(pthread_spinlock_t); T(pthread_attr_t);

    OFF(pthread_mutex_t, "mutex", __lock); OFF(pthread_mutex_t, "mutex", __count);
    OFF(pthread_mutex_t, "mutex", __owner); OFF(pthread_mutex_t, "mutex", __nusers);
    OFF(pthread_mutex_t, "mutex", __kind); OFF(pthread_mutex_t, "mutex", __spins);
#ifdef __x86_64__
    OFF(pthread_mutex_t, "mutex", __elision);
#endif
    OFF(pthread_mutex_t, "mutex", __list);
    OFF(pthread_cond_t, "cond", __wseq); OFF(pthread_cond_t, "cond", __g1_start);
    OFF(pthread_cond_t, "cond", __g_refs); OFF(pthread_cond_t, "cond", __g_size);
    OFF(pthread_cond_t, "cond", __g1_orig_size); OFF(pthread_cond_t, "cond", __wrefs);
    OFF(pthread_cond_t, "cond", __g_signals);
    OFF(pthread_rwlock_t, "rwlock", __readers); OFF(pthread_rwlock_t, "rwlock", __writers);
    OFF(pthread_rwlock_t, "rwlock", __wrphase_futex);
    OFF(pthread_rwlock_t, "rwlock", __writers_futex);
    OFF(pthread_rwlock_t, "rwlock", __pad3); OFF(pthread_rwlock_t, "rwlock", __pad4);
    OFF(pthread_rwlock_t, "rwlock", __cur_writer); OFF(pthread_rwlock_t, "rwlock", __shared);
#ifdef __x86_64__
    OFF(pthread_rwlock_t, "rwlock", __rwelision);
#endif
    OFF(pthread_rwlock_t, "rwlock", __pad1);
    OFF(pthread_rwlock_t, "rwlock", __pad2); OFF(pthread_rwlock_t, "rwlock", __flags);

    { pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; hex("PTHREAD_MUTEX_INITIALIZER", &m, sizeof m); }
    { pthread_mutex_t m = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
      hex("PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP", &m, sizeof m); }
    { pthread_mutex_t m = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
      hex("PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP", &m, sizeof m); }
    { pthread_mutex_t m = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
      hex("PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP", &m, sizeof m); }
    { pthread_cond_t c = PTHREAD_COND_INITIALIZER; hex("PTHREAD_COND_INITIALIZER", &c, sizeof c); }
    { pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER; hex("PTHREAD_RWLOCK_INITIALIZER", &l, sizeof l); }
    { pthread_rwlock_t l = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
      hex("PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP", &l, sizeof l); }

    { pthread_mutex_t m; memset(&m, 0xa5, sizeof m);
      check("mutex_init_null", pthread_mutex_init(&m, NULL)); hex("mutex_init_null", &m, sizeof m);
      check("mutex_destroyed", pthread_mutex_destroy(&m)); hex("mutex_destroyed", &m, sizeof m); }
    mutex_with("mutex_init_normal", PTHREAD_MUTEX_NORMAL, 0, 0, 0);
    mutex_with("mutex_init_recursive", PTHREAD_MUTEX_RECURSIVE, 0, 0, 0);
    mutex_with("mutex_init_errorcheck", PTHREAD_MUTEX_ERRORCHECK, 0, 0, 0);
    mutex_with("mutex_init_adaptive", PTHREAD_MUTEX_ADAPTIVE_NP, 0, 0, 0);
    mutex_with("mutex_init_robust", -1, 1, 0, 0);
    mutex_with("mutex_init_prio_inherit", -1, 0, PTHREAD_PRIO_INHERIT, 0);
    mutex_with("mutex_init_prio_protect", -1, 0, PTHREAD_PRIO_PROTECT, 0);
    mutex_with("mutex_init_pshared", -1, 0, 0, 1);
    mutex_with("mutex_init_recursive_pshared", PTHREAD_MUTEX_RECURSIVE, 0, 0, 1);
    printf("fifo_min_prio %d\n", sched_get_priority_min(SCHED_FIFO));

    cond_with("cond_init_default", -1, 0);
    cond_with("cond_init_monotonic", CLOCK_MONOTONIC, 0);
    cond_with("cond_init_pshared", -1, 1);
    cond_with("cond_init_monotonic_pshared", CLOCK_MONOTONIC, 1);

    rwlock_with("rwlock_init_default", -1, 0);
    rwlock_with("rwlock_init_prefer_writer", PTHREAD_RWLOCK_PREFER_WRITER_NP, 0);
    rwlock_with("rwlock_init_writer_nonrecursive", PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, 0);
    rwlock_with("rwlock_init_pshared", -1, 1);
    return 0;
}
"#;

/// The C compiler for this test's own architecture: Debian's name for the aarch64 gcc
/// (native or cross), plain `cc` on x86_64.
const CC: &str = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu-gcc" } else { "cc" };

/// Runs the compiled C program. A cross-built aarch64 test runs under qemu-user, which
/// cannot start another aarch64 program without binfmt_misc (the spawn's child exits
/// with 127): then it runs the program under `qemu-aarch64-static` itself.
fn run_program(exe: &std::path::Path) -> std::process::Output {
    let out = Command::new(exe).output();
    let exec_failed = match &out {
        Ok(o) => o.status.code() == Some(127) && o.stdout.is_empty(),
        Err(_) => true,
    };
    if cfg!(target_arch = "aarch64") && exec_failed {
        return Command::new("qemu-aarch64-static").arg(exe).output().expect("run the C program under qemu");
    }
    out.expect("run the C program")
}

/// Builds and runs the C program; returns its `key value` lines.
fn run_c_program() -> BTreeMap<String, String> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("glibc-layout-c");
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, PROGRAM).unwrap();
    let cc = Command::new(CC)
        .args(["-std=gnu11", "-O0", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-pthread")
        .output()
        .expect("run cc");
    assert!(cc.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&cc.stderr));
    let out = run_program(&exe);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let (k, v) = line.split_once(' ').expect("key value");
        assert!(!k.starts_with("error."), "C program: {line}");
        assert!(map.insert(k.to_owned(), v.to_owned()).is_none(), "duplicate {k}");
    }
    map
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Zero bytes with native-endian 32-bit words at the given offsets.
fn words<const N: usize>(at: &[(usize, u32)]) -> [u8; N] {
    let mut b = [0; N];
    for &(o, v) in at {
        b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
    }
    b
}

#[test]
fn glibc_matches_the_crate() {
    let got = run_c_program();
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    let mut put = |k: &str, v: String| assert!(expected.insert(k.to_owned(), v).is_none());

    for (name, l) in [
        ("pthread_mutex_t", layouts::PTHREAD_MUTEX_T),
        ("pthread_cond_t", layouts::PTHREAD_COND_T),
        ("pthread_rwlock_t", layouts::PTHREAD_RWLOCK_T),
        ("pthread_mutexattr_t", layouts::PTHREAD_MUTEXATTR_T),
        ("pthread_condattr_t", layouts::PTHREAD_CONDATTR_T),
        ("pthread_rwlockattr_t", layouts::PTHREAD_RWLOCKATTR_T),
        ("pthread_barrier_t", layouts::PTHREAD_BARRIER_T),
        ("pthread_barrierattr_t", layouts::PTHREAD_BARRIERATTR_T),
        ("sem_t", layouts::SEM_T),
        ("pthread_once_t", layouts::PTHREAD_ONCE_T),
        ("pthread_spinlock_t", layouts::PTHREAD_SPINLOCK_T),
        ("pthread_attr_t", layouts::PTHREAD_ATTR_T),
    ] {
        put(&format!("size.{name}"), l.size.to_string());
        put(&format!("align.{name}"), l.align.to_string());
    }

    macro_rules! offsets {
        ($ty:ty, $name:literal: $($f:ident),*) => {
            $(put(concat!("off.", $name, ".__", stringify!($f)), offset_of!($ty, $f).to_string());)*
        };
    }
    offsets!(GlibcMutex, "mutex": lock, count, owner, nusers, kind, spins, list);
    #[cfg(target_arch = "x86_64")]
    offsets!(GlibcMutex, "mutex": elision);
    offsets!(GlibcCond, "cond": wseq, g1_start, g_refs, g_size, g1_orig_size, wrefs, g_signals);
    offsets!(GlibcRwlock, "rwlock": readers, writers, wrphase_futex, writers_futex, pad3, pad4,
        cur_writer, shared, pad1, pad2, flags);
    #[cfg(target_arch = "x86_64")]
    offsets!(GlibcRwlock, "rwlock": rwelision);

    for (name, bytes) in [
        ("PTHREAD_MUTEX_INITIALIZER", &PTHREAD_MUTEX_INITIALIZER),
        ("PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP", &PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP),
        ("PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP", &PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP),
        ("PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP", &PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP),
    ] {
        put(&format!("bytes.{name}"), hex(bytes));
    }
    put("bytes.PTHREAD_COND_INITIALIZER", hex(&PTHREAD_COND_INITIALIZER));
    put("bytes.PTHREAD_RWLOCK_INITIALIZER", hex(&PTHREAD_RWLOCK_INITIALIZER));
    put("bytes.PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP", hex(&PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP));

    // pthread_mutex_init: everything zero but __kind (and the PP ceiling in __lock).
    let fifo_min: u32 = got["fifo_min_prio"].parse().unwrap();
    put("fifo_min_prio", fifo_min.to_string());
    let pp_lock = fifo_min << 19;
    for (name, kind, lock) in [
        ("mutex_init_null", MUTEX_KIND_NORMAL, 0),
        ("mutex_destroyed", MUTEX_KIND_DESTROYED, 0),
        ("mutex_init_normal", MUTEX_KIND_NORMAL | MUTEX_KIND_NO_ELISION, 0),
        ("mutex_init_recursive", MUTEX_KIND_RECURSIVE, 0),
        ("mutex_init_errorcheck", MUTEX_KIND_ERRORCHECK, 0),
        ("mutex_init_adaptive", MUTEX_KIND_ADAPTIVE, 0),
        ("mutex_init_robust", MUTEX_KIND_ROBUST | MUTEX_KIND_PSHARED, 0),
        ("mutex_init_prio_inherit", MUTEX_KIND_PRIO_INHERIT, 0),
        ("mutex_init_prio_protect", MUTEX_KIND_PRIO_PROTECT, pp_lock),
        ("mutex_init_pshared", MUTEX_KIND_PSHARED, 0),
        ("mutex_init_recursive_pshared", MUTEX_KIND_RECURSIVE | MUTEX_KIND_PSHARED, 0),
    ] {
        let b: [u8; layouts::PTHREAD_MUTEX_T.size] = words(&[(0, lock), (offset_of!(MutexOverlay, kind), kind as u32)]);
        put(&format!("bytes.{name}"), hex(&b));
        let delegated = kind & !(MUTEX_KIND_TYPE_MASK | MUTEX_KIND_NO_ELISION) != 0 && kind != -1;
        assert_eq!(mutex_kind_is_delegated(kind), delegated, "{name}");
    }

    // pthread_cond_init: zero but the __wrefs flag bits.
    let flags = offset_of!(CondOverlay, flags);
    for (name, wrefs) in [
        ("cond_init_default", 0),
        ("cond_init_monotonic", COND_WREFS_CLOCK_MONOTONIC),
        ("cond_init_pshared", COND_WREFS_PSHARED),
        ("cond_init_monotonic_pshared", COND_WREFS_CLOCK_MONOTONIC | COND_WREFS_PSHARED),
    ] {
        put(&format!("bytes.{name}"), hex(&words::<48>(&[(flags, wrefs)])));
    }

    // pthread_rwlock_init: zero but __shared and __flags.
    let (shared, flags) = (offset_of!(RwlockOverlay, shared), offset_of!(RwlockOverlay, flags));
    for (name, s, f) in [
        ("rwlock_init_default", 0, RWLOCK_PREFER_READER),
        ("rwlock_init_prefer_writer", 0, RWLOCK_PREFER_WRITER),
        ("rwlock_init_writer_nonrecursive", 0, RWLOCK_PREFER_WRITER_NONRECURSIVE),
        ("rwlock_init_pshared", 1, RWLOCK_PREFER_READER),
    ] {
        put(&format!("bytes.{name}"), hex(&words::<56>(&[(shared, s), (flags, f)])));
    }

    // Compare every key both ways, listing all differences at once.
    let keys: std::collections::BTreeSet<_> = got.keys().chain(expected.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != expected.get(*k))
        .map(|k| format!("{k}: glibc {:?}, crate {:?}", got.get(k), expected.get(k)))
        .collect();
    assert!(diffs.is_empty(), "layout differences:\n{}", diffs.join("\n"));

    // The overlays' glibc-owned fields sit on glibc's offsets.
    let off = |k: &str| got[k].parse::<usize>().unwrap();
    assert_eq!(offset_of!(MutexOverlay, kind), off("off.mutex.__kind"));
    assert_eq!(offset_of!(MutexOverlay, init_state), off("off.mutex.__spins"));
    assert_eq!(offset_of!(CondOverlay, flags), off("off.cond.__wrefs"));
    assert_eq!(offset_of!(RwlockOverlay, shared), off("off.rwlock.__shared"));
    assert_eq!(offset_of!(RwlockOverlay, flags), off("off.rwlock.__flags"));
}
