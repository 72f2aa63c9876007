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

from koordweb.broker_files import Transport


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
