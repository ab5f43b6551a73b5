//! The checks behind every variable: a value that is not what the variable takes gets
//! one `fiberize: NAME=value …` line on stderr (one raw system call: no allocation, no
//! stdio; this may run before the program's `main` and inside any export) and the
//! value used instead.

use super::env_str;

/// The words that turn a switch off.
pub(super) fn is_off(v: &[u8]) -> bool {
    matches!(v, b"off" | b"0" | b"false" | b"no" | b"OFF" | b"disable" | b"disabled")
}

/// `parts` one after the other in `buf` (cut at its end).
pub(super) fn concat_into<'a>(buf: &'a mut [u8], parts: &[&[u8]]) -> &'a [u8] {
    let mut n = 0;
    for part in parts {
        let take = part.len().min(buf.len() - n);
        buf[n..n + take].copy_from_slice(&part[..take]);
        n += take;
    }
    &buf[..n]
}

pub(super) fn trim_blanks(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// One `fiberize: …` line on stderr, written with one raw system call (this may run
/// before the program's `main` and inside any export: no allocation, no stdio).
pub(super) fn warn(parts: &[&[u8]]) {
    let mut buf = [0u8; 512];
    let mut n = 0;
    for part in [b"fiberize: ".as_slice()].iter().chain(parts.iter()).chain([b"\n".as_slice()].iter()) {
        let take = part.len().min(buf.len() - 1 - n);
        buf[n..n + take].copy_from_slice(&part[..take]);
        n += take;
    }
    if buf[n - 1] != b'\n' {
        buf[n] = b'\n';
        n += 1;
    }
    crate::base::sys::write(2, &buf[..n]);
}

/// Decimal digits of `v` (up to 20), as a small array trimmed by [`trim`].
pub(super) fn digits(v: u64) -> [u8; 20] {
    let mut out = [b' '; 20];
    let mut v = v;
    let mut i = 20;
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out
}

/// `digits` without its leading blanks.
pub(super) fn trim(d: &[u8; 20]) -> &[u8] {
    let start = d.iter().position(|&c| c != b' ').unwrap_or(19);
    &d[start..]
}

/// The name of a variable without its NUL.
pub(super) fn name_of(name_nul: &[u8]) -> &[u8] {
    &name_nul[..name_nul.len() - 1]
}

/// A whole number in `[min, max]`: unset gives `default`; a value that is not a number
/// or is out of range gets a warning and `default` (below `min`, or above `max` when
/// `max` is no limit to clamp to, e.g. a signal number) or `max` (above).
pub(super) fn env_number(name_nul: &'static [u8], min: u64, max: u64, default: u64, default_is: &str) -> u64 {
    env_number_in(name_nul, min, max, default, default_is, true)
}

/// A number whose default belongs to the module that uses it (the constant lives with
/// its protocol): `None` when unset or invalid (after the warning), else the value
/// (clamped to `max`).
pub(super) fn env_optional_number(name_nul: &'static [u8], min: u64, max: u64) -> Option<u64> {
    optional_number(name_of(name_nul), env_str(name_nul)?, min, max)
}

/// [`env_optional_number`] for a value found elsewhere (`FIBERIZE_TUNE`'s entries);
/// `name` is what the warning calls it.
pub(super) fn optional_number(name: &[u8], raw: &[u8], min: u64, max: u64) -> Option<u64> {
    match number_in(name, raw, min, max, NO_DEFAULT, "the default", true) {
        NO_DEFAULT => None,
        v => Some(v),
    }
}

/// `number_in`'s default for [`optional_number`]: outside every allowed range, and the
/// warning names no number for it.
pub(super) const NO_DEFAULT: u64 = u64::MAX;

pub(super) fn env_number_in(name_nul: &'static [u8], min: u64, max: u64, default: u64, default_is: &str, clamp: bool) -> u64 {
    match env_str(name_nul) {
        None => default,
        Some(raw) => number_in(name_of(name_nul), raw, min, max, default, default_is, clamp),
    }
}

/// The check behind the numbers: `raw` is the value of `name` (a variable, or
/// `FIBERIZE_TUNE=entry`).
pub(super) fn number_in(name: &[u8], raw: &[u8], min: u64, max: u64, default: u64, default_is: &str, clamp: bool) -> u64 {
    let default_digits = digits(default);
    let text = core::str::from_utf8(raw).unwrap_or("").trim();
    match text.parse::<u64>() {
        Ok(v) if v >= min && v <= max => v,
        Ok(v) if v > max && clamp => {
            warn(&[name, b"=", raw, b" is above the limit ", trim(&digits(max)), b": using ", trim(&digits(max))]);
            max
        }
        _ => {
            let why: &[u8] = if text.is_empty() {
                b" is empty"
            } else if text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
                b" is out of range"
            } else {
                b" is not a whole number"
            };
            warn(&[
                name,
                b"=",
                raw,
                why,
                b" (allowed: ",
                trim(&digits(min)),
                b"..",
                trim(&digits(max)),
                b"): using ",
                default_is.as_bytes(),
                if default == NO_DEFAULT { b"" } else { b" (" },
                if default == NO_DEFAULT { b"" } else { trim(&default_digits) },
                if default == NO_DEFAULT { b"" } else { b")" },
            ]);
            default
        }
    }
}

/// An on/off switch: `1`/`on`/`true`/`yes`/`enable(d)` or the `is_off` words; anything
/// else gets a warning and `default`.
pub(super) fn env_switch(name_nul: &'static [u8], default: bool) -> bool {
    match env_str(name_nul) {
        None => default,
        Some(v) => switch_value(name_of(name_nul), v, default),
    }
}

/// [`env_switch`] for a value found elsewhere; `name` is what the warning calls it.
pub(super) fn switch_value(name: &[u8], v: &[u8], default: bool) -> bool {
    if is_off(v) {
        return false;
    }
    if is_on(v) {
        return true;
    }
    let used: &[u8] = if default { b"on" } else { b"off" };
    warn(&[name, b"=", v, b" is neither on (1, on, true, yes) nor off (0, off, false, no): using ", used]);
    default
}

pub(super) fn is_on(v: &[u8]) -> bool {
    matches!(v, b"1" | b"on" | b"ON" | b"true" | b"yes" | b"enable" | b"enabled")
}
