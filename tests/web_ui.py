#!/usr/bin/env python3
"""Drive the daemon's web page (/ui/) in a real browser: Debian's Chromium through
chromedriver, with Selenium. The plan comes as JSON on stdin:

  {"base": "http://127.0.0.1:PORT", "login_url": ".../ui/login?code=...",
   "agent_token": "cairn_...", "query": "...", "project": "shop",
   "hostile_query": "...", "shots": "/dir/for/screenshots"}

or, with "mode": "proxy", {"login_url": "https://PROXY/ui/login?code=...",
"trust_spki": "...", "verify": "lrn_..."}: the person through a TLS proxy.

Prints one JSON object of what the browser saw; the Rust test (tests/web.rs) asserts on
it. This script asserts nothing itself, except that the browser runs.
"""

import hashlib
import http.server
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from PIL import Image, ImageStat
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def browser(trust_spki: str = None) -> webdriver.Chrome:
    """Chromium; `trust_spki`: the base64 SHA-256 of the one certificate key it trusts
    besides the system's (the test's TLS proxy)."""
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
              "--disable-dev-shm-usage", "--no-first-run"):
        opts.add_argument(a)
    if trust_spki:
        opts.add_argument(f"--ignore-certificate-errors-spki-list={trust_spki}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def shot(driver, shots: Path, name: str) -> dict:
    """Save a screenshot; say whether it is blank (one colour, or nearly)."""
    path = shots / f"{name}.png"
    driver.save_screenshot(str(path))
    img = Image.open(path).convert("L")
    stat = ImageStat.Stat(img)
    lo, hi = img.getextrema()
    colours = img.getcolors(maxcolors=1 << 16)
    return {
        "path": str(path),
        "stddev": stat.stddev[0],
        "range": hi - lo,
        "colours": len(colours) if colours else 1 << 16,
    }


def alert_shown(driver) -> bool:
    try:
        driver.switch_to.alert
        return True
    except NoAlertPresentException:
        return False


def text_of(driver, css: str):
    """The text of the first element matching `css`, or None. Read again while the page
    is being replaced (a redirect after a form's POST can swap the document between
    finding an element and reading it)."""

    def read(d):
        found = d.find_elements(By.CSS_SELECTOR, css)
        return [found[0].text if found else None]

    settled = WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException, WebDriverException))
    return settled.until(read)[0]


def detached(element):
    """A wait condition: `element` is no longer in the document. Chromium reports a node
    of a replaced document either as stale or as a node that "does not belong to the
    document"; both mean the page it was on is gone."""

    def check(_):
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as e:
            if "does not belong to the document" in str(e):
                return True
            raise

    return check


def submit(driver, css: str, by=By.CSS_SELECTOR) -> None:
    """Click the button or link `css` and wait until the page it was on is gone (a click
    does not always wait for the navigation it starts)."""

    def click(d):
        button = d.find_element(by, css)
        button.click()
        return button

    # Chromium sometimes refuses a click on a node it has just re-laid out ("Node with
    # given id does not belong to the document"): find the button again and retry.
    retrying = WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException, WebDriverException))
    button = retrying.until(click)
    WebDriverWait(driver, 30).until(detached(button))
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def hits(driver) -> list:
    return [li.get_attribute("data-id") for li in driver.find_elements(By.CSS_SELECTOR, "li.hit")]


def search(driver, query: str, project: str) -> None:
    box = driver.find_element(By.NAME, "q")
    box.clear()
    box.send_keys(query)
    p = driver.find_element(By.NAME, "project")
    p.clear()
    p.send_keys(project)
    submit(driver, "form button[type=submit]")


# What an agent's dev server on another loopback port serves to the person who opens it
# (an app preview): a page that asks its own server for the daemon's paths with the
# browser's cookies, then tosses `cairn_ui` cookies of its own at the paths the page used
# to live under, by its server's Set-Cookie and by script.
ATTACK_PAGE = """<!doctype html><html><head><title>preview</title></head><body><p>app preview</p>
<script>
(async () => {
  for (const u of ["/ui/x", "/ui/learnings", "/ui/learnings/x/verify", "/ui/service", "/ui/"]) {
    await fetch(u, {credentials: "include"});
  }
  await fetch("/toss", {credentials: "include"});
  for (const p of ["/ui/learnings", "/ui/learnings/x", "/ui/issues", "/ui/service", "/ui", "/"]) {
    document.cookie = "cairn_ui=tossed-by-script; path=" + p;
  }
  document.title = "done";
})().catch(e => { document.title = "failed " + e; });
</script></body></html>"""


class DevServer(http.server.BaseHTTPRequestHandler):
    """The agent's server: records every Cookie header it is sent."""

    received = []

    def do_GET(self):
        DevServer.received.append({"path": self.path, "cookie": self.headers.get("Cookie")})
        body = ATTACK_PAGE.encode() if self.path == "/" else b"ok"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        if self.path == "/toss":
            for p in ("/ui", "/ui/learnings", "/ui/issues"):
                self.send_header("Set-Cookie", f"cairn_ui=tossed-by-header; Path={p}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def cookie_values(header) -> list:
    """The values of `cairn_ui` in a Cookie header."""
    return [c.strip()[len("cairn_ui="):] for c in (header or "").split(";")
            if c.strip().startswith("cairn_ui=")]


def fetch(url: str, cookie: str = None, data: dict = None, origin: str = None) -> int:
    """The status of a request made outside the browser, as an agent's script makes it
    (redirects followed)."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    if cookie is not None:
        req.add_header("Cookie", cookie)
    if origin:
        req.add_header("Origin", origin)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def other_port(driver, base: str, home: str) -> dict:
    """The person, logged in, opens a page of another loopback port; what its server got,
    and what a replay of that against the daemon gets."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DevServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
        WebDriverWait(driver, 30).until(lambda d: d.title != "preview")
        title = driver.title
    finally:
        server.shutdown()
    received = [r for r in DevServer.received if r["path"] != "/"]
    values = sorted({v for r in DevServer.received for v in cookie_values(r["cookie"])})
    # The agent replays what it got, at the paths it knows and at the page's own.
    replays = {}
    for v in values:
        for url in (f"{base}/ui/learnings", f"{base}/ui/service", f"{home}learnings"):
            replays[f"{v[:16]} {url}"] = fetch(url, cookie=f"cairn_ui={v}")
    return {"title": title, "received": received, "values": values, "replays": replays}


def proxied(plan: dict) -> dict:
    """The person through a TLS-terminating proxy: log in at the proxy's address, verify
    a learning on its page."""
    out = {}
    driver = browser(plan["trust_spki"])
    try:
        driver.get(plan["login_url"])
        cookie = driver.get_cookie("cairn_ui") or {}
        out["login"] = {"url": driver.current_url, "title": driver.title,
                        "secure": cookie.get("secure"), "path": cookie.get("path")}
        home = driver.current_url.rsplit("/learnings", 1)[0] + "/"
        driver.get(f"{home}learnings/{plan['verify']}")
        driver.find_element(By.NAME, "note").send_keys("checked through the proxy")
        submit(driver, "button[value=verify]")
        out["verified"] = {"url": driver.current_url, "title": driver.title,
                           "verified": text_of(driver, "dd.verified")}
    except Exception as e:  # what the browser saw so far goes to the test, with the error
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["error_page"] = driver.find_element(By.TAG_NAME, "body").text[:4000]
    finally:
        driver.quit()
    return out


def main() -> None:
    plan = json.load(sys.stdin)
    if plan.get("mode") == "proxy":
        print(json.dumps(proxied(plan)))
        return
    shots = Path(plan["shots"])
    shots.mkdir(parents=True, exist_ok=True)
    base = plan["base"]
    out = {}
    driver = browser()
    try:
        # Nobody logged in: the page refuses.
        driver.get(f"{base}/ui/learnings?q=anything")
        out["anonymous"] = {"title": driver.title, "text": driver.find_element(By.TAG_NAME, "main").text,
                            "hits": hits(driver)}
        out["shots"] = {"login": shot(driver, shots, "login")}
        # An agent's token as a login code: refused.
        code = urllib.parse.quote(plan["agent_token"])
        driver.get(f"{base}/ui/login?code={code}")
        out["agent_login"] = {"title": driver.title, "text": driver.find_element(By.TAG_NAME, "main").text,
                              "cookie": driver.get_cookie("cairn_ui") is not None}
        # The person's login URL: a cookie, and the learnings page.
        driver.get(plan["login_url"])
        cookie = driver.get_cookie("cairn_ui") or {}
        out["login"] = {"url": driver.current_url, "title": driver.title,
                        "http_only": cookie.get("httpOnly"), "same_site": cookie.get("sameSite"),
                        "path": cookie.get("path")}
        real = cookie.get("value", "")
        # The pages of this login live under the address the login led to.
        home = driver.current_url.rsplit("/learnings", 1)[0] + "/"
        # A page of another loopback port, opened by the logged-in person.
        out["other_port"] = other_port(driver, base, home)
        out["other_port"]["real"] = real
        # The place itself leads to the learnings.
        driver.get(home.rstrip("/"))
        out["place"] = {"url": driver.current_url, "title": driver.title}
        # Without a query: the pictures, drawn as SVG on the server.
        out["pictures"] = {
            f.get_attribute("class"): {
                "svgs": len(f.find_elements(By.TAG_NAME, "svg")),
                "shapes": len(f.find_elements(By.CSS_SELECTOR, "svg rect, svg polyline, svg path")),
                "points": len(f.find_elements(By.CSS_SELECTOR, "svg circle")),
                "text": [t.text for t in f.find_elements(By.TAG_NAME, "text")][:40],
            }
            for f in driver.find_elements(By.CSS_SELECTOR, "figure.picture")
        }
        out["shots"]["pictures"] = shot(driver, shots, "pictures")
        search(driver, plan["query"], plan["project"])
        out["search"] = {"url": driver.current_url, "hits": hits(driver)}
        out["shots"]["learnings"] = shot(driver, shots, "learnings")
        # Hostile text renders inert.
        search(driver, plan["hostile_query"], plan["project"])
        patterns = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "li.hit .pattern")]
        out["hostile"] = {
            "hits": hits(driver),
            "patterns": patterns,
            "images": len(driver.find_elements(By.CSS_SELECTOR, "main img")),
            "links_in_hits": [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "li.hit a")],
            "scripts": len(driver.find_elements(By.TAG_NAME, "script")),
            "alert": alert_shown(driver),
            "pwned": driver.execute_script("return window.__pwned === undefined ? null : window.__pwned"),
        }
        out["shots"]["hostile"] = shot(driver, shots, "hostile")
        # Curate: verify one learning, supersede another by a third, on their pages.
        driver.get(f"{home}learnings/{plan['verify']}")
        driver.find_element(By.NAME, "note").send_keys("checked against the runbook")
        submit(driver, "button[value=verify]")
        out["verified"] = {"url": driver.current_url,
                           "page": driver.find_element(By.TAG_NAME, "body").text,
                           "verified": text_of(driver, "dd.verified"),
                           "events": [e.text for e in driver.find_elements(By.CSS_SELECTOR, "td.event")]}
        out["shots"]["learning"] = shot(driver, shots, "learning")
        driver.get(f"{home}learnings/{plan['flag']}")
        driver.find_element(By.CSS_SELECTOR, "form[action$='/flag'] input[name=note]").send_keys(
            "the seed step moved into the migrations")
        submit(driver, "button[value=flag]")
        out["flagged"] = {"flag": text_of(driver, "dd.flag"),
                          "events": [e.text for e in driver.find_elements(By.CSS_SELECTOR, "td.event")]}
        driver.get(f"{home}learnings/{plan['old']}")
        driver.find_element(By.NAME, "by").send_keys(plan["new"])
        submit(driver, "button[value=supersede]")
        out["superseded"] = {"url": driver.current_url,
                             "page": driver.find_element(By.TAG_NAME, "body").text,
                             "by": text_of(driver, "dd.superseded")}
        # An error page's way back.
        driver.get(f"{home}learnings/{plan['old']}")
        driver.find_element(By.NAME, "by").send_keys("lrn_00000000000000000000000000000000")
        submit(driver, "button[value=supersede]")
        out["problem_page"] = {"title": driver.title, "text": text_of(driver, "p.error")}
        submit(driver, "Back to the page", By.LINK_TEXT)
        out["problem_page"]["back"] = {"title": driver.title, "url": driver.current_url}
        driver.get(f"{home}learnings/{plan['old']}")
        # Cross-site: the browser's own cookie, sent from elsewhere.
        cookie = real
        csrf = driver.find_element(By.NAME, "csrf").get_attribute("value")
        out["form_token"] = {"derived_from_cookie": csrf == hashlib.sha256(f"csrf:{cookie}".encode()).hexdigest()}
        host = urllib.parse.urlsplit(base).netloc

        def post(origin, token):
            data = urllib.parse.urlencode({"csrf": token, "score": "7"}).encode()
            req = urllib.request.Request(f"{home}learnings/{plan['verify']}/rate", data=data,
                                         method="POST")
            req.add_header("Cookie", f"cairn_ui={cookie}")
            if origin:
                req.add_header("Origin", origin)
            try:
                with urllib.request.urlopen(req) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        out["cross_site"] = {
            "foreign_origin": post("http://evil.example", csrf),
            "no_origin": post(None, csrf),
            "wrong_token": post(f"http://{host}", "0" * 64),
            "no_token": post(f"http://{host}", ""),
            "computed_token": post(f"http://{host}", hashlib.sha256(f"csrf:{cookie}".encode()).hexdigest()),
        }
        # The browser's cookie among others of the same name (tossed ones, first): its own.
        out["several_cookies"] = fetch(f"{home}learnings",
                                       cookie=f"cairn_ui=tossed; cairn_ui={cookie}; cairn_ui=0{cookie[1:]}")
        driver.get(f"{home}learnings/{plan['verify']}")
        out["quality_after_cross_site"] = driver.find_element(By.CSS_SELECTOR, "dd.quality").text
        # Archive a learning without a successor: it leaves the search, and "with
        # archived" brings it back, marked.
        driver.get(f"{home}learnings/{plan['archive']}")
        driver.find_element(By.CSS_SELECTOR, "form[action$='/archive'] input[name=note]").send_keys(
            "a rule of the old test runner")
        submit(driver, "button[value=archive]")
        out["archived"] = {"at": text_of(driver, "dd.archived"),
                           "events": [e.text for e in driver.find_elements(By.CSS_SELECTOR, "td.event")],
                           "restore": len(driver.find_elements(By.CSS_SELECTOR, "button[value=restore]")),
                           "archive": len(driver.find_elements(By.CSS_SELECTOR, "button[value=archive]"))}
        form = {"q": plan["archive_query"], "project": plan["project"]}
        driver.get(f"{home}learnings?{urllib.parse.urlencode(form)}")
        out["archived"]["hits"] = hits(driver)
        driver.get(f"{home}learnings?{urllib.parse.urlencode({**form, 'archived': 'on'})}")
        out["archived"]["hits_with_archived"] = hits(driver)
        out["archived"]["marked"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "li.hit dd.archived")]
        # Issues: the list, one issue's trail verified; then (the test tampers with a
        # row of the database) the same page says where the chain breaks.
        driver.get(f"{home}issues")
        out["issues"] = [tr.get_attribute("data-id") for tr in driver.find_elements(By.CSS_SELECTOR, "tr.issue")]
        submit(driver, plan["issue"], By.LINK_TEXT)
        out["issue"] = {"url": driver.current_url,
                        "verified": text_of(driver, "p.verified"),
                        "broken": text_of(driver, "p.broken"),
                        "comments": [e.text for e in driver.find_elements(By.CSS_SELECTOR, "p.content")],
                        "scripts": len(driver.find_elements(By.TAG_NAME, "script")),
                        "pwned": driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")}
        out["shots"]["issue"] = shot(driver, shots, "issue")
        Path(plan["ready"]).write_text("ready")
        deadline = time.time() + 120
        while not Path(plan["tampered"]).exists():
            if time.time() > deadline:
                raise TimeoutError("the test did not tamper with the trail")
            time.sleep(0.05)
        driver.refresh()
        out["tampered"] = {"verified": text_of(driver, "p.verified"),
                           "broken": text_of(driver, "p.broken"),
                           "breaks": [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                                      for tr in driver.find_elements(By.CSS_SELECTOR, "tr.break")]}
        out["shots"]["tampered"] = shot(driver, shots, "tampered")
        # The vault: collections with their freshness, a search, a document's chunks.
        driver.get(f"{home}vault")
        out["vault"] = {"collections": [tr.get_attribute("data-id")
                                        for tr in driver.find_elements(By.CSS_SELECTOR, "tr.collection")]}
        driver.find_element(By.NAME, "q").send_keys(plan["vault_query"])
        submit(driver, "form button[type=submit]")
        out["vault"]["hits"] = [li.get_attribute("data-path") for li in driver.find_elements(By.CSS_SELECTOR, "li.chunk")]
        out["vault"]["headings"] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "li.chunk .headings")]
        out["shots"]["vault"] = shot(driver, shots, "vault")
        submit(driver, "li.chunk .where a")
        out["document"] = {"title": driver.title,
                           "chunks": len(driver.find_elements(By.CSS_SELECTOR, "li.chunk")),
                           "headings": [e.text for e in driver.find_elements(By.CSS_SELECTOR, "li.chunk .headings")]}
        # The service: per-tool calls, index sizes, tokens; revoke the agent's token.
        driver.get(f"{home}service")
        out["service"] = {
            "tools": {tr.get_attribute("data-id"): tr.find_element(By.CSS_SELECTOR, "td.calls").text
                      for tr in driver.find_elements(By.CSS_SELECTOR, "tr.tool")},
            "learnings": text_of(driver, "dd.learnings"),
            "latency_pictures": [f.get_attribute("data-id")
                                 for f in driver.find_elements(By.CSS_SELECTOR, "figure.latency")
                                 if f.find_elements(By.CSS_SELECTOR, "svg rect")],
            "tokens": {tr.get_attribute("data-id"): tr.find_element(By.CSS_SELECTOR, "td.state").text
                       for tr in driver.find_elements(By.CSS_SELECTOR, "tr.token")},
        }
        out["shots"]["service"] = shot(driver, shots, "service")
        submit(driver, f"tr.token[data-id='{plan['agent_id']}'] button[value=revoke]")
        out["revoked"] = {"url": driver.current_url,
                          "state": text_of(driver, f"tr.token[data-id='{plan['agent_id']}'] td.state"),
                          "by": text_of(driver, f"tr.token[data-id='{plan['agent_id']}'] td.revoked-by")}
        # The login URL works once.
        driver.delete_all_cookies()
        driver.get(plan["login_url"])
        out["second_login"] = {"title": driver.title,
                               "cookie": driver.get_cookie("cairn_ui") is not None}
    except Exception as e:  # what the browser saw so far goes to the test, with the error
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
        out["error_page"] = driver.find_element(By.TAG_NAME, "body").text[:4000]
    finally:
        driver.quit()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
