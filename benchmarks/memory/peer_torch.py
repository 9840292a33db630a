"""The PyTorch peer of bench_memory: the identical stack of pre-norm encoder blocks (d_model 256, 8 heads,
feed-forward 1024, ReLU, LayerNorm eps 1e-3), batch 8, MSE loss, float32, forward + backward + Adam, with each
block called through torch.utils.checkpoint (use_reentrant=False) when --checkpoint 1. Attention is
torch.nn.MultiheadAttention with need_weights=False (scaled_dot_product_attention, PyTorch's fused kernel).
Prints one line per step and, last, "torch version=... step_s=... rss_mib=... loss=..." with the last step's
time and the process's peak RSS.

    python3 benchmarks/memory/peer_torch.py --seq 2048 --blocks 12 --steps 2 --checkpoint 1
"""
import argparse
import resource
import time

import torch
import torch.utils.checkpoint

BATCH, MODEL, HEADS, FF = 8, 256, 8, 1024


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
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--checkpoint", type=int, choices=[0, 1], default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(BATCH, args.seq, MODEL)
    target = torch.randn(BATCH, args.seq, MODEL)
    blocks = torch.nn.ModuleList(PreNormBlock() for _ in range(args.blocks))
    adam = torch.optim.Adam(blocks.parameters(), lr=1e-4)
    seconds = loss_value = 0.0
    for step in range(args.steps):
        start = time.perf_counter()
        adam.zero_grad(set_to_none=True)
        h = x
        for block in blocks:
            h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False) if args.checkpoint else block(h)
        loss = torch.nn.functional.mse_loss(h, target)
        loss.backward()
        adam.step()
        seconds = time.perf_counter() - start
        loss_value = loss.item()
        print(f"step {step}: {seconds:.2f} s, loss {loss_value:.5f}", flush=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"torch version={torch.__version__.split('+')[0]} step_s={seconds:.3f} rss_mib={rss:.0f} "
          f"loss={loss_value:.5f} threads={torch.get_num_threads()}")


if __name__ == "__main__":
    main()
