#!/usr/bin/env bash
# Builds target/tpcc/tpcc, installing Debian's libmariadb-dev first if it is missing.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v mariadb_config >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq libmariadb-dev >/dev/null
fi
make -s
