// The command palette (Ctrl-K, or Ctrl-Shift-K inside the console): type to filter, arrows to choose, Enter to run.
import { useMemo, useState } from 'react';
import { useApp, useAppState } from '../app-context.js';
import { commands } from '../commands.js';
import { setPaletteOpen } from '../store/selection.js';
import { Modal } from './Modal.js';

export function CommandPalette() {
  const app = useApp();
  const open = useAppState((s) => s.paletteOpen);
  return open ? <Palette close={() => setPaletteOpen(app.store, false)} /> : null;
}

function Palette({ close }: { close: () => void }) {
  const app = useApp();
  const [query, setQuery] = useState('');
  const [active, setActive] = useState(0);
  const all = useMemo(() => commands(app, app.store.getState()), [app]);
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = all.filter((command) => words.every((word) => command.title.toLowerCase().includes(word)));
  const run = (index: number) => {
    const command = shown[index];
    if (!command) return;
    close();
    command.run();
  };
  return (
    <Modal title="Commands" onClose={close}>
      <input
        className="palette-input"
        role="combobox"
        aria-expanded="true"
        aria-controls="palette-list"
        aria-activedescendant={shown[active] ? `cmd-${shown[active].id}` : undefined}
        aria-label="Command"
        placeholder="Type a command"
        value={query}
        onChange={(e) => {
          setQuery(e.target.value);
          setActive(0);
        }}
        onKeyDown={(e) => {
          if (e.key === 'ArrowDown') setActive((i) => Math.min(i + 1, shown.length - 1));
          else if (e.key === 'ArrowUp') setActive((i) => Math.max(i - 1, 0));
          else if (e.key === 'Enter') run(active);
          else return;
          e.preventDefault();
        }}
      />
      <ul id="palette-list" role="listbox" aria-label="Commands" className="palette-list">
        {shown.map((command, i) => (
          <li
            key={command.id}
            id={`cmd-${command.id}`}
            role="option"
            aria-selected={i === active}
            className={i === active ? 'active' : undefined}
            onMouseEnter={() => setActive(i)}
            onClick={() => run(i)}
          >
            <span>{command.title}</span>
            {command.keys && <kbd>{command.keys}</kbd>}
          </li>
        ))}
        {shown.length === 0 && <li className="muted">No command matches.</li>}
      </ul>
    </Modal>
  );
}
