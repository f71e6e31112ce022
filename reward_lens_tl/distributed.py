"""Pair-set analyses across processes: `torchrun --nproc_per_node N script.py`.

`score_pairs`, `pair_attribution`,
`pair_lens`, `score_items`,
`build_report` and the `score`, `eval` and `report` commands
run unchanged under `torchrun`.
Every process runs the same script on the same pair set; the pairs are split **by batch,
strided**: batch `k` (pairs `k·B … k·B+B−1` for `batch_size=B`) runs on rank
`k mod world_size`. The per-batch results are gathered with `all_gather_object` and put back
in input order, so **every rank returns the same, complete result**, equal bit for bit to a
1-process run (each batch is the very batch a single process would run; use one thread per
process, as `torchrun` sets by default). Write files on rank 0 only (`is_main_process`).

- The process group: an already initialised one is used as it is; otherwise, when `torchrun`'s
  `WORLD_SIZE` is above 1, `world` initialises it from the environment with torch's
  default backends (`gloo` for CPU tensors, `nccl` for CUDA ones where available). Result
  objects are gathered on the CPU (gloo); a group you made with NCCL only needs
  `torch.cuda.set_device(local_rank)` first.
- A world larger than the number of batches is allowed: ranks with no batch contribute nothing
  and the result is still the 1-process one.
- An error on one rank (a pair too long with `on_error="raise"`, ...) is raised on every rank,
  the one of the earliest failing batch, so no rank hangs in a collective.
- With one process (no `WORLD_SIZE`, no group) nothing here runs a collective.

Examples:
    >>> world()
    (0, 1)
    >>> [k for k, _ in shard(range(10), batch_size=3, rank=1, world_size=2)]
    [1, 3]
"""

from __future__ import annotations

import atexit
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from itertools import count, islice
from typing import Any

import torch.distributed as dist

from .errors import UsageError

__all__ = [
    "is_main_process",
    "world",
]

#: How long a rank waits for the others in a collective before giving up.
TIMEOUT = timedelta(minutes=30)


def world() -> tuple[int, int]:
    """`(rank, world_size)`.

    From the initialised process group, or from `torchrun`'s environment (initialising the group),
    or `(0, 1)`.

    Examples:
        >>> world()  # a plain (not torchrun) process
        (0, 1)
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        init_from_env()
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_env(timeout: timedelta = TIMEOUT) -> None:
    """Initialise the default process group from `torchrun`'s environment (`env://`)."""
    if not dist.is_available():
        raise UsageError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    dist.init_process_group(timeout=timeout)
    atexit.register(_destroy)


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def is_main_process() -> bool:
    """True on rank 0 (and in a 1-process run): the process that writes files and prints.

    Examples:
        >>> is_main_process()  # a plain (not torchrun) process
        True
    """
    return world()[0] == 0


def batches(items: Iterable[Any], batch_size: int) -> Iterator[tuple[int, list[Any]]]:
    """`(k, batch)` for consecutive batches of `batch_size` items (the last may be short)."""
    it = iter(items)
    for k in count():
        batch = list(islice(it, batch_size))
        if not batch:
            return
        yield k, batch


def shard(
    items: Iterable[Any],
    batch_size: int,
    rank: int | None = None,
    world_size: int | None = None,
) -> Iterator[tuple[int, list[Any]]]:
    """This rank's batches `(k, batch)`: batch `k` goes to rank `k mod world_size`.

    The items are streamed (only one batch is held); other ranks' batches are skipped unread.
    """
    if rank is None or world_size is None:
        rank, world_size = world()
    for k, batch in batches(items, batch_size):
        if k % world_size == rank:
            yield k, batch


def gather_results(local: list[tuple[int, Any]], error: tuple[int, Exception] | None = None):
    """Every rank's `(k, result)` in order of `k`, on every rank (one process: `local`).

    `error` is this rank's `(k, exception)` if it stopped at batch `k`; when any rank
    failed, every rank raises the exception of the smallest `k`.
    """
    rank, size = world()
    if size == 1:
        if error is not None:
            raise error[1]
        return local
    parts: list[Any] = [None] * size
    dist.all_gather_object(parts, (local, _picklable(error)))
    errors = [err for _, err in parts if err is not None]
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
    return sorted((kr for rank_local, _ in parts for kr in rank_local), key=lambda kr: kr[0])


def map_in_rounds(
    items: Iterable[Any], fn: Callable[[Any], Any]
) -> Iterator[list[tuple[int, Any]]]:
    """`fn` on item `k` on rank `k mod world_size`.

    After each round of `world_size` items, yields that round's `[(k, fn(item_k)), ...]` in order,
    on every rank.

    For work that is written out as it goes (score files): one process yields after every
    item. Every rank must pass the same items. An error on any rank is raised on every rank
    at the end of its round.

    Examples:
        >>> [r for rnd in map_in_rounds("abc", str.upper) for r in rnd]
        [(0, 'A'), (1, 'B'), (2, 'C')]
    """
    rank, size = world()
    numbered = enumerate(items)
    while rnd := list(islice(numbered, size)):
        local, error = [], None
        for k, item in rnd:
            if k % size == rank:
                try:
                    local.append((k, fn(item)))
                except Exception as err:  # noqa: BLE001 - re-raised on every rank
                    error = (k, err)
        yield gather_results(local, error)


def map_items(items: Iterable[Any], fn: Callable[[Any], Any]) -> list[tuple[int, Any]]:
    """Every `(k, fn(item_k))` in order on every rank.

    Item `k` is run on rank `k mod world_size` (`map_in_rounds`, flattened).
    """
    return [kr for rnd in map_in_rounds(items, fn) for kr in rnd]


def broadcast(obj: Any) -> Any:
    """Rank 0's `obj` on every rank (one process: `obj`)."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    """Wait for every rank (one process: nothing)."""
    if world()[1] > 1:
        dist.barrier()


def _picklable(error: tuple[int, Exception] | None):
    if error is None:
        return None
    try:
        pickle.loads(pickle.dumps(error[1]))
    except Exception:  # an exception that cannot travel: keep its class name and message
        return error[0], RuntimeError(f"{type(error[1]).__name__}: {error[1]}")
    return error
