// A VM's console recording, fetched from the engine (GET /vms/:vm/recording) and parsed; fetched again when `key`
// changes (a new snapshot adds a marker). While a fetch again is under way the recording already shown stays, so a
// player keeps its place and its terminal: it gets the longer recording when it arrives.
import { useEffect, useState } from 'react';
import { useApp } from '../app-context.js';
import { call } from '../transport/transport.js';
import { parseAsciicast, type Recording } from './asciicast.js';

export type RecordingState =
  | { state: 'loading' }
  /** `problem`: fetching it again failed; the recording shown is the one fetched before. */
  | { state: 'ready'; recording: Recording; problem?: string }
  | { state: 'failed'; message: string };

export function useRecording(vmId: string | null, key: unknown): RecordingState & { reload: () => void } {
  const { transport } = useApp();
  const [result, setResult] = useState<RecordingState>({ state: 'loading' });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (!vmId) return;
    let current = true;
    // Only the first fetch shows "loading"; a failed one is tried again in view of its error.
    setResult((shown) => (shown.state === 'ready' ? shown : { state: 'loading' }));
    call(transport, 'recording', { params: { vm: vmId } })
      .then((text) => {
        if (current) setResult({ state: 'ready', recording: parseAsciicast(typeof text === 'string' ? text : '') });
      })
      .catch((error: Error) => {
        if (!current) return;
        setResult((shown) =>
          shown.state === 'ready'
            ? { state: 'ready', recording: shown.recording, problem: error.message }
            : { state: 'failed', message: error.message },
        );
      });
    return () => {
      current = false;
    };
  }, [transport, vmId, key, round]);
  return { ...result, reload: () => setRound((r) => r + 1) };
}
