"""The traceback sampler: first K per fingerprint per hour, a bounded redaction budget, then p."""

from __future__ import annotations

import pytest

from errscope.collector.sample import TracebackSampler


@pytest.mark.parametrize(
    ("p", "expected_kept"),
    [
        pytest.param(0.0, 3, id="p0-only-the-first-k"),
        pytest.param(1.0, 10, id="p1-everything"),
    ],
)
def test_keep_first_k_then_p(p: float, expected_kept: int) -> None:
    """The first K of a fingerprint in an hour are kept; later ones with probability p."""
    sampler = TracebackSampler(first_k=3, p=p, seed=1)
    kept = sum(sampler.keep("svc", "tool", "fp", 3600.0 + i) for i in range(10))
    assert kept == expected_kept
    assert sampler.kept + sampler.dropped == 10


def test_new_hour_starts_over() -> None:
    """Counts reset when the hour changes, so every hour gets its first K again."""
    sampler = TracebackSampler(first_k=2, p=0.0, seed=1)
    first = [sampler.keep("s", "t", "fp", 10.0) for _ in range(3)]
    second = [sampler.keep("s", "t", "fp", 3600.0 + 10) for _ in range(3)]
    assert first == second == [True, True, False]


def test_admit_bounds_redaction_work() -> None:
    """Only 4*K traces per (service, tool, exception type) per hour are admitted for redaction."""
    sampler = TracebackSampler(first_k=2, p=0.0, seed=1)
    admitted = sum(sampler.admit("s", "t", "ValueError", 100.0) for _ in range(50))
    assert admitted == 8
    assert sampler.admit("s", "t", "KeyError", 100.0)  # another type has its own budget


def test_seeded_sampler_is_deterministic() -> None:
    """Two samplers with the same seed make the same choices."""
    a = TracebackSampler(first_k=0, p=0.5, seed=42)
    b = TracebackSampler(first_k=0, p=0.5, seed=42)
    assert [a.keep("s", "t", "f", 1.0) for _ in range(50)] == [
        b.keep("s", "t", "f", 1.0) for _ in range(50)
    ]


def test_bad_settings_are_refused() -> None:
    """A negative K or a probability outside [0, 1] is refused."""
    with pytest.raises(ValueError, match="first_k"):
        TracebackSampler(first_k=-1)
    with pytest.raises(ValueError, match="first_k"):
        TracebackSampler(p=1.5)
