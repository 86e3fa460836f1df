"""Micro-batching: concurrent requests merged into one scoring call.

A request becomes a *job* (one state and its questions). One worker task
takes the first waiting job, waits at most ``max_wait_s`` for more (up to
``max_questions`` questions in all), then runs the whole batch in one worker
thread with one call of ``run_batch`` (one ``Engine.score`` call). A job whose
batch failed is retried alone, so one bad job never fails its neighbours.

The queue is bounded: when ``max_queue`` jobs already wait, `submit` raises
`Overloaded` at once (the server answers 429 with ``Retry-After``).
`stop` refuses new jobs, finishes the waiting ones and the running batch,
then ends the worker (graceful shutdown).

What it deliberately does not do: prioritise, time out jobs, run batches
in parallel (one model, one thread), or know what a job is (``run_batch`` does).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MicroBatcher", "Overloaded", "ShuttingDown"]


class Overloaded(RuntimeError):
    """The queue is full; retry later (the server answers 429 with ``Retry-After``).

    Examples
    --------
    >>> issubclass(Overloaded, RuntimeError)
    True
    """


class ShuttingDown(RuntimeError):
    """The server is stopping and takes no new work (the server answers 503).

    Examples
    --------
    >>> import asyncio
    >>> async def late():
    ...     b = MicroBatcher(lambda ps: ps)
    ...     await b.start()
    ...     await b.stop()
    ...     try:
    ...         await b.submit(1)
    ...     except ShuttingDown as e:
    ...         return str(e)
    >>> asyncio.run(late())
    'the server is shutting down and takes no new requests'
    """


@dataclass
class _Job:
    payload: Any
    size: int
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


class MicroBatcher:
    """Merge concurrent jobs into batches for one worker thread.

    Parameters
    ----------
    run_batch : callable
        ``run_batch(list_of_payloads) -> list_of_results`` (same length), run in
        the worker thread; a result that is an ``Exception`` is raised to that
        job's caller only.
    max_wait_s : float
        How long the first job of a batch waits for company.
    max_questions : int
        Questions per batch (a single larger job runs alone).
    max_queue : int
        Jobs allowed to wait; one more gets `Overloaded`.

    Examples
    --------
    >>> import asyncio
    >>> async def demo():
    ...     b = MicroBatcher(lambda ps: [p * 2 for p in ps], max_wait_s=0.01)
    ...     await b.start()
    ...     out = await asyncio.gather(*(b.submit(i) for i in range(3)))
    ...     await b.stop()
    ...     return out, b.batches_
    >>> asyncio.run(demo())
    ([0, 2, 4], 1)
    """

    def __init__(self, run_batch, *, max_wait_s: float = 0.005, max_questions: int = 256, max_queue: int = 64):
        if max_wait_s < 0 or max_questions < 1 or max_queue < 1:
            raise ValueError(f"MicroBatcher needs max_wait_s >= 0, max_questions >= 1 and max_queue >= 1, got "
                             f"{max_wait_s}, {max_questions}, {max_queue}.")
        self.run_batch = run_batch
        self.max_wait_s = max_wait_s
        self.max_questions = max_questions
        self.max_queue = max_queue
        self.batches_ = 0
        self.jobs_ = 0
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self._closing = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-score")

    @property
    def waiting(self) -> int:
        """Jobs waiting in the queue (0 before `start`).

        Examples
        --------
        >>> MicroBatcher(lambda ps: ps).waiting
        0
        """
        return self._queue.qsize() if self._queue is not None else 0

    async def start(self) -> None:
        """Create the queue and the worker task on the running event loop.

        Examples
        --------
        >>> import asyncio
        >>> async def demo():
        ...     b = MicroBatcher(lambda ps: ps)
        ...     await b.start()
        ...     await b.stop()
        ...     return b.batches_
        >>> asyncio.run(demo())
        0
        """
        self._queue = asyncio.Queue(maxsize=self.max_queue)
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._worker())

    async def call(self, fn, *args):
        """Run ``fn(*args)`` in the worker thread (for setup work that must not race a batch).

        Examples
        --------
        >>> import asyncio, threading
        >>> async def demo():
        ...     b = MicroBatcher(lambda ps: ps)
        ...     await b.start()
        ...     name = await b.call(lambda: threading.current_thread().name)
        ...     await b.stop()
        ...     return name.startswith("judge-score")
        >>> asyncio.run(demo())
        True
        """
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def submit(self, payload, size: int = 1):
        """Queue one job and wait for its result.

        Parameters
        ----------
        payload : object
            Passed to ``run_batch`` with the other jobs of its batch.
        size : int
            Its number of questions (batches hold at most ``max_questions``).

        Raises
        ------
        Overloaded
            ``max_queue`` jobs already wait.
        ShuttingDown
            `stop` was called.

        Examples
        --------
        >>> import asyncio
        >>> async def demo():
        ...     b = MicroBatcher(lambda ps: [len(p) for p in ps])
        ...     await b.start()
        ...     out = await b.submit("four", size=1)
        ...     await b.stop()
        ...     return out
        >>> asyncio.run(demo())
        4
        """
        if self._closing or self._queue is None:
            raise ShuttingDown("the server is shutting down and takes no new requests")
        fut = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Job(payload, max(1, int(size)), fut))
        except asyncio.QueueFull:
            raise Overloaded(f"{self.max_queue} requests are already waiting") from None
        return await fut

    async def stop(self) -> None:
        """Refuse new jobs, finish the queued ones, end the worker.

        Examples
        --------
        >>> import asyncio
        >>> async def demo():
        ...     b = MicroBatcher(lambda ps: ps, max_wait_s=0.05)
        ...     await b.start()
        ...     pending = asyncio.ensure_future(b.submit("queued"))
        ...     await asyncio.sleep(0)
        ...     await b.stop()                 # the queued job still gets its answer
        ...     return await pending
        >>> asyncio.run(demo())
        'queued'
        """
        self._closing = True
        if self._queue is not None:
            await self._queue.join()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    async def _worker(self) -> None:
        q = self._queue
        loop = asyncio.get_running_loop()
        carry: _Job | None = None
        while True:
            first = carry or await q.get()
            carry = None
            batch, total = [first], first.size
            deadline = loop.time() + self.max_wait_s
            while total < self.max_questions:
                timeout = deadline - loop.time()
                try:
                    job = q.get_nowait() if timeout <= 0 else await asyncio.wait_for(q.get(), timeout)
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
                if total + job.size > self.max_questions:
                    carry = job
                    break
                batch.append(job)
                total += job.size
            try:
                await self._run(loop, batch)
            finally:
                for _ in batch:
                    q.task_done()

    async def _run(self, loop, batch: list[_Job]) -> None:
        self.batches_ += 1
        self.jobs_ += len(batch)
        try:
            results = await loop.run_in_executor(self._executor, self.run_batch, [j.payload for j in batch])
        except Exception as e:  # noqa: BLE001 - isolate the failing job
            if len(batch) == 1:
                results = [e]
            else:
                results = []
                for j in batch:
                    try:
                        results += await loop.run_in_executor(self._executor, self.run_batch, [j.payload])
                    except Exception as e1:  # noqa: BLE001
                        results.append(e1)
        for j, r in zip(batch, results):
            if j.future.done():
                continue
            if isinstance(r, BaseException):
                j.future.set_exception(r)
            else:
                j.future.set_result(r)
