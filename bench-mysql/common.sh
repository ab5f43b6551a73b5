# Shared by the bench-mysql scripts (sourced, not run): prerequisites and free ports.

# Fails unless libfiberize.so ($LIB), mariadbd and sysbench are there.
require_lib_and_mariadb() {
    [ -f "$LIB" ] || { echo "missing $LIB: run cargo build --release -p interpose"; exit 1; }
    [ -x /usr/sbin/mariadbd ] && command -v sysbench >/dev/null || { echo "mariadb-server/sysbench missing (scripts/test.sh installs them)"; exit 1; }
}

# A free TCP port below the ephemeral range (32768+), so that client sockets never hold it.
free_port() {
    local cand
    for _ in $(seq 1 50); do
        cand=$((12000 + RANDOM % 18000))
        ss -ltn 2>/dev/null | awk '{print $4}' | grep -q ":$cand\$" || { echo $cand; return 0; }
    done
    echo "no free port" >&2; exit 1
}
