import { describe, expect, it } from 'vitest';
import type { LayerProgress } from '../guest-build/oci-image.js';
import { formatLayer, LayerDisplay } from './pull-progress.js';

const layer = (change: Partial<LayerProgress>): LayerProgress => ({
  index: 0,
  digest: `sha256:3f4ca61aafcd${'0'.repeat(52)}`,
  status: 'waiting',
  received: 0,
  total: 45_600_000,
  ...change,
});

describe('smol image pull progress', () => {
  it('shows a layer as docker pull does', () => {
    expect(formatLayer(layer({}))).toBe('3f4ca61aafcd: Waiting');
    expect(formatLayer(layer({ status: 'downloading', received: 12_300_000 }), 10)).toBe(
      '3f4ca61aafcd: Downloading [==>       ]   12.3MB/45.6MB',
    );
    expect(formatLayer(layer({ status: 'cached' }))).toBe('3f4ca61aafcd: Already exists');
    expect(formatLayer(layer({ status: 'done' }))).toBe('3f4ca61aafcd: Pull complete');
  });

  it('to a pipe, says each state once and leaves the bar out', () => {
    let out = '';
    const display = new LayerDisplay({ write: (text: string) => (out += text), isTTY: false });
    for (const status of ['waiting', 'downloading', 'downloading', 'downloaded', 'extracting', 'done'] as const) {
      display.report(layer({ status, received: 1000 }));
    }
    expect(out).toBe('3f4ca61aafcd: Download complete\n3f4ca61aafcd: Extracting\n3f4ca61aafcd: Pull complete\n');
  });

  it('on a terminal, redraws one line per layer in place', () => {
    let out = '';
    const display = new LayerDisplay({ write: (text: string) => (out += text), isTTY: true });
    display.report(layer({ index: 0 }));
    display.report(layer({ index: 1, digest: `sha256:${'b'.repeat(64)}` }));
    display.report(layer({ index: 0, status: 'done' }));
    expect(out.split('\x1b[2A').length).toBe(2); // the second and third draws go back up over both lines
    expect(out.endsWith('\r\x1b[K3f4ca61aafcd: Pull complete\n\r\x1b[Kbbbbbbbbbbbb: Waiting\n')).toBe(true);
  });
});
