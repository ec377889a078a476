/**
 * The `%%ask` cell the panel inserts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { askSource, wrapLines } from '../src/asksource';

describe('askSource', () => {
  test('wraps a long prompt over several lines at spaces, keeping every word', () => {
    const prompt = 'plot the monthly revenue by region as stacked bars '.repeat(5).trim();
    const source = askSource(prompt, 'openai:gpt-4.1');
    const lines = source.split('\n');
    assert.equal(lines[0], '%%ask -m openai:gpt-4.1');
    assert.ok(lines.length > 3);
    assert.ok(lines.slice(1).every(line => line.length <= 88));
    assert.equal(lines.slice(1).join(' '), prompt);
  });

  test('keeps the lines the user broke and a word longer than a line', () => {
    const long = 'x'.repeat(100);
    assert.equal(wrapLines(`short\n${long} y`), `short\n${long}\ny`);
  });
});
