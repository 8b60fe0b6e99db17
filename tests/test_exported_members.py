"""The public surface is small and pinned: a change to it is a deliberate change to this test."""

from __future__ import annotations

import collector.catalog
import collector.errors
import collector.record
import collector.store


def test_error_tree_exports() -> None:
    """collector.errors exports the error classes and their closed kinds, nothing else."""
    assert sorted(collector.errors.__all__) == sorted(
        [
            "CatalogError",
            "CatalogErrorKind",
            "ConfigError",
            "ConfigErrorKind",
            "ErrscopeError",
            "QueryError",
            "QueryErrorKind",
            "RecordError",
            "RecordErrorKind",
            "RulesError",
            "RulesErrorKind",
            "StoreError",
            "StoreErrorKind",
        ]
    )


def test_every_error_class_has_a_kind_enum() -> None:
    """Every ErrscopeError subclass declares its closed kind type; foreign kinds are refused."""
    classes = [
        getattr(collector.errors, n) for n in collector.errors.__all__ if n.endswith("Error")
    ]
    for cls in classes:
        if cls is collector.errors.ErrscopeError:
            continue
        assert issubclass(cls, collector.errors.ErrscopeError)
        assert cls.kind_type.__name__ == cls.__name__ + "Kind"


def test_all_names_exist() -> None:
    """Every name in each module's __all__ is defined."""
    for module in (collector.catalog, collector.errors, collector.record, collector.store):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_package_entry_points() -> None:
    """`collector.instrument` and `collector.ScrubbingSpanExporter` are the in-process entry points."""
    import collector
    from collector.export import ScrubbingSpanExporter, instrument

    assert sorted(collector.__all__) == ["ScrubbingSpanExporter", "__version__", "instrument"]
    assert collector.instrument is instrument
    assert collector.ScrubbingSpanExporter is ScrubbingSpanExporter
