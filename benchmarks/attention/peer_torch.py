"""PyTorch peer of bench_attention: torch.nn.functional.scaled_dot_product_attention, batch 1, 8 heads,
head_dim 64, float32, 2 threads, forward and forward + backward (gradients of q, k and v for a fixed output
gradient), with the same FLOP counts (forward 4*N^2*d*H, forward + backward 3.5x that, causal halved). Each N
runs in a fresh process so its peak RSS is its own. PyTorch picks its CPU flash kernel when it has one;
releases before 2.0 (Debian 12's python3-torch is 1.13) have no scaled_dot_product_attention, and get the
math formulation softmax(q k^T * scale) v, which their OpenBLAS computes (run them with OPENBLAS_CORETYPE set
to the machine's core and unset: Debian's OpenBLAS otherwise runs generic kernels). The "impl" column says
which path ran: "sdpa" or "math".

    python3 benchmarks/attention/peer_torch.py            # N = 512 ... 16384
    python3 benchmarks/attention/peer_torch.py 4096 full  # one row (MASK: full | causal)
"""
import resource
import statistics
import subprocess
import sys
import time

HEADS, DIM = 8, 64


def seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_seconds(fn):
    first = seconds(fn)  # warm-up and estimate
    if first > 5.0:
        return first
    return statistics.median(seconds(fn) for _ in range(3))


def run_one(n: int, mask: str) -> None:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(2)
    causal = mask != "full"
    gen = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(1, HEADS, n, DIM, generator=gen) for _ in range(4))
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))

    if hasattr(F, "scaled_dot_product_attention"):
        impl = "sdpa"

        def attention(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        impl = "math"
        allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None

        def attention(q, k, v):
            scores = (q @ k.transpose(-2, -1)) * DIM**-0.5
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v

    def forward():
        with torch.no_grad():
            attention(q, k, v)

    def both():
        out = attention(qg, kg, vg)
        torch.autograd.grad(out, (qg, kg, vg), dout)

    fwd, fb = median_seconds(forward), median_seconds(both)
    flop = 4.0 * n * n * DIM * HEADS * (0.5 if causal else 1.0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"{n:>6} {impl:>5} {torch.__version__:>8} {mask:>6} {fwd * 1e3:>10.2f} {flop / fwd / 1e9:>8.1f} "
          f"{fb * 1e3:>11.2f} {3.5 * flop / fb / 1e9:>8.1f} {rss:>9.0f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        run_one(int(sys.argv[1]), sys.argv[2])
    else:
        print(f"{'N':>6} {'impl':>5} {'version':>8} {'mask':>6} {'fwd ms':>10} {'GFLOP/s':>8} {'fwdbwd ms':>11} "
              f"{'GFLOP/s':>8} {'RSS MiB':>9}", flush=True)
        for n in (512, 1024, 2048, 4096, 8192, 16384):
            subprocess.run([sys.executable, __file__, str(n), "full"], check=False)
        subprocess.run([sys.executable, __file__, "4096", "causal"], check=False)
