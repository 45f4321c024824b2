"""What `GET /metrics` tells Prometheus: requests by route and status, their latency, errors,
and the newest publication of each collection the caller may read.

The counters live in the server's own registry (not prometheus_client's global one), so two
servers in one process (tests) never share them. The published generations are read at scrape
time through the caller's connection (a tenant sees its own collections only).
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServerMetrics:
    """The server's counters and latency histogram, labelled by route (the path template, never
    the raw path: a document id or a query must not become a label)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "seams_http_requests",
            "HTTP requests answered, by route, method and status code",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "seams_http_request_duration_seconds",
            "Time to answer an HTTP request, by route",
            ("route",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "seams_http_errors",
            "Requests that failed on the server's side (5xx), by route and kind",
            ("route", "kind"),
            registry=self.registry,
        )

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self, published: Mapping[str, int]) -> bytes:
        """The exposition text: the counters, then `seams_published_seq` per collection."""
        scrape = CollectorRegistry(auto_describe=True)
        gauge = Gauge(
            "seams_published_seq",
            "The newest publication (seams.publications.seq) of each collection readers see",
            ("collection",),
            registry=scrape,
        )
        for collection, seq in sorted(published.items()):
            gauge.labels(collection).set(seq)
        return generate_latest(self.registry) + generate_latest(scrape)
