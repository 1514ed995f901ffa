// The command palette (Ctrl-K, or Ctrl-Shift-K inside the console): type to filter, arrows to choose, Enter to run.
// Its commands act on the open episode's engine (a remote one's through its own store); a disabled one says why.
import { useContext, useMemo, useState } from 'react';
import { useApp, useAppState } from '../app-context.js';
import { commands } from '../commands.js';
import { EnginesContext } from '../engines/engine-stores.js';
import { setPaletteOpen } from '../store/selection.js';
import { Modal } from './Modal.js';

export function CommandPalette() {
  const app = useApp();
  const open = useAppState((s) => s.paletteOpen);
  return open ? <Palette close={() => setPaletteOpen(app.store, false)} /> : null;
}

function Palette({ close }: { close: () => void }) {
  const app = useApp();
  const engines = useContext(EnginesContext);
  const [query, setQuery] = useState('');
  const [active, setActive] = useState(0);
  const all = useMemo(() => {
    const remotes = engines?.store.getState() ?? null;
    const remote = remotes?.engines.find((e) => e.name === remotes.open) ?? null;
    if (remote) return commands(remote.app, remote.app.store.getState(), remote.name);
    return commands(app, app.store.getState(), undefined, remotes?.engines ?? []);
  }, [app, engines]);
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = all.filter((command) => words.every((word) => command.title.toLowerCase().includes(word)));
  const run = (index: number) => {
    const command = shown[index];
    if (!command || command.disabled) return;
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
            aria-disabled={command.disabled ? true : undefined}
            title={command.disabled}
            className={
              [i === active && 'active', command.disabled && 'disabled'].filter(Boolean).join(' ') || undefined
            }
            onMouseEnter={() => setActive(i)}
            onClick={() => run(i)}
          >
            <span>
              {command.title}
              {command.disabled && <span className="sub"> — {command.disabled}</span>}
            </span>
            {command.keys && <kbd>{command.keys}</kbd>}
          </li>
        ))}
        {shown.length === 0 && <li className="muted">No command matches.</li>}
      </ul>
    </Modal>
  );
}
