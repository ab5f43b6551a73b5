#!/usr/bin/env bash
# The yardstick's medians as a picture: bench-mysql/yardstick.sh writes yardstick.csv
# (with PLOT_DIR it also calls this script); this draws it as a PNG of two panels, for
# each point a bar per server: the throughput and the server's CPU time per transaction,
# both relative to the first server of the run (native by default), each bar labelled
# with its absolute value. The title names the machine, the pinning, the rounds and the
# date from the csv's leading # lines (a "# note:" line goes into the title too).
#
#   bash bench-mysql/yardstick-plot.sh [CSV [PNG]]    [bench-mysql/plots/yardstick.csv, PNG beside it]
#
# gnuplot-nox (Debian) is installed with apt-get when missing, as compare.sh does.
set -euo pipefail
# Paths given are the caller's; the defaults are the repository's.
CSV=$(realpath -m "${1:-$(dirname "$0")/plots/yardstick.csv}")
PNG=$(realpath -m "${2:-${CSV%.csv}.png}")
[ -f "$CSV" ] || { echo "yardstick-plot.sh: no $CSV (run PLOT_DIR=bench-mysql/plots bash bench-mysql/yardstick.sh)" >&2; exit 2; }
if ! command -v gnuplot >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq gnuplot-nox >/dev/null
fi
WORK=$(mktemp -d /tmp/fiberize-yardstick-plot.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

meta() { sed -n "s/^# $1: //p" "$CSV" | head -1; }
machine=$(meta machine); setup=$(meta setup); stamp=$(meta date); note=$(meta note)
rounds=$(sed -n 's/^# \(medians of [0-9]* rounds\).*/\1/p' "$CSV" | head -1)
[ -n "$machine" ] || machine="$(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo || true)) (this machine: the csv does not say)"
[ -n "$stamp" ] || stamp=$(date -u -r "$CSV" '+%Y-%m-%d %H:%M UTC')

# One data file per server: x, tps ratio, CPU ratio, tps label, CPU label (the ratios to
# the first server of each point; a failed median is drawn as 0 and labelled so). Also
# the x tics and the servers in the csv's order with their kind.
awk -F, -v dir="$WORK" '
    function pretty(p) {
        if (p ~ /^ps[0-9]+$/) return "point_select\\n@" substr(p, 3)
        if (p ~ /^rw[0-9]+$/) return "read_write\\n@" substr(p, 3)
        if (p ~ /^tpcc[0-9]+$/) return "TPC-C\\n@" substr(p, 5)
        return p
    }
    function num(v) { return v ~ /^[0-9.]+$/ && v + 0 > 0 }
    function tps_label(v) { if (!num(v)) return "failed"; return v >= 10000 ? sprintf("%.1fk", v / 1000) : sprintf("%.0f", v) }
    /^#/ || $1 == "point" || NF < 7 { next }
    {
        if (!($1 in pi)) { pi[$1] = np++; pname[pi[$1]] = $1; base_tps[$1] = $4; base_cpu[$1] = $7 }
        if (!($2 in si)) { si[$2] = ns++; sname[si[$2]] = $2; skind[si[$2]] = $3 }
        row[$1, $2] = $0
    }
    END {
        w = 0.8 / ns
        for (s = 0; s < ns; s++) {
            f = dir "/server-" s ".dat"
            for (p = 0; p < np; p++) {
                if (!((pname[p], sname[s]) in row)) continue
                split(row[pname[p], sname[s]], r, ",")
                x = p + (s - (ns - 1) / 2) * w
                rt = (num(r[4]) && num(base_tps[pname[p]])) ? r[4] / base_tps[pname[p]] : 0
                rc = (num(r[7]) && num(base_cpu[pname[p]])) ? r[7] / base_cpu[pname[p]] : 0
                printf "%.4f %.4f %.4f \"%s\" \"%s\"\n", x, rt, rc, tps_label(r[4]),
                    num(r[7]) ? sprintf(r[7] >= 100 ? "%.0f" : "%.1f", r[7]) : "failed" >f
            }
        }
        tics = ""
        for (p = 0; p < np; p++) tics = tics (p ? ", " : "") sprintf("\"%s\" %d", pretty(pname[p]), p)
        print tics >(dir "/xtics")
        for (s = 0; s < ns; s++) print s, sname[s], skind[s] >(dir "/servers")
        print w, np - 0.4 >(dir "/width")
        for (s = 0; s < ns; s++) for (p = 0; p < np; p++) if ((pname[p], sname[s]) in row) {
            split(row[pname[p], sname[s]], r, ",")
            if (num(r[4]) && num(base_tps[pname[p]]) && r[4] / base_tps[pname[p]] > mt) mt = r[4] / base_tps[pname[p]]
            if (num(r[7]) && num(base_cpu[pname[p]]) && r[7] / base_cpu[pname[p]] > mc) mc = r[7] / base_cpu[pname[p]]
        }
        printf "%.3f %.3f\n", (mt > 1 ? mt : 1) * 1.3, (mc > 1 ? mc : 1) * 1.3 >(dir "/ymax")
    }' "$CSV"
[ -s "$WORK/servers" ] || { echo "yardstick-plot.sh: no rows in $CSV" >&2; exit 2; }

# Three servers' labels fit across their bars; more are turned upright.
labels="center offset 0,0.7"
[ "$(wc -l <"$WORK/servers")" -le 3 ] || labels="left rotate by 90 offset 0,0.4"
# Colours as compare.sh's: native red, pool blue, the preloaded server green; a second
# server of a kind takes the next colour of the spare list.
declare -A CANON=([native]="#d62728" [pool]="#1f77b4" [preload]="#2ca02c") USED=()
SPARE=("#ff7f0e" "#9467bd" "#8c564b" "#e377c2" "#17becf" "#7f7f7f")
first_name=""; tps_series=(); cpu_series=(); spare=0
while read -r idx name kind; do
    [ -n "$first_name" ] || first_name=$name
    colour=${CANON[$kind]:-}
    if [ -z "$colour" ] || [ -n "${USED[$kind]:-}" ]; then colour=${SPARE[$((spare % ${#SPARE[@]}))]}; spare=$((spare + 1)); fi
    USED[$kind]=1
    case $kind in
    native) title="$name: thread per connection" ;;
    pool) title="$name: thread_handling=pool-of-threads" ;;
    *) title="$name: preloaded libfiberize.so" ;;
    esac
    [ "$name" = native ] && title="native: thread per connection"
    [ "$name" = pool ] && title="pool: MariaDB pool-of-threads"
    dat="$WORK/server-$idx.dat"
    tps_series+=("'$dat' using 1:2 with boxes lc rgb '$colour' title \"$title\""
        "'$dat' using 1:2:4 with labels boxed $labels font ',8' notitle")
    cpu_series+=("'$dat' using 1:3 with boxes lc rgb '$colour' notitle"
        "'$dat' using 1:3:5 with labels boxed $labels font ',8' notitle")
done <"$WORK/servers"
read -r ymax_tps ymax_cpu <"$WORK/ymax"
read -r width xmax <"$WORK/width"
join_series() { local IFS=,; echo "$*"; }
title="MariaDB yardstick on $machine: ${setup:-servers and clients on CPUs apart}"
sub="${rounds:-medians of the rounds}; $stamp${note:+ — $note}"

gnuplot <<EOF
set encoding utf8
set terminal pngcairo size 1500,620 font "sans,10" noenhanced
set output "$PNG"
set multiplot layout 1,2 title "$title\n$sub"
set style fill solid 0.85 border -1
set boxwidth $width
set xtics ($(cat "$WORK/xtics"))
set xrange [-0.6:$xmax]
set grid ytics
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5 lc rgb "black" back
set bmargin 4.5
set style textbox opaque noborder margins 0.5, 0.5
set key top left box opaque
set yrange [0:$ymax_tps]
set ylabel "throughput relative to $first_name (higher is better)"
set title "throughput: bars relative to $first_name, labels transactions/s"
plot $(join_series "${tps_series[@]}")
unset key
set yrange [0:$ymax_cpu]
set ylabel "server CPU per transaction relative to $first_name (lower is better)"
set title "server CPU time per transaction: bars relative to $first_name, labels µs"
plot $(join_series "${cpu_series[@]}")
unset multiplot
EOF
echo "yardstick-plot.sh: $PNG"
