"""Multipart forms read as they arrive: the text fields kept (each bounded), the file's
bytes handed to a writer chunk by chunk, so a file is never held twice. The Files API's
uploads, the audio routes and image edits read their forms here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from server.application.batches.files import TooLarge
from server.base.errors import InvalidArgument

# What a text field keeps (a longer one is cut there).
FIELD_BYTES = 4096


# What a form's other fields and boundaries may add to its files' bytes.
FORM_SLACK = 64 * 1024


def refuse_declared_past(request: Request, limit: int, error: TooLarge) -> None:
    """Raises `error` before the body is read when its declared length is past `limit`
    plus a form's slack (a body without one is bounded as it is read)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + FORM_SLACK:
        raise error


def boundary_of(request: Request, file_field: str) -> bytes:
    """The form's boundary; InvalidArgument naming the file field when it is no form."""
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    if kind != b"multipart/form-data" or b"boundary" not in options:
        raise InvalidArgument.for_field(file_field, "send the file as multipart/form-data")
    return bytes(options[b"boundary"])


async def read_form(
    request: Request, boundary: bytes, file_field: str, write: Callable[[bytes], Awaitable[None]]
) -> list[tuple[str, str]]:
    """The form's text fields in order (a repeated name once per value), and the file's
    name under `file_field`, its bytes going to `write` as they arrive."""
    fields: list[tuple[str, str]] = []
    part: dict[str, Any] = {}
    pending: list[bytes] = []
    header: list[bytes] = [b"", b""]

    def on_part_begin() -> None:
        part.clear()
        part["data"] = []

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header[0] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header[1] += data[start:end]

    def on_header_end() -> None:
        if header[0].lower() == b"content-disposition":
            _, options = parse_options_header(header[1])
            part["name"] = options.get(b"name", b"").decode()
            if b"filename" in options:
                part["filename"] = options[b"filename"].decode()
        header[0], header[1] = b"", b""

    def on_part_data(data: bytes, start: int, end: int) -> None:
        if part.get("name") == file_field:
            pending.append(data[start:end])
        elif sum(map(len, part["data"])) < FIELD_BYTES:
            part["data"].append(data[start:end])

    def on_part_end() -> None:
        name = part.get("name", "")
        if name == file_field:
            fields.append((name, part.get("filename", "")))
        elif name:
            fields.append((name, b"".join(part["data"]).decode(errors="replace")))

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field,
        "on_header_value": on_header_value, "on_header_end": on_header_end,
        "on_part_data": on_part_data, "on_part_end": on_part_end,
    })  # fmt: skip
    async for chunk in request.stream():
        parser.write(chunk)
        if pending:
            await write(b"".join(pending))
            pending.clear()
    parser.finalize()
    if pending:
        await write(b"".join(pending))
    return fields


async def read_files(
    request: Request, boundary: bytes, file_fields: tuple[str, ...], limit: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str, bytes]]]:
    """A form with several files (`image[]` twice, a `mask`): its text fields in order,
    and each file as (field, filename, bytes), its chunks joined once at its end. The
    files together hold at most `limit` bytes: TooLarge names the field that passed it."""
    fields: list[tuple[str, str]] = []
    files: list[tuple[str, str, bytes]] = []
    part: dict[str, Any] = {}
    header: list[bytes] = [b"", b""]
    held = [0]

    def on_part_begin() -> None:
        part.clear()
        part["data"] = []

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header[0] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header[1] += data[start:end]

    def on_header_end() -> None:
        if header[0].lower() == b"content-disposition":
            _, options = parse_options_header(header[1])
            part["name"] = options.get(b"name", b"").decode()
            part["filename"] = options.get(b"filename", b"").decode()
        header[0], header[1] = b"", b""

    def on_part_data(data: bytes, start: int, end: int) -> None:
        if part.get("name") in file_fields:
            held[0] += end - start
            if held[0] > limit:
                name = part["name"]
                raise TooLarge(f"{name}: the files exceed {limit} bytes", {"field": name})
            part["data"].append(data[start:end])
        elif sum(map(len, part["data"])) < FIELD_BYTES:
            part["data"].append(data[start:end])

    def on_part_end() -> None:
        name = part.get("name", "")
        if name in file_fields:
            files.append((name, part["filename"], b"".join(part["data"])))
        elif name:
            fields.append((name, b"".join(part["data"]).decode(errors="replace")))
        part["data"] = []

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_header_field": on_header_field,
        "on_header_value": on_header_value, "on_header_end": on_header_end,
        "on_part_data": on_part_data, "on_part_end": on_part_end,
    })  # fmt: skip
    async for chunk in request.stream():
        parser.write(chunk)
    parser.finalize()
    return fields, files
