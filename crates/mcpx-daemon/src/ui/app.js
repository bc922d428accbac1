// The dashboard's one script (docs/ui.md): it keeps each page's live region up to
// date from its event stream, filters a server's lists as the user types, and sends
// the page's actions (with the session's CSRF token). All HTML it puts in the page
// was rendered, and escaped, by the daemon; what an action answers is shown as text.
'use strict';

(() => {
  const live = document.getElementById('live');
  const connection = document.getElementById('connection');
  const filter = document.getElementById('filter');

  const say = (text) => {
    if (connection && connection.textContent !== text) connection.textContent = text;
  };

  const applyFilter = () => {
    if (!filter || !live) return;
    const words = filter.value.trim().toLowerCase();
    for (const item of live.querySelectorAll('[data-filter]')) {
      item.hidden = words !== '' && !item.dataset.filter.includes(words);
    }
  };
  if (filter) filter.addEventListener('input', applyFilter);

  const action = document.getElementById('action');
  const csrf = document.querySelector('meta[name="mcpx-csrf"]');
  document.addEventListener('click', async (event) => {
    const button = event.target.closest('button[data-action]');
    if (!button || !csrf) return;
    if (button.dataset.action === 'login') {
      logIn(button, csrf.content, action);
      return;
    }
    const { action: verb, server, file, entries, decision } = button.dataset;
    button.disabled = true;
    const what = server || file;
    if (action) action.textContent = `${verb} ${what}…`;
    try {
      const response = await fetch(`/actions/${encodeURIComponent(verb)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-mcpx-csrf': csrf.content },
        body: JSON.stringify({
          server,
          file,
          entries: entries ? JSON.parse(entries) : [],
          decisions: decision ? [JSON.parse(decision)] : [],
        }),
      });
      const body = await response.json().catch(() => ({}));
      const said = response.ok ? 'done' : (body.error && body.error.message) || `refused (${response.status})`;
      if (action) action.textContent = `${verb} ${what}: ${said}`;
    } catch (e) {
      if (action) action.textContent = `${verb} ${what}: the daemon did not answer`;
    } finally {
      button.disabled = false;
    }
  });

  const tryForm = document.getElementById('try');
  if (tryForm && csrf) tryTool(tryForm, csrf.content);

  if (!live || !live.dataset.live || !('EventSource' in window)) return;
  const source = new EventSource(live.dataset.live);
  source.addEventListener('view', (event) => {
    live.innerHTML = event.data;
    applyFilter();
    say('');
  });
  source.addEventListener('open', () => say(''));
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) {
      say('Not live: the daemon restarted or the session ended. Run mcpx ui again.');
    } else {
      say('Reconnecting to the daemon…');
    }
  });
})();

// POSTs `body` to `url` with the session's token and reads the answer's JSON lines,
// handing each to `onLine`. Resolves to null once the stream ends, or to what the
// daemon said when it refused.
async function postLines(url, token, body, onLine, signal) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-mcpx-csrf': token },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) {
    const answer = await response.json().catch(() => ({}));
    return (answer.error && answer.error.message) || `refused (${response.status})`;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return null;
    buffered += decoder.decode(value, { stream: true });
    let at;
    while ((at = buffered.indexOf('\n')) >= 0) {
      const text = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      if (text.trim()) onLine(JSON.parse(text));
    }
  }
}

// A login started from the page: the daemon's lines say where to log in (a link the
// user opens: only an https URL, or http to this machine) or the code to enter, then
// how it ended.
async function logIn(button, token, status) {
  const { server, file, device } = button.dataset;
  const say = (...nodes) => status && status.replaceChildren(...nodes);
  const text = (t) => document.createTextNode(t);
  say(text(`log in to ${server}…`));
  try {
    const onLine = (message) => {
      if (message.open) {
        const url = new URL(message.open);
        const local = url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
        if (url.protocol !== 'https:' && !local) {
          say(text(`log in to ${server}: the login page is neither https nor on this machine, so it is not linked: ${message.open}`));
          return;
        }
        const link = document.createElement('a');
        link.href = url.href;
        link.target = '_blank';
        link.rel = 'noopener noreferrer';
        link.id = 'login-link';
        link.textContent = 'Open the login page';
        say(text(`log in to ${server}: `), link, text(' (this page waits for it)'));
      } else if (message.device) {
        const d = message.device;
        say(text(`log in to ${server}: open ${d.verification_uri} on any device and enter the code ${d.user_code} (this page waits for it)`));
      } else if (message.result) {
        say(text(`log in to ${server}: logged in`));
      } else if (message.error) {
        say(text(`log in to ${server}: ${message.error.message}`));
      }
    };
    const refused = await postLines('/actions/login', token, { server, file, device: device === '1' }, onLine);
    if (refused) say(text(`log in to ${server}: ${refused}`));
  } catch (e) {
    say(text(`log in to ${server}: the daemon did not answer`));
  }
}

// The page that tries a tool: the form's values, typed as the schema says, are the
// call's arguments; its stream shows progress, asks the server's questions, and ends
// with the result, all shown as text (images from their own data).
function tryTool(form, token) {
  const result = document.getElementById('result');
  const cancel = document.getElementById('cancel');
  const progressLine = document.getElementById('progress-line');
  const progress = document.getElementById('progress');
  const progressSaid = document.getElementById('progress-said');
  const question = document.getElementById('question');
  const questionBody = document.getElementById('question-body');
  let controller = null;

  const el = (tag, text, className) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (className) e.className = className;
    return e;
  };
  const show = (...nodes) => result.replaceChildren(...nodes);

  const value = (input) => {
    const type = input.dataset.type;
    if (type === 'boolean') return input.checked;
    const text = input.value;
    if (text === '') return undefined;
    if (type === 'integer' || type === 'number') return Number(text);
    if (type === 'string') return text;
    if (type === 'array') {
      const items = input.dataset.items;
      return text.split('\n').filter((l) => l !== '').map((l) => (items === 'integer' || items === 'number' ? Number(l) : items === 'boolean' ? l === 'true' : l));
    }
    return JSON.parse(text);
  };
  const argumentsOf = () => {
    const args = {};
    for (const input of form.querySelectorAll('[data-path]')) {
      const v = value(input);
      if (v === undefined || (input.dataset.type === 'boolean' && v === false && !input.dataset.required)) continue;
      const path = input.dataset.path.split('/');
      let at = args;
      for (const key of path.slice(0, -1)) at = at[key] ??= {};
      at[path[path.length - 1]] = v;
    }
    return args;
  };

  const blocks = (content) =>
    (content || []).map((b) => {
      if (b.type === 'text') return el('pre', b.text, 'text');
      if (b.type === 'image' && /^image\/(png|jpeg|gif|webp)$/.test(b.mimeType || '')) {
        const img = el('img');
        img.alt = `an image (${b.mimeType}) from the tool`;
        img.src = `data:${b.mimeType};base64,${b.data}`;
        return img;
      }
      if (b.type === 'resource_link') return el('p', `resource link: ${b.uri}${b.name ? ` (${b.name})` : ''}`);
      if (b.type === 'resource') return el('pre', b.resource && b.resource.text !== undefined ? b.resource.text : `resource ${b.resource && b.resource.uri}`);
      return el('pre', JSON.stringify(b, null, 2));
    });

  const answer = async (call, request, action, content) => {
    question.hidden = true;
    questionBody.replaceChildren();
    const response = { jsonrpc: '2.0', id: request.id, result: action === 'accept' ? { action, content } : { action } };
    await fetch('/actions/answer', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mcpx-csrf': token },
      body: JSON.stringify({ call, response }),
    });
  };
  const ask = (call, request) => {
    const params = request.params || {};
    const schema = params.requestedSchema || { properties: {} };
    const form = el('form');
    form.append(el('p', params.message || ''));
    for (const [key, prop] of Object.entries(schema.properties || {})) {
      const p = el('p', undefined, 'field');
      const id = `q-${key.replace(/[^A-Za-z0-9]/g, '_')}`;
      const label = el('label', `${prop.title || key}${prop.description ? `: ${prop.description}` : ''}`);
      label.htmlFor = id;
      const input = el(prop.enum ? 'select' : 'input');
      input.id = id;
      input.dataset.key = key;
      input.dataset.type = prop.type || 'string';
      if (prop.enum) for (const c of prop.enum) input.append(Object.assign(el('option', String(c)), { value: String(c) }));
      else if (prop.type === 'boolean') input.type = 'checkbox';
      else if (prop.type === 'number' || prop.type === 'integer') input.type = 'number';
      if (prop.type === 'boolean') p.append(input, label);
      else p.append(label, input);
      form.append(p);
    }
    const buttons = el('p', undefined, 'actions');
    for (const action of ['accept', 'decline', 'cancel']) {
      const b = el('button', action === 'accept' ? 'Send' : action === 'decline' ? 'Decline' : 'Cancel the question');
      b.type = action === 'accept' ? 'submit' : 'button';
      if (action !== 'accept') b.addEventListener('click', () => answer(call, request, action));
      buttons.append(b);
    }
    form.append(buttons);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const content = {};
      for (const input of form.querySelectorAll('[data-key]')) {
        const t = input.dataset.type;
        content[input.dataset.key] = t === 'boolean' ? input.checked : t === 'number' || t === 'integer' ? Number(input.value) : input.value;
      }
      answer(call, request, 'accept', content);
    });
    questionBody.replaceChildren(form);
    question.hidden = false;
    const first = form.querySelector('input, select, button');
    if (first) first.focus();
  };

  const line = (message) => {
    if (message.notification) {
      const n = message.notification;
      if (n.method === 'notifications/progress' && n.params) {
        progressLine.hidden = false;
        if (n.params.total) progress.max = n.params.total;
        progress.value = n.params.progress;
        progressSaid.textContent = n.params.message || `${n.params.progress}${n.params.total ? ` of ${n.params.total}` : ''}`;
      }
    } else if (message.request) {
      ask(message.call, message.request);
    } else if (message.result) {
      const r = message.result;
      const nodes = blocks(r.content);
      if (r.isError) nodes.unshift(el('p', 'The tool answered with an error:', 'error'));
      if (r.structuredContent !== undefined) nodes.push(el('pre', JSON.stringify(r.structuredContent, null, 2)));
      show(...(nodes.length ? nodes : [el('p', 'An empty result.')]));
    } else if (message.error) {
      show(el('p', message.error.message || 'The call failed.', 'error'));
    }
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let args;
    try {
      args = argumentsOf();
    } catch (e) {
      show(el('p', `An argument is not valid JSON: ${e.message}`, 'error'));
      return;
    }
    controller = new AbortController();
    cancel.disabled = false;
    progressLine.hidden = true;
    show(el('p', 'Calling…'));
    const { server, tool, file } = form.dataset;
    try {
      const refused = await postLines('/actions/call', token, { server, tool, file, arguments: args }, line, controller.signal);
      if (refused) show(el('p', refused, 'error'));
    } catch (e) {
      if (e.name === 'AbortError') show(el('p', 'Cancelled: the call was cancelled at the server.'));
      else show(el('p', `The call failed: ${e.message}`, 'error'));
    } finally {
      cancel.disabled = true;
      controller = null;
    }
  });
  cancel.addEventListener('click', () => {
    if (controller) controller.abort();
  });
}
