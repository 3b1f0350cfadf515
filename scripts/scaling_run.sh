#!/usr/bin/env bash
# scaling_run.sh [DIR] [THREADS...]: runs the bundles scripts/scaling_pack.py packed in DIR (default
# target/scaling) through bundle-rt's engine at each thread count (default 1 2 4 8 16, capped at the CPUs), and
# prints one table row per model: the median of BUNDLE_REPEAT (default 50) timed runs after 300 ms of warm-up,
# the speed-up over the first thread count, and whether the outputs are bitwise those of the first count (they
# must be). Needs only a shell and coreutils; prints the CPU first.
set -euo pipefail
dir=${1:-target/scaling}
shift || true
threads=${*:-1 2 4 8 16}
reps=${BUNDLE_REPEAT:-50}
cpus=$(nproc)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $cpus logical CPUs;" \
  "avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)"
[ -x "$dir/fma_peak" ] && "$dir/fma_peak"
header="| model |"
sep="|---|"
for t in $threads; do
  [ "$t" -le "$cpus" ] || continue
  header="$header ${t}t ms | ${t}t speed-up |"
  sep="$sep---|---|"
done
echo "$header bitwise equal |"
echo "$sep---|"
while read -r name; do
  [ -n "$name" ] || continue
  d="$dir/$name"
  read -r _ nin nout < "$d/spec"
  ins=()
  for ((i = 0; i < nin; i++)); do ins+=("$d/in$i.bin"); done
  row="| $name |"
  base=""
  first=""
  same=yes
  for t in $threads; do
    [ "$t" -le "$cpus" ] || continue
    outs=()
    for ((i = 0; i < nout; i++)); do outs+=("$d/out_t${t}_$i.bin"); done
    med=$(BUNDLE_THREADS=$t BUNDLE_WARMUP_MS=300 BUNDLE_REPEAT=$reps "$d/run" "$d/$name.weights" "${ins[@]}" \
      "${outs[@]}" | sed -n 's/.*ran in \([0-9.]*\) ms.*/\1/p' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    [ -n "$base" ] || base=$med
    row="$row $med | $(awk -v b="$base" -v m="$med" 'BEGIN {printf "%.2fx", b / m}') |"
    [ -n "$first" ] || first=$t
    for ((i = 0; i < nout; i++)); do
      cmp -s "$d/out_t${first}_$i.bin" "$d/out_t${t}_$i.bin" || same=no
    done
  done
  echo "$row $same |"
done < "$dir/models"
