"""The image, run as a platform would run it: small, no shell, a non-root user, a read-only
root file system with a state folder mounted; a chat call answered; SIGTERM while streams
are running lets every one finish and loses no ledger row; and the chart's Deployment,
rendered, run under `podman kube play`."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml

from deploy.checks.conftest import IMAGE, KEY, MODEL, ROUTING, free_port, state_folder, wait_ready
from deploy.kustomize.render import CHART

MAX_BYTES = 150_000_000


def inspect(podman: list[str], what: str, *fields: str) -> Any:
    out = subprocess.run([*podman, what, "inspect", *fields], capture_output=True, check=True)
    return json.loads(out.stdout)


def test_the_image_is_small_unprivileged_and_has_no_shell(podman):
    (image,) = inspect(podman, "image", IMAGE)
    print(f"image {IMAGE}: {image['Size'] / 1e6:.1f} MB")
    assert image["Size"] <= MAX_BYTES
    assert image["Config"]["User"] == "10001:10001"
    shell = subprocess.run([*podman, "run", "--rm", "--entrypoint", "/bin/sh", IMAGE, "-c", "true"],
                           capture_output=True)  # fmt: skip
    assert shell.returncode != 0
    licensed = subprocess.run(
        [*podman, "run", "--rm", "--entrypoint", "/opt/gateway/bin/python", IMAGE, "-c",
         "import pathlib; d = pathlib.Path('/usr/share/doc/gateway');"
         "print(sorted(p.name for p in d.iterdir()))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert licensed.stdout.strip() == "['LICENSE', 'requirements.lock']"


def config(http: int, grpc: int) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "http_port": http, "grpc_port": grpc},
        "default_model": "sim-mini", "models": [MODEL], "routing": ROUTING,
        "keys": [{"name": "deploy", "kind": "api", "secret": KEY}],
        "operations": {"readiness_delay_s": 0, "drain_s": 30},
    }  # fmt: skip


async def stream(client: httpx.AsyncClient, started: asyncio.Event, count: list[int]) -> str:
    body = {"model": "sim-mini", "stream": True, "max_tokens": 300,
            "messages": [{"role": "user", "content": "a long answer please"}]}  # fmt: skip
    async with client.stream("POST", "/v1/chat/completions", json=body) as answer:
        assert answer.status_code == 200
        lines = []
        async for line in answer.aiter_lines():
            if line.startswith("data: ") and not lines:
                count[0] += 1
                if count[0] == 20:
                    started.set()
            lines.append(line)
    return [line for line in lines if line.startswith("data: ")][-1]


def test_the_image_serves_read_only_and_a_sigterm_loses_nothing(podman, tmp_path):
    http, grpc = free_port(), free_port()
    state = state_folder(tmp_path)
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(config(http, grpc)))
    name = f"gateway-check-{http}"
    subprocess.run(
        [*podman, "run", "-d", "--name", name, "--read-only", "--network", "host",
         "-v", f"{state}:/var/lib/gateway", "-v", f"{tmp_path / 'gateway.yaml'}:/etc/gateway.yaml:ro",
         IMAGE, "serve", "--config", "/etc/gateway.yaml"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{http}"
        print(f"ready {wait_ready(url):.2f} s after `podman run`")

        async def load() -> list[str]:
            headers = {"x-api-key": KEY}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
                answer = await client.post("/v1/chat/completions", json={
                    "model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
                assert answer.status_code == 200 and answer.json()["choices"][0]["message"]
                started, count = asyncio.Event(), [0]
                streams = [asyncio.create_task(stream(client, started, count)) for _ in range(20)]
                await asyncio.wait_for(started.wait(), 60)
                stop = await asyncio.create_subprocess_exec(
                    *podman, "kill", "--signal", "TERM", name
                )
                assert await stop.wait() == 0
                return await asyncio.gather(*streams)

        endings = asyncio.run(load())
        assert endings == ["data: [DONE]"] * 20
        subprocess.run([*podman, "wait", name], check=True, capture_output=True, timeout=60)
        (container,) = inspect(podman, "container", name)
        assert container["State"]["ExitCode"] == 0
    finally:
        logs = subprocess.run([*podman, "logs", name], capture_output=True, text=True)
        subprocess.run([*podman, "rm", "-f", name], capture_output=True)
    assert "Traceback" not in logs.stdout + logs.stderr
    with sqlite3.connect(state / "gateway.db") as db:
        (rows,) = db.execute("SELECT count(*) FROM usage_records").fetchone()
    assert rows == 21, logs.stdout + logs.stderr


def test_the_charts_deployment_runs_under_podman_kube_play(podman, tmp_path):
    import helm_python as helm

    http, grpc = free_port(), free_port()
    repository, tag = IMAGE.rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag},
        "ports": {"http": http, "grpc": grpc},
        "config": {**config(http, grpc), "server": {}},
    }
    chart = helm.Chart.load(CHART)
    try:
        files = chart.render(values, name=f"check{http}", namespace="default", is_install=True)
    finally:
        chart.close()
    wanted = ("ConfigMap", "Deployment")
    docs = [d for p, t in files.items() if p.endswith(".yaml")
            for d in yaml.safe_load_all(t) if d and d["kind"] in wanted]  # fmt: skip
    kube = tmp_path / "kube.yaml"
    kube.write_text(yaml.safe_dump_all(docs))
    subprocess.run([*podman, "kube", "play", str(kube)], check=True, capture_output=True)
    try:
        url = f"http://127.0.0.1:{http}"
        wait_ready(url)
        answer = httpx.post(
            f"{url}/v1/chat/completions", headers={"x-api-key": KEY}, timeout=30,
            json={"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
    finally:
        subprocess.run([*podman, "kube", "down", str(kube)], capture_output=True)


def test_the_image_tag_the_chart_names_by_default_is_its_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = Path(__file__).parents[2].joinpath("pyproject.toml").read_text()
    assert f'version = "{chart["appVersion"]}"' in version
