// SMOL_HOME/episodes/<ep-id>.json: each episode and its VMs, as the engine last saved them (docs/engine.md,
// "Snapshot store"). The engine owns the record's shape; this file only keeps it safe on disk.
import { readFileSync, readdirSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { EpisodeId } from '../api/schema.js';
import { isAtomicTempFile, moveAside, writeFileAtomic } from './atomic-file.js';

const RECORD_FILE = /^(ep-[a-z2-7]{10})\.json$/;

export class EpisodeRecords {
  /** The last write or removal asked for each episode: the next one waits for it, so the newest call wins. */
  readonly #pending = new Map<string, Promise<void>>();

  constructor(
    readonly dir: string,
    private readonly log: (line: string) => void,
  ) {}

  /** Creates the directory and removes the temporaries of writes a crash interrupted. */
  async recover(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (const name of (await readdir(this.dir)).filter(isAtomicTempFile)) {
      await rm(path.join(this.dir, name), { force: true });
      this.log(`store: removed episodes/${name} : an unfinished write`);
    }
  }

  async save(id: string, record: unknown): Promise<void> {
    const file = this.#file(id);
    const text = JSON.stringify(record, null, 2) + '\n'; // now: later changes to `record` belong to a later save
    return this.#inTurn(id, () => writeFileAtomic(file, text));
  }

  async remove(id: string): Promise<void> {
    const file = this.#file(id);
    return this.#inTurn(id, () => rm(file, { force: true }));
  }

  /** Every record that reads as JSON; one that does not is moved aside to `<id>.json.corrupt` and logged. */
  load(): Array<{ id: string; record: unknown }> {
    const records: Array<{ id: string; record: unknown }> = [];
    for (const name of readdirSync(this.dir).sort()) {
      const id = RECORD_FILE.exec(name)?.[1];
      if (!id) continue;
      const file = path.join(this.dir, name);
      try {
        records.push({ id, record: JSON.parse(readFileSync(file, 'utf8')) });
      } catch (error) {
        const target = moveAside(file);
        this.log(`store: moved episode ${id} aside to ${path.basename(target)} : ${(error as Error).message}`);
      }
    }
    return records;
  }

  #file(id: string): string {
    if (!EpisodeId.safeParse(id).success) throw new Error(`not an episode id: ${JSON.stringify(id)}`);
    return path.join(this.dir, `${id}.json`);
  }

  #inTurn(id: string, work: () => Promise<void>): Promise<void> {
    const done = (this.#pending.get(id) ?? Promise.resolve()).catch(() => undefined).then(work);
    const settled = done.catch(() => undefined);
    this.#pending.set(id, settled);
    void settled.then(() => {
      if (this.#pending.get(id) === settled) this.#pending.delete(id);
    });
    return done;
  }
}
