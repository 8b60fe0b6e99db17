"""The dashboard's pages: layout only; data from `data`, charts from `charts`."""
