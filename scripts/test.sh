#!/usr/bin/env bash
# The project's one test command (CI runs it through .ci/run): installs what the tests
# need, builds libfiberize.so and runs every test, native and preloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

need=() need_alone=()
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v gdb >/dev/null || need+=(gdb)
command -v sysbench >/dev/null || need+=(sysbench)
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v mariadb_config >/dev/null || need+=(libmariadb-dev) # the TPC-C client (bench-mysql/tpcc)
command -v ss >/dev/null || need+=(iproute2)
command -v python3 >/dev/null || need+=(python3)
command -v zic >/dev/null || [ -x /usr/sbin/zic ] || need+=(libc-bin) # tests/mktime.rs compiles a zone
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
[ -x /usr/sbin/apache2 ] || need+=(apache2) # test-apps/tests/apache.rs
command -v stress-ng >/dev/null || need+=(stress-ng) # test-apps/tests/thread_state.rs
# The package (scripts/package.sh) and its test: dpkg-architecture and dpkg-shlibdeps,
# lintian (~16 s on 2 CPUs), promtool for the metrics file (prometheus: ~96 MB
# installed: Debian ships promtool only with the server).
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v lintian >/dev/null || need+=(lintian)
command -v promtool >/dev/null || need_alone+=(prometheus) # without node-exporter (recommended)
if [ $((${#need[@]} + ${#need_alone[@]})) -gt 0 ]; then
    echo "== installing ${need[*]} ${need_alone[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    [ ${#need[@]} = 0 ] || apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
    [ ${#need_alone[@]} = 0 ] || apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need_alone[@]}" >/dev/null
    # The package may start its own service; the tests run private instances.
    (systemctl stop mariadb || service mariadb stop) >/dev/null 2>&1 || true
    (systemctl stop redis-server || service redis-server stop) >/dev/null 2>&1 || true
    (systemctl stop apache2 || service apache2 stop) >/dev/null 2>&1 || true
    (systemctl stop prometheus || service prometheus stop) >/dev/null 2>&1 || true
fi

echo "== format, lints and layers (cargo fmt --check, cargo clippy -D warnings, scripts/layers.py)"
# A formatting or lint failure fails the suite, but the tests still run first.
lint_failed=0
cargo fmt --all --check >/dev/null || { echo "cargo fmt --check: the tree is not formatted (run cargo fmt)"; lint_failed=1; }
cargo clippy --workspace --release --all-targets -q -- -D warnings || { echo "cargo clippy reported warnings"; lint_failed=1; }
# The runtime's folders are layers (libfiberize/src/lib.rs): no upward import, no
# import circle of more than 3 files, no file over 600 lines unless it says why.
python3 scripts/layers.py || { echo "scripts/layers.py: the layering is broken (see above)"; lint_failed=1; }
echo "== build"
cargo build --release -p interpose
# Every test binary the workspace builds; a binary that crashes or fails to build never
# prints its "test result:" line, and the closing lines count it as "did not run".
echo "== building the test binaries"
LIST=$(mktemp); LOG=$(mktemp); trap 'rm -f "$LIST" "$LOG"' EXIT
set +e
cargo test --release --workspace --no-run 2>&1 | tee "$LIST" | grep -v '^ *Executable'
set -e
expected=$(grep -c '^ *Executable' "$LIST" || true)
echo "== tests ($expected test binaries plus doc-tests, about 9 minutes on 2 CPUs; then aarch64, about 3.5)"
set +e
# --no-fail-fast: a failing binary does not stop the ones after it.
cargo test --release --workspace --no-fail-fast -- --test-threads=2 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
# The aarch64 build and tests under qemu-user (installs its own packages: the arm64
# architecture, Debian's rustc-web, the cross compilers, qemu-user-static); about 3.5
# minutes on 2 CPUs. Its tests count in the closing lines.
echo "== aarch64: scripts/test-aarch64.sh"
LOG_A64=$(mktemp); trap 'rm -f "$LIST" "$LOG" "$LOG_A64"' EXIT
set +e
bash scripts/test-aarch64.sh 2>&1 | tee "$LOG_A64"
status_a64=${PIPESTATUS[0]}
set -e
[ "$status_a64" = 0 ] || status=1
# The closing lines for the whole suite (cargo's own last line is a doc-test summary):
# test binaries (ran / failed / did not run), then "tests: N passed, N failed" last,
# in that plain format (CI reads it).
a64=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
    END { printf "%d %d", p, f }' "$LOG_A64")
awk -v expected="$expected" -v lint="$lint_failed" -v a64="$a64" -v a64_status="$status_a64" '
    /^ *Running / { started++ }
    /^test result:/ {
        if ($0 ~ /^test result: FAILED/) failed_bins++
        for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
        finished++
    }
    /^ *Doc-tests / { doc++ }
    END {
        # finished counts unit/integration binaries and doc-tests alike; doc-test runs
        # are not among the --no-run executables.
        ran = finished - doc; if (ran < 0) ran = 0
        missing = expected - ran; if (missing < 0) missing = 0
        printf "test binaries: %d expected, %d ran to the end, %d with failures, %d did not run or crashed\n", expected, ran, failed_bins, missing
        # A binary that crashed or was never built counts as one failed test: its
        # own tests are unknown, and a closing line with "0 failed" would hide it.
        f += missing
        # A fmt/clippy failure counts as one failed test too.
        if (lint) { print "format/lint check: failed (see the top of the log)"; f += 1 }
        # aarch64 under qemu: its tests count; a failure before any test result (a
        # package or build step) counts as one failed test.
        split(a64, a, " ")
        if (a64_status != 0 && a[2] == 0) a[2] = 1
        printf "aarch64 (scripts/test-aarch64.sh): %d passed, %d failed\n", a[1], a[2]
        p += a[1]; f += a[2]
        printf "tests: %d passed, %d failed\n", p, f
    }' "$LOG"
[ "$status" = 0 ] && [ "$lint_failed" = 1 ] && status=1
exit "$status"
