"""Legacy encodings read right in every source type, through the real process: a Windows-1252
Markdown file and a UTF-16 one in a folder, a Latin-1 page served without any charset by a
local HTTP server, and a Windows-1252 file in a git repository."""

from __future__ import annotations

import json

from tests.fakes.bot_process import threadwise
from tests.test_sources import git, serve_site
from tests.test_sources_safety import files_config


def test_windows_1252_latin_1_and_utf_16_documents_read_right_from_files_web_and_git(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "kantine.md").write_bytes(b"# Kantine\n\nDie Kantine \xf6ffnet um 11:30 Uhr; das Men\xfc kostet 7 \x80.\n")
    (kb / "garage.md").write_bytes("# Garage\n\nDie Garage schließt um 22 Uhr für Fahrräder.\n".encode("utf-16"))
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "kiosk.md").write_bytes(b"# Kiosk\n\nLe kiosque du hall vend des cr\xeapes \xe0 la p\xe2te fra\xeeche.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    with serve_site() as site:
        latin1 = (
            b"<html><head><title>Caf\xe9</title></head><body><main><h1>Caf\xe9</h1><p>The caf\xe9 on "
            b"floor 3 serves cr\xe8me br\xfbl\xe9e every Friday at 15:00.</p></main></body></html>"
        )
        site.pages["/cafe.html"] = (200, {"Content-Type": "text/html"}, latin1)  # no charset anywhere
        sitemap = f"<urlset><url><loc>{site.base}/cafe.html</loc></url></urlset>".encode()
        site.pages["/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, sitemap)
        cfg = files_config(tmp_path, "kb")
        cfg.write_text(
            cfg.read_text()
            + f'\n[[sources]]\nname = "site"\ntype = "web"\nurl = "{site.base}/sitemap.xml"\n'
            + f'\n[[sources]]\nname = "repo"\ntype = "git"\nrepo = "{repo}"\nbranch = "main"\n'
        )
        synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "problem" not in synced.stdout, synced.stdout
    # questions in the documents' words: the offline keyword grader finds them only when the
    # accented words were decoded right ("öffnet", not "÷ffnet")
    for question, cited, text in [
        ("Die Kantine öffnet um 11:30 Uhr, das Menü kostet?", "kantine.md", "das Menü kostet 7 €."),
        ("Die Garage schließt um 22 Uhr für Fahrräder?", "garage.md", "Die Garage schließt um 22 Uhr für Fahrräder."),
        ("The café on floor 3 serves crème brûlée when?", f"{site.base}/cafe.html", "serves crème brûlée every"),
        ("Le kiosque du hall vend des crêpes à la pâte?", "kiosk.md", "des crêpes à la pâte fraîche"),
    ]:
        asked = threadwise("ask", "--json", question, "--config", str(cfg), cwd=tmp_path)
        assert asked.returncode == 0, asked.stderr[-2000:]
        answer = json.loads(asked.stdout)
        assert text in (answer["answer"] or "") and cited in answer["sources"][0], (question, answer)
