// What the dialogs share: closing the open dialog, and the last failure of an operation shown in place.
import { useApp, useAppState } from '../app-context.js';
import { closeDialog } from '../store/selection.js';

export function useClose() {
  const { store } = useApp();
  return () => closeDialog(store);
}

/** The failure kept under `on` (store/operations.ts), worded as the engine said it. */
export function Failure({ on }: { on: string }) {
  const failure = useAppState((s) => s.failures[on]);
  return failure ? (
    <p className="error" role="alert">
      {failure}
    </p>
  ) : null;
}
