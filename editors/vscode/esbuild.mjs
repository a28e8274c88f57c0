// Bundles the extension (dist/extension.js, what the .vsix ships) or, with --tests, each test file with the
// stub `vscode` module in place of the real one (out/test/*.test.js, run by `node --test`).
import { build } from 'esbuild';
import { readdirSync } from 'node:fs';

const tests = process.argv.includes('--tests');
const common = { bundle: true, platform: 'node', format: 'cjs', target: 'node18', logLevel: 'warning' };

if (tests) {
  await build({
    ...common,
    entryPoints: readdirSync('test')
      .filter((f) => f.endsWith('.test.ts'))
      .map((f) => `test/${f}`),
    outdir: 'out/test',
    alias: { vscode: './test/vscode-stub.ts' },
    sourcemap: 'inline',
  });
} else {
  await build({
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'dist/extension.js',
    external: ['vscode'],
    minify: process.argv.includes('--minify'),
  });
}
