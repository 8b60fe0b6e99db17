"""The dashboard's pages: layout only; data from dashboards.data, charts from dashboards.charts."""
