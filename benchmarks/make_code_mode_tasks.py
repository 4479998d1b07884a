"""Write ``benchmarks/data/code_mode_tasks.json``, the task suite of ``bench_code_mode.py``.

Each task runs over servers of the interop sweep (``benchmarks/data/interop/``, tools
named ``server__tool``) and holds: the user's prompt; the direct run, as the turns of
JSON tool calls a good model makes (calls it would issue together share a turn); the
code-mode run, as the ``run_python`` programs it writes (a second program only where
the model must read a result before it can write the rest, e.g. a schema before SQL);
the final answer; facts the programs' output must show; and every tool answer the runs
need, keyed on the tool and its arguments.

The data is synthetic and seeded (nothing is fetched): small worlds (a shop database,
an analytics warehouse, a GitHub organisation, a project tree with logs, a git history,
a Notion workspace, workbooks, a memory graph, web pages, arXiv papers) answered in the
shape each real server answers: GitHub's API objects pretty-printed as the reference
server prints them, Notion's compact JSON, the filesystem, excel, memory, time and
duckduckgo servers' structured content, git's and fetch's text. One simplification:
the sqlite and duckdb servers print Python reprs of their rows; here they print JSON.
The direct turns are computed from the same answers a model would read; the programs
are checked against them by the benchmark, which asserts both runs make the same calls
and get the same answers. Run ``.venv/bin/python benchmarks/make_code_mode_tasks.py``.
"""

from __future__ import annotations

import hashlib
import json
import random
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "code_mode_tasks.json"
R = random.Random(27)
Call = Callable[[str, dict[str, Any]], Any]


def hexid(*parts: Any, n: int = 40) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:n]


def uuid(*parts: Any) -> str:
    h = hexid(*parts, n=32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def num(*parts: Any, lo: int = 10**8, hi: int = 3 * 10**9) -> int:
    return lo + int(hexid(*parts, n=12), 16) % (hi - lo)


def dedent(code: str) -> str:
    return textwrap.dedent(code).strip("\n") + "\n"


# -- SQL: the shop (sqlite) and the analytics warehouse (duckdb) ---------------------

SHOP = {  # table: (rows, [(column, type, notnull, pk)])
    "customers": (1842, [("id", "INTEGER", 1, 1), ("email", "TEXT", 1, 0), ("full_name", "TEXT", 1, 0), ("country", "TEXT", 0, 0), ("created_at", "TIMESTAMP", 1, 0), ("marketing_opt_in", "BOOLEAN", 1, 0)]),
    "orders": (12406, [("id", "INTEGER", 1, 1), ("customer_id", "INTEGER", 1, 0), ("status", "TEXT", 1, 0), ("placed_at", "TIMESTAMP", 1, 0), ("shipped_at", "TIMESTAMP", 0, 0), ("total_cents", "INTEGER", 1, 0), ("currency", "TEXT", 1, 0), ("coupon_id", "INTEGER", 0, 0)]),
    "order_items": (31877, [("id", "INTEGER", 1, 1), ("order_id", "INTEGER", 1, 0), ("product_id", "INTEGER", 1, 0), ("quantity", "INTEGER", 1, 0), ("unit_price_cents", "INTEGER", 1, 0), ("discount_cents", "INTEGER", 1, 0)]),
    "products": (412, [("id", "INTEGER", 1, 1), ("sku", "TEXT", 1, 0), ("name", "TEXT", 1, 0), ("category_id", "INTEGER", 1, 0), ("price_cents", "INTEGER", 1, 0), ("stock", "INTEGER", 1, 0), ("active", "BOOLEAN", 1, 0)]),
    "categories": (18, [("id", "INTEGER", 1, 1), ("name", "TEXT", 1, 0), ("parent_id", "INTEGER", 0, 0)]),
    "reviews": (5390, [("id", "INTEGER", 1, 1), ("product_id", "INTEGER", 1, 0), ("customer_id", "INTEGER", 1, 0), ("rating", "INTEGER", 1, 0), ("title", "TEXT", 0, 0), ("body", "TEXT", 0, 0), ("created_at", "TIMESTAMP", 1, 0)]),
    "payments": (12101, [("id", "INTEGER", 1, 1), ("order_id", "INTEGER", 1, 0), ("provider", "TEXT", 1, 0), ("amount_cents", "INTEGER", 1, 0), ("status", "TEXT", 1, 0), ("captured_at", "TIMESTAMP", 0, 0), ("failure_code", "TEXT", 0, 0)]),
    "shipments": (11958, [("id", "INTEGER", 1, 1), ("order_id", "INTEGER", 1, 0), ("carrier", "TEXT", 1, 0), ("tracking_number", "TEXT", 1, 0), ("shipped_at", "TIMESTAMP", 1, 0), ("delivered_at", "TIMESTAMP", 0, 0), ("warehouse", "TEXT", 1, 0)]),
    "coupons": (64, [("id", "INTEGER", 1, 1), ("code", "TEXT", 1, 0), ("percent_off", "INTEGER", 1, 0), ("valid_until", "DATE", 0, 0)]),
    "audit_log": (48213, [("id", "INTEGER", 1, 1), ("actor", "TEXT", 1, 0), ("action", "TEXT", 1, 0), ("entity", "TEXT", 1, 0), ("entity_id", "INTEGER", 0, 0), ("payload", "JSON", 0, 0), ("ip_address", "TEXT", 0, 0), ("created_at", "TIMESTAMP", 1, 0)]),
    "sessions": (20511, [("id", "TEXT", 1, 1), ("customer_id", "INTEGER", 0, 0), ("user_agent", "TEXT", 0, 0), ("started_at", "TIMESTAMP", 1, 0), ("last_seen_at", "TIMESTAMP", 1, 0), ("expires_at", "TIMESTAMP", 1, 0)]),
}  # fmt: skip
CATEGORIES = ["Audio", "Cameras", "Laptops", "Phones", "Wearables", "Gaming", "Smart home", "Accessories", "Networking", "Storage", "Monitors", "Printers", "Tablets", "Cables", "Software", "Gift cards", "Refurbished", "Outlet"]  # fmt: skip
WAREHOUSE = {  # duckdb: table: (rows, [(column, type, null share)])
    "events": (4_812_330, [("event_id", "UUID", 0), ("user_id", "VARCHAR", 0.002), ("session_id", "VARCHAR", 0.01), ("name", "VARCHAR", 0), ("ts", "TIMESTAMP", 0), ("page", "VARCHAR", 0.18), ("referrer", "VARCHAR", 0.46), ("device", "VARCHAR", 0.03)]),
    "users": (182_406, [("user_id", "VARCHAR", 0), ("signup_ts", "TIMESTAMP", 0), ("plan", "VARCHAR", 0), ("country", "VARCHAR", 0.07), ("company", "VARCHAR", 0.61), ("utm_source", "VARCHAR", 0.38)]),
    "subscriptions": (41_877, [("subscription_id", "VARCHAR", 0), ("user_id", "VARCHAR", 0), ("plan", "VARCHAR", 0), ("mrr_cents", "INTEGER", 0), ("started_at", "TIMESTAMP", 0), ("cancelled_at", "TIMESTAMP", 0.83), ("cancel_reason", "VARCHAR", 0.91)]),
    "invoices": (296_118, [("invoice_id", "VARCHAR", 0), ("subscription_id", "VARCHAR", 0), ("amount_cents", "INTEGER", 0), ("issued_at", "TIMESTAMP", 0), ("paid_at", "TIMESTAMP", 0.04), ("tax_cents", "INTEGER", 0.12)]),
    "feature_flags": (1_204, [("flag", "VARCHAR", 0), ("user_id", "VARCHAR", 0.22), ("enabled", "BOOLEAN", 0), ("updated_at", "TIMESTAMP", 0), ("owner", "VARCHAR", 0.09)]),
}  # fmt: skip


def rows_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows)


def sql_answer(query: str) -> str:
    """The shop's and the warehouse's answers, keyed on the exact query."""
    return ANSWERS.get(query, "[]")


ANSWERS: dict[str, str] = {}


def union_count(tables: list[str]) -> str:
    return " UNION ALL ".join(f"SELECT '{t}' AS name, COUNT(*) AS n FROM {t}" for t in tables)


def sqlite(tool: str, args: dict[str, Any]) -> Any:
    if tool == "list_tables":
        return rows_json([{"name": t} for t in SHOP])
    if tool == "describe_table":
        cols = SHOP[args["table_name"]][1]
        return rows_json([{"cid": i, "name": c, "type": t, "notnull": nn, "dflt_value": None, "pk": pk} for i, (c, t, nn, pk) in enumerate(cols)])  # fmt: skip
    if tool == "read_query":
        return sql_answer(args["query"])
    if tool == "append_insight":
        return "Insight added to memo"
    return "ok"


def duckdb(tool: str, args: dict[str, Any]) -> Any:
    return sql_answer(args["query"])


# -- GitHub: the acme organisation --------------------------------------------------

GH = "https://api.github.com"
PEOPLE = ["mira-k", "tobias-lund", "ana-ribeiro", "dkowalski", "samir-h", "lena-vogt", "jpark", "oconnell", "wei-zhang", "rbarros"]  # fmt: skip


def gh_user(login: str) -> dict[str, Any]:
    uid = num(login, lo=10**5, hi=9 * 10**7)
    u = f"{GH}/users/{login}"
    return {"login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}", "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4", "gravatar_id": "", "url": u, "html_url": f"https://github.com/{login}", "followers_url": f"{u}/followers", "following_url": f"{u}/following{{/other_user}}", "gists_url": f"{u}/gists{{/gist_id}}", "starred_url": f"{u}/starred{{/owner}}{{/repo}}", "subscriptions_url": f"{u}/subscriptions", "organizations_url": f"{u}/orgs", "repos_url": f"{u}/repos", "events_url": f"{u}/events{{/privacy}}", "received_events_url": f"{u}/received_events", "type": "User", "user_view_type": "public", "site_admin": False}  # fmt: skip


LABELS = {"bug": "d73a4a", "regression": "b60205", "customer-report": "fbca04", "auth": "0e8a16", "payments": "1d76db", "ui": "c5def5", "performance": "5319e7", "needs-triage": "ededed"}  # fmt: skip


def gh_label(repo: str, name: str) -> dict[str, Any]:
    lid = num(repo, name)
    return {"id": lid, "node_id": f"LA_kwDO{hexid(lid, n=10)}", "url": f"{GH}/repos/acme/{repo}/labels/{name}", "name": name, "color": LABELS[name], "default": name == "bug", "description": None}  # fmt: skip


def gh_issue(repo: str, n: int, title: str, body: str, labels: list[str], state: str = "open", comments: int = 0, assignee: str | None = None, author: str = "ana-ribeiro", day: int = 1, pr: bool = False) -> dict[str, Any]:  # fmt: skip
    base = f"{GH}/repos/acme/{repo}/issues/{n}"
    issue = {"url": base, "repository_url": f"{GH}/repos/acme/{repo}", "labels_url": f"{base}/labels{{/name}}", "comments_url": f"{base}/comments", "events_url": f"{base}/events", "html_url": f"https://github.com/acme/{repo}/{'pull' if pr else 'issues'}/{n}", "id": num(repo, n), "node_id": f"I_kwDO{hexid(repo, n, n=14)}", "number": n, "title": title, "user": gh_user(author), "labels": [gh_label(repo, x) for x in labels], "state": state, "locked": False, "assignee": gh_user(assignee) if assignee else None, "assignees": [gh_user(assignee)] if assignee else [], "milestone": None, "comments": comments, "created_at": f"2026-{10 + day // 28:02d}-{day % 28 + 1:02d}T09:{n % 60:02d}:12Z", "updated_at": f"2026-11-{(n * 7) % 27 + 1:02d}T16:{n % 60:02d}:40Z", "closed_at": None if state == "open" else "2026-09-30T12:00:00Z", "author_association": "MEMBER", "active_lock_reason": None, "body": body, "closed_by": None, "reactions": {"url": f"{base}/reactions", "total_count": n % 5, "+1": n % 5, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0}, "timeline_url": f"{base}/timeline", "performed_via_github_app": None, "state_reason": None if state == "open" else "completed"}  # fmt: skip
    if pr:
        issue["pull_request"] = {"url": f"{GH}/repos/acme/{repo}/pulls/{n}", "html_url": f"https://github.com/acme/{repo}/pull/{n}", "diff_url": f"https://github.com/acme/{repo}/pull/{n}.diff", "patch_url": f"https://github.com/acme/{repo}/pull/{n}.patch", "merged_at": None}  # fmt: skip
    return issue


def bug_body(component: str, symptom: str, extra: str = "") -> str:
    return (
        f"### What happened\n{symptom}\n\n### Steps to reproduce\n1. Sign in as a regular user\n"
        f"2. Open the {component} page\n3. {R.choice(['Refresh twice', 'Switch the workspace', 'Submit the form', 'Wait for the session to refresh'])}\n\n"
        f"### Expected\nThe {component} page loads normally.\n\n### Environment\n- webapp {R.choice(['3.1.2', '3.1.4', '3.2.0-rc.1'])}\n"
        f"- {R.choice(['Chrome 131', 'Firefox 133', 'Safari 18.1', 'Edge 131'])} on {R.choice(['macOS 15', 'Windows 11', 'Ubuntu 24.04'])}\n\n{extra}"
    ).rstrip() + "\n"


BUGS = [  # number, title, component, comments, assignee, labels
    (1432, "Login loop after session refresh on Safari", "login", 14, None, ["bug", "auth", "regression"]),
    (1438, "Checkout total ignores coupon when currency is EUR", "checkout", 7, "dkowalski", ["bug", "payments"]),
    (1441, "Export to CSV times out for workspaces over 10k rows", "reports", 3, None, ["bug", "performance"]),
    (1445, "Avatar upload fails silently for PNG over 2 MB", "profile", 2, "mira-k", ["bug", "ui"]),
    (1449, "Password reset email links expire immediately", "password reset", 9, None, ["bug", "auth"]),
    (1452, "Dashboard chart tooltips show UTC instead of local time", "dashboard", 1, "lena-vogt", ["bug", "ui"]),
    (1455, "Invoice PDF shows wrong VAT rate for Austrian customers", "billing", 6, "samir-h", ["bug", "payments"]),
    (1458, "Search returns archived projects", "search", 0, None, ["bug"]),
    (1460, "Webhook retries send duplicate order.created events", "webhooks", 11, "jpark", ["bug", "payments", "regression"]),
    (1463, "Dark mode: modal close button invisible", "settings", 2, None, ["bug", "ui"]),
    (1467, "Two-factor prompt shown twice after SSO login", "login", 5, "tobias-lund", ["bug", "auth"]),
    (1470, "Memory leak in live activity feed after 1h", "activity feed", 8, None, ["bug", "performance"]),
]  # fmt: skip
REPORTS = [(1475, 88123, "Order 88123 charged twice"), (1477, 90417, "Order 90417 stuck in processing"), (1480, 90102, "Order 90102 never arrived"), (1484, 91755, "Refund for order 91755 missing")]  # fmt: skip
ISSUES: dict[int, dict[str, Any]] = {}
for i, (n, title, comp, comments, assignee, labels) in enumerate(BUGS):
    symptom = f"{title}. It started after the last deploy and affects several customers in our support queue."
    ISSUES[n] = gh_issue("webapp", n, title, bug_body(comp, symptom), labels, comments=comments, assignee=assignee, author=PEOPLE[i % len(PEOPLE)], day=n % 40)  # fmt: skip
for n, order, title in REPORTS:
    body = f"Customer wrote to support about order #{order}: {title.lower()}.\n\nTicket: SUP-{order % 9973}\nPlease check the order's status in the shop database and reply here.\n"
    ISSUES[n] = gh_issue("webapp", n, title, body, ["customer-report"], comments=1, author="oconnell", day=n % 40)  # fmt: skip
SEARCHES: dict[str, list[int]] = {}  # search_issues: query -> issue numbers (tasks add them)
CLOSED = {  # similar closed issues: open issue -> [(number, title)]
    1432: [(1203, "Redirect loop on login when cookie is stale"), (1311, "Session refresh drops CSRF token on Safari")],
    1441: [(1187, "CSV export slow for large workspaces"), (1290, "Report export hits 30s gateway timeout")],
    1449: [(1150, "Reset link invalid after clicking in Outlook preview")],
    1458: [],
    1463: [(1244, "Dark mode: low contrast on dialog buttons")],
    1470: [(1330, "Activity feed keeps websocket listeners after navigation"), (1101, "Tab memory grows on dashboard")],
}  # fmt: skip
for found in CLOSED.values():
    for n, title in found:
        ISSUES[n] = gh_issue("webapp", n, title, bug_body("web", title + "."), ["bug"], state="closed", comments=n % 9, author=PEOPLE[n % 10], day=n % 30)  # fmt: skip


def gh_repo(name: str, language: str, desc: str) -> dict[str, Any]:
    u = f"{GH}/repos/acme/{name}"
    rid = num("repo", name)
    return {"id": rid, "node_id": f"R_kgDO{hexid(name, n=8)}", "name": name, "full_name": f"acme/{name}", "private": False, "owner": {**gh_user("acme"), "type": "Organization"}, "html_url": f"https://github.com/acme/{name}", "description": desc, "fork": False, "url": u, "forks_url": f"{u}/forks", "keys_url": f"{u}/keys{{/key_id}}", "collaborators_url": f"{u}/collaborators{{/collaborator}}", "teams_url": f"{u}/teams", "hooks_url": f"{u}/hooks", "issue_events_url": f"{u}/issues/events{{/number}}", "events_url": f"{u}/events", "branches_url": f"{u}/branches{{/branch}}", "tags_url": f"{u}/tags", "languages_url": f"{u}/languages", "commits_url": f"{u}/commits{{/sha}}", "pulls_url": f"{u}/pulls{{/number}}", "issues_url": f"{u}/issues{{/number}}", "created_at": "2021-03-04T10:22:01Z", "updated_at": "2026-11-29T08:11:45Z", "pushed_at": "2026-11-29T08:11:40Z", "git_url": f"git://github.com/acme/{name}.git", "ssh_url": f"git@github.com:acme/{name}.git", "clone_url": f"https://github.com/acme/{name}.git", "homepage": None, "size": num(name, lo=800, hi=90000), "stargazers_count": num(name, "s", lo=3, hi=900), "watchers_count": num(name, "s", lo=3, hi=900), "language": language, "has_issues": True, "has_projects": False, "has_wiki": False, "has_pages": False, "forks_count": num(name, "f", lo=0, hi=60), "archived": False, "disabled": False, "open_issues_count": num(name, "o", lo=0, hi=80), "license": {"key": "apache-2.0", "name": "Apache License 2.0", "spdx_id": "Apache-2.0"}, "topics": [language.lower(), "acme"], "visibility": "public", "forks": num(name, "f", lo=0, hi=60), "open_issues": num(name, "o", lo=0, hi=80), "watchers": num(name, "s", lo=3, hi=900), "default_branch": "main", "score": 1.0}  # fmt: skip


PY_REPOS = [("ingest-worker", "Queue consumers that load partner feeds"), ("billing-service", "Invoices, VAT and dunning"), ("ml-ranker", "Search ranking models and their training jobs"), ("infra-scripts", "Ops scripts for the platform team"), ("data-contracts", "Schemas shared by producers and the warehouse")]  # fmt: skip
COMMIT_MSGS = ["Fix flaky retry test on CI", "Bump pydantic to 2.10", "Add VAT rates for 2027", "Handle empty partner feeds", "Speed up feature extraction by caching tokenizers", "Rotate deploy keys", "Add contract for order.refunded", "Log queue lag per partner", "Drop Python 3.9 support", "Retry S3 uploads with jitter"]  # fmt: skip


def gh_commit(repo: str, i: int, author: str, date: str, message: str) -> dict[str, Any]:
    sha = hexid(repo, i)
    u = f"{GH}/repos/acme/{repo}"
    who = {"name": author.replace("-", " ").title(), "email": f"{author}@acme.dev", "date": date}
    return {"sha": sha, "node_id": f"C_kwDO{hexid(sha, n=20)}", "commit": {"author": who, "committer": {**who, "name": "GitHub", "email": "noreply@github.com"}, "message": message, "tree": {"sha": hexid(sha, "t"), "url": f"{u}/git/trees/{hexid(sha, 't')}"}, "url": f"{u}/git/commits/{sha}", "comment_count": 0, "verification": {"verified": True, "reason": "valid", "signature": None, "payload": None, "verified_at": date}}, "url": f"{u}/commits/{sha}", "html_url": f"https://github.com/acme/{repo}/commit/{sha}", "comments_url": f"{u}/commits/{sha}/comments", "author": gh_user(author), "committer": {**gh_user("web-flow"), "type": "User"}, "parents": [{"sha": hexid(repo, i + 1), "url": f"{u}/commits/{hexid(repo, i + 1)}", "html_url": f"https://github.com/acme/{repo}/commit/{hexid(repo, i + 1)}"}]}  # fmt: skip


PRS = [  # number, title, author, reviews, ci, files
    (1501, "Fix login loop on Safari session refresh (#1432)", "tobias-lund", ["APPROVED"], "success", ["src/auth/session.ts", "src/auth/refresh.ts", "tests/auth/session.test.ts"]),
    (1503, "Apply coupons before currency conversion", "dkowalski", ["CHANGES_REQUESTED", "COMMENTED"], "success", ["src/checkout/totals.ts", "tests/checkout/totals.test.ts"]),
    (1504, "Stream CSV exports", "wei-zhang", ["APPROVED", "APPROVED"], "failure", ["src/reports/export.ts", "src/reports/stream.ts"]),
    (1507, "Upgrade React to 19.1", "jpark", [], "pending", ["package.json", "package-lock.json", "src/index.tsx"]),
    (1509, "Dedupe webhook deliveries by event id", "jpark", ["APPROVED"], "success", ["src/webhooks/deliver.ts", "src/webhooks/store.ts", "migrations/0042_webhook_ids.sql"]),
    (1510, "Add Austrian VAT rates", "samir-h", ["COMMENTED"], "success", ["src/billing/vat.ts"]),
    (1512, "Refactor settings modal", "lena-vogt", ["APPROVED"], "success", ["src/settings/Modal.tsx", "src/settings/modal.css"]),
    (1515, "Show local time in chart tooltips", "lena-vogt", ["APPROVED", "CHANGES_REQUESTED"], "failure", ["src/dashboard/Chart.tsx"]),
]  # fmt: skip


def gh_pr(n: int, title: str, author: str) -> dict[str, Any]:
    issue = gh_issue("webapp", n, title, f"{title}.\n\n## Changes\n- see the diff\n\n## Testing\n- unit tests updated\n- checked manually on staging\n", [], author=author, day=n % 30, pr=True)  # fmt: skip
    repo = gh_repo("webapp", "TypeScript", "The Acme web application")
    u = f"{GH}/repos/acme/webapp/pulls/{n}"
    extra = {"url": u, "diff_url": f"https://github.com/acme/webapp/pull/{n}.diff", "patch_url": f"https://github.com/acme/webapp/pull/{n}.patch", "issue_url": f"{GH}/repos/acme/webapp/issues/{n}", "commits_url": f"{u}/commits", "review_comments_url": f"{u}/comments", "review_comment_url": f"{GH}/repos/acme/webapp/pulls/comments{{/number}}", "statuses_url": f"{GH}/repos/acme/webapp/statuses/{hexid(n)}", "merged_at": None, "merge_commit_sha": hexid(n, "m"), "requested_reviewers": [], "requested_teams": [], "draft": False, "head": {"label": f"{author}:pr-{n}", "ref": f"pr-{n}", "sha": hexid(n), "user": gh_user(author), "repo": repo}, "base": {"label": "acme:main", "ref": "main", "sha": hexid("main"), "user": {**gh_user("acme"), "type": "Organization"}, "repo": repo}, "auto_merge": None}  # fmt: skip
    return {**{k: v for k, v in issue.items() if k not in ("pull_request", "labels_url", "comments_url", "events_url", "repository_url", "timeline_url", "reactions", "performed_via_github_app", "state_reason", "closed_by")}, **extra}  # fmt: skip


def patch_for(path: str) -> str:
    return "@@ -12,7 +12,9 @@\n" + "".join(f" {R.choice(['const', 'let', 'return', 'if', 'await'])} line{i} of {path}\n" for i in range(3)) + f"-  old({path!r})\n+  next({path!r})\n+  // covered by tests\n"  # fmt: skip


def github(tool: str, args: dict[str, Any]) -> Any:
    dump = lambda value: json.dumps(value, indent=2)  # noqa: E731 -- as the reference server prints
    if tool == "list_issues":
        found = [i for i in ISSUES.values() if i["state"] == args.get("state", "open") and "pull_request" not in i and all(x in [lb["name"] for lb in i["labels"]] for x in args.get("labels", []))]  # fmt: skip
        return dump(sorted(found, key=lambda i: -i["number"])[: args.get("per_page", 30)])
    if tool == "get_issue":
        return dump(ISSUES[args["issue_number"]])
    if tool == "search_issues":
        items = [ISSUES[n] for n in SEARCHES.get(args["q"], [])]
        return dump({"total_count": len(items), "incomplete_results": False, "items": items})
    if tool == "list_pull_requests":
        return dump([gh_pr(n, t, a) for n, t, a, *_ in PRS])
    pr = next((p for p in PRS if p[0] == args.get("pull_number")), None)
    if tool == "get_pull_request_reviews" and pr:
        return dump([{"id": num(pr[0], i), "node_id": f"PRR_kwDO{hexid(pr[0], i, n=12)}", "user": gh_user(PEOPLE[(pr[0] + i) % 10]), "body": {"APPROVED": "LGTM, thanks!", "CHANGES_REQUESTED": "Please add a test for the EUR path and handle the null coupon.", "COMMENTED": "A few nits inline."}[s], "state": s, "html_url": f"https://github.com/acme/webapp/pull/{pr[0]}#pullrequestreview-{num(pr[0], i)}", "pull_request_url": f"{GH}/repos/acme/webapp/pulls/{pr[0]}", "author_association": "MEMBER", "submitted_at": f"2026-11-{20 + i:02d}T10:1{i}:00Z", "commit_id": hexid(pr[0])} for i, s in enumerate(pr[3])])  # fmt: skip
    if tool == "get_pull_request_status" and pr:
        checks = [("ci/build", "success"), ("ci/test", pr[4]), ("lint", "success")]
        return dump({"state": pr[4], "statuses": [{"url": f"{GH}/repos/acme/webapp/statuses/{hexid(pr[0])}", "avatar_url": "https://avatars.githubusercontent.com/oa/4808?v=4", "id": num(pr[0], c), "node_id": f"SC_kwDO{hexid(pr[0], c, n=12)}", "state": s, "description": {"success": "All checks passed", "failure": "2 tests failed", "pending": "Waiting for runner"}[s], "target_url": f"https://ci.acme.dev/webapp/pr-{pr[0]}/{c}", "context": c, "created_at": "2026-11-28T10:00:00Z", "updated_at": "2026-11-28T10:07:31Z"} for c, s in checks], "sha": hexid(pr[0]), "total_count": 3, "repository": {k: v for k, v in gh_repo("webapp", "TypeScript", "The Acme web application").items() if not k.endswith("_count")}, "commit_url": f"{GH}/repos/acme/webapp/commits/{hexid(pr[0])}", "url": f"{GH}/repos/acme/webapp/commits/{hexid(pr[0])}/status"})  # fmt: skip
    if tool == "get_pull_request_files" and pr:
        return dump([{"sha": hexid(pr[0], f), "filename": f, "status": "modified", "additions": num(f, lo=1, hi=80), "deletions": num(f, "d", lo=0, hi=40), "changes": 0, "blob_url": f"https://github.com/acme/webapp/blob/{hexid(pr[0])}/{f}", "raw_url": f"https://github.com/acme/webapp/raw/{hexid(pr[0])}/{f}", "contents_url": f"{GH}/repos/acme/webapp/contents/{f}?ref={hexid(pr[0])}", "patch": patch_for(f)} for f in pr[5]])  # fmt: skip
    if tool == "search_repositories":
        return dump({"total_count": len(PY_REPOS), "incomplete_results": False, "items": [gh_repo(n, "Python", d) for n, d in PY_REPOS]})  # fmt: skip
    if tool == "list_commits":
        i = [n for n, _ in PY_REPOS].index(args["repo"])
        return dump([gh_commit(args["repo"], k, PEOPLE[(i * 3 + k) % 10], f"2026-11-{28 - 5 * i - k:02d}T1{k}:2{i}:00Z", COMMIT_MSGS[(i * 2 + k) % 10]) for k in range(args.get("perPage", 30))])  # fmt: skip
    if tool == "add_issue_comment":
        n = args["issue_number"]
        return dump({"url": f"{GH}/repos/acme/webapp/issues/comments/{num(n, 'c')}", "html_url": f"https://github.com/acme/webapp/issues/{n}#issuecomment-{num(n, 'c')}", "issue_url": f"{GH}/repos/acme/webapp/issues/{n}", "id": num(n, "c"), "node_id": f"IC_kwDO{hexid(n, n=14)}", "user": gh_user("support-bot"), "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T09:00:00Z", "author_association": "MEMBER", "body": args["body"], "reactions": {"total_count": 0}, "performed_via_github_app": None})  # fmt: skip
    if tool == "get_file_contents":
        text = PACKAGE_JSON["remote"]
        return dump({"type": "file", "encoding": "base64", "size": len(text), "name": "package.json", "path": args["path"], "content": text, "sha": hexid(text), "url": f"{GH}/repos/acme/webapp/contents/package.json?ref=main", "git_url": f"{GH}/repos/acme/webapp/git/blobs/{hexid(text)}", "html_url": "https://github.com/acme/webapp/blob/main/package.json", "download_url": "https://raw.githubusercontent.com/acme/webapp/main/package.json", "_links": {"self": f"{GH}/repos/acme/webapp/contents/package.json?ref=main", "git": f"{GH}/repos/acme/webapp/git/blobs/{hexid(text)}", "html": "https://github.com/acme/webapp/blob/main/package.json"}})  # fmt: skip
    return "[]"


DEPS_REMOTE = {"@tanstack/react-query": "^5.62.0", "axios": "^1.7.9", "date-fns": "^4.1.0", "react": "^19.1.0", "react-dom": "^19.1.0", "react-router-dom": "^7.1.1", "zod": "^3.24.1", "zustand": "^5.0.2", "recharts": "^2.15.0", "i18next": "^24.2.0"}  # fmt: skip
DEPS_LOCAL = {
    **DEPS_REMOTE,
    "react": "^18.3.1",
    "react-dom": "^18.3.1",
    "axios": "^1.6.8",
    "moment": "^2.30.1",
}
del DEPS_LOCAL["date-fns"]
DEV = {"typescript": "^5.7.2", "vite": "^6.0.5", "vitest": "^2.1.8", "eslint": "^9.17.0", "@types/react": "^19.0.2", "prettier": "^3.4.2"}  # fmt: skip


def package_json(deps: dict[str, str]) -> str:
    return json.dumps({"name": "@acme/webapp", "version": "3.2.0", "private": True, "type": "module", "scripts": {"dev": "vite", "build": "tsc -b && vite build", "test": "vitest run", "lint": "eslint ."}, "dependencies": deps, "devDependencies": DEV, "engines": {"node": ">=20"}}, indent=2) + "\n"  # fmt: skip


PACKAGE_JSON = {"remote": package_json(DEPS_REMOTE), "local": package_json(DEPS_LOCAL)}
for _n, _title, _author, *_ in PRS:
    ISSUES[_n] = gh_issue("webapp", _n, _title, f"{_title}.\n\nFixes the bug described in the linked issue.\n", [], author=_author, day=_n % 30, pr=True)  # fmt: skip


# -- the file system: logs, sources, configs -----------------------------------------

LOGS = {"nginx-access.log": 9_113_804, "worker.log": 3_356_212, "api.log.1.gz": 2_511_430, "api.log": 1_987_004, "payments.log": 1_153_920, "auth.log": 655_360, "scheduler.log": 421_888, "nginx-error.log": 98_304, "cron.log": 12_288}  # fmt: skip
LOG_LINES = {
    "nginx-access.log": ("INFO", ['10.0.{a}.{b} - - [30/Nov/2026:14:{m:02d}:{s:02d} +0000] "GET /api/orders/{n} HTTP/1.1" 200 {sz} "-" "Mozilla/5.0"', '10.0.{a}.{b} - - [30/Nov/2026:14:{m:02d}:{s:02d} +0000] "POST /api/checkout HTTP/1.1" 201 {sz} "-" "okhttp/4.12.0"'], ['10.0.{a}.{b} - - [30/Nov/2026:14:{m:02d}:{s:02d} +0000] "POST /api/checkout HTTP/1.1" 502 157 "-" "okhttp/4.12.0" ERROR upstream timed out']),
    "worker.log": ("INFO", ["2026-11-30T14:{m:02d}:{s:02d}Z INFO  [queue=orders] processed job {n} in {ms}ms", "2026-11-30T14:{m:02d}:{s:02d}Z INFO  [queue=emails] sent receipt for order {n}"], ["2026-11-30T14:{m:02d}:{s:02d}Z ERROR [queue=orders] job {n} failed: ConnectionResetError: [Errno 104] Connection reset by peer (attempt 3/5)"]),
    "api.log": ("INFO", ["2026-11-30T14:{m:02d}:{s:02d}Z INFO  [http] GET /api/orders/{n} 200 {ms}ms req={h}", "2026-11-30T14:{m:02d}:{s:02d}Z DEBUG [db] pool size=20 in_use={a}"], ["2026-11-30T14:{m:02d}:{s:02d}Z ERROR [http] POST /api/checkout 500 {ms}ms req={h}: KeyError: 'currency'"]),
    "payments.log": ("INFO", ["2026-11-30T14:{m:02d}:{s:02d}Z INFO  [stripe] charge ch_{h} captured amount={sz} EUR order={n}", "2026-11-30T14:{m:02d}:{s:02d}Z INFO  [stripe] webhook payment_intent.succeeded order={n}"], ["2026-11-30T14:{m:02d}:{s:02d}Z ERROR [stripe] charge for order={n} declined: card_declined (insufficient_funds)", "2026-11-30T14:{m:02d}:{s:02d}Z ERROR [stripe] webhook signature mismatch, event evt_{h} rejected"]),
    "auth.log": ("INFO", ["2026-11-30T14:{m:02d}:{s:02d}Z INFO  [auth] login ok user={n} method=password", "2026-11-30T14:{m:02d}:{s:02d}Z INFO  [auth] token refreshed user={n}"], ["2026-11-30T14:{m:02d}:{s:02d}Z ERROR [auth] refresh failed user={n}: session {h} not found (redirecting to /login)"]),
}  # fmt: skip


def log_tail(name: str, lines: int) -> str:
    _, ok, bad = LOG_LINES[name]
    rng = random.Random(name)
    out = []
    for i in range(lines):
        pick = bad if rng.random() < 0.06 else ok
        out.append(rng.choice(pick).format(a=rng.randrange(255), b=rng.randrange(255), m=i * 60 // lines, s=rng.randrange(60), n=rng.randrange(80000, 95000), sz=rng.randrange(200, 9000), ms=rng.randrange(3, 900), h=hexid(name, i, n=12)))  # fmt: skip
    return "\n".join(out)


def size_text(size: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{size} B"


MODULES = ["orders/service.py", "orders/models.py", "orders/api.py", "billing/vat.py", "billing/invoices.py", "auth/session.py", "auth/tokens.py", "common/db.py", "common/retry.py", "common/settings.py", "webhooks/deliver.py", "reports/export.py"]  # fmt: skip
TODOS = {"orders/service.py": [(31, "# TODO: move the stock check into the repository"), (58, "# FIXME: race when two carts reserve the last item")], "billing/vat.py": [(12, "# TODO(samir): 2027 rates for AT and CH")], "auth/session.py": [(44, "# FIXME: refresh and logout can interleave (see #1432)"), (71, "# TODO: drop the legacy cookie after 3.3")], "common/retry.py": [(19, "# TODO: add jitter")], "webhooks/deliver.py": [(37, "# FIXME: dedupe by event id before retrying (#1460)")], "reports/export.py": [(25, "# TODO: stream rows instead of building the list")]}  # fmt: skip


def module_source(path: str) -> str:
    rng = random.Random(path)
    stem = path.split("/")[-1][:-3]
    lines = [f'"""{stem.title()} helpers for the {path.split("/")[0]} package."""', "", "from __future__ import annotations", "", "import logging", "from dataclasses import dataclass", "", "logger = logging.getLogger(__name__)", ""]  # fmt: skip
    verbs = ["load", "save", "check", "build", "apply", "resolve", "fetch", "render"]
    while len(lines) < 80:
        verb, noun = (
            rng.choice(verbs),
            rng.choice(["order", "invoice", "session", "token", "row", "rate", "event", "item"]),
        )
        lines += ["", f"def {verb}_{noun}(db, {noun}_id: int, *, strict: bool = False) -> dict:", f'    """{verb.title()} one {noun} by id."""', f"    row = db.fetch_one('SELECT * FROM {noun}s WHERE id = ?', ({noun}_id,))", "    if row is None:", f"        raise LookupError(f'{noun} {{{noun}_id}} not found')", f"    logger.debug('{verb} {noun} %s', {noun}_id)", "    return dict(row)"]  # fmt: skip
    for line_no, text in TODOS.get(path, []):
        lines.insert(line_no - 1, "    " + text)
    return "\n".join(lines) + "\n"


CONFIGS = {
    "base.yaml": "app:\n  name: acme-webapp\n  debug: false\n  log_level: info\ndatabase:\n  url: postgres://app@db.internal:5432/acme\n  pool_size: 20\ncache:\n  url: redis://cache.internal:6379/0\n",
    "development.yaml": "app:\n  debug: true\n  log_level: debug\n  reload: true\ndatabase:\n  url: postgres://dev:dev@localhost:5432/acme_dev\n  echo_sql: true\nmail:\n  backend: console\n",
    "test.yaml": "app:\n  debug: true\n  log_level: warning\ndatabase:\n  url: postgres://test:test@127.0.0.1:5433/acme_test\n  pool_size: 2\npayments:\n  provider: fake\n",
    "staging.yaml": "app:\n  debug: false\n  log_level: info\n  sentry_dsn: https://key@sentry.acme.dev/12\ndatabase:\n  url: postgres://app@staging-db.internal:5432/acme\nfeature_flags:\n  new_checkout: true\n",
    "production.yaml": "app:\n  debug: false\n  log_level: warning\n  sentry_dsn: https://key@sentry.acme.dev/11\ndatabase:\n  url: postgres://app@prod-db.internal:5432/acme\n  pool_size: 50\n  statement_timeout_ms: 5000\n",
    "worker.yaml": "app:\n  debug: true  # temporary, investigating job retries\n  log_level: debug\nqueues:\n  orders: {concurrency: 8, max_attempts: 5}\n  emails: {concurrency: 2, max_attempts: 3}\ndatabase:\n  url: postgres://worker@prod-db.internal:5432/acme\n",
    "logging.yaml": "version: 1\nformatters:\n  json: {class: pythonjsonlogger.jsonlogger.JsonFormatter}\nhandlers:\n  stdout: {class: logging.StreamHandler, formatter: json}\nroot: {level: INFO, handlers: [stdout]}\n",
    "feature-flags.yaml": "new_checkout: {default: false, staging: true}\nstreamed_exports: {default: false}\ndark_mode_v2: {default: true}\n",
}  # fmt: skip
SRC = "/work/project/src"


def filesystem(tool: str, args: dict[str, Any]) -> Any:
    path = args.get("path", "")
    if tool == "list_directory_with_sizes" and path == "/srv/app/logs":
        entries = sorted(LOGS.items(), key=lambda kv: -kv[1])
        text = (
            "\n".join(f"[FILE] {n:<30} {size_text(s):>10}" for n, s in entries) + "\n[DIR]  archive"
        )
        total = sum(LOGS.values())
        return {"content": f"{text}\n\nTotal: {len(LOGS)} files, 1 directories\nCombined size: {size_text(total)}"}  # fmt: skip
    if tool == "read_text_file" and path.startswith("/srv/app/logs/"):
        return {"content": log_tail(path.rsplit("/", 1)[1], int(args.get("tail", 100)))}
    if tool == "search_files" and path == SRC:
        return {"content": "\n".join(f"{SRC}/{m}" for m in MODULES)}
    if tool == "list_directory" and path == "/srv/app/config":
        return {"content": "\n".join(f"[FILE] {n}" for n in CONFIGS)}
    if tool == "read_multiple_files":
        parts = []
        for p in args["paths"]:
            text = CONFIGS.get(p.rsplit("/", 1)[1]) if p.startswith("/srv/app/config/") else module_source(p[len(SRC) + 1 :])  # fmt: skip
            parts.append(f"{p}:\n{text}\n")
        return {"content": "\n---\n".join(parts)}
    if tool == "read_text_file" and path.endswith("package.json"):
        return {"content": PACKAGE_JSON["local"]}
    return {"content": f"Error: ENOENT: no such file or directory, '{path}'"}


# -- git: a local clone of the web app -----------------------------------------------

GIT_LOG = [  # message, author, files
    ("Fix session refresh race on Safari", "Tobias Lund", ["src/auth/session.ts", "src/auth/refresh.ts", "tests/auth/session.test.ts"]),
    ("Add EUR coupon regression test", "Dorota Kowalski", ["tests/checkout/totals.test.ts"]),
    ("Apply coupon before currency conversion", "Dorota Kowalski", ["src/checkout/totals.ts", "src/checkout/currency.ts"]),
    ("Log session ids on refresh failures", "Tobias Lund", ["src/auth/session.ts", "src/logging.ts"]),
    ("Bump vite to 6.0.5", "Jae Park", ["package.json", "package-lock.json"]),
    ("Stream CSV export rows", "Wei Zhang", ["src/reports/export.ts", "src/reports/stream.ts", "src/checkout/totals.ts"]),
    ("Retry webhook deliveries with backoff", "Jae Park", ["src/webhooks/deliver.ts", "src/auth/session.ts"]),
    ("Fix tooltip timezone", "Lena Vogt", ["src/dashboard/Chart.tsx"]),
    ("Extract currency helpers", "Dorota Kowalski", ["src/checkout/currency.ts", "src/checkout/totals.ts"]),
    ("Harden cookie flags", "Tobias Lund", ["src/auth/session.ts", "src/auth/cookies.ts"]),
]  # fmt: skip
REPO = "/home/dev/webapp"


def git_actor(name: str) -> str:
    return f'<git.Actor "{name} <{name.split()[0].lower()}@acme.dev>">'


def git_hunk(path: str, k: int) -> str:
    rng = random.Random(f"{path}{k}")
    body = "".join(f" {rng.choice(['export function', 'const', 'if (', 'return', 'await'])} {path.split('/')[-1].split('.')[0]}_{i}\n" for i in range(6))  # fmt: skip
    return f"@@ -{10 + k},7 +{10 + k},9 @@\n{body}-  const ttl = {k + 1} * 60\n+  const ttl = {k + 2} * 60\n+  logger.debug('ttl', ttl)\n"  # fmt: skip


def git(tool: str, args: dict[str, Any]) -> Any:
    if tool == "git_log":
        out = [f"Commit: '{hexid(REPO, k)}'\nAuthor: {git_actor(a)}\nDate: 2026-11-{29 - k:02d} 1{k % 10}:04:11+01:00\nMessage: '{m}\\n'\n" for k, (m, a, _) in enumerate(GIT_LOG[: args.get("max_count", 10)])]  # fmt: skip
        return "Commit history:\n" + "\n".join(out)
    if tool == "git_show":
        k = [hexid(REPO, i) for i in range(len(GIT_LOG))].index(args["revision"])
        m, a, files = GIT_LOG[k]
        head = f"Commit: '{args['revision']}'\nAuthor: {git_actor(a)}\nDate: datetime.datetime(2026, 11, {29 - k}, 1{k % 10}, 4, 11)\nMessage: '{m}\\n'\n"  # fmt: skip
        return head + "".join(f"\n--- {f}\n+++ {f}\n{git_hunk(f, k)}" for f in files)
    if tool == "git_status":
        return "Repository status:\nOn branch webhook-dedupe\nChanges to be committed:\n  (use \"git restore --staged <file>...\" to unstage)\n\tmodified:   src/webhooks/deliver.ts\n\tnew file:   migrations/0042_webhook_ids.sql\n\nChanges not staged for commit:\n  (use \"git add <file>...\" to update what will be committed)\n\tmodified:   src/webhooks/store.ts\n\tmodified:   tests/webhooks/deliver.test.ts\n"  # fmt: skip
    if tool == "git_diff_staged":
        return "Staged changes:\ndiff --git a/src/webhooks/deliver.ts b/src/webhooks/deliver.ts\n--- a/src/webhooks/deliver.ts\n+++ b/src/webhooks/deliver.ts\n@@ -31,12 +31,20 @@ export async function deliver(event: WebhookEvent) {\n-  const attempt = await send(event)\n-  if (!attempt.ok) await queue.retry(event)\n+  if (await store.seen(event.id)) {\n+    logger.info('skipping duplicate delivery', { id: event.id })\n+    return\n+  }\n+  const attempt = await send(event)\n+  if (attempt.ok) {\n+    await store.markDelivered(event.id)\n+  } else {\n+    await queue.retry(event, { backoff: 'exponential' })\n+  }\ndiff --git a/migrations/0042_webhook_ids.sql b/migrations/0042_webhook_ids.sql\nnew file mode 100644\n--- /dev/null\n+++ b/migrations/0042_webhook_ids.sql\n@@ -0,0 +1,6 @@\n+CREATE TABLE webhook_deliveries (\n+  event_id TEXT PRIMARY KEY,\n+  delivered_at TIMESTAMP NOT NULL\n+);\n+CREATE INDEX webhook_deliveries_delivered_at ON webhook_deliveries (delivered_at);\n"  # fmt: skip
    if tool == "git_diff_unstaged":
        return "Unstaged changes:\ndiff --git a/src/webhooks/store.ts b/src/webhooks/store.ts\n--- a/src/webhooks/store.ts\n+++ b/src/webhooks/store.ts\n@@ -8,6 +8,18 @@ import { db } from '../db'\n+export async function seen(id: string): Promise<boolean> {\n+  console.log('checking', id)\n+  const row = await db.oneOrNone('SELECT 1 FROM webhook_deliveries WHERE event_id = $1', [id])\n+  return row !== null\n+}\n+\n+export async function markDelivered(id: string) {\n+  // TODO: remove before merge - ignore conflicts for now\n+  await db.none('INSERT INTO webhook_deliveries (event_id, delivered_at) VALUES ($1, now())', [id])\n+}\ndiff --git a/tests/webhooks/deliver.test.ts b/tests/webhooks/deliver.test.ts\n--- a/tests/webhooks/deliver.test.ts\n+++ b/tests/webhooks/deliver.test.ts\n@@ -40,3 +40,9 @@ describe('deliver', () => {\n+  it.skip('skips an event delivered before', async () => {\n+    await store.markDelivered('evt_1')\n+    await deliver(event('evt_1'))\n+    expect(send).not.toHaveBeenCalled()\n+  })\n"  # fmt: skip
    return "ok"


# -- Notion: a roadmap database and meeting notes ------------------------------------

N_USERS = {name: uuid("user", name) for name in ["Dana Whitfield", "Marco Bellini", "Yuki Sato", "Priya Raman", "Owen Clarke"]}  # fmt: skip
ROADMAP_DS, ROADMAP_DB = uuid("ds", "roadmap"), uuid("db", "roadmap")
ROADMAP = [  # name, owner, status, priority, due, estimate
    ("SSO for enterprise workspaces", "Dana Whitfield", "Not started", "P1", "2026-09-19", 13),
    ("Usage-based billing pilot", "Dana Whitfield", "Not started", "P2", "2026-09-26", 8),
    ("Audit log export API", "Dana Whitfield", "Not started", "P2", "2026-09-30", 5),
    ("Offline mode for mobile", "Marco Bellini", "Not started", "P3", "2026-09-30", 21),
    ("Accessibility audit fixes", "Yuki Sato", "Not started", "P1", "2026-08-29", 8),
    ("Migrate search to OpenSearch 3", "Owen Clarke", "Not started", "P2", "2026-09-12", 13),
    ("Partner webhooks v2", "Priya Raman", "Not started", "P2", "2026-09-05", 8),
]  # fmt: skip


def rich(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": {"content": text, "link": None}, "annotations": {"bold": False, "italic": False, "strikethrough": False, "underline": False, "code": False, "color": "default"}, "plain_text": text, "href": None}]  # fmt: skip


def n_user(name: str) -> dict[str, Any]:
    return {"object": "user", "id": N_USERS[name], "name": name, "avatar_url": None, "type": "person", "person": {"email": f"{name.split()[0].lower()}@acme.dev"}}  # fmt: skip


def n_meta(key: Any, edited: str) -> dict[str, Any]:
    who = {"object": "user", "id": N_USERS["Owen Clarke"]}
    return {"id": uuid(key), "created_time": "2026-06-02T09:14:00.000Z", "last_edited_time": edited, "created_by": who, "last_edited_by": who}  # fmt: skip


def roadmap_page(item: tuple[Any, ...]) -> dict[str, Any]:
    name, owner, status, prio, due, est = item
    return {"object": "page", **n_meta(("page", name), "2026-07-30T16:02:00.000Z"), "cover": None, "icon": None, "parent": {"type": "data_source_id", "data_source_id": ROADMAP_DS, "database_id": ROADMAP_DB}, "archived": False, "in_trash": False, "is_locked": False, "properties": {"Name": {"id": "title", "type": "title", "title": rich(name)}, "Owner": {"id": "%3BxW%5D", "type": "people", "people": [n_user(owner)]}, "Status": {"id": "s%7CgN", "type": "status", "status": {"id": hexid(status, n=8), "name": status, "color": "default"}}, "Priority": {"id": "Pr%3Dx", "type": "select", "select": {"id": hexid(prio, n=8), "name": prio, "color": {"P1": "red", "P2": "yellow", "P3": "gray"}[prio]}}, "Due": {"id": "D%5Eue", "type": "date", "date": {"start": due, "end": None, "time_zone": None}}, "Estimate": {"id": "E%3Fst", "type": "number", "number": est}}, "url": f"https://www.notion.so/{name.replace(' ', '-')}-{uuid(('page', name)).replace('-', '')}", "public_url": None}  # fmt: skip


SCOPES = {
    "SSO for enterprise workspaces": ("SAML 2.0 and OIDC sign-in for workspaces on the Enterprise plan, SCIM provisioning of users and groups, and enforced SSO per domain.", "Just-in-time provisioning for non-enterprise plans."),
    "Usage-based billing pilot": ("Metered billing for API calls on 20 pilot accounts: usage events, a daily aggregation job, invoice line items and a usage page in settings.", "Self-serve plan changes; tax changes for usage lines."),
    "Audit log export API": ("A paginated REST endpoint and a daily S3 export of the audit log, filtered by actor, action and date, for Enterprise admins.", "Real-time streaming to SIEM tools (next quarter)."),
}  # fmt: skip


def page_markdown(name: str) -> str:
    scope, out = SCOPES[name]
    return f"# {name}\n\n## Problem\nCustomers on larger plans keep asking for this; it blocks three deals in the pipeline.\n\n## Scope\n{scope}\n\n## Out of scope\n{out}\n\n## Milestones\n- [ ] Design review\n- [ ] Beta with two customers\n- [ ] GA announcement\n\n## Open questions\n- Who owns support runbooks?\n- Do we need a feature flag per workspace?\n"  # fmt: skip


MEETINGS = [("Platform sync", "2026-11-27"), ("Design review", "2026-11-26"), ("Billing standup", "2026-11-25"), ("Incident review", "2026-11-24"), ("Roadmap planning", "2026-11-23"), ("Platform sync", "2026-11-20"), ("Design review", "2026-11-13"), ("Billing standup", "2026-11-06")]  # fmt: skip
ACTIONS = {
    "Incident review": [("Owen add an alert on webhook retry rate", True), ("Jae backfill the duplicate order.created events", False), ("Priya write the customer-facing incident summary", False)],
    "Platform sync": [("Marco upgrade the staging cluster to Postgres 17", False), ("Yuki share the flaky-test list", True), ("Owen decide on the OpenSearch migration window", False)],
    "Design review": [("Lena send the new modal specs to engineering", False), ("Dana review the SSO settings mock-ups", False)],
    "Billing standup": [("Samir confirm Austrian VAT rates with finance", False), ("Dana pick the 20 pilot accounts for usage billing", True)],
    "Roadmap planning": [("Dana draft the Q1 themes", False), ("Owen estimate the search migration", True)],
}  # fmt: skip


def meeting_page(title: str, day: str) -> dict[str, Any]:
    full = f"Meeting notes: {title} {day}"
    return {"object": "page", **n_meta(("meeting", full), f"{day}T17:30:00.000Z"), "cover": None, "icon": {"type": "emoji", "emoji": "📝"}, "parent": {"type": "page_id", "page_id": uuid("meeting notes")}, "archived": False, "in_trash": False, "is_locked": False, "properties": {"title": {"id": "title", "type": "title", "title": rich(full)}}, "url": f"https://www.notion.so/{full.replace(' ', '-').replace(':', '')}-{uuid(('meeting', full)).replace('-', '')}", "public_url": None}  # fmt: skip


def block(page: str, k: int, kind: str, text: str, checked: bool | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"rich_text": rich(text), "color": "default"}
    if kind == "to_do":
        content["checked"] = checked
    if kind.startswith("heading"):
        content["is_toggleable"] = False
    return {"object": "block", **n_meta(("block", page, k), "2026-11-27T17:30:00.000Z"), "parent": {"type": "page_id", "page_id": page}, "has_children": False, "archived": False, "in_trash": False, "type": kind, kind: content}  # fmt: skip


def meeting_blocks(page_id: str) -> list[dict[str, Any]]:
    title, day = next(m for m in MEETINGS if uuid(("meeting", f"Meeting notes: {m[0]} {m[1]}")) == page_id)  # fmt: skip
    items: list[tuple[str, str, bool | None]] = [("heading_2", "Attendees", None), ("paragraph", "Dana, Marco, Owen, Priya, Yuki", None), ("heading_2", "Notes", None)]  # fmt: skip
    items += [("bulleted_list_item", f"{title}: {t}", None) for t in ("status of last week's items reviewed", "two risks raised about the December freeze", "metrics dashboard looks healthy apart from webhook retries", "next meeting moves to Thursday")]  # fmt: skip
    items += [("heading_2", "Action items", None)] + [("to_do", t, c) for t, c in ACTIONS[title]]
    items += [("paragraph", f"Notes taken by Owen on {day}.", None)]
    return [block(page_id, k, kind, text, checked) for k, (kind, text, checked) in enumerate(items)]


def notion(tool: str, args: dict[str, Any]) -> Any:
    dump = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731
    listing = {"object": "list", "next_cursor": None, "has_more": False}
    if tool == "API-post-search" and args.get("query") == "Q3 Roadmap":
        status = {"options": [{"id": hexid(s, n=8), "name": s, "color": c} for s, c in (("Not started", "default"), ("In progress", "blue"), ("Done", "green"))], "groups": [{"id": hexid(g, n=8), "name": g, "color": "gray", "option_ids": [hexid(g, n=8)]} for g in ("To-do", "In progress", "Complete")]}  # fmt: skip
        props = {"Name": {"id": "title", "name": "Name", "type": "title", "title": {}}, "Owner": {"id": "%3BxW%5D", "name": "Owner", "type": "people", "people": {}}, "Status": {"id": "s%7CgN", "name": "Status", "type": "status", "status": status}, "Priority": {"id": "Pr%3Dx", "name": "Priority", "type": "select", "select": {"options": [{"id": hexid(p, n=8), "name": p, "color": c} for p, c in (("P1", "red"), ("P2", "yellow"), ("P3", "gray"))]}}, "Due": {"id": "D%5Eue", "name": "Due", "type": "date", "date": {}}, "Estimate": {"id": "E%3Fst", "name": "Estimate", "type": "number", "number": {"format": "number"}}}  # fmt: skip
        source = {"object": "data_source", **n_meta("ds", "2026-07-30T16:02:00.000Z"), "id": ROADMAP_DS, "title": rich("Q3 Roadmap"), "description": rich("Everything we committed to for Q3, one page per item."), "icon": {"type": "emoji", "emoji": "🗺️"}, "cover": None, "properties": props, "parent": {"type": "database_id", "database_id": ROADMAP_DB}, "database_parent": {"type": "workspace", "workspace": True}, "url": f"https://www.notion.so/{ROADMAP_DB.replace('-', '')}", "public_url": None, "archived": False, "in_trash": False}  # fmt: skip
        return dump({**listing, "results": [source], "type": "page_or_data_source", "page_or_data_source": {}, "request_id": uuid("r1")})  # fmt: skip
    if tool == "API-query-data-source":
        return dump({**listing, "results": [roadmap_page(i) for i in ROADMAP], "type": "page_or_data_source", "page_or_data_source": {}, "request_id": uuid("r2")})  # fmt: skip
    if tool == "API-retrieve-page-markdown":
        name = next(i[0] for i in ROADMAP if uuid(("page", i[0])) == args["page_id"])
        return dump({"object": "page_markdown", "id": args["page_id"], "markdown": page_markdown(name), "truncated": False})  # fmt: skip
    if tool == "API-post-search" and args.get("query") == "Meeting notes":
        return dump({**listing, "results": [meeting_page(t, d) for t, d in MEETINGS], "type": "page_or_data_source", "page_or_data_source": {}, "request_id": uuid("r3")})  # fmt: skip
    if tool == "API-get-block-children":
        return dump({**listing, "results": meeting_blocks(args["block_id"]), "type": "block", "block": {}, "request_id": uuid("r4", args["block_id"])})  # fmt: skip
    return dump({"object": "error", "status": 404, "code": "object_not_found", "message": "Could not find the object."})  # fmt: skip


# -- Excel: quarterly sales and a folder of reports ----------------------------------

REGIONS = ["North", "South", "East", "West", "Central"]
PRODUCTS = [("Widget Pro", 49.9), ("Widget Mini", 19.9), ("Gadget X", 129.0), ("Gadget Air", 89.0), ("Service plan", 240.0)]  # fmt: skip


def sales_rows(quarter: int) -> list[list[Any]]:
    rng = random.Random(f"Q{quarter}")
    rows: list[list[Any]] = [["Date", "Region", "Product", "Units", "Unit price", "Revenue"]]
    for k in range(60):
        product, price = rng.choice(PRODUCTS)
        region = rng.choice(REGIONS[:4] + ["Central"] * (quarter == 3))
        units = rng.randrange(1, 40 + 10 * quarter)
        rows.append([f"2026-{3 * quarter - 2 + k // 20:02d}-{k % 20 + 1:02d}", region, product, units, price, round(units * price, 2)])  # fmt: skip
    return rows


REPORTS_DIR = {"/reports/budget_2027.xlsx": {"Summary": {"D14": "#REF!"}}, "/reports/headcount.xlsx": {}, "/reports/marketing_spend.xlsx": {"Q4": {"H7": "#DIV/0!", "H8": "#DIV/0!"}}, "/reports/pipeline.xlsx": {}, "/reports/cloud_costs.xlsx": {"By team": {"F22": "#REF!"}, "Forecast": {"C5": "#DIV/0!"}}, "/reports/okr_tracking.xlsx": {}}  # fmt: skip


def excel(tool: str, args: dict[str, Any]) -> Any:
    if tool == "describe_workbook":
        return {"path": args["path"], "sheets": [{"name": f"Q{q}", "index": q - 1, "state": "visible", "used_range": "A1:F61", "max_row": 61, "max_column": 6, "tables": [], "charts": [], "pivot_tables": [], "frozen_panes": "A2", "autofilter": "A1:F61"} for q in range(1, 5)], "defined_names": [], "calculation": {"mode": "auto", "iterative": False, "max_iterations": 100, "max_change": 0.001, "full_calc_on_load": False}, "properties": {"creator": "finance-bot", "modified": "2026-11-30T07:00:00"}}  # fmt: skip
    if tool == "read_range":
        return {"range": "A1:F61", "values": sales_rows(int(args["sheet"][1]))}
    if tool == "list_workbooks":
        return {p: num(p, lo=9000, hi=400000) for p in REPORTS_DIR}
    if tool == "find_cells":
        found = {s: {c: v for c, v in cells.items() if v == args["query"]} for s, cells in REPORTS_DIR[args["path"]].items()}  # fmt: skip
        return {"matches": {s: c for s, c in found.items() if c}, "truncated": False}
    return {"ok": True}


# -- memory, time, the web, arXiv ----------------------------------------------------

GRAPH = {
    "Project Falcon": ("project", ["Migration of the order pipeline to event sourcing", "Team: Alice Moreau (lead), Ben Ortiz, Chen Wei, Dara Singh", "Target: cut checkout latency by 40% by March 2027", "Weekly sync on Tuesdays"]),
    "Alice Moreau": ("person", ["Staff engineer, payments", "Prefers async written updates", "Based in Lyon", "Mentor of Chen Wei"]),
    "Ben Ortiz": ("person", ["Senior backend engineer", "On call for the order pipeline in December", "Allergic to peanuts (team dinners)"]),
    "Chen Wei": ("person", ["Engineer, joined June 2026", "Working on the event store schema", "Wants to move into SRE eventually"]),
    "Dara Singh": ("person", ["Product manager for checkout", "Owns the Falcon success metrics", "Out of office 22 Dec to 5 Jan"]),
    "Sam Lee": ("person", ["VP Engineering at Acme", "Reports to the CTO", "Runs the quarterly planning"]),
    "Acme": ("organization", ["Employer", "About 400 people", "HQ in Berlin"]),
}  # fmt: skip
RELATIONS = [("Alice Moreau", "Project Falcon", "leads"), ("Ben Ortiz", "Project Falcon", "works_on"), ("Chen Wei", "Project Falcon", "works_on"), ("Dara Singh", "Project Falcon", "works_on"), ("Alice Moreau", "Chen Wei", "mentors"), ("Ben Ortiz", "Alice Moreau", "reports_to"), ("Chen Wei", "Alice Moreau", "reports_to"), ("Alice Moreau", "Sam Lee", "reports_to"), ("Sam Lee", "Acme", "works_at")]  # fmt: skip


def memory(tool: str, args: dict[str, Any]) -> Any:
    def graph(names: list[str]) -> dict[str, Any]:
        entities = [{"type": "entity", "name": n, "entityType": GRAPH[n][0], "observations": GRAPH[n][1]} for n in names if n in GRAPH]  # fmt: skip
        relations = [{"type": "relation", "from": a, "to": b, "relationType": r} for a, b, r in RELATIONS if a in names and b in names]  # fmt: skip
        return {"entities": entities, "relations": relations}

    if tool == "search_nodes":
        q = args["query"].lower()
        return graph([n for n, (t, obs) in GRAPH.items() if q in n.lower() or q in t or any(q in o.lower() for o in obs)])  # fmt: skip
    if tool == "open_nodes":
        return graph(args["names"])
    if tool == "create_entities":
        return {"entities": args["entities"]}
    if tool == "create_relations":
        return {"relations": args["relations"]}
    if tool == "add_observations":
        return {"results": [{"entityName": o["entityName"], "addedObservations": o["contents"]} for o in args["observations"]]}  # fmt: skip
    return {"success": True, "message": "done"}


ZONES = {"America/New_York": (-5, "-6.0h"), "America/Sao_Paulo": (-3, "-4.0h"), "Asia/Kolkata": (5.5, "+4.5h"), "Asia/Tokyo": (9, "+8.0h"), "Europe/Berlin": (1, "+0.0h")}  # fmt: skip


def time_server(tool: str, args: dict[str, Any]) -> Any:
    if tool == "convert_time":
        hh, mm = map(int, args["time"].split(":"))
        offset, diff = ZONES[args["target_timezone"]]
        minutes = hh * 60 + mm + int((offset - 1) * 60)
        day, minutes = (4, minutes - 1440) if minutes >= 1440 else (3, minutes)
        sign = "+" if offset >= 0 else "-"
        tz = f"{sign}{int(abs(offset)):02d}:{int(abs(offset) % 1 * 60):02d}"
        return {"source": {"timezone": args["source_timezone"], "datetime": f"2026-12-03T{args['time']}:00+01:00", "day_of_week": "Thursday", "is_dst": False}, "target": {"timezone": args["target_timezone"], "datetime": f"2026-12-0{day}T{minutes // 60:02d}:{minutes % 60:02d}:00{tz}", "day_of_week": ["", "", "", "Thursday", "Friday"][day], "is_dst": False}, "time_difference": diff}  # fmt: skip
    return {"timezone": "Etc/UTC", "datetime": "2026-12-03T09:12:44+00:00", "day_of_week": "Thursday", "is_dst": False}  # fmt: skip


RELEASES = [("4.2.0", "2026-11-18", ["`COPY ... FROM` no longer accepts the `FORMAT csv_legacy` option; use `FORMAT csv`", "The default `wal_compression` is now `zstd`: replicas older than 4.0 cannot stream from a 4.2 primary"]), ("4.1.0", "2026-09-02", ["`quarry.connect()` requires an explicit `tls=` argument when the host is not local"]), ("4.0.0", "2026-06-10", ["Tables created before 3.0 must be rewritten with `ALTER TABLE ... REWRITE` before upgrading", "The `LIMIT ALL` syntax was removed", "Python client: `cursor.fetch_df()` returns a Polars frame; pass `pandas=True` for the old behaviour"]), ("3.9.2", "2026-04-21", [])]  # fmt: skip
DOCS = "https://docs.quarrydb.io"


def release_page(version: str, date: str, breaking: list[str]) -> str:
    rng = random.Random(version)
    fixes = "\n".join(f"* Fixed {rng.choice(['a crash', 'wrong results', 'a memory leak', 'slow planning'])} in {rng.choice(['hash joins', 'window functions', 'the parquet reader', 'vacuum', 'replication', 'JSON path queries'])} ({rng.randrange(8000, 9999)})" for _ in range(16))  # fmt: skip
    highlights = "\n".join(f"* {h}" for h in rng.sample(["Parallel index builds are up to 3x faster", "New `MERGE ... RETURNING` support", "Incremental materialized views (beta)", "Vector indexes on `FLOAT4[]` columns", "Per-query memory limits", "Async I/O on Linux with io_uring", "Row-level security for views"], 4))  # fmt: skip
    section = "\n".join(f"* {b}" for b in breaking) or "None."
    return f"Contents of {DOCS}/releases/{version}:\n# QuarryDB {version} release notes\n\nReleased {date}.\n\n## Highlights\n\n{highlights}\n\n## Breaking changes\n\n{section}\n\n## Deprecations\n\n* The `quarry_stat_legacy` view will be removed in 5.0.\n\n## Bug fixes\n\n{fixes}\n\n## Upgrading\n\nRead the [upgrade guide]({DOCS}/upgrade) and take a backup first.\n"  # fmt: skip


def fetch(tool: str, args: dict[str, Any]) -> Any:
    url = args["url"]
    if url == f"{DOCS}/releases":
        items = "\n".join(f"* [QuarryDB {v}]({DOCS}/releases/{v}) ({d})" for v, d, _ in RELEASES)
        older = "\n".join(f"* [QuarryDB 3.{m}.0]({DOCS}/releases/3.{m}.0)" for m in range(8, 0, -1))
        return f"Contents of {url}:\n# Release notes\n\nEvery QuarryDB release, newest first. See the [upgrade guide]({DOCS}/upgrade) before upgrading across a major version.\n\n## 4.x\n\n{items}\n\n## Older releases\n\n{older}\n\n[Subscribe to release announcements]({DOCS}/newsletter)\n"  # fmt: skip
    release = next((r for r in RELEASES if url.endswith(f"/{r[0]}")), None)
    return release_page(*release) if release else f"<error>Failed to fetch {url}: status 404</error>"  # fmt: skip


PG_RESULTS = [("PostgreSQL 18 Released!", "https://www.postgresql.org/about/news/postgresql-18-released-3142/", "The PostgreSQL Global Development Group today announced the release of PostgreSQL 18, the latest version of the world's most advanced open source database."), ("PostgreSQL: Release Notes 18", "https://www.postgresql.org/docs/release/18.0/", "Release date: 2025-09-25. This release contains a variety of fixes from 17.x and new features including asynchronous I/O."), ("PostgreSQL 18: what's new - a deep dive", "https://blog.example-dba.com/postgres-18-whats-new", "Async I/O, virtual generated columns, uuidv7 and OAuth authentication: our tour of the PostgreSQL 18 release."), ("PostgreSQL - endoflife.date", "https://endoflife.date/postgresql", "Check end-of-life, release policy and support schedule for PostgreSQL."), ("Postgres 18 release date rumours (forum)", "https://forum.example.net/t/postgres-18-date/991", "When is 18 coming out? Somebody said October.")]  # fmt: skip


def duckduckgo(tool: str, args: dict[str, Any]) -> Any:
    if tool == "search":
        text = "\n\n".join(
            f"{k}. {t}\n   URL: {u}\n   Summary: {s}" for k, (t, u, s) in enumerate(PG_RESULTS, 1)
        )
        return {"result": f"Found {len(PG_RESULTS)} search results:\n\n{text}\n"}
    title, url, summary = next(r for r in PG_RESULTS if r[1] == args["url"])
    rng = random.Random(url)
    filler = [f"{rng.choice(['Performance', 'Replication', 'Security', 'Developer experience', 'Monitoring'])}: PostgreSQL 18 {rng.choice(['improves', 'adds', 'reworks', 'extends'])} {rng.choice(['vacuum', 'logical replication', 'query planning', 'index scans', 'authentication', 'statistics'])} with {rng.choice(['lower overhead', 'new options', 'better defaults', 'parallel workers'])}." for _ in range(40)]  # fmt: skip
    dated = {"3142": "PostgreSQL 18 was released on September 25, 2025.", "18.0": "Release date: 2025-09-25.", "whats-new": "PostgreSQL 18 came out on 25 September 2025, one year after 17."}  # fmt: skip
    key = next((k for k in dated if k in url), None)
    body = filler[:20] + ([dated[key]] if key else []) + filler[20:]
    return {"result": f"{title}\n\n{summary}\n\n" + "\n".join(body)}


PAPERS = [("2211.17192", "Fast Inference from Transformers via Speculative Decoding", ["Yaniv Leviathan", "Matan Kalman", "Yossi Matias"], "2022-11-30"), ("2302.01318", "Accelerating Large Language Model Decoding with Speculative Sampling", ["Charlie Chen", "Sebastian Borgeaud", "Geoffrey Irving"], "2023-02-02"), ("2401.10774", "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads", ["Tianle Cai", "Yuhong Li", "Zhengyang Geng"], "2024-01-19"), ("2401.15077", "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty", ["Yuhui Li", "Fangyun Wei", "Chao Zhang"], "2024-01-26"), ("2305.09781", "SpecInfer: Accelerating Generative LLM Serving with Tree-based Speculative Inference", ["Xupeng Miao", "Gabriele Oliaro"], "2023-05-16"), ("2310.07177", "Online Speculative Decoding", ["Xiaoxuan Liu", "Lanxiang Hu"], "2023-10-11"), ("2402.02057", "Break the Sequential Dependency of LLM Inference Using Lookahead Decoding", ["Yichao Fu", "Peter Bailis"], "2024-02-03"), ("2404.16710", "LayerSkip: Enabling Early Exit Inference and Self-Speculative Decoding", ["Mostafa Elhoushi", "Akshat Shrivastava"], "2024-04-25")]  # fmt: skip


def arxiv(tool: str, args: dict[str, Any]) -> Any:
    if tool == "search_papers":
        papers = [{"id": i, "title": t, "authors": a, "published": d, "updated": d, "categories": ["cs.CL", "cs.LG"], "primary_category": "cs.CL", "abstract": f"We study {t.split(':')[0].lower()} for large language models. Autoregressive decoding is slow because every token needs a full forward pass; we show how a cheaper draft can propose several tokens that the target model verifies in parallel, giving 2-3x speedups without changing the output distribution…", "abstract_truncated": True, "pdf_url": f"https://arxiv.org/pdf/{i}", "abs_url": f"https://arxiv.org/abs/{i}"} for i, t, a, d in PAPERS[: args.get("max_results", 5)]]  # fmt: skip
        return json.dumps({"total_results": 412, "returned": len(papers), "has_more": True, "next_start": len(papers), "abstract_mode": "snippet", "papers": papers}, indent=2)  # fmt: skip
    if tool == "citation_graph":
        rng = random.Random(args["paper_id"])
        k = next(j for j, p in enumerate(PAPERS) if p[0] == args["paper_id"])
        cites = [{"paperId": hexid("s2", args["paper_id"], j), "title": f"{rng.choice(['Efficient', 'Scalable', 'Adaptive', 'Lossless', 'Parallel'])} {rng.choice(['draft models', 'tree verification', 'token trees', 'early exits', 'KV cache reuse'])} for {rng.choice(['LLM serving', 'speculative decoding', 'edge inference', 'long contexts'])}", "year": rng.choice([2024, 2025, 2026]), "citationCount": rng.randrange(0, 400), "externalIds": {"ArXiv": f"25{rng.randrange(1, 12):02d}.{rng.randrange(10000, 19999)}"}} for j in range(args.get("max_citations", 50))]  # fmt: skip
        refs = [{"paperId": hexid("ref", p[0]), "title": p[1], "year": int(p[3][:4]), "citationCount": 0, "externalIds": {"ArXiv": p[0]}} for p in PAPERS[:k]]  # fmt: skip
        return json.dumps({"paper_id": args["paper_id"], "title": PAPERS[k][1], "citation_count": 2400 - 500 * k + rng.randrange(100), "reference_count": 40 + k, "citations": cites, "references": refs, "source": "semantic_scholar", "status": "ok"}, indent=2)  # fmt: skip
    return "{}"


FAKES: dict[str, Callable[[str, dict[str, Any]], Any]] = {"sqlite": sqlite, "duckdb": duckdb, "github": github, "filesystem": filesystem, "git": git, "notion": notion, "excel": excel, "memory": memory, "time": time_server, "fetch": fetch, "duckduckgo": duckduckgo, "arxiv": arxiv}  # fmt: skip


# -- the tasks -----------------------------------------------------------------------


class Model:
    """The direct run being scripted: each call of it is one model turn of tool calls."""

    fakes = FAKES
    """The servers' synthetic answers, by server."""

    def __init__(self) -> None:
        self.turns: list[list[list[Any]]] = []
        self.responses: dict[str, list[Any]] = {}

    def __call__(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        self.turns.append([[tool, args] for tool, args in calls])
        return [self.answer(tool, args) for tool, args in calls]

    def answer(self, tool: str, args: dict[str, Any]) -> Any:
        server, name = tool.split("__", 1)
        output = self.fakes[server](name, args)
        self.responses[json.dumps([tool, args], sort_keys=True)] = [tool, args, output]
        return output


Task = tuple[str, list[str], str, Callable[[Model], dict[str, Any]]]


def tasks_into(tasks: list[Task]) -> Callable[[str, list[str], str], Callable[..., Any]]:
    """The ``@task(name, servers, prompt)`` decorator that adds a task to ``tasks``."""

    def task(name: str, servers: list[str], prompt: str) -> Callable[..., Any]:
        def register(build: Callable[[Model], dict[str, Any]]) -> Callable[[Model], dict[str, Any]]:
            tasks.append((name, servers, prompt, build))
            return build

        return register

    return task


TASKS: list[Task] = []
task = tasks_into(TASKS)


def columns_line(table: str, schema: str) -> str:
    return f"{table}: " + ", ".join(f"{c['name']} {c['type']}" for c in json.loads(schema))


@task("sqlite-largest-tables", ["sqlite"], "Which are the three largest tables in the shop database, and what columns do they have? Summarise each one briefly.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [listing] = turn(("sqlite__list_tables", {}))
    names = [r["name"] for r in json.loads(listing)]
    query = union_count(names)
    ANSWERS[query] = rows_json([{"name": t, "n": SHOP[t][0]} for t in names])
    [counts] = turn(("sqlite__read_query", {"query": query}))
    top = sorted(json.loads(counts), key=lambda r: -r["n"])[:3]
    turn(*[("sqlite__describe_table", {"table_name": r["name"]}) for r in top])
    code = """
    import asyncio, json
    tables = [row["name"] for row in json.loads(await sqlite__list_tables())]
    query = " UNION ALL ".join(f"SELECT '{t}' AS name, COUNT(*) AS n FROM {t}" for t in tables)
    counts = json.loads(await sqlite__read_query(query))
    top = sorted(counts, key=lambda r: r["n"], reverse=True)[:3]
    schemas = await asyncio.gather(*[sqlite__describe_table(r["name"]) for r in top])
    for row, schema in zip(top, schemas):
        columns = ", ".join(f"{c['name']} {c['type']}" + (" PK" if c["pk"] else "") for c in json.loads(schema))
        print(f"{row['name']} ({row['n']} rows): {columns}")
    """
    answer = "The three largest tables are audit_log (48,213 rows), order_items (31,877) and sessions (20,511).\n\n- **audit_log**: an activity trail: who (`actor`) did what (`action`) to which record (`entity`, `entity_id`), with a JSON `payload`, the IP address and a timestamp.\n- **order_items**: the lines of each order: `order_id`, `product_id`, `quantity`, and the unit price and discount in cents.\n- **sessions**: login sessions keyed by a text id: the customer (nullable, so anonymous sessions exist), the user agent, and start, last-seen and expiry times."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["audit_log (48213 rows)", "order_items (31877 rows)", "sessions (20511 rows)"]}  # fmt: skip


Q3 = "o.placed_at >= '2026-07-01' AND o.placed_at < '2026-10-01' AND o.status NOT IN ('cancelled', 'refunded')"
JOINS = "FROM order_items oi JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = oi.product_id JOIN categories c ON c.id = p.category_id"
REVENUE = "SUM(oi.quantity * oi.unit_price_cents - oi.discount_cents) / 100.0 AS revenue"


@task("sqlite-category-revenue", ["sqlite"], "Which product category brought in the most revenue in Q3 2026 (July to September), and what were its three best-selling products by revenue? Record the finding as a business insight.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    tables = ["orders", "order_items", "products", "categories"]
    schemas = turn(*[("sqlite__describe_table", {"table_name": t}) for t in tables])
    q1 = f"SELECT c.name AS category, {REVENUE} {JOINS} WHERE {Q3} GROUP BY c.name ORDER BY revenue DESC"
    rng = random.Random("q3")
    revenue = sorted(((c, round(rng.uniform(40_000, 260_000), 2)) for c in CATEGORIES), key=lambda x: -x[1])  # fmt: skip
    ANSWERS[q1] = rows_json([{"category": c, "revenue": r} for c, r in revenue])
    [by_category] = turn(("sqlite__read_query", {"query": q1}))
    best = json.loads(by_category)[0]
    q2 = f"SELECT p.name AS product, SUM(oi.quantity) AS units, {REVENUE} {JOINS} WHERE c.name = '{best['category']}' AND {Q3} GROUP BY p.name ORDER BY revenue DESC LIMIT 3"
    ANSWERS[q2] = rows_json([{"product": "Northbook 14 Pro", "units": 312, "revenue": 80_311.88}, {"product": "Northbook Air 13", "units": 401, "revenue": 71_977.99}, {"product": "Stratos 16 Creator", "units": 98, "revenue": 41_160.0}])  # fmt: skip
    [top] = turn(("sqlite__read_query", {"query": q2}))
    products = "; ".join(
        f"{p['product']} (${p['revenue']:,.2f}, {p['units']} units)" for p in json.loads(top)
    )
    insight = f"Q3 2026: {best['category']} led revenue with ${best['revenue']:,.2f}. Top products: {products}."
    turn(("sqlite__append_insight", {"insight": insight}))
    first = """
    import asyncio, json
    tables = ["orders", "order_items", "products", "categories"]
    schemas = await asyncio.gather(*[sqlite__describe_table(t) for t in tables])
    for table, schema in zip(tables, schemas):
        print(f"{table}: " + ", ".join(f"{c['name']} {c['type']}" for c in json.loads(schema)))
    """
    second = (
        """
    import json
    q3 = "<Q3>"
    joins = "<JOINS>"
    revenue = "<REVENUE>"
    by_category = json.loads(await sqlite__read_query(f"SELECT c.name AS category, {revenue} {joins} WHERE {q3} GROUP BY c.name ORDER BY revenue DESC"))
    best = by_category[0]
    top = json.loads(await sqlite__read_query(f"SELECT p.name AS product, SUM(oi.quantity) AS units, {revenue} {joins} WHERE c.name = '{best['category']}' AND {q3} GROUP BY p.name ORDER BY revenue DESC LIMIT 3"))
    products = "; ".join(f"{p['product']} (${p['revenue']:,.2f}, {p['units']} units)" for p in top)
    insight = f"Q3 2026: {best['category']} led revenue with ${best['revenue']:,.2f}. Top products: {products}."
    print("runner-up:", by_category[1]["category"], by_category[1]["revenue"])
    print(await sqlite__append_insight(insight))
    insight
    """.replace("<Q3>", Q3)
        .replace("<JOINS>", JOINS)
        .replace("<REVENUE>", REVENUE)
    )
    runner = json.loads(by_category)[1]
    answer = f"{insight}\n\nThe runner-up was {runner['category']} (${runner['revenue']:,.2f}). I recorded this as a business insight. Cancelled and refunded orders are excluded, and revenue is net of line discounts."
    assert all(schemas)
    return {"code": [first, second], "answer": answer, "expect": [best["category"], "Northbook 14 Pro", "Insight added to memo"]}  # fmt: skip


@task("duckdb-profile", ["duckdb"], "Profile the analytics warehouse in DuckDB: how many rows does each table have, and which columns are more than 10% NULL?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    q = "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ANSWERS[q] = rows_json([{"table_name": t, "column_name": c, "data_type": ty} for t in sorted(WAREHOUSE) for c, ty, _ in WAREHOUSE[t][1]])  # fmt: skip
    [cols] = turn(("duckdb__query", {"query": q}))
    tables: dict[str, list[str]] = {}
    for c in json.loads(cols):
        tables.setdefault(c["table_name"], []).append(c["column_name"])
    calls = []
    for t, names in tables.items():
        nulls = ", ".join(f'COUNT(*) - COUNT("{c}") AS "{c}"' for c in names)
        query = f"SELECT COUNT(*) AS row_count, {nulls} FROM {t}"
        rows = WAREHOUSE[t][0]
        ANSWERS[query] = rows_json([{"row_count": rows, **{c: round(share * rows) for c, _, share in WAREHOUSE[t][1]}}])  # fmt: skip
        calls.append(("duckdb__query", {"query": query}))
    turn(*calls)
    code = """
    import asyncio, json
    columns = json.loads(await duckdb__query("<Q>"))
    tables = {}
    for c in columns:
        tables.setdefault(c["table_name"], []).append(c["column_name"])

    async def profile(table, names):
        nulls = ", ".join(f'COUNT(*) - COUNT("{c}") AS "{c}"' for c in names)
        return json.loads(await duckdb__query(f"SELECT COUNT(*) AS row_count, {nulls} FROM {table}"))[0]

    profiles = await asyncio.gather(*[profile(t, names) for t, names in tables.items()])
    for table, row in zip(tables, profiles):
        n = row.pop("row_count")
        sparse = [f"{c} {v / n:.0%}" for c, v in row.items() if v / n > 0.10]
        print(f"{table}: {n:,} rows; over 10% NULL: {', '.join(sparse) or 'none'}")
    """.replace("<Q>", q)
    answer = "| table | rows | columns over 10% NULL |\n|---|---:|---|\n| events | 4,812,330 | page (18%), referrer (46%) |\n| feature_flags | 1,204 | user_id (22%) |\n| invoices | 296,118 | tax_cents (12%) |\n| subscriptions | 41,877 | cancelled_at (83%), cancel_reason (91%) |\n| users | 182,406 | company (61%), utm_source (38%) |\n\nMost of these are expected (a subscription that is still active has no cancellation date); `invoices.tax_cents` at 12% NULL looks worth checking."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["events: 4,812,330 rows", "cancel_reason 91%", "tax_cents 12%"]}  # fmt: skip


@task("github-triage-unassigned", ["github"], "Triage the open `bug` issues in acme/webapp: for each one that nobody is assigned to, search for similar closed issues so I can tell whether it is a regression.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    args = {"owner": "acme", "repo": "webapp", "state": "open", "labels": ["bug"]}
    [listing] = turn(("github__list_issues", args))
    loose = [i for i in json.loads(listing) if not i["assignees"]]
    queries = [f"repo:acme/webapp is:issue is:closed {i['title']}" for i in loose]
    for i, q in zip(loose, queries, strict=True):
        SEARCHES[q] = [n for n, _ in CLOSED[i["number"]]]
    turn(*[("github__search_issues", {"q": q}) for q in queries])
    code = """
    import asyncio, json
    issues = json.loads(await github__list_issues(owner="acme", repo="webapp", state="open", labels=["bug"]))
    loose = [i for i in issues if not i["assignees"]]
    found = await asyncio.gather(*[github__search_issues(q=f"repo:acme/webapp is:issue is:closed {i['title']}") for i in loose])
    for issue, text in zip(loose, found):
        print(f"#{issue['number']} {issue['title']} ({issue['comments']} comments, labels {[l['name'] for l in issue['labels']]})")
        for s in json.loads(text)["items"]:
            print(f"    similar closed: #{s['number']} {s['title']} (closed {s['closed_at'][:10]})")
    """
    lines = []
    for i in loose:
        similar = (
            ", ".join(f"#{n} {t}" for n, t in CLOSED[i["number"]]) or "no similar closed issue"
        )
        lines.append(f"- #{i['number']} {i['title']}: {similar}")
    answer = f"{len(loose)} open bugs have no assignee:\n" + "\n".join(lines) + "\n\nLikely regressions: #1432 (already labelled so, and #1203/#1311 fixed the same area), #1441 and #1470, whose earlier fixes look related. #1458 looks new."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["#1432 Login loop", "similar closed: #1311", "#1458 Search returns archived projects"]}  # fmt: skip


@task("github-ready-prs", ["github"], "Which open pull requests in acme/webapp are ready to merge, meaning at least one approval, no outstanding change requests, and green CI?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [listing] = turn(("github__list_pull_requests", {"owner": "acme", "repo": "webapp", "state": "open"}))  # fmt: skip
    numbers = [p["number"] for p in json.loads(listing)]
    turn(*[(f"github__get_pull_request_{k}", {"owner": "acme", "repo": "webapp", "pull_number": n}) for n in numbers for k in ("reviews", "status")])  # fmt: skip
    code = """
    import asyncio, json
    prs = json.loads(await github__list_pull_requests(owner="acme", repo="webapp", state="open"))

    async def check(pr):
        reviews, status = await asyncio.gather(
            github__get_pull_request_reviews(owner="acme", repo="webapp", pull_number=pr["number"]),
            github__get_pull_request_status(owner="acme", repo="webapp", pull_number=pr["number"]),
        )
        states = [r["state"] for r in json.loads(reviews)]
        ci = json.loads(status)["state"]
        ready = "APPROVED" in states and "CHANGES_REQUESTED" not in states and ci == "success"
        return f"#{pr['number']} {pr['title']} ({pr['user']['login']}): reviews {states or 'none'}, CI {ci}" + (" -> READY" if ready else "")

    for line in await asyncio.gather(*[check(p) for p in prs]):
        print(line)
    """
    answer = "Three PRs are ready to merge:\n- #1501 Fix login loop on Safari session refresh (#1432), tobias-lund: approved, CI green\n- #1509 Dedupe webhook deliveries by event id, jpark: approved, CI green\n- #1512 Refactor settings modal, lena-vogt: approved, CI green\n\nNot ready: #1503 (changes requested), #1504 (approved but CI failing), #1507 (no reviews, CI pending), #1510 (only comments), #1515 (changes requested and CI failing)."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["#1501 Fix login loop", "CI success -> READY", "#1504 Stream CSV exports (wei-zhang): reviews ['APPROVED', 'APPROVED'], CI failure"]}  # fmt: skip


@task("github-python-repos", ["github"], "For each of acme's Python repositories on GitHub, when was the last commit, who made it, and what was it?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [found] = turn(("github__search_repositories", {"query": "org:acme language:python"}))
    repos = [r["name"] for r in json.loads(found)["items"]]
    commits = turn(*[("github__list_commits", {"owner": "acme", "repo": r, "perPage": 1}) for r in repos])  # fmt: skip
    code = """
    import asyncio, json
    repos = json.loads(await github__search_repositories(query="org:acme language:python"))["items"]
    latest = await asyncio.gather(*[github__list_commits(owner="acme", repo=r["name"], perPage=1) for r in repos])
    for repo, text in zip(repos, latest):
        c = json.loads(text)[0]
        print(f"{repo['name']}: {c['commit']['author']['date']} by {c['author']['login']}: {c['commit']['message'].splitlines()[0]}")
    """
    rows = [(r, json.loads(c)[0]) for r, c in zip(repos, commits, strict=True)]
    answer = "Latest commit per Python repository:\n" + "\n".join(f"- {r}: {c['commit']['author']['date'][:10]}, {c['author']['login']}: \"{c['commit']['message']}\"" for r, c in rows) + "\n\ningest-worker is the most recently active; data-contracts has had no commit for about three weeks."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": [f"ingest-worker: {rows[0][1]['commit']['author']['date']}", "data-contracts"]}  # fmt: skip


@task("github-sqlite-customer-reports", ["github", "sqlite"], "Issues labelled `customer-report` in acme/webapp each mention an order number. Look up each order's status in the shop database (the `orders` table) and reply on each issue with what you found.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    import re

    args = {"owner": "acme", "repo": "webapp", "state": "open", "labels": ["customer-report"]}
    listing, _ = turn(("github__list_issues", args), ("sqlite__describe_table", {"table_name": "orders"}))  # fmt: skip
    orders = {i["number"]: int(re.search(r"#(\d+)", i["body"])[1]) for i in json.loads(listing)}
    ids = ", ".join(str(o) for o in orders.values())
    q = f"SELECT id, status, placed_at, shipped_at, total_cents, currency FROM orders WHERE id IN ({ids})"
    state = {88123: ("delivered", "2026-11-12T10:31:00", "2026-11-13T08:02:00", 18990), 90417: ("processing", "2026-11-26T19:05:00", None, 4590), 90102: ("shipped", "2026-11-24T09:44:00", "2026-11-25T07:30:00", 12900), 91755: ("cancelled", "2026-11-28T21:12:00", None, 32900)}  # fmt: skip
    ANSWERS[q] = rows_json([{"id": o, "status": s, "placed_at": p, "shipped_at": sh, "total_cents": t, "currency": "EUR"} for o in orders.values() for s, p, sh, t in [state[o]]])  # fmt: skip
    [rows] = turn(("sqlite__read_query", {"query": q}))

    def body(r: dict[str, Any]) -> str:
        shipped = f"shipped {r['shipped_at'][:10]}" if r["shipped_at"] else "not shipped"
        return f"Order {r['id']}: status **{r['status']}**, placed {r['placed_at'][:10]}, {shipped}, total {r['total_cents'] / 100:.2f} {r['currency']}. (Looked up in the shop database.)"  # fmt: skip

    by_id = {r["id"]: r for r in json.loads(rows)}
    turn(*[("github__add_issue_comment", {"owner": "acme", "repo": "webapp", "issue_number": n, "body": body(by_id[o])}) for n, o in orders.items()])  # fmt: skip
    first = """
    import asyncio, json, re
    issues, schema = await asyncio.gather(
        github__list_issues(owner="acme", repo="webapp", state="open", labels=["customer-report"]),
        sqlite__describe_table(table_name="orders"),
    )
    for i in json.loads(issues):
        print(f"#{i['number']} {i['title']}: order {re.search(r'#(\\d+)', i['body'])[1]}")
    print("orders: " + ", ".join(f"{c['name']} {c['type']}" for c in json.loads(schema)))
    """
    second = """
    import asyncio, json
    orders = <ORDERS>
    ids = ", ".join(str(o) for o in orders.values())
    rows = json.loads(await sqlite__read_query(f"SELECT id, status, placed_at, shipped_at, total_cents, currency FROM orders WHERE id IN ({ids})"))
    by_id = {r["id"]: r for r in rows}

    def body(r):
        shipped = f"shipped {r['shipped_at'][:10]}" if r["shipped_at"] else "not shipped"
        return f"Order {r['id']}: status **{r['status']}**, placed {r['placed_at'][:10]}, {shipped}, total {r['total_cents'] / 100:.2f} {r['currency']}. (Looked up in the shop database.)"

    await asyncio.gather(*[github__add_issue_comment(owner="acme", repo="webapp", issue_number=n, body=body(by_id[o])) for n, o in orders.items()])
    for n, o in orders.items():
        print(f"#{n}: {body(by_id[o])}")
    """.replace("<ORDERS>", repr(orders))
    answer = "I replied on all four issues:\n" + "\n".join(f"- #{n}: order {o} is {state[o][0]}" for n, o in orders.items()) + "\n\nNote that #1475 (charged twice) shows a delivered order: the double charge would be in the payments table, which I did not check; and order 91755 (#1484) is cancelled, so the refund should be looked at in payments too."  # fmt: skip
    return {"code": [first, second], "answer": answer, "expect": ["order 91755", "status **processing**"]}  # fmt: skip


@task("filesystem-log-errors", ["filesystem"], "Which are the five largest log files in /srv/app/logs? Show me the ERROR lines among the last 100 lines of each.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("filesystem__list_directory_with_sizes", {"path": "/srv/app/logs", "sortBy": "size"}))
    logs = [n for n in sorted(LOGS, key=lambda n: -LOGS[n]) if n.endswith(".log")][:5]
    tails = turn(*[("filesystem__read_text_file", {"path": f"/srv/app/logs/{n}", "tail": 100}) for n in logs])  # fmt: skip
    code = """
    import asyncio, re
    listing = (await filesystem__list_directory_with_sizes(path="/srv/app/logs", sortBy="size"))["content"]
    logs = re.findall(r"^\\[FILE\\] (\\S+\\.log) +([\\d.]+ \\w+)$", listing, re.MULTILINE)[:5]
    tails = await asyncio.gather(*[filesystem__read_text_file(path=f"/srv/app/logs/{name}", tail=100) for name, _ in logs])
    for (name, size), tail in zip(logs, tails):
        errors = [line for line in tail["content"].splitlines() if "ERROR" in line]
        print(f"== {name} ({size}): {len(errors)} ERROR lines in the last 100")
        for line in errors:
            print(line)
    """
    counts = {n: sum("ERROR" in x for x in t["content"].splitlines()) for n, t in zip(logs, tails, strict=True)}  # fmt: skip
    answer = "The five largest logs are " + ", ".join(f"{n} ({size_text(LOGS[n])})" for n in logs) + " (api.log.1.gz is larger but rotated and compressed).\n\nERROR lines in the last 100 of each: " + ", ".join(f"{n} {c}" for n, c in counts.items()) + ".\n\nThe pattern: checkout requests failing with 502 upstream timeouts in nginx, `KeyError: 'currency'` on POST /api/checkout in the API, order jobs failing with connection resets in the worker, declined cards and a rejected webhook signature in payments, and refresh failures redirecting to /login in auth. The checkout errors look like one incident: the API's KeyError surfaces as nginx 502s."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["== nginx-access.log (8.69 MB)", "KeyError: 'currency'", "== auth.log"]}  # fmt: skip


@task("filesystem-todos", ["filesystem"], "List every TODO and FIXME comment in the Python sources under /work/project/src, with file and line number.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [found] = turn(("filesystem__search_files", {"path": SRC, "pattern": "**/*.py"}))
    paths = found["content"].splitlines()
    turn(("filesystem__read_multiple_files", {"paths": paths}))
    code = """
    import re
    paths = (await filesystem__search_files(path="<SRC>", pattern="**/*.py"))["content"].splitlines()
    content = (await filesystem__read_multiple_files(paths=paths))["content"]
    for part in content.split("\\n---\\n"):
        path, _, text = part.partition(":\\n")
        for number, line in enumerate(text.splitlines(), 1):
            if re.search(r"#\\s*(TODO|FIXME)", line):
                print(f"{path}:{number}: {line.strip()}")
    """.replace("<SRC>", SRC)
    found_todos = [(m, n, t) for m in MODULES for n, t in TODOS.get(m, [])]
    answer = f"{len(found_todos)} TODO/FIXME comments:\n" + "\n".join(f"- src/{m}:{n}: {t[2:]}" for m, n, t in found_todos) + "\n\nThe two FIXMEs in auth/session.py and webhooks/deliver.py point at open bugs #1432 and #1460."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": [f"{SRC}/auth/session.py:44: # FIXME", f"{SRC}/reports/export.py:25: # TODO"]}  # fmt: skip


@task("filesystem-config-debug", ["filesystem"], "Which of the YAML configs in /srv/app/config turn debug mode on, and which point the database at localhost?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [listing] = turn(("filesystem__list_directory", {"path": "/srv/app/config"}))
    names = [line.split()[1] for line in listing["content"].splitlines() if line.endswith(".yaml")]
    turn(("filesystem__read_multiple_files", {"paths": [f"/srv/app/config/{n}" for n in names]}))
    code = """
    import re
    listing = (await filesystem__list_directory(path="/srv/app/config"))["content"]
    paths = ["/srv/app/config/" + line.split()[1] for line in listing.splitlines() if line.startswith("[FILE]") and line.endswith(".yaml")]
    content = (await filesystem__read_multiple_files(paths=paths))["content"]
    for part in content.split("\\n---\\n"):
        path, _, text = part.partition(":\\n")
        debug = re.search(r"^\\s*debug:\\s*(true|yes|on)\\b.*$", text, re.MULTILINE)
        local = re.search(r"^\\s*url:\\s*\\S*@(localhost|127\\.0\\.0\\.1)\\S*", text, re.MULTILINE)
        if debug or local:
            print(path, "| debug:", debug[0].strip() if debug else "-", "| local db:", local[0].strip() if local else "-")
    """
    answer = "Debug mode is on in three files:\n- development.yaml and test.yaml, as expected;\n- worker.yaml (`debug: true  # temporary, investigating job retries`), which also points at the production database, so that one should be turned off.\n\nThe database is on localhost in development.yaml (`localhost:5432/acme_dev`) and test.yaml (`127.0.0.1:5433/acme_test`). base, staging and production are clean."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["worker.yaml | debug: debug: true  # temporary", "127.0.0.1:5433/acme_test"]}  # fmt: skip


@task("git-hot-files", ["git"], "In /home/dev/webapp, which files were changed most often in the last 10 commits, and by whom?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("git__git_log", {"repo_path": REPO, "max_count": 10}))
    turn(*[("git__git_show", {"repo_path": REPO, "revision": hexid(REPO, k)}) for k in range(10)])
    code = """
    import asyncio, re
    log = await git__git_log(repo_path="<REPO>", max_count=10)
    commits = re.findall(r"Commit: '([0-9a-f]+)'\\nAuthor: <git.Actor \\"([^<]+?) <", log)
    shows = await asyncio.gather(*[git__git_show(repo_path="<REPO>", revision=sha) for sha, _ in commits])
    touched = {}
    for (sha, author), show in zip(commits, shows):
        for path in set(re.findall(r"^\\+\\+\\+ (\\S+)$", show, re.MULTILINE)):
            touched.setdefault(path, []).append(author)
    for path, authors in sorted(touched.items(), key=lambda kv: -len(kv[1]))[:6]:
        people = sorted(set(authors), key=lambda a: -authors.count(a))
        print(f"{path}: {len(authors)} commits by " + ", ".join(f"{a} ({authors.count(a)})" for a in people))
    """.replace("<REPO>", REPO)
    answer = "Most changed in the last 10 commits:\n- src/auth/session.ts: 4 commits (Tobias Lund 3, Jae Park 1)\n- src/checkout/totals.ts: 3 commits (Dorota Kowalski 2, Wei Zhang 1)\n- src/checkout/currency.ts: 2 commits (Dorota Kowalski)\n\nEverything else was touched once. Session handling is the hot spot, mostly Tobias's work on the Safari refresh bug."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["src/auth/session.ts: 4 commits by Tobias Lund (3), Jae Park (1)", "src/checkout/totals.ts: 3 commits"]}  # fmt: skip


@task("git-review-pending", ["git"], "Review my pending changes in /home/dev/webapp before I commit: what is staged, what is not, and does anything look unfinished?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(*[(f"git__{t}", {"repo_path": REPO}) for t in ("git_status", "git_diff_staged", "git_diff_unstaged")])  # fmt: skip
    code = """
    import asyncio
    status, staged, unstaged = await asyncio.gather(
        git__git_status(repo_path="<REPO>"),
        git__git_diff_staged(repo_path="<REPO>"),
        git__git_diff_unstaged(repo_path="<REPO>"),
    )
    print(status)
    print(staged)
    print(unstaged)
    """.replace("<REPO>", REPO)
    answer = "On branch webhook-dedupe.\n\n**Staged**: deliver.ts now skips events already delivered (`store.seen`) and marks deliveries (`store.markDelivered`), with retries on exponential backoff; a migration adds the `webhook_deliveries` table.\n\n**Not staged**: store.ts, which defines `seen` and `markDelivered`, and the new test.\n\nBefore committing:\n1. Stage store.ts too: the staged deliver.ts calls functions that only exist in the unstaged file, so this commit alone would not build.\n2. Remove `console.log('checking', id)` in `seen`.\n3. Resolve the `TODO: remove before merge`: `markDelivered` ignores conflicts; use `ON CONFLICT (event_id) DO NOTHING`.\n4. The new test is `it.skip`: enable it."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["TODO: remove before merge", "new file:   migrations/0042_webhook_ids.sql"]}  # fmt: skip


@task("notion-roadmap-owner", ["notion"], "In the Q3 Roadmap database in Notion, which items owned by Dana are still not started, and what is the scope of each?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("notion__API-post-search", {"query": "Q3 Roadmap", "filter": {"property": "object", "value": "data_source"}}))  # fmt: skip
    status = {"property": "Status", "status": {"equals": "Not started"}}
    turn(("notion__API-query-data-source", {"data_source_id": ROADMAP_DS, "filter": status}))
    danas = [i for i in ROADMAP if i[1].startswith("Dana")]
    turn(
        *[("notion__API-retrieve-page-markdown", {"page_id": uuid(("page", i[0]))}) for i in danas]
    )
    first = """
    import json
    found = json.loads(await notion__API_post_search(query="Q3 Roadmap", filter={"property": "object", "value": "data_source"}))
    for source in found["results"]:
        print(source["id"], source["title"][0]["plain_text"])
        for name, prop in source["properties"].items():
            options = [o["name"] for o in prop.get(prop["type"], {}).get("options", [])]
            print(f"  {name}: {prop['type']}" + (f" {options}" if options else ""))
    """
    second = """
    import asyncio, json
    pages = json.loads(await notion__API_query_data_source(data_source_id="<DS>", filter={"property": "Status", "status": {"equals": "Not started"}}))["results"]
    mine = [p for p in pages if any(u.get("name", "").startswith("Dana") for u in p["properties"]["Owner"]["people"])]
    docs = await asyncio.gather(*[notion__API_retrieve_page_markdown(page_id=p["id"]) for p in mine])
    for page, doc in zip(mine, docs):
        props = page["properties"]
        print(f"## {props['Priority']['select']['name']}, due {props['Due']['date']['start']}, estimate {props['Estimate']['number']}")
        print(json.loads(doc)["markdown"])
    """.replace("<DS>", ROADMAP_DS)
    answer = "Dana has three roadmap items not started yet:\n\n1. **SSO for enterprise workspaces** (P1, due 19 Sep, 13 points): SAML 2.0 and OIDC sign-in for Enterprise workspaces, SCIM provisioning of users and groups, SSO enforced per domain. Not included: just-in-time provisioning for other plans.\n2. **Usage-based billing pilot** (P2, due 26 Sep, 8 points): metered billing of API calls for 20 pilot accounts: usage events, a daily aggregation job, invoice lines and a usage page. Not included: self-serve plan changes and tax changes.\n3. **Audit log export API** (P2, due 30 Sep, 5 points): a paginated REST endpoint plus a daily S3 export of the audit log, filterable by actor, action and date, for Enterprise admins. Streaming to SIEM tools is next quarter.\n\nAll three are past their Q3 due dates."  # fmt: skip
    return {"code": [first, second], "answer": answer, "expect": ["Status: status ['Not started', 'In progress', 'Done']", "# SSO for enterprise workspaces", "# Audit log export API"]}  # fmt: skip


@task("notion-action-items", ["notion"], "Collect the open action items (unchecked to-dos) from last week's meeting notes in Notion (23 to 29 November 2026).")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [found] = turn(("notion__API-post-search", {"query": "Meeting notes", "filter": {"property": "object", "value": "page"}, "sort": {"direction": "descending", "timestamp": "last_edited_time"}}))  # fmt: skip
    week = [p["id"] for p in json.loads(found)["results"] if "2026-11-23" <= p["last_edited_time"][:10] <= "2026-11-29"]  # fmt: skip
    turn(*[("notion__API-get-block-children", {"block_id": pid}) for pid in week])
    code = """
    import asyncio, json
    found = json.loads(await notion__API_post_search(query="Meeting notes", filter={"property": "object", "value": "page"}, sort={"direction": "descending", "timestamp": "last_edited_time"}))
    week = [p for p in found["results"] if "2026-11-23" <= p["last_edited_time"][:10] <= "2026-11-29"]
    children = await asyncio.gather(*[notion__API_get_block_children(block_id=p["id"]) for p in week])
    for page, blocks in zip(week, children):
        title = "".join(t["plain_text"] for t in page["properties"]["title"]["title"])
        todos = [b["to_do"] for b in json.loads(blocks)["results"] if b["type"] == "to_do"]
        open_items = ["".join(t["plain_text"] for t in td["rich_text"]) for td in todos if not td["checked"]]
        print(f"{title}: " + ("; ".join(open_items) or "nothing open"))
    """
    lines = [f"- {t} ({d[8:]} Nov): " + "; ".join(a for a, done in ACTIONS[t] if not done) for t, d in MEETINGS[:5]]  # fmt: skip
    answer = "Open action items from last week's meetings:\n" + "\n".join(lines) + "\n\nDana and Owen hold the most open items (two each)."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["Meeting notes: Incident review 2026-11-24: Jae backfill", "Meeting notes: Roadmap planning 2026-11-23: Dana draft the Q1 themes"]}  # fmt: skip


@task("excel-best-quarter", ["excel"], "In /data/sales_2026.xlsx, which quarter's sheet has the highest total revenue, and which region led that quarter?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    path = "/data/sales_2026.xlsx"
    [book] = turn(("excel__describe_workbook", {"path": path}))
    turn(*[("excel__read_range", {"path": path, "sheet": s["name"]}) for s in book["sheets"]])
    code = """
    import asyncio
    book = await excel__describe_workbook(path="/data/sales_2026.xlsx")
    sheets = [s["name"] for s in book["sheets"]]
    ranges = await asyncio.gather(*[excel__read_range(path="/data/sales_2026.xlsx", sheet=s) for s in sheets])
    for sheet, data in zip(sheets, ranges):
        header, *rows = data["values"]
        revenue, region = header.index("Revenue"), header.index("Region")
        by_region = {}
        for row in rows:
            by_region[row[region]] = by_region.get(row[region], 0) + row[revenue]
        total = sum(by_region.values())
        lead = max(by_region, key=lambda r: by_region[r])
        print(f"{sheet}: total {total:,.2f}, {len(rows)} rows; leading region {lead} ({by_region[lead]:,.2f}, {by_region[lead] / total:.0%})")
    """
    stats = {}
    for q in range(1, 5):
        by: dict[str, float] = {}
        for row in sales_rows(q)[1:]:
            by[row[1]] = by.get(row[1], 0) + row[5]
        lead = max(by, key=lambda k: by[k])
        stats[f"Q{q}"] = (sum(by.values()), lead, by[lead])
    best = max(stats, key=lambda k: stats[k][0])
    answer = f"{best} has the highest total revenue: {stats[best][0]:,.2f}. Its leading region was {stats[best][1]} with {stats[best][2]:,.2f} ({stats[best][2] / stats[best][0]:.0%} of the quarter).\n\nTotals: " + ", ".join(f"{k} {v[0]:,.2f}" for k, v in stats.items()) + "."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": [f"{best}: total {stats[best][0]:,.2f}"]}


@task("excel-error-cells", ["excel"], "Scan every workbook in /reports for cells showing #REF! or #DIV/0! and tell me where they are.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [books] = turn(("excel__list_workbooks", {"directory": "/reports"}))
    turn(*[("excel__find_cells", {"path": p, "query": q}) for p in books for q in ("#REF!", "#DIV/0!")])  # fmt: skip
    code = """
    import asyncio
    books = list(await excel__list_workbooks(directory="/reports"))
    queries = ["#REF!", "#DIV/0!"]
    results = await asyncio.gather(*[excel__find_cells(path=p, query=q) for p in books for q in queries])
    for i, found in enumerate(results):
        for sheet, cells in found["matches"].items():
            print(f"{books[i // 2]} [{sheet}] {queries[i % 2]}: {', '.join(cells)}")
    print(f"{len(books)} workbooks scanned")
    """
    answer = "Error cells in /reports (6 workbooks scanned):\n- budget_2027.xlsx, sheet Summary: D14 is #REF!\n- marketing_spend.xlsx, sheet Q4: H7 and H8 are #DIV/0!\n- cloud_costs.xlsx: By team!F22 is #REF!, Forecast!C5 is #DIV/0!\n\nheadcount, pipeline and okr_tracking are clean. The #REF! cells usually mean a deleted row or sheet; the #DIV/0! ones a zero or empty denominator."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["/reports/budget_2027.xlsx [Summary] #REF!: D14", "/reports/marketing_spend.xlsx [Q4] #DIV/0!: H7, H8"]}  # fmt: skip


@task("memory-falcon-team", ["memory"], "What do I know about the people on Project Falcon, and how are they connected to each other?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("memory__search_nodes", {"query": "Falcon"}))
    team = ["Alice Moreau", "Ben Ortiz", "Chen Wei", "Dara Singh"]
    turn(("memory__open_nodes", {"names": team}))
    code = """
    import re
    found = await memory__search_nodes(query="Falcon")
    project = [e for e in found["entities"] if e["name"] == "Project Falcon"][0]
    print("Project Falcon:", "; ".join(project["observations"]))
    team_line = [o for o in project["observations"] if o.startswith("Team:")][0]
    names = [re.sub(r" \\(.*\\)$", "", n.strip()) for n in team_line[len("Team:"):].split(",")]
    people = await memory__open_nodes(names=names)
    for e in people["entities"]:
        print(f"{e['name']} ({e['entityType']}): " + "; ".join(e["observations"]))
    for r in people["relations"] + found["relations"]:
        print(f"{r['from']} -{r['relationType']}-> {r['to']}")
    """
    answer = "Project Falcon (moving the order pipeline to event sourcing, aiming to cut checkout latency by 40% by March 2027) has four people:\n- **Alice Moreau**: lead; staff engineer in payments, based in Lyon, prefers written async updates.\n- **Ben Ortiz**: senior backend engineer, on call for the order pipeline in December.\n- **Chen Wei**: joined in June 2026, working on the event store schema, wants to move into SRE.\n- **Dara Singh**: product manager for checkout, owns Falcon's success metrics, away 22 Dec to 5 Jan.\n\nConnections: Ben and Chen both report to Alice, and Alice mentors Chen. Dara is on the project but outside that reporting line."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["Chen Wei -reports_to-> Alice Moreau", "Alice Moreau -mentors-> Chen Wei", "Dara Singh (person)"]}  # fmt: skip


@task("memory-record-meeting", ["memory"], "Remember this from today's call: Priya Nair joined Acme as head of data, reports to Sam Lee, and prefers email over chat.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(*[("memory__search_nodes", {"query": q}) for q in ("Priya Nair", "Sam Lee", "Acme")])
    priya = {"name": "Priya Nair", "entityType": "person", "observations": ["Head of data at Acme (joined December 2026)", "Prefers email over chat"]}  # fmt: skip
    relations = [{"from": "Priya Nair", "to": "Sam Lee", "relationType": "reports_to"}, {"from": "Priya Nair", "to": "Acme", "relationType": "works_at"}]  # fmt: skip
    # The memory server does not check that a relation's ends exist: both go in one turn.
    turn(("memory__create_entities", {"entities": [priya]}), ("memory__create_relations", {"relations": relations}))  # fmt: skip
    code = """
    import asyncio
    names = ["Priya Nair", "Sam Lee", "Acme"]
    found = await asyncio.gather(*[memory__search_nodes(query=n) for n in names])
    known = {n for n, f in zip(names, found) if any(e["name"] == n for e in f["entities"])}
    print("already known:", sorted(known))
    notes = ["Head of data at Acme (joined December 2026)", "Prefers email over chat"]
    if "Priya Nair" in known:
        print(await memory__add_observations(observations=[{"entityName": "Priya Nair", "contents": notes}]))
    else:
        print(await memory__create_entities(entities=[{"name": "Priya Nair", "entityType": "person", "observations": notes}]))
    relations = [{"from": "Priya Nair", "to": "Sam Lee", "relationType": "reports_to"}, {"from": "Priya Nair", "to": "Acme", "relationType": "works_at"}]
    print(await memory__create_relations(relations=[r for r in relations if r["to"] in known]))
    """
    answer = "Saved. Priya Nair is now in memory as a person (head of data at Acme since December 2026, prefers email over chat), linked to Sam Lee (reports_to) and Acme (works_at); both were already known."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["already known: ['Acme', 'Sam Lee']", "'relationType': 'works_at'"]}  # fmt: skip


@task("time-meeting-zones", ["time"], "Our weekly sync is on Thursdays at 16:00 Berlin time. What time is that in New York, São Paulo, Bangalore and Tokyo, and for which of them is it outside 08:00 to 19:00?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    zones = ["America/New_York", "America/Sao_Paulo", "Asia/Kolkata", "Asia/Tokyo"]
    turn(*[("time__convert_time", {"source_timezone": "Europe/Berlin", "time": "16:00", "target_timezone": z}) for z in zones])  # fmt: skip
    code = """
    import asyncio
    zones = ["America/New_York", "America/Sao_Paulo", "Asia/Kolkata", "Asia/Tokyo"]
    results = await asyncio.gather(*[time__convert_time(source_timezone="Europe/Berlin", time="16:00", target_timezone=z) for z in zones])
    for r in results:
        t = r["target"]
        clock = t["datetime"][11:16]
        outside = not ("08:00" <= clock <= "19:00")
        print(f"{t['timezone']}: {t['day_of_week']} {clock} ({r['time_difference']})" + (" OUTSIDE 08-19" if outside else ""))
    """
    answer = "Thursday 16:00 in Berlin is:\n- New York: Thursday 10:00\n- São Paulo: Thursday 12:00\n- Bangalore: Thursday 20:30 (outside 08:00-19:00)\n- Tokyo: Friday 00:00 (outside, midnight)\n\nBangalore and Tokyo are outside working hours; an earlier slot, e.g. 09:00 Berlin, would suit Bangalore and Tokyo (13:30 and 17:00) but is 03:00 in New York, so no single slot fits everyone."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["Asia/Kolkata: Thursday 20:30 (+4.5h) OUTSIDE", "Asia/Tokyo: Friday 00:00"]}  # fmt: skip


@task("fetch-breaking-changes", ["fetch"], "Read the QuarryDB release notes at https://docs.quarrydb.io/releases and list the breaking changes of the three most recent releases.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("fetch__fetch", {"url": f"{DOCS}/releases"}))
    turn(*[("fetch__fetch", {"url": f"{DOCS}/releases/{v}"}) for v, _, _ in RELEASES[:3]])
    code = """
    import asyncio, re
    index = await fetch__fetch(url="https://docs.quarrydb.io/releases")
    links = re.findall(r"\\]\\((https://docs\\.quarrydb\\.io/releases/[0-9][^)]*)\\)", index)[:3]
    pages = await asyncio.gather(*[fetch__fetch(url=u) for u in links])
    for url, page in zip(links, pages):
        title = re.search(r"^# (.+)$", page, re.MULTILINE)
        released = re.search(r"Released ([0-9-]+)", page)
        print(f"== {title[1] if title else url} ({released[1] if released else '?'})")
        section = re.search(r"^#+ *Breaking changes?[^\\n]*\\n(.*?)(?:^#|\\Z)", page, re.MULTILINE | re.DOTALL | re.IGNORECASE)
        print(section[1].strip() if section else page)
    """
    answer = "Breaking changes in the three latest QuarryDB releases:\n\n**4.2.0** (2026-11-18)\n- `COPY ... FROM` no longer accepts `FORMAT csv_legacy`; use `FORMAT csv`.\n- `wal_compression` now defaults to `zstd`: replicas older than 4.0 cannot stream from a 4.2 primary.\n\n**4.1.0** (2026-09-02)\n- `quarry.connect()` needs an explicit `tls=` argument for non-local hosts.\n\n**4.0.0** (2026-06-10)\n- Tables created before 3.0 must be rewritten (`ALTER TABLE ... REWRITE`) before upgrading.\n- `LIMIT ALL` was removed.\n- Python client: `cursor.fetch_df()` returns a Polars frame; pass `pandas=True` for pandas."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["== QuarryDB 4.2.0 release notes (2026-11-18)", "LIMIT ALL", "tls="]}  # fmt: skip


@task("web-release-date", ["duckduckgo"], "When was PostgreSQL 18 released? Search the web and check the top three results to confirm the date.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("duckduckgo__search", {"query": "PostgreSQL 18 release date"}))
    turn(*[("duckduckgo__fetch_content", {"url": u}) for _, u, _ in PG_RESULTS[:3]])
    code = """
    import asyncio, re
    found = (await duckduckgo__search(query="PostgreSQL 18 release date"))["result"]
    urls = re.findall(r"URL: (\\S+)", found)[:3]
    pages = await asyncio.gather(*[duckduckgo__fetch_content(url=u) for u in urls])
    date = r"(January|February|March|April|May|June|July|August|September|October|November|December|\\d{4}-\\d{2}-\\d{2})"
    for url, page in zip(urls, pages):
        lines = [l for l in page["result"].splitlines() if re.search(r"releas|came out", l, re.IGNORECASE) and re.search(date, l)]
        print(url, "->", lines or "no date found")
    """
    answer = "PostgreSQL 18 was released on **25 September 2025**. All three top results agree: the official announcement (postgresql.org news), the official release notes (\"Release date: 2025-09-25\") and a DBA blog's overview. A forum thread further down guessed October, but the official sources settle it."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["PostgreSQL 18 was released on September 25, 2025.", "Release date: 2025-09-25."]}  # fmt: skip


@task("arxiv-citations", ["arxiv"], "Find the most relevant arXiv papers on speculative decoding. For the top three, how often has each been cited, and which paper citing it is itself the most cited?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    [found] = turn(("arxiv__search_papers", {"query": '"speculative decoding"', "categories": ["cs.CL", "cs.LG"]}))  # fmt: skip
    top = [p["id"] for p in json.loads(found)["papers"][:3]]
    graphs = turn(*[("arxiv__citation_graph", {"paper_id": i}) for i in top])
    code = """
    import asyncio, json
    found = json.loads(await arxiv__search_papers(query='"speculative decoding"', categories=["cs.CL", "cs.LG"]))
    top = found["papers"][:3]
    graphs = await asyncio.gather(*[arxiv__citation_graph(paper_id=p["id"]) for p in top])
    for paper, text in zip(top, graphs):
        g = json.loads(text)
        best = max(g["citations"], key=lambda c: c["citationCount"])
        print(f"{paper['id']} {paper['title']}: cited {g['citation_count']} times; most-cited citing paper (of {len(g['citations'])} returned): {best['title']} ({best['year']}, {best['citationCount']} citations)")
    """
    rows = []
    for pid, g in zip(top, graphs, strict=True):
        data = json.loads(g)
        best = max(data["citations"], key=lambda c: c["citationCount"])
        rows.append(f"- **{data['title']}** ({pid}): cited {data['citation_count']:,} times; its most-cited citer among the 50 returned is \"{best['title']}\" ({best['year']}, {best['citationCount']} citations)")  # fmt: skip
    answer = "The top three results for speculative decoding:\n" + "\n".join(rows) + "\n\nCitation counts come from Semantic Scholar; the 'most-cited citer' is among the first 50 citing papers it returns."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["2211.17192 Fast Inference from Transformers via Speculative Decoding: cited"]}  # fmt: skip


@task("package-json-drift", ["filesystem", "github"], "Compare the dependencies in my local /home/dev/webapp/package.json with the ones in acme/webapp on GitHub (main branch), and list the differences.")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    turn(("filesystem__read_text_file", {"path": "/home/dev/webapp/package.json"}), ("github__get_file_contents", {"owner": "acme", "repo": "webapp", "path": "package.json", "branch": "main"}))  # fmt: skip
    code = """
    import asyncio, json
    local, remote = await asyncio.gather(
        filesystem__read_text_file(path="/home/dev/webapp/package.json"),
        github__get_file_contents(owner="acme", repo="webapp", path="package.json", branch="main"),
    )
    mine = json.loads(local["content"])
    theirs = json.loads(json.loads(remote)["content"])
    for group in ("dependencies", "devDependencies"):
        a, b = mine.get(group, {}), theirs.get(group, {})
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                print(f"{group}: {name}: local {a.get(name, '-')} / main {b.get(name, '-')}")
    """
    answer = "Your local package.json differs from main in dependencies only (devDependencies match):\n- react and react-dom: local ^18.3.1, main ^19.1.0\n- axios: local ^1.6.8, main ^1.7.9\n- moment ^2.30.1: only local\n- date-fns ^4.1.0: only on main (it replaced moment)\n\nRunning `git pull` and `npm install` would bring you to main's versions."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["dependencies: react: local ^18.3.1 / main ^19.1.0", "dependencies: moment: local ^2.30.1 / main -"]}  # fmt: skip


@task("github-fix-status", ["github"], "Find the open issue about the login loop in acme/webapp and the pull request that fixes it. Is that PR approved, is CI green, and which files does it change?")  # fmt: skip
def _(turn: Model) -> dict[str, Any]:
    q1, q2 = "repo:acme/webapp is:issue is:open login loop", "repo:acme/webapp is:pr 1432"
    SEARCHES[q1], SEARCHES[q2] = [1432], [1501]
    turn(("github__search_issues", {"q": q1}))
    turn(("github__search_issues", {"q": q2}))
    turn(*[(f"github__get_pull_request_{k}", {"owner": "acme", "repo": "webapp", "pull_number": 1501}) for k in ("reviews", "status", "files")])  # fmt: skip
    code = """
    import asyncio, json
    issue = json.loads(await github__search_issues(q="repo:acme/webapp is:issue is:open login loop"))["items"][0]
    print(f"issue #{issue['number']}: {issue['title']} ({issue['state']}, {issue['comments']} comments)")
    prs = json.loads(await github__search_issues(q=f"repo:acme/webapp is:pr {issue['number']}"))["items"]
    for pr in prs:
        n = pr["number"]
        reviews, status, files = await asyncio.gather(
            github__get_pull_request_reviews(owner="acme", repo="webapp", pull_number=n),
            github__get_pull_request_status(owner="acme", repo="webapp", pull_number=n),
            github__get_pull_request_files(owner="acme", repo="webapp", pull_number=n),
        )
        print(f"PR #{n} {pr['title']} by {pr['user']['login']}")
        print("  reviews:", [(r["user"]["login"], r["state"]) for r in json.loads(reviews)])
        s = json.loads(status)
        print("  CI:", s["state"], [(c["context"], c["state"]) for c in s["statuses"]])
        print("  files:", [(f["filename"], f"+{f['additions']}/-{f['deletions']}") for f in json.loads(files)])
    """
    answer = "The issue is #1432 \"Login loop after session refresh on Safari\" (open, 14 comments). It is fixed by PR #1501 \"Fix login loop on Safari session refresh (#1432)\" by tobias-lund.\n\n- **Approved**: yes, one approval.\n- **CI**: green (build, test and lint all passed).\n- **Files**: src/auth/session.ts, src/auth/refresh.ts and tests/auth/session.test.ts.\n\nIt looks ready to merge."  # fmt: skip
    return {"code": [code], "answer": answer, "expect": ["PR #1501", "CI: success", "src/auth/refresh.ts"]}  # fmt: skip


def write_suite(tasks: list[Task], model: type[Model], about: str, out: Path) -> None:
    """Script every task of ``tasks`` with ``model`` and write the suite to ``out``."""
    written = []
    for name, servers, prompt, build in tasks:
        turns = model()
        scripted = build(turns)
        written.append({"id": name, "servers": servers, "prompt": prompt, "direct": turns.turns, "code": [dedent(c) for c in scripted["code"]], "answer": scripted["answer"], "expect": scripted["expect"], "responses": list(turns.responses.values())})  # fmt: skip
    out.write_text(json.dumps({"about": about, "tasks": written}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")  # fmt: skip
    print(f"{len(written)} tasks, {out.stat().st_size // 1024} KiB -> {out}")


def main() -> None:
    about = "Tasks of benchmarks/bench_code_mode.py, written by benchmarks/make_code_mode_tasks.py (see its docstring): synthetic, seeded data in each real server's answer shape."  # fmt: skip
    write_suite(TASKS, Model, about, OUT)


if __name__ == "__main__":
    main()
