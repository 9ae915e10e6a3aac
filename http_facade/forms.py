"""Multipart forms read as they arrive: the text fields kept (each bounded), the file's
bytes handed to a writer chunk by chunk, so a file is never held twice. The Files API's
uploads, the audio routes and image edits read their forms here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from server.base.errors import InvalidArgument, TooLarge
from server.base.uploads import FORM_SLACK

# What a text field keeps (a longer one is cut there).
FIELD_BYTES = 4096


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


class _Form:
    """One form's parse: text fields kept in order (each bounded), and each part of a
    file field handed to `data` chunk by chunk, then to `end` with its filename."""

    def __init__(
        self,
        boundary: bytes,
        file_fields: tuple[str, ...],
        data: Callable[[str, bytes], None],
        end: Callable[[str, str], None],
    ) -> None:
        self.fields: list[tuple[str, str]] = []
        self._file_fields = file_fields
        self._data, self._end = data, end
        self._name, self._filename = "", ""
        self._text: list[bytes] = []
        self._header = [b"", b""]
        self.parser = MultipartParser(boundary, {
            "on_part_begin": self._begin, "on_header_field": self._header_field,
            "on_header_value": self._header_value, "on_header_end": self._header_end,
            "on_part_data": self._part_data, "on_part_end": self._part_end,
        })  # fmt: skip

    def _begin(self) -> None:
        self._name, self._filename, self._text = "", "", []

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header[0] += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._header[1] += data[start:end]

    def _header_end(self) -> None:
        if self._header[0].lower() == b"content-disposition":
            _, options = parse_options_header(self._header[1])
            self._name = options.get(b"name", b"").decode()
            self._filename = options.get(b"filename", b"").decode()
        self._header = [b"", b""]

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._name in self._file_fields:
            self._data(self._name, data[start:end])
        elif sum(map(len, self._text)) < FIELD_BYTES:
            self._text.append(data[start:end])

    def _part_end(self) -> None:
        if self._name in self._file_fields:
            self._end(self._name, self._filename)
        elif self._name:
            self.fields.append((self._name, b"".join(self._text).decode(errors="replace")))


async def read_form(
    request: Request, boundary: bytes, file_field: str, write: Callable[[bytes], Awaitable[None]]
) -> list[tuple[str, str]]:
    """The form's text fields in order (a repeated name once per value), and the file's
    name under `file_field`, its bytes going to `write` as they arrive."""
    pending: list[bytes] = []
    form = _Form(
        boundary, (file_field,), lambda _, chunk: pending.append(chunk),
        lambda name, filename: form.fields.append((name, filename)),
    )  # fmt: skip
    async for chunk in request.stream():
        form.parser.write(chunk)
        if pending:
            await write(b"".join(pending))
            pending.clear()
    form.parser.finalize()
    if pending:
        await write(b"".join(pending))
    return form.fields


async def read_files(
    request: Request, boundary: bytes, file_fields: tuple[str, ...], limit: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str, bytes]]]:
    """A form with several files (`image[]` twice, a `mask`): its text fields in order,
    and each file as (field, filename, bytes), its chunks joined once at its end. The
    files together hold at most `limit` bytes: TooLarge names the field that passed it."""
    files: list[tuple[str, str, bytes]] = []
    chunks: list[bytes] = []
    held = [0]

    def data(name: str, chunk: bytes) -> None:
        held[0] += len(chunk)
        if held[0] > limit:
            raise TooLarge(f"{name}: the files exceed {limit} bytes", {"field": name})
        chunks.append(chunk)

    def end(name: str, filename: str) -> None:
        files.append((name, filename, b"".join(chunks)))
        chunks.clear()

    form = _Form(boundary, file_fields, data, end)
    async for chunk in request.stream():
        form.parser.write(chunk)
    form.parser.finalize()
    return form.fields, files
