import { describe, expect, it } from 'vitest';
import { isSoftwareRenderer } from './gpu-renderer.js';

describe('the console draws with WebGL only on a real GPU', () => {
  it('tells software WebGL from a GPU by the renderer it names', () => {
    for (const software of [
      // headless Chromium without a GPU, as `smol bench ui` and the end-to-end tests run it
      'ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device (Subzero) (0x0000C0DE)), SwiftShader driver)',
      'ANGLE (Mesa, llvmpipe (LLVM 15.0.6, 256 bits), OpenGL 4.5)',
      'ANGLE (Microsoft, Microsoft Basic Render Driver Direct3D11 vs_5_0 ps_5_0, D3D11)',
    ]) {
      expect(isSoftwareRenderer(software), software).toBe(true);
    }
    for (const gpu of [
      'ANGLE (NVIDIA, NVIDIA GeForce RTX 3060 (0x00002504) Direct3D11 vs_5_0 ps_5_0, D3D11)',
      'ANGLE (Intel, Mesa Intel(R) UHD Graphics 620 (KBL GT2), OpenGL 4.6)',
      'ANGLE (AMD, AMD Radeon RX 6800 XT (radeonsi, navi21, LLVM 15.0.6, DRM 3.49), OpenGL 4.6)',
      'ANGLE (Apple, ANGLE Metal Renderer: Apple M1, Unspecified Version)',
    ]) {
      expect(isSoftwareRenderer(gpu), gpu).toBe(false);
    }
  });
});
