"""The embedded broker of `make run`: kombu's filesystem transport, each file made whole before
another process can read it.

Kombu's own transport creates a message's file in the folder workers read and only then writes
it. A worker listing the folder in between takes the empty file, fails to decode it and loses
the message (seen as a JSONDecodeError when a web process, the beat and a worker share the
folder). A queue's binding table has the same gap when its file is first made. Here a message is
written under a name no reader matches and renamed into place, and a new binding table is linked
into place only if no other process made it first: both are atomic on one filesystem. An exchange
deleted (a retired worker's, koordweb.worker_queues) takes its table file with it once no queue is
bound there; kombu leaves it, empty. The networked brokers (Redis, RabbitMQ) are what scales out;
this one serves one machine.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

PARTIAL = ".part"  # a reader matches `<stamp>_<uuid>.<queue>.msg` only


class Channel(filesystem.Channel):
    # Kombu itself names the message `payload` here and `message` in its base class.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Put a message on `queue`: written whole, then renamed where readers look."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        try:
            with open(final + PARTIAL, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(final + PARTIAL, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        """Bind `queue`, and bind again if the table was removed meanwhile (`exchange_delete`
        unlinks an emptied table while another process may have it open to add to it)."""
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        for _ in range(3):
            self._queue_bind_once(exchange, routing_key, pattern, queue)
            if entry in self.get_table(exchange):
                return
        raise ChannelError(f"Cannot bind {queue!r} to exchange {exchange!r}")

    def _queue_bind_once(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        """A table no process has made yet is made whole and linked into place (a link fails if
        another process linked one first); an existing table is updated under its lock, as kombu
        does."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        if not file.exists():
            entry = [[routing_key or "", pattern or "", queue or ""]]
            fd, scratch = tempfile.mkstemp(dir=self.control_folder, suffix=PARTIAL)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(str_to_bytes(dumps(entry)))
                os.link(scratch, file)
                return
            except FileExistsError:
                pass  # made meanwhile by another process: add to it below
            finally:
                os.unlink(scratch)
        super()._queue_bind(exchange, routing_key, pattern, queue)

    def exchange_delete(self, exchange: str, if_unused: bool = False, nowait: bool = False) -> None:
        """Delete `exchange` (its queues, when empty, as kombu does), then its table file if no
        queue is bound there any more: checked and unlinked under the table's lock."""
        super().exchange_delete(exchange, if_unused=if_unused, nowait=nowait)
        file = self._exchange_file(exchange)
        try:
            table = file.open("rb", buffering=0)
        except FileNotFoundError:
            return
        with table:
            filesystem.lock(table, filesystem.LOCK_EX)
            try:
                if not loads(bytes_to_str(table.read()) or "[]"):
                    file.unlink(missing_ok=True)
            finally:
                filesystem.unlock(table)


class Transport(filesystem.Transport):
    Channel = Channel
