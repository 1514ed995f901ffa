// The window's size and place, remembered in window-state.json in the app's user-data dir. The file is input
// like any other: a value that does not parse, or a window that would open off every screen (a monitor was
// unplugged), falls back to a centred default instead of trusting it.
import { z } from 'zod';

export interface WindowBounds {
  x?: number;
  y?: number;
  width: number;
  height: number;
}

export interface Area {
  x: number;
  y: number;
  width: number;
  height: number;
}

const Int = z.number().int().min(-100_000).max(100_000);
export const WindowStateFile = z.object({
  x: Int,
  y: Int,
  width: z.number().int().min(200).max(20_000),
  height: z.number().int().min(200).max(20_000),
  maximized: z.boolean().default(false),
});
export type WindowState = z.infer<typeof WindowStateFile>;

export const DEFAULT_SIZE = { width: 1280, height: 820 };
/** How much of the window's title bar must lie on a screen for the saved place to count. */
const VISIBLE_MIN = 64;

export interface Restored {
  bounds: WindowBounds;
  maximized: boolean;
  /** Why the saved state was not used, when it was not. */
  ignored?: string;
}

/** The bounds to open with, from the saved file's text (null: none saved) and the screens' work areas. */
export function restoreWindowState(text: string | null, workAreas: Area[]): Restored {
  const fallback = (ignored?: string): Restored => {
    const area = workAreas[0];
    const width = Math.min(DEFAULT_SIZE.width, area?.width ?? DEFAULT_SIZE.width);
    const height = Math.min(DEFAULT_SIZE.height, area?.height ?? DEFAULT_SIZE.height);
    return { bounds: { width, height }, maximized: false, ...(ignored ? { ignored } : {}) };
  };
  if (text === null) return fallback();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fallback('window-state.json is not JSON');
  }
  const parsed = WindowStateFile.safeParse(json);
  if (!parsed.success) return fallback(`window-state.json: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  const { x, y, width, height, maximized } = parsed.data;
  const titleBarShows = workAreas.some(
    (a) => Math.min(x + width, a.x + a.width) - Math.max(x, a.x) >= VISIBLE_MIN && y >= a.y && y < a.y + a.height - 32,
  );
  if (!titleBarShows) return fallback('the saved window would open off every screen');
  return { bounds: { x, y, width, height }, maximized };
}

/** The file's text for the window's normal (not maximized) bounds. */
export function serializeWindowState(bounds: Area, maximized: boolean): string {
  const round = (n: number) => Math.round(n);
  return `${JSON.stringify({
    x: round(bounds.x),
    y: round(bounds.y),
    width: round(bounds.width),
    height: round(bounds.height),
    maximized,
  })}\n`;
}
