"""The waiting queue: job ids in arrival order, their specs alongside, and a count per minimum GPU need."""

from __future__ import annotations

from bisect import bisect_left

from sfenv.world.workload import JobSpec

__all__ = ["WaitingQueue"]


class WaitingQueue:
    """Waiting jobs in ascending id (= arrival) order.

    The specs are kept in step with the ids, so a view reads the queue without an O(queue) rebuild,
    and waiting jobs are counted per ``min_gpus``, so a decision-point test costs O(distinct
    minimums), not O(queue).
    """

    def __init__(self) -> None:
        #: ids of the waiting jobs, ascending
        self.ids: list[int] = []
        #: their specs, in the same order
        self.specs: list[JobSpec] = []
        #: ``min_gpus -> number of waiting jobs that need it``
        self.min_counts: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, spec: JobSpec) -> None:
        """Put job ``spec`` in the queue at its place in id order."""
        jid = spec.job_id
        i = bisect_left(self.ids, jid)
        self.ids.insert(i, jid)
        self.specs.insert(i, spec)
        self.min_counts[spec.min_gpus] = self.min_counts.get(spec.min_gpus, 0) + 1

    def remove(self, jid: int) -> None:
        """Take job ``jid`` out of the queue.

        :raises ValueError: if it does not wait.
        """
        i = bisect_left(self.ids, jid)
        if i == len(self.ids) or self.ids[i] != jid:
            raise ValueError(f"job {jid} is not in the queue")
        del self.ids[i]
        spec = self.specs.pop(i)
        n = self.min_counts[spec.min_gpus] - 1
        if n:
            self.min_counts[spec.min_gpus] = n
        else:
            del self.min_counts[spec.min_gpus]
