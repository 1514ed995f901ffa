import { describe, expect, it } from 'vitest';
import { DEFAULT_SIZE, restoreWindowState, serializeWindowState } from './window-state.js';

const screen = [{ x: 0, y: 0, width: 1920, height: 1080 }];

describe('the window reopens where it was', () => {
  it('round-trips its bounds and maximized state', () => {
    const text = serializeWindowState({ x: 100.4, y: 50, width: 1000, height: 700 }, true);
    expect(restoreWindowState(text, screen)).toEqual({
      bounds: { x: 100, y: 50, width: 1000, height: 700 },
      maximized: true,
    });
  });

  it('opens with the default size when nothing was saved', () => {
    expect(restoreWindowState(null, screen)).toEqual({ bounds: DEFAULT_SIZE, maximized: false });
    expect(restoreWindowState(null, [{ x: 0, y: 0, width: 1024, height: 600 }]).bounds).toEqual({
      width: 1024,
      height: 600,
    });
  });

  it('ignores a damaged or hostile file and says why', () => {
    for (const text of [
      '{',
      '[]',
      '{"x":0,"y":0,"width":1e9,"height":700}',
      '{"x":"0","y":0,"width":900,"height":700}',
    ]) {
      const restored = restoreWindowState(text, screen);
      expect(restored.bounds, text).toEqual(DEFAULT_SIZE);
      expect(restored.ignored, text).toBeTruthy();
    }
  });

  it('does not open off every screen after a monitor was unplugged', () => {
    const text = serializeWindowState({ x: 2500, y: 100, width: 1000, height: 700 }, false);
    expect(restoreWindowState(text, screen)).toMatchObject({ bounds: DEFAULT_SIZE, ignored: /off every screen/ });
    const second = [...screen, { x: 1920, y: 0, width: 1920, height: 1080 }];
    expect(restoreWindowState(text, second).bounds).toEqual({ x: 2500, y: 100, width: 1000, height: 700 });
  });
});
