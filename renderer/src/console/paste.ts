// Typing into a serial console: a guest's 16550 UART has a 16-byte FIFO, and a large paste sent at once overruns
// it, so text longer than a chunk goes out in chunks with a pause between them (ui-anchors.md, C).
export const PASTE_CHUNK = 1024;
export const PASTE_PAUSE_MS = 15;

/** A writer that sends short input at once and long input in order, chunk by chunk. Returns the cancel. */
export function chunkedWriter(write: (data: string) => void, chunk = PASTE_CHUNK, pauseMs = PASTE_PAUSE_MS) {
  const queue: string[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  const pump = () => {
    timer = undefined;
    const next = queue.shift();
    if (next === undefined) return;
    write(next);
    if (queue.length) timer = setTimeout(pump, pauseMs);
  };
  return {
    write(data: string) {
      // Split on code points, never inside a surrogate pair.
      const points = Array.from(data);
      for (let i = 0; i < points.length; i += chunk) queue.push(points.slice(i, i + chunk).join(''));
      if (timer === undefined) pump();
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
      queue.length = 0;
    },
  };
}
