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
);
