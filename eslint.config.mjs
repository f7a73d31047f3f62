// @ts-check
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'integration/.kafka/**',
      'integration/.test_output/**',
      'bench/node_modules/**',
      'fast-binding/dist/**',
      'docs/api/**',
    ],
  },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'describe', property: 'only', message: 'No .only in committed tests.' },
        { object: 'it', property: 'only', message: 'No .only in committed tests.' },
        { object: 'describe', property: 'skip', message: 'No skipped tests.' },
        { object: 'it', property: 'skip', message: 'No skipped tests.' },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.cjs', '**/*.js'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
      },
    },
  },
  prettier,
);
