/**
 * The line diff the edit review shows (linediff.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { diffCounts, IDiffLine, lineDiff, MAX_PAIRS, splitLines } from '../src/linediff';

/** A diff as "  same", "+ added", "- removed" lines. */
function show(lines: IDiffLine[]): string[] {
  const prefix = { same: '  ', added: '+ ', removed: '- ' };
  return lines.map(line => prefix[line.kind] + line.text);
}

/** The old and new sources a diff describes. */
function sides(lines: IDiffLine[]): [string, string] {
  const old = lines.filter(l => l.kind !== 'added').map(l => l.text);
  const now = lines.filter(l => l.kind !== 'removed').map(l => l.text);
  return [old.join('\n'), now.join('\n')];
}

describe('lineDiff', () => {
  test('equal sources: every line kept', () => {
    assert.deepEqual(show(lineDiff('a\nb', 'a\nb')), ['  a', '  b']);
    assert.deepEqual(lineDiff('', ''), []);
  });

  test('a changed line in the middle: removed, then added, the rest kept', () => {
    const lines = lineDiff(
      'import pandas as pd\ndf = load()\ndf.head()',
      'import pandas as pd\ndf = load(cache=True)\ndf.head()'
    );
    assert.deepEqual(show(lines), [
      '  import pandas as pd',
      '- df = load()',
      '+ df = load(cache=True)',
      '  df.head()'
    ]);
    assert.deepEqual(diffCounts(lines), { added: 1, removed: 1 });
  });

  test('lines added and removed around kept ones (the longest common run is kept)', () => {
    const lines = lineDiff('a\nx\nb\nc', 'a\nb\ny\nc\nd');
    assert.deepEqual(show(lines), ['  a', '- x', '  b', '+ y', '  c', '+ d']);
  });

  test('from and to an empty source', () => {
    assert.deepEqual(show(lineDiff('', 'x = 1\ny = 2')), ['+ x = 1', '+ y = 2']);
    assert.deepEqual(show(lineDiff('x = 1', '')), ['- x = 1']);
    assert.deepEqual(splitLines(''), []);
  });

  test('a trailing newline is a line of its own', () => {
    assert.deepEqual(show(lineDiff('a', 'a\n')), ['  a', '+ ']);
  });

  test('every diff gives back both sources exactly', () => {
    const cases: [string, string][] = [
      ['a\nb\nc\nd\ne', 'e\nd\nc\nb\na'],
      ['x\n\n\ny', '\nx\ny\n'],
      ['same\nsame\nsame', 'same\nother\nsame'],
      ['for i in range(3):\n    print(i)\n', 'for i in range(3):\n    print(i * 2)\n']
    ];
    for (const [a, b] of cases) {
      assert.deepEqual(sides(lineDiff(a, b)), [a, b], `${a} -> ${b}`);
    }
  });

  test('too large a middle is shown removed then added, still exact', () => {
    const n = Math.ceil(Math.sqrt(MAX_PAIRS)) + 1;
    const a = Array.from({ length: n }, (_, i) => `a${i}`).join('\n');
    const b = Array.from({ length: n }, (_, i) => `b${i}`).join('\n');
    const lines = lineDiff(`head\n${a}\ntail`, `head\n${b}\ntail`);
    assert.equal(lines[0].kind, 'same');
    assert.equal(lines[1].kind, 'removed');
    assert.equal(lines[n + 1].kind, 'added');
    assert.deepEqual(diffCounts(lines), { added: n, removed: n });
    assert.deepEqual(sides(lines), [`head\n${a}\ntail`, `head\n${b}\ntail`]);
  });
});
