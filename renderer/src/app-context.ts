// The store, the operations and the transport, handed to components through React context.
import { createContext, useContext } from 'react';
import { useStore } from 'zustand';
import type { AppState, AppStore } from './store/app-store.js';
import type { MetricsStore } from './store/metrics.js';
import type { Operations } from './store/operations.js';
import type { Transport } from './transport/transport.js';

export interface App {
  store: AppStore;
  operations: Operations;
  transport: Transport;
  metrics: MetricsStore;
}

export const AppContext = createContext<App | null>(null);

export function useApp(): App {
  const app = useContext(AppContext);
  if (!app) throw new Error('useApp outside <AppContext.Provider>');
  return app;
}

/** One value from the store; a selector that builds an object or array needs useShallow. */
export function useAppState<T>(selector: (state: AppState) => T): T {
  return useStore(useApp().store, selector);
}
