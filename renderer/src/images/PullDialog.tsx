// Pull… in the images view: a reference, then the engine's progress for it (a bar per layer, from image.pull events
// on the event stream) until the pull answers; the engine's refusal (a bad reference, an unknown tag, a registry out
// of reach) is shown as it words it, in the dialog, which stays open to try again.
import { useEffect, useRef, useState } from 'react';
import { useApp } from '../app-context.js';
import { formatBytes } from '../format.js';
import { toast } from '../store/app-store.js';
import { call } from '../transport/transport.js';
import { Modal } from '../views/Modal.js';
import { applyPullEvent, layerFraction, layerLabel, noProgress, type PullProgress } from './pull-progress.js';

export function PullDialog({ onClose, onPulled }: { onClose: () => void; onPulled: () => void }) {
  const { store, transport } = useApp();
  const [reference, setReference] = useState('');
  const [pulling, setPulling] = useState<string | null>(null);
  const [progress, setProgress] = useState<PullProgress>(noProgress);
  const [failure, setFailure] = useState<string | null>(null);
  const pullingRef = useRef<string | null>(null);
  pullingRef.current = pulling;
  // The engine's events for the reference being pulled; open for as long as the dialog is.
  useEffect(
    () =>
      transport.events({
        onEvent: (event) => {
          if (event.type === 'image.pull' && event.reference === pullingRef.current) {
            setProgress((now) => applyPullEvent(now, event));
          }
        },
        onState: () => {},
      }),
    [transport],
  );
  const pull = async () => {
    const wanted = reference.trim();
    if (!wanted) return;
    setFailure(null);
    setProgress(noProgress);
    setPulling(wanted);
    pullingRef.current = wanted;
    try {
      const pulled = await call(transport, 'pullImage', { body: { reference: wanted } });
      toast(
        store,
        'info',
        `Pulled ${wanted}: ${pulled.name} (${formatBytes(pulled.allocated)}${pulled.cached ? ', already here' : ''})`,
      );
      onPulled();
      onClose();
    } catch (error) {
      setFailure((error as Error).message);
    } finally {
      setPulling(null);
    }
  };
  return (
    <Modal title="Pull image" onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void pull();
        }}
      >
        <label>
          Image reference
          <input
            value={reference}
            onChange={(e) => setReference(e.target.value)}
            placeholder="python:3.12-slim, host:port/org/app:tag, oci:/path/to/layout:tag"
            spellCheck={false}
            disabled={pulling !== null}
            aria-label="Image reference"
          />
        </label>
        <p className="muted small">
          A registry reference (Docker Hub when no host is named; logins from ~/.docker/config.json), name@sha256:…, or
          oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE on the engine’s host.
        </p>
        {failure && (
          <p className="error" role="alert">
            {failure}
          </p>
        )}
        {pulling !== null && (
          <div className="pull-progress" role="status" aria-label="Pull progress">
            <p className="muted small">{progress.step ? `${progress.step}: ${progress.detail ?? ''}` : 'starting…'}</p>
            {progress.layers.map(
              (layer) =>
                layer && (
                  <div className="layer" key={layer.index}>
                    <code>{layer.digest.slice(7, 19)}</code>
                    <progress
                      aria-label={`Layer ${layer.index + 1}`}
                      max={1}
                      value={layerFraction(layer)}
                      data-status={layer.status}
                    />
                    <span className="muted small">{layerLabel(layer, formatBytes)}</span>
                  </div>
                ),
            )}
          </div>
        )}
        <div className="row end">
          <button type="button" onClick={onClose}>
            {pulling ? 'Close (the pull goes on)' : 'Cancel'}
          </button>
          <button type="submit" className="primary" disabled={pulling !== null || reference.trim() === ''}>
            {pulling ? 'Pulling…' : 'Pull'}
          </button>
        </div>
      </form>
    </Modal>
  );
}
