"""Record the ``tools/list`` answers of more real MCP servers into ``benchmarks/data/search_corpus/``.

The tool search evaluation of issue 26 needs a corpus of a held-out size: the 21
servers and 288 tools of the interop sweep (``benchmarks/data/interop/``) are too few
and too alike to tell a good ranking from a lucky one. This script adds the servers of
trackers, CI and devops, observability, databases, cloud, browsers, office files,
chat, web search, maps, calendars, charts, CRM and home automation, so that the two folders together hold more than
1,000 real tools from more than 40 real servers. Each file has the format of the
interop sweep (``server``, ``registry``, ``package``, ``version``, ``sdk``,
``server_info``, ``note``, ``tools`` as the server listed them) and is written by the
same machinery, imported from ``record_interop.py``; ``README.md`` beside the files
lists them, with the kind of each server and the ones that did not start.

The servers are never dependencies of this project. Install them outside the
repository, the PyPI ones one virtualenv each, the npm ones in one scratch folder
(``--ignore-scripts``: no install script may download a browser or a binary), with the
versions recorded in the data::

    python benchmarks/record_search_corpus.py --print-pypi | while read -r name specs; do
        python3 -m venv /tmp/corpus-py/$name && /tmp/corpus-py/$name/bin/pip install $specs
    done
    mkdir -p /tmp/corpus-npm && cd /tmp/corpus-npm && echo '{"private": true}' > package.json
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --ignore-scripts $(python benchmarks/record_search_corpus.py --print-npm)
    python benchmarks/record_search_corpus.py --py-root /tmp/corpus-py --npm-root /tmp/corpus-npm

``office-powerpoint-mcp-server`` uses the ``mcp`` 1.x server API and gets ``mcp<2``
pinned beside it (``pins``), as in ``record_interop.py``. No server reaches its real
service here: each one gets dummy API keys, tokens and URLs (never a real secret) and
lists its tools without calling out; a URL it is given points at the discard port of
127.0.0.1, where nothing answers. ``--readme`` rewrites
``README.md`` from the files alone. A server that does not start is reported and its
old file, if any, is left as it is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from record_interop import DUMMY_KEY, ROOT, Server, cli

OUT = ROOT / "benchmarks" / "data" / "search_corpus"
DUMMY_URL = "http://127.0.0.1:9"  # the discard port: nothing answers there

SUPABASE_FEATURES = "account,database,debugging,development,functions,branching,storage"
KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters: [{{name: dummy, cluster: {{server: "{DUMMY_URL}"}}}}]
users: [{{name: dummy, user: {{token: dummy}}}}]
contexts: [{{name: dummy, context: {{cluster: dummy, user: dummy}}}}]
current-context: dummy
"""


AWS_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIADUMMYDUMMYDUMMY0",
    "AWS_SECRET_ACCESS_KEY": DUMMY_KEY,
    "FASTMCP_LOG_LEVEL": "ERROR",
}


def _env(**values: str) -> Callable[[Path], dict[str, str]]:
    return lambda scratch: dict(values)


def _args(*values: str) -> Callable[[Path], list[str]]:
    return lambda scratch: list(values)


# (kind, server): the kind is written in the README, for evaluations by kind.
CORPUS: list[tuple[str, Server]] = [
    ("tracker", Server(
        "gitlab", "npm", "@zereight/mcp-gitlab", "2.1.64", "mcp-gitlab",
        env=_env(GITLAB_PERSONAL_ACCESS_TOKEN=DUMMY_KEY, GITLAB_API_URL=f"{DUMMY_URL}/api/v4"),
        note="dummy GITLAB_PERSONAL_ACCESS_TOKEN and GITLAB_API_URL",
    )),
    ("database", Server(
        "supabase", "npm", "@supabase/mcp-server-supabase", "0.13.0", "mcp-server-supabase",
        args=_args("--access-token", DUMMY_KEY, f"--features={SUPABASE_FEATURES}"),
        note="dummy access token; every feature group but docs, which fetches its schema to list",
    )),
    ("database", Server(
        "mongodb", "npm", "mongodb-mcp-server", "3.0.4", "mongodb-mcp-server",
        env=_env(MDB_MCP_TELEMETRY="disabled"), note="no connection string; telemetry off",
    )),
    ("browser", Server(
        "chrome-devtools", "npm", "chrome-devtools-mcp", "1.11.0", "chrome-devtools-mcp",
        args=_args("--headless", "--isolated"),
        note="no browser is installed: listing tools does not launch one",
    )),
    ("ci-devops", Server(
        "circleci", "npm", "@circleci/mcp-server-circleci", "0.20.0", "mcp-server-circleci",
        env=_env(CIRCLECI_TOKEN=DUMMY_KEY), note="dummy CIRCLECI_TOKEN",
    )),
    ("ci-devops", Server(
        "kubernetes", "npm", "mcp-server-kubernetes", "4.1.7", "mcp-server-kubernetes",
        env=lambda s: {"KUBECONFIG": str(s / "kubeconfig")},
        setup=lambda s: (s / "kubeconfig").write_text(KUBECONFIG),
        note="no cluster: a kubeconfig naming a server where nothing answers",
    )),
    ("observability", Server(
        "sentry", "npm", "@sentry/mcp-server", "0.39.0", "sentry-mcp",
        args=_args(f"--access-token={DUMMY_KEY}"), note="dummy access token",
    )),
    ("observability", Server(
        "datadog", "npm", "@winor30/mcp-server-datadog", "1.8.0", "mcp-server-datadog",
        env=_env(DATADOG_API_KEY=DUMMY_KEY, DATADOG_APP_KEY=DUMMY_KEY), note="dummy API and app keys",
    )),
    ("chat", Server(
        "slack", "npm", "@modelcontextprotocol/server-slack", "2025.4.25", "mcp-server-slack",
        env=_env(SLACK_BOT_TOKEN="xoxb-dummy", SLACK_TEAM_ID="T00000000"),
        note="dummy SLACK_BOT_TOKEN and SLACK_TEAM_ID (deprecated package, last release)",
    )),
    ("browser", Server(
        "puppeteer", "npm", "@modelcontextprotocol/server-puppeteer", "2025.5.12",
        "mcp-server-puppeteer", note="no browser is downloaded: listing tools does not launch one",
    )),
    ("search", Server(
        "firecrawl", "npm", "firecrawl-mcp", "3.26.0", "firecrawl-mcp",
        env=_env(FIRECRAWL_API_KEY="fc-dummy"), note="dummy FIRECRAWL_API_KEY",
    )),
    ("search", Server(
        "tavily", "npm", "tavily-mcp", "0.2.22", "tavily-mcp",
        env=_env(TAVILY_API_KEY="tvly-dummy"), note="dummy TAVILY_API_KEY",
    )),
    ("search", Server(
        "exa", "npm", "exa-mcp-server", "3.4.1", "exa-mcp-server",
        env=_env(EXA_API_KEY=DUMMY_KEY), note="dummy EXA_API_KEY",
    )),
    ("search", Server(
        "brave-search", "npm", "@brave/brave-search-mcp-server", "2.1.4", "brave-search-mcp-server",
        env=_env(BRAVE_API_KEY=DUMMY_KEY), note="dummy BRAVE_API_KEY",
    )),
    ("maps", Server(
        "google-maps", "npm", "@modelcontextprotocol/server-google-maps", "0.6.2",
        "mcp-server-google-maps", env=_env(GOOGLE_MAPS_API_KEY=DUMMY_KEY),
        note="dummy GOOGLE_MAPS_API_KEY (deprecated package, last release)",
    )),
    ("tracker", Server(
        "asana", "npm", "@roychri/mcp-server-asana", "1.8.0", "mcp-server-asana",
        env=_env(ASANA_ACCESS_TOKEN=DUMMY_KEY), note="dummy ASANA_ACCESS_TOKEN",
    )),
    ("tracker", Server(
        "todoist", "npm", "@doist/todoist-mcp", "11.0.0", "todoist-mcp",
        env=_env(TODOIST_API_KEY=DUMMY_KEY), note="dummy TODOIST_API_KEY",
    )),
    ("tracker", Server(
        "linear", "npm", "@tacticlaunch/mcp-linear", "1.4.3", "mcp-linear",
        env=_env(LINEAR_API_TOKEN="lin_api_dummy"), note="dummy LINEAR_API_TOKEN",
    )),
    ("database", Server(
        "airtable", "npm", "airtable-mcp-server", "1.14.0", "airtable-mcp-server",
        env=_env(AIRTABLE_API_KEY="pat-dummy"), note="dummy AIRTABLE_API_KEY",
    )),
    ("charts", Server(
        "chart", "npm", "@antv/mcp-server-chart", "0.9.10", "mcp-server-chart",
    )),
    ("ci-devops", Server(
        "launchdarkly", "npm", "@launchdarkly/mcp-server", "0.6.2", "mcp",
        args=_args("start", "--api-key", DUMMY_KEY), note="dummy API key",
    )),
    ("tracker", Server(
        "shortcut", "npm", "@shortcut/mcp", "0.25.0", "mcp-server-shortcut",
        env=_env(SHORTCUT_API_TOKEN=DUMMY_KEY), note="dummy SHORTCUT_API_TOKEN",
    )),
    ("chat", Server(
        "lark", "npm", "@larksuiteoapi/lark-mcp", "0.5.1", "lark-mcp",
        args=_args("mcp", "-a", "cli_dummy", "-s", DUMMY_KEY), note="dummy app id and secret",
    )),
    ("calendar", Server(
        "google-calendar", "npm", "@cocal/google-calendar-mcp", "2.6.3", "google-calendar-mcp",
        env=lambda s: {"GOOGLE_OAUTH_CREDENTIALS": str(s / "gcp-oauth.keys.json")},
        setup=lambda s: (s / "gcp-oauth.keys.json").write_text(json.dumps({"installed": {
            "client_id": "dummy.apps.googleusercontent.com", "client_secret": DUMMY_KEY,
            "redirect_uris": ["http://localhost"]}})),
        note="a dummy OAuth client file",
    )),
    ("cloud", Server(
        "azure", "npm", "@azure/mcp", "2.0.5", "azmcp", args=_args("server", "start"),
        note="its .NET server ships in the package @azure/mcp-linux-x64; the default mode: "
        "one tool per service namespace",
    )),
    ("database", Server(
        "elasticsearch", "npm", "@elastic/mcp-server-elasticsearch", "0.3.1",
        "mcp-server-elasticsearch", env=_env(ES_URL=DUMMY_URL, ES_API_KEY=DUMMY_KEY),
        note="dummy ES_URL and ES_API_KEY",
    )),
    ("crm", Server(
        "hubspot", "npm", "@hubspot/mcp-server", "0.4.0", "mcp-hubspot",
        env=_env(PRIVATE_APP_ACCESS_TOKEN=DUMMY_KEY), note="dummy PRIVATE_APP_ACCESS_TOKEN",
    )),
    ("database", Server(
        "postgres", "npm", "@modelcontextprotocol/server-postgres", "0.6.2", "mcp-server-postgres",
        args=_args("postgresql://127.0.0.1:9/dummy"), note="no database: a URL where nothing answers",
    )),
    ("tracker", Server(
        "atlassian", "pypi", "mcp-atlassian", "0.23.1", "mcp-atlassian",
        env=_env(
            JIRA_URL=DUMMY_URL, JIRA_USERNAME="dummy@example.com", JIRA_API_TOKEN=DUMMY_KEY,
            CONFLUENCE_URL=f"{DUMMY_URL}/wiki", CONFLUENCE_USERNAME="dummy@example.com",
            CONFLUENCE_API_TOKEN=DUMMY_KEY, PYTHONHASHSEED="0",
        ),
        note="Jira and Confluence, with dummy URLs, user and API tokens; PYTHONHASHSEED=0, "
        "since a default it lists joins a set",
    )),
    ("office", Server(
        "powerpoint", "pypi", "office-powerpoint-mcp-server", "2.0.7", "ppt_mcp_server",
        pins=("mcp<2",), note="needs mcp<2: it uses the 1.x server API",
    )),
    ("cloud", Server(
        "aws-documentation", "pypi", "awslabs.aws-documentation-mcp-server", "1.2.3",
        "awslabs.aws-documentation-mcp-server", env=_env(**AWS_ENV),
    )),
    ("observability", Server(
        "aws-cloudwatch", "pypi", "awslabs.cloudwatch-mcp-server", "0.3.1",
        "awslabs.cloudwatch-mcp-server", env=_env(**AWS_ENV), note="dummy AWS credentials",
    )),
    ("ci-devops", Server(
        "aws-eks", "pypi", "awslabs.eks-mcp-server", "0.2.1", "awslabs.eks-mcp-server",
        args=_args("--allow-write", "--allow-sensitive-data-access"), env=_env(**AWS_ENV),
        note="dummy AWS credentials; started with --allow-write --allow-sensitive-data-access",
    )),
    ("database", Server(
        "clickhouse", "pypi", "mcp-clickhouse", "0.7.0", "mcp-clickhouse",
        env=_env(
            CLICKHOUSE_HOST="127.0.0.1", CLICKHOUSE_PORT="9", CLICKHOUSE_USER="dummy",
            CLICKHOUSE_PASSWORD=DUMMY_KEY, CLICKHOUSE_SECURE="false",
        ),
        note="no database: a host and port where nothing answers",
    )),
    ("home", Server(
        "home-assistant", "pypi", "ha-mcp", "3.5.1", "ha-mcp",
        env=_env(HOMEASSISTANT_URL=DUMMY_URL, HOMEASSISTANT_TOKEN=DUMMY_KEY),
        note="dummy HOMEASSISTANT_URL and HOMEASSISTANT_TOKEN",
    )),
    ("office", Server(
        "google-workspace", "pypi", "workspace-mcp", "2.2.1", "workspace-mcp",
        args=_args("--single-user", "--transport", "stdio"),
        env=lambda s: {
            "GOOGLE_OAUTH_CLIENT_ID": "dummy.apps.googleusercontent.com",
            "GOOGLE_OAUTH_CLIENT_SECRET": DUMMY_KEY, "HOME": str(s),
        },
        note="all tools; dummy OAuth client; HOME is a scratch folder",
    )),
]  # fmt: skip
SERVERS = [server for _, server in CORPUS]
KINDS = {server.name: kind for kind, server in CORPUS}

# Servers that were tried and did not list tools here: name, package and version, why.
FAILED: list[tuple[str, str, str]] = [
    ("azure-devops", "@azure-devops/mcp 2.10.0",
     "loads the native `keytar` module at start, which only an install script builds or downloads"),
    ("stripe", "@stripe/mcp 0.3.3",
     "a proxy to Stripe's remote MCP server: it connects out before it answers the handshake"),
    ("heroku", "@heroku/mcp-server 1.2.8",
     "exits at start: its import of `@modelcontextprotocol/sdk/dist/esm/server/mcp` (no `.js`) "
     "does not resolve against the SDK installed for it"),
    ("redis", "@modelcontextprotocol/server-redis 2025.4.25",
     "connects to Redis at start and exits when nothing answers"),
    ("neon", "@neondatabase/mcp-server-neon 0.6.5",
     "not installed: a dependency (`@sentry/node` 9) pulls `@fastify/otel` from a GitHub tarball"),
    ("obsidian", "obsidian-mcp-server 3.2.12",
     "not installed: it wants `@cyanheads/mcp-ts-core@^0.11.1`, which npm does not have"),
    ("grafana", "mcp-grafana 2.1.1 (PyPI)",
     "left out: the wheel wraps Grafana's Go binary, and this corpus keeps Python and node servers"),
]  # fmt: skip


def readme(out: Path) -> str:
    """``README.md`` for the recorded files in ``out``."""
    rows = []
    total = 0
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        total += len(data["tools"])
        registry = {"pypi": "PyPI", "npm": "npm"}[data["registry"]]
        rows.append(
            f"| {data['server']} | {KINDS.get(data['server'], '?')} | {registry} "
            f"| `{data['package']}` {data['version']} | {data['sdk']} "
            f"| {len(data['tools'])} | {data['note']} |"
        )
    lines = [
        "# The search corpus: recorded `tools/list` answers of more real MCP servers",
        "",
        "The held-out-sized corpus for the tool search evaluation of issue 26, beside",
        "the interop sweep of `benchmarks/data/interop/`. One JSON file per server, in the",
        "format of the interop sweep: the tools exactly as the server listed them (`name`,",
        "`title`, `description`, `inputSchema`, `outputSchema` when given, `annotations`),",
        "with the package, the version that answered and the MCP SDK it ran on. Written by",
        "`benchmarks/record_search_corpus.py` (its docstring has the install and record",
        "commands): each server is installed outside the repository, started over stdio by",
        "`McpClient` in a scratch folder with dummy keys, tokens and URLs, and asked for its",
        "tools. None of them reached its real service, and nothing here needs the network.",
        "",
        f"{len(rows)} servers, {total} tools:",
        "",
        "| server | kind | from | package and version | SDK | tools | note |",
        "|---|---|---|---|---|---:|---|",
        *rows,
    ]
    if FAILED:
        lines += [
            "",
            "Tried and left out (they did not list their tools here):",
            "",
            "| server | package and version | why |",
            "|---|---|---|",
            *(f"| {name} | `{package}` | {why} |" for name, package, why in FAILED),
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    if "--readme" in sys.argv:
        out = OUT
        (out / "README.md").write_text(readme(out), encoding="utf-8")
        return
    args = cli(SERVERS, OUT, __doc__.splitlines()[0])
    (args.out / "README.md").write_text(readme(args.out), encoding="utf-8")
    sys.exit(1 if args.failed else 0)


if __name__ == "__main__":
    main()
