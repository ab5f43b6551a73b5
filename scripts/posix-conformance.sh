#!/usr/bin/env bash
# Run LTP's Open POSIX Test Suite conformance tests for the interfaces that
# libfiberize.so replaces (pthread_*, sem_*, nanosleep, clock_nanosleep,
# sched_yield) natively and under the preload, and print every difference.
#
# usage: scripts/posix-conformance.sh OPEN_POSIX_TESTSUITE_DIR [LIBFIBERIZE_SO]
#
#   OPEN_POSIX_TESTSUITE_DIR  an extracted ltp/testcases/open_posix_testsuite
#                             tree (this script never downloads anything), e.g.
#       git --git-dir=<ltp.git> archive HEAD testcases/open_posix_testsuite | tar -x -C /tmp/ltp
#       scripts/posix-conformance.sh /tmp/ltp/testcases/open_posix_testsuite
#   LIBFIBERIZE_SO            default: target/release/libfiberize.so of this repo
#                             (not built here; run `cargo build --release -p interpose`).
#                             It is copied once at start, so a rebuild during the
#                             run does not mix two versions.
#
# Environment:
#   POSIX_TIMEOUT=20      seconds per test run; a run that exceeds it is HANG
#   POSIX_JOBS=2          tests run in parallel (each test runs native, then preloaded)
#   POSIX_FILTER=regex    only tests whose name (e.g. pthread_cond_wait/2-1) matches
#   POSIX_BUDGET=840      wall-clock seconds for the run phase; tests not started
#                         by then are reported as NOTRUN (keeps the run bounded)
#   POSIX_RECHECK=1       rerun each differing test alone (serially) once more in
#                         both modes to tell real differences from load noise
#   POSIX_RECHECK_BUDGET=240  seconds for the recheck phase
# A full run takes about 12 minutes on 2 cores (build 30 s, run ~8.5 min, recheck
# ~3 min); worst case about build + 840 s + 240 s + two test timeouts.
#   POSIX_KEEP=1          keep the work dir (binaries, per-run logs) and print it
#
# Outcomes: PASS FAIL UNRESOLVED UNSUPPORTED UNTESTED (posixtest.h exit codes
# 0 1 2 4 5), HANG (timeout), SIG<name> (killed by a signal), EXIT<n> (other).
# Exit status: 0 if no test that passes natively fails or hangs preloaded, else 1.
set -u

die() { echo "posix-conformance: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: $0 OPEN_POSIX_TESTSUITE_DIR [LIBFIBERIZE_SO]"
OPTS=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
[ -f "$OPTS/include/posixtest.h" ] && [ -d "$OPTS/conformance/interfaces" ] ||
	die "$OPTS does not look like open_posix_testsuite (no include/posixtest.h)"
REPO=$(cd "$(dirname "$0")/.." && pwd)
LIB_SRC=${2:-$REPO/target/release/libfiberize.so}
[ -f "$LIB_SRC" ] || die "no $LIB_SRC (build it: cd $REPO && cargo build --release -p interpose)"

TIMEOUT=${POSIX_TIMEOUT:-20}
JOBS=${POSIX_JOBS:-2}
FILTER=${POSIX_FILTER:-}
BUDGET=${POSIX_BUDGET:-840}
RECHECK_BUDGET=${POSIX_RECHECK_BUDGET:-240}
RECHECK=${POSIX_RECHECK:-1}
CC=${CC:-cc}

WORK=$(mktemp -d /tmp/posix-conformance.XXXXXX)
if [ "${POSIX_KEEP:-0}" = 1 ]; then
	trap 'echo "work dir kept: $WORK" >&2' EXIT
else
	trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK/bin" "$WORK/log" "$WORK/res" "$WORK/run"
cp "$LIB_SRC" "$WORK/libfiberize.so"
LIB=$WORK/libfiberize.so
LIB_MTIME=$(date -r "$LIB_SRC" '+%F %T')
LIB_REV=$(git -C "$REPO" log -1 --format='%h %ci' 2>/dev/null || echo '?')
START=$(date +%s)

# ---------------------------------------------------------------- selection
# Runnable tests are NUMBER-NUMBER.c (also in speculative/), as the suite's own
# scripts/locate-test defines them; *-buildonly.c are compile-only tests.
# NUMBER-NUMBER.sh tests only echo "tested implicitly" and are not run.
cd "$OPTS/conformance/interfaces" || exit 2
DIRS=$(ls -d pthread_* sem_* nanosleep clock_nanosleep sched_yield 2>/dev/null)
find $DIRS -type f -name '*.c' | grep -E '(^|/)[0-9]+-[0-9]+(-buildonly)?\.c$' | sort -V \
	| while read -r src; do   # POSIX_FILTER matches the test name: the path without .c
		[ -z "$FILTER" ] || echo "${src%.c}" | grep -qE -- "$FILTER" && echo "$src"
	done > "$WORK/sources"
[ -s "$WORK/sources" ] || die "no test selected"

# ---------------------------------------------------------------- build
# Same flags as the suite's generated Makefiles (include/mk/config.mk.in,
# scripts/generate-makefiles.sh): -I include -I <test dir>, per-dir
# CFLAGS/LDFLAGS/LDLIBS files, linked with lib/common.c (main -> test_main).
BASE_CFLAGS="-g -O2 -std=c99 -D_POSIX_C_SOURCE=200809L -D_XOPEN_SOURCE=700 -w -pthread -I$OPTS/include"
$CC $BASE_CFLAGS -c "$OPTS/lib/common.c" -o "$WORK/common.o" 2>"$WORK/log/common.build" ||
	die "cannot compile lib/common.c: $(cat "$WORK/log/common.build")"

build_one() {  # $1 = path of .c relative to conformance/interfaces
	local src=$1 dir name id extra_c="" extra_ld="" libs=""
	dir=$(dirname "$src")
	name=${src%.c}
	id=$(echo "$name" | tr / @)
	[ -f "$dir/CFLAGS" ] && extra_c=$(cat "$dir/CFLAGS")
	[ -f "$dir/LDFLAGS" ] && extra_ld=$(cat "$dir/LDFLAGS")
	[ -f "$dir/LDLIBS" ] && libs=$(cat "$dir/LDLIBS")
	case "$src" in
	*-buildonly.c)
		if $CC $BASE_CFLAGS -I"$dir" $extra_c -c "$src" -o "$WORK/bin/$id.o" >"$WORK/log/$id.build" 2>&1
		then echo "$name BUILDONLY"; else echo "$name BUILDFAIL"; fi ;;
	*)
		if $CC $BASE_CFLAGS -I"$dir" $extra_c $extra_ld "$src" "$WORK/common.o" -o "$WORK/bin/$id" \
			$libs -pthread -lrt >"$WORK/log/$id.build" 2>&1
		then echo "$name BUILT"; else echo "$name BUILDFAIL"; fi ;;
	esac
}
export -f build_one
export CC BASE_CFLAGS WORK
xargs -a "$WORK/sources" -P "$JOBS" -I{} bash -c 'build_one "$1"' _ {} > "$WORK/build.txt"
N_SRC=$(wc -l < "$WORK/sources")
N_BUILT=$(grep -c ' BUILT$' "$WORK/build.txt")
N_BONLY=$(grep -c ' BUILDONLY$' "$WORK/build.txt")
N_BFAIL=$(grep -c ' BUILDFAIL$' "$WORK/build.txt")
BUILD_END=$(date +%s)

# ---------------------------------------------------------------- run
outcome() {  # exit code -> outcome name
	case "$1" in
	0) echo PASS ;; 1) echo FAIL ;; 2) echo UNRESOLVED ;; 4) echo UNSUPPORTED ;; 5) echo UNTESTED ;;
	124|137) echo HANG ;;
	*) if [ "$1" -gt 128 ]; then echo "SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))"
	   else echo "EXIT$1"; fi ;;
	esac
}

run_mode() {  # $1 = id, $2 = native|preload, $3 = log suffix, [$4 = timeout] -> prints "outcome ms"
	local id=$1 mode=$2 rc t0 t1 d="$WORK/run/$1.$2" to=${4:-$TIMEOUT}
	mkdir -p "$d"
	t0=$(date +%s%N)
	# Each run gets its own cwd; timeout kills the test's whole process group.
	# The { } 2>/dev/null keeps bash's "Segmentation fault" job notices quiet.
	if [ "$mode" = native ]; then
		{ (cd "$d" && exec timeout -k 5 "$to" "$WORK/bin/$id" </dev/null >"$WORK/log/$id.$mode$3" 2>&1); } 2>/dev/null
	else
		{ (cd "$d" && exec timeout -k 5 "$to" env LD_PRELOAD="$LIB" GLIBC_TUNABLES=glibc.pthread.rseq=0 \
			"$WORK/bin/$id" </dev/null >"$WORK/log/$id.$mode$3" 2>&1); } 2>/dev/null
	fi
	rc=$?
	t1=$(date +%s%N)
	rm -rf "$d"
	echo "$(outcome $rc) $(( (t1 - t0) / 1000000 ))"
}

run_one() {  # $1 = id; one job = the test native, then preloaded (never both at once)
	local id=$1 n p
	if [ $(( $(date +%s) - RUN_START )) -ge "$BUDGET" ]; then
		echo "NOTRUN 0 NOTRUN 0" > "$WORK/res/$id"; return
	fi
	n=$(run_mode "$id" native "")
	p=$(run_mode "$id" preload "")
	echo "$n $p" > "$WORK/res/$id"
}
export -f outcome run_mode run_one
RUN_START=$(date +%s)
export TIMEOUT LIB RUN_START BUDGET

grep ' BUILT$' "$WORK/build.txt" | awk '{print $1}' | tr / @ > "$WORK/ids"
xargs -a "$WORK/ids" -P "$JOBS" -I{} bash -c 'run_one "$1"' _ {}
RUN_END=$(date +%s)

# Recheck: rerun differing tests alone (nothing else running) in both modes, with
# a timeout of max(10 s, 3 x the native run time + 5 s) (at most POSIX_TIMEOUT), and
# no more than POSIX_RECHECK_BUDGET seconds in all.
: > "$WORK/recheck"
RECHECK_START=$(date +%s)
if [ "$RECHECK" = 1 ]; then
	while read -r id; do
		read -r n nms p _ < "$WORK/res/$id"
		[ "$n" != "$p" ] && [ "$n" != NOTRUN ] || continue
		[ $(( $(date +%s) - RECHECK_START )) -lt "$RECHECK_BUDGET" ] || { echo "$id - -" >> "$WORK/recheck"; continue; }
		to=$(( nms * 3 / 1000 + 5 )); [ "$to" -ge 10 ] || to=10; [ "$to" -le "$TIMEOUT" ] || to=$TIMEOUT
		n2=$(run_mode "$id" native .recheck "$to" | cut -d' ' -f1)
		p2=$(run_mode "$id" preload .recheck "$to" | cut -d' ' -f1)
		echo "$id $n2 $p2" >> "$WORK/recheck"
	done < "$WORK/ids"
fi
END=$(date +%s)

# ---------------------------------------------------------------- report
echo "== Open POSIX Test Suite: $OPTS"
echo "   library: $LIB_SRC, copied at start: sha256 $(sha256sum "$LIB" | cut -c1-12), mtime $LIB_MTIME (repo HEAD then: $LIB_REV)"
echo "   selected $N_SRC sources: $N_BUILT built, $N_BONLY build-only compiled, $N_BFAIL failed to compile"
echo "   timeout ${TIMEOUT}s, $JOBS parallel; build $((BUILD_END - START))s, run $((RUN_END - RUN_START))s, recheck $((END - RECHECK_START))s"
if [ "$N_BFAIL" -gt 0 ]; then
	echo "   did not compile: $(grep ' BUILDFAIL$' "$WORK/build.txt" | awk '{print $1}' | sort -V | tr '\n' ' ')"
fi
echo
echo "== Totals ($N_BUILT tests run)"
printf '%-14s %8s %10s\n' outcome native preloaded
for o in $(cat "$WORK"/res/* | awk '{print $1; print $3}' | sort | uniq); do
	nn=$(cat "$WORK"/res/* | awk -v o="$o" '$1 == o' | wc -l)
	pp=$(cat "$WORK"/res/* | awk -v o="$o" '$3 == o' | wc -l)
	printf '%-14s %8d %10d\n' "$o" "$nn" "$pp"
done
echo
echo "== Differences (native vs preloaded; recheck = rerun alone, native/preloaded)"
printf '%-48s %-12s %-12s %s\n' test native preloaded recheck
ndiff=0; nreg=0
while read -r id; do
	read -r n nms p pms < "$WORK/res/$id"
	[ "$n" != "$p" ] || continue
	ndiff=$((ndiff + 1))
	rc=$(awk -v id="$id" '$1 == id {print $2 "/" $3}' "$WORK/recheck")
	note=""
	case "$rc" in
	"") ;; "-/-") note=" (no time left to recheck)" ;;
	*) r_n=${rc%/*}; r_p=${rc#*/}
	   if [ "$r_n" = "$n" ] && [ "$r_p" = "$p" ]; then note=" confirmed"
	   elif [ "$r_n" = "$r_p" ]; then note=" same alone: load-sensitive"
	   else note=" differs again"; fi ;;
	esac
	[ "$n" = PASS ] && nreg=$((nreg + 1))
	printf '%-48s %-12s %-12s %s\n' "$(echo "$id" | tr @ /)" "$n" "$p" "${rc:--}$note"
done < "$WORK/ids"
echo
echo "$ndiff tests differ; $nreg pass natively but not preloaded."
[ "${POSIX_KEEP:-0}" = 1 ] && echo "per-run logs: $WORK/log/<dir@test>.{native,preload}[.recheck]"
[ "$nreg" -eq 0 ]
