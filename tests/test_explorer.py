"""The explorer page: served with the HTTP service, a pure client of /v1, stored text shown inert.

The end-to-end test drives Debian's chromium with Playwright against a real server on
loopback. Without chromium or Playwright it skips locally and FAILS under CI (CI=true),
so a CI run can never pass without having run it:

    apt-get install -y chromium && pip install playwright

MNEMO_SCREENSHOTS=docs/screenshots pytest tests/test_explorer.py  refreshes the screenshots
of the main views (otherwise they are written to the test's tmp_path and thrown away).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
from conftest import require_chromium

from mnemo.model import CATEGORIES, KINDS, STATUSES
from mnemo.server.http import EXPLORER, create_app, running
from mnemo.server.tenants import ServerConfig

KEY_A, KEY_B = "key-acme-0123456789abcdef", "key-globex-0123456789abcdef"
KEYS = {KEY_A: "acme", KEY_B: "globex"}
SCRIPT = ('<script>window.__mnemo_pwned = 1; alert("pwned")</script>'
          '<img src=x onerror="window.__mnemo_pwned = 2; alert(2)"><b>bold?</b>')
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# A 1x1 PNG: the experiments tests only need a file that is one.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944"
                    "4154789c63f8ffff3f0005fe02fe0def46b80000000049454e44ae426082")


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _app(**kwargs):
    return create_app(KEYS, ServerConfig(embedder="hash", quota_calls=10_000), **kwargs)


def _experiments(root: Path) -> Path:
    """Write a small experiments folder, plus what must never be served: files outside it, hidden, other kinds."""
    folder = root / "experiments"
    for k, (half_life, precision) in enumerate([(7, 0.91), (14, 0.95), (28, 0.88)]):
        point = folder / "runs" / "decay_grid" / f"p{k}"
        point.mkdir(parents=True)
        (point / "results.json").write_text(json.dumps({
            "param_half_life_days": half_life, "forgetting_precision": precision, "forgetting_recall": 0.8,
            "llm": "offline", "curve": [1, 0.5, 0.25], "figures": ["decay.png"], "nan": float("nan")}))
        (point / "decay.png").write_bytes(PNG)
        (point / "store.duckdb").write_text("not served")
    (folder / "plots").mkdir()
    (folder / "plots" / "summary.png").write_bytes(PNG)
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "results.json").write_text('{"secret": 1}')
    (folder / "broken").mkdir()
    (folder / "broken" / "results.json").write_text("{not json")
    (root / "secret.png").write_bytes(b"\x89PNG outside the folder")
    (root / "results.json").write_text('{"outside": true}')
    (folder / "escape.png").symlink_to(root / "secret.png")
    (folder / "runs" / "escape").symlink_to(root, target_is_directory=True)
    return folder


# ----------------------------------------------------------------- no browser needed
def test_the_page_is_served_with_a_strict_policy_and_needs_no_network():
    with running(_app()) as url:
        page = httpx.get(f"{url}/explorer", timeout=30)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "unsafe" not in csp
        for asset in re.findall(r'(?:src|href)="([^"#]+)"', page.text):
            res = httpx.get(f"{url}/{asset}", timeout=30)
            assert res.status_code == 200, asset
        # /explorer/ (a trailing slash) lands on the page too, where its relative asset paths resolve.
        assert httpx.get(f"{url}/explorer/", timeout=30, follow_redirects=True).url.path == "/explorer"
    for name in ("index.html", "app.js", "style.css"):
        text = (EXPLORER / name).read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), f"{name} fetches from the network"


def test_the_script_never_turns_data_into_markup():
    # Whole-line comments may name the sinks (to say they are not used); the code may not.
    code = re.sub(r"^\s*//.*$", "", (EXPLORER / "app.js").read_text(), flags=re.M)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "createContextualFragment", "srcdoc", "localStorage"):
        assert sink not in code, f"app.js uses {sink}"
    # The model's vocabularies are mirrored in the page's filters.
    for name, values in (("KINDS", KINDS), ("CATEGORIES", CATEGORIES), ("STATUSES", STATUSES)):
        found = re.search(rf"const {name} = (\[.*?\]);", code, re.S)
        assert found and json.loads(found.group(1)) == list(values), name


def test_the_list_carries_salience_and_the_story_carries_because_links():
    with running(_app()) as url, httpx.Client(base_url=url, headers=_auth(KEY_A), timeout=30) as a:
        a.post("/v1/remember", json={"text": "We use Postgres for the analytics store.", "user": "alice"})
        rep = a.post("/v1/remember", json={"text": "We switched from Postgres to DuckDB because the migration "
                                                   "failed.", "user": "alice"}).json()
        (change,) = rep["superseded"]
        listed = a.get("/v1/memories", params={"user": "alice", "include_inactive": True}).json()
        assert set(listed["salience"]) == {m["id"] for m in listed["memories"]}
        assert all(0.0 <= s <= 1.0 for s in listed["salience"].values()) and listed["salience_at"]
        story = a.get(f"/v1/memories/{change['new']['id']}/history").json()
        kinds = {(link["kind"], link["src"]) for link in story["links"]}
        assert ("supersedes", change["new"]["id"]) in kinds and ("because", change["new"]["id"]) in kinds


def test_experiments_are_listed_and_served_read_only_with_no_way_out(tmp_path):
    folder = _experiments(tmp_path)
    with running(_app(experiments=folder)) as url, httpx.Client(base_url=url, headers=_auth(KEY_A), timeout=30) as a:
        listing = a.get("/v1/experiments").json()
        runs = {r["path"]: r for r in listing["runs"]}
        assert set(runs) == {f"runs/decay_grid/p{k}/results.json" for k in range(3)} | {"broken/results.json"}
        p1 = runs["runs/decay_grid/p1/results.json"]
        assert p1["values"]["forgetting_precision"] == 0.95 and p1["values"]["nan"] is None
        assert p1["tables"] == ["curve"] and p1["figures"] == ["runs/decay_grid/p1/decay.png"]
        assert runs["broken/results.json"]["error"].startswith("unreadable")
        assert listing["figures"] == ["plots/summary.png"]
        served = a.get("/v1/experiments/file", params={"path": "runs/decay_grid/p1/decay.png"})
        assert served.status_code == 200 and served.content == PNG
        assert served.headers["content-type"] == "image/png" and served.headers["x-content-type-options"] == "nosniff"
        assert a.get("/v1/experiments/file", params={"path": "runs/decay_grid/p1/results.json"}).json()[
            "forgetting_recall"] == 0.8
        refused = ["../secret.png", "../results.json", "runs/../../secret.png", "/etc/passwd", str(tmp_path / "secret.png"),
                   "escape.png", "runs/escape/secret.png", "runs/escape/results.json", ".hidden/results.json",
                   "runs/decay_grid/p1/store.duckdb", "runs\\..\\..\\secret.png", "runs/decay_grid/p1/./decay.png",
                   "%2e%2e/secret.png", "runs//decay_grid/p1/decay.png", "runs/decay_grid/p9/decay.png", "runs"]
        for path in refused:
            res = a.get("/v1/experiments/file", params={"path": path})
            assert res.status_code == 404, (path, res.status_code)
            assert "outside" not in res.text and "PNG outside" not in res.text
        # Percent-encoded dots and slashes arrive decoded, and are refused the same way.
        for raw in ("..%2Fsecret.png", "%2E%2E%2Fsecret.png", "runs%2F..%2F..%2Fresults.json"):
            res = a.get(f"/v1/experiments/file?path={raw}")
            assert res.status_code == 404, raw
        assert a.get("/v1/experiments/file", params={"path": "a\x00b.png"}).status_code == 422
        # The key is checked first, on both routes; another tenant reads the same (server-wide) folder.
        for path, params in (("/v1/experiments", {}), ("/v1/experiments/file", {"path": "plots/summary.png"})):
            assert httpx.get(f"{url}{path}", params=params, timeout=30).status_code == 401
            assert httpx.get(f"{url}{path}", params=params, headers=_auth("x" * 24), timeout=30).status_code == 401
            assert httpx.get(f"{url}{path}", params=params, headers=_auth(KEY_B), timeout=30).status_code == 200
    with running(_app()) as url:
        res = httpx.get(f"{url}/v1/experiments", headers=_auth(KEY_A), timeout=30)
        assert res.status_code == 404 and "--experiments DIR" in res.json()["detail"]


# ----------------------------------------------------------------- the page in a real browser
def _seed(url: str) -> dict:
    """Write a small store through the API, as any client would; return the ids the test looks for."""
    ids = {}
    with httpx.Client(base_url=url, headers=_auth(KEY_A), timeout=30) as a:
        def remember(text: str, **kw) -> dict:
            res = a.post("/v1/remember", json={"text": text, "user": "alice", **kw})
            assert res.status_code == 200, res.text
            return res.json()

        def add(text: str, **kw) -> str:
            res = a.post("/v1/memories", json={"text": text, "user": "alice", **kw})
            assert res.status_code == 200, res.text
            return res.json()["id"]

        ids["postgres"] = remember("We use Postgres for the analytics store.", session="s1")["added"][0]["id"]
        remember("I live in Berlin.", session="s1")
        remember("My favourite colour is teal.", session="s1")
        remember("I prefer short answers with code examples.", session="s1")
        ids["script"] = add(SCRIPT)
        add("PO-1001 amount is 500 EUR", record_id="PO-1001", attribute="amount", value="500 EUR",
            source="structured", importance=0.7)
        add("The invoice says the PO-1001 total is 550 EUR", meta={"record": "PO-1001"}, attribute="amount",
            value="550 EUR", source="derived", importance=0.7)
        add("Ticket T-9 is blocked by PO-4411", references=["PO-4411"], category="event", kind="episodic")
        forgotten = add("The user's gym locker is number 42")
        assert a.post("/v1/forget", json={"memory_id": forgotten, "reason": "user asked"}).status_code == 200
        # The correction: the Postgres memory is superseded with a reason, and linked to its cause.
        (change,) = remember("We switched from Postgres to DuckDB because the migration failed.",
                             session="s2")["superseded"]
        assert change["old"]["id"] == ids["postgres"]
        ids["duckdb"], ids["reason"] = change["new"]["id"], change["reason"]
        ids["count"] = len(a.get("/v1/memories", params={"user": "alice", "include_inactive": True}).json()["memories"])
    with httpx.Client(base_url=url, headers=_auth(KEY_B), timeout=30) as b:
        assert b.post("/v1/memories", json={"text": "Globex launch code is 0000", "user": "alice"}).status_code == 200
    return ids


def test_the_explorer_in_a_real_browser(tmp_path):
    binary = require_chromium()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("MNEMO_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    with running(_app(experiments=_experiments(tmp_path))) as url, sync_playwright() as pw:
        ids = _seed(url)
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=binary, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1360, "height": 900})
        try:
            page = browser.new_page()
            dialogs, errors = [], []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error"
                    and not m.location.get("url", "").endswith("favicon.ico") else None)
            expect.set_options(timeout=15_000)

            page.goto(f"{url}/explorer")
            page.fill("#key", KEY_A)
            page.click("#key-form button")
            page.fill("#user", "alice")
            page.dispatch_event("#user", "change")

            # Memories: the stale one is superseded with its reason; the script is text, and never ran.
            stale = page.locator(f"#memory-table tr[data-id='{ids['postgres']}']")
            expect(stale.locator(".badge.superseded")).to_be_visible()
            expect(stale.locator(".tombstone")).to_contain_text(ids["reason"])
            expect(page.locator(f"#memory-table tr[data-id='{ids['duckdb']}'] .badge.active")).to_be_visible()
            script_row = page.locator(f"#memory-table tr[data-id='{ids['script']}'] .text")
            expect(script_row).to_have_text(SCRIPT)
            assert page.locator("main script, #memory-table img, #memory-table .text *").count() == 0
            expect(page.locator("#memory-table tr.status-forgotten")).to_contain_text("user asked")
            assert "Globex" not in page.content()
            page.screenshot(path=str(shots / "memories.png"), full_page=True)

            # Filters: status (client side), kind and category (the API's own filters).
            page.uncheck("input[name=status][value=active]")
            expect(page.locator("#memory-table tbody tr")).to_have_count(2)
            page.check("input[name=status][value=active]")
            page.select_option("select[name=category]", "failure")
            expect(page.locator("#memory-table tbody tr")).to_have_count(1)
            expect(page.locator("#memory-table tbody")).to_contain_text("The migration failed.")
            page.select_option("select[name=category]", "")
            expect(page.locator("#memory-table tbody tr")).to_have_count(ids["count"])

            # The story: history, the tombstone's reason and evidence, its successor, and the because link.
            stale.locator(".meta a.id").click()
            story = page.locator("#story")
            expect(story).to_contain_text("Tombstone: superseded")
            expect(story.locator(".reason")).to_contain_text(ids["reason"])
            expect(story.locator(".successor")).to_contain_text("switched from Postgres to DuckDB")
            expect(story.locator(".because")).to_contain_text("The migration failed.")
            expect(story).to_contain_text("target_sim")
            expect(story.locator(".badge.action")).to_have_text(["created", "superseded"])
            page.screenshot(path=str(shots / "story.png"), full_page=True)

            # Recall under a tight budget: confidence, citations, and the trace of what was left out and why.
            page.click("nav a[data-view=recall]")
            page.fill("#recall-form input[name=query]", "Why did we switch to DuckDB?")
            page.fill("#recall-form input[name=budget]", "40")
            page.click("#recall-form button")
            expect(page.locator("#recall .badge.confidence")).to_have_text(re.compile("^(certain|vague|unknown)$"))
            trace = page.locator("#trace tbody tr")
            expect(trace.first).to_be_visible()
            assert page.locator("#trace tr.included").count() >= 1 and page.locator("#trace tr.excluded").count() >= 1
            expect(page.locator("#trace tr.excluded").first.locator(".badge.reason")).not_to_have_text("packed")
            expect(page.locator("#recall")).to_contain_text("Citations")
            expect(page.locator("#recall")).to_contain_text("switched from Postgres to DuckDB")
            page.screenshot(path=str(shots / "recall.png"), full_page=True)
            page.check("#excluded-only")
            assert page.locator("#trace tr.included").count() == 0

            # The audit: a contradiction with its recommendation and rationale, and an absence.
            page.click("nav a[data-view=audit]")
            page.click("#audit-form button")
            audit = page.locator("#audit")
            expect(audit.locator(".recommendation")).to_contain_text('keep "500 EUR"')
            expect(audit.locator(".rationale")).to_contain_text("source structured outranks derived")
            expect(audit).to_contain_text("refers to record PO-4411, which no active memory stores")
            page.screenshot(path=str(shots / "audit.png"), full_page=True)

            # Experiments: the table of runs and their figures, fetched with the key.
            page.click("nav a[data-view=experiments]")
            expect(page.locator("#experiments")).to_contain_text("0.950")
            expect(page.locator("#experiments")).to_contain_text("forgetting_precision")
            images = page.locator("#experiments img")
            expect(images).to_have_count(4)
            for k in range(4):
                expect(images.nth(k)).to_have_attribute("src", re.compile("^blob:"))
                expect(images.nth(k)).to_have_js_property("complete", True)
            assert min(page.evaluate("[...document.querySelectorAll('#experiments img')].map(i => i.naturalWidth)")) > 0
            page.screenshot(path=str(tmp_path / "experiments.png"), full_page=True)  # fixture data: not for docs

            # The key lives in this tab's session only: a reload keeps it, closing the store forgets it.
            page.reload()
            expect(page.locator("#experiments")).to_contain_text("forgetting_precision")
            page.click("#sign-out")
            assert page.evaluate("sessionStorage.getItem('mnemo-explorer.key')") is None
            # Another tenant's key shows that tenant's store, and nothing of acme's.
            page.fill("#key", KEY_B)
            page.click("#key-form button")
            expect(page.locator("#memory-table tbody")).to_contain_text("Globex launch code")
            assert "Postgres" not in page.locator("#memory-table").inner_text()
            assert page.evaluate("window.__mnemo_pwned") is None
            assert dialogs == [] and errors == [], (dialogs, errors)

            # A wrong key is refused by the API (the browser logs the 401), and the page says so.
            page.click("#sign-out")
            page.fill("#key", "not-a-key-" + "x" * 20)
            page.click("#key-form button")
            expect(page.locator("#status")).to_contain_text("refused")
            assert page.evaluate("sessionStorage.getItem('mnemo-explorer.key')") is None
        finally:
            browser.close()
