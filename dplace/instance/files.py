"""Atomic writes: every output goes to a temporary file renamed into place, so a failed command leaves none
half-written; errors are one line naming the file. Used by :mod:`dplace.instance.io` (which re-exports
them) and :mod:`dplace.instance.npz`."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from ..errors import InvalidInstanceError


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never half-written."""
    write_atomic_many([(path, text)])


def write_atomic_many(files: Sequence[tuple[str | os.PathLike, Any]]) -> None:
    """Write several files through temporary files, renamed only once every one is written, so a
    command that fails on one output (a directory, no permission, a full disk) leaves none behind.
    Errors are one line naming the file."""
    todo = [(Path(p), t.encode() if isinstance(t, str) else t) for p, t in files]  # t: text, bytes or text pieces
    for p, _ in todo:
        if p.is_dir():
            raise InvalidInstanceError(f"output {str(p)!r}: is a directory")
    umask = os.umask(0)  # mkstemp makes 0600 files: give the usual permissions
    os.umask(umask)
    tmps: list[str] = []
    p = None
    try:
        for p, data in todo:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
            tmps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                if isinstance(data, bytes):
                    fh.write(data)
                else:  # an iterable of text or UTF-8 pieces (a large file written as it is produced)
                    _write_pieces(fh, data)
            os.chmod(tmp, 0o666 & ~umask)
        for (p, _), tmp in zip(todo, tmps):
            os.replace(tmp, p)
    except OSError as exc:
        why = exc.strerror or exc.__class__.__name__
        raise InvalidInstanceError(f"output {str(p)!r}: cannot write ({why})") from None
    finally:
        for tmp in tmps:  # renamed ones are gone already
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass


def _write_pieces(fh: Any, pieces: Any) -> None:
    """Write text or UTF-8 ``pieces`` to ``fh`` in order, by a thread of its own: the writes (which release
    the GIL) go on while the next piece is made. An error of the writes is raised here, once the pieces
    made so far are drained; one of the pieces' maker (or a Ctrl-C) stops the writes, then propagates."""
    import queue
    import threading

    todo: queue.Queue = queue.Queue(maxsize=8)
    failed: list[BaseException] = []

    def write() -> None:
        while (piece := todo.get()) is not None:
            if not failed:
                try:
                    fh.write(piece)
                except BaseException as exc:  # noqa: BLE001 - raised by the caller's thread
                    failed.append(exc)

    writer = threading.Thread(target=write, name="dplace-write", daemon=True)
    writer.start()
    try:
        for piece in pieces:
            if failed:
                break
            todo.put(piece if isinstance(piece, bytes) else piece.encode())
    finally:
        todo.put(None)
        writer.join()
    if failed:
        raise failed[0]
