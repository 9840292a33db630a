"""PyTorch peer of bench_attention: torch.nn.functional.scaled_dot_product_attention, batch 1, 8 heads,
head_dim 64, float32, 2 threads, forward and forward + backward (gradients of q, k and v for a fixed output
gradient), with the same FLOP counts (forward 4*N^2*d*H, forward + backward 3.5x that, causal halved). Each N
runs in a fresh process so its peak RSS is its own. PyTorch picks its CPU flash kernel when it has one.

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

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def both():
        out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
        torch.autograd.grad(out, (qg, kg, vg), dout)

    fwd, fb = median_seconds(forward), median_seconds(both)
    flop = 4.0 * n * n * DIM * HEADS * (0.5 if causal else 1.0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"{n:>6} torch {torch.__version__:>8} {mask:>6} {fwd * 1e3:>10.2f} {flop / fwd / 1e9:>8.1f} "
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
