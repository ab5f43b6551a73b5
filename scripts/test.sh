#!/usr/bin/env bash
# The project's one test command (CI runs it through .ci/run): installs what the tests
# need, builds libfiberize.so and runs every test, native and preloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v gdb >/dev/null || need+=(gdb)
command -v sysbench >/dev/null || need+=(sysbench)
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v ss >/dev/null || need+=(iproute2)
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
    # The package may start its own service; the tests run private instances.
    (systemctl stop mariadb || service mariadb stop) >/dev/null 2>&1 || true
    (systemctl stop redis-server || service redis-server stop) >/dev/null 2>&1 || true
fi

echo "== build"
cargo build --release -p interpose
echo "== tests"
LOG=$(mktemp); trap 'rm -f "$LOG"' EXIT
set +e
cargo test --release --workspace -- --test-threads=2 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole suite (cargo's own last line is a doc-test summary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$LOG"
exit "$status"
