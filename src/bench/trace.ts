// `smol bench restore|fork|fanout|vm-create --trace`: where each operation's time goes, step by step (the VMM's
// own step timer, Vm.trace(); docs/snapshots.md, "Where the time goes"), summarized over the runs.
import type { VmTrace } from '../vmm/vm.js';
import { median } from './stats.js';

export interface TraceStepSummary {
  step: string;
  /** Median over the samples (a sample without the step counts 0). */
  p50_ms: number;
  /** KVM ioctls in the step, median over the samples. */
  kvmIoctls: number;
}

export interface TraceBreakdown {
  samples: number;
  steps: TraceStepSummary[];
  /** From JavaScript's call to the end of the native side's last step. */
  nativeTotal_p50_ms: number;
  kvmIoctls_p50: number;
  /** When vm_start ran, vCPU 0 first entered KVM_RUN and the first console output came, since the call. */
  start_p50_ms: number | null;
  firstEntry_p50_ms: number | null;
  firstOutput_p50_ms: number | null;
  /**
   * The metric's JavaScript-measured time minus the native total: the binding and event loop's part (and, for a
   * metric that waits for output, the start and the guest's run).
   */
  afterNative_p50_ms?: number;
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;

function medianOf(values: (number | null)[]): number | null {
  const known = values.filter((v): v is number => v !== null);
  return known.length ? round(median(known)) : null;
}

/** Per-step medians, steps in the order they first appear; `measured` are the metric's samples (same order). */
export function traceBreakdown(traces: VmTrace[], measured?: number[]): TraceBreakdown {
  if (traces.length === 0) throw new RangeError('a trace breakdown needs at least one trace');
  const names: string[] = [];
  for (const t of traces) for (const s of t.steps) if (!names.includes(s.step)) names.push(s.step);
  const pick = (t: VmTrace, name: string) => t.steps.find((s) => s.step === name);
  const breakdown: TraceBreakdown = {
    samples: traces.length,
    steps: names.map((step) => ({
      step,
      p50_ms: round(median(traces.map((t) => pick(t, step)?.ms ?? 0))),
      kvmIoctls: median(traces.map((t) => pick(t, step)?.kvmIoctls ?? 0)),
    })),
    nativeTotal_p50_ms: round(median(traces.map((t) => t.totalMs))),
    kvmIoctls_p50: median(traces.map((t) => t.kvmIoctls)),
    start_p50_ms: medianOf(traces.map((t) => t.startMs)),
    firstEntry_p50_ms: medianOf(traces.map((t) => t.firstEntryMs)),
    firstOutput_p50_ms: medianOf(traces.map((t) => t.firstOutputMs)),
  };
  if (measured && measured.length === traces.length) {
    breakdown.afterNative_p50_ms = round(median(measured.map((ms, i) => ms - traces[i]!.totalMs)));
  }
  return breakdown;
}

/** The breakdown as indented text lines under its metric. */
export function formatTraceBreakdown(b: TraceBreakdown): string[] {
  const width = Math.max(...b.steps.map((s) => s.step.length), 'first console output'.length);
  const row = (name: string, ms: number | null, ioctls = '') =>
    `    ${name.padEnd(width)}  ${ms === null ? '-'.padStart(9) : ms.toFixed(3).padStart(9)}  ${ioctls.padStart(6)}`;
  return [
    `    ${`step (p50 of ${b.samples})`.padEnd(width)}  ${'ms'.padStart(9)}  ${'ioctls'.padStart(6)}`,
    ...b.steps.map((s) => row(s.step, s.p50_ms, String(s.kvmIoctls))),
    row('native total', b.nativeTotal_p50_ms, String(b.kvmIoctls_p50)),
    ...(b.afterNative_p50_ms === undefined ? [] : [row('after the native steps', b.afterNative_p50_ms)]),
    row('vm_start (vCPU threads)', b.start_p50_ms),
    row('first vCPU entry', b.firstEntry_p50_ms),
    row('first console output', b.firstOutput_p50_ms),
  ];
}
