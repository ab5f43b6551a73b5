//! All exports of libfiberize.so, one module per family.

/// Defines a sync export (mutex, rwlock, sem, spin, cond, barrier, once): when the gate is
/// on it calls `$ours` (the runtime), else `$real` (glibc's own function). Each use is one
/// entry naming the symbol, its arguments, the runtime call and the real call.
///
/// `; alias __name` adds glibc's alias of the symbol (same signature, forwards to it).
macro_rules! sync_export {
    (fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $ours:expr, $real:expr; alias $alias:ident) => {
        sync_export!(fn $name($($arg: $ty),*) -> $ret => $ours, $real);
        sync_alias!(fn $alias($($arg: $ty),*) -> $ret => $name);
    };
    (fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $ours:expr, $real:expr) => {
        /// # Safety
        #[doc = concat!("As glibc's `", stringify!($name), "`.")]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY (both arms): the program's arguments are valid as glibc's function of the same
            // name requires of them (initialised objects or storage for one, a held mutex where it asks
            // for one, valid pointers; this fn's # Safety); the runtime's `$ours` and glibc's `$real`
            // take that same contract.
            unsafe {
                if $crate::gate::enabled() {
                    $ours
                } else {
                    $real
                }
            }
        }
    };
}

/// Defines one of glibc's `__pthread_*` aliases: the same signature, forwarding to `$target`.
macro_rules! sync_alias {
    (fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $target:ident) => {
        #[doc = concat!("glibc alias of `", stringify!($target), "`.")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($target), "`.")]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: same arguments, same contract: the alias forwards to `$target`, whose # Safety
            // is this fn's.
            unsafe { $target($($arg),*) }
        }
    };
}

pub mod barrier;
pub mod cond;
pub mod io;
pub mod marker;
pub mod memory;
pub mod mutex;
pub mod offload;
pub mod once;
pub mod process;
pub mod rwlock;
pub mod sem;
pub mod signal;
pub mod sleep;
pub mod spin;
pub mod syscall;
pub mod thread;
pub mod thread_state;
pub mod time;
pub mod wtls;
