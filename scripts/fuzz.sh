#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (nightly toolchain, libFuzzer + AddressSanitizer).
#   bash scripts/fuzz.sh [SECONDS]             the bundle-rt targets (txn, recipe, config), SECONDS each (default 60)
#   bash scripts/fuzz.sh --compiler [SECONDS]  also the compiler target with AddressSanitizer (an instrumented build
#                                              of tract and Cranelift: ~15 min on 2 cores)
#   bash scripts/fuzz.sh --compiler-smoke [SECONDS]
#                                              also the compiler target built without a sanitizer (-s none: coverage
#                                              guidance, panics, aborts, timeouts and the RSS limit; what the test
#                                              command runs; its corpus is also replayed on stable by
#                                              tests/tests/fuzz_corpus.rs)
# Seeds come from fuzz/seeds/<target>; the growing corpus lives in fuzz/corpus (ignored). A crash leaves its input
# in fuzz/artifacts/<target> and fails this script: minimise it, fix the bug, and commit the input under
# fuzz/seeds/<target>/crash-* as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
compiler=0
sanitizer=address
if [ "${1:-}" = "--compiler" ]; then compiler=1; shift; fi
if [ "${1:-}" = "--compiler-smoke" ]; then compiler=1; sanitizer=none; shift; fi
secs="${1:-60}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly toolchain (rustup toolchain install nightly); skipping fuzzing" >&2
  exit 0
fi
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
targets=(txn recipe config)
[ "$compiler" = 1 ] && targets+=(compile_onnx)
cd fuzz
for t in "${targets[@]}"; do
  feat=()
  [ "$t" = compile_onnx ] && feat=(--features compiler -s "$sanitizer")
  mkdir -p "corpus/$t"
  cargo +nightly fuzz build -O "${feat[@]}" "$t"
  echo "== fuzz $t for ${secs}s"
  ASAN_OPTIONS=detect_leaks=0 cargo +nightly fuzz run -O "${feat[@]}" "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=3072 -timeout=20 -print_final_stats=1 2>&1 \
    | grep -E "^(Done|stat::number_of_executed_units|==.*ERROR|SUMMARY|thread .* panicked|artifact_prefix)" || true
  if ls "artifacts/$t"/crash-* "artifacts/$t"/oom-* "artifacts/$t"/timeout-* >/dev/null 2>&1; then
    echo "fuzz.sh: $t found failing inputs:" >&2
    ls "artifacts/$t" >&2
    exit 1
  fi
done
