/**
 * Every module in src stays small, as the Python package's do (tests/test_house_rules.py):
 * fewer than MAX_LINES lines.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

/** A module spans fewer lines than this. */
export const MAX_LINES = 400;

// lib-test/test/ -> labextension/src/.
const SRC = join(__dirname, '..', '..', 'src');

/** The modules of `files` (name, text) that span MAX_LINES lines or more. */
export function longModules(files: ReadonlyArray<[string, string]>): string[] {
  return files
    .map(([name, text]) => [name, text.split('\n').length - (text.endsWith('\n') ? 1 : 0)] as const)
    .filter(([, lines]) => lines >= MAX_LINES)
    .map(([name, lines]) => `${name}: ${lines} lines`);
}

describe('module size', () => {
  test(`every module in src is under ${MAX_LINES} lines`, () => {
    const names = readdirSync(SRC).filter(name => /\.tsx?$/.test(name) && !name.endsWith('.d.ts'));
    assert.ok(names.length > 10, `no sources found in ${SRC}`);
    const files = names.map(name => [name, readFileSync(join(SRC, name), 'utf-8')] as [string, string]);
    assert.deepEqual(longModules(files), []);
  });

  test('the check counts lines as wc -l does, and names each module too long', () => {
    const lines = (n: number): string => 'x;\n'.repeat(n);
    assert.deepEqual(
      longModules([
        ['short.ts', lines(MAX_LINES - 1)],
        ['limit.ts', lines(MAX_LINES)],
        ['unterminated.tsx', lines(MAX_LINES) + 'y;']
      ]),
      [`limit.ts: ${MAX_LINES} lines`, `unterminated.tsx: ${MAX_LINES + 1} lines`]
    );
  });
});
