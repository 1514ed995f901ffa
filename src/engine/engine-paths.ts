// Where the engine of a data dir keeps its socket, lock, log and facts (docs/engine.md, "Snapshot store").
import path from 'node:path';

export interface EnginePaths {
  home: string;
  socket: string;
  lock: string;
  log: string;
  info: string;
}

export function enginePaths(home: string): EnginePaths {
  return {
    home,
    socket: path.join(home, 'engine.sock'),
    lock: path.join(home, 'engine.lock'),
    log: path.join(home, 'engine.log'),
    info: path.join(home, 'engine.json'),
  };
}
