"""`RequestTallies`: requests counted by each thread with no lock, added up exactly at a scrape,
in the metrics Litestar's Prometheus plugin had."""

from __future__ import annotations

import math
import threading
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cleanair_http.metrics import REQUEST_BUCKETS, RequestTallies

requests = st.lists(
    st.tuples(
        st.integers(0, 3),  # the thread that answers it
        st.sampled_from(["GET", "POST"]),
        st.sampled_from(["/v1/quota", "/v1/routes/{request_id}"]),
        st.sampled_from([200, 401, 429, 500, 503]),
        st.floats(0, 20, allow_nan=False),
    ),
    max_size=200,
)


def scrape(tallies: RequestTallies) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry()
    registry.register(tallies)
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def labels(method: str, path: str, status: str, **more: str) -> frozenset[tuple[str, str]]:
    named = {"method": method, "path": path, "status_code": status, "app_name": "cleanair"}
    return frozenset({**named, **more}.items())


def answer_in_threads(
    tallies: RequestTallies, answered: list[tuple[int, str, str, int, float]]
) -> None:
    def answer(thread: int) -> None:
        for by, method, path, status, seconds in answered:
            if by == thread:
                tallies.started(method, path)
                tallies.answered(method, path, status, seconds)

    threads = [threading.Thread(target=answer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@settings(max_examples=40, deadline=None)
@given(answered=requests)
def test_a_scrape_adds_up_every_threads_requests(
    answered: list[tuple[int, str, str, int, float]],
) -> None:
    tallies = RequestTallies()
    answer_in_threads(tallies, answered)
    samples = scrape(tallies)

    counts = Counter((m, p, str(s)) for _, m, p, s, _ in answered)
    series = [ls for name, ls in samples if name == "cleanair_requests_total"]
    assert len(series) == len(counts)
    for (method, path, status), count in counts.items():
        named = labels(method, path, status)
        these = [t for _, m, p, s, t in answered if (m, p, str(s)) == (method, path, status)]
        assert samples["cleanair_requests_total", named] == count
        assert samples["cleanair_request_duration_seconds_count", named] == count
        total = samples["cleanair_request_duration_seconds_sum", named]
        assert math.isclose(total, sum(these), abs_tol=1e-9)
        for bound in REQUEST_BUCKETS:
            le = "+Inf" if bound == math.inf else repr(float(bound))
            bucket = labels(method, path, status, le=le)
            below = sum(1 for seconds in these if seconds <= bound)
            assert samples["cleanair_request_duration_seconds_bucket", bucket] == below
        errors = samples.get(("cleanair_requests_error_total", named))
        assert errors == (count if int(status) >= 500 else None)
        assert samples["cleanair_requests_in_progress", labels(method, path, "200")] == 0


def test_counts_are_exact_under_threads_answering_at_once() -> None:
    """Four threads counting the same series at once: every thread's count is in the scrape."""
    tallies = RequestTallies()
    each = 20_000
    answer_in_threads(
        tallies, [(n, "GET", "/livez", 200, 0.001) for n in range(4) for _ in range(each)]
    )
    samples = scrape(tallies)
    assert samples["cleanair_requests_total", labels("GET", "/livez", "200")] == 4 * each
    assert samples["cleanair_requests_in_progress", labels("GET", "/livez", "200")] == 0


def test_requests_in_progress_are_shown_until_answered() -> None:
    tallies = RequestTallies()
    tallies.started("POST", "/v1/airquality/score")
    tallies.started("POST", "/v1/airquality/score")
    tallies.answered("POST", "/v1/airquality/score", 503, 0.2)
    samples = scrape(tallies)
    score = ("POST", "/v1/airquality/score")
    assert samples["cleanair_requests_in_progress", labels(*score, "200")] == 1
    assert samples["cleanair_requests_total", labels(*score, "503")] == 1
    assert samples["cleanair_requests_error_total", labels(*score, "503")] == 1


def test_nothing_is_shown_before_the_first_request() -> None:
    """As the plugin made its metrics only at their first sample."""
    assert scrape(RequestTallies()) == {}
