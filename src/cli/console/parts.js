// jobsd console, the parts the views are built from: elements, times, calls to jobsd, and how
// a job's values read. No state of its own; console.js is the console. Data goes on the page as
// text nodes only, never as HTML.
'use strict';

window.jobsdParts = (() => {
  // The page is /jobsd/ui/: jobsd's routes are at ../v1/, Dapr's at ../../v1.0/ (relative, so
  // the console also works behind a proxy that mounts jobsd under a path).
  const JOBSD_BASE = new URL('../', location.href);
  const ROOT_BASE = new URL('../../', location.href);

  // ------------------------------------------------------------------ elements

  /** An element with attributes (`class`, `text`, `on…`, others as attributes) and children. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function clear(el) {
    while (el.firstChild) el.firstChild.remove();
  }

  // ------------------------------------------------------------------ time

  /** Milliseconds since the epoch of an RFC 3339 time (nanoseconds cut to milliseconds). */
  function parseTime(text) {
    if (!text) return NaN;
    return Date.parse(String(text).replace(/(\.\d{3})\d+/, '$1'));
  }

  function span(seconds) {
    const s = Math.round(seconds);
    if (s < 60) return `${s}s`;
    if (s < 600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ''}`;
    if (s < 3600) return `${Math.floor(s / 60)}m`;
    if (s < 86400) {
      const m = Math.floor((s % 3600) / 60);
      return `${Math.floor(s / 3600)}h${m ? ` ${m}m` : ''}`;
    }
    const hours = Math.floor((s % 86400) / 3600);
    return `${Math.floor(s / 86400)}d${hours ? ` ${hours}h` : ''}`;
  }

  /** "in 4m 10s", "12s ago", "now". */
  function relative(text, now = Date.now()) {
    const t = parseTime(text);
    if (Number.isNaN(t)) return '—';
    const seconds = (t - now) / 1000;
    if (Math.abs(seconds) < 1) return 'now';
    return seconds > 0 ? `in ${span(seconds)}` : `${span(-seconds)} ago`;
  }

  function absolute(text) {
    const t = parseTime(text);
    if (Number.isNaN(t)) return String(text);
    return new Date(t).toLocaleString(undefined, {
      year: 'numeric', month: 'short', day: 'numeric',
      hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
  }

  /** A <time> that shows a relative time (kept current) and the exact one on hover. */
  function timeEl(text, mode) {
    if (!text) return h('span', { class: 'muted', text: '—' });
    const el = h('time', { datetime: text, title: `${absolute(text)} (${text})` });
    el.dataset.rel = mode || 'relative';
    el.textContent = mode === 'absolute' ? absolute(text) : relative(text);
    return el;
  }

  // ------------------------------------------------------------------ calls

  class CallError extends Error {
    constructor(status, message, code) {
      super(message);
      this.status = status;
      this.code = code || '';
    }
  }

  /** A function that makes one call to jobsd: `call(method, path, body)` answers the parsed
   * JSON (null when empty) or throws a CallError. `hooks.token()` gives the token to send;
   * `hooks.unauthorized(hadToken)` hears of a 401 before it is thrown. */
  function caller(hooks) {
    return async (method, path, body) => {
      const headers = { accept: 'application/json' };
      const t = hooks.token();
      if (t) headers['dapr-api-token'] = t;
      const init = { method, headers, cache: 'no-store', credentials: 'omit' };
      if (body !== undefined) {
        headers['content-type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      const url = new URL(path, path.startsWith('v1.0/') ? ROOT_BASE : JOBSD_BASE);
      let res;
      try {
        res = await fetch(url, init);
      } catch (e) {
        throw new CallError(0, `jobsd did not answer (${e.message})`);
      }
      const text = await res.text();
      let json = null;
      try {
        json = text ? JSON.parse(text) : null;
      } catch (_) {
        json = null;
      }
      if (res.status === 401) {
        hooks.unauthorized(!!t);
        throw new CallError(401, 'an API token is needed', 'unauthorized');
      }
      if (!res.ok) {
        const message = (json && (json.message || json.errorCode)) || text.trim() || res.statusText;
        throw new CallError(res.status, message, json && json.errorCode);
      }
      return json;
    };
  }

  // ------------------------------------------------------------------ values

  function splitLabels(text) {
    return String(text || '').split(',').map((s) => s.trim()).filter(Boolean);
  }

  function scheduleText(job) {
    if (job.schedule) return job.schedule;
    if (job.dueTime) return `once, due ${job.dueTime}`;
    return '—';
  }

  function labelChips(labels) {
    return h('div', { class: 'labels' },
      labels.map(([k, v]) => h('span', { class: 'chip', text: `${k}=${v}` })));
  }

  function badge(text, kind) {
    return h('span', { class: `badge ${kind || text}`, text });
  }

  /** `rows` into a <dl>: [term, value] pairs (value: text or node); a string alone is a group
   * heading. Pairs whose value is undefined, null or '' are left out. */
  function fillKv(dl, rows) {
    clear(dl);
    for (const row of rows) {
      if (typeof row === 'string') {
        dl.append(h('dt', { class: 'group', text: row }));
        continue;
      }
      const [term, value] = row;
      if (value === undefined || value === null || value === '') continue;
      dl.append(h('dt', { text: term }),
        h('dd', {}, value instanceof Node ? value : String(value)));
    }
    if (!dl.firstChild) dl.append(h('dd', { class: 'muted', text: 'none' }));
  }

  /** A JSON value flattened to [dotted.path, text] pairs. */
  function flatten(value, prefix, out = []) {
    if (value === null || value === undefined) return out;
    if (typeof value === 'object' && !Array.isArray(value)) {
      const entries = Object.entries(value);
      if (!entries.length && prefix) out.push([prefix, '{}']);
      for (const [k, v] of entries) flatten(v, prefix ? `${prefix}.${k}` : k, out);
      return out;
    }
    out.push([prefix, Array.isArray(value) ? value.join(', ') : String(value)]);
    return out;
  }

  /** A failure policy on one line: `constant (interval 1s, maxRetries 3)`. */
  function failureText(policy) {
    if (!policy || typeof policy !== 'object') return null;
    const parts = Object.entries(policy).map(([k, v]) => {
      if (v && typeof v === 'object') {
        const inner = flatten(v, '').map(([a, b]) => `${a} ${b}`).join(', ');
        return inner ? `${k} (${inner})` : k;
      }
      return `${k} ${v}`;
    });
    return parts.join(' · ') || null;
  }

  function dataText(data) {
    if (data === undefined || data === null) return null;
    // Dapr's GET wraps the data as a protojson Any; its value is what was given.
    const given = data && typeof data === 'object' && 'value' in data && data['@type'] ? data.value : data;
    const text = typeof given === 'string' ? given : JSON.stringify(given);
    return h('code', { text: text.length > 400 ? `${text.slice(0, 400)}…` : text });
  }

  return Object.freeze({
    h, clear, relative, timeEl, caller, labelChips, badge, fillKv, flatten,
    failureText, dataText, splitLabels, scheduleText,
  });
})();
