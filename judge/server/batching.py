"""Micro-batching: concurrent requests merged into scoring calls sized by tokens, served in turn.

A request becomes one or more *jobs* (one state and some of its questions, priced in
tokens before it is queued). One worker task takes jobs round-robin across the waiting
requests (one job of each in turn, so a small request is never stuck behind all the jobs
of a large one), waits at most ``max_wait_s`` for company (and not at all when ``expect`` says
no other request is on its way: a lone request pays no wait), stops adding jobs at
``max_questions`` questions or ``max_tokens`` tokens, then runs the batch in one worker
thread with one call of ``run_batch`` (one ``Engine.score`` call). A job whose batch failed
is retried alone, so one bad job never fails its neighbours.

The queue is bounded: when ``max_queue`` requests already wait, `submit` raises
`Overloaded` at once (the server answers 429 with ``Retry-After``). A request whose caller
goes away (its awaiting task is cancelled: the client disconnected) has its waiting jobs
dropped before they are scored. `stop` refuses new requests, finishes the waiting ones and
the running batch, then ends the worker (graceful shutdown). `drain` bounds that: once its
seconds are up, every job still waiting, and every new one, fails with `ShuttingDown` (the
server answers 503) instead of holding the shutdown up; the running batch still finishes.
While draining, turns give way to finishing: the request at the head of the queue has all its
jobs run before the next one starts, so as many requests as possible are answered whole.

What it deliberately does not do: time out jobs, run batches in parallel (one model, one
thread), or know what a job is (``run_batch`` does).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict, deque
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
    tokens: int
    future: asyncio.Future
    request: int
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
        Requests allowed to wait; one more gets `Overloaded`.
    max_tokens : int, optional
        Tokens per batch (a single larger job runs alone); None: no token bound.
    expect : callable, optional
        ``expect() -> bool``: whether more jobs may be on their way (the server: requests
        being admitted). When nothing else waits and it says no, a batch runs at once instead
        of waiting ``max_wait_s`` for company. None: always wait.

    Attributes
    ----------
    batches_, jobs_, cancelled_, refused_ : int
        Batches run, jobs run, jobs dropped because their caller went away, jobs refused
        because `drain`'s time ran out.

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

    def __init__(self, run_batch, *, max_wait_s: float = 0.005, max_questions: int = 256, max_queue: int = 64,
                 max_tokens: int | None = None, expect=None):
        if max_wait_s < 0 or max_questions < 1 or max_queue < 1 or (max_tokens is not None and max_tokens < 1):
            raise ValueError(f"MicroBatcher needs max_wait_s >= 0, max_questions >= 1, max_queue >= 1 and "
                             f"max_tokens >= 1 (or None), got {max_wait_s}, {max_questions}, {max_queue}, "
                             f"{max_tokens}.")
        self.run_batch = run_batch
        self.max_wait_s = max_wait_s
        self.max_questions = max_questions
        self.max_queue = max_queue
        self.max_tokens = max_tokens
        self.expect = expect
        self.batches_ = 0
        self.jobs_ = 0
        self.cancelled_ = 0
        self.refused_ = 0
        self._refusing: str | None = None  # why new and waiting jobs are refused (drain's time ran out)
        self._waiting: OrderedDict[int, deque] = OrderedDict()  # request id -> its waiting jobs, in turn order
        self._ids = itertools.count()
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._closing = False
        self._drain: asyncio.TimerHandle | None = None
        self._running = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-score")

    @property
    def waiting(self) -> int:
        """Requests with jobs waiting in the queue (0 before `start`).

        Examples
        --------
        >>> MicroBatcher(lambda ps: ps).waiting
        0
        """
        return len(self._waiting)

    @property
    def running(self) -> int:
        """Jobs being scored now.

        Examples
        --------
        >>> MicroBatcher(lambda ps: ps).running
        0
        """
        return self._running

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
        self._wake, self._idle = asyncio.Event(), asyncio.Event()
        self._idle.set()
        self._closing, self._refusing = False, None
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

    async def submit(self, payload, size: int = 1, tokens: int = 1):
        """Queue one job (a request of one job) and wait for its result.

        Parameters
        ----------
        payload : object
            Passed to ``run_batch`` with the other jobs of its batch.
        size : int
            Its number of questions (batches hold at most ``max_questions``).
        tokens : int
            Its price in tokens (batches hold at most ``max_tokens``).

        Raises
        ------
        Overloaded
            ``max_queue`` requests already wait.
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
        return (await self.submit_many([payload], [size], [tokens]))[0]

    async def submit_many(self, payloads, sizes, tokens):
        """Queue the jobs of one request (served in turn with other requests) and wait for all results.

        If the awaiting task is cancelled (the client went away), the request's waiting jobs
        are dropped; a job already being scored finishes. The first failing job's exception
        is raised (its other jobs are dropped).

        Parameters
        ----------
        payloads : list
        sizes, tokens : list of int
            Questions and tokens of each job.

        Returns
        -------
        list
            One result per payload, in order.

        Raises
        ------
        Overloaded, ShuttingDown
            As `submit`.

        Examples
        --------
        >>> import asyncio
        >>> async def demo():
        ...     b = MicroBatcher(lambda ps: [p.upper() for p in ps], max_tokens=2)
        ...     await b.start()
        ...     out = await b.submit_many(["a", "b", "c"], [1, 1, 1], [1, 1, 1])
        ...     await b.stop()
        ...     return out, b.batches_
        >>> asyncio.run(demo())
        (['A', 'B', 'C'], 2)
        """
        if self._refusing:
            self.refused_ += len(payloads)
        self.check_open()
        if len(self._waiting) >= self.max_queue:
            raise Overloaded(f"{self.max_queue} requests are already waiting")
        loop = asyncio.get_running_loop()
        rid = next(self._ids)
        jobs = [_Job(p, max(1, int(s)), max(1, int(t)), loop.create_future(), rid)
                for p, s, t in zip(payloads, sizes, tokens)]
        self._waiting[rid] = deque(jobs)
        self._idle.clear()
        self._wake.set()
        try:
            return [await j.future for j in jobs]
        except BaseException:
            dropped = self._waiting.pop(rid, None)
            if dropped:
                self.cancelled_ += len(dropped)
                for j in dropped:
                    j.future.cancel()
            self._check_idle()
            raise

    def drain(self, seconds: float) -> None:
        """Shutdown has begun: keep serving for ``seconds``, then refuse what still waits and anything new.

        Call it on the event loop when the server stops taking connections; the requests in flight
        are answered if their jobs start within ``seconds``, and otherwise fail with `ShuttingDown`
        (a 503 that says so) rather than being cut off without an answer. A batch already running
        finishes. Calling it again changes nothing.

        Parameters
        ----------
        seconds : float
            How long waiting jobs may still be started (0: refuse them now).

        Examples
        --------
        >>> import asyncio, time
        >>> async def demo():
        ...     b = MicroBatcher(lambda ps: time.sleep(0.2) or ps, max_wait_s=0, max_questions=1)
        ...     await b.start()
        ...     first, second = (asyncio.ensure_future(b.submit(x)) for x in ("first", "second"))
        ...     await asyncio.sleep(0.05)      # "first" is being scored; "second" waits
        ...     b.drain(0)
        ...     got = await asyncio.gather(first, second, return_exceptions=True)
        ...     await b.stop()
        ...     return got[0], type(got[1]).__name__, b.refused_
        >>> asyncio.run(demo())
        ('first', 'ShuttingDown', 1)
        """
        if self._wake is None or self._drain is not None:
            return
        why = (f"the server is shutting down and its drain time ({seconds:g} s, --drain-seconds) ran out before "
               f"this request was scored")
        self._drain = asyncio.get_running_loop().call_later(max(0.0, seconds), self._refuse, why)

    def check_open(self) -> None:
        """Raise `ShuttingDown` when new work would be refused (`stop` was called, or `drain`'s time ran out).

        Thread-safe (it only reads): admission calls it before parsing a request.

        Examples
        --------
        >>> MicroBatcher(lambda ps: ps).check_open()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        judge.server.batching.ShuttingDown: the server is shutting down and takes no new requests
        """
        if self._closing or self._wake is None:
            raise ShuttingDown("the server is shutting down and takes no new requests")
        if self._refusing:
            raise ShuttingDown(self._refusing)

    def _refuse(self, why: str) -> None:
        self._refusing = why
        for jobs in self._waiting.values():  # the first waiting job of each request fails it; the rest are dropped
            self.refused_ += len(jobs)
            for i, j in enumerate(jobs):
                if j.future.done():  # its caller went away a moment ago
                    continue
                if i == 0:
                    j.future.set_exception(ShuttingDown(why))
                else:
                    j.future.cancel()
        self._waiting.clear()
        self._check_idle()

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
        if self._drain is not None:
            self._drain.cancel()
        if self._idle is not None:
            await self._idle.wait()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ worker
    def _check_idle(self) -> None:
        if not self._waiting and not self._running and self._idle is not None:
            self._idle.set()

    def _peek(self) -> _Job | None:
        """The next job in turn (the oldest waiting request first), without taking it."""
        for jobs in self._waiting.values():
            if jobs:
                return jobs[0]
        return None

    def _take(self, job: _Job) -> None:
        jobs = self._waiting[job.request]
        jobs.popleft()
        if jobs and self._drain is None:  # draining: the request at the head is finished first, then the next
            self._waiting.move_to_end(job.request)  # its next job waits for the others' turn
        elif not jobs:
            del self._waiting[job.request]

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = self._peek()
            if first is None:
                self._wake.clear()
                self._check_idle()
                await self._wake.wait()
                continue
            self._take(first)
            batch, total, tokens = [first], first.size, first.tokens
            deadline = loop.time() + self.max_wait_s
            taken = {first.request}
            while total < self.max_questions:
                job = self._peek()
                if job is not None and job.request in taken and len(self._waiting) > 1 and self._drain is None:
                    job = None  # one job per request per batch while others wait (fair turns)
                if job is None:
                    timeout = deadline - loop.time()
                    if timeout <= 0 or (self.expect is not None and not self.expect()):
                        break  # the wait is over, or no other request is on its way: waiting only adds latency
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), timeout)
                    except asyncio.TimeoutError:
                        break
                    continue
                if total + job.size > self.max_questions or \
                        (self.max_tokens is not None and tokens + job.tokens > self.max_tokens):
                    break
                self._take(job)
                batch.append(job)
                taken.add(job.request)
                total, tokens = total + job.size, tokens + job.tokens
            self._running = len(batch)
            try:
                await self._run(loop, batch)
            finally:
                self._running = 0
                self._check_idle()

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
