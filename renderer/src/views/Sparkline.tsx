// CPU and memory sparklines for a set of VMs: a canvas that redraws when a sample arrives, outside React's renders.
import { useEffect, useRef } from 'react';
import { useApp } from '../app-context.js';
import { formatBytes } from '../format.js';
import { summed } from '../store/metrics.js';

const W = 84;
const H = 20;

/** The theme's colours, read once (reading computed style per canvas would restyle the page per row). */
let colours: { cpu: string; memory: string } | null = null;
function themeColours() {
  if (!colours) {
    const style = getComputedStyle(document.documentElement);
    colours = { cpu: style.getPropertyValue('--accent').trim(), memory: style.getPropertyValue('--ok').trim() };
    window
      .matchMedia?.('(prefers-color-scheme: dark)')
      .addEventListener('change', () => (colours = null), { once: true });
  }
  return colours;
}

function draw(canvas: HTMLCanvasElement, values: number[], max: number, colour: string) {
  if (values.length < 2 && canvas.dataset.drawn !== '1') return; // nothing drawn yet, nothing to clear
  canvas.dataset.drawn = '1';
  const ratio = window.devicePixelRatio || 1;
  canvas.width = W * ratio;
  canvas.height = H * ratio;
  const g = canvas.getContext('2d');
  if (!g) return;
  g.scale(ratio, ratio);
  g.clearRect(0, 0, W, H);
  if (values.length < 2) return;
  const step = W / (values.length - 1);
  g.beginPath();
  values.forEach((v, i) => {
    const y = H - 1 - (Math.min(v, max) / (max || 1)) * (H - 2);
    if (i === 0) g.moveTo(0, y);
    else g.lineTo(i * step, y);
  });
  g.strokeStyle = colour;
  g.lineWidth = 1.25;
  g.stroke();
}

/**
 * `fromCgroup` (an episode's row: all its VMs, one vmhost): the figures its vmhost's cgroup counted, with the cap
 * (docs/security.md, "Limits"); else the VMs' own (their vCPU threads, their resident memory).
 */
export function Sparklines({ vmIds, fromCgroup = false }: { vmIds: readonly string[]; fromCgroup?: boolean }) {
  const { metrics } = useApp();
  const cpu = useRef<HTMLCanvasElement>(null);
  const memory = useRef<HTMLCanvasElement>(null);
  const label = useRef<HTMLSpanElement>(null);
  const key = vmIds.join(',');
  useEffect(() => {
    const ids = key ? key.split(',') : [];
    const redraw = () => {
      const points = summed(
        ids.map((vm) => metrics.samples(vm)),
        { fromCgroup },
      );
      const last = points.at(-1);
      const colour = themeColours();
      if (cpu.current)
        draw(
          cpu.current,
          points.map((p) => p.cpu),
          Math.max(100, ...points.map((p) => p.cpu)),
          colour.cpu,
        );
      if (memory.current) {
        const max = Math.max(...points.map((p) => p.memory), 1);
        draw(
          memory.current,
          points.map((p) => p.memory),
          max,
          colour.memory,
        );
      }
      if (label.current) {
        const cap = last?.limit ? ` of ${formatBytes(last.limit)}` : '';
        label.current.textContent = last ? `${Math.round(last.cpu)}% · ${formatBytes(last.memory)}${cap}` : '—';
      }
    };
    for (const vm of ids) metrics.want(vm);
    const stops = ids.map((vm) => metrics.subscribe(vm, redraw));
    redraw();
    return () => stops.forEach((stop) => stop());
  }, [metrics, key, fromCgroup]);
  return (
    <span
      className="sparklines"
      title={
        fromCgroup
          ? 'CPU (% of one host CPU) and memory its vmhost’s cgroup counted, of its cap; last five minutes'
          : 'CPU (% of one host CPU) and resident memory, last five minutes'
      }
    >
      <canvas ref={cpu} style={{ width: W, height: H }} aria-hidden="true" />
      <canvas ref={memory} style={{ width: W, height: H }} aria-hidden="true" />
      <span ref={label} className="muted spark-label" />
    </span>
  );
}
