// A VM's network as the UI shows it beyond its record (docs/ui.md, "Networks"): the last refused connections,
// loaded when their list is opened; `vm.network.refused` events keep it current from then on (engine-state.ts).
import { call, type Transport } from '../transport/transport.js';
import type { AppStore } from './app-store.js';
import { loadRefusals } from './engine-state.js';

/** Loads the VM's last refusals into the store; rejects with the engine's reason. */
export async function loadVmRefusals(store: AppStore, transport: Transport, vmId: string): Promise<void> {
  const network = await call(transport, 'network', { params: { vm: vmId } });
  store.setState((s) => ({ engine: loadRefusals(s.engine, vmId, network.events) }));
}
