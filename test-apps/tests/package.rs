//! Issue 28: the Debian package (`scripts/package.sh`). It builds (and passes lintian,
//! when lintian is installed: package.sh fails on an error or warning), unpacks into a
//! throwaway root (`dpkg-deb -x`: no dpkg database needed, as root or not), its files
//! match its md5sums, and the installed launcher runs a threaded test app with fibers
//! in effect from the library under that root. The MariaDB drop-in it ships is checked
//! with `systemd-analyze verify` against Debian's unit where that unit is installed.

mod harness;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harness::*;

const LIMIT: Duration = Duration::from_secs(120);

fn output(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn multiarch() -> String {
    let (ok, text) = output(Command::new("dpkg-architecture").arg("-qDEB_HOST_MULTIARCH"));
    assert!(ok, "dpkg-architecture: {text}");
    text.trim().to_string()
}

/// Builds the package from the library already built; its path.
fn build_package() -> PathBuf {
    let out = Command::new(workspace().join("scripts/package.sh")).env("NO_BUILD", "1").output().expect("scripts/package.sh");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let text = format!("{stdout}{stderr}");
    assert!(out.status.success(), "scripts/package.sh failed:\n{text}");
    let deb = workspace().join(stdout.lines().last().unwrap_or_default());
    assert!(deb.exists(), "no package at {}:\n{text}", deb.display());
    deb
}

fn unpack(deb: &Path, root: &Path) {
    let _ = std::fs::remove_dir_all(root);
    for (what, dir) in [("-x", root.to_path_buf()), ("-e", root.join("DEBIAN"))] {
        let (ok, text) = output(Command::new("dpkg-deb").arg(what).arg(deb).arg(&dir));
        assert!(ok, "dpkg-deb {what}: {text}");
    }
}

#[test]
fn package_installs_and_its_launcher_runs_fibers() {
    let deb = build_package();
    let root = std::env::temp_dir().join(format!("fiberize-package-{}", std::process::id()));
    unpack(&deb, &root);
    let lib = root.join(format!("usr/lib/{}/fiberize/libfiberize.so", multiarch()));
    let launcher = root.join("usr/bin/fiberize");
    for f in [
        &lib,
        &launcher,
        &root.join("usr/include/fiberize.h"),
        &root.join("usr/share/man/man1/fiberize.1.gz"),
        &root.join("usr/share/man/man7/libfiberize.7.gz"),
        &root.join("usr/share/doc/fiberize/copyright"),
        &root.join("usr/share/doc/fiberize/changelog.Debian.gz"),
        &root.join("usr/share/doc/fiberize/examples/mariadb.service.d/fiberize.conf"),
    ] {
        assert!(f.is_file(), "{} missing from the package", f.display());
    }
    let control = std::fs::read_to_string(root.join("DEBIAN/control")).unwrap();
    let version = format!("Version: {}-1\n", env!("CARGO_PKG_VERSION"));
    assert!(control.contains(&version), "control has no {version:?}:\n{control}");
    assert!(control.contains("Depends: libc6"), "{control}");
    let (ok, text) = output(Command::new("md5sum").arg("--quiet").arg("-c").arg("DEBIAN/md5sums").current_dir(&root));
    assert!(ok, "md5sums do not match the files:\n{text}");

    // The installed launcher, with no hint where the library is: it must find the one
    // under its own prefix and run the program's threads as fibers.
    let bin = build_c("core_threads");
    let native = run(&bin, &["50"], false, LIMIT);
    let launch = |args: &[&str]| {
        let mut cmd = Command::new(&launcher);
        for k in ["LD_PRELOAD", "GLIBC_TUNABLES", "FIBERIZE", "FIBERIZE_LIB", "FIBERIZE_STATS", "FIBERIZE_METRICS"] {
            cmd.env_remove(k);
        }
        cmd.args(args);
        run_command(cmd, LIMIT, &format!("{} {args:?}", launcher.display()))
    };
    let pre = launch(&["--stats", "--workers=2", "--", bin.to_str().unwrap(), "50"]);
    assert_eq!(native.status, Some(0), "{}", native.stderr);
    assert_eq!(pre.status, Some(0), "{}{}", pre.stdout, pre.stderr);
    assert_eq!(pre.stdout, native.stdout, "stdout differs; stderr:\n{}", pre.stderr);
    assert!(pre.stderr.contains("preloaded=1"), "library not active:\n{}", pre.stderr);
    assert!(stat(&pre, "fibers_created") >= 50, "{}", pre.stderr);
    assert_eq!(stat(&pre, "workers"), 2, "{}", pre.stderr);
    // Without the library under its prefix the launcher names the path it looked at.
    std::fs::remove_file(&lib).unwrap();
    let missing = launch(&["--", bin.to_str().unwrap(), "1"]);
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(missing.status, Some(1), "{}", missing.stderr);
    assert!(missing.stderr.contains(&format!("{} not found", lib.display())), "{}", missing.stderr);
}

/// `systemd-analyze verify` of Debian's mariadb.service with the packaged drop-in (it
/// works on unit files; systemd need not run). It prints the drop-in's problems but
/// exits 0 for them, so the check is "prints nothing", and a broken copy of the drop-in
/// must print something (the drop-in is read at all).
#[test]
fn mariadb_drop_in_verifies_against_debians_unit() {
    let unit = Path::new("/lib/systemd/system/mariadb.service");
    if !unit.exists() || Command::new("systemd-analyze").arg("--version").output().is_err() {
        eprintln!("skipped: no {} or no systemd-analyze (scripts/test.sh installs mariadb-server)", unit.display());
        return;
    }
    let source = workspace().join("packaging/debian/examples/mariadb.service.d/fiberize.conf");
    let lib_dir = format!("/usr/lib/{}/fiberize", multiarch());
    let drop_in = std::fs::read_to_string(source).unwrap().replace("@LIBDIR@", &lib_dir);
    assert!(drop_in.contains(&format!("Environment=LD_PRELOAD={lib_dir}/libfiberize.so\n")), "{drop_in}");
    for needed in ["GLIBC_TUNABLES=glibc.pthread.rseq=0", "FIBERIZE_REPORT=", "FIBERIZE_METRICS="] {
        assert!(drop_in.contains(&format!("Environment={needed}")), "no {needed} in the drop-in:\n{drop_in}");
    }
    let verify = |drop_in: &str| {
        let dir = std::env::temp_dir().join(format!("fiberize-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("mariadb.service.d")).unwrap();
        std::fs::copy(unit, dir.join("mariadb.service")).unwrap();
        std::fs::write(dir.join("mariadb.service.d/fiberize.conf"), drop_in).unwrap();
        let (_, text) = output(
            Command::new("systemd-analyze")
                .args(["verify", "--man=no"])
                .arg(dir.join("mariadb.service"))
                .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display())),
        );
        let _ = std::fs::remove_dir_all(&dir);
        text
    };
    let text = verify(&drop_in);
    assert!(text.trim().is_empty(), "systemd-analyze verify:\n{text}");
    let broken = verify(&format!("{drop_in}Environment=LD_PRELOAD\n"));
    assert!(broken.contains("fiberize.conf"), "a broken drop-in went unnoticed: {broken:?}");
}
