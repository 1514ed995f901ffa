// A VM's console recording, fetched from the engine (GET /vms/:vm/recording) and parsed; fetched again when `key`
// changes (a new snapshot adds a marker).
import { useEffect, useState } from 'react';
import { useApp } from '../app-context.js';
import { parseAsciicast, type Recording } from './asciicast.js';

export type RecordingState =
  { state: 'loading' } | { state: 'ready'; recording: Recording } | { state: 'failed'; message: string };

export function useRecording(vmId: string | null, key: unknown): RecordingState & { reload: () => void } {
  const { transport } = useApp();
  const [result, setResult] = useState<RecordingState>({ state: 'loading' });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (!vmId) return;
    let current = true;
    setResult({ state: 'loading' });
    transport
      .request<string>('GET', `/vms/${encodeURIComponent(vmId)}/recording`)
      .then((text) => {
        if (current) setResult({ state: 'ready', recording: parseAsciicast(typeof text === 'string' ? text : '') });
      })
      .catch((error: Error) => {
        if (current) setResult({ state: 'failed', message: error.message });
      });
    return () => {
      current = false;
    };
  }, [transport, vmId, key, round]);
  return { ...result, reload: () => setRound((r) => r + 1) };
}
