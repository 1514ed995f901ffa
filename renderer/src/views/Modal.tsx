// A modal dialog: labelled by its title, focus moves in when it opens and back when it closes. The focus stays in
// it (Tab and Shift-Tab go round its controls, a focus that lands behind it is brought back), and Escape closes it
// wherever the focus is, without reaching the page's own Escape (back to the episodes) or a console behind it.
import { useEffect, useId, useRef, type ReactNode } from 'react';

const FOCUSABLE = 'input, textarea, select, button, [href], [tabindex]:not([tabindex="-1"])';

function focusables(box: HTMLElement): HTMLElement[] {
  return [...box.querySelectorAll<HTMLElement>(FOCUSABLE)].filter(
    (element) => !element.hasAttribute('disabled') && element.getClientRects().length > 0,
  );
}

export function Modal({
  title,
  onClose,
  children,
  wide = false,
}: {
  title: string;
  onClose: () => void;
  children: ReactNode;
  /** Room for an editor. */
  wide?: boolean;
}) {
  const id = useId();
  const box = useRef<HTMLDivElement>(null);
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null;
    const first = box.current?.querySelector<HTMLElement>('input, textarea, select, button:not(.close)');
    first?.focus();
    // Capture, on the window: before any other handler of the key, wherever the focus is.
    const onKey = (event: KeyboardEvent) => {
      const dialog = box.current;
      if (!dialog) return;
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        close.current();
        return;
      }
      if (event.key !== 'Tab') return;
      const items = focusables(dialog);
      if (items.length === 0) return;
      const at = items.indexOf(document.activeElement as HTMLElement);
      const next = event.shiftKey ? (at <= 0 ? items.length - 1 : at - 1) : at === items.length - 1 ? 0 : at + 1;
      event.preventDefault();
      items[next]!.focus();
    };
    const onFocus = (event: FocusEvent) => {
      const dialog = box.current;
      if (dialog && event.target instanceof Node && !dialog.contains(event.target)) focusables(dialog)[0]?.focus();
    };
    window.addEventListener('keydown', onKey, true);
    document.addEventListener('focusin', onFocus);
    return () => {
      window.removeEventListener('keydown', onKey, true);
      document.removeEventListener('focusin', onFocus);
      before?.focus?.();
    };
  }, []);
  return (
    <div className="backdrop" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div className={wide ? 'modal wide' : 'modal'} role="dialog" aria-modal="true" aria-labelledby={id} ref={box}>
        <div className="modal-head">
          <h2 id={id}>{title}</h2>
          <button className="close" aria-label="Close" onClick={onClose}>
            ×
          </button>
        </div>
        {children}
      </div>
    </div>
  );
}
