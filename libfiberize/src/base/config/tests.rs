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
    for retired in RETIRED {
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
    apply_tune(&mut c, b" poll_per_worker=no,,");
    assert_eq!(c.poll_per_worker, Some(false));
    apply_tune(&mut c, b"poll_per_worker=1");
    assert_eq!(c.poll_per_worker, Some(true));
}

/// A bad entry (unknown or retired name, no `=`, a value the switch does not take)
/// leaves every switch as it was; the entries around it still apply.
#[test]
fn bad_tune_entries_change_nothing() {
    let mut c = DEFAULTS;
    apply_tune(&mut c, b"nosuch=1,poll_per_worker,spin=0,turn_us=0,sync_inline=1");
    assert_eq!(c.poll_per_worker, None);
    apply_tune(&mut c, b"POLL_PER_WORKER=0,direct_wait=0,poll_per_worker=0");
    assert_eq!(c.poll_per_worker, Some(false));
    // Retired switches are names no more: none is a switch, and each is named once.
    for retired in RETIRED_TUNE_NAMES {
        assert!(!TUNE_NAMES.contains(&retired), "{retired} is retired and a switch");
    }
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

/// Every `.rs` file under `dir`, recursively, as (path, text).
fn rust_sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten().collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((path, text));
        }
    }
}

/// The comment of a source line: what follows its first `//` outside a string literal
/// (a quote count is enough for this tree), or "" where it has none.
fn comment_of(line: &str) -> &str {
    let mut in_string = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        match bytes[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes[i + 1] == b'/' => return &line[i..],
            _ => {}
        }
        i += 1;
    }
    ""
}

/// A date written as YYYY-MM-DD (20YY), not inside a longer word or number.
fn has_date(text: &str) -> bool {
    let b = text.as_bytes();
    let digit = |i: usize| b[i].is_ascii_digit();
    (0..b.len().saturating_sub(9)).any(|i| {
        b[i] == b'2'
            && b[i + 1] == b'0'
            && digit(i + 2)
            && digit(i + 3)
            && b[i + 4] == b'-'
            && digit(i + 5)
            && digit(i + 6)
            && b[i + 7] == b'-'
            && digit(i + 8)
            && digit(i + 9)
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && b.get(i + 10).is_none_or(|c| !c.is_ascii_alphanumeric())
    })
}

/// The words of `text` that look like a commit hash: 7 to 40 lowercase hex digits with at
/// least one digit and one letter. A `0x` constant is one word with its `x`, so it is
/// never one; nor are all-letter words (`deadbeef`) or numbers.
fn commit_hashes(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            (7..=40).contains(&w.len())
                && w.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
                && w.bytes().any(|c| c.is_ascii_digit())
                && w.bytes().any(|c| c.is_ascii_lowercase())
        })
        .collect()
}

/// The word "issue" and a number: the tracker's numbers belong in docs/RESULTS.md.
fn has_issue_number(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.match_indices("issue ").any(|(i, m)| lower[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// What a line of the sources or of DESIGN.md may not carry: dates, commit hashes and
/// issue numbers are the history, which docs/RESULTS.md keeps.
fn history_in(text: &str) -> Option<String> {
    if has_date(text) {
        return Some("a date".into());
    }
    if let Some(h) = commit_hashes(text).first() {
        return Some(format!("a commit hash ({h})"));
    }
    has_issue_number(text).then(|| "an issue number".into())
}

#[test]
fn history_checks_find_what_they_look_for() {
    // Built at run time, so that this file passes its own check.
    let day = ["2026", "11", "28"].join("-");
    assert!(has_date(&format!("measured on {day}, two runs")) && has_date(&day));
    assert!(!has_date(&format!("x{day}")) && !has_date(&format!("{day}0")) && !has_date("1970-01-01"));
    let hash = ["e280", "fd8"].concat();
    assert_eq!(commit_hashes(&format!("(commit {hash}, a1b2c3d; 0f0f0f0e)")), [hash.as_str(), "a1b2c3d", "0f0f0f0e"]);
    assert!(commit_hashes("0xd63f0000 | deadbeef | 0x9E37_79B9 | 1234567 | 128 | offset").is_empty());
    let issue = ["issue", "27"].join(" ");
    assert!(has_issue_number(&format!("({issue}, a fix)")) && !has_issue_number("the issue is two words"));
    assert_eq!(comment_of(r#"let s = "a // b"; // c"#), "// c");
    assert_eq!(comment_of(r#"let u = "http://x";"#), "");
}

/// The sources keep the invariants and a one-line origin per constant; the dates, commit
/// hashes and issue numbers of that origin are in docs/RESULTS.md. Every comment line of
/// `libfiberize/src` and `interpose/src` is checked, and every code line for dates.
#[test]
fn sources_carry_no_dates_commit_hashes_or_issue_numbers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_sources(&root.join("src"), &mut files);
    let interpose = root.join("../interpose/src");
    if interpose.is_dir() {
        rust_sources(&interpose, &mut files);
    }
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), root.display());
    let mut found = Vec::new();
    for (path, text) in &files {
        for (n, line) in text.lines().enumerate() {
            let what = history_in(comment_of(line)).or_else(|| has_date(line).then(|| "a date".into()));
            if let Some(what) = what {
                found.push(format!("{}:{}: {what}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "history belongs in docs/RESULTS.md, not in the sources:\n{}", found.join("\n"));
}

/// docs/DESIGN.md is the design in the present tense, at most 900 lines, without dates,
/// commit hashes or issue numbers; each `RESULTS.md#slug` it or a source comment links
/// to is a heading of docs/RESULTS.md.
#[test]
fn design_is_short_and_links_to_results_by_heading() {
    let design = include_str!("../../../../docs/DESIGN.md");
    let results = include_str!("../../../../docs/RESULTS.md");
    let lines = design.lines().count();
    assert!(lines <= 900, "docs/DESIGN.md has {lines} lines, over 900: move measurements to docs/RESULTS.md");
    let found: Vec<String> = design
        .lines()
        .enumerate()
        .filter_map(|(n, l)| history_in(l).map(|what| format!("docs/DESIGN.md:{}: {what}: {l}", n + 1)))
        .collect();
    assert!(found.is_empty(), "history belongs in docs/RESULTS.md:\n{}", found.join("\n"));
    let headings: Vec<&str> = results.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![(root.join("../docs/DESIGN.md"), design.to_string())];
    rust_sources(&root.join("src"), &mut files);
    let mut broken = Vec::new();
    for (path, text) in files.iter().filter(|(path, _)| !path.ends_with("base/config/tests.rs")) {
        for (i, _) in text.match_indices("RESULTS.md#") {
            let slug: String = text[i + "RESULTS.md#".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            if !headings.contains(&slug.as_str()) {
                broken.push(format!("{}: RESULTS.md#{slug}", path.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to headings docs/RESULTS.md does not have:\n{}", broken.join("\n"));
}
