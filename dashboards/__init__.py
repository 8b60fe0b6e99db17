"""The Streamlit dashboard: pages, charts, and one data-access module."""
