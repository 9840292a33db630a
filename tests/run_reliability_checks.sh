#!/usr/bin/env bash
# The sanitizer and fuzzing checks of docs/reliability.md, run by CI after the Release tests:
#   1. the whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan),
#   2. the thread test built with ThreadSanitizer (build-tsan),
#   3. each libFuzzer target for LOOM_FUZZ_SECONDS seconds (default 60) on a copy of its seed corpus.
# Needs clang and its sanitizer/libFuzzer runtimes (Debian: clang libclang-rt-14-dev); installs nothing.
# Any finding fails the script. The sanitized builds use -O0: they compile about four times faster than at -O1,
# which matters more to CI's time than the slower test run.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds=${LOOM_FUZZ_SECONDS:-60}
jobs=2
# Every finding stops the program with a failing status. LeakSanitizer is part of ASan on Linux.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

phase_start=$SECONDS
end_phase() {
  echo "== $1: $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

configure() {  # build dir, sanitizers, extra options
  cmake -S . -B "$1" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE="$2" \
        -DLOOM_BUILD_EXAMPLES=OFF -DLOOM_BUILD_BENCHMARKS=OFF -DLOOM_WARNINGS_AS_ERRORS=ON "${@:3}"
}

configure build-asan "address;undefined" -DLOOM_BUILD_FUZZERS=ON
cmake --build build-asan -j"$jobs"
end_phase "ASan+UBSan build (library, test suite, fuzzers)"

ctest --test-dir build-asan --output-on-failure -j"$jobs"
end_phase "ASan+UBSan test suite"

configure build-tsan thread
cmake --build build-tsan -j"$jobs" --target loom_thread_tests
end_phase "TSan build (library, thread test)"

ctest --test-dir build-tsan --output-on-failure -j"$jobs"
end_phase "TSan thread test"

# The fuzzers run side by side, each on a fresh copy of its corpus: the committed corpus is never written.
fuzz_dir=build-asan/fuzz-run
rm -rf "$fuzz_dir"
targets=(fuzz_load_npy fuzz_safetensors fuzz_keras_archive)
pids=()
for target in "${targets[@]}"; do
  mkdir -p "$fuzz_dir/$target/artifacts"
  cp -r "tests/fuzz/corpus/$target" "$fuzz_dir/$target/corpus"
  "build-asan/tests/fuzz/$target" -max_total_time="$fuzz_seconds" -print_final_stats=1 \
      -dict="tests/fuzz/$target.dict" -artifact_prefix="$fuzz_dir/$target/artifacts/" \
      "$fuzz_dir/$target/corpus" > "$fuzz_dir/$target.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  target=${targets[$i]}
  if wait "${pids[$i]}"; then
    grep -E "^stat::number_of_executed_units|^Done" "$fuzz_dir/$target.log" || true
    echo "$target: no crash, corpus of $(ls "$fuzz_dir/$target/corpus" | wc -l) inputs"
  else
    failed=1
    tail -n 60 "$fuzz_dir/$target.log"
    echo "$target: FOUND A CRASH; the input is in $fuzz_dir/$target/artifacts/"
  fi
done
end_phase "fuzzing (${fuzz_seconds} s per target, side by side)"
exit "$failed"
