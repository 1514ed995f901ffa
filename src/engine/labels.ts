// Labels on VMs and snapshots (docs/labels.md): a change sets keys to values and removes keys given null; the
// result keeps to the limits (src/api/schema.ts, Labels), or the change is refused naming what is wrong.
import { ApiFailure } from '../api/engine-api.js';
import { LABEL_LIMITS, LabelKey, type Labels } from '../api/schema.js';

const VALUE_RULE = `a label is a finite number or a string of at most ${LABEL_LIMITS.valueLength} characters (null removes it)`;

export function changedLabels(current: Labels | undefined, change: unknown, what: string): Labels {
  const refuse = (why: string) => new ApiFailure(400, `labels of ${what}: ${why}`);
  if (!change || typeof change !== 'object' || Array.isArray(change)) throw refuse('expected an object of labels');
  const next: Labels = { ...current };
  for (const [key, value] of Object.entries(change)) {
    const checked = LabelKey.safeParse(key);
    if (!checked.success) throw refuse(`${key}: ${checked.error.issues[0]!.message}`);
    if (value === null) delete next[key];
    else if (typeof value === 'number' && Number.isFinite(value)) next[key] = value;
    else if (typeof value === 'string' && value.length <= LABEL_LIMITS.valueLength) next[key] = value;
    else {
      const shown = typeof value === 'number' ? String(value) : (JSON.stringify(value)?.slice(0, 40) ?? String(value));
      throw refuse(`${key}: ${VALUE_RULE}, not ${shown}`);
    }
  }
  if (Object.keys(next).length > LABEL_LIMITS.count) throw refuse(`at most ${LABEL_LIMITS.count} labels`);
  return next;
}
