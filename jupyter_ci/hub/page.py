"""The admins' spending page: plain HTML, every value escaped, no script.

User names and model ids come from users (a turn names any model the policy allows), so
every one is escaped where it is written, and the page is served with a Content Security
Policy that runs no script and loads nothing, should anything slip through. It shows one
page of users (admin/spending's page), with links to the next and the first.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from jupyter_ci.agent.cost import dollars
from jupyter_ci.hub.spending import totals
from jupyter_ci.wire.hub import ADMIN_PAGE_LIMIT, AllSpending, Limit, UserSpending

#: The page's Content-Security-Policy: no script, nothing loaded, no framing.
CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
_STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 2em}th,td{padding:.3em .8em;text-align:right;
border-bottom:1px solid #ddd}th:first-child,td:first-child{text-align:left}
.full{color:#b00}"""


def admin_page(spending: AllSpending, json_url: str, page_url: str,
               limit: int = ADMIN_PAGE_LIMIT, cursor: str | None = None) -> str:
    """Return the page: one table of users' totals, then each user's models this month."""
    empty = "No more users this month." if cursor else "Nobody has spent anything this month."
    users = "".join(_user_row(u) for u in spending.users) or (
        f"<tr><td colspan='6'>{empty}</td></tr>")
    models = "".join(_models(u) for u in spending.users)
    this = _link(json_url, limit, cursor)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>jupyter-ci spending</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>jupyter-ci spending, {escape(spending.month)} (UTC)</h1>"
        f"<p>Today is {escape(spending.day)}. As JSON: "
        f"<a href='{escape(this, quote=True)}'>{escape(this)}</a></p>"
        "<table><tr><th>User</th><th>Tokens today</th><th>USD today</th>"
        "<th>Tokens this month</th><th>USD this month</th><th>Refused this month</th></tr>"
        f"{users}</table>{_pages(spending, page_url, limit, cursor)}{models}</body></html>")


def _link(url: str, limit: int, cursor: str | None) -> str:
    """Return `url` with a page's query (none for the first page of the default size)."""
    query = {k: v for k, v in (("limit", str(limit) if limit != ADMIN_PAGE_LIMIT else None),
                               ("cursor", cursor)) if v}
    return f"{url}?{urlencode(query)}" if query else url


def _pages(spending: AllSpending, page_url: str, limit: int, cursor: str | None) -> str:
    """Links to the next page, if users follow, and to the first, if this is not it."""
    links = []
    if spending.more:
        links.append(f"<a href='{escape(_link(page_url, limit, spending.next), quote=True)}'>"
                     f"Next {limit:,} users</a>")
    if cursor:
        links.append(f"<a href='{escape(_link(page_url, limit, None), quote=True)}'>"
                     "First page</a>")
    return f"<p>{' · '.join(links)}</p>" if links else ""


def _user_row(user: UserSpending) -> str:
    """One user's totals, a budget that is used up marked."""
    today_tokens, today_usd = totals(user.today)
    month_tokens, month_usd = totals(user.this_month)
    full = " class='full'" if any(_is_full(limit) for limit in user.limits) else ""
    return (f"<tr{full}><td>{escape(user.user)}</td><td>{today_tokens:,}</td>"
            f"<td>{escape(dollars(today_usd))}</td><td>{month_tokens:,}</td>"
            f"<td>{escape(dollars(month_usd))}</td><td>{user.refused_this_month:,}</td></tr>")


def _models(user: UserSpending) -> str:
    """One user's models this month, and their budgets."""
    rows = "".join(
        f"<tr><td>{escape(m.model)}</td><td>{m.turns:,}</td><td>{m.input_tokens:,}</td>"
        f"<td>{m.output_tokens:,}</td><td>{m.cached_tokens:,}</td>"
        f"<td>{escape(dollars(m.cost_usd))}</td></tr>" for m in user.this_month)
    limits = "".join(
        f"<li>{escape(limit.name)}: {limit.used:,.4g} of {limit.limit:,.4g} "
        f"(set for {escape(limit.source)}; resets {escape(limit.resets)})</li>"
        for limit in user.limits)
    return (f"<h2>{escape(user.user)}</h2>"
            + (f"<ul>{limits}</ul>" if limits else "")
            + "<table><tr><th>Model</th><th>Turns</th><th>Input tokens</th>"
            "<th>Output tokens</th><th>Cached tokens</th><th>USD</th></tr>"
            f"{rows}</table>")


def _is_full(limit: Limit) -> bool:
    """Say whether a budget is used up."""
    return limit.used >= limit.limit > 0
