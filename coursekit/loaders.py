"""Batches of token ids for training: a padding collate function and a length-bucketed DataLoader.

Reviews differ a lot in length. Padding every batch to its longest review wastes compute on pad tokens, which
hurts most on a CPU. Bucketing puts reviews of similar length in the same batch: the examples are shuffled,
cut into chunks of about 50 batches, each chunk is sorted by length and cut into batches, and the order of all
batches is shuffled. Each example still appears exactly once per epoch, and batches stay random enough to train.
"""
from __future__ import annotations

import random
from functools import partial
from typing import Iterator, Sequence

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

__all__ = ["pad_collate", "make_loader", "BucketBatchSampler", "padding_fraction", "BATCHES_PER_CHUNK"]

BATCHES_PER_CHUNK = 50


def pad_collate(batch: Sequence[tuple[Sequence[int], int]], pad_id: int = 0, max_len: int | None = None):
    """[(ids, label), ...] -> (ids (B, T) LongTensor, labels (B,) LongTensor), post-padded with pad_id.

    T is the longest sequence of the batch (at least 1), or max_len when given (longer ones are cut at the end).
    """
    if len(batch) == 0:
        raise ValueError("cannot collate an empty batch")
    sequences = [list(ids)[:max_len] if max_len is not None else list(ids) for ids, _ in batch]
    longest = max(1, max(len(sequence) for sequence in sequences))
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)  # (B, T)
    for row, sequence in enumerate(sequences):
        if sequence:
            ids[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    labels = torch.as_tensor([int(label) for _, label in batch], dtype=torch.long)  # (B,)
    return ids, labels


class _PairDataset(Dataset):
    def __init__(self, ids: Sequence[Sequence[int]], labels: Sequence[int]):
        self.ids, self.labels = ids, labels

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int):
        return self.ids[index], self.labels[index]


class BucketBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices; see the module docstring. Epoch e uses random.Random(seed + e)."""

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool = True, bucket: bool = True,
                 seed: int = 0, batches_per_chunk: int = BATCHES_PER_CHUNK):
        self.lengths = list(lengths)
        self.batch_size, self.shuffle, self.bucket, self.seed = batch_size, shuffle, bucket, seed
        self.chunk_size = batch_size * batches_per_chunk
        self.epoch = 0

    def __len__(self) -> int:
        return (len(self.lengths) + self.batch_size - 1) // self.batch_size

    def batches(self, epoch: int) -> list[list[int]]:
        rng = random.Random(self.seed + epoch)
        order = list(range(len(self.lengths)))
        if self.shuffle:
            rng.shuffle(order)
        if self.bucket:
            chunks = [order[start:start + self.chunk_size] for start in range(0, len(order), self.chunk_size)]
            # sorted() is stable, so equal lengths keep their (shuffled) order
            order = [index for chunk in chunks for index in sorted(chunk, key=self.lengths.__getitem__)]
        batches = [order[start:start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches(self.epoch)
        self.epoch += 1  # the next pass over the loader is a new epoch with a new order
        return iter(batches)


def make_loader(ids: Sequence[Sequence[int]], labels: Sequence[int], batch_size: int, shuffle: bool = True,
                pad_id: int = 0, bucket: bool = True, seed: int = 0, max_len: int | None = None) -> DataLoader:
    """A DataLoader of (ids (B, T) LongTensor, labels (B,) LongTensor) batches over encoded reviews.

    ids: one list (or 1-D tensor) of token ids per example; labels: one int per example.
    bucket=True groups examples of similar length (much less padding); seed makes the order reproducible,
    and each new pass over the loader (epoch) gets a different order.
    """
    if len(ids) != len(labels):
        raise ValueError(f"ids and labels differ in length: {len(ids)} vs {len(labels)}")
    if len(ids) == 0:
        raise ValueError("make_loader needs at least one example")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be >= 1 or None, got {max_len}")
    lengths = [min(len(sequence), max_len) if max_len else len(sequence) for sequence in ids]
    sampler = BucketBatchSampler(lengths, batch_size, shuffle=shuffle, bucket=bucket, seed=seed)
    return DataLoader(_PairDataset(ids, labels), batch_sampler=sampler,
                      collate_fn=partial(pad_collate, pad_id=pad_id, max_len=max_len))


def padding_fraction(loader: DataLoader, pad_id: int = 0) -> float:
    """Share of pad_id entries over all (B, T) id tensors of one pass over the loader."""
    padded = total = 0
    for ids, _ in loader:
        padded += int((ids == pad_id).sum())
        total += ids.numel()
    return padded / max(total, 1)
