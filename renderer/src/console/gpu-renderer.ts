// The GPU renderer of a shown console (@xterm/addon-webgl), where the GPU is a real one. Otherwise xterm.js draws with
// DOM elements: each frame of a flood is then Blink's style, layout and paint of every row, 4 to 5 ms of the page's
// main thread that the parser does not get; with WebGL the main thread's part of a frame measured about 2 ms. But a
// software WebGL (SwiftShader, what Chromium uses without a GPU, headless included; Mesa's llvmpipe) makes each frame
// wait for its rasterizer: in the headless Chromium of `smol bench ui` the page parsed 2 MiB/s with WebGL, with frames
// of 150 ms, against 10 MiB/s and 33 ms with the DOM. So WebGL is used only when the page's WebGL is not a software
// one, and a console whose WebGL context is lost goes back to the DOM renderer.
import { WebglAddon } from '@xterm/addon-webgl';
import type { IDisposable, Terminal } from '@xterm/xterm';

const SOFTWARE_RENDERER = /swiftshader|llvmpipe|softpipe|software|basic render/i;

/** Whether a WebGL renderer string (WEBGL_debug_renderer_info) names a software rasterizer. */
export function isSoftwareRenderer(renderer: string): boolean {
  return SOFTWARE_RENDERER.test(renderer);
}

let hardware: boolean | undefined;

/** Whether this page's WebGL 2 runs on a GPU: asked once, of a probe context released at once. */
function hardwareWebgl(): boolean {
  if (hardware !== undefined) return hardware;
  hardware = false;
  try {
    const gl = document.createElement('canvas').getContext('webgl2');
    if (gl) {
      const info = gl.getExtension('WEBGL_debug_renderer_info');
      hardware = !isSoftwareRenderer(String(gl.getParameter(info ? info.UNMASKED_RENDERER_WEBGL : gl.RENDERER)));
      gl.getExtension('WEBGL_lose_context')?.loseContext();
    }
  } catch {
    hardware = false;
  }
  return hardware;
}

/**
 * Draws `terminal` (opened, and in the page) with WebGL until the result is disposed, then with the DOM again; null
 * where WebGL is a software one or does not start. A page has a limited number of WebGL contexts, so a console holds
 * one only while it is shown.
 */
export function gpuRenderer(terminal: Terminal): IDisposable | null {
  if (!hardwareWebgl()) return null;
  const addon = new WebglAddon();
  try {
    terminal.loadAddon(addon);
  } catch {
    addon.dispose();
    return null;
  }
  addon.onContextLoss(() => addon.dispose());
  return addon;
}
