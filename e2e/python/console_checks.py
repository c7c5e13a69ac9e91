"""The web console (`/jobsd/ui/`, README "Web console") in a real headless browser: Debian's
chromium driven by Playwright (PyPI; its own browser download is not used: `executable_path` is
the system chromium, env CHROMIUM, default /usr/bin/chromium). Run by e2e/console.sh against the
release jobsd (DAPR_HTTP_PORT, DAPR_RUNTIME_HOST set) whose app is policy_http_app.py (a job
named fail-* is answered 500, flaky<N>-* 500 N times, anything else 200). One phase per jobsd:

  browse SHOTS EVENTS   a jobsd without a token; a realistic set of jobs is created through the
                        API, then, in the browser:
                          1. the list shows every job, with state, schedule and counters that
                             move by themselves (live refresh); pages of 3 cover them all
                          2. the filters (prefix, label, state; typed from the keyboard) narrow
                             the list to what GET /jobsd/v1/jobs answers for the same filters
                          3. a job page shows its spec, status, next fire times and, after it
                             fired, its run history as the server has it
                          4. Pause (with a note) and Resume change its state, and the server
                             agrees; Run now runs a job whose schedule is far off (the app gets
                             it, the history shows the manual run with the execution id)
                          5. live refresh paused: the page stands still while the job fires;
                             on again: it catches up
                          6. a concurrency limit by key is set, refused (limit 0) and deleted
                             from the page, and the server agrees
                          7. no script error, no CSP violation, no request to another origin
  token TOKEN SHOTS     a jobsd with DAPR_API_TOKEN=TOKEN: the page asks for the token and shows
                        no data without it (its own calls get 401), a wrong token is refused,
                        the right one shows and steers the jobs; the token stays in the tab
                        (a reload keeps it, a new browser session asks again), "Forget token"
                        drops it

Screenshots (PNG) go to SHOTS; `readme.png` is the one README's "Web console" shows.
"""

import json
import os
import re
import sys
import time
import urllib.parse

from playwright.sync_api import expect, sync_playwright

from checks import request, wait_until
from harness import Suite, run_phase_of

HOST = os.environ.get("DAPR_RUNTIME_HOST", "127.0.0.1")
HTTP = f"http://{HOST}:{os.environ.get('DAPR_HTTP_PORT', '3500')}"
UI = HTTP + "/jobsd/ui/"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Bound of every wait on the page, in ms (live refresh runs every 5 s).
WAIT_MS = 20_000
expect.set_options(timeout=WAIT_MS)

# A realistic set of jobs (README's screenshot shows them): name → create body.
JOBS = {
    "sync-inventory": {
        "schedule": "@every 2s", "labels": {"team": "ops", "tier": "gold"},
        "data": {"warehouse": "ams-1"}, "policy": {"overlap": "skip", "timeout": "30s"},
    },
    "report-daily": {
        "schedule": "TZ=Europe/Berlin 0 0 6 * * *", "labels": {"team": "billing"},
        "data": {"format": "pdf"}, "policy": {"catchUp": "latest", "jitter": "30s"},
    },
    "report-weekly": {
        "schedule": "0 0 7 * * 1", "labels": {"team": "billing"},
        "failurePolicy": {"exponential": {"initialInterval": "1s", "multiplier": 2,
                                          "maxInterval": "1m", "maxRetries": 5}},
    },
    "fail-export-ledger": {
        "schedule": "@every 3s", "labels": {"team": "billing"},
        "failurePolicy": {"constant": {"interval": "1s", "maxRetries": 1}},
    },
    "flaky2-invoice-retry": {
        "schedule": "@every 4s", "repeats": 20, "labels": {"team": "billing"},
        "failurePolicy": {"constant": {"interval": "1s", "maxRetries": 3}},
    },
    "cleanup-tmp": {"schedule": "@every 1h", "labels": {"team": "ops"}},
    "welcome-email-42": {"dueTime": "1s", "labels": {"team": "growth"},
                         "data": {"user": 42}},
    "hourly-digest": {"schedule": "@hourly", "repeats": 24, "ttl": "48h",
                      "labels": {"team": "growth"}},
}


def call(method: str, path: str, body=None, token=None, want=None):
    """(status, parsed JSON or None) of a call to jobsd; asserts the status when `want`."""
    headers = {"dapr-api-token": token} if token else {}
    status, _, answer = request(HTTP + path, method, body, 30, headers)
    parsed = json.loads(answer) if answer and answer[:1] in (b"{", b"[") else None
    if want is not None:
        assert status == want, f"{method} {path} → {status} {answer[:300]!r}"
    return status, parsed


def view(name: str, token=None) -> dict:
    return call("GET", f"/jobsd/v1/jobs/{urllib.parse.quote(name, safe='')}", token=token,
                want=200)[1]


def server_names(query: str, token=None) -> list:
    """The names GET /jobsd/v1/jobs?<query> answers (every page)."""
    names, page_token = [], ""
    while True:
        q = query + (f"&pageToken={urllib.parse.quote(page_token)}" if page_token else "")
        answer = call("GET", f"/jobsd/v1/jobs?{q}", token=token, want=200)[1]
        names += [j["name"] for j in answer["jobs"]]
        page_token = answer.get("nextPageToken")
        if not page_token:
            return sorted(names)


class Browser:
    """One headless chromium for a phase, recording what pages do that they should not: script
    errors (a CSP violation is reported as a console error) and requests to other origins."""

    def __init__(self, shots: str):
        self.shots = shots
        os.makedirs(shots, exist_ok=True)
        self.pw = sync_playwright().start()
        self.browser = self.pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        self.errors = []
        self.foreign = []

    def page(self, width: int = 1366, height: int = 900):
        """A page in a fresh context (its own sessionStorage), watched."""
        context = self.browser.new_context(viewport={"width": width, "height": height},
                                           locale="en-GB", timezone_id="UTC")
        page = context.new_page()
        # A refused call (401, a 400 the page shows) is logged as a failed load: not an error
        # of the page's; a CSP violation ("Refused to …") or a script error is.
        page.on("console", lambda m: m.type == "error"
                and not m.text.startswith("Failed to load resource")
                and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith(HTTP + "/")
                else self.foreign.append(r.url))
        return page

    def shot(self, page, name: str, full: bool = True):
        path = os.path.join(self.shots, name)
        page.screenshot(path=path, full_page=full)
        print(f"     screenshot {path}")

    def close(self):
        self.browser.close()
        self.pw.stop()


# The list's columns, as cell() takes them.
COLUMNS = ["name", "state", "schedule", "next", "last", "delivered", "succeeded", "failed"]


def cell(page, name: str, column: str):
    """The list's cell of job `name` in `column`."""
    return page.locator(f'#jobs-body tr[data-name="{name}"] td').nth(COLUMNS.index(column))


def rows(page) -> list:
    """The job names the list shows, in order."""
    return page.locator("#jobs-body tr[data-name]").evaluate_all(
        "rs => rs.map(r => r.dataset.name)")


def expect_rows(page, names):
    """Waits until the list shows exactly `names` (any order)."""
    want = sorted(names)
    ok = wait_until(lambda: sorted(rows(page)) == want, WAIT_MS / 1000, 0.2)
    assert ok, f"the list shows {sorted(rows(page))}, want {want}"


def open_job(page, name: str):
    page.locator(f'#jobs-body a[data-key="job:{name}"]').click()
    expect(page.locator("#job-title")).to_have_text(name)
    assert page.url.endswith("#/job/" + urllib.parse.quote(name, safe="")), page.url


def run_rows(page) -> int:
    return page.locator("#runs-body tr:not(:has(td.empty))").count()


def browse_phase(shots: str, events: str) -> Suite:
    s = Suite("browse")
    b = {}

    @s.check
    def jobs_are_created_through_the_api():
        for name, body in JOBS.items():
            call("POST", f"/jobsd/v1/jobs/{name}", body, want=204)
        call("POST", "/jobsd/v1/jobs/cleanup-tmp/pause", {"note": "disk migration"}, want=204)
        b["browser"] = Browser(shots)

    @s.check
    def the_list_shows_every_job_and_its_counters_move_by_themselves():
        page = b["page"] = b["browser"].page()
        page.goto(UI)
        expect_rows(page, JOBS)
        expect(cell(page, "cleanup-tmp", "state")).to_have_text("paused")
        expect(cell(page, "report-daily", "schedule")).to_contain_text(
            "TZ=Europe/Berlin 0 0 6 * * *")
        expect(cell(page, "report-daily", "next")).to_contain_text(re.compile(r"^in \d"))
        expect(page.locator("#app-id")).to_have_text("app myapp")
        # No reload: sync-inventory (every 2 s) gets deliveries the live refresh shows.
        expect(cell(page, "sync-inventory", "delivered")).not_to_have_text("0")
        expect(cell(page, "fail-export-ledger", "failed")).not_to_have_text("0")
        expect(cell(page, "fail-export-ledger", "last")).to_contain_text("failed")
        # The one-shot ran and finished; it stays listed as finished.
        expect(cell(page, "welcome-email-42", "state")).to_have_text("finished")
        b["browser"].shot(page, "list.png")

    @s.check
    def pages_of_three_cover_every_job_once():
        page = b["page"]
        page.goto(UI + "#/?pageSize=3")
        expect(page.locator("#f-size")).to_have_value("3")
        seen = []
        for number in range(1, 4):
            # With the page's count, so that the list of the page before (its info also
            # said "Page 1 · ", with all the jobs) cannot pass for this one.
            count = 3 if number < 3 else 2
            expect(page.locator("#page-info")).to_have_text(
                re.compile(f"^Page {number} · {count} jobs")
            )
            assert len(rows(page)) == count, rows(page)
            seen += rows(page)
            if number < 3:
                page.locator("#page-next").click()
        expect(page.locator("#page-next")).to_be_disabled()
        assert sorted(seen) == sorted(JOBS), seen
        page.locator("#page-prev").click()
        expect(page.locator("#page-info")).to_have_text(re.compile("^Page 2 · 3 jobs"))
        assert rows(page) == seen[3:6], rows(page)
        page.locator("#page-first").click()
        expect(page.locator("#page-info")).to_have_text(re.compile("^Page 1 · 3 jobs"))
        assert rows(page) == seen[:3], rows(page)
        expect(page.locator("#page-prev")).to_be_disabled()

    @s.check
    def filters_narrow_the_list_as_the_server_does():
        page = b["page"]
        page.goto(UI)
        expect_rows(page, JOBS)
        # From the keyboard: "/" jumps to the prefix filter, Enter applies it.
        page.keyboard.press("/")
        expect(page.locator("#f-prefix")).to_be_focused()
        page.keyboard.type("report-")
        page.keyboard.press("Enter")
        expect_rows(page, server_names("prefix=report-"))
        assert sorted(rows(page)) == ["report-daily", "report-weekly"]
        assert "prefix=report-" in page.url, page.url
        b["browser"].shot(page, "list-filtered.png")

        page.locator("#f-clear").click()
        expect_rows(page, JOBS)
        page.fill("#f-label", "team=ops")
        page.locator("#filters button[type=submit]").click()
        expect_rows(page, server_names("label=team%3Dops"))
        assert sorted(rows(page)) == ["cleanup-tmp", "sync-inventory"]

        page.select_option("#f-state", "paused")
        page.locator("#filters button[type=submit]").click()
        expect_rows(page, server_names("label=team%3Dops&state=paused"))
        assert rows(page) == ["cleanup-tmp"]

        page.fill("#f-label", "team=ops, tier=gold")
        page.select_option("#f-state", "")
        page.locator("#filters button[type=submit]").click()
        expect_rows(page, ["sync-inventory"])

        page.fill("#f-label", "")
        page.fill("#f-prefix", "nothing-")
        page.locator("#filters button[type=submit]").click()
        expect(page.locator("#jobs-body td.empty")).to_have_text("No job matches these filters.")

        # A malformed label is the server's 400, shown.
        page.fill("#f-prefix", "")
        page.fill("#f-label", "team")
        page.locator("#filters button[type=submit]").click()
        expect(page.locator("#list-error")).to_contain_text("is not key=value")

    @s.check
    def a_job_page_shows_its_spec_status_next_fire_times_and_history():
        page = b["page"]
        page.goto(UI)
        expect_rows(page, JOBS)
        open_job(page, "sync-inventory")
        spec = page.locator("#job-spec")
        expect(spec).to_contain_text("@every 2s")
        expect(spec).to_contain_text("overlap")
        expect(spec).to_contain_text("skip")
        expect(spec).to_contain_text("team=ops")
        expect(spec).to_contain_text('"warehouse":"ams-1"')
        expect(page.locator("#job-state")).to_have_text("active")
        # The next 10 fire times, 2 s apart, as GET …/next answers them.
        expect(page.locator("#job-next li")).to_have_count(10)
        expect(page.locator("#job-next-note")).to_contain_text("From the job's progress")
        # Live refresh fills the history as the job fires; it matches the server's.
        wait_until(lambda: run_rows(page) >= 3, WAIT_MS / 1000, 0.2)
        assert run_rows(page) >= 3, run_rows(page)
        runs = call("GET", "/jobsd/v1/jobs/sync-inventory/runs?limit=100", want=200)[1]["runs"]
        shown = page.locator("#runs-body tr code").evaluate_all(
            "cs => cs.map(c => c.title)")
        server_ids = [r["executionId"] for r in runs]
        assert shown[-1] in server_ids and shown[0] in server_ids[:3], (shown[:3], server_ids[:3])
        expect(page.locator("#runs-body tr").first).to_contain_text("success")
        b["browser"].shot(page, "job.png")

        # A far schedule: the page's ten are exactly the server's (jitter and zone included).
        page.goto(UI + "#/job/report-daily")
        expect(page.locator("#job-next li")).to_have_count(10)
        shown = page.locator("#job-next time").evaluate_all(
            "ts => ts.map(t => t.getAttribute('datetime'))")
        ticks = call("GET", "/jobsd/v1/jobs/report-daily/next?count=10", want=200)[1]["ticks"]
        assert shown == [t["fireTime"] for t in ticks], (shown, ticks)
        expect(page.locator("#job-next-note")).to_contain_text("Europe/Berlin")
        expect(page.locator("#job-spec")).to_contain_text("catchUp")
        expect(page.locator("#job-spec")).to_contain_text('{"format":"pdf"}')
        page.goto(UI + "#/job/report-weekly")
        expect(page.locator("#job-spec")).to_contain_text("exponential (initialInterval 1s")

        page.goto(UI + "#/job/fail-export-ledger")
        expect(page.locator("#job-status")).to_contain_text("app responded with HTTP status 500")
        expect(page.locator("#runs-body")).to_contain_text("HTTP 500")
        expect(page.locator("#job-spec")).to_contain_text("constant (interval 1s, maxRetries 1)")
        b["browser"].shot(page, "job-failing.png")

    @s.check
    def pause_and_resume_change_the_state_and_the_server_agrees():
        page = b["page"]
        page.goto(UI + "#/job/sync-inventory")
        expect(page.locator("#job-state")).to_have_text("active")
        expect(page.locator("#btn-resume")).to_be_disabled()
        page.fill("#pause-note", "inventory db upgrade")
        page.locator("#btn-pause").click()
        expect(page.locator("#toast")).to_contain_text("Paused sync-inventory")
        expect(page.locator("#job-state")).to_have_text("paused")
        status = view("sync-inventory")["status"]
        assert status["state"] == "paused", status
        assert status["pausedNote"] == "inventory db upgrade", status
        expect(page.locator("#job-status")).to_contain_text("inventory db upgrade")
        expect(page.locator("#btn-pause")).to_be_disabled()
        expect(page.locator("#job-next-note")).to_contain_text("paused")
        b["browser"].shot(page, "job-paused.png")

        page.locator("#btn-resume").click()
        expect(page.locator("#toast")).to_contain_text("Resumed sync-inventory")
        expect(page.locator("#job-state")).to_have_text("active")
        assert view("sync-inventory")["status"]["state"] == "active"
        # And in the list.
        page.locator("#back-link").click()
        expect(cell(page, "sync-inventory", "state")).to_have_text("active")

    @s.check
    def run_now_runs_a_job_whose_schedule_is_far_off():
        page = b["page"]
        page.goto(UI + "#/job/report-weekly")
        expect(page.locator("#runs-body td.empty")).to_have_text("No runs yet.")
        page.locator("#btn-trigger").click()
        toast = page.locator("#toast")
        expect(toast).to_contain_text("Run started for report-weekly")
        execution = re.search(r"execution ([0-9a-f-]{36})", toast.inner_text()).group(1)
        expect(page.locator("#runs-body tr").first).to_contain_text("manual")
        expect(page.locator("#runs-body tr").first).to_contain_text("success")
        runs = call("GET", "/jobsd/v1/jobs/report-weekly/runs", want=200)[1]["runs"]
        assert [r["executionId"] for r in runs] == [execution], runs
        assert runs[0]["trigger"] == "manual", runs

        def delivered():
            with open(events) as f:
                return any(json.loads(line).get("name") == "report-weekly" for line in f)
        assert wait_until(delivered, 10), "the app got no call for report-weekly"
        assert view("report-weekly")["status"]["counters"]["delivered"] == 1

    @s.check
    def live_refresh_can_be_paused_and_resumed():
        page = b["page"]
        page.goto(UI + "#/job/sync-inventory")
        counter = page.locator("#job-counters dd").first
        expect(counter).not_to_have_text("0")
        toggle = page.locator("#live-toggle")
        expect(toggle).to_have_attribute("aria-pressed", "true")
        toggle.click()
        expect(toggle).to_have_attribute("aria-pressed", "false")
        time.sleep(1)  # a refresh already under way may still land
        before = counter.inner_text()
        server_before = view("sync-inventory")["status"]["counters"]["delivered"]
        time.sleep(7)  # more than a refresh period, several ticks of the job
        assert view("sync-inventory")["status"]["counters"]["delivered"] > server_before
        assert counter.inner_text() == before, "the page refreshed while live was off"
        toggle.click()
        expect(toggle).to_have_attribute("aria-pressed", "true")
        expect(counter).not_to_have_text(before)

    @s.check
    def concurrency_limits_are_set_shown_and_deleted():
        page = b["page"]
        page.goto(UI)
        expect(page.locator("#limits")).to_be_visible()
        expect(page.locator("#rules-body td.empty")).to_have_text("No limits set.")
        page.fill("#rule-key", "tenant-*")
        page.fill("#rule-limit", "2")
        page.locator("#rule-form button[type=submit]").click()
        expect(page.locator("#toast")).to_contain_text("Limit of tenant-* set to 2.")
        expect(page.locator('#rules-body tr[data-rule="tenant-*"]')).to_contain_text("2")
        rules = call("GET", "/jobsd/v1/concurrency", want=200)[1]["rules"]
        assert rules == [{"key": "tenant-*", "limit": 2}], rules
        # A refused value says why, and changes nothing.
        page.fill("#rule-key", "vip")
        page.fill("#rule-limit", "0")
        page.evaluate("() => document.getElementById('rule-limit').removeAttribute('min')")
        page.locator("#rule-form button[type=submit]").click()
        expect(page.locator("#toast")).to_contain_text("limit: 0 is not between 1 and")
        b["browser"].shot(page, "limits.png")
        page.get_by_role("button", name="Delete the limit of tenant-*").click()
        expect(page.locator("#toast")).to_contain_text("Deleted the limit of tenant-*.")
        expect(page.locator("#rules-body td.empty")).to_have_text("No limits set.")
        assert call("GET", "/jobsd/v1/concurrency", want=200)[1]["rules"] == []

    @s.check
    def the_readme_screenshot():
        # A fixed-size view of the list, after the jobs have run a while.
        page = b["browser"].page(1280, 760)
        page.goto(UI)
        expect_rows(page, JOBS)
        page.locator("#f-prefix").blur()
        b["browser"].shot(page, "readme.png", full=False)
        page.context.close()

    @s.check
    def no_script_error_csp_violation_or_request_elsewhere():
        browser = b.pop("browser")
        browser.close()
        assert not browser.errors, browser.errors
        assert not browser.foreign, browser.foreign

    return s


def token_phase(token: str, shots: str) -> Suite:
    s = Suite("token")
    b = {}

    @s.check
    def a_job_is_created_with_the_token():
        call("POST", "/jobsd/v1/jobs/payroll-run", {"schedule": "@every 1h",
                                                    "labels": {"team": "finance"}},
             token=token, want=204)
        call("GET", "/jobsd/v1/jobs", want=401)
        b["browser"] = Browser(shots)

    @s.check
    def without_the_token_the_page_asks_for_it_and_shows_no_data():
        page = b["page"] = b["browser"].page()
        page.goto(UI)
        expect(page.locator("#token-view")).to_be_visible()
        expect(page.locator("#token-input")).to_be_focused()
        expect(page.locator("#list-view")).to_be_hidden()
        assert "payroll-run" not in page.content()
        assert rows(page) == []
        # The page's own call, as it makes it without a token: refused.
        status = page.evaluate("fetch('../v1/jobs').then(r => r.status)")
        assert status == 401, status
        b["browser"].shot(page, "token.png")

    @s.check
    def a_wrong_token_is_refused():
        page = b["page"]
        page.fill("#token-input", "not-the-token")
        page.locator("#token-form button[type=submit]").click()
        expect(page.locator("#token-view")).to_be_visible()
        expect(page.locator("#token-reason")).to_contain_text("refused")
        assert "payroll-run" not in page.content()

    @s.check
    def with_the_token_the_console_works():
        page = b["page"]
        page.fill("#token-input", token)
        page.locator("#token-form button[type=submit]").click()
        expect_rows(page, ["payroll-run"])
        open_job(page, "payroll-run")
        page.locator("#btn-pause").click()
        expect(page.locator("#job-state")).to_have_text("paused")
        assert view("payroll-run", token)["status"]["state"] == "paused"
        page.locator("#btn-resume").click()
        expect(page.locator("#job-state")).to_have_text("active")
        assert view("payroll-run", token)["status"]["state"] == "active"
        b["browser"].shot(page, "token-job.png")

    @s.check
    def the_token_stays_in_the_tab_only():
        page = b["page"]
        page.reload()
        expect(page.locator("#job-state")).to_have_text("active")
        other = b["browser"].page()
        other.goto(UI)
        expect(other.locator("#token-view")).to_be_visible()
        assert "payroll-run" not in other.content()
        other.context.close()

    @s.check
    def forget_token_asks_again():
        page = b["page"]
        page.locator("#forget-token").click()
        expect(page.locator("#token-view")).to_be_visible()
        assert page.evaluate("sessionStorage.length") == 0
        browser = b.pop("browser")
        browser.close()
        assert not browser.foreign, browser.foreign
        assert not browser.errors, browser.errors

    return s


PHASES = {
    "browse": (browse_phase, 2),
    "token": (token_phase, 2),
}


if __name__ == "__main__":
    sys.exit(run_phase_of(PHASES, sys.argv, __doc__))
