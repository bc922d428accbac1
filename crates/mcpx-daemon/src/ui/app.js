// The dashboard's one script (docs/ui.md): it keeps each page's live region up to
// date from its event stream, and filters a server's lists as the user types. All
// HTML it puts in the page was rendered, and escaped, by the daemon.
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
