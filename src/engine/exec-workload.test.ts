// The defaults every exec in an episode gets: the workload's env, workdir and user under what the request says.
import { describe, expect, it } from 'vitest';
import type { EpisodeRecord } from './episode-registry.js';
import { episodeWorkload, withWorkload } from './exec-workload.js';

const workload = { entrypoint: [], cmd: [], env: { A: 'image', B: 'image' }, workdir: '/app', user: 'app' };

describe('exec defaults', () => {
  it("fill in env per name, the workdir and the user; the request's own win", () => {
    expect(withWorkload({ argv: ['id'] }, workload)).toEqual({
      argv: ['id'],
      env: { A: 'image', B: 'image' },
      cwd: '/app',
      user: 'app',
    });
    expect(withWorkload({ argv: ['id'], env: { B: 'asked', C: 'asked' }, cwd: '/tmp', user: '0' }, workload)).toEqual({
      argv: ['id'],
      env: { A: 'image', B: 'asked', C: 'asked' },
      cwd: '/tmp',
      user: '0',
    });
  });

  it('leave a request alone when the workload sets nothing, or there is none', () => {
    const empty = { entrypoint: [], cmd: [], env: {}, workdir: null, user: null };
    expect(withWorkload({ argv: ['id'], timeoutMs: 5 }, empty)).toEqual({ argv: ['id'], timeoutMs: 5 });
    expect(withWorkload({ argv: ['id'] }, null)).toEqual({ argv: ['id'] });
  });

  it("come from the episode's Smolfile (builtin image: no image config)", () => {
    const episode = {
      smolfile: {
        path: '/x/Smolfile',
        text: 'image = "builtin"\nuser = "1000:1000"\nworkdir = "/work"\nenv = ["MODE=test"]\n',
      },
    } as unknown as EpisodeRecord;
    expect(episodeWorkload(episode)).toMatchObject({ env: { MODE: 'test' }, workdir: '/work', user: '1000:1000' });
    const broken = { smolfile: { path: '/x/Smolfile', text: 'image = 7\n' } } as unknown as EpisodeRecord;
    expect(episodeWorkload(broken)).toBeNull();
  });
});
