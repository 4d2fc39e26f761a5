"""Fakes at the network boundary: local servers that speak the platforms' protocols."""

from __future__ import annotations


def write_platform_config(tmp_path, kb_files: dict[str, str], sections: str):
    """Write a config.toml for platform tests: ``kb_files`` as the knowledge base under
    ``tmp_path/kb``, data files under ``tmp_path/data``, keyword search only, then
    ``sections`` (TOML text: [web], [slack] or [discord], ...). Returns its path."""
    kb = tmp_path / "kb"
    kb.mkdir(exist_ok=True)
    for name, text in kb_files.items():
        (kb / name).write_text(text, encoding="utf-8")
    data = tmp_path / "data"
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[service]
data_dir = "{data}"
checkpoint_db = "{data}/checkpoints.sqlite"
bookkeeping_db = "{data}/bookkeeping.sqlite"
help_timeout_seconds = 600

[knowledge]
sources = ["{kb}"]
index_dir = "{data}/index"
embeddings = "none"
{sections}
""",
        encoding="utf-8",
    )
    return path
