"""The decision browser at /ui: filters, paging, escaping, the explain report per decision, the read token (bearer
or HTTP Basic password), and a real server's page rendered in headless Chromium."""
from __future__ import annotations

import base64
import re
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("fastapi", reason="the decision browser needs fastapi")
pytest.importorskip("jinja2", reason="the decision browser needs jinja2")

from fastapi.testclient import TestClient  # noqa: E402

from headless import CHROMIUM, SKIP_REASON, chromium, png_rows  # noqa: E402
from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402
from kentino_expert.service.ui import PAGE_SIZE  # noqa: E402

HOSTILE = "<script>alert('x')</script>"
WORKLOADS = [{"task": "inference", "model": "llama-3.1-70b"}, {"task": "qlora", "model": "llama-3.1-405b"},
             {"task": "full-finetune", "model": "llama-3.1-70b"}]
TOKEN = "ui-read-token"


def _record(log, expert, facts, session_id=None, turn=None) -> str:
    return log.record(facts, expert.recommend(facts), "http", session_id=session_id, turn=turn)


@pytest.fixture()
def log(tmp_path):
    with open_log(tmp_path / "decisions.db") as opened:
        yield opened


def _client(log, **tokens) -> TestClient:
    return TestClient(create_app(log=log, **tokens), base_url="http://localhost")


def _row_ids(html: str) -> list[str]:
    return re.findall(r'<tr data-decision="([0-9a-f]{32})">', html)


def _basic(password: str, user: str = "auditor") -> dict:
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_the_list_shows_every_decision_newest_first_each_opening_its_report(log, expert):
    """Each decision is a row linking to /ui/decisions/{id}, which is the explain report of that decision."""
    ids = [_record(log, expert, facts, "chat-1", turn) for turn, facts in enumerate(WORKLOADS)]
    with _client(log) as client:
        page = client.get("/ui")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert _row_ids(page.text) == ids[::-1]
        for decision_id in ids:
            assert f'href="/ui/decisions/{decision_id}"' in page.text
        report = client.get(f"/ui/decisions/{ids[0]}")
        assert report.status_code == 200 and ids[0] in report.text and 'id="kind">single-node<' in report.text
        missing = client.get("/ui/decisions/" + "0" * 32)
        assert missing.status_code == 404 and "No such decision" in missing.text


def test_filters_by_kind_since_and_session(log, expert):
    """kind, since and session narrow the list, and the form shows the filters given."""
    first = _record(log, expert, WORKLOADS[0], "chat-a")
    cut = log.get(first)["created_at"]
    later = [_record(log, expert, WORKLOADS[2], "chat-b"), _record(log, expert, WORKLOADS[1], "chat-a")]
    with _client(log) as client:
        assert _row_ids(client.get("/ui", params={"kind": "multi-node-ib"}).text) == [later[0]]
        assert _row_ids(client.get("/ui", params={"session": "chat-a"}).text) == [later[1], first]
        by_since = client.get("/ui", params={"since": cut, "session": "chat-b"}).text
        assert _row_ids(by_since) == [later[0]] and 'value="chat-b"' in by_since
        assert '<option value="multi-node-ib" selected>' in client.get("/ui", params={"kind": "multi-node-ib"}).text
        none = client.get("/ui", params={"session": "nobody"})
        assert none.status_code == 200 and _row_ids(none.text) == [] and "No decisions match" in none.text


@pytest.mark.parametrize("params, field", [({"since": "yesterday"}, "since"), ({"kind": "cluster"}, "kind"),
                                           ({"session": "a\tb"}, "session"), ({"cursor": "not-a-cursor"}, "cursor"),
                                           ({"session": "x" * 300}, "session")])
def test_a_wrong_filter_is_named_on_the_page(log, expert, params, field):
    """A filter the log cannot use is a 422 page naming it, with the form to correct it."""
    _record(log, expert, WORKLOADS[0])
    with _client(log) as client:
        page = client.get("/ui", params=params)
    assert page.status_code == 422 and f'role="alert"><strong>{field}</strong>' in page.text
    assert _row_ids(page.text) == [] and '<form class="filters"' in page.text


def test_paging_follows_the_logs_cursor_with_the_filters(log, expert):
    """More than a page: 'Older decisions' carries the cursor and the filters, and the pages cover every decision
    once."""
    ids = [_record(log, expert, WORKLOADS[0], "pager", n) for n in range(PAGE_SIZE + 3)]
    _record(log, expert, WORKLOADS[0], "other")
    seen, url = [], "/ui?session=pager"
    with _client(log) as client:
        while url:
            page = client.get(url).text
            seen += _row_ids(page)
            found = re.search(r'<a href="([^"]+)" rel="next"', page)
            url = found and found.group(1).replace("&amp;", "&")
            if url:
                assert parse_qs(urlsplit(url).query)["session"] == ["pager"]
    assert seen == ids[::-1]


def test_what_the_log_holds_is_shown_as_text(log, expert):
    """A hostile session id is escaped in the row and in the filter box; the pages load nothing from elsewhere and
    forbid scripts and framing."""
    _record(log, expert, WORKLOADS[0], HOSTILE)
    with _client(log) as client:
        page = client.get("/ui", params={"session": HOSTILE})
    assert _row_ids(page.text) and HOSTILE not in page.text and "&lt;script&gt;" in page.text
    assert "<script" not in page.text.lower() and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page.text)
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script" not in policy
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"


def test_with_a_token_the_browser_signs_in_with_basic(log, expert):
    """With a read token the pages answer 401 with a Basic challenge until the token is given as the password (any
    user) or as a bearer token; the API itself still takes only bearer tokens."""
    decision_id = _record(log, expert, WORKLOADS[0])
    with _client(log, read_token=TOKEN, admin_token="ui-admin-token") as client:
        refused = client.get("/ui")
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith('Basic realm=')
        assert refused.headers["content-type"].startswith("text/html") and "Sign in" in refused.text
        assert client.get("/ui", headers=_basic("wrong")).status_code == 401
        assert client.get(f"/ui/decisions/{decision_id}", headers=_basic("")).status_code == 401
        assert client.get("/ui", headers={"authorization": "Basic !!!"}).status_code == 401
        for headers in (_basic(TOKEN), _basic(TOKEN, user=""), _basic("ui-admin-token"),
                        {"authorization": f"Bearer {TOKEN}"}):
            assert _row_ids(client.get("/ui", headers=headers).text) == [decision_id]
        assert client.get(f"/ui/decisions/{decision_id}", headers=_basic(TOKEN)).status_code == 200
        assert client.get("/v1/decisions", headers=_basic(TOKEN)).status_code == 401


def test_a_log_that_cannot_be_read_is_a_page_saying_so(tmp_path, expert):
    """With the log closed under it, the list and a report are a 503 page, not a traceback or a JSON error."""
    log = open_log(tmp_path / "closing.db")
    decision_id = _record(log, expert, WORKLOADS[0])
    with _client(log) as client:
        log.close()
        for url in ("/ui", f"/ui/decisions/{decision_id}"):
            page = client.get(url)
            assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
            assert "cannot be read" in page.text


def test_a_page_of_an_unreadable_log_does_not_name_the_database(tmp_path, expert):
    """The 503 page says what the API says (the server's log has why), not the log's own words, which name the
    database (a PostgreSQL URL's user, host and name; here the file) as the API keeps to the server's log."""
    log = open_log(tmp_path / "hidden-name.db")
    decision_id = _record(log, expert, WORKLOADS[0])
    with _client(log) as client:
        log.close()  # its error: 'decision log .../hidden-name.db is closed'
        for url in ("/ui", f"/ui/decisions/{decision_id}"):
            page = client.get(url)
            assert page.status_code == 503 and "cannot be read now" in page.text and "hidden-name" not in page.text


def _badge_rows(path) -> int:
    """How many bands of rows hold the kind badge's colour (#f2b632): one per table row shown."""
    width, height, channels, rows = png_rows(path)
    bands, inside = 0, False
    for line in rows:
        hits = sum(1 for x in range(0, len(line), channels)
                   if abs(line[x] - 0xF2) < 12 and abs(line[x + 1] - 0xB6) < 12 and abs(line[x + 2] - 0x32) < 12)
        if hits >= 10 and not inside:
            bands += 1
        inside = hits >= 10
    return bands


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_the_page_renders_in_headless_chromium(tmp_path):
    """On a real server with a read token, Chromium signed in with Basic renders the table (one kind badge per
    decision) and its DOM has a row and a link per decision, the hostile session id as text; not signed in, no row."""
    httpx = pytest.importorskip("httpx", reason="the live test drives the server with httpx")
    from live_server import start_server, stop_server
    process, base = start_server(tmp_path, KENTINO_READ_TOKEN=TOKEN)
    try:
        ids = [httpx.post(f"{base}/v1/recommend", json={**facts, "session_id": HOSTILE, "turn": n})
               .json()["decision_id"] for n, facts in enumerate(WORKLOADS)]
        signed_in = base.replace("http://", f"http://auditor:{TOKEN}@") + "/ui"
        shot = tmp_path / "ui.png"
        chromium([f"--screenshot={shot}", "--window-size=1280,800", signed_in], tmp_path)
        dom = chromium(["--dump-dom", signed_in], tmp_path).stdout
        refused = chromium(["--dump-dom", f"{base}/ui"], tmp_path).stdout
    finally:
        stop_server(process)
    assert shot.exists() and shot.stat().st_size > 20_000, "screenshot missing or tiny"
    assert _badge_rows(shot) == len(WORKLOADS)
    assert _row_ids(dom) == ids[::-1]
    for decision_id in ids:
        assert f'href="/ui/decisions/{decision_id}"' in dom
    assert dom.count("&lt;script&gt;alert('x')&lt;/script&gt;") == len(WORKLOADS) and "<script" not in dom.lower()
    assert "<tr data-decision" not in refused  # headless, the Basic challenge is answered by nobody: no rows
