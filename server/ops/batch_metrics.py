"""Batch metrics, read from the batch worker when metrics are scraped: batches held and
lines running on this instance, lines ended by outcome, attempts repeated."""

from __future__ import annotations

from collections import Counter as Counts

from prometheus_client import CollectorRegistry, Counter, Gauge

from server.application.batches.worker import Worker


class BatchMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.held = Gauge(
            "gateway_batches_running", "Batches this instance holds the lease of.",
            registry=registry,
        )  # fmt: skip
        self.running = Gauge(
            "gateway_batch_lines_running", "Batch lines running now on this instance.",
            registry=registry,
        )  # fmt: skip
        self.ended = Counter(
            "gateway_batch_lines", "Batch lines ended, by outcome (succeeded, errored).",
            ["outcome"], registry=registry,
        )  # fmt: skip
        self.retried = Counter(
            "gateway_batch_line_retries",
            "Batch line attempts repeated after a passing failure (a rate limit, an "
            "upstream away).",
            registry=registry,
        )  # fmt: skip
        self._seen: Counts[str] = Counts()
        self._retried = 0

    def sample(self, worker: Worker) -> None:
        self.held.set(worker.held)
        self.running.set(worker.running)
        for outcome, n in worker.ended.items():
            if n > self._seen[outcome]:
                self.ended.labels(outcome).inc(n - self._seen[outcome])
                self._seen[outcome] = n
        if worker.retried > self._retried:
            self.retried.inc(worker.retried - self._retried)
            self._retried = worker.retried
