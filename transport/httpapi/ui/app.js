// The raftlock status page. It reads everything through GET /v1/overview,
// a blocking query: each answer carries the leader's applied index, and the
// next request waits until something changes past it (or 10 s pass, which
// refreshes the members' health). No polling loop, no outside assets.
// Data is put into the page as text, never as HTML. With ACLs on, the page
// asks for a token, keeps it in this tab's sessionStorage and sends it as
// "Authorization: Bearer".
'use strict';
(function () {
  const TOKEN_KEY = 'raftlock-acl-token';
  // The blocking query's wait: 10 s, or 2 s while a member lags or is not
  // known healthy, so that its recovery shows soon (no log entry wakes the
  // query for it).
  const WAIT = '10s';
  const WAIT_UNSETTLED = '2s';
  const FREED_KEEP = 50; // locks seen freed, still listed as free
  const state = { index: 0, offset: 0, shown: new Map(), freed: new Map(), tokenWaiter: null, wait: WAIT };

  function $(id) { return document.getElementById(id); }

  // el builds an element: attrs are attributes (class, data-*), children
  // strings (text) or nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
  function serverNow() { return Date.now() + state.offset; }
  function pad(n) { return String(n).padStart(2, '0'); }
  function clock(d) { return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()); }
  function stamp(iso) {
    const d = new Date(iso);
    const today = new Date();
    const day = d.toDateString() === today.toDateString() ? '' : d.toISOString().slice(0, 10) + ' ';
    return day + clock(d);
  }
  function span(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + pad(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h' + pad(Math.floor(s / 60) % 60) + 'm';
    return Math.floor(s / 86400) + 'd' + Math.floor(s / 3600) % 24 + 'h';
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  function setConn(kind, text) {
    const c = $('conn');
    c.dataset.state = kind;
    c.textContent = text;
  }

  // askToken shows the token form and resolves once a token is given.
  function askToken(why) {
    $('token-form').hidden = false;
    $('token-why').textContent = why || '';
    $('token-input').focus();
    return new Promise((resolve) => { state.tokenWaiter = resolve; });
  }

  function setupToken() {
    $('token-button').addEventListener('click', () => {
      const f = $('token-form');
      f.hidden = !f.hidden;
      $('token-why').textContent = token() ? 'A token is in use.' : 'No token is in use.';
    });
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token-input').value.trim();
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      $('token-input').value = '';
      $('token-form').hidden = true;
      if (state.tokenWaiter) { state.tokenWaiter(); state.tokenWaiter = null; }
    });
    $('token-forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      $('token-why').textContent = 'Token forgotten.';
    });
  }

  async function errorText(res) {
    try {
      const b = await res.json();
      if (b && b.error) return b.error.code + ': ' + b.error.message;
    } catch (e) { /* not JSON */ }
    return 'HTTP ' + res.status;
  }

  // loop asks for the overview, each time past the index of the last one.
  async function loop() {
    let backoff = 500;
    for (;;) {
      let res;
      try {
        const headers = {};
        const t = token();
        if (t) headers.Authorization = 'Bearer ' + t;
        res = await fetch('/v1/overview?index=' + state.index + '&wait=' + state.wait, { headers, cache: 'no-store' });
      } catch (e) {
        setConn('error', 'node unreachable');
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 8000);
        continue;
      }
      if (res.status === 401 || res.status === 403) {
        const why = await errorText(res);
        setConn('error', res.status === 401 ? 'token needed' : 'permission denied');
        await askToken(why);
        state.index = 0;
        continue;
      }
      if (!res.ok) {
        setConn('error', await errorText(res));
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 8000);
        state.index = 0;
        continue;
      }
      let ov;
      try { ov = await res.json(); } catch (e) { setConn('error', 'bad answer'); await sleep(backoff); continue; }
      backoff = 500;
      state.offset = new Date(ov.now).getTime() - Date.now();
      setConn('live', 'live');
      render(ov);
      state.index = ov.index;
      const unsettled = (ov.members || []).some((m) => m.lag > 0 || (m.state !== 'leader' && m.state !== 'follower'));
      state.wait = unsettled ? WAIT_UNSETTLED : WAIT;
    }
  }

  function render(ov) {
    renderCluster(ov);
    renderLocks(ov);
    renderSessions(ov);
    renderEvents(ov);
    tick();
  }

  function renderCluster(ov) {
    const facts = [
      ['leader', ov.leader], ['term', ov.term], ['serving', ov.serving ? 'yes' : 'not yet'],
      ['commit index', ov.commit_index], ['applied index', ov.index], ['leader clock', stamp(ov.now)],
    ];
    $('cluster-facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-fact': k }, String(v))]));
    $('members-hidden').hidden = !ov.members_hidden;
    const rows = (ov.members || []).map((m) => el('tr', { 'data-member': m.id, 'data-state': m.state, 'data-lag': m.lag },
      el('td', { class: 'name' }, m.id),
      el('td', {}, el('span', { class: 'badge', 'data-state': m.state, title: m.error || '' }, m.state)),
      el('td', {}, m.voter ? 'voter' : 'non-voter'),
      el('td', { class: 'mono' }, m.state === 'unreachable' ? '–' : String(m.last_index)),
      el('td', { class: 'mono' }, m.state === 'follower' ? String(m.lag) : '–'),
      el('td', { class: 'mono' }, m.http_addr || '–'),
      el('td', { class: 'mono' }, m.raft_addr)));
    $('members').querySelector('tbody').replaceChildren(...rows);
  }

  function lockState(l) {
    if (l.holders.length > 0) return 'held';
    if (l.delay_until || (l.slot_delays || []).length > 0) return 'delayed';
    if (l.waiters > 0) return 'waiting';
    return 'free';
  }

  function holderNode(h) {
    const slot = h.slot === undefined ? null : h.slot;
    return el('div', { class: 'holder', 'data-holder': h.holder, 'data-token': h.token, 'data-slot': slot === null ? '' : String(slot) },
      slot === null ? null : el('span', { class: 'slot' }, 'slot ' + slot + ': '),
      el('span', { class: 'who' }, h.session_name || '(unnamed session)'),
      ' holder ', el('code', {}, h.holder), ' token ', el('code', { class: 'token' }, String(h.token)),
      h.value ? el('div', { class: 'sub' }, 'value ', el('code', {}, h.value)) : null,
      el('div', { class: 'sub' }, 'session ', el('code', {}, h.session_handle),
        h.since ? el('span', {}, ' · since ', stamp(h.since), ' (', el('span', { 'data-since': h.since }, ''), ' ago)') : null));
  }

  function renderLocks(ov) {
    const now = Date.now();
    const current = new Map(ov.locks.map((l) => [l.name, l]));
    for (const [name, l] of state.shown) {
      if (!current.has(name) && !state.freed.has(name) && ov.locks_total <= ov.locks.length) {
        state.freed.set(name, { at: now, last: l });
      }
    }
    for (const name of current.keys()) state.freed.delete(name);
    while (state.freed.size > FREED_KEEP) state.freed.delete(state.freed.keys().next().value);
    state.shown = current;

    const names = [...new Set([...current.keys(), ...state.freed.keys()])].sort();
    const rows = names.map((name) => {
      const l = current.get(name);
      if (!l) {
        const f = state.freed.get(name);
        const was = f.last.holders.map((h) => (h.session_name || '?') + '/' + h.holder + ' token ' + h.token).join(', ');
        return el('tr', { 'data-lock': name, 'data-state': 'free' },
          el('td', { class: 'name', 'data-label': 'lock' }, name),
          el('td', { 'data-label': 'state' }, el('span', { class: 'badge', 'data-state': 'free' }, 'free')),
          el('td', { 'data-label': 'holders' }, 'none', el('div', { class: 'sub' }, 'free since ' + clock(new Date(f.at)) + (was ? ' · was ' + was : ''))),
          el('td', { 'data-label': 'waiters' }, '0'),
          el('td', { 'data-label': 'lock-delay' }, '–'));
      }
      const st = lockState(l);
      const queue = (l.queue || []).map((q) => q.holder + (q.mode === 'shared' ? ' (shared)' : '')).join(', ');
      // A semaphore: "2/3 held", and each slot's lock-delay.
      const slots = l.permits ? l.holders.length + '/' + l.permits + ' held' : null;
      const badge = slots ? 'semaphore · ' + slots : (st === 'held' ? 'held · ' + l.mode : st);
      const slotDelays = (l.slot_delays || []).map((d) => el('div', { 'data-slot-delay': String(d.slot) },
        'slot ' + d.slot + ': ', el('span', { 'data-until': d.until }, '')));
      let delay = '–';
      if (l.delay_until) delay = el('span', { 'data-until': l.delay_until }, '');
      else if (slotDelays.length) delay = el('div', {}, ...slotDelays);
      return el('tr', { 'data-lock': name, 'data-state': st, 'data-permits': l.permits ? String(l.permits) : '' },
        el('td', { class: 'name', 'data-label': 'lock' }, name),
        el('td', { 'data-label': 'state' }, el('span', { class: 'badge', 'data-state': st }, badge)),
        el('td', { 'data-label': 'holders' }, ...(l.holders.length ? l.holders.map(holderNode) : ['none'])),
        el('td', { 'data-label': 'waiters' }, String(l.waiters), queue ? el('div', { class: 'sub' }, queue) : null),
        el('td', { 'data-label': 'lock-delay' }, delay));
    });
    $('locks').querySelector('tbody').replaceChildren(...rows);
    $('locks-empty').hidden = rows.length > 0;
    $('locks-count').textContent = ov.locks_total > ov.locks.length
      ? '(first ' + ov.locks.length + ' of ' + ov.locks_total + ')' : '(' + ov.locks_total + ')';
  }

  function renderSessions(ov) {
    const rows = ov.sessions.map((s) => el('tr', { 'data-session': s.handle },
      el('td', { 'data-label': 'name' }, s.name || '(unnamed)'),
      el('td', { class: 'mono', 'data-label': 'handle' }, s.handle),
      el('td', { 'data-label': 'ttl' }, s.ttl),
      el('td', { 'data-label': 'lock-delay' }, s.lock_delay),
      el('td', { 'data-label': 'opened' }, stamp(s.created)),
      el('td', { class: 'mono', 'data-label': 'locks' }, s.locks.join(', ') || '–')));
    $('sessions').querySelector('tbody').replaceChildren(...rows);
    $('sessions-count').textContent = ov.sessions_total > ov.sessions.length
      ? '(first ' + ov.sessions.length + ' of ' + ov.sessions_total + ')' : '(' + ov.sessions_total + ')';
  }

  function who(e) {
    return (e.session_name ? '"' + e.session_name + '"' : 'session ' + e.session_handle) + (e.holder ? ' holder ' + e.holder : '');
  }

  function describe(e) {
    switch (e.kind) {
      case 'session_opened': return 'session "' + (e.session_name || '') + '" opened (' + e.session_handle + ')';
      case 'session_closed': return 'session "' + (e.session_name || '') + '" closed (' + e.session_handle + ')';
      case 'session_expired': return 'session "' + (e.session_name || '') + '" expired (' + e.session_handle + ')';
      case 'granted': return e.lock + (e.slot === undefined ? '' : ' slot ' + e.slot) + ' granted to ' + who(e) + ' (token ' + e.token + ', ' + e.mode + ')';
      case 'released': return e.lock + ' released by ' + who(e) + ' (token ' + e.token + ')';
      case 'queued': return who(e) + ' waits for ' + e.lock;
      case 'wait_ended': return 'the wait of ' + who(e) + ' for ' + e.lock + ' ended (' + (e.reason || '').replace('_', ' ') + ')';
      case 'lock_delay': return e.lock + (e.slot === undefined ? '' : ' slot ' + e.slot) + ' in lock-delay until ' + stamp(e.delay_until);
      case 'restored': return 'state restored from a backup';
      case 'revoked': return e.lock + ' revoked from ' + who(e) + ' (token ' + e.token + ', ' + (e.revoke_kind === 'max_hold' ? 'its hold limit' : 'by an operator: ' + (e.reason || '')) + ')';
      default: return e.kind;
    }
  }

  function renderEvents(ov) {
    $('events').replaceChildren(...ov.events.map((e) => el('li', { 'data-kind': e.kind },
      el('time', { datetime: e.at }, clock(new Date(e.at))), describe(e))));
  }

  // tick refreshes the countdowns and ages against the leader's clock.
  function tick() {
    const now = serverNow();
    for (const e of document.querySelectorAll('[data-until]')) {
      const left = new Date(e.dataset.until).getTime() - now;
      e.textContent = left > 0 ? span(left) + ' left (until ' + clock(new Date(e.dataset.until)) + ')' : 'ending…';
    }
    for (const e of document.querySelectorAll('[data-since]')) {
      e.textContent = span(now - new Date(e.dataset.since).getTime());
    }
  }

  setupToken();
  setInterval(tick, 1000);
  $('footer').textContent = 'Live through GET /v1/overview (a blocking query). Page opened at ' + clock(new Date()) + '.';
  loop();
}());
