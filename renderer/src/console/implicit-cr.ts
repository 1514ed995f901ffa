// Whether a VM's console takes every LF as CR LF (xterm's convertEol): a bare serial guest's, which prints bare LFs
// (bootsBareKernel, src/api/schema.ts). The engine's screen of it does the same, so the live console, the screen a
// viewer attaches to, the replay and a snapshot's last screen all agree; a Linux guest's tty sends CR LF itself and
// its consoles take the bytes as they are.
import { bootsBareKernel } from '../../../src/api/schema.js';
import { useAppState } from '../app-context.js';

export function useImplicitCr(vmId: string | null): boolean {
  return useAppState((s) => {
    const episode = vmId ? s.engine.episodes[s.engine.vms[vmId]?.episode ?? ''] : undefined;
    return episode ? bootsBareKernel(episode.smolfile.text) : false;
  });
}
