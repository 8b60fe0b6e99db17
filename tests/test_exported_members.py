"""The public surface is small and pinned: a change to it is a deliberate change to this test."""

from __future__ import annotations

import pytest

import errscope.collector.catalog
import errscope.collector.errors
import errscope.collector.record
import errscope.collector.store
import errscope.collector.store.batch
import errscope.collector.store.duckdb
import errscope.collector.store.lake
import errscope.collector.store.writer


def test_error_tree_exports() -> None:
    """errscope.collector.errors exports the error classes and their closed kinds, nothing else."""
    assert sorted(errscope.collector.errors.__all__) == sorted(
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
        getattr(errscope.collector.errors, n)
        for n in errscope.collector.errors.__all__
        if n.endswith("Error")
    ]
    for cls in classes:
        if cls is errscope.collector.errors.ErrscopeError:
            continue
        assert issubclass(cls, errscope.collector.errors.ErrscopeError)
        assert cls.kind_type.__name__ == cls.__name__ + "Kind"


def test_all_names_exist() -> None:
    """Every name in each module's __all__ is defined."""
    for module in (
        errscope.collector.catalog,
        errscope.collector.errors,
        errscope.collector.record,
        errscope.collector.store,
        errscope.collector.store.batch,
        errscope.collector.store.duckdb,
        errscope.collector.store.lake,
        errscope.collector.store.writer,
    ):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_store_exports() -> None:
    """errscope.collector.store exports the one Store protocol, its fault, prune report and opener."""
    assert sorted(errscope.collector.store.__all__) == [
        "PruneReport",
        "Store",
        "StoreFault",
        "open_store",
    ]


def test_package_entry_points() -> None:
    """`errscope.collector.instrument` and `collector.ScrubbingSpanExporter` are the in-process entry points."""
    import errscope.collector
    from errscope.collector.export import ScrubbingSpanExporter, instrument

    assert sorted(errscope.collector.__all__) == [
        "ScrubbingSpanExporter",
        "__version__",
        "instrument",
    ]
    assert errscope.collector.instrument is instrument
    assert errscope.collector.ScrubbingSpanExporter is ScrubbingSpanExporter


def test_the_import_root_exports_the_python_entry_points() -> None:
    """`import errscope` offers the in-process exporter and the tool author's kit, and nothing else."""
    import errscope
    import errscope.collector.toolkit
    from errscope import NotFound, PositiveInt, instrument, tool
    from errscope.collector.export import instrument as exporter_instrument

    assert instrument is exporter_instrument
    assert (tool, PositiveInt, NotFound) == (
        errscope.collector.toolkit.tool,
        errscope.collector.toolkit.PositiveInt,
        errscope.collector.toolkit.NotFound,
    )
    assert sorted(errscope.__all__) == sorted(
        ["__version__", "ScrubbingSpanExporter", "instrument", *errscope.collector.toolkit.__all__]
    )
    assert NotFound.__module__ == "errscope"
    with pytest.raises(AttributeError):
        _ = errscope.not_a_name  # type: ignore[attr-defined]


def test_cli_exports_only_main() -> None:
    """`errscope.collector.cli` exports the console script's `main` and nothing else."""
    import errscope.collector.cli
    from errscope.collector.cli.group import main

    assert errscope.collector.cli.__all__ == ["main"]
    assert errscope.collector.cli.main is main
