"""Implicit chaining: a KeyError while handling a config file that is missing under the home directory."""

import os
from pathlib import Path


def read_settings() -> dict[str, str]:
    path = Path.home() / "app" / "config" / "settings.toml"
    return {"raw": path.read_text()}


def resolve_model(job_id: str) -> str:
    try:
        settings = read_settings()
    except FileNotFoundError:
        settings = {}
        return settings["model"] + job_id


resolve_model("job-5521")
