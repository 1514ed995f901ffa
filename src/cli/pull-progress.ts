// `smol image pull`'s per-layer progress, as `docker pull` shows it: on a terminal one line per layer, redrawn in
// place (`3f4ca61aafcd: Downloading [=====>        ]  12.3MB/45.6MB`); to a file or pipe, a line when a layer's state
// changes.
import type { LayerProgress } from '../guest-build/oci-image.js';
import type { ProgressStream } from '../guest-build/build-progress.js';

const WORDS: Record<LayerProgress['status'], string> = {
  waiting: 'Waiting',
  downloading: 'Downloading',
  downloaded: 'Download complete',
  cached: 'Already exists',
  extracting: 'Extracting',
  done: 'Pull complete',
};
const REFRESH_MS = 100;

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)}MB`;

export function formatLayer(layer: LayerProgress, width = 30): string {
  const id = layer.digest.replace(/^sha256:/, '').slice(0, 12);
  if (layer.status !== 'downloading') return `${id}: ${WORDS[layer.status]}`;
  const fraction = layer.total > 0 ? Math.min(1, layer.received / layer.total) : 0;
  const filled = Math.floor(fraction * width);
  const bar = filled >= width ? '='.repeat(width) : `${'='.repeat(filled)}>${' '.repeat(width - filled - 1)}`;
  return `${id}: Downloading [${bar}] ${mb(layer.received).padStart(8)}/${mb(layer.total)}`;
}

export class LayerDisplay {
  private readonly layers: LayerProgress[] = [];
  private readonly said = new Map<number, string>();
  private drawn = 0;
  private lastDraw = 0;

  constructor(private readonly out: ProgressStream) {}

  readonly report = (layer: LayerProgress): void => {
    this.layers[layer.index] = { ...layer };
    if (!this.out.isTTY) {
      if (this.said.get(layer.index) === layer.status) return;
      this.said.set(layer.index, layer.status);
      if (layer.status === 'downloading' || layer.status === 'waiting') return;
      this.out.write(`${formatLayer(layer)}\n`);
      return;
    }
    const now = Date.now();
    if (layer.status === 'downloading' && now - this.lastDraw < REFRESH_MS) return;
    this.draw(now);
  };

  /** The final state of every layer stays on the terminal. */
  finish(): void {
    if (this.out.isTTY && this.layers.length > 0) this.draw(Date.now());
  }

  private draw(now: number): void {
    const up = this.drawn > 0 ? `\x1b[${this.drawn}A` : '';
    const lines = this.layers.filter(Boolean).map((layer) => `\r\x1b[K${formatLayer(layer)}\n`);
    this.out.write(up + lines.join(''));
    this.drawn = lines.length;
    this.lastDraw = now;
  }
}
