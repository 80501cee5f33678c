"""The built site as a reader's browser shows it: headless Chromium (Debian's ``chromium`` package).

:func:`probe` serves a built site on loopback and opens each page in Chromium, inside a probe page of the
same origin that reads what the browser made of it (nothing is injected into the page itself):

* every table of the article is laid out (it has rows and a width on the screen), and fits the content column
  at 1280 px, or scrolls inside a box that does;
* every figure of the article decodes as an image (``HTMLImageElement.decode``, after asking a lazy image
  to load: a page scrolled by nobody would leave it unloaded);
* the language switch resolves: its ``href``, as the browser resolves it, answers 200 on the same server.

:func:`screenshot` writes a PNG of a page (``scripts/screenshot.py``). Both find the browser with
:func:`chromium`; a missing browser is one clear error that says how to install it.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ..core.errors import TutorialError
from ..engine.processes import kill_group, kill_with_parent

PROBE_PAGE = "__tut_probe__.html"
RESULT_PATH = "/__tut_probe_result__"
# what a probe run on this machine's closed network needs (Debian's chromium, as root): no sandbox (root), no
# GPU, and none of the background connections that a network with no route refuses
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio"]

_PROBE_JS = r"""
const PAGES = %s;
const RESULT = "%s";
const out = document.getElementById("result");
async function look(path) {
  const frame = document.createElement("iframe");
  frame.width = 1280; frame.height = 900;
  document.body.appendChild(frame);
  const loaded = new Promise(ok => frame.onload = ok);
  frame.src = path;
  await loaded;
  const doc = frame.contentDocument;
  const main = doc.querySelector("article") || doc.body;
  // a table fits the content column where it, or the box it scrolls in (overflow-x auto or scroll), ends
  // inside the article's right edge
  const right = main.getBoundingClientRect().right;
  const scroller = t => {
    for (let el = t.parentElement; el && el !== main; el = el.parentElement) {
      const o = frame.contentWindow.getComputedStyle(el).overflowX;
      if (o === "auto" || o === "scroll") return el;
    }
    return t;
  };
  const tables = [...main.querySelectorAll("table")].map(t => ({rows: t.rows.length, width: t.offsetWidth,
    fits: scroller(t).getBoundingClientRect().right <= right + 1}));
  const images = [];
  for (const img of main.querySelectorAll("img")) {
    img.loading = "eager";
    let ok = true, why = "";
    try { await img.decode(); } catch (e) { ok = false; why = String(e); }
    images.push({src: img.getAttribute("src"), ok: ok && img.naturalWidth > 0, width: img.naturalWidth, why});
  }
  const switches = [];
  for (const a of doc.querySelectorAll("a.tut-lang-switch")) {
    let status = 0;
    try { status = (await fetch(a.href, {method: "GET", cache: "no-store"})).status; } catch (e) { status = -1; }
    switches.push({href: a.getAttribute("href"), resolved: new URL(a.href).pathname, status,
                   text: a.textContent.trim()});
  }
  // the block every tutorial page opens with (where its numbers come from): its links on this site must answer
  const fresh = doc.querySelectorAll(".tut-freshness").length;
  const fresh_links = [];
  for (const a of doc.querySelectorAll(".tut-freshness a")) {
    const url = new URL(a.href);
    if (url.origin !== location.origin) { fresh_links.push({href: a.getAttribute("href"), status: 0, external: true}); continue; }
    let status = 0;
    try { status = (await fetch(a.href, {method: "GET", cache: "no-store"})).status; } catch (e) { status = -1; }
    fresh_links.push({href: a.getAttribute("href"), status, external: false});
  }
  const cards = doc.querySelectorAll(".tut-card").length;
  const report = {path, status: 200, lang: doc.documentElement.lang, title: doc.title, tables, images, switches,
                  fresh, fresh_links, cards};
  frame.remove();
  return report;
}
(async () => {
  const reports = [];
  for (const p of PAGES) {
    const head = await fetch(p, {cache: "no-store"});
    if (head.status !== 200) { reports.push({path: p, status: head.status}); continue; }
    try { reports.push(await look(p)); } catch (e) { reports.push({path: p, status: 200, error: String(e)}); }
  }
  out.textContent = JSON.stringify(reports);
  await fetch(RESULT, {method: "POST", body: out.textContent});
})();
"""


def chromium() -> str:
    """The browser's path: ``TUTORIAL_CHROMIUM``, else ``chromium`` (Debian) or ``chromium-browser`` on PATH."""
    named = os.environ.get("TUTORIAL_CHROMIUM")
    found = named if named and Path(named).is_file() else (shutil.which("chromium")
                                                            or shutil.which("chromium-browser"))
    if not found:
        raise TutorialError("no Chromium to open the site with: install Debian's package "
                            "(apt-get install chromium; make test does it where it may) or set TUTORIAL_CHROMIUM")
    return found


@dataclass
class PageView:
    """What the browser made of one page."""

    path: str
    status: int
    lang: str = ""
    title: str = ""
    tables: list[dict] | None = None
    images: list[dict] | None = None
    switches: list[dict] | None = None
    fresh: int = 0  # blocks "where these numbers come from" (one on every tutorial page)
    fresh_links: list[dict] | None = None  # their links, each site-local one fetched
    cards: int = 0  # the landing page's cards, one per model
    error: str = ""

    def problems(self) -> list[str]:
        """One line per thing a reader would see broken."""
        if self.status != 200:
            return [f"{self.path}: HTTP {self.status}"]
        if self.error:
            return [f"{self.path}: the probe failed: {self.error}"]
        out = [f"{self.path}: table {i + 1} is not laid out ({t['rows']} rows, {t['width']} px wide)"
               for i, t in enumerate(self.tables or []) if t["rows"] < 2 or t["width"] <= 0]
        out += [f"{self.path}: table {i + 1} overflows the content column ({t['width']} px wide, no box to scroll "
                "in) at 1280 px" for i, t in enumerate(self.tables or []) if not t.get("fits", True)]
        out += [f"{self.path}: figure {img['src']} does not render ({img['why'] or 'no pixels'})"
                for img in self.images or [] if not img["ok"]]
        if not self.switches:
            out.append(f"{self.path}: no language switch")
        out += [f"{self.path}: the link {a['href']} of 'where these numbers come from' answers {a['status']}"
                for a in self.fresh_links or [] if not a["external"] and a["status"] != 200]
        out += [f"{self.path}: the language switch {s['href']} -> {s['resolved']} answers {s['status']}"
                for s in self.switches or [] if s["status"] != 200]
        return out


class _Handler(http.server.SimpleHTTPRequestHandler):
    probe_html = b""
    results: list = []           # the probe's report, posted back (one per server)
    done: threading.Event = None

    def do_POST(self):  # noqa: N802 (the http.server API)
        if self.path != RESULT_PATH:
            self.send_error(404)
            return
        self.results.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        self.send_response(204)
        self.end_headers()
        self.done.set()

    def do_GET(self):  # noqa: N802 (the http.server API)
        if self.path.split("?")[0] == "/" + PROBE_PAGE:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(self.probe_html)))
            self.end_headers()
            self.wfile.write(self.probe_html)
            return
        super().do_GET()

    def log_message(self, *args):  # quiet: the report says what failed
        pass


@contextlib.contextmanager
def serve(root: str | Path, probe_html: bytes = b""):
    """The folder ``root`` over HTTP on 127.0.0.1 (a free port), in a thread; yields the base URL and the
    handler class (whose ``done`` is set when the probe page posts its ``results``)."""
    handler = type("Handler", (_Handler,), {"probe_html": probe_html, "results": [], "done": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def _chromium(*args: str):
    """Chromium with ``args`` and a throwaway profile, in its own process group (it dies with this process);
    yields the process and its stderr file; afterwards the whole group is killed at once (nothing to save)."""
    with tempfile.TemporaryDirectory(prefix="tut-chromium-") as profile, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], stdout=subprocess.DEVNULL,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=kill_with_parent)
        try:
            yield proc, err
        finally:
            # SIGKILL at once: the profile is thrown away. The helpers (zygote, GPU, network service) die with
            # the group; init reaps them, so grace=0 waits for Chromium itself only
            kill_group(proc, grace=0)


def _stderr(err) -> str:
    err.seek(0)
    lines = [line for line in err.read().splitlines() if "dbus" not in line.lower() and line.strip()]
    return " | ".join(lines[-4:])[-600:]


def probe(site: str | Path, pages: list[str], *, timeout: float = 120) -> list[PageView]:
    """Open each page (paths relative to the site's root, e.g. ``zh_CN/index.html``) in one Chromium and
    report what it shows.  The probe page posts its report back to the server; Chromium (its whole process
    group) is stopped then, or after ``timeout`` seconds with one clear error."""
    site = Path(site)
    paths = ["/" + quote(p.lstrip("/")) for p in pages]
    html = ("<!doctype html><meta charset='utf-8'><title>probe</title><pre id='result'></pre><script>"
            + _PROBE_JS % (json.dumps(paths), RESULT_PATH) + "</script>").encode()
    with serve(site, html) as (base, handler), _chromium(f"{base}/{PROBE_PAGE}") as (proc, err):
        deadline = time.monotonic() + timeout
        while not handler.done.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited with {proc.returncode}" if proc.returncode is not None
                       else f"did not report in {timeout:.0f} s")
                raise TutorialError(f"Chromium {why} without the probe's report: {_stderr(err)}")
    return [PageView(**{k: v for k, v in r.items() if k in PageView.__dataclass_fields__})
            for r in json.loads(handler.results[0])]


def screenshot(site: str | Path, page: str, out: str | Path, *, width: int = 1280, height: int = 2400,
               timeout: float = 120) -> Path:
    """A PNG of ``page`` (relative to the site's root) as Chromium draws it, ``width`` x ``height`` pixels."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not (Path(site) / page).is_file():
        raise TutorialError(f"no page {page} in {site} (build the site first: make html)")
    with serve(site) as (base, _), _chromium(f"--window-size={width},{height}", f"--screenshot={out}",
                                              f"{base}/{quote(page)}") as (proc, err):
        try:
            proc.wait(timeout=timeout)  # --screenshot: drawn after the page's load event (its images loaded)
        except subprocess.TimeoutExpired:
            raise TutorialError(f"Chromium drew no screenshot of {page} in {timeout:.0f} s") from None
        if not out.is_file() or out.stat().st_size == 0:
            raise TutorialError(f"Chromium wrote no screenshot of {page} (exit {proc.returncode}): {_stderr(err)}")
    return out
