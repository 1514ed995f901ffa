// Builds the renderer (React) into dist/renderer: what `smol serve` serves at / and the Electron shell loads.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  root: here,
  base: './',
  plugins: [react()],
  build: {
    outDir: path.join(here, '..', 'dist', 'renderer'),
    emptyOutDir: true,
    // Nothing inline: the engine's CSP allows scripts only from its own origin.
    assetsInlineLimit: 0,
    sourcemap: true,
    chunkSizeWarningLimit: 2048,
  },
});
