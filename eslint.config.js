import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'native/', 'build/', 'node_modules/', 'coverage/', 'test-results/', 'artifacts/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: globals.node },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // The renderer runs in a browser (its Vite config and tests in Node).
  { files: ['renderer/src/**/*.{ts,tsx}'], languageOptions: { globals: globals.browser } },
  // The layers (docs/layout.md). The engine, API, CLI and SDK run in plain Node: they never import Electron, nor
  // the Electron shell's files.
  {
    files: ['src/**/*.ts', 'sdk/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '^electron(/|$)', message: 'the engine, API, CLI and SDK run in plain Node: no Electron here' },
            { regex: '(^|/)electron/(main|preload)/', message: 'the engine, API, CLI and SDK never import the shell' },
          ],
        },
      ],
    },
  },
  // The renderer talks to the engine only through the API's schema and operations (src/api/schema.ts,
  // operations.ts: browser-safe) and the desktop bridge's types (electron/preload/bridge-types.ts), never their code.
  {
    files: ['renderer/src/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(src|sdk|electron)/(?!api/(schema|operations)(\\.js)?$|preload/bridge-types(\\.js)?$)',
              message:
                'outside renderer/, the renderer imports only src/api/schema.js, src/api/operations.js and electron/preload/bridge-types.js',
            },
            {
              regex: '^(electron|node:.*)$',
              message: 'the renderer runs in a browser page: no Electron or Node modules',
            },
          ],
        },
      ],
    },
  },
);
