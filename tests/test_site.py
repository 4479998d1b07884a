"""The documentation site, opened in a real browser.

The site (mkdocs.yml, ``make docs``) is served over HTTP on 127.0.0.1 and opened in
headless Chromium: Debian's ``chromium`` package, which ``make test`` installs, driven
by Playwright's Python package through ``executable_path`` (nothing downloads a browser
build). The home page, a guide, the ``LlmCycle`` and ``tool`` reference entries and a
search for "approval" must render: their title, their code blocks, links from the guide
that land on the reference entry they name, search results, and no console error.
A screenshot of each page is saved under the test's temporary folder.

The site is the one ``make docs`` built into ``site/`` when it is newer than every
source it is built from; else the test builds it (``--strict``) into its temporary
folder.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# On these machines Chromium runs as root with no network: without the
# background-networking flags its own connections are refused many at a time.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SOURCES = ["mkdocs.yml", "README.md", "CHANGELOG.md", "docs", "agcore_tools", "scripts"]

if not (Path(CHROMIUM).exists() and shutil.which("chromium")):
    pytest.skip(
        "Debian's chromium is not installed: `make test` installs it", allow_module_level=True
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: `make test` installs it"
)
pytestmark = pytest.mark.timeout(120)


def _newest_source() -> float:
    newest = 0.0
    for name in SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else path.rglob("*")
        sources = (f for f in files if f.is_file() and "__pycache__" not in f.parts)
        newest = max([newest, *(f.stat().st_mtime for f in sources)])
    return newest


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = ROOT / "site"
    if (built / "index.html").exists() and (built / "index.html").stat().st_mtime > (
        _newest_source()
    ):
        return built
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert "WARNING" not in done.stderr, done.stderr[-5000:]
    return target


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = tmp_path_factory.mktemp("chromium-profile")  # new and empty
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=ARGS
        )
        try:
            yield context
        finally:
            context.close()


class Page:
    """A page of the browser, with the console errors it logs."""

    def __init__(self, context: Any) -> None:
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on(
            "console",
            lambda message: self.errors.append(message.text) if message.type == "error" else None,
        )
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, url: str) -> Any:
        response = self.page.goto(url, wait_until="load")
        assert response is not None and response.ok, url
        return self.page


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    opened = Page(browser)
    yield opened
    opened.page.close()
    assert opened.errors == []


def _rendered(page: Any, title: str, shot: Path, focus: Any = None) -> None:
    """The page has its title and code blocks, shows no raw Markdown, and is saved (with
    ``focus`` scrolled into view)."""
    assert title in page.title()
    assert page.locator("article h1").first.inner_text().strip()
    assert page.locator("article pre code").count() > 0
    prose = page.locator("article").evaluate(
        "a => { const c = a.cloneNode(true); c.querySelectorAll('pre').forEach(p => p.remove());"
        " document.body.appendChild(c); const t = c.innerText; c.remove(); return t; }"
    )
    assert not re.search(r"^\s*(```|#{1,3} |::: |--8<--)", prose, re.M), "raw Markdown"
    if focus is not None:
        focus.scroll_into_view_if_needed()
        page.wait_for_timeout(500)  # the header's title settles after a scroll
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one


def _has_anchor(url: str) -> bool:
    parts = urlsplit(url)
    with urllib.request.urlopen(url.split("#")[0], timeout=10) as answer:
        html = answer.read().decode("utf-8")
    return f'id="{parts.fragment}"' in html


def test_the_home_page_renders(page: Page, base_url: str, tmp_path: Path) -> None:
    opened = page.open(base_url)
    example = opened.locator("article pre code", has_text="LlmCycle(CycleConfig(")
    assert example.count() == 1
    _rendered(opened, "agcore_tools", tmp_path / "home.png", focus=example)
    assert opened.locator('a[href$="guides/getting-started/"]').count() > 0


def test_a_guide_renders_and_links_to_the_reference(
    page: Page, base_url: str, tmp_path: Path
) -> None:
    opened = page.open(urljoin(base_url, "guides/getting-started/"))
    _rendered(opened, "Getting started", tmp_path / "guide.png")
    links = opened.locator("article a.autorefs-internal")
    hrefs = [urljoin(opened.url, href) for href in links.evaluate_all("a => a.map(l => l.href)")]
    assert any(href.endswith("#agcore_tools.LlmCycle") for href in hrefs), hrefs
    assert all(_has_anchor(href) for href in hrefs), hrefs
    # Follow one in the browser: it lands on the entry.
    opened.locator('article a.autorefs-internal[href$="#agcore_tools.LlmCycle"]').first.click()
    opened.wait_for_url(re.compile(r"reference/agcore_tools/LlmCycle/#agcore_tools\.LlmCycle$"))
    assert opened.locator('[id="agcore_tools.LlmCycle"]').is_visible()


@pytest.mark.parametrize(
    ("name", "path"),
    [("LlmCycle", "reference/agcore_tools/LlmCycle/"), ("tool", "reference/agcore_tools/tool/")],
)
def test_a_reference_entry_renders_from_its_docstring(
    page: Page, base_url: str, tmp_path: Path, name: str, path: str
) -> None:
    opened = page.open(urljoin(base_url, path))
    _rendered(opened, name, tmp_path / f"reference-{name}.png")
    entry = opened.locator(f'[id="agcore_tools.{name}"]')
    assert entry.is_visible() and name in entry.inner_text()
    # The docstring's example is a highlighted doctest, not prose.
    assert opened.locator("article .doc pre code .gp").first.inner_text().strip() == ">>>"


def test_the_search_finds_approval(page: Page, base_url: str, tmp_path: Path) -> None:
    opened = page.open(urljoin(base_url, "?q=approval"))
    results = opened.locator(".md-search-result__item")
    results.first.wait_for(timeout=15_000)
    assert results.count() > 0
    assert "approval" in opened.locator(".md-search-result").inner_text().lower()
    opened.screenshot(path=str(tmp_path / "search.png"))
    assert (tmp_path / "search.png").stat().st_size > 10_000
