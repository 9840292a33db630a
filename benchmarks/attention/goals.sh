#!/usr/bin/env bash
# The flash attention goals, measured side by side in interleaved rounds. Each round runs, one after another:
#   loom flash (widest ISA) at N = 4096, full attention;
#   each PyTorch peer (peer_torch.py) at N = 4096, with OPENBLAS_CORETYPE set to the core loom picked, then unset;
#   loom causal, then causal with a 256-wide window, at N = 16384.
# The machine may be shared: the two sides of a round see about the same load, so a round's ratio is the
# comparison, and the summary gives the median of each figure and of each ratio over the rounds.
#
#   benchmarks/attention/goals.sh [ROUNDS] [PYTHON ...]
#     ROUNDS  rounds to run (default 5)
#     PYTHON  interpreters that have torch, one peer each (default: python3)
#   BENCH=path/to/bench_attention overrides build/benchmarks/bench_attention.
set -euo pipefail

peer_script="$(cd "$(dirname "$0")" && pwd)/peer_torch.py"
bench=${BENCH:-build/benchmarks/bench_attention}
rounds=${1:-5}
shift $(($# > 0 ? 1 : 0))
peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(python3)
read -r isa core < <("$bench" info)
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT

# Each measured row is appended to $rows as "round label fwd_ms fwd_gflops fwdbwd_ms fwdbwd_gflops rss_mib";
# each round prints the fwd+bwd GFLOP/s of its rows (the window's in the causal count) and the window's speed-up.
record() {  # record ROUND LABEL COMMAND...: the row the command prints, under LABEL
  local round=$1 label=$2
  shift 2
  "$@" | awk -v r="$round" -v l="$label" 'NF == 9 && $1 ~ /^[0-9]+$/ { print r, l, $5, $6, $7, $8, $9 }' >>"$rows"
}

# Each peer's label: its torch version and the path its peer script takes (sdpa, or the math formulation).
versions=()
for python in "${peers[@]}"; do
  versions+=("$("$python" -c 'import torch, torch.nn.functional as F
print(torch.__version__.split("+")[0] + ("-sdpa" if hasattr(F, "scaled_dot_product_attention") else "-math"))')")
done

echo "flash attention goals: $rounds rounds; loom $isa; OpenBLAS core $core; peers: ${peers[*]}"
for round in $(seq "$rounds"); do
  record "$round" loom "$bench" 4096 flash "$isa" full
  for p in "${!peers[@]}"; do
    record "$round" "torch-${versions[p]},core=$core" env OMP_NUM_THREADS=2 OPENBLAS_CORETYPE="$core" \
      "${peers[p]}" "$peer_script" 4096 full
    record "$round" "torch-${versions[p]},core=unset" env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=2 \
      "${peers[p]}" "$peer_script" 4096 full
  done
  record "$round" causal "$bench" 16384 flash "$isa" causal
  record "$round" window "$bench" 16384 flash "$isa" window
  awk -v r="$round" '$1 == r { printf "%s%s %.1f", (n++ ? " | " : "round " r ": "), $2, $6; t[$2] = $3; b[$2] = $5 }
    END { printf " | window speed-up fwd %.1fx fwd+bwd %.1fx\n", t["causal"] / t["window"], b["causal"] / b["window"] }' "$rows"
done

# Medians over the rounds, and each round's ratios: loom over each peer (fwd+bwd GFLOP/s), causal over window
# (time). Goals: fwd+bwd >= 150 GFLOP/s and ahead of every peer; window >= 20x faster; RSS <= 3x the tensors.
awk -v rounds="$rounds" '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function lowest(list,   a, n, i, m) {
    n = split(list, a, " "); m = a[1]
    for (i = 2; i <= n; ++i) if (a[i] + 0 < m + 0) m = a[i]
    return m
  }
  { fwd[$1, $2] = $3; fb_ms[$1, $2] = $5; fb[$1, $2] = $6; rss[$1, $2] = $7; labels[$2] = 1 }
  END {
    for (r = 1; r <= rounds; ++r) {
      loom = loom " " fb[r, "loom"]; met += fb[r, "loom"] >= 150
      wf = fwd[r, "causal"] / fwd[r, "window"]; wb = fb_ms[r, "causal"] / fb_ms[r, "window"]
      window_fwd = window_fwd " " wf; window_fb = window_fb " " wb; wmet += wf >= 20 && wb >= 20
      memory = memory " " rss[r, "causal"]
    }
    printf "\nmedians over %d rounds\n", rounds
    printf "  loom fwd+bwd at N = 4096: %.1f GFLOP/s (lowest %.1f); >= 150 in %d of %d rounds\n",
           median(loom), lowest(loom), met, rounds
    for (label in labels) {
      if (label !~ /^torch-/) continue
      ratios = peer = ""; ahead = 0
      for (r = 1; r <= rounds; ++r) {
        ratios = ratios " " fb[r, "loom"] / fb[r, label]; peer = peer " " fb[r, label]; ahead += fb[r, "loom"] > fb[r, label]
      }
      printf "  %s: %.1f GFLOP/s; loom / peer %.2fx (lowest %.2fx); loom ahead in %d of %d rounds\n",
             label, median(peer), median(ratios), lowest(ratios), ahead, rounds
    }
    printf "  window 256 vs causal at N = 16384: fwd %.1fx, fwd+bwd %.1fx (lowest %.1fx, %.1fx); >= 20x in %d of %d rounds\n",
           median(window_fwd), median(window_fb), lowest(window_fwd), lowest(window_fb), wmet, rounds
    printf "  peak RSS, causal fwd+bwd at N = 16384: %.0f MiB (limit: 3 x 256 MiB of q, k, v, o and gradients = 768)\n",
           median(memory)
  }' "$rows"
