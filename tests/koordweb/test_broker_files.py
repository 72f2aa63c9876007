"""The embedded broker (`koordweb.broker_files`): a worker that lists the queue folder while a
message is being written never takes it half-written. Kombu's own filesystem transport creates
the file first and writes it after; the same interleaving there loses the message to a decode
error (shown here too, so the test would notice if kombu changed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection
from kombu.transport import filesystem

from koordweb.broker_files import Channel, Transport


def _connection(folder: Path, transport: Any) -> Connection:
    for name in ("out", "control"):
        (folder / name).mkdir(exist_ok=True)
    options = {
        "data_folder_in": str(folder / "out"),
        "data_folder_out": str(folder / "out"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }
    return Connection("filesystem://", transport=transport, transport_options=options)


def _reader_during_write(monkeypatch: pytest.MonkeyPatch, folder: Path, transport: Any) -> Any:
    """Put one message while another channel reads the queue at the worst moment: right after
    the writer opens a file for writing, before it writes. Returns what the reader got then (or
    its error) and what it reads after the put."""
    seen: list[Any] = []
    with _connection(folder, transport) as writer, _connection(folder, transport) as reader:
        put, take = writer.default_channel, reader.default_channel
        real_open = open

        def open_then_read(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            handle = real_open(file, mode, *args, **kwargs)
            if "w" in mode and str(file).startswith(str(folder / "out")):
                try:
                    seen.append(take._get("rounds"))
                except Exception as error:  # what the reader met is the finding
                    seen.append(error)
            return handle

        monkeypatch.setattr("builtins.open", open_then_read)
        put._put("rounds", {"body": "round for cluster 7"})
        monkeypatch.undo()
        try:
            after = take._get("rounds")
        except Exception as error:
            after = error
    return seen, after


def test_a_message_is_never_read_half_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen, after = _reader_during_write(monkeypatch, tmp_path, Transport)
    assert seen and all(type(s).__name__ == "Empty" for s in seen), seen
    assert after == {"body": "round for cluster 7"}
    assert list((tmp_path / "out").iterdir()) == []


def test_kombus_own_transport_loses_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen, after = _reader_during_write(monkeypatch, tmp_path, filesystem.Transport)
    assert any(isinstance(s, json.JSONDecodeError) for s in seen), seen
    assert type(after).__name__ == "Empty"  # the message is gone


def test_two_processes_binding_a_new_queue_both_keep_their_binding(tmp_path: Path) -> None:
    with _connection(tmp_path, Transport) as one, _connection(tmp_path, Transport) as two:
        one.default_channel._queue_bind("rounds-x", "a", "", "queue-a")
        two.default_channel._queue_bind("rounds-x", "b", "", "queue-b")
        table = {q.queue for q in one.default_channel.get_table("rounds-x")}
    assert table == {"queue-a", "queue-b"}
    assert [p.name for p in (tmp_path / "control").iterdir()] == ["rounds-x.exchange"]


def test_a_deleted_exchange_takes_its_table_only_once_nothing_is_bound(tmp_path: Path) -> None:
    table = tmp_path / "control" / "retired.exchange"
    with _connection(tmp_path, Transport) as conn:
        channel = conn.default_channel
        channel._queue_bind("retired", "a", "", "queue-a")
        channel._queue_bind("retired", "b", "", "queue-b")
        channel._delete("queue-a", "retired", "a", "")
        channel.exchange_delete("retired")  # queue-b is still bound (and kombu keeps non-empty)
        assert table.exists() and [q.queue for q in channel.get_table("retired")] == ["queue-b"]
        channel._delete("queue-b", "retired", "b", "")
        channel.exchange_delete("retired")
        assert not table.exists()
        channel.exchange_delete("retired")  # again: nothing to do
        channel._queue_bind("retired", "c", "", "queue-c")  # a new binding makes a new table
        assert [q.queue for q in channel.get_table("retired")] == ["queue-c"]


def test_a_binding_whose_table_was_removed_meanwhile_is_made_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The binder had the emptied table open when another process, deleting the exchange,
    unlinked it: its entry went to the unlinked file, so it binds again."""
    with _connection(tmp_path, Transport) as conn:
        channel = conn.default_channel
        channel._queue_bind("shared", "a", "", "queue-a")
        channel._delete("queue-a", "shared", "a", "")  # the table is now empty: "[]"
        real = Channel._queue_bind_once
        calls: list[int] = []

        def bind_then_lose_the_table(self: Any, *args: Any) -> None:
            real(self, *args)
            calls.append(1)
            if len(calls) == 1:
                (tmp_path / "control" / "shared.exchange").unlink()

        monkeypatch.setattr(Channel, "_queue_bind_once", bind_then_lose_the_table)
        channel._queue_bind("shared", "b", "", "queue-b")
        assert len(calls) == 2
        assert [q.queue for q in channel.get_table("shared")] == ["queue-b"]
