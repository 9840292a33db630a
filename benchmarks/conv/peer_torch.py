"""The PyTorch peer of bench_conv: the identical ResNet-style stack, two basic blocks of
relu(x + bn(conv(relu(bn(conv(x)))))) with Conv2d 3x3 (padding 1 = "same", 64 -> 64, no bias) and
BatchNorm2d in training mode (eps 1e-3, momentum 0.01 = Keras's 0.99), batch 32, 32x32 pixels, 64 channels,
float32. One step is forward, loss = mean of the output, and the gradients of every weight and of the input
(torch.autograd.grad, no optimizer step); median of the timed steps after the warm-up, split into forward
(up to the loss) and backward, and the peak RSS of this process (base_mib: the peak after `import torch`,
before the network). ReLU is not in-place (as loom's).

    python3 benchmarks/conv/peer_torch.py                                  # channels_last, 2 threads
    python3 benchmarks/conv/peer_torch.py --memory-format contiguous      # NCHW, PyTorch's default layout
    python3 benchmarks/conv/peer_torch.py --threads 2 --steps 8 --warmup 2

bench_conv runs it once per round in its own process and reads the one line it prints ("torch key=value ...").
"""
import argparse
import resource
import statistics
import time

import torch

BATCH, SIZE, CHANNELS, BLOCKS = 32, 32, 64, 2


def conv():
    return torch.nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)


def bn():
    return torch.nn.BatchNorm2d(CHANNELS, eps=1e-3, momentum=0.01)


class BasicBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1, self.conv2, self.bn2 = conv(), bn(), conv(), bn()

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(h)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--memory-format", choices=("channels_last", "contiguous"), default="channels_last")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # after the import: PyTorch's own share
    torch.manual_seed(0)
    memory_format = getattr(torch, args.memory_format + ("_format" if args.memory_format == "contiguous" else ""))
    model = torch.nn.Sequential(*(BasicBlock() for _ in range(BLOCKS))).train().to(memory_format=memory_format)
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE).to(memory_format=memory_format).requires_grad_(True)
    sources = [*model.parameters(), x]

    fwd_ms, bwd_ms, step_ms = [], [], []
    loss = 0.0
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        l = model(x).mean()
        middle = time.perf_counter()
        grads = torch.autograd.grad(l, sources)
        end = time.perf_counter()
        loss = l.item()
        del grads, l
        if step >= args.warmup:
            fwd_ms.append((middle - start) * 1e3)
            bwd_ms.append((end - middle) * 1e3)
            step_ms.append((end - start) * 1e3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"torch version={torch.__version__.split('+')[0]} format={args.memory_format} "
          f"threads={torch.get_num_threads()} step_ms={statistics.median(step_ms):.2f} "
          f"fwd_ms={statistics.median(fwd_ms):.2f} bwd_ms={statistics.median(bwd_ms):.2f} "
          f"min_ms={min(step_ms):.2f} steps={len(step_ms)} rss_mib={rss:.0f} base_mib={base:.0f} loss={loss:.5f}",
          flush=True)


if __name__ == "__main__":
    main()
