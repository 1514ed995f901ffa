// Toasts: what finished, what failed (these stay until dismissed) and deletes with their Undo.
import { useEffect } from 'react';
import { useApp, useAppState } from '../app-context.js';
import { dismissToast, type Toast } from '../store/app-store.js';

function ToastItem({ toast }: { toast: Toast }) {
  const { store } = useApp();
  useEffect(() => {
    if (toast.expires === null) return;
    const timer = setTimeout(() => dismissToast(store, toast.id), Math.max(0, toast.expires - Date.now()));
    return () => clearTimeout(timer);
  }, [store, toast.id, toast.expires]);
  return (
    <div className={`toast toast-${toast.kind}`} role={toast.kind === 'error' ? 'alert' : 'status'}>
      <span>{toast.text}</span>
      {toast.action && (
        <button
          onClick={() => {
            toast.action!.run();
            dismissToast(store, toast.id);
          }}
        >
          {toast.action.label}
        </button>
      )}
      <button className="close" aria-label="Dismiss" onClick={() => dismissToast(store, toast.id)}>
        ×
      </button>
    </div>
  );
}

export function Toasts() {
  const toasts = useAppState((s) => s.toasts);
  return (
    <div className="toasts" aria-label="Notifications">
      {toasts.map((toast) => (
        <ToastItem key={toast.id} toast={toast} />
      ))}
    </div>
  );
}
