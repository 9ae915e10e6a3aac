"""POST /v1/images/generations and /v1/images/edits: the openai SDK, raw HTTP for the
multipart bound and every refusal, gRPC, the ledger row per image or in tokens, and the
OpenAI adapter against a strict fake (links fetched unless the operator passes them)."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import openai
import pytest
from gateway.v1 import image_service_pb2 as pb
from gateway.v1 import image_service_pb2_grpc

from server.base.images import MAX_IMAGE_BYTES
from server.base.uploads import FORM_SLACK
from tests.integration.rest.test_operation_run import last_row
from tests.support.facade import both_modes, client, declared_past, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, details
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.images import SIGNATURE, USAGE, ImagesWire, image

AUTH = {"x-api-key": API_KEY}


def read_png(data: bytes) -> tuple[int, int, int, bytes]:
    """Width, height, colour type and the text chunk of a PNG, every chunk's CRC checked
    and its pixels inflated to their whole length."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + size]
        assert struct.unpack_from(">I", data, at + 8 + size)[0] == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + size
    width, height, _, colour = struct.unpack_from(">IIBB", chunks[b"IHDR"])
    pixels = zlib.decompress(chunks[b"IDAT"])
    assert len(pixels) == height * (1 + width * (4 if colour == 6 else 3))
    assert b"IEND" in chunks
    return width, height, colour, chunks[b"tEXt"]


@pytest.fixture
async def sdk() -> AsyncIterator[openai.AsyncOpenAI]:
    async with (
        facade("in_process") as url,
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0) as c,
    ):
        yield c


async def test_generated_images_are_valid_pngs_picked_by_the_prompt(
    sdk: openai.AsyncOpenAI,
) -> None:
    got = await sdk.images.generate(model="sim-image", prompt="a red fox", n=2, size="256x256")
    again = await sdk.images.generate(model="sim-image", prompt="a red fox", size="256x256")
    other = await sdk.images.generate(
        model="sim-image", prompt="a blue whale", size="512x512", background="transparent"
    )
    assert got.data is not None and again.data is not None and other.data is not None
    first, second = (base64.b64decode(i.b64_json or "") for i in got.data)
    assert first != second and base64.b64decode(again.data[0].b64_json or "") == first
    width, height, colour, text = read_png(first)
    assert (width, height, colour) == (256, 256, 2) and b"simulated" in text
    assert read_png(base64.b64decode(other.data[0].b64_json or ""))[:3] == (512, 512, 6)
    assert got.data[0].revised_prompt == "(simulated) a red fox"
    assert (got.size, got.output_format, other.background) == ("256x256", "png", "transparent")


async def test_a_generation_is_billed_per_image_by_quality_and_size() -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        low = await sdk.images.generate(
            model="sim-image", prompt="a lake", n=3, size="1024x1024", quality="low"
        )
        row = await last_row(gw)
        other = await sdk.images.generate(model="sim-image", prompt="a lake", size="256x256")
        other_row = await last_row(gw)
    usage: Any = low.usage
    assert usage.total_cost_usd == pytest.approx(3 * 0.011) and usage.billed_unit == "images"
    assert (row["method"], row["unit"], row["units"]) == ("CreateImage", "images", 3)
    assert row["total_cost_usd"] == pytest.approx(3 * 0.011)
    # No price for medium/256x256 nor 256x256: the default.
    assert other_row["total_cost_usd"] == pytest.approx(0.063) and other.usage is not None


async def test_an_edit_takes_several_images_and_a_mask(sdk: openai.AsyncOpenAI) -> None:
    one, two = image(0), image(1)
    got = await sdk.images.edit(
        model="sim-image", prompt="add a hat", size="256x256",
        image=[("a.png", one, "image/png"), ("b.png", two, "image/png")],
        mask=("m.png", one, "image/png"),
    )  # fmt: skip
    alone = await sdk.images.edit(
        model="sim-image", prompt="add a hat", size="256x256", image=("a.png", one, "image/png")
    )
    assert got.data is not None and alone.data is not None
    edited, single = (base64.b64decode(r.data[0].b64_json or "") for r in (got, alone))  # type: ignore[index]
    assert read_png(edited)[:2] == (256, 256) and edited != single  # the images pick it
    usage: Any = got.usage
    assert usage.input_tokens_details.image_tokens == 3 * 323  # two images and the mask
    assert usage.input_tokens_details.image_tokens > alone.usage.input_tokens_details.image_tokens  # type: ignore[union-attr]


GOOD = {"model": "sim-image", "prompt": "a cat"}


BAD_GENERATIONS: list[tuple[dict[str, Any], str, str]] = [
        ({"model": "sim-image"}, "prompt", "required"),
        ({**GOOD, "prompt": "x" * 32_001}, "prompt", "32000"),
        ({"prompt": "a cat"}, "model", "required"),
        ({**GOOD, "n": 0}, "n", "1 to 10"),
        ({**GOOD, "n": 11}, "n", "1 to 10"),
        ({**GOOD, "size": "big"}, "size", "WIDTHxHEIGHT"),
        ({**GOOD, "quality": "ultra"}, "quality", "standard"),
        ({**GOOD, "response_format": "png"}, "response_format", "b64_json"),
        ({**GOOD, "output_format": "gif"}, "output_format", "webp"),
        ({**GOOD, "background": "green"}, "background", "transparent"),
        ({**GOOD, "output_compression": 101}, "output_compression", "0 to 100"),
        ({**GOOD, "background": "transparent", "output_format": "jpeg"}, "background", "png"),
        ({**GOOD, "colour": "red"}, "colour", ""),
        ({**GOOD, "model": "sim-mini"}, "model", "image_generation"),
]  # fmt: skip


@both_modes
async def test_bad_generations_name_the_field(mode: str) -> None:
    async with client(mode) as c:
        for body, param, words in BAD_GENERATIONS:
            got = await c.post("/v1/images/generations", json=body, headers=AUTH)
            assert got.status_code == 400, (body, got.text)
            error = got.json()["error"]
            assert error["param"] == param and words in error["message"], (body, error)
            assert "Traceback" not in got.text


FORM = {"model": "sim-image", "prompt": "a hat"}
PNG = ("a.png", image(0), "image/png")


BAD_EDITS: list[tuple[dict[str, str], list[tuple[str, Any]], str, str]] = [
        (FORM, [], "image", "required"),
        (FORM, [("image", ("a.png", b"", "image/png"))], "image", "not empty"),
        (FORM, [("image[]", PNG)] * 17, "image", "16"),
        (FORM, [("image", PNG), ("mask", PNG), ("mask", PNG)], "mask", "one file"),
        (FORM, [("image", PNG), ("mask", ("m.png", b"", "image/png"))], "mask", "not empty"),
        ({"model": "sim-image"}, [("image", PNG)], "prompt", "required"),
        ({**FORM, "n": "two"}, [("image", PNG)], "n", "whole number"),
        ({**FORM, "n": "12"}, [("image", PNG)], "n", "1 to 10"),
        ({**FORM, "size": "huge"}, [("image", PNG)], "size", "WIDTHxHEIGHT"),
        ({**FORM, "style": "vivid"}, [("image", PNG)], "style", "not a field"),
        ({**FORM, "model": "sim-audio"}, [("image", PNG)], "model", "image_generation"),
]  # fmt: skip


@both_modes
async def test_bad_edits_name_the_field(mode: str) -> None:
    async with client(mode) as c:
        for data, files, param, words in BAD_EDITS:
            sent = files or [("n", (None, "1"))]  # a form without any file
            got = await c.post("/v1/images/edits", data=data, files=sent, headers=AUTH)
            assert got.status_code == 400, (data, got.text)
            error = got.json()["error"]
            assert error["param"] == param and words in error["message"], (data, error)
            assert "Traceback" not in got.text


async def test_edit_files_past_50_mb_are_413_whether_declared_or_not() -> None:
    past = MAX_IMAGE_BYTES + 1
    boundary = "b0und"
    head = (f'--{boundary}\r\ncontent-disposition: form-data; name="model"\r\n\r\nsim-image\r\n'
            f'--{boundary}\r\ncontent-disposition: form-data; name="prompt"\r\n\r\nhat\r\n'
            f'--{boundary}\r\ncontent-disposition: form-data; name="image[]"; filename="a.png"'
            "\r\n\r\n").encode()  # fmt: skip
    tail = f"\r\n--{boundary}--\r\n".encode()
    kind = {"content-type": f"multipart/form-data; boundary={boundary}", **AUTH}

    async def undeclared() -> AsyncIterator[bytes]:
        yield head
        chunk = bytes(1 << 20)
        for _ in range(past // len(chunk) + 1):
            yield chunk
        yield tail

    async with client("in_process") as c:
        # Declared past the bound: answered before the body is sent (only its head is).
        status, error = await declared_past(
            str(c.base_url), "/v1/images/edits", kind, MAX_IMAGE_BYTES + FORM_SLACK + 1, head
        )
        streamed = await c.post("/v1/images/edits", content=undeclared(), headers=kind)
        within = await c.post("/v1/images/edits", content=head + image(0) + tail, headers=kind)
    assert status == 413
    assert error["param"] == "image" and str(MAX_IMAGE_BYTES) in error["message"]
    assert streamed.status_code == 413, streamed.text
    assert streamed.json()["error"]["param"] == "image[]"
    assert str(MAX_IMAGE_BYTES) in streamed.json()["error"]["message"]
    assert within.status_code == 200, within.text


async def test_images_over_grpc(gateway) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = image_service_pb2_grpc.ImageServiceStub(channel)
        got = await stub.CreateImage(
            pb.CreateImageRequest(model="sim-image", prompt="a cat", size="256x256"), metadata=API
        )
        assert read_png(got.data[0].b64_json.encode() and base64.b64decode(got.data[0].b64_json))[
            :2
        ] == (256, 256)
        edited = await stub.EditImage(
            pb.EditImageRequest(model="sim-image", prompt="a hat", size="256x256",
                                image=[pb.ImageFile(data=image(0))]), metadata=API)  # fmt: skip
        assert len(edited.data) == 1 and edited.usage.input_tokens_details.image_tokens == 323
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.EditImage(pb.EditImageRequest(model="sim-image", prompt="x"), metadata=API)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violations = details(caught.value)["BadRequest"].field_violations  # type: ignore[attr-defined]
        assert [v.field for v in violations] == ["image"]


IMAGE_PRICE = {"input": 5.0, "output": 40.0, "image_input": 10.0}


def _image_model(primary: str, backup: str, upstream: str, **params: Any) -> dict[str, Any]:
    entry = model(
        "images-fake",
        provider("images-primary", "openai", primary, model=upstream, **params),
        provider("images-backup", "openai", backup, "backup", model=upstream, **params),
        price=IMAGE_PRICE,
    )
    entry["capabilities"] = ["image_generation"]
    return entry


async def test_gpt_image_tokens_are_priced_apart_and_a_failure_fails_over() -> None:
    primary_wire, backup_wire = ImagesWire(), ImagesWire()
    async with (
        serving(primary_wire) as primary,
        serving(backup_wire) as backup,
        running_gateway(with_models(_image_model(primary.url, backup.url, "gpt-image-1"))) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        got = await sdk.images.generate(
            model="images-fake", prompt="a cat", n=2, size="1024x1536", output_format="webp",
            background="opaque", response_format="b64_json",
        )  # fmt: skip
        sent = primary.seen[0].body["_json"]
        assert sent == {"model": "gpt-image-1", "prompt": "a cat", "n": 2, "size": "1024x1536",
                        "output_format": "webp", "background": "opaque"}  # fmt: skip
        row = await last_row(gw)
        primary.faults = [Fault("status", 503)]
        edited = await sdk.images.edit(
            model="images-fake", prompt="a hat", image=[PNG, ("b.png", image(1), "image/png")],
            mask=("m.png", image(2), "image/png"), quality="low",
        )  # fmt: skip
        form = backup.seen[0].body["_form"]
    assert got.data is not None and [base64.b64decode(i.b64_json or "") for i in got.data] == [
        image(0),
        image(1),
    ]
    usage: Any = got.usage
    assert (usage.input_tokens, usage.output_tokens) == (50, 272)
    assert usage.input_tokens_details.image_tokens == 40 and usage.billed_unit == "tokens"
    # Text input at 5, image input at 10, image output at 40 (USD per million).
    priced = (10 * 5.0 + 40 * 10.0 + 272 * 40.0) / 1e6
    assert usage.total_cost_usd == pytest.approx(priced)
    assert (row["unit"], row["units"]) == ("tokens", USAGE["total_tokens"])
    assert row["total_cost_usd"] == pytest.approx(priced)
    assert form["image[]"] == [image(0), image(1)] and form["mask"] == image(2)
    assert (form["model"], form["quality"], form["n"]) == ("gpt-image-1", "low", "1")
    assert edited.data is not None and len(edited.data) == 1
    assert primary_wire.refused == [] and backup_wire.refused == []


async def test_an_upstream_link_is_fetched_and_answered_as_the_image() -> None:
    wire = ImagesWire()
    async with serving(wire) as upstream:
        wire.base_url = upstream.url
        async with (
            running_gateway(
                with_models(_image_model(upstream.url, upstream.url, "dall-e-3"))
            ) as gw,
            openai.AsyncOpenAI(
                base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
            ) as sdk,
        ):
            got = await sdk.images.generate(
                model="images-fake", prompt="a cat", response_format="url", quality="hd"
            )
            raw = await httpx.AsyncClient().post(
                f"http://127.0.0.1:{gw.http_port}/v1/images/generations", headers=AUTH,
                json={"model": "images-fake", "prompt": "a cat"},
            )  # fmt: skip
    assert got.data is not None and got.data[0].url is None
    assert base64.b64decode(got.data[0].b64_json or "") == image(0)
    assert got.data[0].revised_prompt == "revised a cat"
    assert SIGNATURE not in raw.text and "/storage/" not in raw.text
    sent = upstream.seen[0].body["_json"]
    assert "response_format" not in sent and sent["quality"] == "hd"
    assert wire.fetched == ["/storage/0.png?" + SIGNATURE] * 2 and wire.refused == []


async def test_an_operator_may_pass_the_upstreams_links() -> None:
    wire = ImagesWire()
    async with serving(wire) as upstream:
        wire.base_url = upstream.url
        entry = _image_model(upstream.url, upstream.url, "dall-e-2", image_urls="pass")
        async with (
            running_gateway(with_models(entry)) as gw,
            openai.AsyncOpenAI(
                base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
            ) as sdk,
        ):
            got = await sdk.images.generate(model="images-fake", prompt="a cat", n=2,
                                            response_format="url")  # fmt: skip
            row = await last_row(gw)
    assert got.data is not None
    assert [i.url for i in got.data] == [
        f"{upstream.url}/storage/{n}.png?{SIGNATURE}" for n in range(2)
    ]
    assert upstream.seen[0].body["_json"]["response_format"] == "url" and wire.fetched == []
    # No usage from dall-e: billed by the estimate, in tokens (the model has no per_image).
    assert row["unit"] == "tokens" and row["total_cost_usd"] > 0


async def test_the_fake_refuses_what_openai_refuses() -> None:
    wire = ImagesWire()
    async with (
        serving(wire) as fake,
        httpx.AsyncClient(base_url=fake.url, headers={"authorization": f"Bearer {KEY}"}) as h,
    ):
        post = "/v1/images/generations"
        refused = [
            await h.post(post, json={"model": "gpt-image-1", "prompt": "x", "response_format": "url"}),
            await h.post(post, json={"model": "dall-e-3", "prompt": "x", "n": 2}),
            await h.post(post, json={"model": "dall-e-2", "prompt": "x", "background": "opaque"}),
            await h.post(post, json={"model": "gpt-image-1", "prompt": "x", "size": "9x9"}),
            await h.post(post, json={"model": "gpt-image-1", "prompt": "x", "colour": "red"}),
            await h.post(post, json={"model": "gpt-image-1"}),
            await h.post("/v1/images/edits", data={"model": "gpt-image-1", "prompt": "x"},
                         files={"other": b"1"}),
            await h.post("/v1/images/edits", json={"model": "gpt-image-1", "prompt": "x"}),
        ]  # fmt: skip
        unsigned = await h.get("/storage/0.png")
        fine = await h.post(post, json={"model": "gpt-image-1", "prompt": "x"})
    assert [r.status_code for r in refused] == [400] * len(refused)
    assert unsigned.status_code == 403
    assert fine.status_code == 200 and len(wire.refused) == len(refused) + 1


@both_modes
async def test_a_call_without_a_key_is_401_before_its_fields_are_read(mode: str) -> None:
    async with client(mode) as c:
        generation = await c.post("/v1/images/generations", json={"model": "sim-image"})
        edit = await c.post("/v1/images/edits", data=FORM, files=[("n", (None, "1"))])
    assert (generation.status_code, edit.status_code) == (401, 401)


async def test_an_edit_sent_as_json_is_transcoded() -> None:
    encoded = base64.b64encode(image(0)).decode()
    body = {"model": "sim-image", "prompt": "a hat", "size": "256x256",
            "image": [{"data": encoded, "filename": "a.png"}]}  # fmt: skip
    async with client("in_process") as c:
        got = await c.post("/v1/images/edits", json=body, headers=AUTH)
        form = await c.post(
            "/v1/images/edits", headers=AUTH, files=[("image", PNG)],
            data={"model": "sim-image", "prompt": "a hat", "size": "256x256"},
        )  # fmt: skip
    assert got.status_code == 200, got.text
    assert got.json()["data"][0]["b64_json"] == form.json()["data"][0]["b64_json"]


async def test_a_link_that_cannot_be_fetched_fails_over_and_is_never_shown() -> None:
    unsigned, signed = ImagesWire(sign_links=False), ImagesWire()
    async with serving(unsigned) as primary, serving(signed) as backup:
        unsigned.base_url, signed.base_url = primary.url, backup.url
        async with (
            running_gateway(with_models(_image_model(primary.url, backup.url, "dall-e-2"))) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", headers=AUTH) as c,
        ):
            got = await c.post("/v1/images/edits", data={"model": "images-fake", "prompt": "hat"},
                               files=[("image", PNG)])  # fmt: skip
            row = await last_row(gw)
            backup.faults = [Fault("status", 503)]
            failed = await c.post("/v1/images/edits", data={"model": "images-fake", "prompt": "x"},
                                  files=[("image", PNG)])  # fmt: skip
    assert got.status_code == 200, got.text
    assert base64.b64decode(got.json()["data"][0]["b64_json"]) == image(0)
    assert unsigned.refused == ["unsigned"] * 2 and len(signed.fetched) == 1
    assert (row["method"], row["provider"]) == ("EditImage", "images-backup")
    assert failed.status_code == 502 and "/storage/" not in failed.text
    assert "could not" in failed.text or "answered 403" in failed.text
