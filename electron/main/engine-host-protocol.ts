// Messages between the app's main process and an engine it runs as a utilityProcess (docs/electron.md,
// "Processes"). Only the main process may start utility processes, so the engine asks it to start each vmhost;
// main answers with a MessagePort joined to that vmhost, and reports when the vmhost exits.
export type EngineToMain = { type: 'vmhost-launch'; id: number; label: string } | { type: 'vmhost-kill'; id: number };

export type MainToEngine =
  /** Carries the engine's end of the vmhost's port in `ports[0]`. */
  { type: 'vmhost-port'; id: number; pid: number | undefined } | { type: 'vmhost-exit'; id: number; code: number };
