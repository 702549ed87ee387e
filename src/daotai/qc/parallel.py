"""Shot checks in worker processes, handed in as shots finish: QC runs beside the render.

A render used to check its shots one after another once every shot was drawn and the sequence
assembled, so on two cores most of a previz render's wall time went to QC after the picture was
done. :class:`ShotChecks` keeps a few worker processes, each a fresh interpreter started on
this module (never a fork: the parent may hold a GL context and encoder threads; never
multiprocessing's "spawn" either, which imports the caller's main script again and so would
run a script without a main guard once more in every worker); the run hands each shot in when
its files are final and collects the entries in plan order when it writes qc.json. A worker
gets the run's plan once (as plan.json text) and then only the shot's id, files and fidelity
samples, as pickles over its stdin; it answers on its stdout. A run starts the workers
(:meth:`ShotChecks.start`) before it loads its backend, so their interpreters start while the
backend does, and the first shot finds them ready.

The checks are the same functions either way, so an entry is the same whichever process made
it: qc.json does not depend on the number of workers, nor on which worker checked which shot.
With no workers (one core, or ``workers=0``) every check runs in this process when its entry is
asked for, as before. A caller waiting on a worker's job runs the jobs no worker has taken yet
itself meanwhile. A worker that fails for any reason (killed, out of memory, an exception
that does not survive pickling) costs time, not a verdict: the shot is checked again here.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any, BinaryIO

from daotai.plan.model import Plan
from daotai.runtime.cores import usable_cores

# Workers beyond the cores only queue for them; more than this many rarely help a single render
# (each holds a shot's shrunk frames and its decoders) and cost ~0.5 s of CPU each to start.
MAX_QC_WORKERS = 4
# From this many workers on, a shot's camera path is checked as a job of its own beside the shot's
# other checks (daotai.qc.shot.measure_camera_path): the wait for the last shot, which nothing
# overlaps, is then about halved. With fewer, a shot's checks already keep the workers busy while
# the render goes on, and the path job's own decode of the shot would cost more than it saves.
SPLIT_PATH_MIN_WORKERS = 3

_PLAN: Plan | None = None  # the run's plan, inside a worker process only


def default_workers(shots: int) -> int:
    """Worker processes for checking ``shots`` shots here: one per core, at most one per shot,
    none on a single core (the render already has it)."""
    cores = usable_cores()
    return 0 if cores < 2 else max(0, min(cores, shots, MAX_QC_WORKERS))


def _send(stream: BinaryIO, item: Any) -> None:
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the other end closed")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other end closed mid-message")
    return pickle.loads(data)


def worker_main() -> None:
    """A worker's loop: read the plan, then (function, args) jobs until stdin closes; answer each
    with ("ok", entry, began, ended) or ("error", text, began, ended), the job's start and end on
    time.monotonic() (one clock for every process of the machine). Stray output of libraries goes
    to stderr, never into the answers."""
    from daotai.plan.planner import plan_from_json

    jobs = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed from here on goes to stderr
    sys.stdout = sys.stderr
    plan = plan_from_json(_receive(jobs))
    for module in _receive(jobs):  # imported now, while the render is busy, not at the first job
        __import__(module)

    while True:
        try:
            function, args = _receive(jobs)
        except EOFError:
            return
        began = time.monotonic()
        try:
            answer: tuple[str, Any] = ("ok", function(plan, *args))
        except Exception as exc:  # noqa: BLE001  (told to the parent, which checks the shot itself)
            answer = ("error", f"{type(exc).__name__}: {exc}")
        _send(answers, (*answer, began, time.monotonic()))


class _Worker:
    """One worker process and the thread that feeds it jobs from the shared queue."""

    def __init__(self, plan_text: str, preload: tuple[str, ...], jobs: queue.Queue,
                 spans: dict[str, tuple[float, float]], threads: int):
        from daotai.qc.threads import THREADS_ENV

        path = [entry for entry in sys.path if entry]
        code = f"import sys\nsys.path[:] = {path!r}\nfrom daotai.qc.parallel import worker_main\nworker_main()"
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env={**os.environ, THREADS_ENV: str(threads)})
        self._jobs = jobs
        self._spans = spans
        _send(self.process.stdin, plan_text)
        _send(self.process.stdin, preload)
        self._thread = threading.Thread(target=self._serve, name="daotai-qc-worker", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        gone: BaseException | None = None
        while True:
            job = self._jobs.get()
            if job is None:
                break
            key, future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            if gone is not None:  # the process died: the caller checks this shot itself
                future.set_exception(gone)
                continue
            try:
                _send(self.process.stdin, (function, args))
                status, value, began, ended = _receive(self.process.stdout)
            except (OSError, EOFError, pickle.PickleError) as exc:
                gone = exc
                future.set_exception(exc)
                continue
            self._spans[key] = (began, ended)
            if status == "ok":
                future.set_result(value)
            else:
                future.set_exception(RuntimeError(value))
        self._jobs.put(None)  # pass the stop on to the next worker
        self.stop(kill=False)

    def join(self, timeout: float | None) -> None:
        self._thread.join(timeout)

    def stop(self, kill: bool) -> None:
        try:
            if kill:
                self.process.kill()
            elif self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass


class ShotChecks:
    """Checks of one plan's files, run by worker processes as they are handed in.

    :meth:`submit` hands in ``function(plan, *args)`` (a module-level function, as it is pickled
    by name) under a key and returns at once; :meth:`result` waits for it (running it here when
    no worker could). daotai.qc.report hands shots and the sequence in (:func:`hand_in_shot`).
    The workers start at :meth:`start`, or at the first job. Close it (or use it as a context
    manager) to stop the workers; ``close(cancel=True)`` stops them at once. ``spans`` holds when
    each job ran, by key: (began, ended) on time.monotonic().
    """

    def __init__(self, plan: Plan, workers: int | None = None, preload: tuple[str, ...] = ("daotai.qc.report",)):
        self.plan = plan
        self.workers = default_workers(len(plan.shots)) if workers is None else max(0, workers)
        self.split_paths = self.workers >= SPLIT_PATH_MIN_WORKERS  # read by daotai.qc.report.hand_in_file
        self._preload = preload
        self._jobs: dict[str, tuple[Future | None, Any, tuple[Any, ...]]] = {}
        self._queue: queue.Queue = queue.Queue()
        self._pool: list[_Worker] = []
        self._plan_text: str | None = None
        self.spans: dict[str, tuple[float, float]] = {}

    def start(self) -> None:
        """Start the workers now (once; none when ``workers`` is 0): a run calls it before loading
        its backend, so the workers' start-up overlaps the backend's. Without it they start at
        the first job (a run with every shot reused starts none)."""
        if not self.workers or self._plan_text is not None:
            return
        from daotai.plan.planner import plan_to_json
        from daotai.qc.threads import worker_share

        self._plan_text = plan_to_json(self.plan)
        share = worker_share(self.workers)  # each worker's threads: the workers together fill the cores once
        try:
            for _ in range(self.workers):
                self._pool.append(_Worker(self._plan_text, self._preload, self._queue, self.spans, share))
        except OSError:
            self.workers = len(self._pool)  # those that started serve; none: everything is checked here

    def __enter__(self) -> "ShotChecks":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(cancel=kind is not None)

    def submit(self, key: str, function, args: tuple[Any, ...], start: bool = True) -> None:
        """Hand in ``function(plan, *args)`` under ``key`` (its files final: nothing changes them afterwards).
        ``start`` False: a worker takes it only when workers are already running; otherwise it runs here
        when its result is asked for (one short job does not pay for starting interpreters)."""
        future = None
        if start:
            self.start()
        if self._pool:
            future = Future()
            self._queue.put((key, future, function, args))
        self._jobs[key] = (future, function, args)

    def wait_until_taken(self, cancel: threading.Event | None = None, max_wait_s: float = 60.0) -> None:
        """Wait until a worker has taken every job handed in (none left queued): at once without
        workers, when ``cancel`` is set, or after ``max_wait_s`` (a worker stuck in a check must not
        stop the render too)."""
        deadline = time.monotonic() + max_wait_s
        while (self._pool and not self._queue.empty() and time.monotonic() < deadline
               and not (cancel is not None and cancel.is_set())):
            time.sleep(0.01)

    def has(self, key: str) -> bool:
        return key in self._jobs

    def result(self, key: str) -> Any:
        """What the work handed in under ``key`` returned (waits for it)."""
        future, function, args = self._jobs.pop(key)
        if future is not None:
            self._run_waiting_jobs_here(future)
            try:
                return future.result()
            except Exception:  # noqa: BLE001  (a worker's failure is run again here: its own error, if any, recurs)
                pass
        began = time.monotonic()
        try:
            return function(self.plan, *args)
        finally:
            self.spans[key] = (began, time.monotonic())

    def _run_waiting_jobs_here(self, awaited: Future) -> None:
        """While ``awaited`` is not done, take the jobs no worker has started yet and run them in
        this process: the caller would only wait, and its core would idle while the workers are
        busy with the last shots (the sequence check, handed in last, used to wait behind them)."""
        while not awaited.done():
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is None:  # the stop for the workers: put it back for them
                self._queue.put(None)
                return
            key, future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            began = time.monotonic()
            try:
                future.set_result(function(self.plan, *args))
            except Exception as exc:  # noqa: BLE001  (its result() raises it, as a worker's failure would)
                future.set_exception(exc)
            finally:
                self.spans[key] = (began, time.monotonic())

    def close(self, cancel: bool = False) -> None:
        """Stop the workers once the work handed in is done; ``cancel``: stop them now."""
        pool, self._pool = self._pool, []
        if not pool:
            return
        if cancel:
            for future, _, _ in self._jobs.values():
                if future is not None:
                    future.cancel()
            for worker in pool:
                worker.stop(kill=True)
        self._queue.put(None)
        for worker in pool:
            worker.join(None if not cancel else 5.0)
            try:
                worker.process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                worker.stop(kill=True)
                worker.process.wait()


def seconds_before(spans: dict[str, tuple[float, float]], until: float, prefix: str | tuple[str, ...] = "") -> float:
    """Seconds of the jobs keyed ``prefix``... (or any of several prefixes) in ``spans`` ((began, ended) on time.monotonic())
    that ran before ``until`` (on the same clock): checking done while the render still ran."""
    return sum(max(0.0, min(ended, until) - began) for key, (began, ended) in spans.items() if key.startswith(prefix))
