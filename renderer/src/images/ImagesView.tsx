// The images (docs/ui.md, "Images"; docs/images.md): the root disk images of the engine's guest cache, as
// `smol image ls` lists them, with what keeps each (snapshots and VMs, the API's usedBy). Pull… pulls a reference
// with a bar per layer from the engine's image.pull events, Remove asks the engine, which refuses an image something
// needs and says why, and Prune… says what it will free (a dry run) before it frees it, then what it freed.
import { useCallback, useEffect, useState } from 'react';
import type { ImageSummary, RemovedImages } from '../../../src/api/schema.js';
import { useApp, useAppState } from '../app-context.js';
import { formatBytes, formatTime } from '../format.js';
import { connected } from '../store/selection.js';
import { call } from '../transport/transport.js';
import { Modal } from '../views/Modal.js';
import { ViewBack } from '../views/ViewBack.js';
import { PullDialog } from './PullDialog.js';
import './images.css';

type Dialog = { kind: 'pull' } | { kind: 'remove'; image: ImageSummary } | { kind: 'prune' } | null;

/** `sha256:0123456789ab`: the digest as docker shows it, short. */
export const shortDigest = (digest: string | undefined) => (digest ? digest.slice(0, 19) : '—');

/** What removing or pruning frees, in words: `3 files, 12.0 MiB`. */
export function describeFreed(removed: RemovedImages['removed']): string {
  const bytes = removed.reduce((sum, r) => sum + r.bytes, 0);
  return `${removed.length} file${removed.length === 1 ? '' : 's'}, ${formatBytes(bytes)}`;
}

function KeptBy({ image }: { image: ImageSummary }) {
  const episodes = useAppState((s) => s.engine.episodes);
  const users = image.usedBy ?? [];
  if (users.length === 0) return <span className="muted">nothing</span>;
  return (
    <ul className="kept-by">
      {users.map((user) => (
        <li key={`${user.snapshot ?? ''}${user.layer ?? ''}`}>
          {user.snapshot ? (
            <>
              snapshot <strong>{user.name ?? user.snapshot}</strong>
              {user.episode && <> of {episodes[user.episode]?.name ?? user.episode}</>}
            </>
          ) : (
            <>a VM’s disk ({user.layer})</>
          )}
        </li>
      ))}
    </ul>
  );
}

function RemoveDialog({ image, onClose, onDone }: { image: ImageSummary; onClose: () => void; onDone: () => void }) {
  const { transport } = useApp();
  const [busy, setBusy] = useState(false);
  const [refusal, setRefusal] = useState<string | null>(null);
  const reference = image.references?.[0] ?? image.name;
  const remove = async () => {
    setBusy(true);
    setRefusal(null);
    try {
      await call(transport, 'removeImage', { query: { reference: image.name } });
      onDone();
      onClose();
    } catch (error) {
      setRefusal((error as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title={`Remove image ${image.image}`} onClose={onClose}>
      <p>
        Removes <code>{reference}</code> ({image.name}, {formatBytes(image.allocated)} on disk) and the layers no other
        image needs. An image a snapshot or VM needs is kept: the engine says which.
      </p>
      {refusal && (
        <p className="error" role="alert">
          {refusal}
        </p>
      )}
      <div className="row end">
        <button onClick={onClose}>{refusal ? 'Done' : 'Cancel'}</button>
        <button className="danger" disabled={busy} onClick={() => void remove()}>
          {busy ? 'Removing…' : 'Remove'}
        </button>
      </div>
    </Modal>
  );
}

function PruneDialog({ onClose, onDone }: { onClose: () => void; onDone: () => void }) {
  const { transport } = useApp();
  const [planned, setPlanned] = useState<RemovedImages['removed'] | null>(null);
  const [freed, setFreed] = useState<RemovedImages['removed'] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    let current = true;
    call(transport, 'pruneImages', { query: { dryRun: 'true' } }).then(
      (answer) => current && setPlanned(answer.removed),
      (error: Error) => current && setFailure(error.message),
    );
    return () => {
      current = false;
    };
  }, [transport]);
  const prune = async () => {
    setBusy(true);
    try {
      setFreed((await call(transport, 'pruneImages')).removed);
      onDone();
    } catch (error) {
      setFailure((error as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const list = (removed: RemovedImages['removed']) => (
    <ul className="prune-list">
      {removed.map((r) => (
        <li key={r.file}>
          {r.name.replace(/^(blob sha256:[0-9a-f]{12})[0-9a-f]{52}$/, '$1…')}{' '}
          <span className="muted">{formatBytes(r.bytes)}</span>
        </li>
      ))}
    </ul>
  );
  return (
    <Modal title="Prune images" onClose={onClose}>
      <p>Removes every image no snapshot or VM needs, and the layers no image left needs.</p>
      {failure && (
        <p className="error" role="alert">
          {failure}
        </p>
      )}
      {freed ? (
        <div role="status" aria-label="Pruned">
          <p>
            <strong>Freed {describeFreed(freed)}.</strong>
          </p>
          {list(freed)}
        </div>
      ) : planned === null ? (
        !failure && <p className="muted">Looking for what is unused…</p>
      ) : planned.length === 0 ? (
        <p role="status" aria-label="Will free">
          Nothing to prune: every image left is in use by a snapshot or VM, or there is none.
        </p>
      ) : (
        <div role="status" aria-label="Will free">
          <p>
            <strong>Will free {describeFreed(planned)}:</strong>
          </p>
          {list(planned)}
        </div>
      )}
      <div className="row end">
        <button onClick={onClose}>{freed ? 'Done' : 'Cancel'}</button>
        {!freed && (
          <button className="danger" disabled={busy || !planned || planned.length === 0} onClick={() => void prune()}>
            {busy ? 'Pruning…' : 'Prune'}
          </button>
        )}
      </div>
    </Modal>
  );
}

export function ImagesView() {
  const { transport } = useApp();
  const online = useAppState(connected);
  const [images, setImages] = useState<ImageSummary[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [dialog, setDialog] = useState<Dialog>(null);
  const reload = useCallback(() => {
    call(transport, 'listImages').then(
      (answer) => {
        setImages(answer.images);
        setFailure(null);
      },
      (error: Error) => setFailure(`Listing the images failed: ${error.message}`),
    );
  }, [transport]);
  // Again whenever the engine is back, and when snapshots come and go (what keeps an image changes with them).
  const snapshotCount = useAppState((s) => Object.keys(s.engine.snapshots).length);
  useEffect(() => {
    if (online) reload();
  }, [online, reload, snapshotCount]);
  const close = () => setDialog(null);
  return (
    <section className="images" aria-label="Images">
      <div className="toolbar">
        <ViewBack />
        <h2>Images</h2>
        <div className="spacer" />
        <span className="muted" aria-live="polite">
          {images ? `${images.length} image${images.length === 1 ? '' : 's'}` : ''}
        </span>
        <button disabled={!online} onClick={() => reload()}>
          Refresh
        </button>
        <button disabled={!online} onClick={() => setDialog({ kind: 'prune' })}>
          Prune…
        </button>
        <button className="primary" disabled={!online} onClick={() => setDialog({ kind: 'pull' })}>
          Pull…
        </button>
      </div>
      {failure && (
        <p className="error" role="alert">
          {failure}
        </p>
      )}
      {images && images.length === 0 ? (
        <div className="empty">
          <h2>No images yet</h2>
          <p>Pull an OCI image here, or from a terminal:</p>
          <pre>smol image pull python:3.12-slim</pre>
          <button className="primary" disabled={!online} onClick={() => setDialog({ kind: 'pull' })}>
            Pull…
          </button>
        </div>
      ) : (
        <div className="table-scroll">
          <table className="grid" aria-label="Images">
            <thead>
              <tr>
                <th>Image</th>
                <th>Digest</th>
                <th className="num">Size</th>
                <th className="num">On disk</th>
                <th className="num">Created</th>
                <th>Kept by</th>
                <th>State</th>
                <th aria-label="Actions" />
              </tr>
            </thead>
            <tbody>
              {(images ?? []).map((image) => {
                const inUse = (image.usedBy ?? []).length > 0;
                const oci = image.name.startsWith('oci-');
                return (
                  <tr key={image.name} aria-label={`Image ${image.image}`}>
                    <td>
                      <div className="image-name">{image.image}</div>
                      <div className="muted small">{image.name}</div>
                    </td>
                    <td>
                      <code title={image.digest ?? image.hash}>{shortDigest(image.digest ?? image.hash)}</code>
                    </td>
                    <td className="num">{formatBytes(image.size)}</td>
                    <td className="num">{formatBytes(image.allocated)}</td>
                    <td className="num" title={image.built}>
                      {formatTime(image.built)}
                    </td>
                    <td>
                      <KeptBy image={image} />
                    </td>
                    <td>
                      <span className={`badge ${inUse ? 'in-use' : 'unused'}`}>{inUse ? 'in use' : 'unused'}</span>
                    </td>
                    <td>
                      {oci && (
                        <button
                          className="danger small"
                          disabled={!online}
                          aria-label={`Remove ${image.image}`}
                          onClick={() => setDialog({ kind: 'remove', image })}
                        >
                          Remove
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {dialog?.kind === 'pull' && <PullDialog onClose={close} onPulled={reload} />}
      {dialog?.kind === 'remove' && <RemoveDialog image={dialog.image} onClose={close} onDone={reload} />}
      {dialog?.kind === 'prune' && <PruneDialog onClose={close} onDone={reload} />}
    </section>
  );
}
