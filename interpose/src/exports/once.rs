//! `pthread_once`, its glibc alias `__pthread_once`, and C11 `call_once` (whose
//! `once_flag` is a `pthread_once_t`; glibc's own `call_once` calls its internal
//! `__pthread_once`, which we could not intercept, so we export it too).

use libc::{c_int, pthread_once_t};

use crate::gate::enabled;
use fiberize_rt::sync::once::{self, InitRoutine};

/// glibc's own functions, declared once where the runtime needs them too.
use fiberize_rt::sync::once::real;

sync_export!(fn pthread_once(o: *mut pthread_once_t, f: InitRoutine) -> c_int
    => once::once(o, f), real::pthread_once(o, f); alias __pthread_once);

/// C11 `call_once(once_flag *, void (*)(void))`.
///
/// # Safety
/// As glibc's `call_once`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn call_once(o: *mut pthread_once_t, f: InitRoutine) {
    // SAFETY: `o` is a once_flag (a pthread_once_t, ONCE_FLAG_INIT) and `f` a function
    // (call_once's contract), as `once::once` requires.
    unsafe {
        if enabled() {
            once::once(o, f);
        } else {
            real::call_once(o, f)
        }
    }
}
