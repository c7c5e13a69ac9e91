// jobsd console: plain JavaScript, no build step, no dependency (its parts are in parts.js).
// Everything it shows comes from jobsd's own routes (/jobsd/v1/...), called with the
// `dapr-api-token` header when a token was given. Data is put on the page as text nodes only
// (never as HTML), and the Content-Security-Policy the page is served with allows no inline
// script or style.
'use strict';

(() => {
  const {
    h, clear, relative, timeEl, caller, labelChips, badge, fillKv, flatten, failureText,
    dataText, splitLabels, scheduleText,
  } = window.jobsdParts;
  const TOKEN_KEY = 'jobsd.console.token';
  const LIVE_KEY = 'jobsd.console.live';
  const REFRESH_MS = 5000;
  const RUNS_PAGE = 20;
  const MAX_RUNS = 1000;
  const NEXT_COUNT = 10;
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ DOM helpers

  let toastTimer = 0;
  /** A short message in the live region (announced by screen readers). */
  function toast(message, bad) {
    const el = $('toast');
    el.textContent = message;
    el.classList.toggle('bad', !!bad);
    el.classList.add('show');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => el.classList.remove('show'), bad ? 8000 : 4000);
  }

  function showError(el, message) {
    el.textContent = message || '';
    el.hidden = !message;
  }

  function tickRelativeTimes() {
    const now = Date.now();
    for (const el of document.querySelectorAll('time[data-rel="relative"]')) {
      el.textContent = relative(el.getAttribute('datetime'), now);
    }
    const updated = $('updated');
    if (lastUpdated) updated.textContent = `updated ${relative(new Date(lastUpdated).toISOString(), now)}`;
  }

  // ------------------------------------------------------------------ calls

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  const call = caller({
    token,
    unauthorized: (hadToken) => askForToken(hadToken ? 'The token was refused: enter the right one.' : ''),
  });
  const enc = encodeURIComponent;

  // ------------------------------------------------------------------ token

  let needsToken = false;

  function askForToken(reason) {
    needsToken = true;
    stopLive();
    for (const id of ['list-view', 'job-view']) $(id).hidden = true;
    $('token-view').hidden = false;
    $('live-controls').hidden = true;
    lastUpdated = 0;
    $('updated').textContent = '';
    $('token-reason').textContent = reason
      || 'This jobsd requires an API token (DAPR_API_TOKEN). Enter it to see and steer its jobs.';
    $('forget-token').hidden = !token();
    $('token-input').focus();
  }

  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const value = $('token-input').value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $('token-input').value = '';
    needsToken = false;
    $('token-view').hidden = true;
    $('forget-token').hidden = false;
    loadAppId();
    route();
  });

  $('forget-token').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $('forget-token').hidden = true;
    $('app-id').textContent = '';
    toast('Token forgotten.');
    route();
  });

  async function loadAppId() {
    try {
      const meta = await call('GET', 'v1.0/metadata');
      $('app-id').textContent = meta && meta.id ? `app ${meta.id}` : '';
    } catch (_) {
      // The header line is a nicety; a refusal is handled by the view's own call.
    }
  }

  // ------------------------------------------------------------------ live refresh

  let live = sessionStorage.getItem(LIVE_KEY) !== 'off';
  let liveTimer = 0;
  let lastUpdated = 0;
  let refresh = null; // the current view's reload function: true when it showed fresh data

  function showLive() {
    const button = $('live-toggle');
    button.setAttribute('aria-pressed', String(live));
    button.textContent = live ? 'Live: on' : 'Live: off';
    button.title = live
      ? `Reloads every ${REFRESH_MS / 1000} seconds; press to pause`
      : 'Live refresh is paused; press to resume';
  }

  function stopLive() {
    clearTimeout(liveTimer);
    liveTimer = 0;
  }

  function scheduleLive() {
    stopLive();
    if (live && refresh && !needsToken && !document.hidden) {
      liveTimer = setTimeout(() => runRefresh(), REFRESH_MS);
    }
  }

  async function runRefresh() {
    if (!refresh) return;
    stopLive();
    try {
      if (await refresh()) {
        lastUpdated = Date.now();
        tickRelativeTimes();
      }
    } finally {
      scheduleLive();
    }
  }

  $('live-toggle').addEventListener('click', () => {
    live = !live;
    sessionStorage.setItem(LIVE_KEY, live ? 'on' : 'off');
    showLive();
    toast(live ? 'Live refresh on.' : 'Live refresh paused.');
    if (live) runRefresh();
    else stopLive();
  });
  $('refresh-now').addEventListener('click', () => runRefresh());
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) stopLive();
    else if (live) runRefresh();
  });

  // ------------------------------------------------------------------ routing

  /** The view the address asks for: `#/?prefix=&label=&state=&pageSize=` or `#/job/<name>`. */
  function parseHash() {
    const hash = location.hash.replace(/^#/, '') || '/';
    if (hash.startsWith('/job/')) {
      try {
        return { view: 'job', name: decodeURIComponent(hash.slice(5)) };
      } catch (_) {
        return { view: 'job', name: hash.slice(5) };
      }
    }
    const at = hash.indexOf('?');
    return { view: 'list', params: new URLSearchParams(at < 0 ? '' : hash.slice(at + 1)) };
  }

  let generation = 0; // bumps on every navigation: answers for an older view are dropped

  function route() {
    generation += 1;
    stopLive();
    const where = parseHash();
    $('token-view').hidden = true;
    $('live-controls').hidden = false;
    needsToken = false;
    if (where.view === 'job') openJob(where.name);
    else openList(where.params);
  }

  window.addEventListener('hashchange', route);

  // ------------------------------------------------------------------ jobs list

  const list = { filters: null, tokens: [''], page: 0, next: null };

  function filtersFromParams(params) {
    return {
      prefix: params.get('prefix') || '',
      label: params.getAll('label').join(', '),
      state: params.get('state') || '',
      pageSize: params.get('pageSize') || '50',
    };
  }

  function openList(params) {
    const filters = filtersFromParams(params);
    $('job-view').hidden = true;
    $('list-view').hidden = false;
    const form = $('filters');
    form.prefix.value = filters.prefix;
    form.label.value = filters.label;
    form.state.value = filters.state;
    // Any size 1–1000 given in the address is offered (the server caps it the same way).
    const size = String(Math.min(Math.max(parseInt(filters.pageSize, 10) || 50, 1), 1000));
    if (![...form.pageSize.options].some((o) => o.value === size)) {
      form.pageSize.append(h('option', { text: size }));
    }
    form.pageSize.value = size;
    filters.pageSize = size;
    const same = JSON.stringify(filters) === JSON.stringify(list.filters);
    if (!same) {
      list.filters = filters;
      list.tokens = [''];
      list.page = 0;
    }
    document.title = 'Jobs · jobsd console';
    refresh = loadList;
    runRefresh();
  }

  $('filters').addEventListener('submit', (e) => {
    e.preventDefault();
    const form = e.target;
    const q = new URLSearchParams();
    if (form.prefix.value.trim()) q.set('prefix', form.prefix.value.trim());
    for (const l of splitLabels(form.label.value)) q.append('label', l);
    if (form.state.value) q.set('state', form.state.value);
    if (form.pageSize.value !== '50') q.set('pageSize', form.pageSize.value);
    const hash = `#/${q.toString() ? `?${q}` : ''}`;
    if (location.hash === hash) route();
    else location.hash = hash;
  });
  $('filters').addEventListener('reset', (e) => {
    e.preventDefault();
    if (location.hash === '#/' || location.hash === '') route();
    else location.hash = '#/';
  });

  async function loadList() {
    const mine = generation;
    const f = list.filters;
    const q = new URLSearchParams();
    if (f.prefix) q.set('prefix', f.prefix);
    for (const l of splitLabels(f.label)) q.append('label', l);
    if (f.state) q.set('state', f.state);
    q.set('pageSize', f.pageSize);
    const pageToken = list.tokens[list.page];
    if (pageToken) q.set('pageToken', pageToken);
    const body = $('jobs-body');
    body.closest('table').setAttribute('aria-busy', 'true');
    try {
      const [page] = await Promise.all([call('GET', `v1/jobs?${q}`), loadLimits(mine)]);
      if (mine !== generation) return;
      showError($('list-error'), '');
      list.next = page.nextPageToken || null;
      renderJobs(page.jobs || []);
      return true;
    } catch (e) {
      if (mine !== generation || e.status === 401) return false;
      showError($('list-error'), `Could not list jobs: ${e.message}`);
      return false;
    } finally {
      body.closest('table').removeAttribute('aria-busy');
    }
  }

  function scheduleCell(job) {
    const extra = [];
    if (job.repeats) extra.push(`${job.repeats} repeats`);
    if (job.schedule && job.dueTime) extra.push(`from ${job.dueTime}`);
    if (job.ttl) extra.push(`ttl ${job.ttl}`);
    return h('td', {},
      h('code', { text: scheduleText(job) }),
      extra.length ? h('span', { class: 'sub', text: extra.join(' · ') }) : null);
  }

  function lastFireCell(status) {
    const last = status.lastFireTime || {};
    const when = last.actual || last.nominal;
    if (!when) return h('td', {}, h('span', { class: 'muted', text: 'never' }));
    return h('td', {}, timeEl(when), ' ',
      status.lastOutcome ? badge(status.lastOutcome) : null);
  }

  function renderJobs(jobs) {
    const body = $('jobs-body');
    const focused = document.activeElement && body.contains(document.activeElement)
      ? document.activeElement.dataset.key : null;
    clear(body);
    if (!jobs.length) {
      const filtered = list.filters.prefix || list.filters.label || list.filters.state;
      body.append(h('tr', {}, h('td', {
        colspan: 8,
        class: 'empty',
        text: filtered ? 'No job matches these filters.' : 'No jobs yet.',
      })));
    }
    for (const view of jobs) {
      const job = view.job || {};
      const status = view.status || {};
      const counters = status.counters || {};
      const name = view.name || job.name;
      const labels = Object.entries(view.labels || {});
      body.append(h('tr', { 'data-name': name },
        h('td', { class: 'name' },
          h('a', { href: `#/job/${enc(name)}`, 'data-key': `job:${name}`, text: name }),
          labels.length ? labelChips(labels) : null),
        h('td', { class: 'state' }, badge(status.state || 'active')),
        scheduleCell(job),
        h('td', {}, status.state === 'active' || !status.state ? timeEl(status.nextFireTime)
          : h('span', { class: 'muted', text: '—' })),
        lastFireCell(status),
        h('td', { class: 'num', text: counters.delivered ?? 0 }),
        h('td', { class: 'num', text: counters.succeeded ?? 0 }),
        h('td', { class: 'num', text: counters.failedAttempts ?? 0 })));
    }
    if (focused) {
      const again = body.querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
    $('jobs-caption').textContent = `Jobs, page ${list.page + 1}`;
    $('page-info').textContent = `Page ${list.page + 1} · ${jobs.length} job${jobs.length === 1 ? '' : 's'}`;
    $('page-first').disabled = list.page === 0;
    $('page-prev').disabled = list.page === 0;
    $('page-next').disabled = !list.next;
  }

  // ------------------------------------------------------------------ concurrency limits

  /** Loads the rules and the keys out and waiting; a scheduler without them hides the card. */
  async function loadLimits(mine) {
    try {
      const view = await call('GET', 'v1/concurrency');
      if (mine !== generation) return;
      $('limits').hidden = false;
      showError($('limits-error'), '');
      renderLimits(view || {});
    } catch (e) {
      if (mine !== generation || e.status === 401) return;
      if (e.status === 412) {
        $('limits').hidden = true;
        return;
      }
      $('limits').hidden = false;
      showError($('limits-error'), `Could not load the limits: ${e.message}`);
    }
  }

  function renderLimits(view) {
    const rules = $('rules-body');
    clear(rules);
    if (!(view.rules || []).length) {
      rules.append(h('tr', {}, h('td', { colspan: 3, class: 'empty', text: 'No limits set.' })));
    }
    for (const rule of view.rules || []) {
      const del = h('button', { type: 'button', class: 'link', text: 'Delete' });
      del.setAttribute('aria-label', `Delete the limit of ${rule.key}`);
      del.addEventListener('click', () => changeRule(del, 'DELETE', rule.key, undefined,
        `Deleted the limit of ${rule.key}.`));
      rules.append(h('tr', { 'data-rule': rule.key },
        h('td', {}, h('code', { text: rule.key })),
        h('td', { class: 'num', text: rule.limit }),
        h('td', {}, del)));
    }
    const keys = $('keys-body');
    clear(keys);
    if (!(view.keys || []).length) {
      keys.append(h('tr', {}, h('td', { colspan: 5, class: 'empty', text: 'No key has executions out or waiting.' })));
    }
    for (const k of view.keys || []) {
      keys.append(h('tr', { 'data-key-state': k.key },
        h('td', {}, h('code', { text: k.key })),
        h('td', {}, k.rule ? h('code', { text: k.rule }) : h('span', { class: 'muted', text: 'none' })),
        h('td', { class: 'num', text: k.limit ?? '—' }),
        h('td', { class: 'num', text: k.inFlight }),
        h('td', { class: 'num', text: k.waiting })));
    }
  }

  /** Sets or deletes a rule from the card, says what happened, reloads. */
  async function changeRule(button, method, key, body, done) {
    button.disabled = true;
    try {
      await call(method, `v1/concurrency/${enc(key)}`, body);
      toast(done);
    } catch (e) {
      if (e.status !== 401) toast(`Could not change the limit of ${key}: ${e.message}`, true);
    } finally {
      button.disabled = false;
      await runRefresh();
    }
  }

  $('rule-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const key = form.key.value.trim();
    const limit = parseInt(form.limit.value, 10);
    if (!key) return;
    changeRule(form.querySelector('button[type=submit]'), 'PUT', key, { limit },
      `Limit of ${key} set to ${limit}.`);
  });

  $('page-next').addEventListener('click', () => {
    if (!list.next) return;
    list.tokens = list.tokens.slice(0, list.page + 1).concat([list.next]);
    list.page += 1;
    runRefresh();
  });
  $('page-prev').addEventListener('click', () => {
    if (list.page === 0) return;
    list.page -= 1;
    runRefresh();
  });
  $('page-first').addEventListener('click', () => {
    list.page = 0;
    runRefresh();
  });

  // ------------------------------------------------------------------ one job

  const job = { name: '', view: null, runsShown: RUNS_PAGE, nextBefore: null };

  function openJob(name) {
    $('list-view').hidden = true;
    $('job-view').hidden = false;
    const fresh = job.name !== name;
    job.name = name;
    if (fresh) {
      job.view = null;
      job.runsShown = RUNS_PAGE;
      for (const id of ['job-status', 'job-counters', 'job-spec', 'job-next', 'runs-body']) clear($(id));
      $('job-state').textContent = '';
      $('pause-note').value = '';
    }
    $('job-title').textContent = name;
    document.title = `${name} · jobsd console`;
    $('job-title').focus();
    refresh = loadJob;
    runRefresh();
  }

  async function loadJob() {
    const mine = generation;
    const name = job.name;
    const path = `v1/jobs/${enc(name)}`;
    const [view, runs, next] = await Promise.allSettled([
      call('GET', path),
      call('GET', `${path}/runs?limit=${Math.min(job.runsShown, MAX_RUNS)}`),
      call('GET', `${path}/next?count=${NEXT_COUNT}`),
    ]);
    if (mine !== generation || needsToken) return false;
    if (view.status === 'rejected') {
      const e = view.reason;
      showError($('job-error'), e.status === 404
        ? `There is no job named “${name}” (deleted, or finished and past --finished-retention).`
        : `Could not load the job: ${e.message}`);
      setButtons(null);
      return false;
    }
    showError($('job-error'), '');
    job.view = view.value;
    renderJob(view.value);
    if (runs.status === 'fulfilled') renderRuns(runs.value, false);
    renderNext(view.value, next);
    return true;
  }

  function setButtons(view) {
    const state = view && view.status ? view.status.state : null;
    $('btn-pause').disabled = !view || state !== 'active';
    $('btn-resume').disabled = !view || state !== 'paused';
    $('btn-trigger').disabled = !view || state === 'finished';
    $('pause-note').disabled = !view || state !== 'active';
  }

  function renderJob(view) {
    const status = view.status || {};
    const state = status.state || 'active';
    const stateEl = $('job-state');
    stateEl.className = `badge ${state}`;
    stateEl.textContent = state;
    setButtons(view);
    const last = status.lastFireTime || {};
    const held = status.held || [];
    fillKv($('job-status'), [
      ['State', state],
      ['Next fire', state === 'active' ? timeEl(status.nextFireTime) : null],
      ['Last fire (scheduled)', last.nominal ? timeEl(last.nominal) : 'never'],
      ['Last fire (actual)', last.actual ? timeEl(last.actual) : null],
      ['Last outcome', status.lastOutcome ? badge(status.lastOutcome) : null],
      ['Last error', status.lastError],
      ['Ticks', status.ticks],
      ['Current attempt', status.currentAttempt || null],
      ['In flight', status.inFlight ? 'yes' : 'no'],
      ['Staged (app down)', status.staged ? 'yes' : null],
      ['Waiting', status.waiting],
      ['Held executions', held.length ? held.length : null],
      ['Paused', status.pausedAt ? timeEl(status.pausedAt) : null],
      ['Paused because', status.pausedReason],
      ['Pause note', status.pausedNote],
      ['Finished', status.finishedAt ? timeEl(status.finishedAt) : null],
    ]);
    const c = status.counters || {};
    fillKv($('job-counters'), [
      ['Delivered', c.delivered ?? 0],
      ['Succeeded', c.succeeded ?? 0],
      ['Failed attempts', c.failedAttempts ?? 0],
      ['Dropped ticks', c.dropped ?? 0],
      ['Staged', c.staged ?? 0],
      ...flatten(c.skipped || {}, '').map(([k, v]) => [`Skipped: ${k}`, v]),
      ...flatten(c.onExhausted || {}, '').map(([k, v]) => [`On exhausted: ${k}`, v]),
    ]);
    const j = view.job || {};
    const labels = Object.entries(view.labels || {});
    fillKv($('job-spec'), [
      'Dapr job',
      ['Schedule', j.schedule ? h('code', { text: j.schedule }) : null],
      ['Due time', j.dueTime],
      ['Repeats', j.repeats],
      ['TTL', j.ttl],
      ['Data', dataText(j.data)],
      // With jobsd's own failure policy Dapr's GET shows `drop`: jobsd's is the one acted on.
      ['Failure policy', view.failurePolicy ? null : failureText(j.failurePolicy)],
      ...(view.policy || view.failurePolicy ? ['jobsd'] : []),
      ...flatten(view.policy, ''),
      ['Failure policy', failureText(view.failurePolicy)],
      ['Labels', labels.length ? labelChips(labels) : null],
    ]);
  }

  function renderNext(view, next) {
    const ol = $('job-next');
    const note = $('job-next-note');
    clear(ol);
    const state = (view.status || {}).state || 'active';
    if (next.status === 'fulfilled' && next.value && Array.isArray(next.value.ticks)) {
      const ticks = next.value.ticks;
      for (const t of ticks) {
        const when = t.fireTime || t.time;
        const local = t.local && t.local !== t.time ? ` · ${t.local} ${t.abbreviation || ''}` : '';
        // The paused note is on every tick: said once, below the list.
        const own = (t.notes || []).filter((n) => !n.startsWith('the job is paused'));
        const notes = own.length ? ` · ${own.join('; ')}` : '';
        ol.append(h('li', {}, timeEl(when, 'absolute'), ' ',
          h('span', { class: 'muted small', text: `(${relative(when)}${local}${notes})` })));
      }
      const zone = next.value.zone ? `Zone ${next.value.zone}. ` : '';
      note.textContent = ticks.length ? `${zone}From the job's progress.`
        : 'No more fire times: the job has none left.';
      note.hidden = false;
      if (next.value.paused) {
        note.textContent += ' The job is paused: these are skipped unless it is resumed first.';
      }
      return;
    }
    // Without the route's answer (remote mode answers 412: the replicas keep the progress):
    // the next one only, from the status.
    const first = (view.status || {}).nextFireTime;
    if (first && state === 'active') ol.append(h('li', {}, timeEl(first, 'absolute')));
    note.textContent = next.status === 'rejected'
      ? `Only the next fire time is known here (${next.reason.message}).`
      : '';
    note.hidden = !note.textContent;
  }

  function renderRuns(answer, append) {
    const body = $('runs-body');
    if (!append) clear(body);
    const runs = (answer && answer.runs) || [];
    job.nextBefore = answer ? answer.nextBefore : null;
    if (!append && !runs.length) {
      body.append(h('tr', {}, h('td', { colspan: 8, class: 'empty', text: 'No runs yet.' })));
    }
    for (const r of runs) {
      const status = r.httpStatus ? `HTTP ${r.httpStatus}` : (r.grpcCode ? `gRPC ${r.grpcCode}` : '');
      body.append(h('tr', {},
        h('td', {}, timeEl(r.started)),
        h('td', {}, timeEl(r.nominalTime, 'absolute')),
        h('td', { text: r.trigger || 'schedule' }),
        h('td', { class: 'num', text: r.attempt }),
        h('td', {}, badge(r.outcome), status ? h('span', { class: 'sub', text: status }) : null),
        h('td', { class: 'num', text: r.latencyMs === null || r.latencyMs === undefined ? '—' : `${Number(r.latencyMs).toFixed(1)} ms` }),
        h('td', {}, h('code', { title: r.executionId, text: String(r.executionId || '').slice(0, 8) })),
        h('td', { class: 'error-text', text: r.error || '' })));
    }
    $('runs-more').disabled = job.nextBefore === null || job.nextBefore === undefined;
  }

  $('runs-more').addEventListener('click', async () => {
    if (job.nextBefore === null || job.nextBefore === undefined) return;
    try {
      const answer = await call('GET',
        `v1/jobs/${enc(job.name)}/runs?limit=${RUNS_PAGE}&before=${job.nextBefore}`);
      job.runsShown += (answer.runs || []).length;
      renderRuns(answer, true);
    } catch (e) {
      if (e.status !== 401) toast(`Could not load older runs: ${e.message}`, true);
    }
  });

  /** Runs a steering call from a button: disables it meanwhile, says what happened, reloads. */
  async function steer(button, method, path, body, done) {
    const name = job.name;
    button.disabled = true;
    try {
      const answer = await call(method, `v1/jobs/${enc(name)}/${path}`, body);
      toast(done(answer));
    } catch (e) {
      if (e.status !== 401) toast(`${button.textContent} failed: ${e.message}`, true);
    } finally {
      if (name === job.name) await runRefresh();
    }
  }

  $('btn-pause').addEventListener('click', (e) => {
    const note = $('pause-note').value.trim();
    steer(e.currentTarget, 'POST', 'pause', note ? { note } : undefined, () => {
      $('pause-note').value = '';
      return `Paused ${job.name}: no tick fires until it is resumed.`;
    });
  });
  $('btn-resume').addEventListener('click', (e) => {
    steer(e.currentTarget, 'POST', 'resume', undefined, () => `Resumed ${job.name}.`);
  });
  $('btn-trigger').addEventListener('click', (e) => {
    steer(e.currentTarget, 'POST', 'trigger', undefined,
      (answer) => `Run started for ${job.name} (execution ${answer && answer.executionId}).`);
  });

  // ------------------------------------------------------------------ keyboard

  document.addEventListener('keydown', (e) => {
    const typing = /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
    if (e.key === '/' && !typing && !$('list-view').hidden) {
      e.preventDefault();
      $('f-prefix').focus();
    }
  });

  // ------------------------------------------------------------------ start

  showLive();
  $('forget-token').hidden = !token();
  setInterval(tickRelativeTimes, 1000);
  loadAppId();
  route();
})();
