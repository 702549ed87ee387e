"""The durable job store: one SQLite database in WAL mode shared by the server and its workers.

A job is committed before its id is returned. States: queued → in_progress → completed |
failed | cancelled. A job becomes ``completed`` only in the same transaction that records
its output files and their checksums, so "completed" always means "on disk, checksummed".
Every connection is short-lived and opened per call: the server's threads and the worker
processes each get their own, and SQLite's locking keeps them consistent.

Each job records the disk space its render is expected to need (``disk_bytes``,
:mod:`daotai.diskspace`); a new job is refused with :class:`daotai.errors.DiskFull` (HTTP 507)
when the data folder's free space does not cover it and every job still queued or running.
A write the full disk refuses (SQLite's "database or disk is full") is a DiskFull too.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from daotai.errors import DaotaiError, DiskFull, disk_full_cause

ACTIVE = ("queued", "in_progress")
TERMINAL = ("completed", "failed", "cancelled")
JOB_ID = re.compile(r"^video_[0-9a-f]{32}$")
UPLOAD_ID = re.compile(r"^(img|snd|vid)_[0-9a-f]{32}$")
UPLOAD_SUFFIX = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp",
                 "audio/wav": ".wav", "audio/flac": ".flac", "audio/mpeg": ".mp3", "audio/ogg": ".ogg",
                 "audio/mp4": ".m4a", "audio/aac": ".aac",
                 "video/mp4": ".mp4", "video/quicktime": ".mov", "video/webm": ".webm", "video/x-matroska": ".mkv"}
MAX_ATTEMPTS = 2  # a job interrupted by a server restart is re-queued once, then failed
SQLITE_FULL = 13  # sqlite3.h: "Insertion failed because database is full" (the disk, here)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,                 -- 'video' (OpenAI shape) or 'script' (native)
    status TEXT NOT NULL,
    progress INTEGER NOT NULL DEFAULT 0,
    model TEXT NOT NULL,
    prompt TEXT,
    seconds TEXT NOT NULL,
    size TEXT NOT NULL,
    script TEXT NOT NULL,               -- the validated script as JSON
    preset TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    completed_at REAL,
    error_code TEXT,
    error_message TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0,
    worker_pid INTEGER,
    idem_key TEXT UNIQUE,
    body_hash TEXT,
    options TEXT,                       -- the backend options as JSON (validated at submission)
    disk_bytes INTEGER NOT NULL DEFAULT 0  -- the disk space its render is expected to need (estimate)
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status, created_at);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id, seq);
CREATE TABLE IF NOT EXISTS shots (
    job_id TEXT NOT NULL,
    shot_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    frames INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'queued',
    PRIMARY KEY (job_id, shot_id)
);
CREATE TABLE IF NOT EXISTS outputs (
    job_id TEXT NOT NULL,
    name TEXT NOT NULL,                 -- e.g. 'video', 'thumbnail', 'shot.s01'
    relpath TEXT NOT NULL,              -- relative to the job's out/ folder, written by a worker
    sha256 TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (job_id, name)
);
CREATE TABLE IF NOT EXISTS uploads (
    sha256 TEXT PRIMARY KEY,            -- of the bytes the client sent; the same bytes are one upload
    id TEXT NOT NULL UNIQUE,            -- 'img_' + the first 32 hex digits of sha256
    content_type TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    relpath TEXT NOT NULL,              -- relative to the data folder, chosen by the server
    created_at REAL NOT NULL
);
"""


class StoreError(DaotaiError):
    """A job-store rule was broken (unknown id, idempotency conflict, full queue)."""


class NotFound(StoreError):
    """No job with this id."""


class IdempotencyConflict(StoreError):
    """The Idempotency-Key was used before with a different request body."""


class QueueFull(StoreError):
    """The queue already holds the maximum number of waiting jobs."""


class UploadConflict(StoreError):
    """An upload id is already held by different bytes (a 128-bit prefix collision)."""


@dataclass(frozen=True)
class NewJob:
    """What a submission asks for (already validated)."""

    kind: str
    model: str
    seconds: str
    size: str
    script: str  # JSON text
    prompt: str | None = None
    preset: str | None = None
    options: str | None = None  # backend options as JSON text (validated)
    disk_bytes: int = 0  # the disk space its render is expected to need (daotai.diskspace)


@dataclass(frozen=True)
class Job:
    """One row of the jobs table."""

    id: str
    kind: str
    status: str
    progress: int
    model: str
    prompt: str | None
    seconds: str
    size: str
    script: str
    preset: str | None
    created_at: float
    started_at: float | None
    completed_at: float | None
    error_code: str | None
    error_message: str | None
    attempts: int
    cancel_requested: bool
    deleted: bool
    worker_pid: int | None
    idem_key: str | None = None
    body_hash: str | None = None
    options: str | None = None  # backend options as JSON text
    disk_bytes: int = 0  # the disk space its render is expected to need
    outputs: dict[str, "OutputFile"] = field(default_factory=dict)


@dataclass(frozen=True)
class OutputFile:
    """A finished deliverable of a job."""

    name: str
    relpath: str
    sha256: str
    bytes: int


@dataclass(frozen=True)
class Upload:
    """A stored reference image: checked, content-addressed, immutable."""

    id: str
    sha256: str
    content_type: str
    width: int
    height: int
    bytes: int
    relpath: str
    created_at: float


def upload_id(sha256: str, content_type: str = "image/png") -> str:
    """The id of the upload whose bytes have this sha256 (so the same bytes always get the same id):
    ``img_`` for reference images, ``snd_`` for sound, ``vid_`` for footage."""
    kind = content_type.split("/", 1)[0]
    return {"audio": "snd_", "video": "vid_"}.get(kind, "img_") + sha256[:32]


def valid_upload_id(value: str) -> bool:
    """Whether a client-supplied upload id has the only shape we ever issue."""
    return isinstance(value, str) and UPLOAD_ID.fullmatch(value) is not None


def new_job_id() -> str:
    """An opaque, unguessable job id."""
    return "video_" + secrets.token_hex(16)


def valid_job_id(job_id: str) -> bool:
    """Whether a client-supplied id has the only shape we ever issue."""
    return isinstance(job_id, str) and JOB_ID.fullmatch(job_id) is not None


def body_hash(payload: Any) -> str:
    """A stable hash of a request's meaning (canonical JSON), for idempotency checks."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JobStore:
    """Jobs, events, per-shot progress and outputs in ``<data_dir>/jobs.sqlite3``."""

    def __init__(self, data_dir: str | Path):
        self.data_dir = Path(data_dir).resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "jobs").mkdir(exist_ok=True)
        self.db_path = self.data_dir / "jobs.sqlite3"
        self._held: sqlite3.Connection | None = None
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(jobs)")}
            if "options" not in columns:  # a data folder from before job options existed
                db.execute("ALTER TABLE jobs ADD COLUMN options TEXT")
            if "disk_bytes" not in columns:  # … or before jobs recorded the space they need
                db.execute("ALTER TABLE jobs ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0")

    # ------------------------------------------------------------ plumbing

    def hold_open(self) -> None:
        """Keep one connection open while this process serves (until :meth:`release`).

        SQLite deletes the database's -wal and -shm files when its last connection closes, and
        every call here opens and closes its own; on a disk that has filled up, the next
        connection could not make them again, so even reading a job would fail. With one held,
        they stay: replies are read and small writes (a job failing as disk_full) reuse the
        write-ahead log's room."""
        if self._held is None:
            self._held = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
            self._held.execute("SELECT COUNT(*) FROM jobs").fetchone()  # maps the -shm index

    def release(self) -> None:
        """Close the connection :meth:`hold_open` keeps."""
        held, self._held = self._held, None
        if held is not None:
            held.close()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            # FULL: a commit survives power loss and kill -9, which is the promise we make.
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA busy_timeout=30000")
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the lock up front (no upgrade deadlocks); DiskFull when
        the disk has no room for it (nothing of it is kept)."""
        try:
            with self._connect() as db:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # SQLite already rolled back (it does after a full disk)
                    raise
                db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != SQLITE_FULL:
                raise
            raise self.disk_full(writing=self.db_path.name) from exc

    def disk_full(self, needed: int | None = None, what: str = "the job", writing: str | None = None) -> DiskFull:
        """The DiskFull of the data folder: its free space now, what ``what`` needs there."""
        from daotai.diskspace import free_bytes

        return DiskFull(self.data_dir, free_bytes(self.data_dir), needed, what, writing=writing)

    def job_dir(self, job_id: str) -> Path:
        """The folder of one job (inside the data folder; the id is validated)."""
        if not valid_job_id(job_id):
            raise NotFound(f"video_id: {job_id!r} is not a valid id")
        return self.data_dir / "jobs" / job_id

    # ------------------------------------------------------------ submission

    def create(self, spec: NewJob, idem_key: str | None = None, request_hash: str | None = None,
               queue_limit: int = 100) -> tuple[Job, bool]:
        """Commit a new queued job (or return the one made with the same key); (job, created).

        DiskFull when the data folder's free space does not cover the job's ``disk_bytes`` and
        those of every job queued or running (a running one counted in full: what it has written
        so far is already off the free space, so this errs on the side of refusing)."""
        from daotai.diskspace import free_bytes

        free = free_bytes(self.data_dir)  # measured before the lock: the disk does not wait for it
        with self._write() as db:
            if idem_key is not None:
                row = db.execute("SELECT id, body_hash FROM jobs WHERE idem_key = ?", (idem_key,)).fetchone()
                if row is not None:
                    if row["body_hash"] != request_hash:
                        raise IdempotencyConflict(
                            f"Idempotency-Key: {idem_key!r} was used with a different request body"
                        )
                    return self._get(db, row["id"]), False
            waiting = db.execute("SELECT COUNT(*) FROM jobs WHERE status = 'queued'").fetchone()[0]
            if waiting >= queue_limit:
                raise QueueFull(f"queue: {waiting} jobs are waiting, the limit is {queue_limit}")
            if spec.disk_bytes:
                self._check_space(db, free, spec.disk_bytes, "this job")
            job_id = new_job_id()
            now = time.time()
            db.execute(
                "INSERT INTO jobs (id, kind, status, model, prompt, seconds, size, script, preset, created_at,"
                " idem_key, body_hash, options, disk_bytes) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, spec.kind, spec.model, spec.prompt, spec.seconds, spec.size, spec.script, spec.preset,
                 now, idem_key, request_hash, spec.options, spec.disk_bytes),
            )
            script = json.loads(spec.script)
            for position, shot in enumerate(script.get("shots", [])):
                db.execute(
                    "INSERT INTO shots (job_id, shot_id, position, frames) VALUES (?, ?, ?, 0)",
                    (job_id, shot["shot_id"], position),
                )
            self._event(db, job_id, "status", {"status": "queued"})
            return self._get(db, job_id), True

    def _check_space(self, db: sqlite3.Connection, free: int, needed: int, what: str) -> None:
        """DiskFull unless ``free`` covers ``needed`` and what the jobs queued or running need."""
        count, ahead = db.execute("SELECT COUNT(*), COALESCE(SUM(disk_bytes), 0) FROM jobs"
                                  " WHERE status IN ('queued', 'in_progress')").fetchone()
        if free < ahead + needed:
            what += f" and the {count} job{'s' if count != 1 else ''} queued or running before it" if count else ""
            raise DiskFull(self.data_dir, free, ahead + needed, what)

    def check_space(self, needed: int, what: str) -> None:
        """DiskFull unless the data folder's free space covers ``needed`` bytes (``what`` needs
        them) besides what the jobs queued or running need."""
        from daotai.diskspace import free_bytes

        free = free_bytes(self.data_dir)
        with self._connect() as db:
            self._check_space(db, free, needed, what)

    # ------------------------------------------------------------ reading

    def get(self, job_id: str, include_deleted: bool = False) -> Job:
        """The job with this id; NotFound when unknown (or deleted)."""
        if not valid_job_id(job_id):
            raise NotFound(f"video_id: {job_id!r} is not a valid id")
        with self._connect() as db:
            job = self._get(db, job_id)
        if job.deleted and not include_deleted:
            raise NotFound(f"video_id: {job_id!r} was deleted")
        return job

    def _get(self, db: sqlite3.Connection, job_id: str) -> Job:
        row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"video_id: {job_id!r} does not exist")
        outputs = {
            r["name"]: OutputFile(r["name"], r["relpath"], r["sha256"], r["bytes"])
            for r in db.execute("SELECT * FROM outputs WHERE job_id = ?", (job_id,))
        }
        data = dict(row)
        data["cancel_requested"] = bool(data["cancel_requested"])
        data["deleted"] = bool(data["deleted"])
        return Job(**data, outputs=outputs)

    def list(self, after: str | None = None, limit: int = 20, order: str = "desc") -> tuple[list[Job], bool]:
        """A page of visible jobs ordered by creation; (jobs, has_more)."""
        op, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
        with self._connect() as db:
            params: list[Any] = []
            where = "deleted = 0"
            if after is not None:
                anchor = db.execute("SELECT created_at, rowid FROM jobs WHERE id = ?", (after,)).fetchone()
                if anchor is None:
                    raise NotFound(f"after: {after!r} does not exist")
                # (created_at, rowid) is a total order, so equal timestamps never skip a job.
                where += f" AND (created_at, rowid) {op} (?, ?)"
                params += [anchor["created_at"], anchor["rowid"]]
            rows = db.execute(
                f"SELECT id FROM jobs WHERE {where} ORDER BY created_at {direction}, rowid {direction} LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
            jobs = [self._get(db, r["id"]) for r in rows[:limit]]
        return jobs, len(rows) > limit

    def shots(self, job_id: str) -> list[dict[str, Any]]:
        """Per-shot progress rows of a job, in script order."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT shot_id, frames, done, status FROM shots WHERE job_id = ? ORDER BY position", (job_id,)
            ).fetchall()
        return [dict(r) for r in rows]

    def events(self, job_id: str, after_seq: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        """Events of a job with seq > after_seq, oldest first."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT seq, at, kind, data FROM events WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (job_id, after_seq, limit),
            ).fetchall()
        return [{"seq": r["seq"], "at": r["at"], "kind": r["kind"], "data": json.loads(r["data"])} for r in rows]

    def counts(self) -> dict[str, int]:
        """Number of visible jobs per status."""
        with self._connect() as db:
            rows = db.execute("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status").fetchall()
        return {r["status"]: r["n"] for r in rows}

    # ------------------------------------------------------------ uploads

    def upload_path(self, upload: Upload) -> Path | None:
        """The stored file of an upload; None unless it is a regular file inside uploads/."""
        root = (self.data_dir / "uploads").resolve()
        path = self.data_dir / upload.relpath
        if path.is_symlink() or not path.is_file():
            return None
        resolved = path.resolve()
        return resolved if resolved.is_relative_to(root) else None

    def find_upload(self, value: str) -> Upload | None:
        """The upload with this id, or None (also for ids of a shape we never issue)."""
        if not valid_upload_id(value):
            return None
        with self._connect() as db:
            row = db.execute("SELECT * FROM uploads WHERE id = ?", (value,)).fetchone()
        return Upload(**dict(row)) if row is not None else None

    def upload_by_sha(self, sha256: str) -> Upload | None:
        """The upload of these exact bytes, if it was stored before and its file is still there."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM uploads WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None:
            return None
        upload = Upload(**dict(row))
        return upload if self.upload_path(upload) is not None else None

    def add_upload(self, data: bytes, sha256: str, content_type: str, width: int, height: int) -> tuple[Upload, bool]:
        """Store checked image bytes under their sha256 (file first, then the row); (upload, created).

        The file is written atomically before the row is committed, so a row always has its
        file; two requests with the same bytes write the same file and share one row.
        """
        from daotai.files import atomic_write_bytes

        relpath = f"uploads/{sha256}{UPLOAD_SUFFIX[content_type]}"
        try:
            atomic_write_bytes(self.data_dir / relpath, data)
        except OSError as exc:
            if disk_full_cause(exc) is None:
                raise
            raise self.disk_full(len(data), "the upload", writing=relpath) from exc
        with self._write() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO uploads (sha256, id, content_type, width, height, bytes, relpath, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (sha256, upload_id(sha256, content_type), content_type, width, height, len(data), relpath, time.time()),
            )
            created = cur.rowcount == 1
            row = db.execute("SELECT * FROM uploads WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None:  # another sha256 with the same 128-bit prefix holds the id: never seen in practice
            raise UploadConflict(f"file: upload id {upload_id(sha256, content_type)!r} is taken by different bytes")
        return Upload(**dict(row)), created

    # ------------------------------------------------------------ state changes

    @staticmethod
    def _event(db: sqlite3.Connection, job_id: str, kind: str, data: dict[str, Any]) -> None:
        db.execute(
            "INSERT INTO events (job_id, at, kind, data) VALUES (?, ?, ?, ?)",
            (job_id, time.time(), kind, json.dumps(data, ensure_ascii=False)),
        )

    def add_event(self, job_id: str, kind: str, data: dict[str, Any]) -> None:
        """Append one event to a job's stream."""
        with self._write() as db:
            self._event(db, job_id, kind, data)

    def claim_next(self) -> Job | None:
        """Move the oldest queued job to in_progress (one more attempt) and return it."""
        with self._write() as db:
            row = db.execute(
                "SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at, rowid LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE jobs SET status = 'in_progress', started_at = ?, attempts = attempts + 1, progress = 0"
                " WHERE id = ?",
                (time.time(), row["id"]),
            )
            self._event(db, row["id"], "status", {"status": "in_progress"})
            return self._get(db, row["id"])

    def set_worker(self, job_id: str, pid: int | None) -> None:
        """Record the process that runs a job."""
        with self._write() as db:
            db.execute("UPDATE jobs SET worker_pid = ? WHERE id = ?", (pid, job_id))

    def update_progress(self, job_id: str, attempt: int, progress: int,
                        shots: dict[str, tuple[int, int, str]] | None = None,
                        event: tuple[str, dict[str, Any]] | None = None) -> bool:
        """Store progress of a running attempt; False when the attempt is no longer current."""
        with self._write() as db:
            cur = db.execute(
                "UPDATE jobs SET progress = MAX(progress, ?) WHERE id = ? AND status = 'in_progress' AND attempts = ?",
                (max(0, min(99, progress)), job_id, attempt),
            )
            if cur.rowcount == 0:
                return False
            for shot_id, (done, frames, status) in (shots or {}).items():
                db.execute(
                    "UPDATE shots SET done = ?, frames = ?, status = ? WHERE job_id = ? AND shot_id = ?",
                    (done, frames, status, job_id, shot_id),
                )
            if event is not None:
                self._event(db, job_id, event[0], event[1])
            return True

    def cancel_requested(self, job_id: str) -> bool:
        """Whether a client asked to stop this job."""
        with self._connect() as db:
            row = db.execute("SELECT cancel_requested, status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row is None or bool(row["cancel_requested"]) or row["status"] != "in_progress"

    def complete(self, job_id: str, attempt: int, work_dir: Path, outputs: list[OutputFile]) -> bool:
        """Publish a finished attempt: rename its folder to out/ and mark completed, atomically.

        The rename happens inside the write transaction, after checking that this attempt is
        still the current one, so a stale worker can never publish. A crash between the
        rename and the commit leaves an out/ folder of a job that is not completed, which
        recovery removes before the job runs again.
        """
        out_dir = self.job_dir(job_id) / "out"
        with self._write() as db:
            row = db.execute("SELECT status, attempts, cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["status"] != "in_progress" or row["attempts"] != attempt or row["cancel_requested"]:
                return False
            if out_dir.exists():
                shutil.rmtree(out_dir)
            work_dir.rename(out_dir)
            for item in outputs:
                db.execute(
                    "INSERT OR REPLACE INTO outputs (job_id, name, relpath, sha256, bytes) VALUES (?, ?, ?, ?, ?)",
                    (job_id, item.name, item.relpath, item.sha256, item.bytes),
                )
            db.execute(
                "UPDATE jobs SET status = 'completed', progress = 100, completed_at = ?, worker_pid = NULL WHERE id = ?",
                (time.time(), job_id),
            )
            db.execute("UPDATE shots SET status = 'completed', done = frames WHERE job_id = ?", (job_id,))
            self._event(db, job_id, "status", {"status": "completed", "progress": 100})
            return True

    def finish(self, job_id: str, status: str, code: str | None = None, message: str | None = None,
               attempt: int | None = None) -> bool:
        """Mark an active job failed or cancelled (no-op when it is already terminal)."""
        assert status in ("failed", "cancelled")
        with self._write() as db:
            query = "SELECT status, attempts FROM jobs WHERE id = ?"
            row = db.execute(query, (job_id,)).fetchone()
            if row is None or row["status"] not in ACTIVE:
                return False
            if attempt is not None and row["attempts"] != attempt:
                return False
            db.execute(
                "UPDATE jobs SET status = ?, error_code = ?, error_message = ?, completed_at = ?, worker_pid = NULL"
                " WHERE id = ?",
                (status, code, message, time.time(), job_id),
            )
            db.execute(
                "UPDATE shots SET status = ? WHERE job_id = ? AND status != 'completed'", (status, job_id)
            )
            self._event(db, job_id, "status", {"status": status, "error": {"code": code, "message": message}})
            return True

    def request_cancel(self, job_id: str, delete: bool = False) -> Job:
        """Ask a job to stop: a queued job is cancelled at once, a running one by its worker."""
        with self._write() as db:
            job = self._get(db, job_id)
            if job.deleted:
                raise NotFound(f"video_id: {job_id!r} was deleted")
            db.execute(
                "UPDATE jobs SET cancel_requested = 1, deleted = MAX(deleted, ?) WHERE id = ?", (int(delete), job_id)
            )
            if job.status == "queued":
                db.execute(
                    "UPDATE jobs SET status = 'cancelled', error_code = 'cancelled', error_message = ?,"
                    " completed_at = ? WHERE id = ?",
                    ("cancelled before it started", time.time(), job_id),
                )
                self._event(db, job_id, "status", {"status": "cancelled"})
            return self._get(db, job_id)

    def recover(self, live_pids: set[int] | None = None) -> list[str]:
        """After a restart: re-queue interrupted jobs once (else fail them); verify completed ones."""
        changed: list[str] = []
        with self._write() as db:
            rows = db.execute("SELECT id, attempts, cancel_requested FROM jobs WHERE status = 'in_progress'").fetchall()
            for row in rows:
                job_id = row["id"]
                if row["cancel_requested"]:
                    db.execute(
                        "UPDATE jobs SET status = 'cancelled', error_code = 'cancelled', error_message = ?,"
                        " completed_at = ?, worker_pid = NULL WHERE id = ?",
                        ("cancelled while the server was down", time.time(), job_id),
                    )
                    self._event(db, job_id, "status", {"status": "cancelled"})
                elif row["attempts"] < MAX_ATTEMPTS:
                    db.execute(
                        "UPDATE jobs SET status = 'queued', progress = 0, worker_pid = NULL WHERE id = ?", (job_id,)
                    )
                    self._event(db, job_id, "requeued", {"reason": "interrupted", "attempts": row["attempts"]})
                else:
                    db.execute(
                        "UPDATE jobs SET status = 'failed', error_code = 'interrupted', completed_at = ?,"
                        " error_message = ?, worker_pid = NULL WHERE id = ?",
                        (time.time(), f"interrupted {row['attempts']} times by server restarts", job_id),
                    )
                    self._event(db, job_id, "status", {"status": "failed", "error": {"code": "interrupted"}})
                changed.append(job_id)
            # "completed" must mean the files are there: a job whose outputs vanished is failed.
            for row in db.execute("SELECT id FROM jobs WHERE status = 'completed'").fetchall():
                job = self._get(db, row["id"])
                out_dir = self.job_dir(job.id) / "out"
                if not job.outputs or any(not (out_dir / o.relpath).is_file() for o in job.outputs.values()):
                    db.execute(
                        "UPDATE jobs SET status = 'failed', error_code = 'output_missing', error_message = ?"
                        " WHERE id = ?",
                        ("the finished files are no longer on disk", job.id),
                    )
                    changed.append(job.id)
        return changed
