//! `config`'s tests: the README's table against the variables read, `FIBERIZE_TUNE`'s
//! entries.

use super::*;

#[test]
fn metrics_intervals_take_a_unit_or_seconds() {
    assert_eq!(parse_interval_ms(b"500ms"), Some(500));
    assert_eq!(parse_interval_ms(b"10s"), Some(10_000));
    assert_eq!(parse_interval_ms(b" 10 "), Some(10_000));
    assert_eq!(parse_interval_ms(b"2m"), Some(120_000));
    assert_eq!(parse_interval_ms(b"1h"), Some(3_600_000));
    for bad in [&b""[..], b"s", b"-1s", b"1.5s", b"10x", b"99999999999999999999h"] {
        assert_eq!(parse_interval_ms(bad), None, "{:?}", core::str::from_utf8(bad));
    }
}

/// The variable names of the first table after `heading` in a markdown text: the
/// first backticked word of each row, up to its `=`.
fn table_names(text: &str, heading: &str) -> Vec<String> {
    let from = text.find(heading).unwrap_or_else(|| panic!("no {heading:?}"));
    text[from..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|row| {
            let cell = row.split('|').nth(1)?.trim();
            let name = cell.strip_prefix('`')?.split(['=', '`']).next()?;
            Some(name.to_string())
        })
        .collect()
}

/// The README's environment table and [`VARIABLES`] name the same variables, at
/// most 12; this file's header table names them too.
#[test]
fn readme_table_lists_the_variables_config_reads() {
    let mut readme = table_names(include_str!("../../../../README.md"), "\n## Environment\n");
    let doc: Vec<&str> = include_str!("../config.rs").lines().filter_map(|l| l.strip_prefix("//! ")).collect();
    let mut header = table_names(&doc.join("\n"), "| variable");
    let mut ours: Vec<String> = VARIABLES.iter().map(|v| v.to_string()).collect();
    assert!(ours.len() <= 12, "the README's table is to hold at most 12 variables");
    for list in [&mut readme, &mut header, &mut ours] {
        list.sort();
    }
    assert_eq!(readme, ours, "README.md's Environment table against config::VARIABLES");
    assert_eq!(header, ours, "config.rs's header table against config::VARIABLES");
    for (retired, _) in RETIRED {
        let name = core::str::from_utf8(name_of(retired)).unwrap();
        assert!(!ours.iter().any(|v| v == name), "{name} is retired and listed");
    }
}

/// Every `FIBERIZE_TUNE` switch is documented in DESIGN's section on it, and named
/// in this file's header.
#[test]
fn tune_switches_are_documented() {
    let design = include_str!("../../../../docs/DESIGN.md");
    let from = design.find("FIBERIZE_TUNE=name=value").expect("docs/DESIGN.md documents FIBERIZE_TUNE");
    let section = &design[from..];
    let section = &section[..section.find("\n### ").unwrap_or(section.len())];
    let header = include_str!("../config.rs").split("\nuse ").next().unwrap();
    for name in TUNE_NAMES {
        assert!(section.contains(&format!("`{name}")), "docs/DESIGN.md's FIBERIZE_TUNE table lacks {name}");
        assert!(header.contains(&format!("`{name}`")), "config.rs's header lacks {name}");
    }
}

#[test]
fn tune_entries_set_their_switches() {
    let mut c = DEFAULTS;
    apply_tune(&mut c, b"direct_wait=off, direct_wait_peer_cpu=0,sync_inline=1,poll_per_worker=no");
    assert!(!c.direct_wait && !c.direct_wait_peer_cpu && c.sync_inline && c.poll_per_worker == Some(false));
    apply_tune(&mut c, b"turn_us=0,turn_short_us=40,spin=0,stack_release_ms=100,,");
    assert_eq!(c.turn_us, Some(0));
    assert_eq!(c.turn_short_us, Some(40));
    assert_eq!(c.spin_rounds, Some(0));
    assert_eq!(c.stack_release_ms, Some(100));
    // Above the limit: clamped (with a warning).
    apply_tune(&mut c, b"turn_us=5000000");
    assert_eq!(c.turn_us, Some(1_000_000));
}

/// A bad entry (unknown name, no `=`, a value the switch does not take) leaves
/// every switch as it was; the entries around it still apply.
#[test]
fn bad_tune_entries_change_nothing() {
    let mut c = DEFAULTS;
    apply_tune(&mut c, b"direct_wait=maybe,nosuch=1,spin,turn_short_us=0,turn_us=-1,stack_release_ms=abc");
    assert!(c.direct_wait);
    assert_eq!((c.turn_short_us, c.turn_us, c.spin_rounds, c.stack_release_ms), (None, None, None, None));
    apply_tune(&mut c, b"DIRECT_WAIT=0,direct_wait=0");
    assert!(!c.direct_wait);
    // The removed order by CPU time's switches are unknown names now: they change nothing.
    let before = (c.direct_wait, c.turn_us, c.spin_rounds);
    apply_tune(&mut c, b"fair=0,coordinating_first=2,run_clock=1");
    assert_eq!((c.direct_wait, c.turn_us, c.spin_rounds), before);
    assert!(!TUNE_NAMES.iter().any(|n| ["fair", "coordinating_first", "run_clock"].contains(n)));
}

#[test]
fn watchdog_takes_seconds_up_to_a_day() {
    assert_eq!(watchdog_limit_ns(b"0.5"), 500_000_000);
    assert_eq!(watchdog_limit_ns(b" 2 "), 2_000_000_000);
    assert_eq!(watchdog_limit_ns(b"1e6"), 86_400_000_000_000);
    for off in [&b"0"[..], b"", b"off", b"soon", b"-1", b"nan", b"inf"] {
        assert_eq!(watchdog_limit_ns(off), 0, "{:?}", core::str::from_utf8(off));
    }
}
