"""The PyTorch peer of bench_encoder: the identical pre-norm encoder block training step (forward, backward,
Adam), batch 32, sequence 128, d_model 256, 8 heads, feed-forward 1024 (ReLU), LayerNorm eps 1e-3, MSE loss,
float32, 2 threads. Prints the median step time and the peak RSS. --autocast-bf16 runs the forward pass under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed bfloat16 (the peer of loom's mixed_bfloat16).

    python3 benchmarks/encoder/peer_torch.py [--autocast-bf16]
    OPENBLAS_CORETYPE=SkylakeX python3 benchmarks/encoder/peer_torch.py   # for builds of torch on OpenBLAS
"""
import contextlib
import resource
import sys
import time

import torch

BATCH, SEQ, MODEL, HEADS, FF = 32, 128, 256, 8, 1024
WARMUP, REPEATS = 3, 20


class PreNormBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(MODEL, eps=1e-3)
        self.attention = torch.nn.MultiheadAttention(MODEL, HEADS, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(MODEL, eps=1e-3)
        self.ff = torch.nn.Sequential(torch.nn.Linear(MODEL, FF), torch.nn.ReLU(), torch.nn.Linear(FF, MODEL))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.ff(self.norm2(x))


def main():
    autocast = sys.argv[1:] == ["--autocast-bf16"]
    if sys.argv[1:] and not autocast:
        sys.exit("usage: peer_torch.py [--autocast-bf16]")
    torch.set_num_threads(2)
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, MODEL)
    target = torch.randn(BATCH, SEQ, MODEL)
    block = PreNormBlock()
    adam = torch.optim.Adam(block.parameters(), lr=1e-4)
    times = []
    for step in range(WARMUP + REPEATS):
        start = time.perf_counter()
        adam.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            loss = torch.nn.functional.mse_loss(block(x).float(), target)
        loss.backward()
        adam.step()
        elapsed = (time.perf_counter() - start) * 1000
        if step >= WARMUP:
            times.append(elapsed)
    times.sort()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    mode = "autocast bf16" if autocast else "float32"
    print(f"torch {torch.__version__} encoder step ({mode}): median {times[len(times) // 2]:.1f} ms "
          f"(min {times[0]:.1f}, max {times[-1]:.1f}) over {len(times)} steps, peak RSS {rss:.0f} MiB, "
          f"threads {torch.get_num_threads()}")


if __name__ == "__main__":
    main()
