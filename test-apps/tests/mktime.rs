//! The mktime/tzset throttle (issue 4): our mktime, timelocal, localtime, ctime and
//! tzset exports against glibc's, in many zones.
//!
//! `test-apps/c/mktime_compare.c` builds ~100k random inputs per zone plus edge cases
//! (every DST/offset transition of the zone between 1800 and 2100 with wall times
//! around it, leap days, far past/future, out-of-range fields, each tm_isdst value).
//!
//! * `native_vs_preloaded`: the same program natively, preloaded, and preloaded with
//!   `FIBERIZE=off`: byte-identical summaries (a hash over every result line, counts per
//!   outcome); on a difference the first differing input is printed.
//! * `in_process_against_glibc`: preloaded, one process calls our export and glibc's own
//!   function (dlopen of libc.so.6) on every input and compares everything (result,
//!   errno, struct tm, tm_zone pointer, tzname/timezone/daylight); run as a fiber and, with
//!   `FIBERIZE=off`, as a plain thread. Also checks that glibc's real tzset ran far less
//!   often than mktime, and that zone files were served by the interval cache.
//! * `tz_changes_are_picked_up`: setenv/putenv/unsetenv of TZ between calls.
//! * `odd_zone_from_tzdir`: a zone compiled with zic (slim and fat), found via TZDIR.
//! * `fiberize_tz_off_passes_through`: `FIBERIZE_TZ=off`.
//!
//! Needs `target/release/libfiberize.so` (`cargo build --release -p interpose`) or
//! `FIBERIZE_LIB`.

mod harness;
use harness::*;

use std::process::Command;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(600);
/// Random inputs per zone (edge cases come on top).
const RANDOM_INPUTS: &str = "100000";

/// `None` is "TZ unset" (/etc/localtime). Southern hemisphere: Sydney, Chatham and the
/// POSIX AEST rule; historical offset changes: Moscow, Kolkata; leap seconds: right/.
const ZONES: &[Option<&str>] = &[
    None,
    Some("UTC"),
    Some("Europe/Moscow"),
    Some("Australia/Sydney"),
    Some("America/New_York"),
    Some("Europe/Berlin"),
    Some("Asia/Kolkata"),
    Some("Pacific/Chatham"),
    Some("right/Europe/London"),
    Some("EST5EDT,M3.2.0,M11.1.0"),
    Some("AEST-10AEDT,M10.1.0,M4.1.0/3"),
];

fn preload_lib() -> String {
    lib_path().to_str().expect("utf-8 library path").to_string()
}

/// Runs mktime_compare with `args`, zone `tz` and extra `env`, without any inherited
/// preload or fiberize settings, killing it after TIMEOUT; it must succeed.
fn run(args: &[&str], tz: Option<&str>, env: &[(&str, &str)]) -> Run {
    let mut cmd = command(&build_c("mktime_compare"));
    cmd.args(args);
    for k in ["LD_PRELOAD", "FIBERIZE", "FIBERIZE_TZ", "FIBERIZE_WORKERS", "TZ", "TZDIR"] {
        cmd.env_remove(k);
    }
    if let Some(z) = tz {
        cmd.env("TZ", z);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = format!("mktime_compare {args:?} TZ={tz:?} {env:?}");
    let r = run_command(cmd, TIMEOUT, &what);
    assert_eq!(r.status, Some(0), "{what} failed\n--- stdout\n{}\n--- stderr\n{}", r.stdout, r.stderr);
    r
}

/// Runs `f` for every zone, two zones at a time (the machine has two cores).
fn for_zones(f: impl Fn(Option<&str>) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&z) = ZONES.get(i) else { break };
                f(z);
            });
        }
    });
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

fn num(line: &str, key: &str) -> i64 {
    field(line, key).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

/// On a summary difference: per-input lines of both runs, first differing line.
fn first_difference(tz: Option<&str>, env_a: &[(&str, &str)], env_b: &[(&str, &str)]) -> String {
    let a = run(&["lines", RANDOM_INPUTS], tz, env_a).stdout;
    let b = run(&["lines", RANDOM_INPUTS], tz, env_b).stdout;
    for (la, lb) in a.lines().zip(b.lines()) {
        if la != lb {
            return format!("first differing input:\n  {env_a:?}: {la}\n  {env_b:?}: {lb}");
        }
    }
    format!("line counts differ: {} vs {}", a.lines().count(), b.lines().count())
}

#[test]
fn native_vs_preloaded() {
    let lib = preload_lib();
    let native: &[(&str, &str)] = &[];
    let pre: &[(&str, &str)] = &[("LD_PRELOAD", &lib)];
    let pre_off: &[(&str, &str)] = &[("LD_PRELOAD", &lib), ("FIBERIZE", "off")];
    for_zones(|tz| {
        let n = run(&["summary", RANDOM_INPUTS], tz, native).stdout;
        let inputs = num(n.trim(), "inputs");
        assert!(inputs >= 100_000, "only {inputs} inputs for TZ={tz:?}");
        for env in [pre, pre_off] {
            let p = run(&["summary", RANDOM_INPUTS], tz, env).stdout;
            if p != n {
                panic!(
                    "TZ={tz:?}: mktime results differ between native and {env:?}\n  native: {n}  preload: {p}{}",
                    first_difference(tz, native, env)
                );
            }
        }
        eprintln!("TZ={tz:?}: identical: {}", n.trim());
    });
}

fn check_in_process(tz: Option<&str>, env: &[(&str, &str)], expect_fiber: bool) {
    let r = run(&["inproc", RANDOM_INPUTS], tz, env);
    let out = &r.stdout;
    let head = out.lines().next().unwrap_or("");
    assert!(
        head.contains("preloaded=1 distinct_impl=1 tz_active=1"),
        "TZ={tz:?} {env:?}: the preload did not take effect: {out}"
    );
    assert!(
        out.contains(if expect_fiber { "fiber=1" } else { "fiber=0" }),
        "TZ={tz:?} {env:?}: expected fiber={}:\n{out}",
        expect_fiber as i32
    );
    let last = out.lines().last().unwrap_or("");
    let (compared, diffs) = (num(last, "compared"), num(last, "differences"));
    assert!(compared >= 100_000, "TZ={tz:?}: only {compared} inputs compared");
    assert_eq!(diffs, 0, "TZ={tz:?} {env:?}: our functions differ from glibc's:\n{out}");
    assert_eq!(num(last, "roundtrip_failures"), 0, "TZ={tz:?} {env:?}: concurrent round trips failed:\n{out}");
    // Natively every mktime would run tzset: here it is about once a second.
    let real = num(last, "real_tzset_calls");
    let secs = field(last, "seconds").and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    assert!(real >= 1, "TZ={tz:?}: the real tzset never ran:\n{out}");
    // Zone files are converted from the interval cache (so the comparison above
    // covered it); POSIX TZ strings and leap-second files go through glibc.
    let cached = !matches!(tz, Some(z) if z.contains(',') || z.starts_with("right/"));
    assert_eq!(num(last, "cache_active"), cached as i64, "TZ={tz:?}: interval cache state:\n{out}");
    if cached {
        assert!(num(last, "cache_intervals") >= 1, "TZ={tz:?}: no interval was cached:\n{out}");
    }
    assert!(
        (real as f64) <= secs + 3.0 && real * 1000 < compared,
        "TZ={tz:?}: the real tzset ran {real} times for {compared} mktime calls in {secs} s"
    );
    eprintln!("TZ={tz:?} {env:?}: {last}");
}

#[test]
fn in_process_against_glibc() {
    let lib = preload_lib();
    for_zones(|tz| {
        check_in_process(tz, &[("LD_PRELOAD", &lib)], true);
        check_in_process(tz, &[("LD_PRELOAD", &lib), ("FIBERIZE", "off")], false);
    });
}

#[test]
fn tz_changes_are_picked_up() {
    let lib = preload_lib();
    let native = run(&["pickup"], None, &[]).stdout;
    for env in [vec![("LD_PRELOAD", lib.as_str())], vec![("LD_PRELOAD", lib.as_str()), ("FIBERIZE", "off")]] {
        let pre = run(&["pickup"], None, &env).stdout;
        if pre != native {
            let first = native.lines().zip(pre.lines()).find(|(a, b)| a != b);
            panic!("TZ changes: preloaded {env:?} differs from native: {first:?}\n--- native\n{native}--- preloaded\n{pre}");
        }
    }
    assert!(native.contains("Asia/Kolkata") && native.contains("off=19800"), "{native}");
}

/// A zone made for the test with `zic` (the test fails if zic is missing): LMT with seconds,
/// 30-minute DST, a +5:45 offset, a change one second after midnight, a jump across
/// the date line; compiled "slim" (rules in the footer from 2011 on) and "fat", found
/// through TZDIR.
const ODD_ZONE: &str = "\
Rule\tTst\t1970\tmax\t-\tMar\tlastSun\t2:00\t1:00\tD
Rule\tTst\t1970\tmax\t-\tOct\tlastSun\t3:00\t0\tS
Rule\tOdd\t2000\t2010\t-\tApr\t1\t0:30\t0:30\tH
Rule\tOdd\t2000\t2010\t-\tApr\t2\t0:30\t0\t-
Zone\tTest/Odd\t0:12:34\t-\tLMT\t1900
\t\t\t1:00\tTst\tC%sT\t1990 Jun 1
\t\t\t-3:30\tOdd\tX%sX\t2011
\t\t\t5:45\t-\t+0545\t2020 Jan 1 0:00:01
\t\t\t-11:00\tTst\tY%sY
";

/// The zone compiler (Debian: `libc-bin`, which `scripts/test.sh` installs if it is
/// missing). Not finding it fails the test: a test that cannot run must not pass.
fn zic() -> std::path::PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("zic")).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin/zic".into(), "/usr/bin/zic".into()])
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("zic not found (PATH, /usr/sbin, /usr/bin): install Debian's libc-bin"))
}

#[test]
fn odd_zone_from_tzdir() {
    let lib = preload_lib();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("mktime-zic.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let src = dir.join("odd.zi");
    std::fs::write(&src, ODD_ZONE).expect("write zone source");
    for flavour in ["slim", "fat"] {
        let out = dir.join(flavour);
        let st = Command::new(zic()).args(["-b", flavour, "-d"]).arg(&out).arg(&src).status();
        assert!(matches!(st, Ok(s) if s.success()), "zic -b {flavour} failed: {st:?}");
        let tzdir = out.to_str().expect("utf-8 path");
        let native = run(&["summary", RANDOM_INPUTS], Some("Test/Odd"), &[("TZDIR", tzdir)]).stdout;
        let pre = run(&["summary", RANDOM_INPUTS], Some("Test/Odd"), &[("TZDIR", tzdir), ("LD_PRELOAD", &lib)]).stdout;
        assert_eq!(pre, native, "{flavour} Test/Odd: preloaded differs from native");
        check_in_process(Some("Test/Odd"), &[("TZDIR", tzdir), ("LD_PRELOAD", &lib)], true);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fiberize_tz_off_passes_through() {
    let lib = preload_lib();
    // Under qemu a tenth: each of glibc's own mktime calls reads the zone's file
    // again there (FIBERIZE_TZ=off), 20000 took ~200 s; the switch is the same code.
    let inputs = if emulated() { "2000" } else { "20000" };
    let r = run(&["inproc", inputs], Some("Europe/Berlin"), &[("LD_PRELOAD", &lib), ("FIBERIZE_TZ", "off")]);
    assert!(r.stdout.contains("tz_active=0"), "{}", r.stdout);
    let last = r.stdout.lines().last().unwrap_or("");
    assert_eq!(num(last, "differences"), 0, "{}", r.stdout);
    assert_eq!(num(last, "real_tzset_calls"), 0, "FIBERIZE_TZ=off still throttles:\n{}", r.stdout);
}
