"""PyTorch peer of bench_op_overhead: microseconds per torch.add on 8x8 float32 tensors in eager mode, in a
chain of 1000 dependent adds, with autograd recording (the input requires grad) and without. Median of 51 runs.

    python3 benchmarks/op_overhead/peer_torch.py
"""
import statistics
import time

import torch

CHAIN = 1000
REPEATS = 51


def chain_us(record: bool) -> float:
    x = torch.randn(8, 8, dtype=torch.float32, requires_grad=record)
    y = torch.randn(8, 8, dtype=torch.float32)
    z = x
    start = time.perf_counter()
    for _ in range(CHAIN):
        z = torch.add(z, y)
    elapsed = time.perf_counter() - start
    return elapsed * 1e6 / CHAIN  # the graph is freed outside the timed region


def median_us(record: bool) -> float:
    for _ in range(3):  # warm-up: allocator caches, dispatcher
        chain_us(record)
    return statistics.median(chain_us(record) for _ in range(REPEATS))


def main() -> None:
    torch.set_num_threads(1)  # 64 elements: threads only add overhead
    taped = median_us(True)
    untaped = median_us(False)
    print(f"torch {torch.__version__}: torch.add on 8x8 float32, chain of {CHAIN}, median of {REPEATS} runs")
    print(f"  recorded by autograd (requires_grad): {taped:.3f} us/op")
    print(f"  no recording:                         {untaped:.3f} us/op")


if __name__ == "__main__":
    main()
