/**
 * The notebook's cells sent with an ask (`jupyter_ci_frontend.cells`): code cells but
 * `%%ask` cells, each with its error, bounded in number and size.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type * as nbformat from '@jupyterlab/nbformat';

import {
  cutMarker,
  errorOfOutputs,
  fixPrompt,
  ICellRead,
  MAX_CELL_CHARS,
  MAX_SENT_CELLS,
  sentCells
} from '../src/notebookcontext';

function cell(
  id: string,
  source: string,
  cellType = 'code',
  error: string | null = null
): ICellRead {
  return { id, cellType, source, error };
}

describe('sentCells', () => {
  test('sends code cells with their error, not %%ask cells or markdown', () => {
    const cells = [
      cell('a', 'import pandas as pd'),
      cell('m', '# Notes', 'markdown'),
      cell('b', 'df = pd.read_csv("x.csv")', 'code', 'FileNotFoundError: x.csv'),
      cell('k', '%%ask\nfix it'),
      cell('c', 'df.head()')
    ];
    assert.deepEqual(sentCells(cells, 3), [
      { id: 'a', source: 'import pandas as pd' },
      { id: 'b', source: 'df = pd.read_csv("x.csv")', error: 'FileNotFoundError: x.csv' },
      { id: 'c', source: 'df.head()' }
    ]);
  });

  test('cuts a long source, with a marker saying how much', () => {
    const long = 'x'.repeat(MAX_CELL_CHARS + 5);
    const [sent] = sentCells([cell('a', long)], 1);
    assert.equal(sent.source, 'x'.repeat(MAX_CELL_CHARS) + cutMarker(5));
    assert.match(sent.source, /5 more characters/);
  });

  test('sends at most MAX_SENT_CELLS cells, the nearest to the ask, in notebook order', () => {
    const cells = Array.from({ length: 250 }, (_, i) => cell(`c${i}`, `x = ${i}`));
    const sent = sentCells(cells, 200);
    assert.equal(sent.length, MAX_SENT_CELLS);
    const ids = sent.map(s => Number(s.id.slice(1)));
    assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
    assert.ok(ids.includes(199) && ids.includes(200) && !ids.includes(0));
  });
});

describe('errors', () => {
  test('the last error output, as "ename: evalue"', () => {
    const outputs = [
      { output_type: 'stream', name: 'stdout', text: 'hi' },
      { output_type: 'error', ename: 'ValueError', evalue: 'bad', traceback: [] },
      { output_type: 'error', ename: 'KeyError', evalue: "'x'", traceback: [] }
    ] as nbformat.IOutput[];
    assert.equal(errorOfOutputs(outputs), "KeyError: 'x'");
    assert.equal(errorOfOutputs([]), null);
  });

  test('the fix prompt names the cell', () => {
    assert.equal(fixPrompt('abc-1'), 'Fix the error in the cell above (cell abc-1).');
  });
});
