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
