"""DDP over gloo, two ranks: the data is sharded by hand, and rank 1's shard is one sample
short, so its last batch is smaller: only rank 1 recompiles (and a real job's collectives
wait on the slow rank).

    pytest examples/ddp_example.py --recompile-budget

The first test fails, naming rank 1 and the size guard; the second, which marks the batch
dimension dynamic, passes.
Not collected by ``pytest examples``: run it by its path.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SAMPLES = 15  # 8 for rank 0 (batches of 4, 4), 7 for rank 1 (4, 3)
BATCH = 4


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x).relu()


def train(rank: int, world: int, port: int, dynamic_batch: bool) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        data = torch.randn(SAMPLES, 8)[rank::world]
        # The model compiled inside DDP: torch 2.7 and 2.8 graph-break in DDP's own forward
        # before the input, so torch.compile(ddp_model) guards nothing on the batch there.
        model = torch.nn.parallel.DistributedDataParallel(torch.compile(Net(), backend="eager"))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for start in range(0, len(data), BATCH):
            batch = data[start : start + BATCH]
            if dynamic_batch:
                torch._dynamo.mark_dynamic(batch, 0)
            model(batch).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ddp_uneven_shards() -> None:
    mp.spawn(train, args=(2, free_port(), False), nprocs=2)


def test_ddp_dynamic_batch() -> None:
    mp.spawn(train, args=(2, free_port(), True), nprocs=2)
